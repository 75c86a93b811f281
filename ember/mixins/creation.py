"""Methods that make new tensors like this one (`new_zeros`, `new_tensor`, ...) and random fills in
place (`normal_`, `uniform_`, `bernoulli_`, ...)."""

from __future__ import annotations

import numpy as np

from ember import creation, dispatch
from ember import random as random_state
from ember.autograd import grad_mode


class CreationMixin:
    """`new_*` constructors and in-place random fills of `ember.Tensor`."""

    __slots__ = ()

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        """A tensor of `size` filled with `fill_value`, with this tensor's dtype and device by default."""
        return creation.full(tuple(size), fill_value, dtype=dtype or self.dtype, device=device or self.device,
                                   requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        """Zeros of `size`, with this tensor's dtype and device by default."""
        return self.new_full(creation._size(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        """Ones of `size`, with this tensor's dtype and device by default."""
        return self.new_full(creation._size(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)

    new_empty = new_zeros

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        """A new tensor from data, with this tensor's dtype and device by default."""
        return creation.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                                     requires_grad=requires_grad)

    # --- random fills ----------------------------------------------------------------------
    def to_sparse(self):
        """This tensor's non-zero entries as a coalesced `ember.sparse.SparseCOOTensor`."""
        from ember.sparse import to_sparse

        return to_sparse(self)

    def _fill_random(self, draw, generator=None):
        """Write host-drawn random values into self in place (no autograd history)."""
        sample = creation._random(self.device, tuple(self.shape), self._data.dtype, draw, False, generator)
        if self._requires_grad and self._grad_fn is None:
            with grad_mode.no_grad():
                return self.copy_(sample)
        return self.copy_(sample)

    def _fill_in_place(self, fill) -> bool:
        """Let NumPy's generator write straight into a contiguous float CPU tensor (no temporary, no copy)."""
        data = self._data
        if (type(data) is not np.ndarray or data.dtype not in (np.float32, np.float64) or not data.flags.c_contiguous
                or not data.flags.writeable or self._device.type != "cpu"
                or (grad_mode.state.enabled and self._requires_grad and self._grad_fn is not None)
                or not dispatch.eager_now()):
            return False
        fill(data)
        self._version[0] += 1
        return True

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fill with samples of N(mean, std^2) in place."""
        dtype = _draw_dtype(self)

        def scale(out):
            if std != 1.0:
                out *= std
            if mean != 0.0:
                out += mean
            return out

        def into(out):
            random_state.host_rng(generator).standard_normal(out=out, dtype=out.dtype)
            scale(out)

        if self._fill_in_place(into):
            return self
        return self._fill_random(lambda r, shape: scale(r.standard_normal(shape, dtype=dtype)), generator)

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        """Fill with samples of U(a, b) in place."""
        dtype = _draw_dtype(self)

        def scale(out):
            out *= b - a
            out += a
            return out

        def into(out):
            random_state.host_rng(generator).random(out=out, dtype=out.dtype)
            scale(out)

        if self._fill_in_place(into):
            return self
        return self._fill_random(lambda r, shape: scale(r.random(shape, dtype=dtype)), generator)

    def bernoulli_(self, p=0.5, *, generator=None):
        """Fill with 1 with probability p, else 0, in place."""
        return self._fill_random(lambda r, shape: r.random(shape) < p, generator)

    def exponential_(self, lambd=1.0, *, generator=None):
        """Fill with samples of an exponential distribution of rate `lambd` in place."""
        return self._fill_random(lambda r, shape: r.exponential(1.0 / lambd, size=shape), generator)

    def random_(self, low=0, high=None, *, generator=None):
        """Fill with integers drawn uniformly from [low, high) (or [0, low) when high is None) in place."""
        lo, hi = (low, high) if high is not None else (0, low)
        return self._fill_random(lambda r, shape: r.integers(lo, hi, size=shape), generator)


def _draw_dtype(t):
    """Draw float32 samples for float32 (and narrower) tensors: NumPy's float32 path is twice as fast."""
    return np.float64 if t._data.dtype == np.float64 else np.float32
