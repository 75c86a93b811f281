"""Utilities: TensorBoard event files (`ember.utils.event_file`), and `ember.utils.data`, which is
`ember.data` under torch.utils.data's name."""


def __getattr__(name: str):
    """`ember.utils.data` on first use, so `import ember` stays light (torch.utils.data works the same way)."""
    if name == "data":
        import importlib

        return importlib.import_module("ember.utils.data")
    raise AttributeError(f"module 'ember.utils' has no attribute {name!r}")
