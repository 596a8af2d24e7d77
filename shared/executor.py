"""Where work runs: one interface over local processes, a Slurm cluster (through submitit) and this process.

    spec = ExecutorSpec.from_options("slurm", yaml_file="cluster.yaml", timeout_min=120)
    executor = make_executor(spec, folder)           # folder: submitit's scripts, pickles and logs (slurm)
    jobs = executor.submit_array(train, [(a,) for a in configs])   # one Slurm job array
    for job in as_completed(jobs):
        job.result()                                 # the return value, or JobFailed(job_id, state, error, log)
    executor.shutdown(cancel=True)                   # stop whatever is still queued or running

Kinds (``EXECUTORS``):

- ``local``: ``jobs`` worker processes on this machine (``shared.workers``), each with ``threads`` math-library
  threads, so results do not depend on how many run at once. Ctrl-C in the parent stops every worker and its
  children (e.g. Jupyter kernels) within seconds and raises KeyboardInterrupt; a killed parent takes its workers
  with it. It does not use submitit's ``LocalExecutor``, which (submitit 1.5.4, ``submitit/local/local.py``)
  starts a controller process for every job at submission (``_submit_command`` -> ``start_controller``), so a
  batch has no concurrency limit; applies ``timeout_min`` 2.0 unless told otherwise; and documents its controller
  as "expected to survive the end of the python session", so a SIGKILL of the parent leaves jobs running.
- ``slurm``: submitit's ``SlurmExecutor`` (named explicitly: once ``srun`` is on PATH, ``AutoExecutor`` picks
  Slurm even where no cluster answers). ``submit_array`` is one job array, at most ``array_parallelism`` tasks
  running; states come from ``sacct``, so the cluster needs accounting (slurmdbd).
- ``debug``: this process, one job at a time, each run when ``done()`` or ``result()`` is first called (so
  ``as_completed`` runs them in order, and a caller can cancel the rest after a failure); a failing job
  re-raises its own exception (so a debugger stops at it) instead of JobFailed.

``spec.wait`` and ``spec.chunk`` are for callers that submit many jobs (``shared.sweep``); the executor itself
always submits at once and never waits.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import yaml

from shared.errors import ConfigError, ReplicationError, unknown_choice

EXECUTORS = ("local", "slurm", "debug")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
FINISHED_OK = "COMPLETED"


@dataclass
class ExecutorSpec:
    """How and where to run jobs. ``jobs``: local processes at once; ``threads``: math-library threads per job;
    the Slurm options (``cpus_per_task`` None: ``threads``; ``timeout_min`` per job; ``chunk``: sweep tasks per
    array task, None: as few as keep an array within 2 x ``array_parallelism`` tasks; ``slurm_additional``:
    extra ``#SBATCH`` flags, e.g. ``{qos: high, constraint: a100}``); ``wait``: False lets a Slurm sweep return
    once submitted (``shared.sweep.SweepPending``) and collect on its next launch."""

    kind: str = "local"
    jobs: int = 1
    threads: int = 1
    partition: str | None = None
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    timeout_min: int = 240
    array_parallelism: int = 256
    account: str | None = None
    chunk: int | None = None
    slurm_additional: dict = field(default_factory=dict)
    wait: bool = True

    def __post_init__(self):
        if self.kind not in EXECUTORS:
            raise unknown_choice("executor", self.kind, EXECUTORS)
        for name in ("jobs", "threads", "timeout_min", "array_parallelism", "chunk", "cpus_per_task"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"executor option {name} must be a whole number >= 1, got {value!r}")
        if not isinstance(self.slurm_additional, Mapping):
            raise ConfigError(f"slurm_additional must map sbatch flags to values, got {self.slurm_additional!r}")
        if not self.wait and self.kind != "slurm":
            raise ConfigError(f"wait: false needs the slurm executor (got {self.kind!r}): local workers end with "
                              "the process that started them; remove wait or use kind: slurm")

    @classmethod
    def from_options(cls, kind: str = "local", yaml_file: str | os.PathLike | None = None,
                     **overrides) -> "ExecutorSpec":
        """The spec of ``kind`` with the options of a YAML profile (a mapping of option names, e.g.
        ``{partition: gpu, gpus_per_node: 1, timeout_min: 240, mem_gb: 32, array_parallelism: 64}``), then
        ``overrides`` (command-line values). Unknown option names raise ConfigError listing the valid ones."""
        if kind not in EXECUTORS:
            raise unknown_choice("executor", kind, EXECUTORS)
        options: dict[str, Any] = {}
        if yaml_file is not None:
            path = Path(yaml_file)
            if not path.is_file():
                raise ConfigError(f"no executor profile {path}; pass the path of a YAML file of Slurm options")
            options = yaml.safe_load(path.read_text()) or {}
            if not isinstance(options, dict):
                raise ConfigError(f"{path} must map executor options to values, e.g. 'partition: gpu'")
            _check_names(options, f"in {path}")
        _check_names(overrides, "")
        return cls(kind=kind, **{**options, **overrides})


def _check_names(options: Mapping, where: str) -> None:
    valid = [f.name for f in fields(ExecutorSpec) if f.name != "kind"]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"unknown executor option(s) {', '.join(unknown)}{' ' + where if where else ''}; "
                          f"valid options: {', '.join(valid)}")


def executor_spec(value, *, jobs: int = 1, threads: int = 1) -> ExecutorSpec | None:
    """An ExecutorSpec from a setting: None (None: the caller's default), a kind (``"slurm"``), a mapping
    (``{kind: slurm, slurm_profile: cluster.yaml, partition: gpu, wait: false}``) or a spec (returned as is).
    ``jobs`` and ``threads`` apply unless the mapping names them."""
    if value is None or isinstance(value, ExecutorSpec):
        return value
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, Mapping):
        raise ConfigError(f"executor must be a kind ({', '.join(EXECUTORS)}) or a mapping of options, got {value!r}")
    options = {"jobs": jobs, "threads": threads, **value}
    return ExecutorSpec.from_options(options.pop("kind", "local"), options.pop("slurm_profile", None), **options)


# ---------------------------------------------------------------------------------------------- jobs
class JobFailed(ReplicationError, RuntimeError):
    """A job ended without a result: ``state`` (FAILED, CANCELLED, TIMEOUT, PREEMPTED, OUT_OF_MEMORY, ...),
    ``error`` (the remote traceback or what ended it) and ``log`` (its log file, where there is one)."""

    def __init__(self, job_id: str, state: str, error: str = "", log: Path | None = None):
        self.job_id, self.state, self.error, self.log = job_id, state, error, log
        where = f" (log: {log})" if log else ""
        super().__init__(f"{job_id} {state}{where}" + (f":\n{error.rstrip()}" if error else ""))


class Job:
    """A submitted call. ``state``: PENDING, RUNNING, COMPLETED, or how it ended; ``done()``; ``result()``
    (waits, then returns the value or raises JobFailed); ``cancel()``. ``poll_s``: how often to check it."""

    job_id: str
    poll_s: float = 0.05

    @property
    def state(self) -> str:
        raise NotImplementedError

    def done(self) -> bool:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.job_id!r})"


def as_completed(jobs: Iterable[Job], poll_s: float | None = None) -> Iterator[Job]:
    """Yield ``jobs`` as they finish (completed or not), checking every ``poll_s`` seconds (default: the jobs')."""
    pending = list(jobs)
    while pending:
        finished = False
        for job in list(pending):
            if job.done():  # checked one by one: the caller may cancel the rest after a failure
                pending.remove(job)
                finished = True
                yield job
        if pending and not finished:
            time.sleep(poll_s if poll_s is not None else min(job.poll_s for job in pending))


class Executor:
    """Submits calls: ``submit(fn, *args)``, ``submit_array(fn, args_list)``, ``shutdown(cancel)``; ``jobs``
    lists what it submitted. ``fn`` and the arguments must pickle (cloudpickle) for local and slurm."""

    def __init__(self, spec: ExecutorSpec):
        self.spec = spec
        self.jobs: list[Job] = []

    def submit(self, fn: Callable, *args) -> Job:
        return self.submit_array(fn, [args])[0]

    def submit_array(self, fn: Callable, args_list: Sequence[tuple], groups: Sequence[str] | None = None) -> list[Job]:
        """One job per argument tuple. ``groups`` (one name per job, optional) is a scheduling hint: jobs of one group
        share cached work (a paper's notebooks share its voters and training runs), so one started beside a running
        job of its group would mostly wait on that job's cache locks. The local executor therefore starts a queued
        job of a group with nothing running first; Slurm and debug ignore the hint. Results never depend on it."""
        raise NotImplementedError

    def shutdown(self, cancel: bool = False) -> None:
        """``cancel``: stop queued and running jobs; otherwise let them finish (local waits for them)."""
        raise NotImplementedError


def make_executor(spec: ExecutorSpec, folder: str | os.PathLike, *, name: str = "noisy") -> Executor:
    """The executor of ``spec``. ``folder`` keeps submitit's files (slurm: one folder per job with its
    ``*_log.out``/``*_log.err``); ``name`` is the Slurm job name."""
    if spec.kind == "local":
        from shared.workers import LocalExecutor

        return LocalExecutor(spec)
    if spec.kind == "slurm":
        return SlurmExecutor(spec, Path(folder), name)
    return DebugExecutor(spec)


def set_threads(threads: int) -> None:
    """Fix torch's intra-op threads where torch is loaded (new imports follow ``THREAD_VARIABLES``)."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


# ---------------------------------------------------------------------------------------------- debug
class DebugJob(Job):
    def __init__(self, job_id: str, fn: Callable, args: tuple, threads: int):
        self.job_id, self._call, self._threads = job_id, (fn, args), threads
        self._state, self._value, self._error = "PENDING", None, None

    @property
    def state(self) -> str:
        return self._state

    def done(self) -> bool:
        self._run()
        return True

    def result(self):
        self._run()
        if self._state == "CANCELLED":
            raise JobFailed(self.job_id, "CANCELLED", "cancelled before it ran")
        if self._error is not None:
            raise self._error
        return self._value

    def cancel(self) -> None:
        if self._state == "PENDING":
            self._state = "CANCELLED"

    def _run(self) -> None:
        if self._state != "PENDING":
            return
        torch = sys.modules.get("torch")
        before = torch.get_num_threads() if torch else None
        set_threads(self._threads)
        fn, args = self._call
        self._state = "RUNNING"
        try:
            self._value, self._state = fn(*args), FINISHED_OK
        except Exception as error:
            self._error, self._state = error, "FAILED"
        finally:
            if self._state == "RUNNING":  # KeyboardInterrupt and the like pass through
                self._state = "CANCELLED"
            if before is not None:
                torch.set_num_threads(before)
        self._call = None


class DebugExecutor(Executor):
    def submit_array(self, fn: Callable, args_list: Sequence[tuple], groups: Sequence[str] | None = None) -> list[Job]:
        first = len(self.jobs)
        jobs = [DebugJob(str(first + i), fn, tuple(args), self.spec.threads) for i, args in enumerate(args_list)]
        self.jobs += jobs
        return jobs

    def shutdown(self, cancel: bool = False) -> None:
        for job in self.jobs:
            job.cancel() if cancel else job.done()


# ---------------------------------------------------------------------------------------------- slurm
class _Pickled:
    """Loads the function from a file once per array task, so a large one (datasets inside) is written once."""

    def __init__(self, path: Path, threads: int):
        self.path, self.threads = path, threads

    def __call__(self, *args):
        import cloudpickle

        fn = cloudpickle.loads(self.path.read_bytes())
        set_threads(self.threads)  # torch may have come in with fn; if it comes later, THREAD_VARIABLES apply
        return fn(*args)


def queued_or_running() -> set[str]:
    """The ids of this user's Slurm jobs that are queued or running (``squeue``), array tasks one by one ("12_3")."""
    import getpass

    try:
        listed = subprocess.run(["squeue", "--user", getpass.getuser(), "-h", "-r", "-o", "%i"], capture_output=True,
                                text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(f"squeue did not answer ({error}); use the slurm executor on a machine that can reach "
                          "the cluster") from error
    if listed.returncode:
        raise ConfigError(f"squeue failed: {listed.stderr.strip()}; check that the Slurm controller is reachable")
    return set(listed.stdout.split())


class SlurmJob(Job):
    """A submitit SlurmJob; states from ``sacct``, refreshed for all jobs at once at most every ``poll_s``. Where
    sacct cannot tell whether a job ended (PREEMPTED and not requeued, or UNKNOWN: no accounting record), a job
    that ``squeue`` no longer lists ``SQUEUE_AFTER_S`` after it was first seen has ended."""

    MAX_POLL_S = 60.0
    SQUEUE_AFTER_S = 30.0  # sacct lists a new job a few seconds after sbatch
    _last_refresh = 0.0
    _queued: set[str] = set()

    def __init__(self, job):
        self._job, self.job_id = job, str(job.job_id)
        self._outcome: tuple[str, Any] | None = None  # ("success", value) or ("error", traceback), once written
        self._since = time.monotonic()

    @property
    def poll_s(self) -> float:
        """2 s for a new job, then a tenth of its age, at most a minute: sacct and squeue load the controller."""
        return min(self.MAX_POLL_S, max(2.0, (time.monotonic() - self._since) / 10))

    @classmethod
    def attach(cls, folder: str | os.PathLike, job_id: str) -> "SlurmJob":
        """A job submitted earlier (e.g. by a launch that did not wait), from its submitit folder and id."""
        import submitit

        return cls(submitit.SlurmJob(folder=Path(folder) / "%j", job_id=job_id))

    @property
    def log(self) -> Path:
        return self._job.paths.stderr

    @property
    def state(self) -> str:
        if self._read_outcome():
            return FINISHED_OK if self._outcome[0] == "success" else "FAILED"
        self.refresh(every=self.poll_s)
        return (self._job.watcher.get_state(self.job_id, mode="cache").split() or ["UNKNOWN"])[0]  # "CANCELLED by 0"

    def done(self) -> bool:
        if self._job.paths.result_pickle.exists():
            return True
        self.refresh(every=self.poll_s)
        if self._job.watcher.is_done(self.job_id, mode="cache"):
            return True
        return (self.state in ("PREEMPTED", "UNKNOWN") and time.monotonic() - self._since > self.SQUEUE_AFTER_S
                and self.job_id not in SlurmJob._queued)

    def result(self):
        while not self.done():
            time.sleep(self.poll_s)
        if not self._read_outcome():
            state = self.state
            if state == FINISHED_OK:  # sacct can report the end before a shared filesystem shows the result
                time.sleep(self._job._results_timeout_s)
            if not self._read_outcome():
                raise JobFailed(self.job_id, state, _tail(self.log), self.log)
        outcome, value = self._outcome
        if outcome != "success":
            raise JobFailed(self.job_id, "FAILED", str(value), self.log)
        return value

    def cancel(self) -> None:
        self._job.cancel(check=False)

    def _read_outcome(self) -> bool:
        if self._outcome is None and self._job.paths.result_pickle.exists():
            from submitit.core.utils import pickle_load

            self._outcome = pickle_load(self._job.paths.result_pickle)
        return self._outcome is not None

    @classmethod
    def refresh(cls, *, every: float = 0.0) -> None:
        """Ask ``sacct`` for the states of every unfinished job and ``squeue`` for the jobs still queued or running
        (one call each), unless the last time was less than ``every`` seconds ago."""
        if time.monotonic() - cls._last_refresh >= every:
            cls._last_refresh = time.monotonic()
            import submitit

            submitit.SlurmJob.watcher.update()
            cls._queued = queued_or_running()


def _tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return f"no log yet at {path}"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class SlurmExecutor(Executor):
    def __init__(self, spec: ExecutorSpec, folder: Path, name: str):
        import submitit

        super().__init__(spec)
        self.folder = folder.absolute()
        self._submitit = submitit.SlurmExecutor(folder=self.folder / "%j")
        options = {"partition": spec.partition, "gpus_per_node": spec.gpus_per_node, "account": spec.account,
                   "mem": None if spec.mem_gb is None else f"{int(spec.mem_gb * 1024)}MB",
                   "additional_parameters": dict(spec.slurm_additional) or None}
        self._submitit.update_parameters(
            job_name=name, time=spec.timeout_min, cpus_per_task=spec.cpus_per_task or spec.threads,
            array_parallelism=spec.array_parallelism,
            setup=[f"export {variable}={spec.threads}" for variable in THREAD_VARIABLES],
            **{k: v for k, v in options.items() if v is not None})

    def submit_array(self, fn: Callable, args_list: Sequence[tuple], groups: Sequence[str] | None = None) -> list[Job]:
        if not args_list:
            return []
        import cloudpickle

        path = self.folder / "functions" / f"{uuid.uuid4().hex}.pkl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cloudpickle.dumps(fn))
        call = _Pickled(path, self.spec.threads)
        with self._submitit.batch():
            handles = [self._submitit.submit(call, *args) for args in args_list]
        jobs = [SlurmJob(handle) for handle in handles]
        self.jobs += jobs
        return jobs

    def shutdown(self, cancel: bool = False) -> None:
        """``cancel``: ``scancel`` every job it submitted that has not ended; otherwise leave them to Slurm."""
        unfinished = [job.job_id for job in self.jobs if not job.done()] if cancel else []
        if unfinished:
            subprocess.run(["scancel", *unfinished], check=False)
