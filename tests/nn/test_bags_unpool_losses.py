"""EmbeddingBag, MaxUnpool1d/2d/3d and the multi-margin, multi-label margin, triplet-with-distance and CTC losses
against PyTorch: values, gradients (CTC's through the log-softmax before it, and against finite differences),
reprs and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

F, TF = em.nn.functional, torch.nn.functional
RNG = np.random.default_rng(0)


def _compare(fn_ours, fn_theirs, floats, others=(), rtol=1e-7, atol=1e-12):
    """Each function on Ember and PyTorch copies of `floats` (which get gradients) and `others`: same values, and
    the same gradients of the sum of the output times a fixed random weight."""
    ours = [em.tensor(a, requires_grad=True) for a in floats]
    theirs = [torch.tensor(a, requires_grad=True) for a in floats]
    out = fn_ours(*ours, *(em.tensor(a) for a in others))
    tout = fn_theirs(*theirs, *(torch.tensor(a) for a in others))
    assert tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    w = np.random.default_rng(1).standard_normal(tuple(tout.shape))
    (out * em.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)


BAGS = {
    "2-D rows": (np.array([[1, 2, 4], [4, 3, 2]]), None, False),
    "offsets": (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4]), False),
    "an empty bag": (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 2, 2, 7]), False),
    "include_last_offset": (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 2, 5, 8]), True),
}


@pytest.mark.parametrize("bags", list(BAGS))
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_matches_torch(bags: str, mode: str, padding_idx) -> None:
    indices, offsets, last = BAGS[bags]
    weight = RNG.standard_normal((10, 3))
    floats = [weight] + ([RNG.standard_normal(indices.shape)] if mode == "sum" else [])

    def run(lib, w, *rest):
        psw = rest[0] if mode == "sum" else None
        make = em.tensor if lib is F else torch.tensor
        return lib.embedding_bag(make(indices), w, None if offsets is None else make(offsets), mode=mode,
                                 per_sample_weights=psw, include_last_offset=last, padding_idx=padding_idx)

    _compare(lambda *a: run(F, *a), lambda *a: run(TF, *a), floats)


def test_embedding_bag_module_matches_torch() -> None:
    ours, theirs = em.nn.EmbeddingBag(10, 3, mode="max", padding_idx=-1), torch.nn.EmbeddingBag(10, 3, mode="max",
                                                                                                padding_idx=-1)
    assert repr(ours) == repr(theirs) and ours.padding_idx == 9
    assert not np.any(ours.weight.detach().numpy()[9])
    pretrained = em.nn.EmbeddingBag.from_pretrained(em.tensor(RNG.standard_normal((4, 2))), mode="sum")
    assert not pretrained.weight.requires_grad
    np.testing.assert_allclose(pretrained(em.tensor([[0, 1]])).numpy(),
                               pretrained.weight.detach().numpy()[:2].sum(0, keepdims=True))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool_matches_torch(dims: int) -> None:
    shape = {1: (2, 3, 9), 2: (2, 3, 6, 7), 3: (1, 2, 4, 6, 4)}[dims]
    pool, unpool = getattr(TF, f"max_pool{dims}d"), f"max_unpool{dims}d"
    values, at = pool(torch.tensor(RNG.standard_normal(shape)), 3, 2, 1, return_indices=True)
    size = shape[2:]
    _compare(lambda v, i: getattr(F, unpool)(v, i, 3, 2, 1, output_size=size),
             lambda v, i: getattr(TF, unpool)(v, i, 3, 2, 1, output_size=size), [values.numpy()], [at.numpy()])
    module = getattr(em.nn, f"MaxUnpool{dims}d")(3, 2, 1)
    assert repr(module) == repr(getattr(torch.nn, f"MaxUnpool{dims}d")(3, 2, 1))
    out = module(em.tensor(values.numpy()), em.tensor(at.numpy()), output_size=size)
    assert tuple(out.shape) == shape


def test_max_unpool_index_outside_the_default_size_names_output_size() -> None:
    values, at = TF.max_pool2d(torch.tensor(RNG.standard_normal((1, 1, 6, 7))), 2, return_indices=True)
    with pytest.raises(IndexError, match=r"max_unpool2d: an index is outside the \(6, 6\) output \(pass the pooled "
                                         r"input's size as output_size\)"):
        F.max_unpool2d(em.tensor(values.numpy()), em.tensor(at.numpy()), 2)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss_matches_torch(p: int, reduction: str) -> None:
    x, y, weight = RNG.standard_normal((4, 5)), np.array([0, 3, 4, 1]), np.abs(RNG.standard_normal(5))
    _compare(lambda a, t, w: F.multi_margin_loss(a, t, p, 0.7, w, reduction=reduction),
             lambda a, t, w: TF.multi_margin_loss(a, t, p, 0.7, w, reduction=reduction), [x], [y, weight])
    ours, theirs = em.nn.MultiMarginLoss(p, reduction=reduction), torch.nn.MultiMarginLoss(p, reduction=reduction)
    _compare(lambda a, t: ours(a, t), lambda a, t: theirs(a, t), [x[0]], [y[0]])


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_multilabel_margin_loss_matches_torch(reduction: str) -> None:
    x = RNG.standard_normal((4, 5))
    targets = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4], [4, 4, -1, 0, 0]])
    _compare(lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction),
             lambda a, t: TF.multilabel_margin_loss(a, t, reduction=reduction), [x], [targets])
    _compare(lambda a, t: em.nn.MultiLabelMarginLoss()(a, t), lambda a, t: torch.nn.MultiLabelMarginLoss()(a, t),
             [x[0]], [targets[0]])


@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss_matches_torch(swap: bool) -> None:
    triplet = [RNG.standard_normal((6, 3)) for _ in range(3)]
    _compare(lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, swap=swap, margin=0.5),
             lambda a, p, n: TF.triplet_margin_with_distance_loss(a, p, n, swap=swap, margin=0.5), triplet)
    ours = em.nn.TripletMarginWithDistanceLoss(distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), swap=swap)
    theirs = torch.nn.TripletMarginWithDistanceLoss(distance_function=lambda u, v: 1 - TF.cosine_similarity(u, v),
                                                    swap=swap)
    _compare(lambda *t: ours(*t), lambda *t: theirs(*t), triplet)


CTC = {  # input lengths, target lengths, zero_infinity, blank
    "full and short": ([12, 9, 7], [4, 2, 0], False, 0),
    "an impossible alignment, zeroed": ([3, 9, 7], [4, 2, 1], True, 0),
    "blank 2": ([12, 12, 5], [4, 3, 2], False, 2),
}


@pytest.mark.parametrize("case", list(CTC))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_matches_torch_through_log_softmax(case: str, reduction: str, concatenated: bool) -> None:
    input_lengths, target_lengths, zero_infinity, blank = CTC[case]
    logits = RNG.standard_normal((12, 3, 5))
    targets = np.random.default_rng(2).integers(1, 5, (3, 4))
    targets[0, 1] = targets[0, 0]  # a repeated label needs a blank between
    targets = np.where(targets == blank, 0 if blank else 1, targets)
    if concatenated:
        targets = np.concatenate([targets[n, :target_lengths[n]] for n in range(3)])

    def run(lib, x, t):
        make = em.tensor if lib is F else torch.tensor
        return lib.ctc_loss(lib.log_softmax(x, -1), t, make(np.array(input_lengths)), make(np.array(target_lengths)),
                            blank, reduction, zero_infinity)

    _compare(lambda x, t: run(F, x, t), lambda x, t: run(TF, x, t), [logits], [targets], rtol=1e-7, atol=1e-10)


def test_ctc_gradient_is_the_derivative_with_respect_to_the_log_probabilities() -> None:
    # PyTorch's own gradient here assumes a log-softmax before the loss (it adds the probabilities); Ember's is the
    # derivative itself, checked by finite differences, and the two agree on the gradient of the logits (above)
    log_probs = em.tensor(np.log(RNG.dirichlet(np.ones(4), (6, 2))), requires_grad=True)
    targets, input_lengths, target_lengths = em.tensor([[1, 2], [3, 3]]), [6, 5], [2, 2]
    assert em.autograd.gradcheck(lambda lp: F.ctc_loss(lp, targets, input_lengths, target_lengths, reduction="sum"),
                                 (log_probs,))


def test_ctc_module_and_errors() -> None:
    assert repr(em.nn.CTCLoss(blank=1)) == repr(torch.nn.CTCLoss(blank=1))
    log_probs = em.tensor(RNG.standard_normal((5, 2, 4))).log_softmax(-1)
    with pytest.raises(ValueError, match=r"ctc_loss: targets must be class indices in \[0, 4\) other than the blank 0"):
        F.ctc_loss(log_probs, em.tensor([[1, 0], [2, 3]]), [5, 5], [2, 2])
    with pytest.raises(ValueError, match="ctc_loss: input lengths .6, 5. must be within the 5 time steps"):
        F.ctc_loss(log_probs, em.tensor([[1, 2], [2, 3]]), [6, 5], [2, 2])
    with pytest.raises(Exception, match=r"ctc_loss: target_lengths must have one length per sample \(2\), got 3"):
        F.ctc_loss(log_probs, em.tensor([[1, 2], [2, 3]]), [5, 5], [2, 2, 1])


BAD = {
    "embedding_bag weights with mean": (lambda: F.embedding_bag(em.tensor([[1, 2]]), em.ones(3, 2),
                                                                per_sample_weights=em.ones(1, 2)),
                                        "embedding_bag: per_sample_weights is only supported for mode='sum'"),
    "embedding_bag offsets with 2-D": (lambda: F.embedding_bag(em.tensor([[1, 2]]), em.ones(3, 2), em.tensor([0])),
                                       "embedding_bag: offsets must be None for a 2-D input"),
    "embedding_bag 1-D without offsets": (lambda: F.embedding_bag(em.tensor([1, 2]), em.ones(3, 2)),
                                          "embedding_bag: expected a 2-D input, or a 1-D input with 1-D offsets"),
    "embedding_bag offsets start": (lambda: F.embedding_bag(em.tensor([1, 2]), em.ones(3, 2), em.tensor([1])),
                                    "embedding_bag: offsets must start at 0"),
    "multi_margin p": (lambda: F.multi_margin_loss(em.ones(2, 3), em.tensor([0, 1]), p=3),
                       "multi_margin_loss: only p = 1 and p = 2"),
    "multilabel shapes": (lambda: F.multilabel_margin_loss(em.ones(2, 3), em.tensor([0, 1])),
                          "multilabel_margin_loss: expected input and target of one shape"),
    "triplet margin": (lambda: em.nn.TripletMarginWithDistanceLoss(margin=0), "margin must be greater than 0"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_inputs_raise_one_line_errors(name: str) -> None:
    make, message = BAD[name]
    with pytest.raises(Exception, match=message) as info:
        make()
    assert "\n" not in str(info.value)
