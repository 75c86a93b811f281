"""Bool matrix products are refused on every path, as PyTorch refuses them (it has no bool kernel): the `@`
operator and its reflected form once computed a bool product."""

import pytest

import ember as em
from ember.errors import DtypeError

torch = pytest.importorskip("torch")

CALLS = {
    "a @ a": lambda a, f: a @ a,
    "a @ f": lambda a, f: a @ f,
    "f @ a": lambda a, f: f @ a,
    "em.matmul": lambda a, f: em.matmul(a, a),
    "Tensor.matmul": lambda a, f: a.matmul(a),
    "jit": lambda a, f: em.jit(lambda x: x @ x)(a),
}


@pytest.mark.parametrize("call", CALLS)
def test_bool_matrix_products_are_refused_on_every_path(call):
    a = em.tensor([[True, False], [True, True]])
    f = em.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(DtypeError, match="matmul: not defined for bool tensors"):
        CALLS[call](a, f)
    with pytest.raises(RuntimeError):  # PyTorch refuses a bool product too
        t = torch.tensor([[True, False], [True, True]])
        t @ t


def test_a_bool_product_on_meta_is_refused_by_the_shape_rule():
    m = em.ones(2, 2, dtype=em.bool, device="meta")
    with pytest.raises(DtypeError, match="matmul: not defined for bool tensors"):
        m @ m


def test_float_and_integer_products_still_run():
    f = em.tensor([[1.0, 2.0], [3.0, 4.0]])
    i = em.tensor([[1, 2], [3, 4]])
    assert (f @ f).tolist() == [[7.0, 10.0], [15.0, 22.0]] and (i @ i).tolist() == [[7, 10], [15, 22]]
