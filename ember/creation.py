"""Creating tensors: from data, filled, ranges, and random draws."""

from __future__ import annotations

import numpy as np

from ember import dispatch as _dispatch
from ember import dtypes as dt
from ember.backends.meta import MetaArray
from ember.device import as_device
from ember.random import Generator, host_rng
from ember.random.sampling import random_range
from ember.symbolic import SymInt
from ember.tensor import Tensor


def _size(size) -> tuple:
    """Accept f(2, 3), f((2, 3)) and f([2, 3])."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for d in size:
        if isinstance(d, Tensor):
            d = int(d)
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise TypeError(f"sizes must be integers, got {d!r}")
        if d < 0:
            raise ValueError(f"sizes must be non-negative, got {tuple(size)}")
        out.append(d if isinstance(d, SymInt) else int(d))  # a symbolic size stays symbolic under ember.jit
    return tuple(out)


def _finish(data, device, requires_grad: bool) -> Tensor:
    t = Tensor._make(data, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _host_to_device(arr: np.ndarray, device, requires_grad=False) -> Tensor:
    return _finish(device.backend.from_host(arr), device, requires_grad)


def _infer_np(data, narrow: bool = True):
    """NumPy array with PyTorch's dtype inference for Python data (`narrow=False`: Python floats stay float64,
    for a caller that casts to a dtype of its own; narrowing first rounded float64 data through float32)."""
    if isinstance(data, np.ndarray):
        return data
    if isinstance(data, np.generic):
        return np.asarray(data)
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat_first(data)):
        data = _to_nested(data)
    arr = np.asarray(data)
    if arr.dtype == np.float64 and narrow:
        arr = arr.astype(dt.get_default_dtype().np)
    elif arr.dtype.kind in "iu" and arr.dtype != np.uint8:
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "O":
        raise TypeError(f"tensor: could not infer a dtype from data of type {type(data).__name__}")
    return arr


def _flat_first(data):
    while isinstance(data, (list, tuple)) and data:
        yield data[0]
        data = data[0]


def _to_nested(data):
    if isinstance(data, Tensor):
        return data.detach().tolist()
    if isinstance(data, (list, tuple)):
        return [_to_nested(x) for x in data]
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor (a copy) from data: nested lists, numbers, NumPy arrays or tensors."""
    device = as_device(device)
    if isinstance(data, Tensor):
        out = data.detach().to(device=device, dtype=dtype, copy=True)
        return out.requires_grad_(True) if requires_grad else out
    arr = _infer_np(data, narrow=dtype is None)
    if dtype is not None:
        target = dt.as_dtype(dtype)
        if target.np.kind in "iu" and not isinstance(data, (np.ndarray, np.generic)):
            _refuse_overflow(arr, target)
        arr = arr.astype(target.np)
    else:
        dt.from_numpy_dtype(arr.dtype)  # reject unsupported dtypes with a clear message
    arr = np.array(arr, copy=True, order="C")
    return _host_to_device(arr, device, requires_grad)


def _refuse_overflow(arr: np.ndarray, target) -> None:
    """Python numbers outside an integer dtype's range are an error, as in PyTorch, not wrapped around."""
    if not arr.size or arr.dtype.kind not in "iuf":
        return
    limits = np.iinfo(target.np)
    lo, hi = arr.min(), arr.max()
    least = -256 if target.np == np.uint8 and arr.dtype.kind in "iu" else limits.min  # PyTorch wraps -256..-1
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo < least or hi > limits.max:
        bad = lo if not np.isfinite(lo) or lo < limits.min else hi
        raise RuntimeError(f"tensor: value {bad} cannot be converted to {target.name} without overflow")


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like tensor(), but shares memory with a NumPy array or tensor when it can."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if (device or dtype) else data
    if isinstance(data, np.ndarray) and dtype is None and as_device(device).type == "cpu":
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor that shares memory with a NumPy array (writes show on both sides)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    dt.from_numpy_dtype(array.dtype)
    return Tensor._make(array, as_device("cpu"))


def _dtype_np(dtype, default=None):
    if dtype is None:
        return (default or dt.get_default_dtype()).np
    return dt.as_dtype(dtype).np


def _filled(shape, value, dtype, device, requires_grad):
    device = as_device(device)
    np_dtype = _dtype_np(dtype)
    data = device.backend.full(shape, value, np_dtype)
    return _finish(data, device, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros."""
    return _filled(_size(size), 0, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones."""
    return _filled(_size(size), 1, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor."""
    device = as_device(device)
    data = device.backend.empty(_size(size), _dtype_np(dtype))
    return _finish(data, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with one value; the dtype follows the value (bool, int64 or default float)."""
    if dtype is None:
        dtype = dt.scalar_dtype(fill_value.item() if isinstance(fill_value, Tensor) else fill_value)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled(_size((size,) if isinstance(size, int) else (tuple(size),)), fill_value, dtype, device, requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from start up to (not including) end by step; int64 for integer arguments."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
        dtype = dt.int64 if is_int else dt.get_default_dtype()
    dtype = dt.as_dtype(dtype)
    n = max(0, int(np.ceil((end - start) / step)))
    device = as_device(device)
    if device.backend.abstract:
        return _finish(MetaArray((n,), dtype.np), device, requires_grad)
    arr = (start + step * np.arange(n, dtype=np.float64 if dtype.is_floating_point else np.int64)).astype(dtype.np)
    return _host_to_device(arr, device, requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end inclusive."""
    if steps < 0:
        raise ValueError(f"linspace: steps must be non-negative, got {steps}")
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    device = as_device(device)
    if device.backend.abstract:
        return _finish(MetaArray((steps,), dtype.np), device, requires_grad)
    return _host_to_device(np.linspace(start, end, steps).astype(dtype.np), device, requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None) -> Tensor:
    """base ** linspace(start, end, steps)."""
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    return _host_to_device(np.logspace(start, end, steps, base=base).astype(dtype.np), as_device(device))


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An n x m matrix with ones on the diagonal."""
    m = n if m is None else m
    device = as_device(device)
    np_dtype = _dtype_np(dtype)
    if device.backend.abstract:
        return _finish(MetaArray((n, m), np_dtype), device, requires_grad)
    return _host_to_device(np.eye(n, m, dtype=np_dtype), device, requires_grad)


# --- random ------------------------------------------------------------------------------
def _random(device, shape, np_dtype, draw, requires_grad, generator=None, like: Tensor | None = None):
    """A tensor of `draw(gen, shape)` (gen: an ember.Generator, or the device's draws on CUDA); under
    ember.jit a graph node drawing afresh (at the run's shape) each run. With `like` (a tensor of this
    shape) the values are laid out in its memory order, as PyTorch's draws into empty_like(like) are."""
    from ember.ops.host_random import draw_in_order

    device = as_device(device)
    interp = _dispatch.current()
    interp.check_random()
    if interp.symbolic:  # inside ember.jit: a graph node drawing afresh at every run
        t = interp.random(draw, shape, np_dtype, device, generator, like=like)
        return t.requires_grad_(True) if requires_grad else t
    if device.backend.abstract:
        return _finish(MetaArray(shape, np_dtype), device, requires_grad)
    if device.type == "cuda" and generator is None:
        data = draw(device.backend.random(), shape).astype(np_dtype, copy=False)
        return _finish(data, device, requires_grad)
    layout = like._data if like is not None else None
    arr = np.asarray(draw_in_order(draw, host_rng(generator), shape, layout)).astype(np_dtype, copy=False)
    return _host_to_device(arr, device, requires_grad)


def _float_dtype(dtype, op: str = "random floats"):
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise TypeError(f"{op} need a floating-point dtype, got {d}")
    return d.np


def rand(*size, dtype=None, device=None, requires_grad: bool = False, generator: Generator | None = None) -> Tensor:
    """Uniform samples in [0, 1) (PyTorch's: after the same manual_seed, the same values)."""
    shape, np_dtype = _size(size), _float_dtype(dtype)
    return _random(device, shape, np_dtype, lambda g, shape: g.uniform(shape, np_dtype), requires_grad, generator)


def randn(*size, dtype=None, device=None, requires_grad: bool = False, generator: Generator | None = None) -> Tensor:
    """Standard normal samples (PyTorch's: after the same manual_seed, the same values)."""
    shape, np_dtype = _size(size), _float_dtype(dtype)
    return _random(device, shape, np_dtype, lambda g, shape: g.normal(shape, np_dtype), requires_grad, generator)


def randint(low, high=None, size=None, *, dtype=None, device=None, generator: Generator | None = None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform in [low, high) (int64 by default): randint(high, size) or randint(low, high, size)."""
    if size is None:
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint: give a size, as randint(high, size) or randint(low, high, size)")
    low, high = int(low), int(high)
    shape = _size((size,) if isinstance(size, int) else (tuple(size),))
    np_dtype = _dtype_np(dtype, dt.int64)
    random_range("randint", np_dtype, low, high)  # PyTorch's checks of the bounds, before anything is drawn
    return _random(device, shape, np_dtype, lambda g, shape: g.integers(low, high, shape, np_dtype), requires_grad,
                   generator)


def randperm(n: int, *, dtype=None, device=None, generator: Generator | None = None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 (PyTorch's shuffle: after the same manual_seed, the same order)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"randperm: n must be an integer, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"randperm: n must be non-negative, got {n}")
    np_dtype = _dtype_np(dtype, dt.int64)
    return _random(device, (int(n),), np_dtype, lambda g, shape: g.permutation(shape[0], np_dtype), requires_grad,
                   generator)


def normal(mean=0.0, std=1.0, size=None, *, dtype=None, device=None, generator: Generator | None = None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples with the given mean and std (numbers or tensors), drawn as torch.normal draws them."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = tuple(np.broadcast_shapes(tuple(getattr(mean, "shape", ())), tuple(getattr(std, "shape", ()))))
        if not isinstance(std, Tensor):  # PyTorch draws normal_(0, std), then adds the mean
            return normal(0.0, std, shape, dtype=ref.dtype, device=ref.device, generator=generator) + mean
        noise = randn(shape, dtype=ref.dtype, device=ref.device, generator=generator)
        return noise * std + mean
    if size is None:
        raise TypeError("normal: give size when mean and std are numbers")
    if std < 0:
        raise ValueError(f"normal expects std >= 0.0, but found std {std}")
    shape = _size((size,) if isinstance(size, int) else (tuple(size),))
    np_dtype = _float_dtype(dtype, "normal")
    mean, std = float(mean), float(std)
    return _random(device, shape, np_dtype, lambda g, shape: g.normal(shape, np_dtype, mean, std), requires_grad,
                   generator)


def rand_like(input: Tensor, *, dtype=None, device=None) -> Tensor:
    """Uniform samples shaped like input."""
    return rand(input.shape, dtype=dtype or input.dtype, device=device or input.device)


def randn_like(input: Tensor, *, dtype=None, device=None) -> Tensor:
    """Normal samples shaped like input."""
    return randn(input.shape, dtype=dtype or input.dtype, device=device or input.device)


def randint_like(input: Tensor, low, high=None, *, dtype=None) -> Tensor:
    """Random integers shaped like input: randint_like(input, high) or randint_like(input, low, high)."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, device=input.device)


def bernoulli(input: Tensor, p=None, *, generator: Generator | None = None) -> Tensor:
    """0/1 samples, 1 with probability input (or the number p), drawn as torch.bernoulli draws them: a
    float64 uniform per value for a number p or float64 probabilities, else a float32 one."""
    if p is None:
        if not input.is_floating_point():
            raise TypeError(f"bernoulli: probabilities must be floating point, got {input.dtype}")
        probs, draw_dtype = input, (dt.float64 if input.dtype == dt.float64 else dt.float32)
    else:
        if not 0 <= p <= 1:
            raise ValueError(f"bernoulli: p must be in [0, 1], got {p}")
        probs, draw_dtype = p, dt.float64
    u = rand(input.shape, dtype=draw_dtype, device=input.device, generator=generator)
    return (u < probs).to(input.dtype)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Category indices sampled from (rows of) non-negative weights, as torch.multinomial samples them."""
    if input.ndim not in (1, 2):
        raise ValueError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {tuple(input.shape)}")
    if not input.is_floating_point():
        raise TypeError(f"multinomial: only supports floating-point dtypes for input, got {input.dtype}")
    if num_samples <= 0:
        raise ValueError(f"multinomial: cannot sample n_sample <= 0 samples (got {num_samples})")
    categories = input.shape[-1]
    if not replacement and num_samples > categories:
        raise ValueError(f"multinomial: cannot sample n_sample ({num_samples}) > prob_dist.size(-1) ({categories}) "
                         "samples without replacement")
    if categories > 2**24:
        raise ValueError(f"multinomial: number of categories cannot exceed 2^24, got {categories}")
    probs = input.detach().numpy()
    rows = probs.reshape(-1, categories)
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise ValueError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
    if (rows.sum(axis=1) <= 0).any():
        raise ValueError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    picks = host_rng(generator).multinomial(np.ascontiguousarray(rows), num_samples, replacement)
    return _host_to_device(picks.reshape(probs.shape[:-1] + (num_samples,)), input.device)


def poisson(input: Tensor, generator: Generator | None = None) -> Tensor:
    """Poisson counts with rates `input`, as floats of its dtype (torch.poisson; no gradient flows through a draw)."""
    if not input.is_floating_point():
        raise TypeError(f"poisson: rates must be floating point, got {input.dtype}")
    rates = input.detach().numpy()
    if np.isnan(rates).any() or (rates < 0).any():
        raise ValueError("poisson: invalid Poisson rate, expected rate to be non-negative (got a negative or NaN rate)")
    counts = host_rng(generator).numpy.poisson(rates.astype(np.float64))
    return _host_to_device(counts.astype(rates.dtype), input.device)


def binomial(count: Tensor, prob: Tensor, generator: Generator | None = None) -> Tensor:
    """Binomial counts of `count` trials with success probabilities `prob` (broadcast together), as floats of their
    dtype (torch.binomial)."""
    if not (count.is_floating_point() and prob.is_floating_point()) or count.dtype != prob.dtype:
        raise TypeError(f"binomial: count and prob must be floating point of one dtype, got {count.dtype} and "
                        f"{prob.dtype}")
    n, p = np.broadcast_arrays(count.detach().numpy(), prob.detach().numpy())
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("binomial: prob must be in [0, 1]")
    if np.isnan(n).any() or (n < 0).any():
        raise ValueError("binomial: count must be non-negative")
    draws = host_rng(generator).numpy.binomial(np.floor(n).astype(np.int64), p.astype(np.float64))
    return _host_to_device(draws.astype(prob.detach().numpy().dtype), prob.device)
