"""The compiled kernels of a recurrent layer (LSTM, GRU), found the same way for each: whole time loops whose
products call a GEMM from inside (float32), single steps' elementwise work, and the split of a time loop's batch
over the threads.

A step of a small layer (32 x 128) is a few thousand values: NumPy's dozen calls per step cost more in call
overhead than in arithmetic, so a step is one compiled call after its GEMM; for float32 with a GEMM that compiled
code can call (Ember's where gemm.loops_take_driver(), else NumPy's bundled OpenBLAS) the whole time loop runs compiled,
over a range of samples, so disjoint parts of the batch run on threads at once.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import blas, gemm, parallel, sgemm
from ember.kernels.numba_loader import kernel_for
from ember.kernels.selection import Algorithm, algorithms, always, note


class RecurrentKernels:
    """One layer kind's compiled kernels, from its four sources (`forward`/`backward` steps, and the whole
    `forward_loop`/`backward_loop` sources that include them), each named `<kind>_<part>` inside."""

    def __init__(self, kind: str, forward: str, forward_loop: str, backward: str, backward_loop: str) -> None:
        self.kind = kind
        self._sources = {"step_forward": forward, "forward_loop": forward_loop, "step_backward": backward,
                         "backward_loop": backward_loop}
        for op in (f"{kind}_layer", f"{kind}_layer_backward"):
            algorithms(op, [
                Algorithm("compiled time loop", "float32, Numba, a GEMM callable from compiled code (NumPy's "
                          "OpenBLAS, or Ember's): the whole loop compiled, the batch split over the threads", None),
                Algorithm("compiled steps", "Numba (the forward's steps: float32): NumPy's GEMM per step, the step's "
                          "elementwise work in one compiled call", None),
                Algorithm("numpy", "otherwise", always),
            ])

    def forward_loop(self, xp, dtype, elements: int):
        """The compiled whole-layer forward, or None."""
        return _gemm_loop(self._sources["forward_loop"], f"{self.kind}_forward_loop", xp, dtype, elements)

    def backward_loop(self, xp, dtype, elements: int):
        """The compiled whole-layer backward time loop, or None."""
        return _gemm_loop(self._sources["backward_loop"], f"{self.kind}_backward_loop", xp, dtype, elements)

    def step_forward(self, xp, dtype, elements: int):
        """The compiled forward step for `elements` values in all (float32: its sigmoid and tanh are float32
        approximations), or None to use NumPy."""
        if dtype != np.float32:
            return None
        return kernel_for(self._sources["step_forward"], f"{self.kind}_step_forward", xp, dtype, elements)

    def step_backward(self, xp, dtype, elements: int):
        """The compiled step gradient for `elements` values of `dtype` in all, or None to use NumPy."""
        return kernel_for(self._sources["step_backward"], f"{self.kind}_step_backward", xp, dtype, elements)

    def packed(self, w: np.ndarray) -> np.ndarray:
        """A time loop's weight `w` (K, N) as its products read it: packed once for all steps and threads where
        they run on Ember's GEMM (sgemm.pack_rows), else an empty array (OpenBLAS's products read `w` itself)."""
        return sgemm.pack_rows(w) if gemm.loops_take_driver() else np.empty(0, np.float32)

    def run_loop(self, op: str, loop, args: tuple, batch: int, flops: float) -> None:
        """loop(*args, n0, n1) over samples [n0, n1) of the batch, split over the threads."""
        note(op, "compiled time loop")
        parallel.parallel_for(batch, lambda n0, n1: loop(*args, n0, n1), flops=flops)

    def noted_steps(self, op: str, step):
        """`step` (a compiled step or None), noted as the algorithm `op` runs."""
        if step is not None:
            note(op, "compiled steps")
        return step


def _gemm_loop(source: str, name: str, xp, dtype, elements: int):
    """A compiled whole-layer time loop whose products call `sgemm_rows_packed` (float32): Ember's GEMM where
    gemm.loops_take_driver(), else NumPy's bundled OpenBLAS where found; or None. Numba cannot cache a function that
    holds a pointer (a ctypes function's, the micro-kernel's): compiled once per process."""
    if dtype != np.float32:
        return None
    if gemm.loops_take_driver():
        return kernel_for(source + sgemm.ROWS_SOURCE, name, xp, dtype, elements, cache=False)
    if blas.sgemm is None:
        return None
    return kernel_for(source + blas.SGEMM_ROWS_SOURCE, name, xp, dtype, elements, cache=False)
