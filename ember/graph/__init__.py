"""Graph mode: one IR (`Graph`), symbolic tensors, the executor, and graph pictures."""

from ember.graph import build as _build  # noqa: F401
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, GNode, Graph, Value

__all__ = ["Graph", "GNode", "Value", "PLACEHOLDER", "CAPTURE", "CONSTANT", "VARIABLE"]
