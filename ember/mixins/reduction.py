"""Reductions, scans, sorting and softmax methods (x.sum() is ember.sum(x))."""

from __future__ import annotations

from ember.mixins.op_method import op_method


class ReductionMixin:
    """Reductions, scans, sorting and softmax methods of `ember.Tensor`."""

    __slots__ = ()

    sum = op_method()
    mean = op_method()
    prod = op_method()
    max = op_method()
    min = op_method()
    amax = op_method()
    amin = op_method()
    argmax = op_method()
    argmin = op_method()
    var = op_method()
    std = op_method()
    logsumexp = op_method()
    all = op_method()
    any = op_method()
    norm = op_method()
    count_nonzero = op_method()
    softmax = op_method()
    log_softmax = op_method()
    cumsum = op_method()
    cumprod = op_method()
    cummax = op_method()
    cummin = op_method()
    logcumsumexp = op_method()
    sort = op_method()
    argsort = op_method()
    topk = op_method()
    kthvalue = op_method()
    median = op_method()
    nanmedian = op_method()
    quantile = op_method()
    nanquantile = op_method()
    nansum = op_method()
    nanmean = op_method()
    aminmax = op_method()
    unique = op_method()
    bincount = op_method()
    histc = op_method()
    isin = op_method()
    mode = op_method()
    unique_consecutive = op_method()
    histogram = op_method()
    cov = op_method()
    corrcoef = op_method()
    msort = op_method()
