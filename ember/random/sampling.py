"""PyTorch's CPU samplers on NumPy arrays: how each turns the engine's words into values.

Every `fill_*` writes an existing array in place, drawing the words PyTorch draws for a tensor of that
dtype and layout, and writing the elements in the order PyTorch does (memory order), so that after the
same seed Ember and PyTorch hold the same numbers. The rules follow aten: core/TransformationHelper.h
and DistributionsHelper.h (word to value), native/cpu/DistributionTemplates.h (the fills),
native/TensorFactories.cpp (randperm), native/cpu/MultinomialKernel.cpp and native/Distributions.cpp
(multinomial). Values are drawn `_CHUNK` at a time, so a fill needs little memory beyond its output.
"""

from __future__ import annotations

import warnings

import numpy as np

from ember.kernels import random_draws as compiled
from ember.random import box_muller
from ember.random.fma import fma32, fma64

_CHUNK = 1 << 18  # values per step (a multiple of 16, Box-Muller's block)
_VECTOR_NORMAL_MIN = 16  # aten's normal fill runs Box-Muller blocks from this size (contiguous tensors)
_WIDE_RANGE = 2**28  # random_(low, high) draws 64 bits from this range on
_RANDPERM_SMALL = (2**32 - 1) // 20  # below this n, randperm swaps forward with 32-bit draws



def _digits(dtype: np.dtype) -> int:
    """Mantissa bits (with the implicit one) of a float dtype: how many random bits a uniform keeps."""
    if dtype.name == "bfloat16":  # ml_dtypes' type
        return 8
    return {np.dtype(np.float16): 11, np.dtype(np.float32): 24, np.dtype(np.float64): 53}[dtype]


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def memory_axes(a: np.ndarray) -> list[int]:
    """a's axes in memory order (largest stride first): the order PyTorch's TensorIterator fills a strided
    tensor in (a transposed matrix column by column)."""
    return sorted(range(a.ndim), key=lambda d: -abs(a.strides[d]))


def _memory_order(a: np.ndarray) -> np.ndarray:
    return a.transpose(memory_axes(a))


def _fill(out: np.ndarray, produce, chunk: int = _CHUNK) -> None:
    """Call produce(flat_slice) over `out` in memory order, a chunk at a time."""
    if out.flags.c_contiguous:
        flat = out.reshape(-1)
        for start in range(0, flat.size, chunk):
            produce(flat[start:start + chunk])
        return
    work = np.empty(out.size, out.dtype)
    _fill(work, produce, chunk)
    ordered = _memory_order(out)
    ordered[...] = work.reshape(ordered.shape)


# --- uniform ---------------------------------------------------------------------------------
def unit_uniform(engine, n: int, dtype: np.dtype) -> np.ndarray:
    """n uniforms in [0, 1) as aten's uniform_real_distribution makes them: for float64 a 64-bit draw's low
    53 bits times 2**-53; for other floats (16-bit ones are drawn as float32, then rounded) a word's low
    24 bits times 2**-24, in float32."""
    if dtype == np.float64:
        words = engine.words64(n)
        words &= np.uint64(2**53 - 1)
        x = words.astype(np.float64)
        x *= 2.0**-53
        return x
    words = engine.words32(n)
    words &= np.uint32(2**24 - 1)
    x = words.astype(np.float32)
    x *= np.float32(2.0**-24)
    return x


def fill_uniform(engine, out: np.ndarray, low: float, high: float) -> None:
    """uniform_(low, high): x * (high - low) + low, fused, in float64 for float64 tensors and in float32
    otherwise; 16-bit floats round the float32 value, and one that rounds up to `high` becomes `low`."""
    acc = np.float64 if out.dtype == np.float64 else np.float32
    lo, hi = acc(low), acc(high)
    span = hi - lo
    fma = fma64 if acc is np.float64 else fma32
    narrow = out.dtype not in (np.float32, np.float64)

    def produce(dst):
        x = unit_uniform(engine, dst.size, dst.dtype)
        if lo != 0:
            x = _affine(x, span, lo, fma)
        elif span != 1:
            x *= span  # one rounding, as the fused form with a zero addend
        dst[...] = x
        if narrow:  # keeps [low, high) half-open after the rounding
            dst[dst == dst.dtype.type(high)] = dst.dtype.type(low)

    _fill(out, produce)


def _affine(x: np.ndarray, span, low, fma) -> np.ndarray:
    """x * span + low with one rounding: the compiled loop for large arrays, else fma32 / fma64."""
    kernel = compiled.kernel("affine", x.dtype, x.size)
    if kernel is None:
        return fma(x, span, low)
    kernel(x, span, low, x)
    return x


# --- normal ----------------------------------------------------------------------------------
def fill_normal(gen, out: np.ndarray, mean: float, std: float) -> None:
    """normal_(mean, std): Box-Muller blocks for contiguous tensors of 16 or more values, else aten's
    scalar normal_distribution<double> (pairs of draws, the second value cached in the generator)."""
    if out.size >= _VECTOR_NORMAL_MIN and out.flags.c_contiguous:
        _normal_blocks(gen._engine, out.reshape(-1), mean, std)
    else:
        _fill(out, lambda dst: _normal_scalar(gen, dst, mean, std))


def _normal_blocks(engine, flat: np.ndarray, mean: float, std: float) -> None:
    """aten's normal_fill: uniforms everywhere, Box-Muller per block of 16; a size that is not a multiple
    of 16 then draws 16 fresh uniforms for the last 16 values and transforms them as one more block.
    16-bit floats run float32's kernel on whole blocks only (no uniforms for the remainder) and round."""
    dtype = flat.dtype
    exact = dtype in (np.float32, np.float64)
    work_dtype = dtype if exact else np.dtype(np.float32)
    n = flat.size
    whole = n - n % 16

    def block(dst):
        blocks = unit_uniform(engine, dst.size, work_dtype).reshape(-1, 16)
        box_muller.transform(blocks, mean, std)
        dst[...] = blocks.reshape(-1)

    _fill(flat[:whole], block)
    if n % 16:
        if exact:
            unit_uniform(engine, n % 16, dtype)  # the uniforms aten writes there first, then overwrites
        block(flat[n - 16:])


def _normal_scalar(gen, dst: np.ndarray, mean: float, std: float) -> None:
    """len(dst) values of aten's normal_distribution<double>, cast to dst's dtype."""
    n = dst.size
    raw = np.empty(n, np.float64)
    start = 0
    if n and gen._next_double_normal is not None:
        raw[0], gen._next_double_normal = gen._next_double_normal, None
        start = 1
    pairs = (n - start + 1) // 2
    if pairs:
        u = unit_uniform(gen._engine, 2 * pairs, np.dtype(np.float64)).reshape(pairs, 2)
        values = box_muller.normal_pairs(u).reshape(-1)
        raw[start:] = values[: n - start]
        if (n - start) % 2:
            gen._next_double_normal = float(values[-1])
    if std != 1 or mean != 0:
        raw = fma64(raw, std, mean)
    dst[...] = raw


# --- integers --------------------------------------------------------------------------------
def _int64_wrap(values: np.ndarray, base: int) -> np.ndarray:
    """values + base as aten adds them (in uint64, wrapping) read as int64."""
    values += np.uint64(base % 2**64)
    return values.view(np.int64)


def _float_digits(dtype: np.dtype) -> int | None:
    return _digits(dtype) if _is_float(dtype) else None


def _as_float_int(value: int, dtype: np.dtype) -> int:
    """static_cast<int64_t>(static_cast<dtype>(value)): value rounded to the float dtype."""
    return int(np.asarray(float(value), dtype=np.float64).astype(dtype).astype(np.float64))


def random_range(op: str, dtype: np.dtype, low: int, high: int | None) -> tuple[int, int]:
    """(base, span) of random_(low, high) as aten computes them: a float dtype moves bounds it cannot
    hold to ones it can (update_from / update_to), high=None means up to the dtype's largest integer
    (2**digits for floats), and each bound must fit the dtype. A span of 2**64 is the whole int64 range."""
    dtype = np.dtype(dtype)
    digits = _float_digits(dtype)
    if high is None and low == -(2**63):
        return low, 2**64
    if high is not None:
        if low >= high:
            raise ValueError(f"{op}: expects 'from' to be less than 'to', but got from={low} >= to={high}")
        if digits is not None:
            low, high = _update_from(low, dtype, digits), _update_to(high, dtype, digits)
            if low >= high:
                raise ValueError(f"{op}: expects 'from' casted to {dtype.name} to be less than 'to' casted to "
                                 f"{dtype.name}, but got from={low} >= to={high}")
        top = high - 1
    elif digits is not None:
        top = min(2**digits, 2**63 - 1)
        low = _update_from(low, dtype, digits)
        if low >= top:
            raise ValueError(f"{op}: expects 'from' casted to {dtype.name} to be less than or equal to {top}, "
                             f"but got from={low}")
    else:
        top = 1 if dtype == np.bool_ else int(np.iinfo(dtype).max)
    _check_bounds(op, dtype, digits, low, top)
    return low, top - low + 1


def _update_from(low: int, dtype: np.dtype, digits: int) -> int:
    plus_one = _as_float_int(low + 1, dtype)
    if plus_one < low:
        low = plus_one + (1 << (abs(low + 1).bit_length() - 1 - digits + 1))
    return low


def _update_to(high: int, dtype: np.dtype, digits: int) -> int:
    minus_one = _as_float_int(high - 1, dtype)
    if minus_one >= high:
        high = minus_one - (1 << (abs(high - 1).bit_length() - 1 - digits + 1))
    return high


def _check_bounds(op: str, dtype: np.dtype, digits: int | None, low: int, top: int) -> None:
    """aten's check_from_to_in_range: errors outside the dtype, a warning past a float's exact integers."""
    if digits is None:
        lo, hi = (0, 1) if dtype == np.bool_ else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    else:
        finfo = np.finfo(dtype)
        lo, hi = float(finfo.min), float(finfo.max)
    for name, value in (("from", low), ("to - 1", top)):
        if not lo <= value <= hi:
            raise ValueError(f"{op}: {name} is out of bounds for {dtype.name} ({name} = {value})")
        if digits is not None and not -(2**digits) <= value <= 2**digits:
            warnings.warn(f"{op}: {name} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations "
                          f"{dtype.name} can support discrete uniform distribution only within this range.",
                          stacklevel=4)


def fill_random_from_to(engine, out: np.ndarray, base: int, span: int) -> None:
    """random_ over [base, base + span) (see random_range): (word % span) + base, with a 64-bit draw for
    spans of 2**28 or more in any dtype (PyTorch's wheels: the modulo's skew stays small), a 32-bit word below."""
    wide = span >= _WIDE_RANGE

    def produce(dst):
        if span == 2**64:  # the full int64 range: a 64-bit draw read as int64
            dst[...] = engine.words64(dst.size).view(np.int64)
            return
        words = engine.words64(dst.size) if wide else engine.words32(dst.size).astype(np.uint64)
        words %= np.uint64(span)
        dst[...] = _int64_wrap(words, base)

    _fill(out, produce)


def _random_bits_modulus(dtype: np.dtype) -> tuple[int, bool]:
    """(modulus, 64-bit draw) of random_() without bounds: [0, max] for integers, [0, 2**digits] for floats."""
    if dtype == np.bool_:
        return 2, False
    if _is_float(dtype):
        digits = _digits(dtype)
        return 2**digits + 1, digits == 53
    info = np.iinfo(dtype)
    return int(info.max) + 1, dtype == np.int64


def fill_random_bits(engine, out: np.ndarray) -> None:
    """random_() without bounds (aten's uniform_int): a word modulo the dtype's max + 1."""
    modulus, wide = _random_bits_modulus(out.dtype)

    def produce(dst):
        words = engine.words64(dst.size) if wide else engine.words32(dst.size).astype(np.uint64)
        words %= np.uint64(modulus)
        dst[...] = words

    _fill(out, produce)


def permutation(engine, n: int) -> np.ndarray:
    """randperm(n) as int64: below ~2**32/20, n - 1 forward swaps with slot i + word % (n - i); above,
    the inside-out shuffle with 64-bit draws (aten's randperm_cpu)."""
    if n < _RANDPERM_SMALL:
        perm = np.arange(n, dtype=np.int64)
        if n > 1:
            offsets = engine.words32(n - 1).astype(np.int64) % np.arange(n, 1, -1, dtype=np.int64)
            _swap_forward(perm, offsets)
        return perm
    picks = engine.words64(n) % np.arange(1, n + 1, dtype=np.uint64)
    return _inside_out(picks.astype(np.int64))


def _swap_forward(perm: np.ndarray, offsets: np.ndarray) -> None:
    kernel = compiled.kernel("swap_forward", np.int64, perm.size)
    if kernel is not None:
        kernel(perm, offsets)
        return
    values = perm.tolist()
    for i, off in enumerate(offsets.tolist()):
        j = i + off
        values[i], values[j] = values[j], values[i]
    perm[...] = values


def _inside_out(picks: np.ndarray) -> np.ndarray:
    perm = np.empty(picks.size, np.int64)
    kernel = compiled.kernel("inside_out", np.int64, perm.size)
    if kernel is not None:
        kernel(picks, perm)
        return perm
    values = [0] * picks.size
    for i, z in enumerate(picks.tolist()):
        values[i] = values[z]
        values[z] = i
    perm[...] = values
    return perm


# --- Bernoulli, exponential and friends --------------------------------------------------------
def fill_bernoulli_scalar(engine, out: np.ndarray, p: float) -> None:
    """bernoulli_(p): a float64 uniform per value, 1 where it is below p."""
    _fill(out, lambda dst: np.less(unit_uniform(engine, dst.size, np.dtype(np.float64)), p, out=dst, casting="unsafe"))


def fill_bernoulli_tensor(engine, out: np.ndarray, p: np.ndarray) -> None:
    """bernoulli_(p_tensor): per value a uniform in p's precision (float64 for float64 p, else float32)."""
    p = np.broadcast_to(p, out.shape)
    draw_dtype = np.dtype(np.float64 if p.dtype == np.float64 else np.float32)
    work = np.ascontiguousarray(p.transpose(memory_axes(out))).reshape(-1).astype(draw_dtype, copy=False)
    u = np.empty(work.size, draw_dtype)
    _fill(u, lambda dst: np.copyto(dst, unit_uniform(engine, dst.size, draw_dtype)))
    ordered = _memory_order(out)
    ordered[...] = (u < work).reshape(ordered.shape)


def _unit_doubles(engine, n: int) -> np.ndarray:
    return unit_uniform(engine, n, np.dtype(np.float64))


def fill_exponential(engine, out: np.ndarray, lambd: float) -> None:
    """exponential_(lambd): -1/lambd * log(1 - u), u a float64 uniform."""
    _fill(out, lambda dst: np.copyto(dst, (-1.0 / lambd) * np.log(1.0 - _unit_doubles(engine, dst.size)),
                                     casting="unsafe"))


def fill_cauchy(engine, out: np.ndarray, median: float, sigma: float) -> None:
    """cauchy_(median, sigma): median + sigma * tan(pi (u - 1/2)), fused."""
    _fill(out, lambda dst: np.copyto(dst, fma64(sigma, np.tan(np.pi * (_unit_doubles(engine, dst.size) - 0.5)),
                                                median), casting="unsafe"))


def fill_geometric(engine, out: np.ndarray, p: float) -> None:
    """geometric_(p): ceil(log(u) / log(1 - p))."""
    _fill(out, lambda dst: np.copyto(dst, np.ceil(np.log(_unit_doubles(engine, dst.size)) / np.log(1.0 - p)),
                                     casting="unsafe"))


def fill_log_normal(gen, out: np.ndarray, mean: float, std: float) -> None:
    """log_normal_(mean, std): exp of aten's scalar normal (the pair cache included)."""

    def produce(dst):
        raw = np.empty(dst.size, np.float64)
        _normal_scalar(gen, raw, mean, std)
        dst[...] = np.exp(raw)

    _fill(out, produce)


# --- multinomial ------------------------------------------------------------------------------
def multinomial(gen, probs: np.ndarray, num_samples: int, replacement: bool) -> np.ndarray:
    """Category indices per row of a 2-D `probs`: without replacement (or one sample) argmax/top-k of
    p / q with q ~ Exp(1) in probs' dtype; with replacement a float64 uniform per sample, searched in
    the row's running sum (in probs' dtype) divided by its total."""
    rows, categories = probs.shape
    if not replacement or num_samples == 1:
        q = np.empty(probs.shape, probs.dtype)
        fill_exponential(gen._engine, q, 1.0)
        ratio = probs / q
        if num_samples == 1:
            return ratio.argmax(axis=1).reshape(rows, 1)
        return np.argsort(-ratio, axis=1, kind="stable")[:, :num_samples]
    out = np.empty((rows, num_samples), np.int64)
    acc = probs.dtype if probs.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    for r in range(rows):
        running = np.cumsum(probs[r], dtype=acc)
        running /= running[-1]
        running[-1] = 1
        u = _unit_doubles(gen._engine, num_samples)
        out[r] = np.searchsorted(running.astype(np.float64), u, side="left")
    return out
