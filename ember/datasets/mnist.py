"""MNIST and Fashion-MNIST read from the standard IDX files (gzipped or not)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ember.creation import from_numpy
from ember.datasets.idx import read_idx
from ember.datasets.labelled import LabelledImages
from ember.datasets.root import find, missing_files_error, resolve_root

MNIST_FILES = {
    True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_mnist_arrays(folders: list[Path], train: bool) -> tuple[np.ndarray, np.ndarray] | list[str]:
    """(images uint8 (N, 28, 28), labels int64 (N,)) from the first folder that has them, else the missing names."""
    names = MNIST_FILES[train]
    paths = [find(folders, n, gz=True) for n in names]
    missing = [f"{n}[.gz]" for n, p in zip(names, paths) if p is None]
    if missing:
        return missing
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"{paths[0]}: expected uint8 images of shape (N, H, W), got {images.dtype} {images.shape}")
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(f"{paths[1]}: expected {len(images)} labels to match {paths[0].name}, got shape {labels.shape}")
    return images, labels.astype(np.int64)


class MNIST(LabelledImages):
    """The MNIST digits: samples are (image, label) with image an (H, W) uint8 NumPy array and label an int.

    Files are read from `root` (default `$EMBER_DATA/mnist`, else `~/.ember/data/mnist`), or from
    `root/MNIST/raw` as torchvision lays them out. `data` and `targets` hold all images and labels as
    tensors. Nothing is downloaded: `download` is accepted for compatibility only.
    """

    folder_name = "mnist"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
               "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"]
    hint = "fetch the four MNIST IDX files (gzipped or not)"

    def __init__(self, root: str | os.PathLike | None = None, train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        self.root = resolve_root(root, self.folder_name)
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        folders = [self.root, self.root / type(self).__name__ / "raw", self.root / "raw"]
        found = read_mnist_arrays(folders, train)
        if isinstance(found, list):
            raise missing_files_error(type(self).__name__, self.root, found, self.hint, self.folder_name)
        self._images, self._labels = found
        self.data = from_numpy(self._images)
        self.targets = from_numpy(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def _raw(self, index: int) -> tuple[Any, Any]:
        return self._images[index], int(self._labels[index])



class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: the same IDX files and layout as MNIST, ten kinds of clothing."""

    folder_name = "fashion-mnist"
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
    hint = "fetch the four Fashion-MNIST IDX files (gzipped or not)"
