"""Ember's version (as `torch.version`): read by `ember --version`, ONNX exports' producer field and the root."""

__version__ = "0.1.0"
