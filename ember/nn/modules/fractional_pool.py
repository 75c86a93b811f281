"""FractionalMaxPool2d and FractionalMaxPool3d: thin modules over F.fractional_max_pool2d/3d."""

from __future__ import annotations

from ember.nn import functional as F
from ember.nn._tuples import _ntuple
from ember.nn.modules.module import Module
from ember.tensor import Tensor


class _FractionalMaxPoolNd(Module):
    dims = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples: Tensor | None = None) -> None:
        super().__init__()
        tuple_of, name = _ntuple(self.dims), type(self).__name__
        self.kernel_size = tuple_of(kernel_size)
        self.return_indices = return_indices
        # a buffer, as in PyTorch: fixed samples (for tests) move and are saved with the module
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tuple_of(output_size) if output_size is not None else None
        self.output_ratio = tuple_of(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor):
        pool = F.fractional_max_pool2d if self.dims == 2 else F.fractional_max_pool3d
        return pool(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                    _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, H, W) or (C, H, W) input to output_size or output_ratio (see
    nn.functional.fractional_max_pool2d)."""

    dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, T, H, W) or (C, T, H, W) input to output_size or output_ratio (see
    nn.functional.fractional_max_pool3d)."""

    dims = 3

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples: Tensor | None = None) -> None:
        if any(k <= 0 for k in _ntuple(3)(kernel_size)):
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size}")
        super().__init__(kernel_size, output_size, output_ratio, return_indices, _random_samples)
