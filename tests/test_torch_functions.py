"""PyTorch functions programs reach for beyond the op table, against PyTorch: finfo/iinfo, unique, isin,
searchsorted/bucketize, bincount, histc, the index lists, grids and shape helpers, pixel shuffles, area resizing,
the triplet and multi-label soft margin losses, gumbel_softmax, and tensor() from Python data given a dtype
(values, gradients and errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

NAN, INF = float("nan"), float("inf")


def _same(got, want) -> None:
    """Same values (NaN equal to NaN), shape and dtype name; tuples element by element."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert list(got.shape) == list(want.shape), (got.shape, want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.float().numpy() if got.dtype.name == "bfloat16" else got.numpy(),
                                  want.float().numpy() if want.dtype == torch.bfloat16 else want.numpy())


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name: str) -> None:
    ours, theirs = em.finfo(getattr(em, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert em.finfo().eps == torch.finfo().eps  # the default float dtype's


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name: str) -> None:
    ours, theirs = em.iinfo(getattr(em, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max, ours.dtype) == (theirs.bits, theirs.min, theirs.max, theirs.dtype)


def test_finfo_and_iinfo_refuse_the_other_kind() -> None:
    with pytest.raises(TypeError, match="finfo: int64 is not a floating point dtype"):
        em.finfo(em.int64)
    with pytest.raises(TypeError, match="iinfo: float32 is not an integer dtype"):
        em.iinfo(em.float32)
    with pytest.raises(TypeError, match="iinfo: bool"):
        em.iinfo(em.bool)


@pytest.mark.parametrize("kwargs", [{}, {"return_inverse": True}, {"return_counts": True},
                                    {"return_inverse": True, "return_counts": True}, {"dim": 0, "return_inverse": True},
                                    {"dim": 1, "return_counts": True}])
def test_unique_matches_torch(kwargs) -> None:
    data = np.array([[3, 1, 3], [3, 1, 3], [0, 2, 0]])
    _same(em.unique(em.tensor(data), **kwargs), torch.unique(torch.tensor(data), **kwargs))
    _same(em.tensor(data).unique(**kwargs), torch.tensor(data).unique(**kwargs))


def test_unique_keeps_each_nan_as_torch_does() -> None:
    _same(em.unique(em.tensor([NAN, 1.0, NAN, 1.0])), torch.unique(torch.tensor([NAN, 1.0, NAN, 1.0])))


def test_isin_matches_torch() -> None:
    x = [3, 1, 3, 2, 1]
    _same(em.isin(em.tensor(x), em.tensor([1, 2])), torch.isin(torch.tensor(x), torch.tensor([1, 2])))
    _same(em.isin(em.tensor(x), 3, invert=True), torch.isin(torch.tensor(x), 3, invert=True))
    _same(em.isin(em.tensor([NAN, 1.0]), em.tensor([NAN])), torch.isin(torch.tensor([NAN, 1.0]), torch.tensor([NAN])))


@pytest.mark.parametrize("kwargs", [{}, {"right": True}, {"side": "right"}, {"out_int32": True}])
def test_searchsorted_and_bucketize_match_torch(kwargs) -> None:
    seq, values = [1.0, 2.0, 2.0, 3.0, INF], [[2.0, 0.5, NAN], [3.5, 2.0, INF]]
    _same(em.searchsorted(em.tensor(seq), em.tensor(values), **kwargs),
          torch.searchsorted(torch.tensor(seq), torch.tensor(values), **kwargs))
    _same(em.searchsorted(em.tensor(seq), 2.0, **kwargs), torch.searchsorted(torch.tensor(seq), 2.0, **kwargs))
    rows = [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]
    _same(em.searchsorted(em.tensor(rows), em.tensor([[3.0], [7.0]]), **kwargs),
          torch.searchsorted(torch.tensor(rows), torch.tensor([[3.0], [7.0]]), **kwargs))
    if "side" not in kwargs:
        _same(em.bucketize(em.tensor(values), em.tensor(seq), **kwargs),
              torch.bucketize(torch.tensor(values), torch.tensor(seq), **kwargs))


def test_searchsorted_with_a_sorter_and_its_errors() -> None:
    _same(em.searchsorted(em.tensor([3.0, 1.0, 2.0]), em.tensor([2.5]), sorter=em.tensor([1, 2, 0])),
          torch.searchsorted(torch.tensor([3.0, 1.0, 2.0]), torch.tensor([2.5]), sorter=torch.tensor([1, 2, 0])))
    with pytest.raises(ValueError, match="searchsorted: side='left' and right=True"):
        em.searchsorted(em.tensor([1.0]), em.tensor([1.0]), right=True, side="left")
    with pytest.raises(ValueError, match="searchsorted: the sorted sequence"):
        em.searchsorted(em.ones(2, 3), em.ones(3, 1))


@pytest.mark.parametrize("weights", [None, [0.5, 1.0, 2.0, 4.0], [1, 2, 3, 4]])
def test_bincount_matches_torch(weights) -> None:
    x = [0, 2, 2, 5]
    w_e = None if weights is None else em.tensor(weights)
    w_t = None if weights is None else torch.tensor(weights)
    _same(em.bincount(em.tensor(x), w_e, minlength=8), torch.bincount(torch.tensor(x), w_t, minlength=8))
    _same(em.bincount(em.tensor(x), w_e), torch.bincount(torch.tensor(x), w_t))
    _same(em.bincount(em.tensor([], dtype=em.int64)), torch.bincount(torch.tensor([], dtype=torch.int64)))
    with pytest.raises(ValueError, match="bincount: input must be non-negative, got -1"):
        em.bincount(em.tensor([1, -1]))
    with pytest.raises(em.errors.DtypeError, match="bincount: input must be an integer tensor"):
        em.bincount(em.tensor([1.0]))


@pytest.mark.parametrize("args", [(10, -2, 2), (7, 0, 0), (4, 0, 4), (13, -3.0, 3.3)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histc_matches_torch(args, dtype) -> None:
    values = np.random.default_rng(0).standard_normal(1000).astype(dtype) * 1.5
    values[:6] = [0.0, 1.0, 2.0, 3.0, 4.0, -2.0]  # elements on the bin edges and on max
    _same(em.histc(em.tensor(values), *args), torch.histc(torch.tensor(values), *args))
    _same(em.histc(em.tensor([1.0, 1.0]), 4), torch.histc(torch.tensor([1.0, 1.0]), 4))


@pytest.mark.parametrize("args", [(3, 3), (3, 4, 1), (4, 3, -1), (0, 0), (5, 2, -3)])
def test_tril_and_triu_indices_match_torch(args) -> None:
    _same(em.tril_indices(*args), torch.tril_indices(*args))
    _same(em.triu_indices(*args), torch.triu_indices(*args))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_torch(indexing) -> None:
    tensors = ([1, 2], [3, 4, 5], [6])
    ours = em.meshgrid(*[em.tensor(t) for t in tensors], indexing=indexing)
    _same(tuple(ours), tuple(torch.meshgrid(*[torch.tensor(t) for t in tensors], indexing=indexing)))
    _same(tuple(em.meshgrid([em.tensor([1.0]), em.tensor([2.0, 3.0])])),
          tuple(torch.meshgrid([torch.tensor([1.0]), torch.tensor([2.0, 3.0])], indexing="ij")))


@pytest.mark.parametrize("fn", ["atleast_1d", "atleast_2d", "atleast_3d"])
def test_atleast_nd_matches_torch(fn) -> None:
    for shape in [(), (3,), (2, 3), (2, 3, 4)]:
        _same(getattr(em, fn)(em.zeros(*shape)), getattr(torch, fn)(torch.zeros(shape)))
    _same(getattr(em, fn)(em.zeros(2), em.zeros(())), getattr(torch, fn)(torch.zeros(2), torch.zeros(())))


def test_repeat_interleave_of_counts_alone_and_its_errors() -> None:
    _same(em.repeat_interleave(em.tensor([2, 0, 1])), torch.repeat_interleave(torch.tensor([2, 0, 1])))
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be non-negative"):
        em.repeat_interleave(em.ones(2), em.tensor([1, -1]), 0)
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be an integer tensor of 1 or 2"):
        em.repeat_interleave(em.ones(2), em.tensor([1, 1, 1]), 0)


def test_diagonal_matrices_keep_zeros_beside_infinities() -> None:
    """A where, not a product by the identity: inf * 0 would put NaN beside an infinite diagonal entry."""
    _same(em.diag(em.tensor([INF, 1.0]), 1), torch.diag(torch.tensor([INF, 1.0]), 1))
    _same(em.diag_embed(em.tensor([[NAN, -INF]])), torch.diag_embed(torch.tensor([[NAN, -INF]])))


def test_nan_to_num_of_integers_and_in_place() -> None:
    _same(em.nan_to_num(em.tensor([1, 2])), torch.nan_to_num(torch.tensor([1, 2])))
    x, t = em.tensor([NAN, INF, 1.0]), torch.tensor([NAN, INF, 1.0])
    x.nan_to_num_(posinf=5.0)
    t.nan_to_num_(posinf=5.0)
    _same(x, t)


def test_errors_name_the_function() -> None:
    with pytest.raises(em.errors.DtypeError, match="quantile: input must be float32 or float64, got int64"):
        em.quantile(em.tensor([1, 2]), 0.5)
    with pytest.raises(ValueError, match=r"quantile: q values must be in the range \[0, 1\]"):
        em.quantile(em.tensor([1.0, 2.0]), 1.5)
    with pytest.raises(em.errors.DtypeError, match="quantile: q must have the input's dtype"):
        em.quantile(em.tensor([1.0, 2.0]), em.tensor([0.5], dtype=em.float64))
    with pytest.raises(em.errors.DtypeError, match="heaviside: input and values must have one dtype"):
        em.heaviside(em.tensor([1.0]), em.tensor([1.0], dtype=em.float64))
    with pytest.raises(em.errors.ShapeError, match=r"median: cannot take the median of an empty dimension"):
        em.median(em.zeros(0))
    with pytest.raises(em.errors.DataDependentError, match="unique"):
        em.unique(em.ones(3, device="meta"))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8",
                                   "bool"])
def test_tensor_from_python_data_with_a_dtype_matches_torch(dtype) -> None:
    """Python floats go straight to the dtype asked for (they were rounded through float32 on the way to
    float64), and numbers outside an integer dtype's range are an error (they wrapped around)."""
    if getattr(em, dtype) is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    for data in ([1.8, 1e300, -2.5], [2**60 + 1, 3], 0.1, [[True, False]], [255, 0], [-1], [-200], [-257],
                 [3.9, -3.9], [-1.0], 2**63 - 1):
        try:
            want = torch.tensor(data, dtype=getattr(torch, dtype)).tolist()
        except RuntimeError:
            with pytest.raises(RuntimeError, match=f"tensor: value .* cannot be converted to {dtype} without overflow"):
                em.tensor(data, dtype=getattr(em, dtype))
            continue
        assert em.tensor(data, dtype=getattr(em, dtype)).tolist() == want, data


def _forward_and_grads(fn_em, fn_torch, arrays, atol=1e-6):
    """fn on tensors made from `arrays` (all needing gradients): the same output and gradients in both."""
    xs = [em.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = fn_em(*xs), fn_torch(*ts)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=atol, rtol=1e-5)
    g = np.random.default_rng(1).standard_normal(tuple(want.shape)).astype(np.float32)
    out.backward(em.tensor(g))
    want.backward(torch.tensor(g))
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=atol, rtol=1e-5)


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("factor", [2, 3])
def test_pixel_shuffle_and_unshuffle_match_torch(factor) -> None:
    x = RNG.standard_normal((2, 2 * factor * factor, 3, 2)).astype(np.float32)
    _forward_and_grads(lambda t: em.nn.functional.pixel_shuffle(t, factor),
                       lambda t: torch.nn.functional.pixel_shuffle(t, factor), [x])
    y = RNG.standard_normal((2, 3, 2 * factor, 3 * factor)).astype(np.float32)
    _forward_and_grads(lambda t: em.nn.PixelUnshuffle(factor)(t), lambda t: torch.nn.PixelUnshuffle(factor)(t), [y])
    with pytest.raises(ValueError, match="pixel_shuffle: expected"):
        em.nn.functional.pixel_shuffle(em.ones(1, 3, 2, 2), 2)


@pytest.mark.parametrize("kwargs", [{"size": (3, 4)}, {"scale_factor": 0.5}, {"size": (7, 9)}])
def test_area_interpolation_matches_torch(kwargs) -> None:
    x = RNG.standard_normal((2, 3, 7, 9)).astype(np.float32)
    _forward_and_grads(lambda t: em.nn.functional.interpolate(t, mode="area", **kwargs),
                       lambda t: torch.nn.functional.interpolate(t, mode="area", **kwargs), [x])
    _forward_and_grads(lambda t: em.nn.functional.interpolate(t[:, :, 0], mode="area", scale_factor=0.5),
                       lambda t: torch.nn.functional.interpolate(t[:, :, 0], mode="area", scale_factor=0.5), [x])


@pytest.mark.parametrize("kwargs", [{}, {"swap": True, "p": 1.0, "margin": 0.3}, {"reduction": "none"},
                                    {"reduction": "sum", "p": 3.0}])
def test_triplet_margin_loss_matches_torch(kwargs) -> None:
    arrays = [RNG.standard_normal((4, 5)).astype(np.float32) for _ in range(3)]
    _forward_and_grads(lambda a, p, n: em.nn.TripletMarginLoss(**kwargs)(a, p, n),
                       lambda a, p, n: torch.nn.TripletMarginLoss(**kwargs)(a, p, n), arrays)


@pytest.mark.parametrize("reduction", ["mean", "none", "sum"])
def test_multilabel_soft_margin_loss_matches_torch(reduction) -> None:
    x = RNG.standard_normal((4, 5)).astype(np.float32) * 3
    target = (RNG.random((4, 5)) > 0.5).astype(np.float32)
    weight = RNG.random(5).astype(np.float32)
    _forward_and_grads(
        lambda t: em.nn.functional.multilabel_soft_margin_loss(t, em.tensor(target), em.tensor(weight),
                                                               reduction=reduction),
        lambda t: torch.nn.functional.multilabel_soft_margin_loss(t, torch.tensor(target), torch.tensor(weight),
                                                                  reduction=reduction), [x])


def test_gumbel_softmax_samples_and_passes_the_soft_gradient_straight_through() -> None:
    """A random draw, so its properties rather than PyTorch's values: soft samples sum to 1, hard ones are
    one-hot, and a hard sample's gradient is the soft sample's."""
    em.manual_seed(0)
    logits = em.tensor(RNG.standard_normal((64, 5)).astype(np.float32), requires_grad=True)
    soft = em.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(1).detach().numpy(), 1.0, rtol=1e-6)
    hard = em.nn.functional.gumbel_softmax(logits, hard=True)
    assert set(np.unique(hard.detach().numpy())) <= {0.0, 1.0} and (hard.sum(1) == 1).all()
    weights = em.tensor(RNG.standard_normal((64, 5)).astype(np.float32))
    (hard * weights).sum().backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0
    # the draws follow the logits: the most likely class is picked most often
    em.manual_seed(1)
    peaked = em.tensor([[0.0, 3.0, 0.0]]).expand(2000, 3)
    picks = em.nn.functional.gumbel_softmax(peaked, hard=True).sum(0).numpy()
    assert picks[1] > 0.8 * 2000 and picks.sum() == 2000


@pytest.mark.parametrize(("shape", "kwargs"), [((2, 3, 7, 6), {"kernel_size": 3}),
                                               ((2, 3, 7, 6), {"kernel_size": (2, 3), "stride": 2, "padding": 1,
                                                               "dilation": (1, 2)}),
                                               ((3, 5, 5), {"kernel_size": 2})])
def test_unfold_and_fold_match_torch(shape, kwargs) -> None:
    """Overlapping blocks: unfold's gradient adds the overlaps up, fold sums them into the image."""
    x = RNG.standard_normal(shape).astype(np.float32)
    _forward_and_grads(lambda t: em.nn.Unfold(**kwargs)(t), lambda t: torch.nn.Unfold(**kwargs)(t), [x])
    cols = torch.nn.functional.unfold(torch.tensor(x), **kwargs).numpy()
    cols = RNG.standard_normal(cols.shape).astype(np.float32)
    _forward_and_grads(lambda t: em.nn.Fold(shape[-2:], **kwargs)(t), lambda t: torch.nn.Fold(shape[-2:], **kwargs)(t),
                       [cols])
    with pytest.raises(ValueError, match="fold: expected input of shape"):
        em.nn.functional.fold(em.ones(1, 5, 3), (4, 4), 2)


def test_cdist_gradient_is_zero_where_rows_coincide() -> None:
    """PyTorch's value there (a root's derivative at 0 is infinite: NaN unless kept apart)."""
    a = em.tensor([[1.0, 2.0], [0.0, 0.0]], requires_grad=True)
    for p in (2.0, 0.5, 3.0):
        a.grad = None
        em.cdist(a, em.tensor([[1.0, 2.0]]), p).sum().backward()
        assert np.isfinite(a.grad.numpy()).all() and a.grad.numpy()[0].tolist() == [0.0, 0.0], p
    with pytest.raises(em.errors.ShapeError, match=r"cdist: expected \(\.\.\., P, M\) and \(\.\.\., R, M\)"):
        em.cdist(em.ones(2, 3), em.ones(2, 4))


@pytest.mark.parametrize("name", ["quantile", "quantile of a traced q", "median", "nan_to_num", "diag", "kron", "cdist",
                                  "logcumsumexp", "cummax", "unfold"])
def test_composed_functions_trace_under_the_jit(name) -> None:
    """They are made of ops, so ember.jit traces them into graphs that give eager's values, on later calls too: the
    data changed in place and the traced q changed between calls (q values are checked where they are known: a
    traced q is not)."""
    fns = {
        "quantile": lambda t: em.quantile(t, 0.3, 1),
        "quantile of a traced q": lambda t, q: em.quantile(t, q, 1),
        "median": lambda t: em.median(t, 1)[0],
        "nan_to_num": lambda t: em.nan_to_num(t / 0),
        "diag": lambda t: em.diag(t[0], 1),
        "kron": lambda t: em.kron(t, t),
        "cdist": lambda t: em.cdist(t, t),
        "logcumsumexp": lambda t: em.logcumsumexp(t, 1),
        "cummax": lambda t: em.cummax(t, 1)[0],
        "unfold": lambda t: em.nn.functional.unfold(t[None, None], 2),
    }
    x = em.tensor(RNG.standard_normal((4, 5)).astype(np.float32))
    args = (x, em.tensor([0.2, 0.5])) if name == "quantile of a traced q" else (x,)
    fn, traced = fns[name], em.jit(fns[name])
    for step in range(3):
        np.testing.assert_allclose(traced(*args).numpy(), fn(*args).numpy(), rtol=1e-6, equal_nan=True,
                                   err_msg=f"call {step}")
        x.mul_(-1.5).add_(0.25)  # new values in the same tensor, as a training loop's batch buffer gets
        if len(args) == 2:
            args[1].copy_(em.tensor([0.9, 0.1]))
    assert traced.trace_count == 1


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive_matches_torch(dim) -> None:
    data = np.array([[1, 1], [1, 1], [2, 0], [1, 1], [1, 1]])
    _same(em.unique_consecutive(em.tensor(data), True, True, dim),
          torch.unique_consecutive(torch.tensor(data), return_inverse=True, return_counts=True, dim=dim))


@pytest.mark.parametrize("kwargs", [{"bins": 4, "range": (0.0, 3.0)}, {"bins": 10}, {"bins": 7, "density": True},
                                    {"bins": 5, "weight": True}])
def test_histogram_matches_torch(kwargs) -> None:
    rng = np.random.default_rng(5)  # its own draws: the counts are compared exactly, whatever ran before
    values = rng.standard_normal(500).astype(np.float32)
    weight = rng.random(500).astype(np.float32)
    ek = {k: (em.tensor(weight) if k == "weight" else v) for k, v in kwargs.items()}
    tk = {k: (torch.tensor(weight) if k == "weight" else v) for k, v in kwargs.items()}
    ours, theirs = em.histogram(em.tensor(values), **ek), torch.histogram(torch.tensor(values), **tk)
    np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-5)
    # the edges are ember.linspace's: float64 steps rounded once, where PyTorch steps in float32 (its rounding
    # grows with the range's ends, so the tolerance does)
    assert ours.bin_edges.dtype is em.float32
    span = float(np.abs(theirs.bin_edges.numpy()).max())
    np.testing.assert_allclose(ours.bin_edges.numpy(), theirs.bin_edges.numpy(), rtol=0, atol=8e-7 * span)
    _same(tuple(em.histogram(em.tensor([1.0, 2.0, 1.0]), em.tensor([0.0, 1.0, 2.5, 3.0]))),
          tuple(torch.histogram(torch.tensor([1.0, 2.0, 1.0]), torch.tensor([0.0, 1.0, 2.5, 3.0]))))


def test_mode_picks_the_smallest_most_frequent_value_at_its_last_position() -> None:
    for data, dim in (([[1, 2, 2, 3, 3], [4, 4, 1, 1, 0]], 1), ([1.0, NAN, NAN, 2.0], 0), ([[1, 1], [2, 1], [2, 2]], 0)):
        _same(tuple(em.mode(em.tensor(data), dim)), tuple(torch.mode(torch.tensor(data), dim)))
    _same(tuple(em.tensor([[1, 2, 2], [3, 3, 1]]).mode(1, keepdim=True)),
          tuple(torch.tensor([[1, 2, 2], [3, 3, 1]]).mode(1, keepdim=True)))


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: em.histc(em.ones(3), bins=0), ValueError, "histc: bins must be positive, got 0"),
    (lambda: em.histc(em.ones(3), 4, min=2, max=1), ValueError, r"histc: max \(1.0\) must be at least min \(2.0\)"),
    (lambda: em.histc(em.tensor([1, 2]), 4), em.errors.DtypeError, "histc: input must be floating point"),
    (lambda: em.histogram(em.tensor([1, 2]), 4), em.errors.DtypeError, "histogram: input must be floating point"),
    (lambda: em.quantile(em.ones(3), 0.5, interpolation="cubic"), ValueError, "quantile: interpolation must be"),
    (lambda: em.searchsorted(em.ones(3), em.ones(2), side="middle"), ValueError, "searchsorted: side must be"),
    (lambda: em.bucketize(em.ones(2), em.ones(2, 2)), em.errors.ShapeError, "bucketize: boundaries must be 1-D"),
    (lambda: em.rot90(em.ones(2, 2), 1, (0, 0)), ValueError, "rot90: the two dims must differ"),
    (lambda: em.rot90(em.ones(2), 1), em.errors.ShapeError, "rot90: expected two dims"),
    (lambda: em.diag(em.ones(2, 2, 2)), em.errors.ShapeError, r"diag: expected a 1-D or 2-D tensor, got shape \(2, 2, 2\)"),
    (lambda: em.diag_embed(em.ones(2), 0, 0, 0), ValueError, "diag_embed: dim1 and dim2 must differ"),
    (lambda: em.meshgrid(em.ones(2, 2)), em.errors.ShapeError, "meshgrid: expected 0-D or 1-D tensors"),
    (lambda: em.meshgrid(em.ones(2), em.ones(2, dtype=em.int64)), TypeError, "meshgrid: expected tensors of one dtype"),
    (lambda: em.meshgrid(em.ones(2), indexing="yx"), ValueError, "meshgrid: indexing must be 'ij' or 'xy'"),
    (lambda: em.repeat_interleave(em.ones(3), 2, output_size=5), ValueError, "repeat_interleave: output_size=5"),
    (lambda: em.tensor_split(em.ones(3), 0), ValueError, "tensor_split: the number of sections must be positive"),
    (lambda: em.linalg.matrix_power(em.ones(2, 3), 2), em.errors.ShapeError, "linalg.matrix_power: expected square"),
    (lambda: em.cdist(em.ones(2, 3), em.ones(2, 3), -1.0), ValueError, "cdist: p must be non-negative"),
    (lambda: em.mode(em.ones(0)), em.errors.ShapeError, "mode: cannot take the mode of an empty dimension"),
    (lambda: em.trace(em.ones(3)), em.errors.ShapeError, r"trace: expected a 2-D tensor, got shape \(3,\)"),
    (lambda: em.vdot(em.ones(2, 2), em.ones(2)), em.errors.ShapeError, "vdot: expected 1-D tensors"),
    (lambda: em.addmm(em.ones(3, 3), em.ones(2, 2), em.ones(2, 2), beta=0), em.errors.ShapeError, "addmm:"),
    (lambda: em.cov(em.ones(2, 2, 2)), em.errors.ShapeError, "cov: expected a 1-D or 2-D input"),
    (lambda: em.cov(em.ones(2, 3), fweights=em.ones(2)), em.errors.ShapeError, "cov: weights must be 1-D with one value"),
    (lambda: em.nn.functional.unfold(em.ones(1, 1, 2, 2), 3), ValueError, "unfold: a 2x2 image padded by"),
    (lambda: em.nn.functional.pixel_unshuffle(em.ones(1, 1, 3, 3), 2), ValueError, "pixel_unshuffle: expected"),
    (lambda: em.logcumsumexp(em.tensor([1, 2]), 0), em.errors.DtypeError, "logcumsumexp: input must be floating point"),
    (lambda: em.round(em.tensor([1, 2]), decimals=1), em.errors.DtypeError, "round: decimals needs a floating-point"),
])
def test_bad_inputs_get_one_line_errors_naming_the_function(call, error, message) -> None:
    with pytest.raises(error, match=message) as caught:
        call()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("norm_type", "kernel_size", "stride", "ceil_mode"),
                         [(2.0, 2, None, False), (3.0, (2, 3), 1, False), (float("inf"), 2, None, False),
                          (1.5, 3, 2, True)])
def test_lp_pool_matches_torch(norm_type, kernel_size, stride, ceil_mode) -> None:
    x = np.abs(RNG.standard_normal((2, 3, 6, 7)).astype(np.float32)) + 0.1
    _forward_and_grads(lambda t: em.nn.LPPool2d(norm_type, kernel_size, stride, ceil_mode)(t),
                       lambda t: torch.nn.LPPool2d(norm_type, kernel_size, stride, ceil_mode)(t), [x], atol=1e-5)
    k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    _forward_and_grads(lambda t: em.nn.LPPool1d(norm_type, k, stride, ceil_mode)(t[:, :, 0]),
                       lambda t: torch.nn.LPPool1d(norm_type, k, stride, ceil_mode)(t[:, :, 0]), [x], atol=1e-5)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_local_response_norm_matches_torch(size) -> None:
    y = RNG.standard_normal((2, 7, 5, 4)).astype(np.float32)
    _forward_and_grads(lambda t: em.nn.LocalResponseNorm(size, 1e-2, 0.75, 2.0)(t),
                       lambda t: torch.nn.LocalResponseNorm(size, 1e-2, 0.75, 2.0)(t), [y], atol=1e-5)
    _forward_and_grads(lambda t: em.nn.functional.local_response_norm(t[:, :, 0], size),
                       lambda t: torch.nn.functional.local_response_norm(t[:, :, 0], size), [y], atol=1e-5)
    with pytest.raises(ValueError, match="local_response_norm: expected 3-D or higher input"):
        em.nn.functional.local_response_norm(em.ones(2, 3), size)


@pytest.mark.parametrize("name", ["hann", "hamming", "blackman", "bartlett", "kaiser"])
@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 8])
def test_windows_match_torch(name: str, periodic: bool, n: int) -> None:
    ours = getattr(em, f"{name}_window")(n, periodic)
    theirs = getattr(torch, f"{name}_window")(n, periodic)
    assert ours.dtype == em.float32 and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-6)
    doubles = getattr(em, f"{name}_window")(n, periodic, dtype=em.float64)
    np.testing.assert_allclose(doubles.numpy(), getattr(torch, f"{name}_window")(n, periodic, dtype=torch.float64),
                               atol=1e-12)


def test_dtype_and_shape_questions_match_torch() -> None:
    pairs = [(em.ones(2, dtype=em.int32), 2.5), (em.ones(2, dtype=em.float16), em.tensor(1.0, dtype=em.float64)),
             (em.ones(2, dtype=em.uint8), em.ones(2, dtype=em.int8)), (True, em.ones(2, dtype=em.int16))]
    for a, b in pairs:
        ta = torch.tensor(a.numpy()) if isinstance(a, em.Tensor) else a
        tb = torch.tensor(b.numpy()) if isinstance(b, em.Tensor) else b
        assert em.result_type(a, b).name == str(torch.result_type(ta, tb)).removeprefix("torch.")
    names = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
    for a in names:
        for b in names:
            assert em.can_cast(getattr(em, a), getattr(em, b)) == torch.can_cast(getattr(torch, a), getattr(torch, b))
    assert tuple(em.broadcast_shapes((2, 1), (3,), 1)) == tuple(torch.broadcast_shapes((2, 1), (3,), 1))
    x = em.ones(2, 3, dtype=em.uint8)
    assert (em.is_signed(x), em.is_floating_point(x), em.is_complex(x), x.is_signed()) == (False, False, False, False)
    assert em.is_nonzero(em.tensor([0.5])) and not em.is_nonzero(em.tensor(0))
    assert em.is_same_size(x, em.zeros(2, 3)) and not x.is_same_size(em.zeros(3, 2))
    with pytest.raises(RuntimeError, match=r"is_nonzero: expected a tensor of one value, got shape \(2,\)"):
        em.is_nonzero(em.ones(2))
    with pytest.raises(Exception, match="broadcast_shapes"):
        em.broadcast_shapes((2, 3), (4,))


def test_gcd_lcm_refuse_floats_and_scatter_functions_check_their_inputs() -> None:
    with pytest.raises(Exception, match="gcd"):
        em.gcd(em.ones(2), em.ones(2))
    bad = {
        "hsplit": (lambda: em.hsplit(em.ones(2, 5), 2), "hsplit: dim 1 of size 5 does not split into 2 equal parts"),
        "vsplit": (lambda: em.vsplit(em.ones(4), 2), r"vsplit: expected a tensor of 2 dims or more, got shape \(4,\)"),
        "cross": (lambda: em.cross(em.ones(2, 4), em.ones(2, 4)), r"cross: no dim of size 3 in \(2, 4\)"),
        "cross dim": (lambda: em.linalg.cross(em.ones(3, 2), em.ones(3, 2)), r"cross: dim 1 of \(3, 2\) must have size 3"),
        "combinations": (lambda: em.combinations(em.ones(2, 2)), "combinations: expected a 1-d tensor"),
        "masked_scatter": (lambda: em.masked_scatter(em.zeros(4), em.tensor([True] * 4), em.ones(3)),
                           "masked_scatter: the mask selects 4 values, the source has only 3"),
        "index_copy": (lambda: em.index_copy(em.zeros(3, 2), 0, em.tensor([3]), em.ones(1, 2)),
                       r"index_copy: index \[3\] is out of bounds for dim 0 of size 3"),
        "slice_scatter": (lambda: em.slice_scatter(em.zeros(4, 2), em.ones(3, 2), 0, 0, 2),
                          r"slice_scatter: expected a source of shape \(2, 2\), got \(3, 2\)"),
        "take": (lambda: em.take(em.zeros(2, 2), em.tensor([4])), "index 4 is out of bounds"),
        "window": (lambda: em.hann_window(4, dtype=em.int32), "hann_window: expected a floating-point dtype"),
    }
    for name, (make, message) in bad.items():
        with pytest.raises(Exception, match=message) as info:
            make()
        assert "\n" not in str(info.value), name


_R = np.random.default_rng(21)
TOP_LEVEL = {  # name: PyTorch's positional arguments
    "adaptive_avg_pool1d": (_R.standard_normal((2, 3, 7)), 3),
    "avg_pool1d": (_R.standard_normal((2, 3, 7)), 3, 2, 1, True, False),
    "bilinear": (_R.standard_normal((2, 3)), _R.standard_normal((2, 4)), _R.standard_normal((5, 3, 4)),
                 _R.standard_normal(5)),
    "celu": (_R.standard_normal(5), 0.5),
    "channel_shuffle": (_R.standard_normal((1, 6, 2, 2)), 3),
    "conv1d": (_R.standard_normal((1, 4, 9)), _R.standard_normal((6, 2, 3)), _R.standard_normal(6), 2, 1, 1, 2),
    "conv3d": (_R.standard_normal((1, 2, 4, 5, 5)), _R.standard_normal((3, 2, 2, 3, 2)), None, 1, (1, 0, 1)),
    "conv_transpose1d": (_R.standard_normal((1, 2, 5)), _R.standard_normal((2, 3, 3)), None, 2, 1, 1),
    "conv_transpose3d": (_R.standard_normal((1, 2, 2, 3, 2)), _R.standard_normal((2, 3, 2, 2, 2)), None, 2),
    "cosine_similarity": (_R.standard_normal((3, 4)), _R.standard_normal((3, 4)), 0, 1e-6),
    "dropout": (_R.standard_normal(5), 0.5, False),
    "alpha_dropout": (_R.standard_normal(5), 0.5, False),
    "feature_alpha_dropout": (_R.standard_normal((2, 5)), 0.5, False),
    "group_norm": (_R.standard_normal((2, 4, 3)), 2, _R.standard_normal(4), _R.standard_normal(4), 1e-3),
    "hardshrink": (_R.standard_normal(6), 0.7),
    "layer_norm": (_R.standard_normal((2, 4)), (4,), _R.standard_normal(4), _R.standard_normal(4), 1e-3),
    "max_pool1d": (_R.standard_normal((1, 2, 9)), 3, 2, 1, 1, True),
    "max_pool1d_with_indices": (_R.standard_normal((1, 2, 9)), 3, 2),
    "max_pool3d": (_R.standard_normal((1, 2, 4, 4, 4)), 2, 2, 1),
    "pairwise_distance": (_R.standard_normal((3, 4)), _R.standard_normal((3, 4)), 1.5, 1e-6, True),
    "pdist": (_R.standard_normal((4, 3)), 1.0),
    "pixel_shuffle": (_R.standard_normal((1, 8, 2, 2)), 2),
    "pixel_unshuffle": (_R.standard_normal((1, 2, 4, 4)), 2),
    "prelu": (_R.standard_normal((2, 3, 4)), _R.standard_normal(3)),
    "rms_norm": (_R.standard_normal((2, 4)), (4,), _R.standard_normal(4), 1e-3),
    "rrelu": (_R.standard_normal(6), 0.1, 0.3, False),
    "selu": (_R.standard_normal(5),),
    "threshold": (_R.standard_normal(5), 0.1, -2.0),
}


@pytest.mark.parametrize("name", list(TOP_LEVEL))
def test_top_level_functional_names_take_torchs_arguments(name: str) -> None:
    args = TOP_LEVEL[name]
    ours = getattr(em, name)(*(em.tensor(a) if isinstance(a, np.ndarray) else a for a in args))
    theirs = getattr(torch, name)(*(torch.tensor(a) if isinstance(a, np.ndarray) else a for a in args))
    for got, want in zip(ours if isinstance(ours, tuple) else (ours,), theirs if isinstance(theirs, tuple) else (theirs,)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-9)
