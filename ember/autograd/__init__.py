"""Reverse-mode automatic differentiation: `engine` (nodes, backward, grad), `views` (views and
in-place history), `gradcheck`, `grad_mode` (no_grad and friends)."""

from ember.autograd.engine import Node, backward, grad, record, retain_node_grad, seq_mark, walk
from ember.autograd.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from ember.autograd.gradcheck import gradcheck

__all__ = [
    "Node", "backward", "enable_grad", "grad", "gradcheck", "inference_mode", "is_grad_enabled", "no_grad",
    "record", "retain_node_grad", "seq_mark", "set_grad_enabled", "walk",
]
