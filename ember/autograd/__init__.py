"""Reverse-mode automatic differentiation: `engine` (nodes, backward, grad), `views` (views and
in-place history), `function` (custom functions with their own backward), `gradcheck`, `grad_mode` (no_grad and
friends)."""

from ember.autograd.anomaly_mode import detect_anomaly, set_detect_anomaly
from ember.autograd.engine import Node, backward, grad, record, retain_node_grad, seq_mark, walk
from ember.autograd.function import Function, FunctionCtx, once_differentiable
from ember.autograd.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from ember.autograd.gradcheck import gradcheck

__all__ = [
    "Function", "FunctionCtx", "Node", "backward", "detect_anomaly", "enable_grad", "grad", "gradcheck",
    "inference_mode", "is_grad_enabled", "no_grad", "once_differentiable", "record", "retain_node_grad", "seq_mark",
    "set_detect_anomaly", "set_grad_enabled", "walk",
]


def __getattr__(name: str):
    # `ember.autograd.functional` (torch.autograd.functional) builds on the library layer's transforms: loaded on first
    # use rather than with the package, which the layers below import
    if name == "functional":
        import importlib

        return importlib.import_module("ember.autograd.functional")
    raise AttributeError(f"module 'ember.autograd' has no attribute {name!r}")
