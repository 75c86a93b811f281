"""Methods that make new tensors like this one (`new_zeros`, `new_tensor`, ...) and random fills in
place (`normal_`, `uniform_`, `bernoulli_`, ...)."""

from __future__ import annotations

import numpy as np

from ember import autograd, creation, dispatch, random
from ember.autograd import grad_mode
from ember.random.sampling import random_range
from ember.tensor import Tensor

_UNSET = object()  # tells random_(to) from random_(from, None)


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

    def _fill_random(self, fill, draw, generator=None):
        """Fill self in place with random values, without autograd history: `fill(gen, array)` writes
        straight into eager CPU data (in memory order, as PyTorch writes a strided tensor); otherwise
        `draw(gen, shape)` makes the values (a graph node under ember.jit) and they are copied in."""
        data = self._data
        if (type(data) is np.ndarray and data.flags.writeable and self._device.type == "cpu"
                and not (autograd.grad_mode.state.enabled and self._requires_grad and self._grad_fn is not None)
                and dispatch.eager_now()):
            fill(random.host_rng(generator), data)
            self._version[0] += 1
            return self
        sample = creation._random(self.device, tuple(self.shape), data.dtype, draw, False, generator)
        if self._requires_grad and self._grad_fn is None:
            with grad_mode.no_grad():
                return self.copy_(sample)
        return self.copy_(sample)

    def _float_fill(self, op: str):
        if not self.is_floating_point():
            raise TypeError(f"{op}: needs a floating-point tensor, got {self.dtype}")
        return self._data.dtype

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fill with samples of N(mean, std^2) in place (PyTorch's values after the same manual_seed)."""
        dtype = self._float_fill("normal_")
        if std < 0:
            raise ValueError(f"normal_ expects std >= 0.0, but found std {std}")
        return self._fill_random(lambda g, out: g.fill_normal(out, mean, std),
                                 lambda g, shape: g.normal(shape, dtype, mean, std), generator)

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        """Fill with samples of U(a, b) in place (PyTorch's values after the same manual_seed)."""
        dtype = self._float_fill("uniform_")
        if a > b:
            raise ValueError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
        return self._fill_random(lambda g, out: g.fill_uniform(out, a, b),
                                 lambda g, shape: g.uniform(shape, dtype, a, b), generator)

    def bernoulli_(self, p=0.5, *, generator=None):
        """Fill with 1 with probability p (a number or a tensor of probabilities), else 0, in place."""
        dtype = self._data.dtype
        if isinstance(p, Tensor):
            probs = p.detach().numpy()
            return self._fill_random(lambda g, out: g.fill_bernoulli(out, probs),
                                     lambda g, shape: g.bernoulli(probs, shape, dtype), generator)
        if not 0 <= p <= 1:
            raise ValueError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        return self._fill_random(lambda g, out: g.fill_bernoulli(out, p),
                                 lambda g, shape: g.bernoulli(p, shape, dtype), generator)

    def exponential_(self, lambd=1.0, *, generator=None):
        """Fill with samples of an exponential distribution of rate `lambd` in place."""
        dtype = self._float_fill("exponential_")
        if not lambd > 0:
            raise ValueError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        return self._fill_random(lambda g, out: g.fill_exponential(out, lambd),
                                 lambda g, shape: g.exponential(shape, dtype, lambd), generator)

    def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
        """Fill with samples of a Cauchy distribution in place."""
        dtype = self._float_fill("cauchy_")
        if not sigma > 0:
            raise ValueError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
        return self._fill_random(lambda g, out: g.fill_cauchy(out, median, sigma),
                                 lambda g, shape: g.fill_cauchy(np.empty(shape, dtype), median, sigma), generator)

    def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
        """Fill with samples of exp(N(mean, std^2)) in place."""
        dtype = self._float_fill("log_normal_")
        if not std > 0:
            raise ValueError(f"log_normal_ expects std > 0.0, but found std={std}")
        return self._fill_random(lambda g, out: g.fill_log_normal(out, mean, std),
                                 lambda g, shape: g.fill_log_normal(np.empty(shape, dtype), mean, std), generator)

    def geometric_(self, p, *, generator=None):
        """Fill with the number of Bernoulli(p) trials up to the first success, in place."""
        dtype = self._data.dtype
        if not 0 < p < 1:
            raise ValueError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        return self._fill_random(lambda g, out: g.fill_geometric(out, p),
                                 lambda g, shape: g.fill_geometric(np.empty(shape, dtype), p), generator)

    def random_(self, from_=None, to=_UNSET, *, generator=None):
        """Fill with integers in place, as PyTorch: random_(to) draws from [0, to), random_(from, to) from
        [from, to), random_(from, None) from [from, the dtype's largest integer], random_() from [0, that]
        (2**mantissa for floats)."""
        dtype = self._data.dtype
        if from_ is None and to is _UNSET:
            return self._fill_random(lambda g, out: g.fill_random(out),
                                     lambda g, shape: g.fill_random(np.empty(shape, dtype)), generator)
        low, high = (0, from_) if to is _UNSET else (from_, to)
        low, high = int(low), None if high is None else int(high)
        random_range("random_", dtype, low, high)  # PyTorch's checks, before anything is drawn
        return self._fill_random(lambda g, out: g.fill_integers(out, low, high),
                                 lambda g, shape: g.integers(low, high, shape, dtype), generator)

