"""The interpreter stack's count of entered interpreters, which the dispatch fast paths read instead of the
thread-local top: it follows every enter and exit, in any thread, and ops still reach an interpreter entered in
their own thread while another thread runs plain eager."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ember as em
from ember import interpreter
from ember.interpreter import Interpreter


class Counting(Interpreter):
    """Counts the ops handed to it and runs them below."""

    def __init__(self) -> None:
        self.ops = []

    def run(self, op, inputs, arrays, attrs, device):
        self.ops.append(op.name)
        return self.below.run(op, inputs, arrays, attrs, device)


def test_entered_counts_nested_and_out_of_order_exits():
    before = interpreter.entered[0]
    a, b = Counting(), Counting()
    a.__enter__()
    b.__enter__()
    assert interpreter.entered[0] == before + 2
    a.__exit__(None, None, None)  # from below the top
    assert interpreter.entered[0] == before + 1
    with pytest.raises(RuntimeError, match="not active"):
        a.__exit__(None, None, None)
    assert interpreter.entered[0] == before + 1
    b.__exit__(None, None, None)
    assert interpreter.entered[0] == before


def test_fast_paths_reach_an_interpreter_and_other_threads_stay_eager():
    x = em.tensor(np.arange(4.0), requires_grad=True)
    seen_elsewhere = []

    def other_thread():
        y = (x * 2.0).exp().sum()  # fast paths, plain eager here although this process has an interpreter entered
        seen_elsewhere.append(float(y))

    with Counting() as counting:
        y = (x * 2.0 + x).relu().reshape(-1)[1:3].sum()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert counting.ops == ["mul", "add", "relu", "reshape", "getitem", "sum"]
    assert seen_elsewhere == [pytest.approx(float(np.exp(np.arange(4.0) * 2).sum()))]
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 3.0, 3.0, 0.0])
