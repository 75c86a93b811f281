"""The optional `tensorboard` package, imported on first use with an install hint when it is missing."""

from __future__ import annotations

import importlib


def require(module: str = "tensorboard"):
    """Import `module` from the tensorboard package, or raise an ImportError naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"ember.utils.tensorboard needs the tensorboard package ({e}); "
                          'install it with: pip install "ember[tensorboard]"') from None
