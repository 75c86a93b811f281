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
    return _TqdmProgress(iterable, tqdm(total=total, desc=desc, leave=leave, dynamic_ncols=True, file=sys.stderr))


class _TqdmProgress:
    """Iterates `iterable` itself and advances a tqdm bar made without it.

    tqdm.auto's bar (tqdm's asyncio class) calls iter() on an iterable it is given as soon as it is
    made; for a DataLoader that starts a second, unused epoch, which draws a seed from the generator
    and so changes the shuffle of the epoch that runs: a training run's numbers then depended on
    whether the progress bar was shown.
    """

    def __init__(self, iterable, bar):
        self.iterable, self.bar = iterable, bar

    def __iter__(self):
        for x in self.iterable:
            yield x
            self.bar.update(1)

    def set_postfix(self, **kw):
        self.bar.set_postfix(**kw)

    def close(self):
        self.bar.close()


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
