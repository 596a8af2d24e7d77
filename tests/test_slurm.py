"""Sweeps on a real single-node Slurm cluster (the ``slurm`` fixture, tests/slurm_cluster.py): the same records as
a local sweep, a cancelled array task reported and re-run by the next launch, and ``wait: false`` collected by
the next launch without submitting anything twice."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import pandas as pd
import pytest

from plench import protocol
from plench.data import PLLDataset, load_pll_dataset
from shared import sweep
from shared.executor import ExecutorSpec

pytestmark = pytest.mark.slurm
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this test module

VOLATILE = ["step_time", "mem_gb"]


def gated_run(args: dict, run_dir: Path) -> None:
    """A sweep run that waits while its ``gate`` file exists (at most a minute) and logs each execution."""
    gate = Path(args["gate"])
    for _ in range(600):
        if not gate.exists():
            break
        time.sleep(0.1)
    with open(gate.parent / "executions.log", "a") as log:
        log.write(f"{args['x']}\n")
    with sweep.RecordWriter(run_dir) as writer:
        writer.write({"x": args["x"], "square": args["x"] ** 2})


def executions(tmp_path: Path) -> list[int]:
    log = tmp_path / "executions.log"
    return sorted(int(line) for line in log.read_text().split()) if log.exists() else []


def array_tasks(out: Path) -> list[str]:
    """The Slurm jobs (array tasks "<array>_<task>", or a lone job) submitted for a sweep folder: submitit's job
    folders holding a submitted pickle."""
    return sorted(p.parent.name for p in (out / sweep.SUBMITIT_FOLDER).glob("*/*_submitted.pkl"))


def test_a_plench_sweep_on_slurm_gives_the_records_of_the_same_sweep_run_locally(slurm, tmp_path):
    ds = load_pll_dataset("digits-FPS0.3")
    small = PLLDataset("digits-FPS0.3-600", ds.X[:600], ds.S[:600], ds.y[:600], ds.classes, "tabular", None, 40, {})
    grid = dict(algorithms=["PRODEN"], n_hparams=2, n_trials=2, arch="mlp", steps=8, checkpoint_freq=4)
    local = protocol.sweep([small], out_dir=tmp_path / "local", executor=ExecutorSpec("local", jobs=2), **grid)
    on_slurm = protocol.sweep([small], out_dir=tmp_path / "slurm", executor=ExecutorSpec("slurm", chunk=2), **grid)
    assert local == on_slurm == {"total": 4, "skipped": 0, "restarted": 0, "ran": 4}
    assert len(array_tasks(tmp_path / "slurm")) == 2  # one array of 2 tasks x 2 runs
    frames = [protocol.collect(tmp_path / name).drop(columns=VOLATILE).sort_values(["run", "step"])
              .reset_index(drop=True) for name in ("local", "slurm")]
    assert len(frames[0]) == 4 * 3
    pd.testing.assert_frame_equal(*frames)


def test_a_notebooks_sweeps_submitted_without_waiting_are_collected_by_its_next_run(slurm, tmp_path):
    """The tabular notebook's path: grids from the settings, the executor a settings mapping (``wait: false``
    first: every grid submitted, one SweepPending; then waiting), records equal to the in-process sweep."""
    from plench.reports import tabular_grids

    ds = load_pll_dataset("digits-FPS0.3")
    small = PLLDataset("digits-FPS0.3-600", ds.X[:600], ds.S[:600], ds.y[:600], ds.classes, "tabular", None, 40, {})
    cfg = dict(algorithms=["PRODEN", "CC", "EXP"], fixed_variants=["EXP"], hparams_overrides={}, n_hparams=1,
               n_trials=2, steps=8, checkpoint_freq=4, batched=False, compat=True)
    here, _ = protocol.sweep_grids(tabular_grids({**cfg, "executor": None}), [small], out_dir=tmp_path / "here")
    on_slurm = {"kind": "slurm", "chunk": 4, "timeout_min": 5}
    with pytest.raises(sweep.SweepPending) as submitted:
        protocol.sweep_grids(tabular_grids({**cfg, "executor": {**on_slurm, "wait": False}}), [small],
                             out_dir=tmp_path / "slurm")
    assert len(submitted.value.job_ids) == 3 and len({j.split("_")[0] for j in submitted.value.job_ids}) == 2
    records, counts = protocol.sweep_grids(tabular_grids({**cfg, "executor": on_slurm}), [small],
                                           out_dir=tmp_path / "slurm")
    assert counts["total"] == 8 and array_tasks(tmp_path / "slurm") == sorted(submitted.value.job_ids)
    key = ["run", "step"]
    pd.testing.assert_frame_equal(here.drop(columns=VOLATILE).sort_values(key).reset_index(drop=True),
                                  records.drop(columns=VOLATILE).sort_values(key).reset_index(drop=True))


def test_a_cancelled_array_task_is_reported_and_its_run_runs_again_on_the_next_launch(slurm, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    args_list = [{"x": x, "gate": str(gate) if x == 2 else str(tmp_path / "open")} for x in range(4)]
    out = tmp_path / "sweep"
    slow = sweep.run_dir_for(args_list[2], out).name
    ledger = out / sweep.SUBMITIT_FOLDER / sweep.SUBMITTED_FILE
    cancelled = []

    def cancel_the_slow_run():  # once it has started (its folder exists), as an admin or a preemption would
        for _ in range(600):
            entries = json.loads(ledger.read_text())["jobs"] if ledger.exists() else []
            job = next((e["job_id"] for e in entries if [slow] in e["tasks"]), None)
            if job and (out / slow).exists():
                subprocess.run(["scancel", job], env=slurm.env, check=True)
                cancelled.append(job)
                return
            time.sleep(0.1)

    canceller = threading.Thread(target=cancel_the_slow_run)
    canceller.start()
    spec = ExecutorSpec("slurm", chunk=1, timeout_min=5)
    with pytest.raises(sweep.SweepFailed) as failed:
        sweep.launch(args_list, gated_run, out, executor=spec)
    canceller.join()
    [(error, units)] = failed.value.failures
    assert (error.job_id, error.state, units) == (cancelled[0], "CANCELLED", [[slow]])
    assert error.log.exists() and f"job {cancelled[0]} CANCELLED, log {error.log}: 1 run(s) {slow}" in str(failed.value)
    assert [sweep.is_done(sweep.run_dir_for(a, out)) for a in args_list] == [True, True, False, True]
    assert json.loads(ledger.read_text())["jobs"] == []  # every job ended: nothing left in flight

    gate.unlink()
    assert sweep.launch(args_list, gated_run, out, executor=spec) == {"total": 4, "skipped": 3, "restarted": 1,
                                                                       "ran": 1}
    assert all(sweep.is_done(sweep.run_dir_for(a, out)) for a in args_list)
    assert executions(tmp_path) == [0, 1, 2, 3]  # the cancelled run never reached its log line, then ran once


def test_a_launch_that_does_not_wait_is_collected_by_the_next_without_resubmitting(slurm, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    args_list = [{"x": x, "gate": str(gate)} for x in range(3)]
    out = tmp_path / "sweep"
    spec = ExecutorSpec("slurm", chunk=2, timeout_min=5, wait=False)
    start = time.monotonic()
    with pytest.raises(sweep.SweepPending) as first:
        sweep.launch(args_list, gated_run, out, executor=spec)
    assert time.monotonic() - start < 10  # returned once submitted
    assert len(first.value.job_ids) == 2 and "3 sweep task(s) are queued or running" in str(first.value)
    with pytest.raises(sweep.SweepPending) as second:  # still running: nothing submitted again
        sweep.launch(args_list, gated_run, out, executor=spec)
    assert second.value.job_ids == first.value.job_ids
    with pytest.raises(sweep.SweepPending) as third:  # the same without a chunk size (nothing new to chunk)
        sweep.launch(args_list, gated_run, out, executor=ExecutorSpec("slurm", timeout_min=5, wait=False))
    assert third.value.job_ids == first.value.job_ids

    gate.unlink()
    summary = sweep.launch(args_list, gated_run, out, executor=ExecutorSpec("slurm", chunk=2, timeout_min=5))
    assert summary["total"] == 3
    assert all(sweep.is_done(sweep.run_dir_for(a, out)) for a in args_list)
    assert executions(tmp_path) == [0, 1, 2]
    assert array_tasks(out) == sorted(first.value.job_ids)
    assert sweep.launch(args_list, gated_run, out, executor=spec)["ran"] == 0  # done: nothing to submit or wait for
