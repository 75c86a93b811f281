"""Anomaly detection against PyTorch's: the same programs, the same node blamed for a NaN gradient, the forward
call's line in the warning, the settings' states, and nothing changed outside the mode."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember as em


def _nan_through_sqrt(lib):
    x = lib.tensor([1.0, 0.0, 2.0], requires_grad=True)
    y = x.sqrt()  # the forward line the warning must show
    (y * 0.0).sum().backward()  # 0 * inf = NaN in sqrt's gradient
    return x


def _run_recording(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except RuntimeError as e:
            return str(e), [str(w.message) for w in caught]
    return None, [str(w.message) for w in caught]


@pytest.mark.parametrize("form", ["context", "decorator", "function"])
def test_a_nan_gradient_names_the_node_as_torch_does(form) -> None:
    messages = {}
    for lib in (torch, em):
        if form == "context":
            def run(lib=lib):
                with lib.autograd.detect_anomaly():
                    _nan_through_sqrt(lib)
        elif form == "decorator":  # PyTorch's detect_anomaly is no decorator: its context manager stands in
            if lib is torch:
                def run(lib=lib):
                    with lib.autograd.detect_anomaly():
                        _nan_through_sqrt(lib)
            else:
                run = lib.autograd.detect_anomaly()(lambda lib=lib: _nan_through_sqrt(lib))
        else:
            def run(lib=lib):
                lib.autograd.set_detect_anomaly(True)
                try:
                    _nan_through_sqrt(lib)
                finally:
                    lib.autograd.set_detect_anomaly(False)
        messages[lib] = _run_recording(run)
        assert not lib.is_anomaly_enabled()
    (theirs, _), (ours, warned) = messages[torch], messages[em]
    assert theirs == "Function 'SqrtBackward0' returned nan values in its 0th output."
    assert ours == "Function 'sqrtBackward' returned nan values in its 0th output."
    detected = [w for w in warned if w.startswith("Error detected in sqrtBackward")]
    assert len(detected) == 1 and "y = x.sqrt()  # the forward line the warning must show" in detected[0]


def test_check_nan_off_and_the_mode_off_let_nan_through_as_torch() -> None:
    for lib in (torch, em):
        with lib.autograd.detect_anomaly(check_nan=False):
            assert lib.is_anomaly_enabled() and not lib.is_anomaly_check_nan_enabled()
            x = _nan_through_sqrt(lib)
        assert np.isnan(x.grad.numpy()[1])
        x = _nan_through_sqrt(lib)
        assert np.isnan(x.grad.numpy()[1])
        assert not lib.is_anomaly_enabled() and lib.is_anomaly_check_nan_enabled()


def test_set_detect_anomaly_as_a_block_restores_the_previous_state() -> None:
    for lib in (torch, em):
        with lib.autograd.set_detect_anomaly(True, check_nan=False):
            assert lib.is_anomaly_enabled() and not lib.is_anomaly_check_nan_enabled()
        assert not lib.is_anomaly_enabled() and lib.is_anomaly_check_nan_enabled()
        lib.set_anomaly_enabled(True)
        assert lib.is_anomaly_enabled()
        lib.set_anomaly_enabled(False)
        assert not lib.is_anomaly_enabled()


def test_an_error_in_a_gradient_rule_comes_after_the_forward_stack() -> None:
    class Broken(em.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("this backward is broken")

    def run():
        with em.autograd.detect_anomaly():
            x = em.tensor([1.0, 2.0], requires_grad=True)
            y = Broken.apply(x)  # the line to find
            y.sum().backward()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="this backward is broken"):
            run()
    detected = [str(w.message) for w in caught if str(w.message).startswith("Error detected in BrokenBackward")]
    assert len(detected) == 1 and "y = Broken.apply(x)  # the line to find" in detected[0]


def test_a_node_made_before_the_mode_says_it_has_no_stack() -> None:
    x = em.tensor([1.0, 0.0], requires_grad=True)
    loss = (x.sqrt() * 0.0).sum()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with em.autograd.set_detect_anomaly(True), pytest.raises(RuntimeError, match="sqrtBackward"):
            loss.backward()
    assert any("No forward stack was recorded" in str(w.message) for w in caught)


def test_values_and_gradients_are_the_same_in_the_mode() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 3))
    results = []
    for on in (False, True):
        x = em.tensor(data, requires_grad=True)
        with em.autograd.set_detect_anomaly(on):
            loss = (em.nn.functional.softmax(x @ x.T, 1).log() * 2).sum()
            loss.backward()
        results.append((loss.item(), x.grad.numpy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
