"""The worker process side of a multi-process DataLoader: its loop, seeding and `get_worker_info`."""

from __future__ import annotations

import itertools
import pickle
import random
import signal
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.data.fetch import make_fetcher
from ember.data.lifeline import watch
from ember.data.shm import pack


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker process knows about itself: id, num_workers, seed and its copy of the dataset."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's WorkerInfo inside a DataLoader worker process; None in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback text."""

    def __init__(self, exc: BaseException, where: str) -> None:
        self.exc_type = type(exc)
        self.type_name = type(exc).__name__
        self.where = where
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        try:
            pickle.dumps(self.exc_type)
        except Exception:  # e.g. a class defined inside a function: re-raised as RuntimeError
            self.exc_type = None

    def reraise(self) -> None:
        """Raise the worker's exception type in this process, with the worker's traceback in the message."""
        msg = f"Caught {self.type_name} {self.where}.\nOriginal {self.text}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)  # KeyError repr()s its argument, which would mangle the newlines
        try:
            exc = self.exc_type(msg) if self.exc_type is not None else None
        except Exception:
            exc = None
        if not isinstance(exc, BaseException):
            raise RuntimeError(msg) from None
        raise exc


class _KeyErrorMessage(str):
    def __repr__(self) -> str:
        return str(self)


class IterableEnd:
    """A worker's answer when its copy of an iterable dataset is used up."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


def seed_worker(seed: int, worker_id: int) -> None:
    """Seed Python's `random` and Ember's default generator with `seed` (the loader's base seed plus the
    worker's id), and NumPy's global generator from both (a SeedSequence's four words, as PyTorch's
    workers seed NumPy), so a worker draws what PyTorch's worker of the same id would."""
    from ember.random import manual_seed

    base_seed = seed - worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32, 0]).generate_state(4))


def worker_loop(worker_id: int, num_workers: int, dataset, is_iterable: bool, auto_collation: bool, collate_fn,
                drop_last: bool, seed: int, init_fn, index_queue, result_queue, shm_prefix: str,
                lifeline_reader, kill_with_parent: bool) -> None:
    """Answer batch requests from index_queue on result_queue until told to stop (None); exit when orphaned."""
    global _worker_info
    # Ctrl-C reaches the whole process group; the main process decides how to stop its workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(lifeline_reader, kill_with_parent)
    counter = itertools.count()

    def name() -> str:
        return f"{shm_prefix}{worker_id:x}_{next(counter):x}"

    seed_worker(seed, worker_id)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    init_error = None
    fetcher = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = make_fetcher(dataset, is_iterable, auto_collation, collate_fn, drop_last)
    except Exception as e:
        init_error = ExceptionWrapper(e, f"in DataLoader worker process {worker_id} while starting up")

    while True:
        task = index_queue.get()
        if task is None:
            return
        if task[0] == "reset":  # a new epoch with persistent workers: iterable datasets start over
            if init_error is None and is_iterable:
                try:
                    fetcher = make_fetcher(dataset, is_iterable, auto_collation, collate_fn, drop_last)
                except Exception as e:
                    init_error = ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
            continue
        _, idx, index = task
        if init_error is not None:
            data = init_error
        else:
            try:
                data = fetcher.fetch(index)
            except StopIteration:
                data = IterableEnd(worker_id)
            except Exception as e:
                data = ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
        try:
            payload = pack(idx, data, name)
        except Exception as e:
            err = ExceptionWrapper(e, f"in DataLoader worker process {worker_id} while sending a batch")
            payload = pack(idx, err, name)
        del data
        result_queue.put(payload)
