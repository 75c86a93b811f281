"""Checkpoints in a data-parallel job: rank 0 writes and reads the file, the others wait or receive it.

Every rank holds the same model after DDP's reduction, so one copy on disk is enough; reading it on
rank 0 alone and broadcasting it also works when only rank 0's machine has the file. Writes are
atomic (ember.save renames a finished file into place), so a job killed while saving keeps its last
checkpoint, and a job that `ember run --max-restarts` starts again resumes from it:
`state = load_on_main(path, missing_ok=True)` is None on the first attempt.
"""

from __future__ import annotations

from ember.distributed.group import resolve, state


def is_main_process(group=None) -> bool:
    """Whether this is rank 0 of `group` (always true without a process group)."""
    if state.world is None:
        return True
    return resolve(group, "is_main_process").rank() == 0


def save_on_main(obj, path, group=None) -> None:
    """`ember.save(obj, path)` on rank 0; every rank returns once the file is complete."""
    from ember.serialization import save

    if is_main_process(group):
        save(obj, path)
    if state.world is not None:
        from ember.distributed.collectives import barrier

        barrier(group=group)


def load_on_main(path, group=None, missing_ok: bool = False):
    """`ember.load(path)` on rank 0, sent to every rank (each gets its own copy).

    `missing_ok`: None on every rank when rank 0 has no such file (a job's first attempt, before any checkpoint).
    """
    import os

    from ember.serialization import load

    if state.world is None:
        return None if missing_ok and not os.path.exists(path) else load(path)
    from ember.distributed.collectives import broadcast_object_list

    pg = resolve(group, "load_on_main")
    box = [None]
    error = None
    if pg.rank() == 0:
        try:
            box[0] = ("ok", None if missing_ok and not os.path.exists(path) else load(path))
        except Exception as e:  # noqa: BLE001 - every rank raises it, not only rank 0
            error = e
            box[0] = ("error", f"{type(e).__name__}: {e}")
    broadcast_object_list(box, src=pg.global_rank(0), group=group)
    if box[0][0] == "error":
        if error is not None:
            raise error
        raise RuntimeError(f"load_on_main: rank 0 could not load {path}: {box[0][1]}")
    return box[0][1]
