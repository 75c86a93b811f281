"""Lazy imports of the optional `onnx` package, with the install hint when it is missing."""

from __future__ import annotations


def require_onnx():
    """The `onnx` module, or an ImportError saying how to install it."""
    try:
        import onnx
    except ImportError as e:
        raise ImportError('ember.onnx needs the onnx package: pip install "ember[onnx]"') from e
    return onnx
