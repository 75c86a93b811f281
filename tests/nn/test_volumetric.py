"""The 3-D layers against PyTorch: Conv3d and ConvTranspose3d (strides, paddings, dilations, groups, 'same'), max
pooling with its indices, average pooling (paddings, ceil mode, divisors), adaptive and power-average pooling,
BatchNorm3d and InstanceNorm3d over training steps; values, gradients, reprs, unbatched input, the jit, the meta
device and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from tests.nn.helpers import compare_module, randn

F = em.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")

LAYERS = {
    "Conv3d": (lambda L: L.nn.Conv3d(4, 6, 3, groups=2), (2, 4, 5, 6, 7)),
    "Conv3d strided": (lambda L: L.nn.Conv3d(3, 4, (2, 3, 2), stride=(1, 2, 3), padding=(2, 0, 1),
                                             dilation=(2, 1, 2)), (2, 3, 5, 6, 7)),
    "Conv3d same": (lambda L: L.nn.Conv3d(2, 3, (2, 3, 4), padding="same", bias=False), (1, 2, 4, 5, 6)),
    "Conv3d reflect": (lambda L: L.nn.Conv3d(2, 3, 3, padding=1, padding_mode="reflect"), (1, 2, 4, 5, 6)),
    "Conv3d unbatched": (lambda L: L.nn.Conv3d(2, 3, 2), (2, 3, 4, 5)),
    "ConvTranspose3d": (lambda L: L.nn.ConvTranspose3d(4, 6, 3, groups=2), (2, 4, 3, 4, 2)),
    "ConvTranspose3d strided": (lambda L: L.nn.ConvTranspose3d(3, 2, (3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 2),
                                                               output_padding=(1, 0, 2), dilation=(2, 1, 1)),
                                (1, 3, 3, 4, 2)),
    "MaxPool3d": (lambda L: L.nn.MaxPool3d(3, 2, padding=1), (2, 3, 5, 6, 7)),
    "MaxPool3d ceil dilated": (lambda L: L.nn.MaxPool3d((2, 3, 2), (1, 2, 2), dilation=(2, 1, 1), ceil_mode=True),
                               (1, 2, 5, 6, 7)),
    "AvgPool3d": (lambda L: L.nn.AvgPool3d(3, 2, padding=1), (2, 3, 5, 6, 7)),
    "AvgPool3d uncounted padding": (lambda L: L.nn.AvgPool3d(3, 2, 1, ceil_mode=True, count_include_pad=False),
                                    (1, 2, 5, 6, 7)),
    "AvgPool3d divisor": (lambda L: L.nn.AvgPool3d(2, divisor_override=3), (1, 2, 4, 4, 4)),
    "AdaptiveAvgPool3d": (lambda L: L.nn.AdaptiveAvgPool3d((2, 3, 4)), (2, 3, 5, 6, 7)),
    "AdaptiveAvgPool3d keep": (lambda L: L.nn.AdaptiveAvgPool3d((None, 1, 3)), (1, 2, 3, 4, 5)),
    "AdaptiveMaxPool3d": (lambda L: L.nn.AdaptiveMaxPool3d((3, 4, 5)), (2, 3, 5, 6, 7)),
    "LPPool3d": (lambda L: L.nn.LPPool3d(2, 2), (1, 2, 4, 4, 4)),
    "InstanceNorm3d": (lambda L: L.nn.InstanceNorm3d(3, affine=True, track_running_stats=True), (2, 3, 3, 4, 5)),
    "BatchNorm3d": (lambda L: L.nn.BatchNorm3d(3), (2, 3, 3, 4, 5)),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_matches_torch(name: str) -> None:
    build, shape = LAYERS[name]
    em_mod, t_mod = build(em), build(torch)
    floats = np.float32 if "Norm" in name else np.float64  # the norms' float32 buffers take float32 input
    if floats is np.float64:
        em_mod.double()
        t_mod.double()
    for step in range(2):  # the norms' running statistics change in between
        x = randn(*shape, dtype=floats) * (step + 1)
        if "LPPool" in name:
            x = np.abs(x) + 0.1
        compare_module(em_mod, t_mod, x, sync=step == 0, atol=1e-6)
    assert repr(em_mod) == repr(t_mod)


@pytest.mark.parametrize("kwargs", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
                                    {"kernel_size": (2, 3, 2), "stride": (1, 2, 2), "dilation": (2, 1, 1),
                                     "ceil_mode": True}])
def test_max_pool3d_indices_match_torch(kwargs) -> None:
    x = np.round(randn(2, 3, 5, 6, 7) * 2) / 2  # ties: the first maximum in (d, h, w) order, as PyTorch's
    out, at = F.max_pool3d(em.tensor(x), return_indices=True, **kwargs)
    t_out, t_at = torch.nn.functional.max_pool3d(torch.tensor(x), return_indices=True, **kwargs)
    np.testing.assert_array_equal(out.numpy(), t_out.numpy())
    np.testing.assert_array_equal(at.numpy(), t_at.numpy())
    out, at = F.adaptive_max_pool3d(em.tensor(x), (3, 4, 5), return_indices=True)
    t_out, t_at = torch.nn.functional.adaptive_max_pool3d(torch.tensor(x), (3, 4, 5), return_indices=True)
    np.testing.assert_array_equal(at.numpy(), t_at.numpy())


def test_conv3d_under_jit_and_on_meta() -> None:
    layer = em.nn.Conv3d(2, 3, 3, stride=2, padding=1)
    step = em.jit(lambda x: F.max_pool3d(layer(x), 2).sum())
    for scale in (1.0, 2.0):
        x = em.tensor(randn(1, 2, 6, 6, 6) * scale)
        assert abs(float(step(x)) - float(F.max_pool3d(layer(x), 2).sum())) < 1e-4
    meta = em.ones(2, 2, 6, 7, 8, device="meta")
    assert tuple(layer.to("meta")(meta).shape) == (2, 3, 3, 4, 4)
    assert tuple(F.conv_transpose3d(meta, em.ones(2, 4, 3, 3, 3, device="meta"), stride=2).shape) == (2, 4, 13, 15, 17)


BAD = {
    "conv3d of 3-D": (lambda: F.conv3d(em.ones(2, 3, 4), em.ones(1, 2, 1, 1, 1)), "conv3d: expected a 5-D"),
    "conv3d channels": (lambda: F.conv3d(em.ones(1, 3, 4, 4, 4), em.ones(2, 2, 1, 1, 1)),
                        r"conv3d: input \(1, 3, 4, 4, 4\) has 3 channels, weight \(2, 2, 1, 1, 1\) with groups=1 "
                        "expects 2"),
    "conv3d weight": (lambda: F.conv3d(em.ones(1, 2, 4, 4, 4), em.ones(2, 2, 1, 1)), "conv3d: expected a 5-D weight"),
    "conv3d dtypes": (lambda: F.conv3d(em.ones(1, 2, 4, 4, 4), em.ones(2, 2, 1, 1, 1, dtype=em.float64)),
                      "conv3d: expected operands of one dtype"),
    "conv3d too deep a kernel": (lambda: F.conv3d(em.ones(1, 1, 2, 4, 4), em.ones(1, 1, 3, 1, 1)),
                                 "conv3d: the input's depth 2"),
    "max_pool3d of 3-D": (lambda: F.max_pool3d(em.ones(2, 3, 4), 2), "max_pool3d: expected a 5-D"),
    "BatchNorm3d of 4-D": (lambda: em.nn.BatchNorm3d(2)(em.ones(2, 2, 3, 3)), "expected 5D input"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_inputs_raise_one_line_errors(name: str) -> None:
    make, message = BAD[name]
    with pytest.raises(Exception, match=message) as info:
        make()
    assert "\n" not in str(info.value)
