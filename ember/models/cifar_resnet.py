"""ResNets for 32x32 images: He et al.'s CIFAR ResNet-20 and ResNet-18 with a CIFAR stem.

resnet20 follows section 4.2 of "Deep Residual Learning for Image Recognition" (2016): a 3x3 conv to
16 channels, three stages of 3 basic blocks at 16/32/64 channels (the first block of stages 2 and 3
halves the resolution), global average pooling and a linear head. Shortcuts are option A by default
(parameter-free: identity, or stride-2 subsampling with zero-padded extra channels), as the paper used
for CIFAR, giving 269,722 parameters for 10 classes; shortcut="B" uses 1x1 conv + BN projections.
"""

from __future__ import annotations

from ember import nn
from ember.models.resnet import BasicBlock, ResNet, conv3x3, init_resnet_weights
from ember.nn import functional as F
from ember.tensor import Tensor


class PadShortcut(nn.Module):
    """Option-A shortcut: subsample by `stride` and zero-pad the channels up to `out_channels`."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        extra = out_channels - in_channels
        self.pad = (extra // 2, extra - extra // 2)

    def forward(self, x: Tensor) -> Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad[0], self.pad[1]))

    def extra_repr(self) -> str:
        return f"stride={self.stride}, pad={self.pad}"


class CifarBasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with a residual connection; shortcut option A (padding) or B (projection)."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1, shortcut: str = "A") -> None:
        super().__init__()
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module
        if stride == 1 and in_planes == planes:
            self.shortcut = nn.Identity()
        elif shortcut == "A":
            self.shortcut = PadShortcut(in_planes, planes, stride)
        else:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """The 6n+2-layer CIFAR ResNet: stem, three stages of n blocks (16/32/64 channels), pool, linear."""

    def __init__(self, num_blocks: tuple[int, int, int] = (3, 3, 3), num_classes: int = 10, in_channels: int = 3,
                 shortcut: str = "A") -> None:
        super().__init__()
        if shortcut not in ("A", "B"):
            raise ValueError(f"shortcut must be 'A' (zero-padding) or 'B' (projection), got {shortcut!r}")
        self.conv1 = conv3x3(in_channels, 16)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        in_planes = 16
        stages = []
        for i, (planes, n) in enumerate(zip((16, 32, 64), num_blocks)):
            blocks = []
            for j in range(n):
                blocks.append(CifarBasicBlock(in_planes, planes, 2 if (i > 0 and j == 0) else 1, shortcut))
                in_planes = planes
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(64, num_classes)
        init_resnet_weights(self)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(self.flatten(self.avgpool(x)))


def resnet20(num_classes: int = 10, in_channels: int = 3, shortcut: str = "A") -> CifarResNet:
    """ResNet-20 for CIFAR-10 (He et al. 2016); option-A shortcuts by default (269,722 parameters)."""
    return CifarResNet((3, 3, 3), num_classes, in_channels, shortcut)


def resnet18_cifar(num_classes: int = 10, in_channels: int = 3) -> ResNet:
    """torchvision's ResNet-18 with a 3x3 stride-1 stem and no max-pool, for 32x32 input (11,173,962 params)."""
    model = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes)
    # Same state-dict keys as resnet18 (only conv1's shape differs): the 7x7/2 stem and the max-pool
    # would shrink a 32x32 image to 8x8 before the first stage.
    model.conv1 = conv3x3(in_channels, 64)
    model.maxpool = nn.Identity()
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model
