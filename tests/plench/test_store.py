"""Plench's shared sweep folders (plench.store): where runs live, who shares them, and that nothing is trained twice."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from plench import protocol, reports, store
from plench.data import load_pll_dataset
from plench.pages import ValidationUse
from shared import runlog, sweep
from shared.errors import ConfigError
from shared.paths import REPO_ROOT
from shared.profiles import notebook_settings

torch.set_num_threads(1)
METRICS = ["step", "loss", "val_accuracy", "test_acc"]
TINY = {"datasets": ["PLDigits-Vaguest"], "algorithms": ["PRODEN", "CC"], "n_hparams": 2, "n_trials": 1, "steps": 6,
        "checkpoint_freq": 3, "batched": False}


def test_folders_are_in_the_cache_shared_and_per_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("NOISY_CACHE_DIR", str(tmp_path / "elsewhere"))
    data = [load_pll_dataset("PLDigits-Vaguest")]
    shared, arm = store.sweep_dir(store.RUNS, data), store.sweep_dir(store.TRAINING_ARM, data)
    assert shared.parents[1] == arm.parents[1] == tmp_path / "elsewhere" / "plench-sweeps" / "shared"
    assert shared.parent.name != arm.parent.name
    with pytest.raises(ConfigError, match="training-arm"):
        store.sweep_dir("validation")


def test_runs_on_other_data_under_the_same_names_are_not_read():
    """The CI rehearsal's stand-ins and make rehearse's larger ones have the same names and run arguments: the
    data key tells them apart (any array, the test set included)."""
    ds = load_pll_dataset("PLDigits-Vaguest")
    other = dataclasses.replace(ds, S=ds.S.copy())
    other.S[0, (other.S[0] == 0).argmax()] = 1  # one more candidate label in one row
    assert store.data_key([ds]) == store.data_key([dataclasses.replace(ds)]) != store.data_key([other])
    assert store.sweep_dir(store.RUNS, [ds]) != store.sweep_dir(store.RUNS, [other])
    assert store.data_key([dataclasses.replace(ds, name="x")]) != store.data_key([ds])  # the name counts too


def test_the_training_code_decides_the_folder_not_the_scheduling_code():
    """Editing the executor, the progress bars or the locks keeps finished runs; editing the training code does not."""
    from shared.codedeps import module_closure

    files = {f.relative_to(REPO_ROOT).as_posix() for f in module_closure(["plench.protocol"])}
    assert set(store.INFRASTRUCTURE) <= files  # each one really is in the closure it is taken out of
    assert {"plench/protocol.py", "plench/algorithms/base.py", "plench/networks.py", "shared/sweep.py"} <= files
    assert not {"plench/protocol.py", "shared/sweep.py", "shared/seeding.py"} & set(store.INFRASTRUCTURE)


def test_a_rerun_into_a_fresh_output_folder_trains_nothing(tmp_path):
    """The batch runner gives every execution a fresh staging folder: runs kept there were trained again on every
    rerun, and a killed notebook lost them all. In the cache they are found."""
    first = ValidationUse("smoke", settings=TINY, out_dir=tmp_path / "a", device="cpu").run().data.set_index("arm")
    again = ValidationUse("smoke", settings=TINY, out_dir=tmp_path / "b", device="cpu")
    counts = again.run().data.set_index("arm")
    assert list(first["ran"]) == [4, 2] and list(counts["ran"]) == [0, 0]
    assert list(counts["skipped"]) == [4, 2]
    assert not (tmp_path / "b" / "records").exists()


def test_a_stacking_sweep_shares_the_folder_and_names_its_stacks():
    """Stacked runs live in the shared folder too: their identity names their stack, so settings that stack
    otherwise (more trials, stacking off) define other runs instead of reading these."""
    page = ValidationUse("smoke", settings={**TINY, "batched": True}, device="cpu")
    data = list(page.datasets.values())
    assert page.records_dir == store.sweep_dir(store.RUNS, data) == \
        ValidationUse("smoke", settings=TINY, device="cpu").records_dir
    grid, _ = reports.validation_use_grid(page.cfg)
    stacked = grid.run_args(data)
    alone = dataclasses.replace(grid, batched=False).run_args(data)
    assert any("stack" in a for a in stacked)
    assert {sweep.args_hash(a) for a in stacked if "stack" in a}.isdisjoint(sweep.args_hash(a) for a in alone)


def test_the_validation_arm_reads_the_runs_another_sweep_trained(tmp_path, monkeypatch):
    """03's search and 04's "validation" arm define the same runs (full profile: ResNet-32 on PLCIFAR10); trained by
    one, they are read by the other, with the same metrics as if 04 had trained them itself."""
    cfg = notebook_settings("plench", "04_validation_use", "smoke", TINY)
    ds = load_pll_dataset("PLDigits-Vaguest")
    grid, _ = reports.validation_use_grid(cfg)
    protocol.sweep_grids([grid], [ds], out_dir=tmp_path / "runs")  # "03"
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    arms, counts = reports.validation_use_arms({ds.name: ds}, cfg, sweep_dir=tmp_path / "runs",
                                               training_dir=tmp_path / "arm")
    assert counts["validation"] == {"total": 4, "skipped": 4, "restarted": 0, "ran": 0}
    summary = runlog.summarise(log)
    assert summary["plench-run"]["built"] == 0 and summary["plench-run"]["loaded"] == 4
    alone, _ = reports.validation_use_arms({ds.name: ds}, cfg, sweep_dir=tmp_path / "alone",
                                           training_dir=tmp_path / "arm")
    assert arms.drop(columns="per_trial").equals(alone.drop(columns="per_trial"))
    shared = protocol.collect(tmp_path / "runs").sort_values(["run", "step"])[METRICS].reset_index(drop=True)
    own = protocol.collect(tmp_path / "alone").sort_values(["run", "step"])[METRICS].reset_index(drop=True)
    assert shared.equals(own)


def test_a_run_finished_by_another_process_while_queued_is_read_not_retrained(tmp_path, monkeypatch):
    """The sweep worker looks again under the runs' locks: another notebook (or a requeued Slurm task) may have
    finished some of its task meanwhile."""
    ds = load_pll_dataset("PLDigits-Vaguest")
    args = protocol.sweep_args([ds], ["PRODEN"], n_hparams=2, n_trials=1, arch="mlp", checkpoint_freq=3, steps=6)
    task = [(a, str(sweep.run_dir_for(a, tmp_path))) for a in args]
    worker = protocol._SweepWorker({ds.name: ds}, ["PRODEN"], "cpu", protocol.EVAL_BATCH_SIZE)
    worker([task[0]])  # "the other process"
    before = (sweep.run_dir_for(args[0], tmp_path) / sweep.RESULTS_FILE).read_bytes()
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    worker(task)
    built = {e["key"]: e["built"] for e in runlog.read_log(log)}
    assert built == {sweep.args_hash(args[0]): False, sweep.args_hash(args[1]): True}
    assert (sweep.run_dir_for(args[0], tmp_path) / sweep.RESULTS_FILE).read_bytes() == before
    assert all(sweep.is_done(run_dir) for _, run_dir in task)
