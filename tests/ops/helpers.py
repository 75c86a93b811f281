"""The op-test helper: run one op row in Ember and PyTorch and compare shapes, dtypes, values and gradients."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import ember as em
from ember.dtypes import get_dtype

from .inputs import Rand


@dataclass(frozen=True)
class Tol:
    """(rtol, atol) for float32 and float64 forward values, and for gradients (default: 4x the forward ones).

    float16 and bfloat16 results are compared with PyTorch run in the same dtype: a few units in the
    last place (`f16`, `bf16`, relative), and an absolute term relative to the largest value of the
    result (`scaled`), since a value that cancels down to near zero keeps the error of the large ones.
    """

    f32: tuple = (1e-5, 1e-6)
    f64: tuple = (1e-10, 1e-12)
    g32: tuple | None = None
    g64: tuple | None = None
    f16: tuple = (2e-3, 2e-3)  # float16: 10 fraction bits, one rounding is 5e-4
    bf16: tuple = (1.6e-2, 1.6e-2)  # bfloat16: 7 fraction bits, one rounding is 4e-3

    def of(self, dtype, grad: bool = False) -> tuple:
        """(rtol, atol) for a NumPy dtype (for low-precision dtypes, atol is relative to the result's largest value)."""
        name = np.dtype(dtype).name
        if name in LOW:
            fwd = self.f16 if name == "float16" else self.bf16
            if not grad:
                return fwd
            ulp = 1e-3 if name == "float16" else 8e-3  # gradients may add contributions in another order
            return (max(fwd[0] * 2, ulp), max(fwd[1] * 2, ulp))
        f64 = name == "float64"
        fwd = self.f64 if f64 else self.f32
        if not grad:
            return fwd
        g = self.g64 if f64 else self.g32
        return g if g is not None else (fwd[0] * 4, fwd[1] * 4)


LOW = ("float16", "bfloat16")  # every float row is also checked in these, against PyTorch in the same dtype

# Forward results are copies or picks (bit-identical); gradients may sum contributions in another order.
EXACT = Tol((0.0, 0.0), (0.0, 0.0), (1e-6, 1e-6), (1e-13, 1e-13), (0.0, 0.0), (0.0, 0.0))
ELEMENTWISE = Tol((2e-6, 1e-6), (1e-12, 1e-13))  # one rounding per op, maybe a different libm
TRANSCENDENTAL = Tol((1e-5, 1e-6), (1e-11, 1e-13))  # erf, gelu, softplus: different formulas
REDUCTION = Tol((1e-5, 1e-5), (1e-11, 1e-12))  # summation order differs
MATMUL = Tol((2e-5, 2e-5), (1e-11, 1e-12))  # BLAS blocking differs
CONV = Tol((5e-5, 5e-5), (1e-11, 1e-11))  # im2col + GEMM vs PyTorch's direct kernels
LARGE = Tol((1e-4, 5e-4), (1e-10, 1e-10))  # normalising values near 300: float32's spacing there is 3e-5

FLOATS = ("float32", "float64")


@dataclass
class OpRow:
    """One table row: `fn(lib, *args)` runs with lib=ember and lib=torch (or `th` when they differ).

    `make(r: Rand)` returns the arguments: NumPy arrays become tensors (floating ones require grad
    unless listed in `nograd`), anything else is passed to both libraries as is.
    """

    name: str
    fn: Callable
    make: Callable[[Rand], list]
    tol: Tol = ELEMENTWISE
    th: Callable | None = None
    dtypes: tuple = FLOATS
    grad: bool = True  # differentiable: floating inputs get gradients
    torch_grad: bool = True  # PyTorch has this derivative too (else only finite differences check it)
    torch_second: bool = True  # PyTorch has the second derivative too (else finite differences of the gradient check it)
    gradcheck: bool | None = None  # finite differences (defaults to `grad`)
    meta: bool = True  # shape/dtype on the meta device
    nograd: tuple = ()  # floating inputs that get no gradient (constants of the op)
    zero_sign: bool = True  # forward zeros have PyTorch's sign (-0.0 vs 0.0)
    skip_low: dict = field(default_factory=dict)  # {"float16": why}: a dtype PyTorch 2.13's CPU kernels lack here

    def __post_init__(self) -> None:
        if self.gradcheck is None:
            self.gradcheck = self.grad
        if not self.grad:
            self.gradcheck = False

    def low_dtypes(self) -> tuple:
        """float16 and bfloat16 when the row runs in float32: every such row is checked in them too."""
        return LOW if "float32" in self.dtypes else ()

    def torch_fn(self) -> Callable:
        """The callable run with lib=torch."""
        return self.th or self.fn

    def __repr__(self) -> str:
        return self.name


class _TorchLib:
    """torch's names, and torch.nn.functional's for the functional-only ops (gelu, pad, pooling, ...)."""

    _FUNCTIONAL = frozenset({"max_pool2d", "avg_pool2d"})  # torch.max_pool2d lacks return_indices

    def __getattr__(self, name: str) -> Any:
        if name in self._FUNCTIONAL or not hasattr(torch, name):
            return getattr(F, name)
        return getattr(torch, name)


TH = _TorchLib()


# --- building inputs ---------------------------------------------------------------------------
def is_float_array(a) -> bool:
    """Whether `a` is a NumPy array of a floating dtype."""
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def to_ember(args: list, diff: set, device: str = "cpu") -> list:
    """NumPy arrays -> Ember tensors on `device` (those in `diff` require grad)."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            out.append(em.tensor(a.copy(), device=device, requires_grad=i in diff))
        else:
            out.append(a)
    return out


def np_to_torch(a: np.ndarray) -> torch.Tensor:
    """A NumPy array as a torch tensor of the same dtype (bfloat16, an ml_dtypes type, goes through float32)."""
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.tensor(a.copy())


def torch_to_np(t: torch.Tensor) -> np.ndarray:
    """A torch tensor's values as a NumPy array (bfloat16 as float32, which holds it exactly)."""
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def to_torch(args: list, diff: set) -> list:
    """NumPy arrays -> torch tensors (those in `diff` require grad)."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            out.append(np_to_torch(a).requires_grad_(i in diff))
        else:
            out.append(a)
    return out


def make_args(row: OpRow, r: Rand) -> list:
    """The row's arguments, with NumPy scalars (np.round of a 0-d array, say) made 0-d arrays again."""
    return [np.asarray(a) if isinstance(a, np.generic) else a for a in row.make(r)]


def diff_positions(row: OpRow, args: list) -> set:
    """Positions of the arguments whose gradients are compared."""
    if not row.grad:
        return set()
    return {i for i, a in enumerate(args) if is_float_array(a) and i not in row.nograd}


def as_tuple(out) -> tuple:
    """An op's result as a tuple of tensors."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


# --- comparing ---------------------------------------------------------------------------------
def torch_dtype_name(t: torch.Tensor) -> str:
    """'float32' for torch.float32."""
    return str(t.dtype).replace("torch.", "")


def assert_same(e: em.Tensor, t: torch.Tensor, tol: Tol, what: str, grad: bool = False,
                exact: torch.Tensor | None = None, zero_sign: bool = True) -> None:
    """Same shape, dtype and (within tol) values; forward zeros (not gradients) also with the same sign.

    For float16/bfloat16 a value also passes when it is within tol of `exact` (PyTorch in float64 on
    the same inputs): some of PyTorch's CPU kernels accumulate in the low dtype, where Ember does not.
    """
    assert isinstance(e, em.Tensor), f"{what}: expected an ember Tensor, got {type(e).__name__}"
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != torch {tuple(t.shape)}"
    assert e.dtype.name == torch_dtype_name(t), f"{what}: dtype {e.dtype.name} != torch {torch_dtype_name(t)}"
    a = e.detach().numpy()
    b = torch_to_np(t)
    if not e.dtype.is_floating_point:
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    if zero_sign and not grad:
        both_zero = (a == 0) & (b == 0)
        assert (np.signbit(a[both_zero]) == np.signbit(b[both_zero])).all(), f"{what}: -0.0 where torch has 0.0, or back"
    rtol, atol = tol.of(a.dtype, grad)
    if a.dtype.name not in LOW:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        return
    a = a.astype(np.float32)
    finite = np.abs(b[np.isfinite(b)])
    atol *= float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    ok = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    c = None if exact is None else torch_to_np(exact)
    if c is not None:
        ok |= np.isclose(a, c, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        bad = [tuple(int(j) for j in ix) for ix in np.argwhere(~ok)[:3]]
        first = "; ".join(f"{ix}: ember {a[ix]}, torch {b[ix]}" + ("" if c is None else f", exact {c[ix]}")
                          for ix in bad)
        raise AssertionError(f"{what}: {int((~ok).sum())} of {ok.size} values differ from PyTorch's in the same "
                             f"dtype and from the exact ones (rtol={rtol}, atol={atol:.3g}); {first}")


def upstream_grads(outs_t: tuple, rng: np.random.Generator) -> list:
    """A random upstream gradient for every floating output (None for the others)."""
    gs = []
    for t in outs_t:
        if t.is_floating_point() and t.requires_grad:
            gs.append(rng.standard_normal(tuple(t.shape)).astype(get_dtype(torch_dtype_name(t)).np))
        else:
            gs.append(None)
    return gs


def widened(args: list, dtype: np.dtype) -> list:
    """The arguments with arrays of `dtype` converted (exactly) to float64, for an exact reference."""
    return [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == dtype else a for a in args]


def check_row(row: OpRow, dtype: str, seed: int, device: str = "cpu") -> None:
    """Compare forward results and gradients of one row (run on `device`) against PyTorch on the CPU."""
    r = Rand(seed, dtype)
    args = make_args(row, r)
    diff = diff_positions(row, args) if row.torch_grad else set()
    e_args, t_args = to_ember(args, diff, device), to_torch(args, diff)
    outs_e = as_tuple(row.fn(em, *e_args))
    outs_t = as_tuple(row.torch_fn()(TH, *t_args))
    assert len(outs_e) == len(outs_t), f"{row.name}: {len(outs_e)} outputs, torch has {len(outs_t)}"
    x_args = outs_x = None
    if dtype in LOW:  # PyTorch in float64 on the same values: the exact result
        x_args = to_torch(widened(args, r.dtype), diff)
        outs_x = as_tuple(row.torch_fn()(TH, *x_args))
    for k, (e, t) in enumerate(zip(outs_e, outs_t)):
        assert e.device == device, f"{row.name} output {k} is on {e.device}, not {device}"
        assert_same(e, t, row.tol, f"{row.name} output {k} ({dtype})", exact=None if outs_x is None else outs_x[k],
                    zero_sign=row.zero_sign)
    if diff:
        check_grads(row, outs_e, outs_t, e_args, t_args, sorted(diff), r.rng, device, outs_x, x_args)


def check_grads(row: OpRow, outs_e, outs_t, e_args, t_args, diff: list, rng, device: str = "cpu",
                outs_x=None, x_args=None) -> None:
    """Backpropagate the same random upstream gradient through both and compare input gradients.

    With `outs_x`/`x_args` (the float64 run of a float16/bfloat16 row), gradients may match that instead.
    """
    gs = upstream_grads(outs_t, rng)
    keep = [k for k, g in enumerate(gs) if g is not None]
    assert keep, f"{row.name}: no differentiable output in torch; set grad=False"
    for k in keep:
        assert outs_e[k].requires_grad, f"{row.name}: ember output does not require grad"
    xs_t = [t_args[i] for i in diff]
    grads_t = torch.autograd.grad([outs_t[k] for k in keep], xs_t, [np_to_torch(gs[k]) for k in keep],
                                  allow_unused=True)
    xs_e = [e_args[i] for i in diff]
    grads_e = em.autograd.grad([outs_e[k] for k in keep], xs_e, [em.tensor(gs[k], device=device) for k in keep],
                               allow_unused=True)
    grads_x = [None] * len(diff)
    if outs_x is not None:
        grads_x = torch.autograd.grad([outs_x[k] for k in keep], [x_args[i] for i in diff],
                                      [torch.from_numpy(gs[k].astype(np.float64)) for k in keep], allow_unused=True)
    for i, x_t, ge, gt, gx in zip(diff, xs_t, grads_e, grads_t, grads_x):
        gt = torch.zeros_like(x_t) if gt is None else gt
        if outs_x is not None and gx is None:
            gx = torch.zeros(tuple(x_t.shape), dtype=torch.float64)
        if ge is None:
            ge = em.zeros(*x_t.shape, dtype=torch_dtype_name(x_t))
        else:
            assert ge.device == device, f"{row.name}: gradient of input {i} is on {ge.device}"
        assert_same(ge, gt, row.tol, f"{row.name} grad of input {i}", grad=True, exact=gx)
