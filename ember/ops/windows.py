"""Window functions for spectral analysis, PyTorch's `hann_window`, `hamming_window`, `blackman_window`,
`bartlett_window` and `kaiser_window`: periodic by default (the symmetric window of N + 1 points without its last,
as a DFT's frames want), computed in float64 and rounded once to the dtype asked for."""

from __future__ import annotations

import numpy as np

from ember import creation
from ember import dtypes as dt


def _window(name: str, n: int, periodic: bool, values, dtype, device, requires_grad: bool):
    n = int(n)
    if n < 0:
        raise ValueError(f"{name}: window_length must be non-negative, got {n}")
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point dtype, got {d}")
    if n <= 1:
        out = np.ones(n)
    else:
        m = n + 1 if periodic else n
        out = values(np.arange(m, dtype=np.float64), m)[:n]
    return creation.tensor(out.astype(d.np), device=device, requires_grad=requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, device=None, requires_grad: bool = False):
    """0.5 - 0.5 cos(2 pi n / (M - 1))."""
    return _window("hann_window", window_length, periodic,
                   lambda k, m: 0.5 - 0.5 * np.cos(2 * np.pi * k / (m - 1)), dtype, device, requires_grad)


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *, dtype=None,
                   device=None, requires_grad: bool = False):
    """alpha - beta cos(2 pi n / (M - 1))."""
    return _window("hamming_window", window_length, periodic,
                   lambda k, m: alpha - beta * np.cos(2 * np.pi * k / (m - 1)), dtype, device, requires_grad)


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                    requires_grad: bool = False):
    """0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))."""
    return _window("blackman_window", window_length, periodic,
                   lambda k, m: 0.42 - 0.5 * np.cos(2 * np.pi * k / (m - 1)) + 0.08 * np.cos(4 * np.pi * k / (m - 1)),
                   dtype, device, requires_grad)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                    requires_grad: bool = False):
    """1 - |2 n / (M - 1) - 1| (a triangle)."""
    return _window("bartlett_window", window_length, periodic,
                   lambda k, m: 1 - np.abs(2 * k / (m - 1) - 1), dtype, device, requires_grad)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, device=None,
                  requires_grad: bool = False):
    """I0(beta sqrt(1 - (2 n / (M - 1) - 1)**2)) / I0(beta)."""
    return _window("kaiser_window", window_length, periodic,
                   lambda k, m: np.i0(beta * np.sqrt(np.clip(1 - (2 * k / (m - 1) - 1) ** 2, 0, None))) / np.i0(beta),
                   dtype, device, requires_grad)
