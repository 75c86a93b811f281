"""Tensor methods PyTorch programs call for what a tensor is (is_cpu, get_device, storage_offset, layout), its
real-number forms of the complex API (real, conj, angle, mH), and forms of other ops (unfold, bernoulli)."""

from __future__ import annotations

import math

import numpy as np

from ember import creation, ops
from ember import dtypes as dt
from ember.errors import ShapeError, fmt_shape
from ember.layout import strided


class QueriesMixin:
    """What a tensor is and the methods that are other ops' forms, of `ember.Tensor`."""

    __slots__ = ()

    # --- where and how it is stored --------------------------------------------------------------
    @property
    def is_cpu(self) -> bool:
        """Whether the tensor is on a CPU device."""
        return self.device.type == "cpu"

    @property
    def layout(self):
        """How the tensor is stored: `ember.strided` (dense), as torch.strided."""
        return strided

    is_sparse = is_quantized = is_nested = is_mkldnn = False

    def get_device(self) -> int:
        """The device index: -1 on the CPU, N on cuda:N."""
        return -1 if self.device.type in ("cpu", "meta") else self.device.index

    def ndimension(self) -> int:
        """The number of dims (`dim()`)."""
        return self.ndim

    def storage_offset(self) -> int:
        """Where this view starts in its base's storage, in elements (0 for a tensor that owns its memory)."""
        data = self._data
        root = data
        while isinstance(getattr(root, "base", None), np.ndarray):
            root = root.base
        if type(data) is not np.ndarray or root is data:
            return 0
        return (data.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // data.itemsize

    def is_inference(self) -> bool:
        """False: inference mode is no_grad here, and makes ordinary tensors."""
        return False

    def pin_memory(self, device=None):
        """This tensor: host memory needs no pinning without a GPU copy engine to serve (a CUDA tensor is refused)."""
        if self.device.type != "cpu":
            raise RuntimeError(f"pin_memory: cannot pin a tensor on {self.device}: only dense CPU tensors can be "
                               "pinned")
        return self

    def is_pinned(self, device=None) -> bool:
        """False: see pin_memory."""
        return False

    def to_dense(self, dtype=None, *, masked_grad=None):
        """This (dense) tensor, in `dtype` when given."""
        return self if dtype is None else self.to(dtype)

    def new(self, *args):
        """Legacy `Tensor.new`: new(data) as new_tensor, new(*sizes) an uninitialised tensor of this dtype and device."""
        if len(args) == 1 and not isinstance(args[0], int):
            return self.new_tensor(args[0])
        return self.new_empty(args[0] if len(args) == 1 and isinstance(args[0], tuple) else args)

    # --- the complex API on real numbers ---------------------------------------------------------
    @property
    def real(self):
        """The real part: the tensor itself (Ember's dtypes are real)."""
        return self

    @property
    def imag(self):
        """Refused, as PyTorch refuses it for real tensors."""
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")

    def conj(self):
        """The complex conjugate: the tensor itself for real values."""
        return self

    conj_physical = resolve_conj = resolve_neg = conj

    def is_conj(self) -> bool:
        """False: no lazy conjugation bit."""
        return False

    is_neg = is_conj

    def isreal(self):
        """True everywhere: every value of a real dtype is real."""
        return ops.ones_like(self, dtype=dt.bool_)

    def angle(self):
        """The argument of each value as a complex number: 0 for >= 0, pi for < 0, NaN for NaN (PyTorch's)."""
        if not self.is_floating_point():
            return ops.where(self < 0, math.pi, 0.0).to(dt.get_default_dtype())
        return ops.where(self < 0, math.pi, ops.where(self == self, 0.0, self * 0.0)).to(self.dtype)

    @property
    def mH(self):
        """The conjugate transpose of the last two dims: `mT` for real values."""
        return self.mT

    @property
    def H(self):
        """The conjugate transpose of a matrix (or a vector, unchanged): `T` for real values."""
        if self.ndim > 2:
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
        return self.T

    # --- other ops' forms ---------------------------------------------------------------------
    def unfold(self, dimension: int, size: int, step: int):
        """The windows of `size` values every `step` along `dimension`, as a new last dim (a copy, not a view)."""
        d = dimension + self.ndim if dimension < 0 else dimension
        n = self.shape[d] if self.ndim else 1
        if not 0 <= d < max(self.ndim, 1) or size < 0 or size > n or step <= 0:
            raise ShapeError(f"unfold: size {size} and step {step} must be positive (size at most {n}) for dim "
                             f"{dimension} of a tensor of shape {fmt_shape(self.shape)}")
        src = self.reshape(1) if self.ndim == 0 else self
        starts = np.arange(0, n - size + 1, step)
        index = creation.tensor((starts[:, None] + np.arange(size)).reshape(-1), device=self.device)
        picked = ops.index_select(src, d, index)
        shape = tuple(src.shape[:d]) + (len(starts), size) + tuple(src.shape[d + 1:])
        out = ops.movedim(picked.reshape(shape), d + 1, -1)
        return out.reshape(out.shape[1:]) if self.ndim == 0 else out

    def split_with_sizes(self, split_sizes, dim: int = 0):
        """`split` by a list of sizes."""
        return ops.split(self, list(split_sizes), dim)

    def unsafe_split(self, split_size, dim: int = 0):
        """`split` (the same values; PyTorch's skips a view check)."""
        return ops.split(self, split_size, dim)

    def unsafe_chunk(self, chunks: int, dim: int = 0):
        """`chunk` (the same values; PyTorch's skips a view check)."""
        return ops.chunk(self, chunks, dim)

    def narrow_copy(self, dim: int, start: int, length: int):
        """`narrow`, copied."""
        return ops.narrow(self, dim, start, length).clone()

    def bernoulli(self, p=None, *, generator=None):
        """0/1 draws with probability self (or p), in self's dtype."""
        return creation.bernoulli(self, p, generator=generator)

    def multinomial(self, num_samples: int, replacement: bool = False, *, generator=None):
        """Indices drawn with the probabilities of each row (`ember.multinomial`)."""
        return creation.multinomial(self, num_samples, replacement, generator=generator)
