"""VGG 11/16/19, with and without batch norm, as in torchvision: same layers, names and initialisation."""

from __future__ import annotations

from ember import nn, ops
from ember.tensor import Tensor

# Channel counts per conv layer; "M" is a 2x2 max-pool (configurations A, D and E of the paper).
CFGS: dict[str, list] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    """VGG classifier over a conv feature extractor; state-dict keys match torchvision.models.VGG."""

    def __init__(self, features: nn.Module, num_classes: int = 1000, init_weights: bool = True,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = ops.flatten(x, 1)
        return self.classifier(x)


def make_layers(cfg: list, batch_norm: bool = False) -> nn.Sequential:
    """The conv/(bn)/relu/pool stack for one configuration."""
    layers: list[nn.Module] = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            conv = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            layers += [conv, nn.BatchNorm2d(v), nn.ReLU(inplace=True)] if batch_norm else [conv, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


def _vgg(cfg: str, batch_norm: bool, num_classes: int, dropout: float, init_weights: bool) -> VGG:
    return VGG(make_layers(CFGS[cfg], batch_norm), num_classes=num_classes, init_weights=init_weights,
               dropout=dropout)


def vgg11(num_classes: int = 1000, dropout: float = 0.5, init_weights: bool = True) -> VGG:
    """VGG-11, configuration A (132,863,336 parameters)."""
    return _vgg("A", False, num_classes, dropout, init_weights)


def vgg11_bn(num_classes: int = 1000, dropout: float = 0.5, init_weights: bool = True) -> VGG:
    """VGG-11 with batch norm (132,868,840 parameters)."""
    return _vgg("A", True, num_classes, dropout, init_weights)


def vgg16(num_classes: int = 1000, dropout: float = 0.5, init_weights: bool = True) -> VGG:
    """VGG-16, configuration D (138,357,544 parameters)."""
    return _vgg("D", False, num_classes, dropout, init_weights)


def vgg16_bn(num_classes: int = 1000, dropout: float = 0.5, init_weights: bool = True) -> VGG:
    """VGG-16 with batch norm (138,365,992 parameters)."""
    return _vgg("D", True, num_classes, dropout, init_weights)


def vgg19(num_classes: int = 1000, dropout: float = 0.5, init_weights: bool = True) -> VGG:
    """VGG-19, configuration E (143,667,240 parameters)."""
    return _vgg("E", False, num_classes, dropout, init_weights)


def vgg19_bn(num_classes: int = 1000, dropout: float = 0.5, init_weights: bool = True) -> VGG:
    """VGG-19 with batch norm (143,678,248 parameters)."""
    return _vgg("E", True, num_classes, dropout, init_weights)
