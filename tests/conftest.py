"""Fixtures for the whole suite."""

from __future__ import annotations

import os

import pytest

from ember import config

# Kernels compile where they are first called, as they did before background compiles: tests that ask which
# algorithm ran get the same answer with an empty kernel cache. tests/kernels/test_background_compile.py turns it on.
os.environ.setdefault("EMBER_COMPILE_IN_BACKGROUND", "0")
# ... and no training step forks a process that compiles its kernels ahead (tests/kernels/test_compile_ahead.py
# turns it on): a test's fit() leaves no process behind it.
os.environ.setdefault("EMBER_COMPILE_AHEAD", "0")


@pytest.fixture(autouse=True)
def _settings_read_afresh():
    """Every setting is read from the environment again in each test (a test's monkeypatch.setenv takes effect, and
    what it set() does not leak into the next test)."""
    for setting in config.SETTINGS.values():
        setting.reset()
    yield
    for setting in config.SETTINGS.values():
        setting.reset()


@pytest.fixture
def thresholds():
    """thresholds(table, name=value, ...): a kernel-selection table's values changed until the test ends."""
    changed = []

    def change(table, **values):
        for name, value in values.items():
            changed.append((table, name, table[name]))
            table.set(name, value)

    yield change
    for table, name, value in reversed(changed):
        table.set(name, value)


@pytest.fixture
def set_threads():
    """set_threads(n): split each op's work over n threads (and run BLAS on n) until the test ends."""
    from ember.kernels import parallel

    before = parallel.get_num_threads()
    yield parallel.set_num_threads
    parallel.set_num_threads(before)
