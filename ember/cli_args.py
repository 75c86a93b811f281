"""argparse types shared by the `ember` subcommands: numbers checked as they are parsed, with one-line errors."""

from __future__ import annotations

import argparse
import math


def int_at_least(low: int):
    """An argparse type: an integer >= low (1: "a positive integer", 0: "a non-negative integer")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            kind = "a positive" if low == 1 else "a non-negative"
            raise argparse.ArgumentTypeError(f"expected {kind} integer, got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value
