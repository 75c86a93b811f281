"""CIFAR-10 read from the official binary version (`cifar-10-batches-bin`), never from pickles."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ember.datasets.labelled import LabelledImages
from ember.datasets.root import find, missing_files_error, resolve_root

RECORD = 1 + 3 * 32 * 32  # one label byte, then 1024 red, 1024 green and 1024 blue bytes, row-major
TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TEST_FILES = ["test_batch.bin"]


def read_cifar_binary(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 32, 32, 3), labels int64 (N,)) from one CIFAR-10 binary batch file."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % RECORD:
        raise ValueError(f"{os.fspath(path)}: not a CIFAR-10 binary batch: {raw.size} bytes is not a positive "
                         f"multiple of the {RECORD}-byte record")
    records = raw.reshape(-1, RECORD)
    labels = records[:, 0].astype(np.int64)
    if labels.max() > 9:
        raise ValueError(f"{os.fspath(path)}: labels must be 0..9, found {int(labels.max())}")
    images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def write_cifar_binary(path: str | os.PathLike, images: np.ndarray, labels: np.ndarray) -> None:
    """Write (N, 32, 32, 3) uint8 images and their labels as a CIFAR-10 binary batch file."""
    images = np.asarray(images, dtype=np.uint8)
    labels = np.asarray(labels)
    if images.ndim != 4 or images.shape[1:] != (32, 32, 3) or len(labels) != len(images):
        raise ValueError(f"write_cifar_binary: expected (N, 32, 32, 3) images and N labels, "
                         f"got {images.shape} and {labels.shape}")
    records = np.empty((len(images), RECORD), np.uint8)
    records[:, 0] = labels
    records[:, 1:] = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    records.tofile(path)


class CIFAR10(LabelledImages):
    """CIFAR-10: samples are (image, label) with image a (32, 32, 3) uint8 NumPy array and label an int.

    Reads `cifar-10-batches-bin/data_batch_{1..5}.bin` (train) or `test_batch.bin` from `root`
    (default `$EMBER_DATA/cifar10`, else `~/.ember/data/cifar10`); the files may also sit in `root`
    itself. `data` is the (N, 32, 32, 3) uint8 array and `targets` the list of labels, as in torchvision.
    """

    folder_name = "cifar10"
    base_folder = "cifar-10-batches-bin"
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

    def __init__(self, root: str | os.PathLike | None = None, train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        self.root = resolve_root(root, self.folder_name)
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        names = TRAIN_FILES if train else TEST_FILES
        folders = [self.root / self.base_folder, self.root]
        paths = [find(folders, n, gz=False) for n in names]
        missing = [n for n, p in zip(names, paths) if p is None]
        if missing:
            raise missing_files_error(
                "CIFAR10", self.root / self.base_folder, missing,
                "fetch the CIFAR-10 binary version (cifar-10-binary.tar.gz), unpack it", self.folder_name,
            )
        parts = [read_cifar_binary(p) for p in paths]
        self.data = np.concatenate([p[0] for p in parts])
        self.targets = np.concatenate([p[1] for p in parts]).tolist()

    def __len__(self) -> int:
        return len(self.targets)

    def _raw(self, index: int) -> tuple[Any, Any]:
        return self.data[index], self.targets[index]

