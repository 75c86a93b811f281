"""`blas.openblas_kernels()`, which the benchmarks print: the GEMM kernels NumPy's OpenBLAS runs, and whether
OPENBLAS_CORETYPE forced them (read from OpenBLAS itself, in a fresh process for each setting)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from ember.kernels import blas

pytestmark = pytest.mark.skipif(blas.sgemm is None, reason="NumPy's BLAS is not a bundled OpenBLAS")

_PRINT = "from ember.kernels.blas import openblas_kernels; print(openblas_kernels())"


def _report(coretype: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    return subprocess.run([sys.executable, "-c", _PRINT], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="Haswell kernels are x86-64 kernels")
def test_a_forced_core_type_is_reported_with_the_variable():
    text = _report("Haswell")
    assert text.startswith("OpenBLAS ") and text.endswith("kernels Haswell (forced by OPENBLAS_CORETYPE=Haswell)")


def test_detected_kernels_are_reported_as_such():
    text = _report(None)
    assert text.startswith("OpenBLAS ") and ", kernels " in text and "forced" not in text


def test_the_machine_names_the_kernels_threadpoolctl_finds():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from ember.kernels import machine

    (openblas,) = [i for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"][:1] or [None]
    if openblas is None:
        pytest.skip("threadpoolctl finds no OpenBLAS in this process")
    found = machine.detect()
    assert found.blas_kernels == openblas["architecture"]
    line = machine.describe()
    assert f"OpenBLAS {openblas['architecture']} kernels" in line and f"{found.cores} cores" in line
    assert found.cpu in line
