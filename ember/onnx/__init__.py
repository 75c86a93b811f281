"""ONNX export (`export`: an Ember model or function traced into the graph IR, written as an ONNX model)
and import (`load`: an ONNX model run with Ember ops). Needs the `onnx` extra."""

from ember.onnx.export import export
from ember.onnx.load import ONNXProgram, load
from ember.onnx.v1_export import export_session

__all__ = ["ONNXProgram", "export", "export_session", "load"]
