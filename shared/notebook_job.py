"""One notebook's execution, as a job: wherever it runs (a local worker, a Slurm node, in-process), it takes
the notebook's lock, executes it with papermill into a staging folder, and writes its record to the ledger.

    runs/<profile>/<paper>/.staging/<stem>.ipynb, <stem>/     the execution in progress
    runs/<profile>/<paper>/<stem>.ipynb, <stem>/               the last good result, replaced only on success
    runs/<profile>/<paper>/<stem>.failed.ipynb, <stem>.failed/  the last failed attempt, kept for reading

A failed run never replaces a good result: the good notebook, its outputs and its ``ok`` record stay, and the
record gains ``last_failure`` (error, time, the failed copy). A notebook whose lock another runner holds is
waited for; if that runner finished it with the same fingerprint, it is not run again.

Kernels talk to the runner over Unix sockets at a path of their own (``ipc_kernel_manager``), not over TCP: with
TCP, jupyter_client picks free ports before the kernel binds them, and two runners starting kernels at the same
moment can pick the same port ("ZMQError: Address already in use", the kernel dies before it starts).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import uuid
from functools import lru_cache
from pathlib import Path

from shared import runlog
from shared.ledger import Ledger

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class PeakMemory(threading.Thread):
    """Polls the resident memory of this process's children (the kernel and its workers)."""

    def __init__(self, interval: float = 0.25):
        super().__init__(daemon=True)
        self.interval, self.peak, self._stop_event = interval, 0, threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop_event.is_set():
            total = 0
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop_event.wait(self.interval)

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return self.peak / 2**20


def list_outputs(out_dir: Path) -> list[str]:
    """The notebook's output files; a sub-folder counts as one entry, ``name/ (N files)``."""
    entries = []
    for path in sorted(out_dir.iterdir()) if out_dir.exists() else []:
        if path.is_file():
            entries.append(path.name)
        elif path.is_dir():
            entries.append(f"{path.name}/ ({sum(1 for p in path.rglob('*') if p.is_file())} files)")
    return entries


def is_up_to_date(record: dict | None, fingerprint: str, out_root: Path) -> bool:
    """Whether ``record`` is a success with this fingerprint whose executed notebook is still there."""
    return bool(record and record.get("status") == "ok" and record.get("fingerprint") == fingerprint
                and (out_root / record.get("output_notebook", "")).is_file())


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _move(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target`` (a file or a folder), removing what ``target`` held."""
    if target.is_dir():
        old = target.with_name(f".{target.name}.replaced")
        _remove(old)
        os.replace(target, old)
        os.replace(source, target)
        shutil.rmtree(old)
    else:
        os.replace(source, target)


def _unstage_paths(notebook: Path, staged_dir: Path, final_dir: Path) -> None:
    """Point an executed notebook at its final place: its injected ``out_dir``, papermill's metadata and any output
    that printed the staging path (the staged notebook's own path is the staging folder's plus ``.ipynb``)."""
    text = notebook.read_text()
    notebook.write_text(text.replace(json.dumps(str(staged_dir))[1:-1], json.dumps(str(final_dir))[1:-1]))


def execute_job(job: dict) -> dict:
    """Execute one planned notebook (``shared.run.plan_jobs``) under its lock; returns ``{"outcome", "record"}``.

    ``outcome`` is "ok", "failed", "pending" (it submitted a Slurm sweep with ``wait: false`` and stopped; it is
    kept like a failure, so the next run executes it again and collects the sweep) or "skipped" (another runner
    finished it while this one waited).
    """
    ledger, key = Ledger(job["out_root"]), job["key"]
    with ledger.lock(key, wait=False) as free:
        if free:
            return _execute_locked(job, ledger)
    print(f"{key} is running in another runner ({ledger.holder(key)}); waiting for it", file=sys.stderr, flush=True)
    with ledger.lock(key):
        return _execute_locked(job, ledger)


@lru_cache(maxsize=1)
def ipc_kernel_manager() -> type:
    """A jupyter_client kernel manager whose kernels use the ``ipc`` transport (Unix sockets) under a unique path
    in the temporary folder, removed when the kernel shuts down, and that shuts a kernel down without interrupting it.

    jupyter_client (8.x, ``_async_shutdown_kernel``) sends SIGINT before every shutdown request. papermill shuts the
    kernel down after the last cell, so there is nothing to interrupt; but a SIGINT that lands while the kernel
    handles a message (a busy machine makes it likelier) is logged by ipykernel as "[IPKernelApp] ERROR |
    KeyboardInterrupt caught in kernel." on the runner's terminal, an error line in a clean run. A cell that runs
    past its timeout is still interrupted (nbclient calls ``interrupt_kernel`` itself), and the shutdown request,
    which ipykernel handles on its control channel, ends a kernel that is still busy."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        def _ip_default(self) -> str:
            return os.path.join(tempfile.gettempdir(), f"kernel-{uuid.uuid4().hex}-ipc")

        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IPCKernelManager


def _execute_locked(job: dict, ledger: Ledger) -> dict:
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    key, out_root = job["key"], Path(job["out_root"])
    previous = ledger.read(key)
    if not job["force"] and is_up_to_date(previous, job["fingerprint"], out_root):
        return {"outcome": "skipped", "record": previous}
    for var in THREAD_VARIABLES:
        os.environ[var] = str(job["threads"])
    final_nb, final_dir = Path(job["output_notebook"]), Path(job["parameters"]["out_dir"])
    staging = final_nb.parent / ".staging"
    staged_nb, staged_dir = staging / final_nb.name, staging / final_nb.stem
    for path in (staged_nb, staged_dir):  # left by a killed run
        _remove(path)
    staged_dir.mkdir(parents=True)
    record = {k: job[k] for k in ("paper", "notebook", "fingerprint", "parameters", "kernel", "threads")}
    record.update(started=time.strftime("%Y-%m-%dT%H:%M:%S"), python=platform.python_version(), host=platform.node(),
                  executor=job["executor"])
    # every run the kernel and its workers touch is logged here (shared.runlog), then summarised in the record
    os.environ[runlog.ENV] = str(staged_dir / runlog.FILENAME)
    monitor = PeakMemory()
    monitor.start()
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            job["input"], str(staged_nb), parameters=dict(job["parameters"], out_dir=str(staged_dir)),
            kernel_name=job["kernel"], cwd=str(Path(job["input"]).parent), progress_bar=False, log_output=False,
            request_save_on_cell_execute=True, execution_timeout=job["cell_timeout"],
            kernel_manager_class=ipc_kernel_manager(),
        )
        status, error = "ok", None
    except PapermillExecutionError as e:  # SweepPending: a sweep submitted to Slurm with wait: false
        status = "pending" if e.ename == "SweepPending" else "failed"
        error = f"cell {e.exec_count}: {e.ename}: {e.evalue}"[:2000]
    except Exception as e:  # kernel died, timeout, bad parameters ...
        status, error = "failed", f"{type(e).__name__}: {e}"[:2000]
    os.environ.pop(runlog.ENV, None)
    record.update(status=status, error=error, wall_s=round(time.perf_counter() - start, 2),
                  peak_rss_mb=round(monitor.stop(), 1), finished=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  outputs=list_outputs(staged_dir), runs=runlog.summarise(staged_dir / runlog.FILENAME))
    failed_nb, failed_dir = final_nb.with_suffix(".failed.ipynb"), final_dir.with_name(final_dir.name + ".failed")
    if status == "ok":
        _unstage_paths(staged_nb, staged_dir, final_dir)
        _move(staged_dir, final_dir)
        _move(staged_nb, final_nb)
        for path in (failed_nb, failed_dir):
            _remove(path)
        record.update(output_notebook=str(final_nb.relative_to(out_root)), out_dir=str(final_dir.relative_to(out_root)))
    else:
        if staged_nb.exists():
            _move(staged_nb, failed_nb)
        _move(staged_dir, failed_dir)
        failure = {"status": status, "error": error, "finished": record["finished"], "parameters": job["parameters"],
                   "fingerprint": job["fingerprint"], "failed_notebook": str(failed_nb.relative_to(out_root)),
                   "failed_out_dir": str(failed_dir.relative_to(out_root))}
        if previous and previous.get("status") == "ok":
            record = {**previous, "last_failure": failure}  # the good result stays
        else:
            record.update(output_notebook=failure["failed_notebook"], out_dir=failure["failed_out_dir"])
    ledger.write(key, record)
    ledger.write_manifest()
    return {"outcome": status, "record": record, "error": error}
