"""Utilities: TensorBoard event files (`ember.utils.event_file`, `ember.utils.tensorboard`), DLPack
(`ember.utils.dlpack`), and `ember.utils.data`, which is `ember.data` under torch.utils.data's name."""


def __getattr__(name: str):
    """Submodules on first use, so `import ember` stays light (torch.utils.data works the same way)."""
    if name in ("data", "tensorboard", "dlpack"):
        import importlib

        return importlib.import_module(f"ember.utils.{name}")
    raise AttributeError(f"module 'ember.utils' has no attribute {name!r}")
