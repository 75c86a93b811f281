"""MobileNetV2 as in torchvision: inverted residual blocks, same names, widths and initialisation."""

from __future__ import annotations

from collections.abc import Callable

from ember import nn, ops
from ember.nn import functional as F
from ember.tensor import Tensor


def _make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    """Round a channel count to a multiple of divisor, never going more than 10% below v."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class Conv2dNormActivation(nn.Sequential):
    """Conv2d (no bias when normalised), a norm layer and an activation: keys `N.0`, `N.1` as in torchvision."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, stride: int = 1, groups: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm2d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU6, dilation: int = 1) -> None:
        padding = (kernel_size - 1) // 2 * dilation
        layers: list[nn.Module] = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                                             dilation=dilation, groups=groups, bias=norm_layer is None)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer(inplace=True))
        super().__init__(*layers)
        self.out_channels = out_channels


class InvertedResidual(nn.Module):
    """1x1 expand (skipped when expand_ratio is 1), 3x3 depthwise, 1x1 linear projection; residual when shapes agree."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        norm_layer = norm_layer or nn.BatchNorm2d
        self.stride = stride
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1, norm_layer=norm_layer))
        layers += [
            Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim, norm_layer=norm_layer),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            norm_layer(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x: Tensor) -> Tensor:
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


# t (expansion), c (channels), n (repeats), s (first stride) for each stage, from the paper.
_DEFAULT_SETTING = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2],
                    [6, 320, 1, 1]]


class MobileNetV2(nn.Module):
    """MobileNetV2 for 3x224x224 input; state-dict keys match torchvision.models.MobileNetV2."""

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 inverted_residual_setting: list[list[int]] | None = None, round_nearest: int = 8,
                 block: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None, dropout: float = 0.2) -> None:
        super().__init__()
        block = block or InvertedResidual
        norm_layer = norm_layer or nn.BatchNorm2d
        setting = inverted_residual_setting or _DEFAULT_SETTING
        if len(setting) == 0 or len(setting[0]) != 4:
            raise ValueError(f"inverted_residual_setting should be non-empty and a list of 4-element lists, "
                             f"got {setting}")
        input_channel = _make_divisible(32 * width_mult, round_nearest)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult), round_nearest)
        features: list[nn.Module] = [
            Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer, activation_layer=nn.ReLU6)
        ]
        for t, c, n, s in setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(block(input_channel, output_channel, s if i == 0 else 1, expand_ratio=t,
                                      norm_layer=norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1,
                                             norm_layer=norm_layer, activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = ops.flatten(x, 1)
        return self.classifier(x)


def mobilenet_v2(num_classes: int = 1000, width_mult: float = 1.0, dropout: float = 0.2,
                 round_nearest: int = 8) -> MobileNetV2:
    """MobileNetV2 (3,504,872 parameters at width 1.0 with 1000 classes)."""
    return MobileNetV2(num_classes=num_classes, width_mult=width_mult, dropout=dropout, round_nearest=round_nearest)
