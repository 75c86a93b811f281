"""Operands of different dtypes in products, convolutions and layers' parameters, against PyTorch.

PyTorch computes these ops in one dtype and raises on a mix (a float32 input with a float64 weight, float values
written through an index tensor into an integer one) rather than promote or cast; Ember refuses the same mixes with a one-line error naming the op, and where PyTorch accepts a mix
(float32 norm parameters beside a float16 input, another dtype's bias in a transposed convolution) Ember gives
its result dtype and values.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import ember as em
import ember.nn.functional as F

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64"]
_SEED = iter(range(10**6))


def _arr(shape, dtype: str) -> np.ndarray:
    """Values exact in every dtype above: small integers (and halves) that float16/bfloat16 hold exactly."""
    rng = np.random.default_rng(next(_SEED))
    v = rng.integers(-3, 4, size=shape).astype(np.float64)
    return v if dtype == "int64" else v / 2


class _Lib:
    """One side of the comparison: makes tensors and names the functions, so a case is written once."""

    def __init__(self, mod, functional):
        self.mod, self.F = mod, functional

    def t(self, values: np.ndarray, dtype: str):
        if self.mod is torch:
            return torch.tensor(values).to(getattr(torch, dtype))
        return em.tensor(values).to(getattr(em, dtype))


TORCH, EMBER = _Lib(torch, torch.nn.functional), _Lib(em, F)

# name: (function of (lib, a, b) where `a` is the input's dtype and `b` the other operand's, shapes of the two)
CASES = {
    "matmul": lambda L, a, b: L.t(_arr((2, 3), a), a) @ L.t(_arr((3, 2), b), b),
    "mm": lambda L, a, b: L.mod.mm(L.t(_arr((2, 3), a), a), L.t(_arr((3, 2), b), b)),
    "bmm": lambda L, a, b: L.mod.bmm(L.t(_arr((2, 2, 3), a), a), L.t(_arr((2, 3, 2), b), b)),
    "mv": lambda L, a, b: L.mod.mv(L.t(_arr((2, 3), a), a), L.t(_arr((3,), b), b)),
    "dot": lambda L, a, b: L.mod.dot(L.t(_arr((3,), a), a), L.t(_arr((3,), b), b)),
    "inner": lambda L, a, b: L.mod.inner(L.t(_arr((2, 3), a), a), L.t(_arr((4, 3), b), b)),
    "einsum": lambda L, a, b: L.mod.einsum("ij,jk->ik", L.t(_arr((2, 3), a), a), L.t(_arr((3, 2), b), b)),
    "tensordot": lambda L, a, b: L.mod.tensordot(L.t(_arr((2, 3), a), a), L.t(_arr((3, 2), b), b), dims=1),
    "addmm input": lambda L, a, b: L.mod.addmm(L.t(_arr((2, 2), b), b), L.t(_arr((2, 3), a), a),
                                               L.t(_arr((3, 2), a), a)),
    "linear weight": lambda L, a, b: L.F.linear(L.t(_arr((2, 3), a), a), L.t(_arr((4, 3), b), b)),
    "linear bias": lambda L, a, b: L.F.linear(L.t(_arr((2, 3), a), a), L.t(_arr((4, 3), a), a),
                                              L.t(_arr((4,), b), b)),
    "linear 1-D weight": lambda L, a, b: L.F.linear(L.t(_arr((2, 3), a), a), L.t(_arr((3,), b), b)),
    "bilinear weight": lambda L, a, b: L.F.bilinear(L.t(_arr((2, 3), a), a), L.t(_arr((2, 3), a), a),
                                                    L.t(_arr((4, 3, 3), b), b)),
    "conv1d weight": lambda L, a, b: L.F.conv1d(L.t(_arr((1, 2, 5), a), a), L.t(_arr((3, 2, 3), b), b)),
    "conv2d weight": lambda L, a, b: L.F.conv2d(L.t(_arr((1, 2, 4, 4), a), a), L.t(_arr((3, 2, 3, 3), b), b)),
    "conv2d bias": lambda L, a, b: L.F.conv2d(L.t(_arr((1, 2, 4, 4), a), a), L.t(_arr((3, 2, 3, 3), a), a),
                                              L.t(_arr((3,), b), b)),
    "conv_transpose1d weight": lambda L, a, b: L.F.conv_transpose1d(L.t(_arr((1, 2, 4), a), a),
                                                                    L.t(_arr((2, 3, 3), b), b)),
    "conv_transpose2d weight": lambda L, a, b: L.F.conv_transpose2d(L.t(_arr((1, 2, 4, 4), a), a),
                                                                    L.t(_arr((2, 3, 3, 3), b), b)),
    "conv_transpose2d bias": lambda L, a, b: L.F.conv_transpose2d(L.t(_arr((1, 2, 4, 4), a), a),
                                                                  L.t(_arr((2, 3, 3, 3), a), a),
                                                                  L.t(_arr((3,), b), b)),
    "layer_norm weight": lambda L, a, b: L.F.layer_norm(L.t(_arr((2, 3), a), a), (3,), L.t(_arr((3,), b), b)),
    "layer_norm weight and bias": lambda L, a, b: L.F.layer_norm(L.t(_arr((2, 3), a), a), (3,),
                                                                 L.t(_arr((3,), b), b), L.t(_arr((3,), b), b)),
    "layer_norm bias beside the input's weight": lambda L, a, b: L.F.layer_norm(
        L.t(_arr((2, 3), a), a), (3,), L.t(_arr((3,), a), a), L.t(_arr((3,), b), b)),
    "group_norm weight": lambda L, a, b: L.F.group_norm(L.t(_arr((2, 4, 3), a), a), 2, L.t(_arr((4,), b), b)),
    "group_norm bias": lambda L, a, b: L.F.group_norm(L.t(_arr((2, 4, 3), a), a), 2, None, L.t(_arr((4,), b), b)),
    "instance_norm weight and bias": lambda L, a, b: L.F.instance_norm(
        L.t(_arr((2, 4, 3), a), a), weight=L.t(_arr((4,), b), b), bias=L.t(_arr((4,), b), b)),
    "rms_norm weight": lambda L, a, b: L.F.rms_norm(L.t(_arr((2, 3), a), a), (3,), L.t(_arr((3,), b), b)),
    "prelu weight": lambda L, a, b: L.F.prelu(L.t(_arr((2, 3), a), a), L.t(_arr((1,), b), b)),
    "lerp end": lambda L, a, b: L.mod.lerp(L.t(_arr((3,), a), a), L.t(_arr((3,), b), b), 0.5),
    "lerp weight": lambda L, a, b: L.mod.lerp(L.t(_arr((3,), a), a), L.t(_arr((3,), a), a),
                                              L.t(np.full(3, 0.25), b)),
    "lerp 0-d weight": lambda L, a, b: L.mod.lerp(L.t(_arr((3,), a), a), L.t(_arr((3,), a), a),
                                                  L.t(np.array(0.75), b)),
    "index_put values": lambda L, a, b: L.t(_arr((4,), a), a).index_put((L.t(np.array([0, 2]), "int64"),),
                                                                      L.t(_arr((2,), b) + 0.25, b)),
    "setitem values through a mask": lambda L, a, b: _set(L.t(_arr((4,), a), a), L.t(np.array([1, 0, 1, 0]) > 0,
                                                                                      "bool"), L.t(_arr((2,), b), b)),
    "scaled_dot_product_attention mask": lambda L, a, b: L.F.scaled_dot_product_attention(
        *(L.t(_arr((1, 2, 3, 4), a), a) for _ in range(3)), attn_mask=L.t(_arr((3, 3), b), b)),
    "nll_loss weight": lambda L, a, b: L.F.nll_loss(L.t(_arr((4, 3), a), a), L.t(np.array([0, 2, 1, 2]), "int64"),
                                                    weight=L.t(np.abs(_arr((3,), b)) + 1, b)),
    "cross_entropy weight": lambda L, a, b: L.F.cross_entropy(
        L.t(_arr((4, 3), a), a), L.t(np.array([0, 2, 1, 2]), "int64"), weight=L.t(np.abs(_arr((3,), b)) + 1, b)),
}

def _set(x, index, values):
    """x[index] = values, returning x."""
    x[index] = values
    return x

# PyTorch computes an integer lerp in a 0-d floating weight's dtype; Ember refuses integer lerp with a clear error
FLOAT_INPUT_ONLY = {"lerp 0-d weight"}
# PyTorch's outcome depends on the CPU here: a bfloat16 conv_transpose2d runs on oneDNN where the CPU has AVX512-BF16,
# which refuses another dtype's bias ("Input type (CPUBFloat16Type) and bias type ... should be the same"), and on
# its own kernel elsewhere, which adds it in the output's dtype. Ember does what the latter does on every CPU.
CPU_DEPENDENT = {("conv_transpose2d bias", "bfloat16")}


def _outcome(lib, case, a, b, seed):
    global _SEED
    _SEED = iter(range(seed, seed + 100))  # the same values on both sides
    try:
        return CASES[case](lib, a, b), None
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
        return None, e


@pytest.mark.parametrize("case", sorted(CASES))
def test_mixed_dtypes_are_refused_or_computed_as_pytorch_does(case: str) -> None:
    """Every pairing of the input's dtype with the other operand's: where PyTorch raises, Ember raises a one-line
    error that names the op; where PyTorch computes, Ember gives its dtype and values."""
    if em.bfloat16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    op = case.split()[0]
    bad = []
    for seed, (a, b) in enumerate(itertools.product(DTYPES, DTYPES)):
        if case in FLOAT_INPUT_ONLY and a == "int64":
            continue
        want, torch_error = _outcome(TORCH, case, a, b, 100 * seed)
        got, ember_error = _outcome(EMBER, case, a, b, 100 * seed)
        if torch_error is not None and (case, a) in CPU_DEPENDENT and "bias type" in str(torch_error):
            assert ember_error is None and got.dtype.name == a, f"{case}: {a} with {b}"
            continue
        if torch_error is not None:
            if ember_error is None:
                bad.append(f"{a} with {b}: PyTorch refuses ({str(torch_error).splitlines()[0][:60]}), Ember "
                           f"computed {got.dtype.name}")
            elif a != b and (op not in str(ember_error) or "\n" in str(ember_error)):
                bad.append(f"{a} with {b}: the error does not name {op} in one line: {ember_error}")
            continue
        if ember_error is not None:
            bad.append(f"{a} with {b}: PyTorch computes {want.dtype}, Ember raised {ember_error}")
            continue
        if got.dtype.name != str(want.dtype).removeprefix("torch."):
            bad.append(f"{a} with {b}: dtype {got.dtype.name}, PyTorch's {want.dtype}")
            continue
        tol = 2e-2 if "16" in a + b else 1e-5
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=tol, atol=tol,
                                   err_msg=f"{case}: {a} with {b}")
    assert not bad, f"{case}:\n" + "\n".join(bad)


def test_the_refusals_hold_under_autograd_and_the_jit() -> None:
    """The error comes from the op's shape rule, so a tensor needing a gradient and a traced function meet it
    too, not only the eager fast path."""
    a = em.ones(2, 3, requires_grad=True)
    w = em.ones(4, 3, dtype=em.float64)
    with pytest.raises(em.errors.DtypeError, match=r"linear: .*input float32 \(2, 3\), weight float64 \(4, 3\)"):
        F.linear(a, w)
    with pytest.raises(em.errors.DtypeError, match=r"matmul: .*float32 \(2, 3\), other float64 \(3, 4\)"):
        a @ w.T
    step = em.jit(lambda x, y: (x @ y).sum())
    with pytest.raises(em.errors.DtypeError, match="matmul"):
        step(em.ones(2, 3), em.ones(3, 2, dtype=em.float64))
    conv = em.jit(lambda x, k: F.conv2d(x, k))
    with pytest.raises(em.errors.DtypeError, match="conv2d"):
        conv(em.ones(1, 2, 4, 4), em.ones(3, 2, 3, 3, dtype=em.float16))


def test_a_module_of_another_dtype_than_its_input_is_refused_as_pytorch_does() -> None:
    """The common way to meet the rule: a float64 batch into a float32 model (and the reverse) is an error that
    names the layer's op and both dtypes, where it ran in float64 before."""
    model = em.nn.Sequential(em.nn.Linear(3, 4), em.nn.ReLU(), em.nn.LayerNorm(4))
    with pytest.raises(em.errors.DtypeError, match="linear: .*float64.*float32"):
        model(em.ones(2, 3, dtype=em.float64))
    with pytest.raises(em.errors.DtypeError, match="linear: .*float32.*float64"):
        model.double()(em.ones(2, 3))
    assert model(em.ones(2, 3, dtype=em.float64)).dtype == em.float64


# Losses PyTorch returns in one operand's float32 where Ember promotes to float64, as both do for every other loss
# (docs/errors.md, "on purpose"): Ember's values are PyTorch's computed in float64.
_PROMOTED_LOSSES = {
    "huber_loss": (lambda F, x, t: F.huber_loss(x, t, reduction="none"), "float32", "float64"),
    "soft_margin_loss": (lambda F, x, t: F.soft_margin_loss(x, t.sign(), reduction="none"), "float32", "float64"),
    "binary_cross_entropy_with_logits": (
        lambda F, x, t: F.binary_cross_entropy_with_logits(x, t.abs() / 2, reduction="none"), "float64", "float32"),
}


@pytest.mark.parametrize("name", list(_PROMOTED_LOSSES))
def test_losses_of_mixed_floats_promote(name) -> None:
    fn, input_dtype, target_dtype = _PROMOTED_LOSSES[name]
    x, t = _arr((2, 3), "float32"), _arr((2, 3), "float32") + 0.25
    ours = fn(F, EMBER.t(x, input_dtype), EMBER.t(t, target_dtype))
    theirs = fn(torch.nn.functional, TORCH.t(x, input_dtype), TORCH.t(t, target_dtype))
    in_float64 = fn(torch.nn.functional, torch.tensor(x), torch.tensor(t))
    assert ours.dtype == em.float64 and theirs.dtype == torch.float32  # the difference, pinned
    np.testing.assert_allclose(ours.numpy(), in_float64.numpy(), rtol=1e-15)
