"""File locks: an ``flock`` on a small file beside what it guards.

The kernel releases an ``flock`` when its holder exits, however it exits (a crash, SIGKILL, a preempted Slurm
task), so a lock is never left behind: a lock file on disk means nothing by itself. Used by the artifact cache
(one builder per entry) and by sweeps (one trainer per run folder, whichever notebook or job gets there first).

    with file_lock(folder / "entry.lock"):                  # waits for the holder
        ...
    with file_lock(folder / "entry.lock", wait=False) as held:
        if held: ...                                        # False at once when another process holds it
    with file_locks([a, b, c]):                             # several, always taken in sorted order
        ...
"""
from __future__ import annotations

import fcntl
import os
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterable, Iterator


@contextmanager
def file_lock(path: str | os.PathLike, *, wait: bool = True) -> Iterator[bool]:
    """Hold the exclusive lock on ``path`` (created if absent) while the block runs, and yield True.

    ``wait=False`` yields False at once when another process holds it (the block then runs without it)."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def file_locks(paths: Iterable[str | os.PathLike]) -> Iterator[None]:
    """Hold every lock of ``paths`` (waiting for each) while the block runs.

    They are taken in sorted order, whoever asks: two processes that want overlapping sets then cannot each
    hold one the other waits for (no deadlock)."""
    with ExitStack() as stack:
        for path in sorted({Path(p) for p in paths}):
            stack.enter_context(file_lock(path))
        yield
