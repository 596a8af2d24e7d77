"""plench.cost: the plans of Plench's notebooks (runs, identities, steps, views), checked on the planner alone and
against what the executing code logs for tiny sweeps."""
from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest
import torch

from plench import cost, protocol, reports
from plench.algorithms import ALGORITHMS
from plench.data import PLL_DATASETS, load_pll_dataset, plench_split
from plench.hparams import hparams_for
from shared import runlog
from shared.cost import batched
from shared.errors import ConfigError
from shared.profiles import notebook_settings
from shared.workloads import PLENCH_IMAGE_PASSES, PLENCH_STACKED

NOTEBOOKS = ("00_datasets", "01_selection_theory", "02_tabular", "03_image", "04_validation_use")


def _plan(notebook, profile="smoke", data_dir=None, **overrides):
    cfg = notebook_settings("plench", notebook, profile, overrides)
    return cost.plan(notebook, cfg, {"profile": profile, "data_dir": data_dir})


def _kinds(plan) -> Counter:
    return Counter(kind for kind, _ in {(r.kind, r.identity) for r in plan})


# -- run counts -----------------------------------------------------------------------------------------------------
def test_the_full_profile_plans_every_notebook_with_the_papers_grid(tmp_path):
    """Every notebook plans; the sweeps are datasets x algorithms x configurations x splits (the paper's protocol:
    02 20 tabular algorithms (+3 fixed variants) on 9 tables, 03 26 image algorithms x 2 networks on 2 datasets,
    04 the ResNet half of 03 plus one run per split), here with fewer configurations and splits."""
    few = {"n_hparams": 2, "n_trials": 1}
    plans = {nb: _plan(nb, "full", tmp_path, **(few if nb[:2] in ("02", "03", "04") else {})) for nb in NOTEBOOKS}
    assert plans["00_datasets"] == [] and plans["01_selection_theory"] == []
    assert _kinds(plans["02_tabular"]) == {"plench-run": (20 + 3) * 9 * 2, "plench-speedup": 4}
    # the sweep, and Figure 4's 26 runs alone (the sweep stacks: batched)
    assert _kinds(plans["03_image"]) == {"plench-run": 26 * 2 * 2 * 2 + 26, "plench-compat-check": 4}
    assert _kinds(plans["04_validation_use"]) == {"plench-run": 26 * 2 * 2, "plench-training-arm": 26 * 2}
    image = [r for r in plans["03_image"] if r.kind == "plench-run"]
    assert {r.work[0].workload.arch for r in image} == {"resnet32", "densenet_bc"}
    assert sum(r.work[0].steps == 60_000 for r in image) == 26 * 2 * 2 * 2  # the paper's 60,000 iterations
    assert sum(r.work[0].steps == 2_000 for r in image) == 26  # Figure 4's timed runs


def test_doubling_the_splits_doubles_the_seeded_runs_only():
    one, two = _plan("03_image", n_trials=1), _plan("03_image", n_trials=2)
    assert _kinds(two)["plench-run"] == 2 * _kinds(one)["plench-run"]
    assert _kinds(two)["plench-compat-check"] == _kinds(one)["plench-compat-check"] == 4
    one, two = _plan("04_validation_use", n_trials=1), _plan("04_validation_use", n_trials=2)
    assert _kinds(two) == {k: 2 * v for k, v in _kinds(one).items()}


def test_runs_of_two_notebooks_stacked_otherwise_are_two_runs():
    """02's and 04's smoke sweeps define runs with equal arguments (PLDigits-Vaguest, MLP, configurations 0-1) but
    stack them with other runs (``batched: auto``; 02 searches 2 configurations, 04 four): a stacked run's identity
    names its stack (``protocol.sweep_args``), so they are different runs, and neither notebook reads the other's."""
    ds = load_pll_dataset("PLDigits-Vaguest")
    tabular = [a for g in reports.tabular_grids(notebook_settings("plench", "02_tabular", "smoke", {}))
               for a in g.run_args([ds])]
    validation = reports.validation_use_grid(notebook_settings("plench", "04_validation_use", "smoke", {}))[0]
    validation = validation.run_args([ds])

    def bare(args):
        return runs_key({k: v for k, v in args.items() if k != "stack"})

    from shared.sweep import args_hash as runs_key
    by_bare = {bare(a): a for a in tabular}
    pairs = [(by_bare[bare(a)], a) for a in validation if bare(a) in by_bare]
    stacked = [(t, v) for t, v in pairs if "stack" in t or "stack" in v]
    assert stacked, "the smoke settings were expected to define some of 02's stacked runs in 04"
    assert all(t.get("stack") != v.get("stack") and runs_key(t) != runs_key(v) for t, v in stacked)
    assert all(runs_key(t) == runs_key(v) for t, v in pairs if "stack" not in t and "stack" not in v)


def test_a_gpus_full_image_grid_is_planned_stacked_in_bf16_on_a_machine_without_one():
    """``python -m shared.cost --profile full`` plans the notebooks as they would run on the priced GPU
    (``-p device cuda``) from a CPU login node: bf16 runs, stacks of up to 16 (``batched: true``)."""
    cfg = notebook_settings("plench", "03_image", "full", {"n_hparams": 4, "n_trials": 1, "archs": ["resnet32"]})
    planned = cost.plan("03_image", cfg, {"profile": "full", "data_dir": None, "device": "cuda"})
    steps = [w for r in planned if r.kind == "plench-run" for w in r.work if w.workload.phase == "train"]
    assert {w.workload.precision for w in steps} == {"bf16"}
    assert max(w.stack for w in steps) > 1 and min(w.stack for w in steps) == 1  # Fig. 4's runs alone, and others


def test_the_full_validation_arm_is_priced_once_with_the_image_tables():
    """In the full profile 04's "validation" arm is the ResNet-32 search of 03, stacked alike (both ``batched: true``:
    the same stacks): the same identities, so the paper's total prices them once; only the "training" arm is 04's
    own."""
    image, validation = _plan("03_image", "full"), _plan("04_validation_use", "full")
    searched = [r for r in validation if r.kind == "plench-run"]
    assert len(searched) == 2 * 26 * 20 * 3  # datasets x algorithms x configurations x splits
    assert {r.identity for r in searched} <= {r.identity for r in image}
    own = {r.identity for r in validation} - {r.identity for r in image}
    assert len(own) == 2 * 26 * 3 and all(i.startswith("plench-sweeps/shared/training-arm/PLCIFAR10_Aggregate+"
                                                       "PLCIFAR10_Vaguest/") for i in own)


def test_a_batch_size_larger_than_the_split_is_a_config_error():
    size = cost.dataset_sizes(["digits-USS"], None, None)["digits-USS"]
    args = protocol.run_args("digits-USS", "PRODEN", arch="mlp", hparams_seed=0, trial_seed=0, steps=3,
                             checkpoint_freq=1, hparams_overrides={"batch_size": 4096})
    with pytest.raises(ConfigError, match="fewer than the batch size"):
        cost.run_work(size, args)


# -- steps, examples, views -------------------------------------------------------------------------------------
@pytest.mark.parametrize("steps,freq", [(1, 1), (2, 1), (200, 25), (201, 25), (60_000, 1000), (30, 10), (7, 100)])
def test_checkpoints_are_the_steps_is_checkpoint_marks(steps, freq):
    assert cost.checkpoints(steps, freq) == sum(protocol.is_checkpoint(s, steps, freq) for s in range(steps))


def test_a_full_resnet_run_takes_60000_steps_and_61_evaluations():
    """PRODEN with the defaults (batch 256) on PLCIFAR10: 45,000 / 5,000 rows + the 10,000 CIFAR-10 test images."""
    size = cost.dataset_sizes(["PLCIFAR10_Aggregate"], "image", "/nonexistent")["PLCIFAR10_Aggregate"]
    assert (size.train, size.val, size.test) == (45_000, 5_000, 10_000)
    args = protocol.run_args(size.name, "PRODEN", arch="resnet32", hparams_seed=0, trial_seed=0, steps=60_000,
                             checkpoint_freq=1000)
    train, evaluate = cost.run_work(size, args)
    assert train.workload.key == "cifar_resnet/resnet32/train/b256/3x32x32/fp32/augment=weak,nograd=1,optimizer=adam"
    assert (train.steps, train.examples, train.views) == (60_000, 60_000 * 256, 1)
    assert evaluate.workload.key == "cifar_resnet/resnet32/infer/b512/3x32x32/fp32"
    assert evaluate.steps == 61 * (math.ceil(5000 / 512) + math.ceil(10_000 / 512))
    assert evaluate.examples == evaluate.rows == 61 * 15_000  # priced by its rows: the last batches are partial
    assert train.rows is None  # training steps are full batches


def test_checkpoint_evaluation_of_a_small_split_is_priced_by_its_rows():
    """A rehearsal-sized split (hundreds of validation and 100 test rows): 2 short batches of 512 per checkpoint,
    priced as (val + test) / 512 of a full step, not 2 (shared.cost.Work.rows); the training steps stay full."""
    size = cost.dataset_sizes(["PLCIFAR10_Aggregate"], "image", "/nonexistent")["PLCIFAR10_Aggregate"]
    size = dataclasses.replace(size, examples=1000, test_examples=100)
    rows = size.val + size.test
    assert size.train >= 256 and 0 < size.val < 512 and size.test == 100
    args = protocol.run_args(size.name, "PRODEN", arch="resnet32", hparams_seed=0, trial_seed=0, steps=4,
                             checkpoint_freq=2)
    *train, evaluate = cost.run_work(size, args)
    n = cost.checkpoints(4, 2)
    assert (evaluate.steps, evaluate.rows) == (n * 2, n * rows)
    assert evaluate.full_steps == pytest.approx(n * rows / 512) and evaluate.full_steps < evaluate.steps / 2
    assert all(w.rows is None for w in train)


def test_a_random_configuration_takes_its_drawn_batch_size():
    size = cost.dataset_sizes(["Lost"], None, "/nonexistent")["Lost"]
    for h in range(1, 6):
        args = protocol.run_args("Lost", "CC", arch="mlp", hparams_seed=h, trial_seed=1, steps=10_000,
                                 checkpoint_freq=1000)
        batch = hparams_for("CC", "mlp", hparams_seed=h, trial_seed=1, dataset="Lost")["batch_size"]
        train = cost.run_work(size, args)[0]
        assert train.workload.batch == batch and train.steps == 10_000 and train.examples == 10_000 * batch


@pytest.mark.parametrize("algorithm,views", [("PRODEN", 1), ("CC", 1), ("IDGP", 1), ("PiCO", 2), ("ABLE", 2),
                                             ("CRDPLL", 2), ("ALIM", 2), ("PiCO_plus", 2), ("DIRK", 3)])
def test_views_are_those_the_algorithm_builds(algorithm, views):
    size = cost.dataset_sizes(["PLDigits-Vaguest"], "image", None)["PLDigits-Vaguest"]
    args = protocol.run_args(size.name, algorithm, arch="digits_cnn", hparams_seed=0, trial_seed=0, steps=10,
                             checkpoint_freq=5, hparams_overrides={"batch_size": 32, "moco_queue": 256})
    train = cost.run_work(size, args)[0]
    assert train.views == views
    # what protocol.make_batch computes for this algorithm: the Batch fields that are not left empty
    data = protocol.run_data(load_pll_dataset(size.name, modality="image"), 0)
    batch = protocol.make_batch(data, torch.arange(4), ALGORITHMS[algorithm].views, "cpu")
    assert sum(getattr(batch, f).numel() > 0 for f in protocol.VIEWS) == views
    tabular = cost.dataset_sizes(["PLDigits-Vaguest"], None, None)["PLDigits-Vaguest"]
    if ALGORITHMS[algorithm].tabular:
        assert cost.run_work(tabular, {**args, "arch": "mlp"})[0].views == 1


def test_image_algorithms_views_agree_with_the_workload_registry():
    for name, (_, _, augment) in PLENCH_IMAGE_PASSES.items():
        assert "_".join(ALGORITHMS[name].views) == augment, name


def test_the_workload_registry_knows_which_image_algorithms_stack():
    """``gpu_check`` measures the stacked steps of ``PLENCH_STACKED`` (it cannot import the trainer on a bare GPU
    box): the set must be the one the trainer stacks, CRDPLL (two views), DIRK, PiCO, ABLE and IDGP (their own
    stacked steps) included."""
    stacking = {name for name in PLENCH_IMAGE_PASSES if protocol.algorithm_stacks(name, "resnet32")}
    assert stacking == set(PLENCH_STACKED) and {"CRDPLL", "DIRK", "PiCO", "ABLE", "IDGP"} <= stacking
    assert not {"PiCO_plus", "ALIM", "FREDIS", "GA", "VALEN"} & stacking


def test_stacked_steps_make_the_passes_of_a_run_alone():
    """``train_runs_batched`` re-forwards the batch only for algorithms that refresh confidences (PRODEN), as a run
    alone does; CC's stacked steps make no extra forward. The members share each step's dispatch, not its FLOPs."""
    size = cost.dataset_sizes(["PLDigits-Vaguest"], None, None)["PLDigits-Vaguest"]
    for algorithm, phases in (("CC", ["train", "infer"]), ("PRODEN", ["train", "infer", "infer"])):
        args = protocol.run_args(size.name, algorithm, arch="mlp", hparams_seed=0, trial_seed=0, steps=40,
                                 checkpoint_freq=20)
        alone, stacked = cost.run_work(size, args), cost.run_work(size, args, stack=4)
        assert [w.workload.phase for w in alone] == [w.workload.phase for w in stacked] == phases
        assert [w.steps for w in alone] == [w.steps for w in stacked]
        assert [w.stack for w in stacked] == [4] * (len(phases) - 1) + [1] and {w.stack for w in alone} == {1}
    image = cost.dataset_sizes(["PLDigits-Vaguest"], "image", None)["PLDigits-Vaguest"]
    args = protocol.run_args(image.name, "PRODEN", arch="digits_cnn", hparams_seed=0, trial_seed=0, steps=40,
                             checkpoint_freq=20)
    assert [w.stack for w in cost.run_work(image, args, stack=3)] == [3, 1]  # the conv net's step, then evaluation


def test_a_stack_shares_the_dispatch_floor_of_its_steps(monkeypatch):
    from shared.cost import Calibration, workload_flops

    size = cost.dataset_sizes(["PLDigits-Vaguest"], None, None)["PLDigits-Vaguest"]
    args = protocol.run_args(size.name, "CC", arch="mlp", hparams_seed=0, trial_seed=0, steps=40, checkpoint_freq=20)
    train = cost.run_work(size, args, stack=4)[0].workload
    slow = Calibration("test-device", {"fp32": 1e3}, {}, dispatch_s=1e-3)  # FLOPs cost nothing here
    alone, shared = slow.step_seconds(train, 1.0), slow.step_seconds(train, 1.0, stack=4)
    assert alone[0] == pytest.approx(4 * shared[0]) and alone[0] > 1e3 * workload_flops(train) / 1e15


def test_valen_phases_cover_every_step():
    size = cost.dataset_sizes(["Lost"], None, "/nonexistent")["Lost"]
    hp = hparams_for("VALEN", "mlp")
    phases = cost.step_passes("VALEN", hp.__getitem__, compat=True, steps=10_000, n_train=size.train)
    assert sum(p.steps for p in phases) == 10_000
    assert [p.what for p in phases] == ["warm-up", "feature collection", "kNN graph", "variational"]
    assert phases[0].steps == hp["warm_up"] and phases[1].steps == math.ceil(size.train / hp["batch_size"] + 1)


# -- sizes ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,modality", [("digits-USS", None), ("PLDigits-Aggregate", "image"),
                                           ("synthetic-manyclass", None)])
def test_registry_sizes_are_the_stand_ins_sizes(name, modality):
    ds = load_pll_dataset(name, modality=modality)
    size = cost.dataset_sizes([name], modality, None)[name]
    split = plench_split(ds, 3)
    assert (size.examples, size.classes, size.steps) == (len(ds), ds.num_classes, ds.steps)
    assert size.input_shape == protocol.run_data(ds, 3).input_shape
    assert (size.train, size.val, size.test) == (len(split["train"]), len(split["val"]), len(split["test"]))
    assert size.width == protocol.data_width(ds)


def test_registry_has_a_size_for_every_dataset():
    for spec in PLL_DATASETS.values():
        assert spec.examples and spec.features and spec.classes, spec.name


def test_the_training_arm_trains_on_training_and_validation_rows():
    ds = load_pll_dataset("digits-USS")
    size = cost.dataset_sizes(["digits-USS"], None, None)["digits-USS"].validation_in_training()
    moved = reports.validation_as_training(ds, 1)
    split, original = plench_split(moved, 1), plench_split(ds, 1)
    assert (size.examples, size.train, size.val, size.test) == (
        len(moved), len(split["train"]), len(split["val"]), len(moved.test[1]))
    assert size.train == len(original["train"]) + len(original["val"])


@pytest.mark.parametrize("holdout", [0.1, 0.2, 0.33])
def test_validation_as_training_finds_the_smallest_layout(holdout):
    """Its search starts under a bound instead of at ``wanted``: the same row count as counting up from there."""
    test = (np.empty((5, 0)), np.zeros(5))
    for wanted in range(1, 300, 17):
        n = wanted
        while len(reports._split_size(n, test, 0, holdout)["train"]) < wanted:
            n += 1
        start = max(wanted, int((wanted - 1) / (1 - holdout)) - 1)
        assert start <= n


# -- identities = the keys the executing code logs --------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:train_runs_batched")
def test_planned_identities_are_the_keys_the_sweep_logs(tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    grid = protocol.Grid(("PRODEN", "GA"), n_hparams=2, n_trials=1, arch="mlp", checkpoint_freq=2, steps=3,
                         batched=True)
    ds = load_pll_dataset("digits-USS")
    for _ in range(2):  # trains, then finds them done
        protocol.sweep_grids([grid], [ds], out_dir=tmp_path / "records")
    sizes = cost.dataset_sizes(["digits-USS"], None, None)
    planned = cost.sweep_runs("02_tabular", cost.RECORDS, grid, sizes)
    logged = runlog.summarise(log)["plench-run"]
    assert logged["runs"] == logged["built"] == logged["loaded"] + 4 == 4
    # every sweep folder is shared (plench.store); a stacked run's identity names its stack, so the same grid
    # trained alone plans other runs
    assert {r.identity for r in planned} == {f"plench-sweeps/shared/runs/digits-USS/{e['key']}"
                                             for e in runlog.read_log(log)}
    alone = dataclasses.replace(grid, batched=False)
    shared = [r.identity for r in cost.sweep_runs("04_validation_use", cost.RECORDS, alone, sizes)]
    assert shared == [r.identity for r in cost.sweep_runs("02_tabular", cost.RECORDS, alone, sizes)]
    assert all(i.startswith("plench-sweeps/shared/runs/") for i in shared)
    stacks = [args.get("stack") for args in grid.run_args([ds])]
    assert stacks.count(None) >= 2  # GA (its own train_step: gradient ascent) trains alone
    assert len({r.identity for r in planned} - set(shared)) == len(stacks) - stacks.count(None)
    assert {r.identity.rsplit("/", 1)[1] for r in planned} == {p.name for p in (tmp_path / "records").iterdir()
                                                                if not p.name.startswith(".")}


def test_training_arm_speedup_and_compat_check_keys(tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    cfg = notebook_settings("plench", "04_validation_use", "smoke",
                            {"algorithms": ["CC"], "n_hparams": 1, "n_trials": 1, "steps": 2, "checkpoint_freq": 1,
                             "datasets": ["PLDigits-Vaguest"]})
    ds = load_pll_dataset("PLDigits-Vaguest")
    reports.validation_use_arms({ds.name: ds}, cfg, sweep_dir=tmp_path / "runs", training_dir=tmp_path / "arm")
    planned = cost.plan("04_validation_use", cfg, {"data_dir": None})
    keys = {(e["kind"], e["key"]) for e in runlog.read_log(log)}
    assert {(r.kind, r.identity.rsplit("/", 1)[1]) for r in planned} == keys

    log.unlink()
    spec = {"dataset": ds.name, "algorithm": "PRODEN", "configs": 2, "steps": 2, "batch_sizes": [32]}
    reports.batched_speedup({ds.name: ds}, spec, checkpoint_freq=1)
    cfg = notebook_settings("plench", "02_tabular", "smoke", {"datasets": [ds.name], "speedup": spec,
                                                              "checkpoint_freq": 1})
    planned = cost.speedup_runs("02_tabular", cfg, cost.dataset_sizes([ds.name], None, None))
    assert [r.identity.rsplit("/", 1)[1] for r in planned] == [e["key"] for e in runlog.read_log(log)]
    # 3 warm-up runs of 2 steps, then 2 configurations x 2 steps alone and stacked (PRODEN stacks)
    assert sum(w.steps for w in planned[0].work if w.workload.phase == "train") == 3 * 2 + 2 * 2 * 2

    log.unlink()
    image = load_pll_dataset("PLDigits-Vaguest", modality="image")
    overrides = {"ALIM": {"batch_size": 32, "moco_queue": 256}}
    reports.compat_confidences(image, ["ALIM"], arch="digits_cnn", steps=2, overrides=overrides)
    calls = reports.compat_check_calls(["ALIM"], arch="digits_cnn", steps=2, overrides=overrides)
    assert [reports.compat_check_key(image.name, c) for c in calls] == [e["key"] for e in runlog.read_log(log)]


def test_the_digits_cnn_workload_steps():
    size = cost.dataset_sizes(["PLDigits-Vaguest"], "image", None)["PLDigits-Vaguest"]
    w = cost.workload(size, "digits_cnn", "train", 8, algorithm="DIRK", passes=2, nograd=2)
    assert w.key == ("plench_digits_cnn/digits_cnn/train/b8/1x8x8/fp32/"
                     "augment=weak_strong_distill,nograd=2,optimizer=adam,views=2")
    from shared import workloads

    step = workloads.build(w, "cpu")
    step()
    assert step.samples == 8


def test_merged_work_keeps_the_rows_of_partial_batches():
    """``merge`` sums the rows of partial-batch work (a run of many short trainings evaluates each)."""
    size = cost.dataset_sizes(["PLCIFAR10_Aggregate"], "image", "/nonexistent")["PLCIFAR10_Aggregate"]
    infer = cost.workload(size, "resnet32", "infer", 512)
    a, b = batched(infer, 140, what="eval"), batched(infer, 700, what="eval")
    (merged,) = cost.merge([a, b])
    assert (merged.steps, merged.rows) == (3, 840) and merged.full_steps == pytest.approx(840 / 512)
    full = cost.Work(infer, 2, 1024, what="eval")
    (mixed,) = cost.merge([a, full])  # work without rows counts its steps as full batches
    assert (mixed.steps, mixed.rows) == (3, 140 + 1024)
