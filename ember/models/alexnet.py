"""AlexNet as in torchvision (the "one weird trick" variant): same layers, names and parameter count."""

from __future__ import annotations

from ember import nn, ops
from ember.tensor import Tensor


class AlexNet(nn.Module):
    """AlexNet for 3x224x224 input; state-dict keys match torchvision.models.AlexNet."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )
        # torchvision keeps PyTorch's default layer initialisation for AlexNet.

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = ops.flatten(x, 1)
        return self.classifier(x)


def alexnet(num_classes: int = 1000, dropout: float = 0.5) -> AlexNet:
    """AlexNet (61,100,840 parameters with 1000 classes)."""
    return AlexNet(num_classes=num_classes, dropout=dropout)
