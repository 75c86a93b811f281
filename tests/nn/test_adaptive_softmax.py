"""AdaptiveLogSoftmaxWithLoss against PyTorch with PyTorch's weights copied in: forward's (output, loss) and the
gradients of the input and every parameter, log_prob, predict (rows in the shortlist, in clusters, and both),
training steps, reprs, unbatched input, the jit and the meta device for log_prob, and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from tests.nn.helpers import assert_close, copy_weights

RNG = np.random.default_rng(0)

CONFIGS = {  # in_features, n_classes, cutoffs, div_value, head_bias
    "two clusters": (16, 12, [3, 7], 4.0, False),
    "one cluster, head bias": (8, 10, [2], 2.0, True),
    "three clusters": (16, 12, [1, 4, 8], 1.5, True),
    "cutoff at n_classes - 1": (6, 5, [4], 4.0, False),
}


def _pair(config: str, dtype=torch.float32):
    args = CONFIGS[config]
    ours = em.nn.AdaptiveLogSoftmaxWithLoss(*args, dtype=em.float64 if dtype == torch.float64 else None)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(*args, dtype=dtype)
    copy_weights(ours, theirs)
    return ours, theirs


def _targets(config: str, n: int) -> np.ndarray:
    """Targets in every part (shortlist and each cluster), shuffled."""
    n_classes, cutoffs = CONFIGS[config][1], [0] + CONFIGS[config][2] + [CONFIGS[config][1]]
    parts = [RNG.integers(lo, hi) for lo, hi in zip(cutoffs, cutoffs[1:])]
    return RNG.permutation(np.concatenate([parts, RNG.integers(0, n_classes, n - len(parts))]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_forward_log_prob_and_predict_match_torch(config: str, dtype) -> None:
    ours, theirs = _pair(config, dtype)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert (ours.shortlist_size, ours.n_clusters, ours.head_size, ours.cutoffs) == \
        (theirs.shortlist_size, theirs.n_clusters, theirs.head_size, theirs.cutoffs)
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    x, y = RNG.standard_normal((9, CONFIGS[config][0])).astype(np_dtype), _targets(config, 9)
    e_in, t_in = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, tout = ours(e_in, em.tensor(y)), theirs(t_in, torch.tensor(y))
    assert type(out).__name__ == "_ASMoutput" and out._fields == ("output", "loss")
    assert_close(out.output, tout.output, tol, tol, "output")
    assert_close(out.loss, tout.loss, tol, tol, "loss")
    w = RNG.standard_normal(9).astype(np_dtype)
    (out.loss * 3 + (out.output * em.tensor(w)).sum()).backward()
    (tout.loss * 3 + (tout.output * torch.tensor(w)).sum()).backward()
    assert_close(e_in.grad, t_in.grad, tol, tol, "input gradient")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, theirs_params[name].grad, tol, tol, f"grad of {name}")
    assert_close(ours.log_prob(em.tensor(x)), theirs.log_prob(torch.tensor(x)), tol, tol, "log_prob")
    np.testing.assert_array_equal(ours.predict(em.tensor(x)).numpy(), theirs.predict(torch.tensor(x)).numpy())


@pytest.mark.parametrize("rows", ["shortlist", "clusters", "both"])
def test_predict_runs_the_tails_for_the_rows_that_need_them(rows: str) -> None:
    ours, theirs = _pair("three clusters")
    with torch.no_grad():  # the first feature votes for the first cluster's token
        theirs.head.weight[theirs.shortlist_size, 0] = 5.0
    copy_weights(ours, theirs)
    x = RNG.standard_normal((8, 16)).astype(np.float32) * 0.1
    x[:, 0] = {"shortlist": -3.0, "clusters": 3.0, "both": np.array([3.0, -3.0] * 4)}[rows]
    got, want = ours.predict(em.tensor(x)), theirs.predict(torch.tensor(x))
    assert got.dtype is em.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    in_shortlist = want.numpy() < theirs.shortlist_size
    assert in_shortlist.all() if rows == "shortlist" else not in_shortlist.all()


def test_unbatched_input_empty_clusters_and_one_row() -> None:
    ours, theirs = _pair("two clusters")
    x = RNG.standard_normal(16).astype(np.float32)
    for target in (1, 5, 11):  # 0-D targets: shortlist, first and second cluster
        out, tout = ours(em.tensor(x), em.tensor(target)), theirs(torch.tensor(x), torch.tensor(target))
        assert tuple(out.output.shape) == tuple(tout.output.shape) == ()
        assert_close(out.output, tout.output, what=f"unbatched output for target {target}")
        assert_close(out.loss, tout.loss, what="unbatched loss")
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    for y in ([0, 1, 2, 0], [8, 9, 10, 11], [5]):  # only the shortlist, only the last cluster, one row
        out, tout = ours(em.tensor(x[:len(y)]), em.tensor(y)), theirs(torch.tensor(x[:len(y)]), torch.tensor(y))
        assert_close(out.output, tout.output, what=f"output for {y}")
        assert_close(out.loss, tout.loss, what=f"loss for {y}")


def test_training_steps_match_torch() -> None:
    ours, theirs = _pair("three clusters")
    for step in range(3):
        x, y = RNG.standard_normal((10, 16)).astype(np.float32), _targets("three clusters", 10)
        loss, tloss = ours(em.tensor(x), em.tensor(y)).loss, theirs(torch.tensor(x), torch.tensor(y)).loss
        assert_close(loss, tloss, 1e-5, 1e-5, f"loss at step {step}")
        loss.backward()
        tloss.backward()
        theirs_params = dict(theirs.named_parameters())
        with em.no_grad(), torch.no_grad():
            for name, p in ours.named_parameters():
                q = theirs_params[name]
                assert_close(p.grad, q.grad, 1e-5, 1e-5, f"grad of {name} at step {step}")
                p -= 0.5 * p.grad
                q -= 0.5 * q.grad
                p.grad, q.grad = None, None
        for key, value in ours.state_dict().items():
            assert_close(value, theirs.state_dict()[key], 1e-5, 1e-5, f"{key} after step {step}")


def test_log_prob_under_jit_and_on_meta() -> None:
    ours, _ = _pair("two clusters")
    step = em.jit(lambda x: ours.log_prob(x))
    for scale in (1.0, 3.0):
        x = em.tensor(RNG.standard_normal((5, 16)).astype(np.float32) * scale)
        assert_close(step(x), ours.log_prob(x), 1e-6, 1e-6, "jit log_prob")
    ours.to("meta")
    assert tuple(ours.log_prob(em.ones(7, 16, device="meta")).shape) == (7, 12)


BAD_INIT = {
    "not increasing": ([5, 3], "cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                               r"order, where each value is between 1 and n_classes-1 \(got cutoffs=\[5, 3\] for "
                               r"n_classes=10\)"),
    "reaching n_classes": ([3, 10], r"\(got cutoffs=\[3, 10\] for n_classes=10\)"),
    "repeated": ([3, 3], "unique, positive integers"),
    "zero": ([0, 3], "unique, positive integers"),
    "not integers": ([2.5], "unique, positive integers"),
    "empty": ([], "cutoffs should be a sequence of length larger than 0"),
}


@pytest.mark.parametrize("case", list(BAD_INIT))
def test_bad_cutoffs(case: str) -> None:
    cutoffs, message = BAD_INIT[case]
    with pytest.raises(ValueError, match=message):
        em.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)
    with pytest.raises(ValueError):
        torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)


BAD_CALL = {  # input shape, target, message (PyTorch raises RuntimeError too)
    "target above": ((3, 8), [1, 10, 2], r"Target values should be in \[0, 9\], but values in range \[1, 10\] were "
                                         "found"),
    "negative target": ((3, 8), [1, -1, 2], r"Target values should be in \[0, 9\], but values in range \[-1, 2\]"),
    "2-D target": ((3, 8), [[1], [2], [3]], r"0D or 1D target tensor expected, multi-target not supported \(got "
                                            r"target of size \(3, 1\)\)"),
    "3-D input": ((3, 2, 8), [1, 2, 3], r"a 1D target expects 2D input tensors of 8 features, but found inputs with "
                                        r"size \(3, 2, 8\)"),
    "2-D input for a 0-D target": ((3, 8), 1, r"a 0D target expects 1D input tensors of 8 features, but found inputs "
                                              r"with size \(3, 8\)"),
    "batch sizes differ": ((3, 8), [1, 2], r"input and target should have the same size in the batch dimension \(got "
                                           r"input \(3, 8\) and target \(2,\)\)"),
    "too few features": ((3, 7), [1, 2, 3], r"a 1D target expects 2D input tensors of 8 features, but found inputs "
                                            r"with size \(3, 7\)"),
    "float target": ((3, 8), [1.0, 2.0, 3.0], "expected an integer target, got float32"),
}


@pytest.mark.parametrize("case", list(BAD_CALL))
def test_bad_inputs_and_targets(case: str) -> None:
    shape, target, message = BAD_CALL[case]
    x = RNG.standard_normal(shape).astype(np.float32)
    y = np.asarray(target)
    y = y.astype(np.float32) if y.dtype.kind == "f" else y.astype(np.int64)
    with pytest.raises(RuntimeError, match="AdaptiveLogSoftmaxWithLoss: " + message):
        em.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(em.tensor(x), em.tensor(y))
    with pytest.raises(RuntimeError):
        torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(torch.tensor(x), torch.tensor(y))
    with pytest.raises(RuntimeError, match=r"AdaptiveLogSoftmaxWithLoss: log_prob expects 2D input tensors of 8 "
                                           r"features, but found inputs with size \(8,\)"):
        em.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4]).log_prob(em.ones(8))
