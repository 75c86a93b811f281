"""Identity, Linear and Bilinear layers."""

from __future__ import annotations

import math

from ember import creation
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


class Identity(Module):
    """Returns its input unchanged (accepts and ignores any constructor arguments)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x @ weight.T + bias, with weight (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty(out_features, in_features, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform_(a=sqrt(5)) weights, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1^T A x2 + b, with weight (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty(out_features, in1_features, in2_features, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """U(-1/sqrt(in1_features), 1/sqrt(in1_features)) for weight and bias."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
