"""Small image classifiers that train in seconds on a CPU: a multilayer perceptron and LeNet-5."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ember import nn
from ember.tensor import Tensor


class MLP(nn.Module):
    """Flatten, then Linear+ReLU per hidden width, then a Linear head (logits)."""

    def __init__(self, in_features: int = 784, hidden: Sequence[int] = (512, 256), num_classes: int = 10,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.in_features = in_features
        self.flatten = nn.Flatten()
        layers: list[nn.Module] = []
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(self.flatten(x))


def mlp(in_features: int = 784, hidden: Sequence[int] = (512, 256), num_classes: int = 10,
        dropout: float = 0.0) -> MLP:
    """A multilayer perceptron over flattened input (784-512-256-10: 535,818 parameters)."""
    return MLP(in_features, tuple(hidden), num_classes, dropout)


def _spatial(input_size: int | Sequence[int]) -> tuple[int, int]:
    """(H, W) from an int or the trailing two entries of a shape such as (C, H, W)."""
    if isinstance(input_size, int):
        return input_size, input_size
    size = tuple(int(s) for s in input_size)
    if len(size) == 1:
        return size[0], size[0]
    return size[-2], size[-1]


class LeNet5(nn.Module):
    """LeNet-5 with ReLU and max-pooling: conv 6@5x5 (pad 2), pool, conv 16@5x5, pool, fc 120, 84, classes.

    The first conv takes `in_channels`; the first linear layer is sized for `input_size`. Inputs smaller
    than 12x12 (e.g. 8x8 digits) give the second conv padding 2 as well, so its output is not empty.
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1,
                 input_size: int | Sequence[int] = (28, 28)) -> None:
        super().__init__()
        h, w = _spatial(input_size)
        pad2 = 0 if min(h, w) >= 12 else 2
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, kernel_size=5, padding=pad2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        fh, fw = ((s // 2 + 2 * pad2 - 4) // 2 for s in (h, w))
        if fh < 1 or fw < 1:
            raise ValueError(f"lenet5: input size {h}x{w} is too small (need at least 4x4)")
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(
            nn.Linear(16 * fh * fw, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.flatten(self.features(x)))


def lenet5(num_classes: int = 10, in_channels: int = 1, input_size: int | Sequence[int] = (28, 28)) -> LeNet5:
    """LeNet-5 (ReLU, max-pool) for 1x28x28 input by default (61,706 parameters)."""
    return LeNet5(num_classes, in_channels, input_size)


def mlp_in_features(input_size: Sequence[int]) -> int:
    """Flattened feature count of one sample of the given shape."""
    return math.prod(int(s) for s in input_size)
