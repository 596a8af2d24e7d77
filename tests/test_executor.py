"""shared.executor: the spec and its YAML profile, the debug executor, and the local executor's limits and faults
(concurrency, fixed threads, failures, Ctrl-C and a killed parent leaving no process behind)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from shared import sweep
from shared.errors import ConfigError
from shared.executor import ExecutorSpec, JobFailed, as_completed, executor_spec, make_executor


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(condition, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# ---------------------------------------------------------------------------------------------- the spec
def test_spec_reads_a_yaml_profile_then_overrides(tmp_path):
    profile = tmp_path / "cluster.yaml"
    profile.write_text("partition: gpu\ngpus_per_node: 1\ntimeout_min: 240\nmem_gb: 32\narray_parallelism: 64\n"
                       "account: mylab\nslurm_additional: {qos: high}\n")
    spec = ExecutorSpec.from_options("slurm", yaml_file=profile, timeout_min=30, threads=2)
    assert (spec.kind, spec.partition, spec.gpus_per_node, spec.timeout_min, spec.mem_gb, spec.array_parallelism,
            spec.account, spec.slurm_additional, spec.threads) == \
        ("slurm", "gpu", 1, 30, 32, 64, "mylab", {"qos": "high"}, 2)
    assert executor_spec({"kind": "slurm", "slurm_profile": str(profile), "wait": False}, threads=3) == \
        ExecutorSpec.from_options("slurm", yaml_file=profile, threads=3, wait=False)
    assert executor_spec(None) is None and executor_spec("debug") == ExecutorSpec("debug")


def test_spec_errors_name_the_problem_and_the_choices(tmp_path):
    profile = tmp_path / "cluster.yaml"
    profile.write_text("partition: gpu\ngpus: 1\n")
    with pytest.raises(ConfigError, match=r"unknown executor option\(s\) gpus in .*cluster.yaml; valid options: .*"
                                          r"gpus_per_node"):
        ExecutorSpec.from_options("slurm", yaml_file=profile)
    with pytest.raises(ConfigError, match="unknown executor 'slrum'; valid executors: debug, local, slurm"):
        ExecutorSpec.from_options("slrum")
    with pytest.raises(ConfigError, match="no executor profile"):
        ExecutorSpec.from_options("slurm", yaml_file=tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="wait: false needs the slurm executor"):
        ExecutorSpec("local", wait=False)
    with pytest.raises(ConfigError, match="jobs must be a whole number >= 1"):
        ExecutorSpec("local", jobs=0)


# ---------------------------------------------------------------------------------------------- debug
def test_debug_runs_in_this_process_one_job_at_a_time_and_raises_the_tasks_own_error():
    ran = []

    def task(x):
        ran.append(x)
        if x == 2:
            raise KeyError("two")
        return x * 10

    executor = make_executor(ExecutorSpec("debug"), ".")
    jobs = executor.submit_array(task, [(1,), (2,), (3,)])
    assert ran == [] and [job.state for job in jobs] == ["PENDING"] * 3  # nothing runs before it is asked for
    first = next(as_completed(jobs))
    assert (first.result(), ran) == (10, [1])
    with pytest.raises(KeyError, match="two"):
        jobs[1].result()
    executor.shutdown(cancel=True)
    assert ran == [1, 2] and jobs[2].state == "CANCELLED"


# ---------------------------------------------------------------------------------------------- local
def interval(seconds: float) -> tuple[int, float, float]:
    start = time.time()
    time.sleep(seconds)
    return os.getpid(), start, time.time()


def test_local_runs_at_most_jobs_at_once_in_reused_workers():
    executor = make_executor(ExecutorSpec("local", jobs=2), ".")
    try:
        jobs = executor.submit_array(interval, [(0.4,)] * 6)
        results = [job.result() for job in jobs]
    finally:
        executor.shutdown()
    events = sorted([(start, 1) for _, start, _ in results] + [(end, -1) for _, _, end in results])
    running = [sum(step for _, step in events[:i + 1]) for i in range(len(events))]
    assert max(running) == 2  # the limit was reached and never passed
    assert len({pid for pid, _, _ in results}) == 2 and os.getpid() not in {pid for pid, _, _ in results}


def test_local_starts_a_job_of_an_idle_group_before_a_second_one_of_a_running_group():
    """Submitted a, a, b, b, c on two slots: the second "a" waits for the first (it would only wait on its cache locks)
    and b's first job takes the free slot; the rule is a preference, so nothing waits once only one group is queued."""
    executor = make_executor(ExecutorSpec("local", jobs=2), ".")
    try:
        jobs = executor.submit_array(interval, [(1.0,), (0.1,), (0.1,), (0.1,), (3.0,)],
                                     groups=["a", "a", "b", "b", "c"])
        assert [job._state for job in jobs] == ["RUNNING", "PENDING", "RUNNING", "PENDING", "PENDING"]
        results = [job.result() for job in jobs]
    finally:
        executor.shutdown()
    (_, _, a1_end), (_, a2, _), _, _, _ = results
    assert a2 >= a1_end  # a's second job started after a's first had ended, whatever the other jobs' timing
    with pytest.raises(ValueError, match="groups names 1 jobs"):
        executor.submit_array(interval, [(0,), (0,)], groups=["a"])


def thread_settings(_) -> tuple:
    import torch

    return (tuple(os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")),
            torch.get_num_threads())


@pytest.mark.parametrize("jobs", [1, 3])
def test_each_worker_has_the_threads_it_was_given_whatever_the_number_of_workers(jobs):
    results = sweep.map_jobs(thread_settings, range(3), executor=ExecutorSpec("local", jobs=jobs, threads=2))
    assert results == [(("2", "2", "2"), 2)] * 3


def fail_on(x: int) -> int:
    if x == 3:
        raise ValueError(f"boom {x}")
    return x


def test_a_failing_task_raises_jobfailed_with_its_traceback_and_the_others_finish():
    executor = make_executor(ExecutorSpec("local", jobs=2), ".")
    try:
        jobs = executor.submit_array(fail_on, [(x,) for x in range(5)])
        with pytest.raises(JobFailed) as failed:
            jobs[3].result()
        assert [jobs[x].result() for x in (0, 1, 2, 4)] == [0, 1, 2, 4]
    finally:
        executor.shutdown()
    assert (failed.value.job_id, failed.value.state) == (jobs[3].job_id, "FAILED")
    assert "ValueError: boom 3" in failed.value.error and "fail_on" in failed.value.error
    with pytest.raises(JobFailed, match="ValueError: boom 3"):
        sweep.map_jobs(fail_on, range(5), jobs=2)


def test_a_worker_killed_from_outside_fails_its_job_and_the_next_job_gets_a_new_worker():
    executor = make_executor(ExecutorSpec("local", jobs=1), ".")
    try:
        slow, after = executor.submit_array(interval, [(60,), (0,)])
        assert wait_until(lambda: slow.state == "RUNNING")
        worker = executor._workers[0].proc.pid
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(JobFailed, match="killed by SIGKILL"):
            slow.result()
        assert after.result()[0] != worker
    finally:
        executor.shutdown()


PARENT = """
import os, subprocess, sys, time
from pathlib import Path
from shared import sweep

def task(where):
    folder, i = where
    child = subprocess.Popen(["sleep", "300"])   # a descendant, like a Jupyter kernel
    Path(folder, f"{i}.pids").write_text(f"{os.getpid()} {child.pid}")
    time.sleep(300)

if __name__ == "__main__":
    try:
        sweep.map_jobs(task, [(sys.argv[1], i) for i in range(4)], jobs=2)
    except KeyboardInterrupt:
        print("KeyboardInterrupt handled", flush=True)
        sys.exit(130)
"""


def start_parent(tmp_path) -> tuple[subprocess.Popen, list[int]]:
    """A parent running 4 tasks on 2 local workers, each worker with a ``sleep`` child; returns the parent and the
    pids of the 2 workers and their 2 children, once they all run."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(PARENT))
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=os.getcwd())
    started = lambda: sorted(tmp_path.glob("*.pids"))  # noqa: E731
    assert wait_until(lambda: len(started()) == 2), parent.communicate(timeout=5)[0] if parent.poll() else "stuck"
    time.sleep(0.3)  # only 2 run at once: no third task starts
    assert len(started()) == 2
    pids = [int(pid) for path in started() for pid in path.read_text().split()]
    assert all(alive(pid) for pid in pids)
    return parent, pids


def test_ctrl_c_stops_the_workers_and_their_children_and_raises_keyboardinterrupt(tmp_path):
    parent, pids = start_parent(tmp_path)
    start = time.monotonic()
    os.killpg(parent.pid, signal.SIGINT)  # what the terminal does: the whole process group
    output, _ = parent.communicate(timeout=20)
    assert time.monotonic() - start < 8
    assert parent.returncode == 130 and "KeyboardInterrupt handled" in output
    assert not [pid for pid in pids if alive(pid)]
    assert len(list(tmp_path.glob("*.pids"))) == 2  # no task started after Ctrl-C


def test_a_killed_parent_leaves_no_worker_or_worker_child_behind(tmp_path):
    parent, pids = start_parent(tmp_path)
    parent.kill()
    parent.wait()
    assert wait_until(lambda: not any(alive(pid) for pid in pids), timeout=8), \
        [psutil.Process(p).cmdline() for p in pids if alive(p)]
