"""File locks (shared.locks), and sweeps shared by several processes: each run trained once, no job forgotten."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager

from shared import sweep
from shared.locks import file_lock, file_locks
from shared.paths import REPO_ROOT


def _holder(path, seconds: float) -> subprocess.Popen:
    """Another process holding the lock at ``path`` for ``seconds`` (it prints "held" once it has it)."""
    code = f"from shared.locks import file_lock; import time\nwith file_lock({str(path)!r}):\n" \
           f"    print('held', flush=True); time.sleep({seconds})"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_lock_is_refused_without_waiting_and_freed_when_its_holder_is_killed(tmp_path):
    path = tmp_path / "x.lock"
    proc = _holder(path, 60)
    start = time.perf_counter()
    with file_lock(path, wait=False) as held:
        assert held is False and time.perf_counter() - start < 1
    proc.kill()  # the kernel releases an flock when its holder dies
    proc.wait()
    with file_lock(path, wait=False) as held:
        assert held is True


def test_waiting_for_a_lock_returns_once_the_holder_lets_go(tmp_path):
    path = tmp_path / "x.lock"
    proc = _holder(path, 1.0)
    start = time.perf_counter()
    with file_lock(path) as held:
        assert held is True and time.perf_counter() - start > 0.5
    proc.wait()


def test_several_locks_are_taken_in_sorted_order(tmp_path, monkeypatch):
    """Sorted, without repeats, whatever order they are asked in: two processes never wait on each other."""
    import shared.locks as locks

    taken = []

    @contextmanager
    def recording(path, *, wait=True):
        taken.append(os.path.basename(path))
        yield True

    monkeypatch.setattr(locks, "file_lock", recording)
    with file_locks([tmp_path / "c", tmp_path / "a", tmp_path / "b", tmp_path / "a"]):
        pass
    assert taken == ["a", "b", "c"]


_LAUNCH = textwrap.dedent(r"""
    import json, sys, time
    from pathlib import Path
    from shared import sweep

    out, barrier, me = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    def train(args, run_dir):
        with open(out.parent / "trained.log", "a") as log:  # every training, whoever does it
            log.write(f"{args['i']} {me}\n")
        time.sleep(0.3)
        with sweep.RecordWriter(run_dir) as writer:
            writer.write({"run": args["i"], "by": me})

    (barrier / me).touch()
    while len(list(barrier.iterdir())) < 2:  # both processes plan their todo lists before either trains
        time.sleep(0.01)
    counts = sweep.launch([{"i": i} for i in range(6)], train, out)
    print(json.dumps(counts))
""")


def test_two_processes_sharing_a_sweep_folder_train_each_run_once(tmp_path):
    """Both see all six runs pending; without run locks both would train most of them (and one could empty a
    folder the other is writing). With them each run is trained once and the other process skips it."""
    out, barrier = tmp_path / "sweep", tmp_path / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", _LAUNCH, str(out), str(barrier), name], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, NOISY_PROGRESS="0"))
             for name in ("a", "b")]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs  # (without locks one may empty a folder the other writes)
    counts = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
    assert all(c["ran"] == 6 for c in counts)  # planned before the barrier: every run pending for both
    records = sweep.load_records(out)
    assert sorted(r["run"] for r in records) == sorted(sweep.args_hash({"i": i}) for i in range(6))
    trained = (tmp_path / "trained.log").read_text().split("\n")[:-1]
    assert sorted(int(line.split()[0]) for line in trained) == list(range(6))  # each run trained once
    assert [r["by"] for r in records] == [line.split()[1] for line in sorted(
        trained, key=lambda line: sweep.args_hash({"i": int(line.split()[0])}))]  # and its records are its trainer's


_LEDGER = r"""
import sys
from pathlib import Path
from shared import sweep

folder, me = Path(sys.argv[1]), sys.argv[2]
(folder / f"ready-{me}").touch()
while len(list(folder.glob("ready-*"))) < 2:  # both start together
    pass
for i in range(200):  # another launcher sharing the sweep folder adds and removes its own jobs meanwhile
    sweep._update_ledger(folder, add=[{"job_id": f"{me}{i}", "tasks": [[f"run-{me}{i}"]]}])
    if i % 2:
        sweep._update_ledger(folder, remove=[f"{me}{i - 1}"])
"""


def test_launches_sharing_a_folder_never_drop_each_others_jobs_from_the_ledger(tmp_path):
    """Notebooks that share a sweep folder share its ledger of Slurm jobs: each adds and removes only its own
    entries, under the ledger's lock, so a job one has in flight is never forgotten (and submitted twice)."""
    procs = [subprocess.Popen([sys.executable, "-c", _LEDGER, str(tmp_path), name], cwd=REPO_ROOT)
             for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    jobs = {e["job_id"] for e in sweep._read_ledger(tmp_path)}
    assert jobs == {f"{name}{i}" for name in "ab" for i in range(1, 200, 2)}
