"""Progress bars: tqdm's when it is installed (the `train` extra), else a plain line that updates in place."""

from __future__ import annotations

import sys


def progress_bar(iterable, total: int, desc: str, enabled: bool = True, leave: bool = False):
    """`iterable` wrapped in a progress bar on stderr (itself when not enabled); `set_postfix` shows figures."""
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # progress bars are optional (the `train` extra)
        return _PlainProgress(iterable, total, desc)
    return tqdm(iterable, total=total, desc=desc, leave=leave, dynamic_ncols=True, file=sys.stderr)


class _PlainProgress:
    """A minimal progress display for when tqdm is not installed."""

    def __init__(self, iterable, total, desc):
        self.iterable, self.total, self.desc = iterable, total, desc
        self.postfix = ""

    def __iter__(self):
        for i, x in enumerate(self.iterable, 1):
            yield x
            if i % max(1, self.total // 10) == 0 or i == self.total:
                print(f"\r{self.desc} {i}/{self.total} {self.postfix}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)

    def set_postfix(self, **kw):
        self.postfix = " ".join(f"{k}={v}" for k, v in kw.items())

    def close(self):
        pass
