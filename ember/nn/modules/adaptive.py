"""AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax approximation for GPUs"), PyTorch's: a head over the
frequent classes plus one token per cluster of rarer classes, and per cluster a two-layer tail run only on the rows
whose target falls in it (the rows are picked on the host from the target's values, as PyTorch does)."""

from __future__ import annotations

import itertools
from collections import namedtuple

import numpy as np

from ember import creation, dtypes, ops
from ember.nn import functional as F
from ember.nn.modules.container import ModuleList, Sequential
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.tensor import Tensor

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Log-probabilities of targets over n_classes split by cutoffs into a shortlist and clusters of rarer classes;
    forward(input, target) returns (output, loss), log_prob(input) every class's, predict(input) the likeliest."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             f"order, where each value is between 1 and n_classes-1 (got cutoffs={cutoffs} for "
                             f"n_classes={n_classes})")
        kw = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw),
                                        Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self) -> None:
        """Re-initialise the head and every tail layer as Linear does."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def _check_input(self, input: Tensor, rank: int, what: str) -> None:
        if input.ndim != rank or input.shape[-1] != self.in_features:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: {what} expects {rank}D input tensors of "
                               f"{self.in_features} features, but found inputs with size {tuple(input.shape)}")

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        if target_.ndim > 1:
            raise RuntimeError("AdaptiveLogSoftmaxWithLoss: 0D or 1D target tensor expected, multi-target not "
                               f"supported (got target of size {tuple(target_.shape)})")
        self._check_input(input_, target_.ndim + 1, f"a {target_.ndim}D target")
        if target_.ndim == 1 and input_.shape[0] != target_.shape[0]:
            raise RuntimeError("AdaptiveLogSoftmaxWithLoss: input and target should have the same size in the batch "
                               f"dimension (got input {tuple(input_.shape)} and target {tuple(target_.shape)})")
        if target_.dtype.is_floating_point or target_.dtype == dtypes.bool_:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: expected an integer target, got {target_.dtype.name}")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        t = np.asarray(target.numpy()).astype(np.int64)
        if t.size and (t.min() < 0 or t.max() >= self.n_classes):
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: Target values should be in [0, {self.n_classes - 1}], "
                               f"but values in range [{t.min()}, {t.max()}] were found.")
        cluster = np.searchsorted(np.asarray(self.cutoffs), t, side="right")  # 0: the shortlist; i: tail i - 1
        device = input.device
        # each row's head column: its own class in the shortlist, else its cluster's token
        head_column = np.where(cluster == 0, t, self.shortlist_size + cluster - 1)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = ops.gather(head_logprob, 1, creation.tensor(head_column[:, None], device=device)).squeeze(1)
        rows_of, values = [], []
        for i in range(1, self.n_clusters + 1):
            rows = np.flatnonzero(cluster == i)
            if rows.size == 0:
                continue
            relative = creation.tensor((t[rows] - self.cutoffs[i - 1])[:, None], device=device)
            rows_t = creation.tensor(rows, device=device)
            cluster_logprob = F.log_softmax(self.tail[i - 1](ops.index_select(input, 0, rows_t)), dim=1)
            rows_of.append(rows)
            values.append(ops.gather(cluster_logprob, 1, relative).squeeze(1))
        if values:
            # each tail row's log-probability within its cluster, at its row (zero in the shortlist's rows)
            within = ops.scatter(creation.zeros(t.shape[0], dtype=output.dtype, device=device), 0,
                                 creation.tensor(np.concatenate(rows_of), device=device), ops.cat(values))
            output = within + output
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, _ in enumerate(itertools.pairwise(self.cutoffs)):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return ops.cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """(N, n_classes): the log-probability of every class for each row of the (N, in_features) input."""
        self._check_input(input, 2, "log_prob")
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """(N,): each row's likeliest class; the tails run only for rows whose head picks a cluster."""
        self._check_input(input, 2, "predict")
        head_output = self.head(input)
        output = ops.argmax(head_output, 1)
        outside = np.asarray((output >= self.shortlist_size).numpy())
        if not outside.any():
            return output
        if outside.all():
            return ops.argmax(self._get_full_log_prob(input, head_output), 1)
        rows = creation.tensor(np.flatnonzero(outside), device=input.device)
        best = ops.argmax(self._get_full_log_prob(ops.index_select(input, 0, rows),
                                                  ops.index_select(head_output, 0, rows)), 1)
        return ops.scatter(output, 0, rows, best)
