"""`import ember` imports NumPy and Ember alone: the optional heavy libraries load at their first use."""

from __future__ import annotations

import json
import subprocess
import sys


def test_import_ember_leaves_the_heavy_optional_libraries_unimported():
    code = ("import json, sys, ember; "
            "print(json.dumps(sorted(m for m in ('scipy', 'numba', 'llvmlite', 'ml_dtypes', 'onnx', 'onnxruntime', "
            "'torch', 'matplotlib', 'mpi4py') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_bfloat16_imports_ml_dtypes_at_its_first_use():
    code = ("import json, sys, ember; before = 'ml_dtypes' in sys.modules; "
            "t = ember.ones(2, dtype=ember.bfloat16) * 3; "
            "print(json.dumps([before, 'ml_dtypes' in sys.modules, t.dtype.name, t.tolist()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, True, "bfloat16", [3.0, 3.0]]


def test_the_command_line_parser_leaves_ml_dtypes_unimported():
    # every `ember` command builds it: ml_dtypes alone took 0.7 s to import
    code = "import json, sys; from ember.cli import _parser; _parser(); print(json.dumps('ml_dtypes' in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) is False
