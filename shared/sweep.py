"""DomainBed-style sweeps: one folder per run, JSONL records, a ``done`` marker, resumable launches.

A run is identified by its argument dict; its folder is ``<out_dir>/<md5 of the sorted JSON of the args>``
and holds ``results.jsonl`` (one JSON record per line, flushed as it is written) and, written atomically
once the run has finished, ``done``. Launching a sweep skips the runs that are done and re-runs the
incomplete ones from scratch, so an interrupted sweep resumes where it stopped.

    def launcher(args: dict, run_dir: Path) -> None:      # trains, writing records with RecordWriter
        ...
    launch(args_list, launcher, out_dir, jobs=2)           # two processes, one torch thread each
    launch(args_list, launcher, out_dir, executor={"kind": "slurm", "partition": "gpu"})   # Slurm job arrays
    records = load_records(out_dir)                        # every record of every finished run

Where runs execute is ``shared.executor``'s business (``map_jobs``); on Slurm, ``<out_dir>/.submitit`` keeps
submitit's logs and ``submitted.json``, the jobs still in flight, so a launch that did not wait (``wait: false``)
is collected, not submitted twice, by the next one.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from shared.errors import ConfigError, DataFormatError, ReplicationError
from shared.executor import (FINISHED_OK, ExecutorSpec, JobFailed, SlurmJob, as_completed, executor_spec,
                             make_executor, queued_or_running)
from shared.locks import file_lock, file_locks
from shared.progress import progress
from shared.runlog import log_run

RESULTS_FILE = "results.jsonl"
DONE_FILE = "done"
LOCKS_FOLDER = ".locks"  # in a sweep folder: one lock file per run (run_locks)


def args_hash(args: dict) -> str:
    """md5 hex digest of ``json.dumps(args, sort_keys=True)`` (the official sweeps' run-folder name)."""
    return hashlib.md5(json.dumps(args, sort_keys=True).encode("utf-8")).hexdigest()


def run_dir_for(args: dict, out_dir: str | os.PathLike) -> Path:
    """The folder of the run with arguments ``args``: ``<out_dir>/<args_hash(args)>``."""
    return Path(out_dir) / args_hash(args)


def run_locks(run_dirs: Iterable[str | os.PathLike]):
    """Hold the locks of these runs (``<out_dir>/.locks/<run>.lock``; ``shared.locks.file_locks``) while the
    block runs. Whoever trains a run holds its lock from before it empties the folder until the ``done`` marker is
    written, so processes sharing a sweep folder (two notebooks with common runs, a rerun beside a Slurm job)
    never train one run twice at once: the second waits, finds it done and skips it."""
    paths = []
    for run_dir in map(Path, run_dirs):
        (run_dir.parent / LOCKS_FOLDER).mkdir(parents=True, exist_ok=True)
        paths.append(run_dir.parent / LOCKS_FOLDER / f"{run_dir.name}.lock")
    return file_locks(paths)


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


def load_records(out_dir: str | os.PathLike, *, done_only: bool = True,
                 names: Iterable[str] | None = None) -> list[dict]:
    """Every record under ``out_dir``, each with ``"run"`` (its folder name) added, runs in sorted folder order.

    ``done_only`` skips unfinished runs (their checkpoints would bias the selection towards short runs).
    ``names``: read only these run folders (names, e.g. ``args_hash`` of the runs wanted; absent ones are left
    out), not every run a folder shared by several sweeps holds.
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise ConfigError(f"no sweep folder {out_dir}; run the sweep first or pass the folder it wrote to")
    records = []
    folders = out_dir.iterdir() if names is None else (out_dir / name for name in set(names))
    for run_dir in sorted(p for p in folders if p.is_dir() and not p.name.startswith(".")):
        if done_only and not is_done(run_dir):
            continue
        records += [{**record, "run": run_dir.name} for record in read_records(run_dir)]
    return records


# --------------------------------------------------------------------------------------------- launching
SUBMITIT_FOLDER = ".submitit"  # in a sweep folder: submitit's scripts and logs, and the ledger of Slurm jobs
SUBMITTED_FILE = "submitted.json"
MAX_ARRAY_TASKS = 1000  # Slurm's default MaxArraySize (1001) allows array indices 0-1000


class SweepPending(ReplicationError):
    """A Slurm sweep with ``wait: false`` returned with work still queued or running: ``job_ids``, ``folder``
    (submitit's logs and the ledger). Running the same sweep again collects it without submitting it twice."""

    def __init__(self, tasks: int, job_ids: list[str], folder: Path):
        self.tasks, self.job_ids, self.folder = tasks, job_ids, folder
        super().__init__(f"{tasks} sweep task(s) are queued or running on Slurm as job(s) {_job_list(job_ids)}; "
                         "this launch did not wait for them (executor wait: false). Watch them with `squeue --me` "
                         f"(logs under {folder}) and run the same sweep again to collect the results.")


class SweepFailed(ReplicationError, RuntimeError):
    """Slurm array tasks of a sweep ended without finishing: ``failures`` = [(JobFailed, units), ...]."""

    def __init__(self, failures: list[tuple[JobFailed, list[list[str]]]], total: int):
        self.failures = failures
        lines = [f"{len(failures)} of {total} Slurm array task(s) of this sweep ended without finishing; their "
                 "unfinished runs stay not done and run again when the same sweep is launched again "
                 "(finished runs are kept):"]
        for error, units in failures:
            names = [name for task in units for name in task]
            where = f", log {error.log}" if error.log else ""
            lines.append(f"  job {error.job_id} {error.state}{where}: {len(names)} run(s) "
                         f"{', '.join(names[:4])}{' ...' if len(names) > 4 else ''}")
            if error.state == "FAILED" and error.error:
                lines += ["    " + line for line in error.error.rstrip().splitlines()[-6:]]
        super().__init__("\n".join(lines))


def _job_list(job_ids: list[str]) -> str:
    arrays: dict[str, int] = {}
    for job_id in job_ids:
        arrays[job_id.split("_")[0]] = arrays.get(job_id.split("_")[0], 0) + 1
    return ", ".join(f"{base} ({n} array tasks)" if n > 1 else base for base, n in arrays.items())


class _Chunk:
    """Picklable: one Slurm array task, ``fn`` on each of its (units, task); a failing task does not stop the
    others, and the array task fails at the end naming the tasks that failed."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, items: list[tuple[list[str], object]]) -> list:
        import traceback

        results, errors = [], []
        for units, task in items:
            try:
                results.append(self.fn(task))
            except Exception:
                results.append(None)
                errors.append(f"task {', '.join(units)}:\n{traceback.format_exc()}")
        if errors:
            raise RuntimeError(f"{len(errors)} of {len(items)} task(s) failed\n" + "\n".join(errors))
        return results


def _read_ledger(folder: Path) -> list[dict]:
    """The jobs an earlier launch submitted; a damaged file is reported, set aside and read as none (its jobs'
    runs may then be submitted again: done markers keep any run from being recorded twice)."""
    path = folder / SUBMITTED_FILE
    if not path.exists():
        return []
    try:
        jobs = json.loads(path.read_bytes().decode("utf-8"))["jobs"]
        if isinstance(jobs, list) and all(isinstance(j, dict) and {"job_id", "tasks"} <= set(j) for j in jobs):
            return jobs
        problem = "does not list jobs"
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        problem = f"is not readable ({type(e).__name__}: {e})"
    os.replace(path, path.with_name(path.name + ".damaged"))
    print(f"warning: {path} {problem}; set aside as {path.name}.damaged, so jobs still running from an earlier "
          "launch are not known and their runs may be submitted again", file=sys.stderr)
    return []


def _update_ledger(folder: Path, *, add: Iterable[dict] = (), remove: Iterable[str] = ()) -> None:
    """Add jobs to the ledger and remove others (by job id), under its lock, applied to what the file holds now:
    launches from several processes may share a sweep folder (notebooks with common runs), and each changes only
    its own entries."""
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / f"{SUBMITTED_FILE}.lock"):
        gone = set(remove)
        entries = {e["job_id"]: e for e in _read_ledger(folder) if e["job_id"] not in gone}
        entries.update({e["job_id"]: e for e in add})
        tmp = folder / f".{SUBMITTED_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"jobs": list(entries.values())}, indent=1))
        os.replace(tmp, folder / SUBMITTED_FILE)


def in_flight(folder: str | os.PathLike) -> set[str]:
    """The units (run folder names) that Slurm jobs submitted by earlier launches into ``folder`` (a sweep's
    ``SUBMITIT_FOLDER``) are still working on: leave them out of a new submission."""
    entries = _read_ledger(Path(folder))
    live = queued_or_running() if entries else set()
    return {unit for entry in entries if entry["job_id"] in live for task in entry["tasks"] for unit in task}


def _attach(folder: Path) -> list[tuple[object, list[list[str]]]]:
    """The jobs of the ledger still queued or running, with their tasks' units; the ledger keeps only those.
    Jobs that ended without a result are reported (their unfinished tasks are submitted again)."""
    entries = _read_ledger(folder)
    if not entries:
        return []
    live = queued_or_running()
    jobs = [SlurmJob.attach(folder, entry["job_id"]) for entry in entries]
    SlurmJob.refresh()
    kept = []
    for job, entry in zip(jobs, entries):
        if entry["job_id"] in live:
            kept.append((job, entry))
            continue
        if job.state != FINISHED_OK:
            print(f"Slurm job {job.job_id} of an earlier launch is no longer queued or running and left no result "
                  f"(state {job.state}, log {job.log}); its unfinished runs are submitted again", file=sys.stderr)
    kept_ids = {entry["job_id"] for _, entry in kept}
    _update_ledger(folder, remove=[e["job_id"] for e in entries if e["job_id"] not in kept_ids])
    return [(job, entry["tasks"]) for job, entry in kept]


def _map_on_slurm(fn: Callable, tasks: list, spec: ExecutorSpec, folder: Path, desc: str, units: Callable) -> list:
    executor = make_executor(spec, folder, name=desc.replace(" ", "-"))
    attached = _attach(folder)
    flying = {tuple(task) for _, entry in attached for task in entry}
    keyed = [(tuple(units(task)), task) for task in tasks]
    new = [(key, task) for key, task in keyed if key not in flying]
    size = spec.chunk or max(1, -(-len(new) // min(MAX_ARRAY_TASKS, 2 * spec.array_parallelism)))
    chunks = [new[i:i + size] for i in range(0, len(new), size)]
    submitted = []
    for start in range(0, len(chunks), MAX_ARRAY_TASKS):
        part = chunks[start:start + MAX_ARRAY_TASKS]
        jobs = executor.submit_array(_Chunk(fn), [([(list(key), task) for key, task in chunk],) for chunk in part])
        submitted += [(job, [list(key) for key, _ in chunk]) for job, chunk in zip(jobs, part)]
    every = attached + submitted
    _update_ledger(folder, add=[{"job_id": job.job_id, "tasks": entry} for job, entry in submitted])
    if not spec.wait and every:
        raise SweepPending(sum(len(entry) for _, entry in every), [job.job_id for job, _ in every], folder)
    entries = {job.job_id: entry for job, entry in every}
    results, failures = {}, []
    bar = progress(total=sum(len(entry) for entry in entries.values()), desc=desc)
    try:
        for job in as_completed([job for job, _ in every]):
            entry = entries[job.job_id]
            try:
                results.update(zip(map(tuple, entry), job.result()))
            except JobFailed as error:
                failures.append((error, entry))
                bar.write(f"Slurm job {error.job_id} ended {error.state}; log {error.log}")
            _update_ledger(folder, remove=[job.job_id])
            bar.update(len(entry))
    except BaseException:
        executor.shutdown(cancel=True)
        _update_ledger(folder, remove=[j.job_id for j, _ in submitted])
        raise
    finally:
        bar.close()
    if failures:
        raise SweepFailed(failures, len(every))
    return [results[key] for key, _ in keyed]


def _map_here(fn: Callable, tasks: list, spec: ExecutorSpec, desc: str | None) -> list:
    executor = make_executor(spec, ".")
    bar = progress(total=len(tasks), desc=desc)
    failure = None
    try:
        jobs = executor.submit_array(fn, [(task,) for task in tasks])
        for job in as_completed(jobs):
            bar.update()
            if failure is None:
                try:
                    job.result()
                except Exception as error:  # JobFailed, or in this process the task's own exception
                    failure = error
                    for other in jobs:
                        if other.state == "PENDING":
                            other.cancel()
        executor.shutdown()
    except BaseException:
        executor.shutdown(cancel=True)
        raise
    finally:
        bar.close()
    if failure is not None:
        raise failure
    return [job.result() for job in jobs]


def map_jobs(fn: Callable, tasks: Iterable, *, jobs: int = 1, desc: str | None = None, num_threads: int = 1,
             executor=None, folder: str | os.PathLike | None = None, units: Callable[[object], list[str]] | None = None
             ) -> list:
    """``[fn(task) for task in tasks]`` with a progress bar, on an executor (``shared.executor``).

    ``executor``: an ExecutorSpec or a setting for ``shared.executor.executor_spec`` (``"slurm"``,
    ``{kind: slurm, partition: gpu, wait: false}``); None: ``jobs`` local worker processes with ``num_threads``
    math-library threads each, or this process when ``jobs == 1`` (with ``num_threads`` torch threads while a
    task runs). ``fn`` and the tasks must pickle (cloudpickle) outside this process.

    Local and in this process: the first failure is raised (local: JobFailed with the worker's traceback; in
    this process: the task's own exception) once the running tasks end; tasks not started are dropped.
    Ctrl-C stops every worker and its children at once and raises KeyboardInterrupt.

    Slurm (``folder`` needed: submitit's files and ``submitted.json``, the ledger of jobs in flight): the tasks
    go out as job arrays of ``spec.chunk`` tasks per array task, the progress bar moves as array tasks end, and
    every array task runs to its end: those that fail, are cancelled, time out or are preempted are reported
    together (``SweepFailed``: states, log paths, their ``units``). ``units(task)`` names what a task produces
    (its run folders; default ``[repr(task)]``): a task whose units a job of an earlier launch is still working on
    is not submitted again, and that job is waited for too. With ``spec.wait`` False the call returns at once by
    raising ``SweepPending`` once everything is submitted. Ctrl-C cancels this call's jobs.
    """
    tasks = list(tasks)
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    spec = executor_spec(executor, jobs=jobs, threads=num_threads)
    if spec is None:
        spec = ExecutorSpec("debug" if jobs == 1 else "local", jobs=jobs, threads=num_threads)
    if spec.kind != "slurm":
        return _map_here(fn, tasks, spec, desc)
    if folder is None:
        raise ConfigError("map_jobs on Slurm needs folder= (where submitit keeps its logs and the ledger of jobs), "
                          "e.g. <sweep folder>/.submitit")
    return _map_on_slurm(fn, tasks, spec, Path(folder), desc or "sweep", units or (lambda task: [repr(task)]))


class _JobRunner:
    """Picklable ``(args, run_dir) -> launcher(args, emptied run_dir)``, then the ``done`` marker, under the run's
    lock (``run_locks``). A run found done once the lock is held (Slurm requeued a preempted array task, or another
    process sharing the folder trained it meanwhile) is skipped."""

    def __init__(self, launcher: Callable[[dict, Path], object], kind: str = "sweep"):
        self.launcher, self.kind = launcher, kind

    def __call__(self, task: tuple[dict, str]) -> None:
        args, run_dir = task
        with run_locks([run_dir]):
            if is_done(run_dir):
                log_run(self.kind, Path(run_dir).name, built=False)
                return
            start = time.perf_counter()
            self.launcher(args, reset_run_dir(run_dir))
            mark_done(run_dir)
        log_run(self.kind, Path(run_dir).name, built=True, seconds=time.perf_counter() - start)


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


def _run_name(task: tuple[dict, str]) -> list[str]:
    return [Path(task[1]).name]


def launch(args_list: Iterable[dict], launcher: Callable[[dict, Path], object], out_dir: str | os.PathLike, *,
           jobs: int = 1, desc: str = "sweep", num_threads: int = 1, executor=None, kind: str = "sweep") -> dict[str, int]:
    """Run ``launcher(args, run_dir)`` for every run not done yet, then mark it done.

    Incomplete runs (a folder without ``done``) are emptied and run again from scratch. Returns the counts of
    ``pending``. See ``map_jobs`` for ``jobs``, ``num_threads`` and ``executor``; on Slurm each run is a task,
    submitit's files go to ``<out_dir>/.submitit`` and runs still in flight from an earlier launch (of this process
    or another sharing the folder: the ledger is updated under a lock) are waited for, not submitted again. Runs
    are trained under their locks (``run_locks``), so processes may share ``out_dir``.
    """
    args_list = list(args_list)
    todo, counts = pending(args_list, out_dir)
    for args in args_list:  # the runs found done are logged here; the others by the job that runs them
        run_dir = run_dir_for(args, out_dir)
        if is_done(run_dir):
            log_run(kind, run_dir.name, built=False)
    map_jobs(_JobRunner(launcher, kind), [(args, str(run_dir)) for args, run_dir in todo], jobs=jobs, desc=desc,
             num_threads=num_threads, executor=executor, folder=Path(out_dir) / SUBMITIT_FOLDER, units=_run_name)
    return counts
