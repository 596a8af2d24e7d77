"""DomainBed-style sweeps: one folder per run, JSONL records, a ``done`` marker, resumable launches.

A run is identified by its argument dict; its folder is ``<out_dir>/<md5 of the sorted JSON of the args>``
and holds ``results.jsonl`` (one JSON record per line, flushed as it is written) and, written atomically
once the run has finished, ``done``. Launching a sweep skips the runs that are done and re-runs the
incomplete ones from scratch, so an interrupted sweep resumes where it stopped.

    def launcher(args: dict, run_dir: Path) -> None:      # trains, writing records with RecordWriter
        ...
    launch(args_list, launcher, out_dir, jobs=2)           # two processes, one torch thread each
    records = load_records(out_dir)                        # every record of every finished run
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import multiprocessing
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from shared.errors import ConfigError, DataFormatError
from shared.progress import progress

RESULTS_FILE = "results.jsonl"
DONE_FILE = "done"


def args_hash(args: dict) -> str:
    """md5 hex digest of ``json.dumps(args, sort_keys=True)`` (the official sweeps' run-folder name)."""
    return hashlib.md5(json.dumps(args, sort_keys=True).encode("utf-8")).hexdigest()


def run_dir_for(args: dict, out_dir: str | os.PathLike) -> Path:
    """The folder of the run with arguments ``args``: ``<out_dir>/<args_hash(args)>``."""
    return Path(out_dir) / args_hash(args)


def is_done(run_dir: str | os.PathLike) -> bool:
    return (Path(run_dir) / DONE_FILE).exists()


def mark_done(run_dir: str | os.PathLike) -> None:
    """Write the ``done`` marker atomically (a temporary file renamed over it), after the last record."""
    run_dir = Path(run_dir)
    tmp = run_dir / f".{DONE_FILE}.{os.getpid()}.tmp"
    tmp.write_text("done\n")
    os.replace(tmp, run_dir / DONE_FILE)


def reset_run_dir(run_dir: str | os.PathLike) -> Path:
    """Empty (or create) a run folder, so an incomplete run starts again from scratch."""
    run_dir = Path(run_dir)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    return run_dir


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"record value {value!r} of type {type(value).__name__} is not JSON-serialisable")


class RecordWriter:
    """Appends records to ``<run_dir>/results.jsonl``, one line each, flushed at once (a kill loses at most one line).

    NaN and infinities are written as JSON's ``NaN``/``Infinity`` extensions, as Python's ``json`` (and the
    official code) does, so a diverged checkpoint keeps its NaN metrics.

        with RecordWriter(run_dir) as writer:
            writer.write({"step": 0, "loss": 2.3})
    """

    def __init__(self, run_dir: str | os.PathLike, *, fresh: bool = True):
        self.path = Path(run_dir) / RESULTS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w" if fresh else "a")

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record, sort_keys=True, default=_json_default) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_records(run_dir: str | os.PathLike) -> list[dict]:
    """The records of one run. A truncated last line (a run killed while writing) is skipped;
    a malformed line before the last raises DataFormatError."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        return []
    lines = path.read_text().splitlines(keepends=True)
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            if i == len(lines) - 1 and not line.endswith("\n"):
                break
            raise DataFormatError(f"{path}, line {i + 1}: not a JSON record ({err}); delete the run folder "
                                  "to re-run it") from err
    return records


def load_records(out_dir: str | os.PathLike, *, done_only: bool = True) -> list[dict]:
    """Every record under ``out_dir``, each with ``"run"`` (its folder name) added, runs in sorted folder order.

    ``done_only`` skips unfinished runs (their checkpoints would bias the selection towards short runs).
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise ConfigError(f"no sweep folder {out_dir}; run the sweep first or pass the folder it wrote to")
    records = []
    for run_dir in sorted(p for p in out_dir.iterdir() if p.is_dir()):
        if done_only and not is_done(run_dir):
            continue
        records += [{**record, "run": run_dir.name} for record in read_records(run_dir)]
    return records


# --------------------------------------------------------------------------------------------- launching
_WORKER_FN: Callable | None = None


def _init_worker(fn: Callable, num_threads: int) -> None:
    global _WORKER_FN
    import torch

    torch.set_num_threads(num_threads)
    _WORKER_FN = fn


def _call_worker(task):
    return _WORKER_FN(task)


def map_jobs(fn: Callable, tasks: Iterable, *, jobs: int = 1, desc: str | None = None,
             num_threads: int = 1) -> list:
    """``[fn(task) for task in tasks]`` with a progress bar, in ``jobs`` processes when ``jobs > 1``.

    Worker processes are started with ``spawn`` (forking a process that already ran torch can deadlock),
    receive ``fn`` once, and run torch with ``num_threads`` threads: on a 2-core machine, two single-thread
    workers are several times faster than one process competing with itself. ``fn`` and the tasks must be
    picklable (module-level functions, ``functools.partial`` of them). With ``jobs == 1`` the tasks run in this
    process, with the caller's thread count. The first failure is raised once the running tasks end; tasks not
    yet started are cancelled.
    """
    tasks = list(tasks)
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    bar = progress(total=len(tasks), desc=desc)
    try:
        if jobs == 1 or len(tasks) <= 1:
            results = []
            for task in tasks:
                results.append(fn(task))
                bar.update()
            return results
        context = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context,
                                    initializer=_init_worker, initargs=(fn, num_threads)) as pool:
            futures = [pool.submit(_call_worker, task) for task in tasks]
            try:
                for future in cf.as_completed(futures):
                    future.result()
                    bar.update()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
            return [future.result() for future in futures]
    finally:
        bar.close()


class _JobRunner:
    """Picklable ``(args, run_dir) -> launcher(args, emptied run_dir)``, then the ``done`` marker."""

    def __init__(self, launcher: Callable[[dict, Path], object]):
        self.launcher = launcher

    def __call__(self, task: tuple[dict, str]) -> None:
        args, run_dir = task
        self.launcher(args, reset_run_dir(run_dir))
        mark_done(run_dir)


def pending(args_list: Iterable[dict], out_dir: str | os.PathLike) -> tuple[list[tuple[dict, Path]], dict[str, int]]:
    """The runs not done yet, as ``(args, run_dir)`` in order (duplicates once), and the counts
    ``{"total", "skipped" (done), "restarted" (incomplete: their folder exists), "ran" (= len(todo))}``."""
    seen, todo = set(), []
    for args in args_list:
        run_dir = run_dir_for(args, out_dir)
        if run_dir.name not in seen and not is_done(run_dir):
            todo.append((args, run_dir))
        seen.add(run_dir.name)
    counts = {"total": len(seen), "skipped": len(seen) - len(todo),
              "restarted": sum(run_dir.exists() for _, run_dir in todo), "ran": len(todo)}
    return todo, counts


def launch(args_list: Iterable[dict], launcher: Callable[[dict, Path], object], out_dir: str | os.PathLike, *,
           jobs: int = 1, desc: str = "sweep", num_threads: int = 1) -> dict[str, int]:
    """Run ``launcher(args, run_dir)`` for every run not done yet, then mark it done.

    Incomplete runs (a folder without ``done``) are emptied and run again from scratch. Returns the counts of
    ``pending``. See ``map_jobs`` for ``jobs`` and ``num_threads``.
    """
    todo, counts = pending(args_list, out_dir)
    map_jobs(_JobRunner(launcher), [(args, str(run_dir)) for args, run_dir in todo], jobs=jobs, desc=desc,
             num_threads=num_threads)
    return counts
