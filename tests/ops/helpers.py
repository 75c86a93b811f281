"""The op-test helper: run one op row in Ember and PyTorch and compare shapes, dtypes, values and gradients."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import ember as em

from .inputs import Rand


@dataclass(frozen=True)
class Tol:
    """(rtol, atol) for float32 and float64 forward values, and for gradients (default: 4x the forward ones)."""

    f32: tuple = (1e-5, 1e-6)
    f64: tuple = (1e-10, 1e-12)
    g32: tuple | None = None
    g64: tuple | None = None

    def of(self, dtype, grad: bool = False) -> tuple:
        """(rtol, atol) for a NumPy dtype."""
        f64 = np.dtype(dtype) == np.float64
        fwd = self.f64 if f64 else self.f32
        if not grad:
            return fwd
        g = self.g64 if f64 else self.g32
        return g if g is not None else (fwd[0] * 4, fwd[1] * 4)


# Forward results are copies or picks (bit-identical); gradients may sum contributions in another order.
EXACT = Tol((0.0, 0.0), (0.0, 0.0), (1e-6, 1e-6), (1e-13, 1e-13))
ELEMENTWISE = Tol((2e-6, 1e-6), (1e-12, 1e-13))  # one rounding per op, maybe a different libm
TRANSCENDENTAL = Tol((1e-5, 1e-6), (1e-11, 1e-13))  # erf, gelu, softplus: different formulas
REDUCTION = Tol((1e-5, 1e-5), (1e-11, 1e-12))  # summation order differs
MATMUL = Tol((2e-5, 2e-5), (1e-11, 1e-12))  # BLAS blocking differs
CONV = Tol((5e-5, 5e-5), (1e-11, 1e-11))  # im2col + GEMM vs PyTorch's direct kernels
HALF = Tol((2e-3, 2e-3), (0.0, 0.0), (1e-2, 1e-2))  # float16 rows (the "f32" slot serves every non-float64 dtype)

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
    gradcheck: bool | None = None  # finite differences (defaults to `grad`)
    meta: bool = True  # shape/dtype on the meta device
    nograd: tuple = ()  # floating inputs that get no gradient (constants of the op)

    def __post_init__(self) -> None:
        if self.gradcheck is None:
            self.gradcheck = self.grad
        if not self.grad:
            self.gradcheck = False

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


def to_torch(args: list, diff: set) -> list:
    """NumPy arrays -> torch tensors (those in `diff` require grad)."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            out.append(torch.tensor(a.copy(), requires_grad=i in diff))
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


def assert_same(e: em.Tensor, t: torch.Tensor, tol: Tol, what: str, grad: bool = False) -> None:
    """Same shape, dtype and (within tol) values."""
    assert isinstance(e, em.Tensor), f"{what}: expected an ember Tensor, got {type(e).__name__}"
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != torch {tuple(t.shape)}"
    assert e.dtype.name == torch_dtype_name(t), f"{what}: dtype {e.dtype.name} != torch {torch_dtype_name(t)}"
    a = e.detach().numpy()
    b = t.detach().numpy()
    if a.dtype.kind != "f":
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    rtol, atol = tol.of(a.dtype, grad)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def upstream_grads(outs_t: tuple, rng: np.random.Generator) -> list:
    """A random upstream gradient for every floating output (None for the others)."""
    gs = []
    for t in outs_t:
        if t.is_floating_point() and t.requires_grad:
            gs.append(rng.standard_normal(tuple(t.shape)).astype(torch_dtype_name(t)))
        else:
            gs.append(None)
    return gs


def check_row(row: OpRow, dtype: str, seed: int, device: str = "cpu") -> None:
    """Compare forward results and gradients of one row (run on `device`) against PyTorch on the CPU."""
    r = Rand(seed, dtype)
    args = make_args(row, r)
    diff = diff_positions(row, args) if row.torch_grad else set()
    e_args, t_args = to_ember(args, diff, device), to_torch(args, diff)
    outs_e = as_tuple(row.fn(em, *e_args))
    outs_t = as_tuple(row.torch_fn()(TH, *t_args))
    assert len(outs_e) == len(outs_t), f"{row.name}: {len(outs_e)} outputs, torch has {len(outs_t)}"
    for k, (e, t) in enumerate(zip(outs_e, outs_t)):
        assert e.device == device, f"{row.name} output {k} is on {e.device}, not {device}"
        assert_same(e, t, row.tol, f"{row.name} output {k} ({dtype})")
    if diff:
        check_grads(row, outs_e, outs_t, e_args, t_args, sorted(diff), r.rng, device)


def check_grads(row: OpRow, outs_e, outs_t, e_args, t_args, diff: list, rng, device: str = "cpu") -> None:
    """Backpropagate the same random upstream gradient through both and compare input gradients."""
    gs = upstream_grads(outs_t, rng)
    pairs = [(e, t, g) for e, t, g in zip(outs_e, outs_t, gs) if g is not None]
    assert pairs, f"{row.name}: no differentiable output in torch; set grad=False"
    for e, _, _ in pairs:
        assert e.requires_grad, f"{row.name}: ember output does not require grad"
    xs_t = [t_args[i] for i in diff]
    grads_t = torch.autograd.grad(
        [t for _, t, _ in pairs], xs_t, [torch.from_numpy(g) for _, _, g in pairs], allow_unused=True
    )
    xs_e = [e_args[i] for i in diff]
    grads_e = em.autograd.grad(
        [e for e, _, _ in pairs], xs_e, [em.tensor(g, device=device) for _, _, g in pairs], allow_unused=True
    )
    for i, x_t, ge, gt in zip(diff, xs_t, grads_e, grads_t):
        gt = torch.zeros_like(x_t) if gt is None else gt
        if ge is None:
            ge = em.zeros(*x_t.shape, dtype=torch_dtype_name(x_t))
        else:
            assert ge.device == device, f"{row.name}: gradient of input {i} is on {ge.device}"
        assert_same(ge, gt, row.tol, f"{row.name} grad of input {i}", grad=True)
