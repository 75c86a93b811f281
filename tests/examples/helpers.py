"""Load an example script from examples/ as a module, so a test calls its main() with small settings."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str):
    """The module examples/<name>.py (its own imports of sibling files work as when run as a script)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_example(name: str, *args: str) -> tuple[dict, str]:
    """Run examples/<name>.py's main(args) without a progress bar: (its result dict, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = load_example(name).main([*args, "--no-progress"])
    return result, out.getvalue()
