"""The ``local`` executor: at most ``jobs`` worker processes on this machine, that stop when told and die with
their parent.

Each worker is ``python -m shared.workers``, connected to the parent by a socket pair (cloudpickle messages);
it runs one job at a time and is reused for the next, so a function is sent to a worker once. What keeps it safe:

- Ctrl-C is handled once, by the parent: workers ignore SIGINT (the terminal sends it to the whole process
  group), the parent's KeyboardInterrupt reaches the caller, which shuts the executor down: every worker's
  process tree (a Jupyter kernel a worker started included) gets SIGTERM, then SIGKILL after 2 s.
- A killed parent takes its workers along: each worker asks Linux for SIGTERM when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``; Linux sends it when the *thread* that started the worker ends, so submit from a
  thread that lives as long as the executor, normally the main one), and its SIGTERM handler terminates its own
  children before exiting. An idle worker also exits when its socket closes.
- Results do not depend on ``jobs``: every worker has ``threads`` math-library threads (``OMP_NUM_THREADS``,
  ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``torch.set_num_threads``).
"""
from __future__ import annotations

import ctypes
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import traceback
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import Callable, Sequence

import cloudpickle
import psutil

from shared.executor import FINISHED_OK, THREAD_VARIABLES, Executor, ExecutorSpec, Job, JobFailed, set_threads

GRACE_S = 2.0
_PR_SET_PDEATHSIG = 1


def kill_trees(pids: Sequence[int], *, include_roots: bool = True, grace_s: float = GRACE_S) -> None:
    """SIGTERM to the processes ``pids`` (or only their descendants) and all their descendants, SIGKILL to any
    still alive after ``grace_s``."""
    procs = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs += root.children(recursive=True) + ([root] if include_roots else [])
        except psutil.NoSuchProcess:
            continue
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace_s)


class LocalJob(Job):
    def __init__(self, executor: "LocalExecutor", job_id: str, fn_key: int, args: bytes, group: str | None = None):
        self._executor, self.job_id, self.fn_key, self.args, self.group = executor, job_id, fn_key, args, group
        self._state, self._value, self._error = "PENDING", None, ""

    @property
    def state(self) -> str:
        self._executor.pump()
        return self._state

    def done(self) -> bool:
        return self.state not in ("PENDING", "RUNNING")

    def result(self):
        while not self.done():
            self._executor.pump(timeout=self.poll_s)
        if self._state != FINISHED_OK:
            raise JobFailed(self.job_id, self._state, self._error)
        return self._value

    def cancel(self) -> None:
        self._executor.cancel(self)

    def _finish(self, state: str, value=None, error: str = "") -> None:
        self._state, self._value, self._error = state, value, error
        self.args = b""


class _Worker:
    def __init__(self, threads: int):
        parent, child = socket.socketpair()
        env = {**os.environ, **{variable: str(threads) for variable in THREAD_VARIABLES}}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shared.workers", str(child.fileno()), str(threads), str(os.getpid())],
            pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
        child.close()
        self.conn = Connection(parent.detach())
        self.conn.send_bytes(pickle.dumps(sys.path))  # functions pickled by reference import from where ours do
        self.functions: set[int] = set()  # the function keys this worker has been sent
        self.job: LocalJob | None = None

    def start(self, job: LocalJob, functions: dict[int, bytes]) -> None:
        fn = None if job.fn_key in self.functions else functions[job.fn_key]
        self.job, job._state = job, "RUNNING"
        self.conn.send_bytes(pickle.dumps((job.job_id, job.fn_key, fn, job.args)))
        self.functions.add(job.fn_key)

    def ended(self) -> str:
        """How the process ended, once its socket closed."""
        try:
            code = self.proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            return "closed its connection"
        return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"

    def close(self) -> None:
        self.conn.close()
        try:
            self.proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            kill_trees([self.proc.pid])


class LocalExecutor(Executor):
    """At most ``spec.jobs`` jobs at once, in worker processes started as needed and reused."""

    def __init__(self, spec: ExecutorSpec):
        super().__init__(spec)
        self._queue: deque[LocalJob] = deque()
        self._workers: list[_Worker] = []
        self._functions: dict[int, bytes] = {}
        self._ids = itertools.count()

    def submit_array(self, fn: Callable, args_list: Sequence[tuple], groups: Sequence[str] | None = None) -> list[Job]:
        if groups is not None and len(groups) != len(args_list):
            raise ValueError(f"groups names {len(groups)} jobs, args_list has {len(args_list)}")
        key = next(self._ids)
        self._functions[key] = cloudpickle.dumps(fn)
        jobs = [LocalJob(self, f"local-{key}-{i}", key, cloudpickle.dumps(tuple(args)),
                         None if groups is None else groups[i]) for i, args in enumerate(args_list)]
        self._queue.extend(jobs)
        self.jobs += jobs
        self.pump()
        return jobs

    def pump(self, timeout: float = 0.0) -> None:
        """Take in finished jobs (waiting up to ``timeout`` s for one) and start queued ones on free workers."""
        busy = {w.conn: w for w in self._workers if w.job is not None}
        for conn in wait(list(busy), timeout) if busy else ():
            worker = busy[conn]
            job, worker.job = worker.job, None
            try:
                job_id, outcome, value = cloudpickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                self._workers.remove(worker)
                job._finish("FAILED", error=f"its worker process {worker.proc.pid} {worker.ended()} before it "
                                            "returned (killed from outside, or out of memory?)")
                worker.conn.close()
                continue
            assert job_id == job.job_id
            job._finish(FINISHED_OK, value) if outcome == "ok" else job._finish("FAILED", error=value)
        while self._queue:
            idle = [w for w in self._workers if w.job is None]
            if not idle and len(self._workers) >= self.spec.jobs:
                break
            if not idle:
                self._workers.append(_Worker(self.spec.threads))
            worker = idle[0] if idle else self._workers[-1]
            worker.start(self._next_job(), self._functions)

    def _next_job(self) -> LocalJob:
        """Take the first queued job whose group has no running job (see ``Executor.submit_array``), else the first."""
        running = {w.job.group for w in self._workers if w.job is not None and w.job.group is not None}
        job = next((j for j in self._queue if j.group is None or j.group not in running), self._queue[0])
        self._queue.remove(job)
        return job

    def cancel(self, job: LocalJob) -> None:
        if job in self._queue:
            self._queue.remove(job)
        for worker in [w for w in self._workers if w.job is job]:
            self._workers.remove(worker)
            kill_trees([worker.proc.pid])
            worker.conn.close()
        if job._state in ("PENDING", "RUNNING"):
            job._finish("CANCELLED", error="cancelled")

    def shutdown(self, cancel: bool = False) -> None:
        """``cancel``: drop queued jobs and stop the running ones with their process trees (SIGTERM, SIGKILL after
        2 s); otherwise wait for every job. The workers end either way."""
        if cancel:
            stopped = [job for job in [*self._queue, *(w.job for w in self._workers)] if job is not None]
            self._queue.clear()
            kill_trees([w.proc.pid for w in self._workers if w.job is not None])
            for job in stopped:
                job._finish("CANCELLED", error="cancelled: the executor was shut down")
            for worker in self._workers:
                worker.job = None
        while self._queue or any(w.job is not None for w in self._workers):
            self.pump(timeout=0.1)
        for worker in self._workers:
            worker.close()
        self._workers.clear()


# ---------------------------------------------------------------------------------------------- the worker
def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before prctl
        os._exit(1)


def _terminate(signum, frame) -> None:
    kill_trees([os.getpid()], include_roots=False)
    os._exit(128 + signum)


def serve(fd: int, threads: int, parent_pid: int) -> None:
    """The worker loop: run each job received on socket ``fd``, reply with its result or traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminate)
    _die_with_parent(parent_pid)
    conn, functions = Connection(fd), {}
    try:
        sys.path[:] = pickle.loads(conn.recv_bytes())
        while True:
            _run_one(conn, functions, threads)
    except EOFError:  # the parent closed the connection or is gone
        return


def _run_one(conn: Connection, functions: dict, threads: int) -> None:
    job_id, key, fn, args = pickle.loads(conn.recv_bytes())
    try:
        if fn is not None:
            functions[key] = None  # stays None if it does not load: the batch's later jobs fail too
            functions[key] = cloudpickle.loads(fn)
        if functions[key] is None:
            raise RuntimeError("this batch's function did not load in this worker; see its first job's error")
        set_threads(threads)
        reply = cloudpickle.dumps((job_id, "ok", functions[key](*cloudpickle.loads(args))))
    except Exception:
        reply = cloudpickle.dumps((job_id, "error", traceback.format_exc()))
    conn.send_bytes(reply)


if __name__ == "__main__":
    serve(*map(int, sys.argv[1:4]))
