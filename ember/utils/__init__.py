"""PyTorch's torch.utils under its names: `ember.utils.checkpoint` (rematerialisation), `ember.utils.tensorboard`
(and the event files it writes, `ember.utils.event_file`), `ember.utils.dlpack`, and `ember.utils.data`, which is
`ember.data`."""


def __getattr__(name: str):
    """Submodules on first use, so `import ember` stays light (torch.utils.data works the same way)."""
    if name in ("data", "tensorboard", "dlpack", "checkpoint"):
        import importlib

        return importlib.import_module(f"ember.utils.{name}")
    raise AttributeError(f"module 'ember.utils' has no attribute {name!r}")
