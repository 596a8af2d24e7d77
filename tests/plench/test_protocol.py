"""Plench's protocol: run records, seeding, NaN logits, the loader, resumable sweeps and batched MLP training."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from plench import protocol
from plench.algorithms import ALGORITHMS
from plench.algorithms.base import LossAlgorithm
from plench.data import PLLDataset, load_pll_dataset, plench_split
from plench.hparams import hparams_for
from plench.selection import results_table
from shared import sweep
from shared.errors import ConfigError

torch.set_num_threads(1)

VOLATILE = ("step_time", "mem_gb")  # the only record fields allowed to differ between identical runs
SCHEMA = {"step", "epoch", "loss", "step_time", "mem_gb", "mem_source", "val_accuracy", "val_covering_rate",
          "val_approximated_acc", "test_acc", "hparams", "args", "group_size"}


class ProdenForTests(LossAlgorithm):
    """PRODEN's loss and refresh (the real algorithms are tested in their own files)."""

    name, display, group = "_ProdenForTests", "PRODEN (test)", "vanilla PLL"
    uses_confidence = True

    def loss(self, logits, s, w):
        return -(w * F.log_softmax(logits, 1)).sum(1).mean()

    def refresh(self, logits, s, w):
        p = F.softmax(logits, 1) * s
        return p / p.sum(1, keepdim=True)


class NaNPredictions(ProdenForTests):
    name = "_NaNPredictions"

    def predict(self, x):
        return self.network(x) * float("nan")


class OwnStep(ProdenForTests):
    name = "_OwnStep"

    def train_step(self, batch):
        return super().train_step(batch)


@pytest.fixture(autouse=True)
def test_algorithms(monkeypatch):
    for cls in (ProdenForTests, NaNPredictions, OwnStep):
        monkeypatch.setitem(ALGORITHMS, cls.name, cls)


@pytest.fixture(scope="module")
def small_pll() -> PLLDataset:
    """600 digits with FPS(0.3) candidate sets: 486 training, 54 validation and 60 test rows per trial."""
    ds = load_pll_dataset("digits-FPS0.3")
    return PLLDataset("digits-FPS0.3-600", ds.X[:600], ds.S[:600], ds.y[:600], ds.classes, "tabular", None, 40, {})


def run(ds, out_dir, algorithm="_ProdenForTests", hparams_seed=0, trial_seed=0, steps=25, checkpoint_freq=10):
    return protocol.train_run(ds, algorithm, arch="mlp", hparams_seed=hparams_seed, trial_seed=trial_seed, steps=steps,
                              checkpoint_freq=checkpoint_freq, out_dir=out_dir)


def stable(records):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in records]


# -------------------------------------------------------------------------------------------- one run
def test_records_follow_plenchs_schema(small_pll, tmp_path):
    records = run(small_pll, tmp_path / "r", hparams_seed=1)
    hparams = hparams_for("_ProdenForTests", "mlp", hparams_seed=1, trial_seed=0)
    assert [r["step"] for r in records] == [0, 10, 20, 24]  # every 10 steps and the last (steps - 1)
    assert all(set(r) == SCHEMA for r in records)
    assert all(r["hparams"] == hparams and r["mem_source"] == "cpu_max_rss" and r["group_size"] == 1
               for r in records)
    assert records[2]["epoch"] == pytest.approx(20 / (486 / hparams["batch_size"]))
    assert records[0]["args"] == {"dataset": "digits-FPS0.3-600", "algorithm": "_ProdenForTests", "arch": "mlp",
                                  "hparams_seed": 1, "trial_seed": 0, "steps": 25, "checkpoint_freq": 10,
                                  "compat": True, "seed": records[0]["args"]["seed"]}
    for r in records:
        assert r["val_covering_rate"] >= r["val_accuracy"]  # every candidate set holds the true label
        assert (r["val_accuracy"] * 54) == pytest.approx(round(r["val_accuracy"] * 54))
        assert (r["test_acc"] * 60) == pytest.approx(round(r["test_acc"] * 60))
        assert 0 < r["step_time"] < 5 and math.isfinite(r["loss"])
    assert json.loads(json.dumps(records)) == sweep.read_records(tmp_path / "r")
    assert sweep.is_done(tmp_path / "r")
    assert records[-1]["val_accuracy"] > records[0]["val_accuracy"] + 0.2  # it learns


def test_same_args_give_identical_records(small_pll, tmp_path):
    first, again = run(small_pll, tmp_path / "a"), run(small_pll, tmp_path / "b")
    assert stable(first) == stable(again)
    other = run(small_pll, tmp_path / "c", trial_seed=1)
    assert other[0]["args"]["seed"] != first[0]["args"]["seed"]
    assert [r["loss"] for r in other] != [r["loss"] for r in first]


def test_nan_logits_give_nan_aa_and_class_zero_predictions(small_pll, tmp_path):
    records = run(small_pll, tmp_path / "nan", algorithm="_NaNPredictions", steps=3, checkpoint_freq=2)
    split = plench_split(small_pll, 0)
    val_S, val_y = small_pll.S[split["val"]], small_pll.y[split["val"]]
    for r in records:
        assert math.isnan(r["val_approximated_acc"])
        assert r["val_covering_rate"] == pytest.approx(val_S[:, 0].mean())  # argmax of an all-NaN row is 0
        assert r["val_accuracy"] == pytest.approx((val_y == 0).mean())
        assert r["test_acc"] == pytest.approx((small_pll.y[split["test"]] == 0).mean())


def test_cyclic_loader_is_a_reshuffled_drop_last_loader():
    loader = protocol.CyclicLoader(10, 4, seed=0)
    batches = [next(loader) for _ in range(6)]  # 2 full batches per pass of 10 rows, 3 passes
    for p in range(3):
        seen = torch.cat(batches[2 * p:2 * p + 2])
        assert len(seen.unique()) == 8 and seen.max() < 10
    assert not torch.equal(torch.cat(batches[:2]), torch.cat(batches[2:4]))
    with pytest.raises(ConfigError, match="batch size"):
        protocol.CyclicLoader(3, 4, seed=0)


def test_make_batch_computes_only_the_declared_image_views():
    images = torch.arange(5 * 4 * 4, dtype=torch.uint8).reshape(5, 4, 4, 1)

    def never(batch, generator=None):
        raise AssertionError("a view the algorithm does not read was computed")

    views = {"original": never, "weak": lambda b, generator=None: b.permute(0, 3, 1, 2).float() + 1,
             "strong": never, "distill": never}
    S = torch.ones(5, 3)
    data = protocol.RunData(images, S, torch.zeros(5, dtype=torch.long), images, S, torch.zeros(5), images,
                            torch.zeros(5), views)
    batch = protocol.make_batch(data, torch.tensor([4, 1]), ("weak",), "cpu")
    assert torch.equal(batch.weak, images[[4, 1]].permute(0, 3, 1, 2).float() + 1)
    assert batch.strong.numel() == batch.distill.numel() == batch.x.numel() == 0
    assert batch.idx.tolist() == [4, 1] and data.input_shape == (1, 4, 4)


def test_member_batches_are_each_runs_own_batch():
    """The stacked trainer's batches (``make_member_batches``: views built once for every member) equal each run's
    ``make_batch`` with its own split, rows and generator."""
    ds = image_digits()
    data = [protocol.run_data(ds, trial) for trial in (0, 1, 1)]
    idx = [torch.tensor([3, 1, 4, 1, 5]), torch.tensor([9, 2, 6, 5, 3]), torch.tensor([9, 2, 6, 5, 3])]
    views = ("weak", "strong", "distill")
    together = protocol.make_member_batches(data, idx, views, "cpu", [torch.Generator().manual_seed(g)
                                                                      for g in range(3)])
    for g, batch in enumerate(together):
        alone = protocol.make_batch(data[g], idx[g], views, "cpu", torch.Generator().manual_seed(g))
        for field in ("x", "weak", "strong", "distill", "s", "y", "idx"):
            assert torch.equal(getattr(batch, field), getattr(alone, field)), (g, field)
    assert torch.equal(together[1].x, together[2].x)  # same split and rows ...
    assert not torch.equal(together[1].weak, together[2].weak)  # ... other generator
    with pytest.raises(ConfigError, match="one batch size"):
        protocol.make_member_batches(data[:2], [idx[0], idx[1][:3]], views, "cpu",
                                     [torch.Generator() for _ in range(2)])


def test_image_runs_train_a_cnn_on_augmented_views(tmp_path):
    ds = load_pll_dataset("PLDigits-Vaguest", modality="image")
    images = PLLDataset("PLDigits-image-300", ds.X[:300], ds.S[:300], ds.y[:300], ds.classes, "image", None, 6, {})
    first = protocol.train_run(images, "_ProdenForTests", arch="digits_cnn", hparams_seed=0, trial_seed=0, steps=6,
                               checkpoint_freq=3, out_dir=tmp_path / "a", hparams_overrides={"batch_size": 32})
    again = protocol.train_run(images, "_ProdenForTests", arch="digits_cnn", hparams_seed=0, trial_seed=0, steps=6,
                               checkpoint_freq=3, out_dir=tmp_path / "b", hparams_overrides={"batch_size": 32})
    assert [r["step"] for r in first] == [0, 3, 5] and first[0]["hparams"]["batch_size"] == 32
    assert first[0]["args"]["hparams_overrides"] == {"batch_size": 32}
    assert stable(first) == stable(again)  # seeded augmentations
    assert all(math.isfinite(r["loss"]) for r in first)


# -------------------------------------------------------------------------------------------- sweeps
def test_sweep_resumes_and_collects(small_pll, tmp_path, monkeypatch):
    grid = dict(algorithms=["_ProdenForTests"], n_hparams=2, n_trials=2, arch="mlp", steps=12, checkpoint_freq=5)
    real_train_run, calls = protocol.train_run, []

    def interrupted(*args, **kwargs):
        calls.append(kwargs["hparams_seed"])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_train_run(*args, **kwargs)

    monkeypatch.setattr(protocol, "train_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        protocol.sweep([small_pll], out_dir=tmp_path, **grid)
    monkeypatch.setattr(protocol, "train_run", real_train_run)
    assert protocol.sweep([small_pll], out_dir=tmp_path, **grid) == {"total": 4, "skipped": 2, "restarted": 1,
                                                                      "ran": 2}
    records = protocol.collect(tmp_path)
    assert len(records) == 4 * 4 and records["run"].nunique() == 4  # checkpoints 0, 5, 10, 11 of 4 runs
    assert set(records.groupby(["hparams_seed", "trial_seed"]).size()) == {4}
    table = results_table(records)
    assert table["criterion"].tolist() == ["CR", "AA", "OA", "OA&ES"] and set(table["n_trials"]) == {2}
    assert protocol.sweep([small_pll], out_dir=tmp_path, **grid)["ran"] == 0


def test_parallel_sweep_gives_the_sequential_records(small_pll, tmp_path):
    import plench.algorithms.vanilla_pll  # noqa: F401  registers PRODEN, which spawned workers must find too

    grid = dict(algorithms=["PRODEN"], n_hparams=2, n_trials=1, arch="mlp", steps=8, checkpoint_freq=4)
    protocol.sweep([small_pll], out_dir=tmp_path / "seq", **grid)
    assert protocol.sweep([small_pll], out_dir=tmp_path / "par", jobs=2, **grid)["ran"] == 2
    seq, par = (protocol.collect(tmp_path / d).drop(columns=list(VOLATILE)).sort_values(["run", "step"])
                .reset_index(drop=True) for d in ("seq", "par"))
    pd.testing.assert_frame_equal(seq, par)
    with pytest.raises(ConfigError, match="unknown algorithm"):
        protocol.sweep([small_pll], out_dir=tmp_path / "x", **{**grid, "algorithms": ["PRODN"]})


# -------------------------------------------------------------------------------------------- batched runs
def configs_with_batch_size(batch_size: int, count: int) -> list[tuple[int, int]]:
    """(hparams_seed, trial_seed) pairs whose random batch size is ``batch_size``, alternating trial seeds 0 and 1."""
    found = [[(h, t) for h in range(1, 30)
              if hparams_for("_ProdenForTests", "mlp", hparams_seed=h, trial_seed=t)["batch_size"] == batch_size]
             for t in (0, 1)]
    return [pair for pairs in zip(*found) for pair in pairs][:count]


def assert_close_records(batched, separate, *, n_val=54, n_test=60, flips=1):
    assert [r["step"] for r in batched] == [r["step"] for r in separate]
    for b, s in zip(batched, separate):
        assert (b["args"], b["hparams"], b["epoch"]) == (s["args"], s["hparams"], s["epoch"])
        assert b["loss"] == pytest.approx(s["loss"], rel=1e-4, abs=1e-6)
        assert abs(b["val_accuracy"] - s["val_accuracy"]) <= flips / n_val + 1e-12  # at most ``flips`` rows flip
        assert abs(b["val_covering_rate"] - s["val_covering_rate"]) <= flips / n_val + 1e-12
        assert abs(b["test_acc"] - s["test_acc"]) <= flips / n_test + 1e-12
        assert b["val_approximated_acc"] == pytest.approx(s["val_approximated_acc"], abs=2 / n_val)


def test_batched_runs_match_separate_runs(small_pll, tmp_path):
    """G=3 runs with batch size 64 (two trial seeds, so two different splits) plus one with 32, stacked.

    Not bit-identical: the stacked forward (baddbmm) sums in another order than nn.Linear (addmm). Measured on
    this setup: losses agree to ~1e-7 relative and every metric is equal; the bounds allow one flipped row."""
    configs = configs_with_batch_size(64, 3) + configs_with_batch_size(32, 1)
    assert {t for _, t in configs[:3]} == {0, 1}
    separate = [run(small_pll, tmp_path / f"s{i}", hparams_seed=h, trial_seed=t, steps=40)
                for i, (h, t) in enumerate(configs)]
    batched = protocol.train_runs_batched(small_pll, "_ProdenForTests", configs, steps=40, checkpoint_freq=10,
                                          out_dirs=[tmp_path / f"b{i}" for i in range(4)])
    for b, s in zip(batched, separate):
        assert_close_records(b, s)
    assert [b[0]["group_size"] for b in batched] == [3, 3, 3, 1]
    assert [r["loss"] for r in batched[0]] != [r["loss"] for r in batched[1]]  # members did not mix
    assert sweep.read_records(tmp_path / "b2") == json.loads(json.dumps(batched[2]))


def test_unbatchable_algorithms_fall_back_to_separate_runs(small_pll, tmp_path):
    configs = configs_with_batch_size(64, 2)
    with pytest.warns(UserWarning, match="overrides train_step"):
        records = protocol.train_runs_batched(small_pll, "_OwnStep", configs, steps=12, checkpoint_freq=5,
                                              out_dirs=[tmp_path / "a", tmp_path / "b"])
    separate = run(small_pll, tmp_path / "s", algorithm="_OwnStep", hparams_seed=configs[1][0],
                   trial_seed=configs[1][1], steps=12, checkpoint_freq=5)
    assert stable(records[1]) == stable(separate)


def test_batched_sweep_writes_the_same_runs(small_pll, tmp_path):
    grid = dict(algorithms=["_ProdenForTests"], n_hparams=3, n_trials=1, arch="mlp", steps=12, checkpoint_freq=5)
    protocol.sweep([small_pll], out_dir=tmp_path / "one", **grid)
    summary = protocol.sweep([small_pll], out_dir=tmp_path / "batched", batched=True, **grid)
    assert summary["ran"] == 3
    one, batched = protocol.collect(tmp_path / "one"), protocol.collect(tmp_path / "batched")
    key = ["hparams_seed", "trial_seed", "step"]
    one, batched = one.sort_values(key).reset_index(drop=True), batched.sort_values(key).reset_index(drop=True)
    np.testing.assert_allclose(batched["loss"], one["loss"], rtol=1e-4)
    assert batched["group_size"].max() >= 2  # some configurations shared a batch size
    # a stacked run's identity names its stack: it is never read as the run trained alone, nor the reverse
    stacked = batched["group_size"] > 1
    assert batched.loc[stacked, "stack"].notna().all() and batched.loc[~stacked, "stack"].isna().all()
    assert not set(batched.loc[stacked, "run"]) & set(one["run"])
    assert set(batched.loc[~stacked, "run"]) <= set(one["run"])


def image_digits() -> PLLDataset:
    ds = load_pll_dataset("PLDigits-Vaguest", modality="image")
    return PLLDataset("PLDigits-Vaguest-600", ds.X[:600], ds.S[:600], ds.y[:600], ds.classes, "image", None, 40, {})


@pytest.mark.parametrize("algorithm", ["PRODEN", "CC", "CRDPLL"])
def test_stacked_conv_nets_match_separate_runs(algorithm, tmp_path):
    """The digits CNN (BatchNorm) stacked with torch.func: each member's augmentations, running statistics and
    Adam state are its own. CRDPLL forwards two views (weak, then strong: two BatchNorm updates a step) and
    refreshes its confidences from both. Measured: losses agree to ~1e-6 relative (CRDPLL ~2e-8), metrics to a
    row."""
    ds, configs, common = image_digits(), [(0, 0), (1, 0), (2, 1)], {"arch": "digits_cnn", "steps": 16,
                                                                     "checkpoint_freq": 5,
                                                                     "hparams_overrides": {"batch_size": 32}}
    separate = [protocol.train_run(ds, algorithm, hparams_seed=h, trial_seed=t, out_dir=tmp_path / f"s{i}", **common)
                for i, (h, t) in enumerate(configs)]
    batched = protocol.train_runs_batched(ds, algorithm, configs, out_dirs=[tmp_path / f"b{i}" for i in range(3)],
                                          **common)
    for b, s in zip(batched, separate):
        assert_close_records(b, s)
    assert [b[0]["group_size"] for b in batched] == [3, 3, 3]
    assert [r["loss"] for r in batched[0]] != [r["loss"] for r in batched[1]]  # members did not mix


@pytest.mark.parametrize("algorithm", ["DIRK", "PiCO", "ABLE"])
def test_algorithms_with_their_own_stacked_step_match_separate_runs_in_stacks_of_one_feature_width(algorithm,
                                                                                                   tmp_path):
    """DIRK, PiCO and ABLE have their own stacked steps (``StackedDIRK``, ``StackedPiCO``, ``StackedABLE``): the
    encoders (and their EMA teachers or momentum keys) stacked, each member's queue, prototypes, confidences and
    schedule its own, both sides of ``prot_start`` (6 here). Runs whose projection heads differ (``feat_dim``) form
    separate stacks. Measured: losses agree to ~1e-7 relative, metrics to a row. PiCO+ and ALIM (their own
    ``update``, mixup draws from the global generator) train alone."""
    ds, overrides = image_digits(), {"batch_size": 32, "prot_start": 6, "moco_queue": 64}
    configs = [(0, 0), (1, 0), (3, 1), (4, 0), (2, 1)]
    widths = [hparams_for(algorithm, "digits_cnn", hparams_seed=h, trial_seed=t, dataset=ds.name)["feat_dim"]
              for h, t in configs]
    common = {"arch": "digits_cnn", "steps": 12, "checkpoint_freq": 5, "hparams_overrides": overrides}
    separate = [protocol.train_run(ds, algorithm, hparams_seed=h, trial_seed=t, out_dir=tmp_path / f"s{i}", **common)
                for i, (h, t) in enumerate(configs)]
    batched = protocol.train_runs_batched(ds, algorithm, configs, out_dirs=[tmp_path / f"b{i}" for i in range(5)],
                                          **common)
    for b, s in zip(batched, separate):
        assert_close_records(b, s)
    assert [b[0]["group_size"] for b in batched] == [widths.count(w) for w in widths]
    assert max(widths.count(w) for w in widths) >= 2 and len(set(widths)) >= 2
    assert protocol.algorithm_stacks(algorithm, "digits_cnn") and not protocol.algorithm_stacks(algorithm, "mlp")
    assert not protocol.algorithm_stacks("PiCO_plus", "digits_cnn")
    assert not protocol.algorithm_stacks("ALIM", "resnet32")
    with pytest.raises(ConfigError, match="feat_dim differ"):
        protocol.train_runs_batched(ds, algorithm, configs, out_dirs=[None] * 5, stack="abc", **common)


def test_stacked_dirk_without_its_contrastive_term_matches_separate_runs(tmp_path):
    """``weight: 0`` for every member (an ablation): no loss reaches the projection heads, which the batched Adam then
    leaves alone, as a run's Adam skips a parameter without a gradient."""
    ds, configs = image_digits(), [(0, 0), (1, 0)]
    common = {"arch": "digits_cnn", "steps": 6, "checkpoint_freq": 3,
              "hparams_overrides": {"batch_size": 32, "feat_dim": 64, "moco_queue": 64, "weight": 0.0}}
    separate = [protocol.train_run(ds, "DIRK", hparams_seed=h, trial_seed=t, out_dir=tmp_path / f"s{i}", **common)
                for i, (h, t) in enumerate(configs)]
    batched = protocol.train_runs_batched(ds, "DIRK", configs, out_dirs=[None, None], **common)
    for b, s in zip(batched, separate):
        assert_close_records(b, s)
    assert batched[0][0]["group_size"] == 2


def test_a_subclass_with_its_own_step_does_not_inherit_a_stacked_step():
    """A stacked step reproduces one ``train_step``: PiCO+ and ALIM (subclasses of PiCO with steps of their own) and
    any such subclass train alone, with the reason."""
    from plench.algorithms.holistic import DIRK

    class OwnDIRK(DIRK):
        name = "_OwnDIRK"

        def train_step(self, batch):
            return super().train_step(batch)

    hp = {**hparams_for("DIRK", "mlp"), "batch_size": 2, "moco_queue": 4}
    S = torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
    model = OwnDIRK((2,), 3, S, hp, arch="mlp", steps=10)
    assert "not the one DIRK's stacked step reproduces" in protocol.batching_obstacle(model, "digits_cnn")
    assert not protocol.algorithm_stacks("PiCO_plus", "resnet32") and protocol.algorithm_stacks("PiCO", "resnet32")


def test_stacked_idgp_matches_separate_runs_across_its_warm_up(tmp_path):
    """IDGP's own stacked step (``StackedIDGP``): f and g stacked, two batched Adams, each member's phase (warm-up
    for 0.5 epochs here) and states d, b its own. Measured: losses agree to ~1e-7 relative, every metric equal."""
    ds, configs = image_digits(), [(0, 0), (1, 0), (2, 1)]
    common = {"arch": "digits_cnn", "steps": 16, "checkpoint_freq": 5,
              "hparams_overrides": {"batch_size": 32, "warm_up_epoch": 0.5}}
    separate = [protocol.train_run(ds, "IDGP", hparams_seed=h, trial_seed=t, out_dir=tmp_path / f"s{i}", **common)
                for i, (h, t) in enumerate(configs)]
    batched = protocol.train_runs_batched(ds, "IDGP", configs, out_dirs=[None] * 3, **common)
    for b, s in zip(batched, separate):
        assert_close_records(b, s)
    assert [b[0]["group_size"] for b in batched] == [3, 3, 3] and protocol.algorithm_stacks("IDGP", "digits_cnn")
    # on the MLP (the tabular sweeps) IDGP trains alone: its own stacked step is for image networks
    assert not protocol.algorithm_stacks("IDGP") and protocol.algorithm_stacks("PRODEN")
    with pytest.warns(UserWarning, match="for image networks"):
        tabular = protocol.train_runs_batched(ds_tabular := load_pll_dataset("PLDigits-Vaguest"), "IDGP", configs[:2],
                                              arch="mlp", steps=6, checkpoint_freq=3,
                                              out_dirs=[tmp_path / "t0", tmp_path / "t1"])
    assert [r[0]["group_size"] for r in tabular] == [1, 1] and ds_tabular.modality == "tabular"


def test_stacked_members_skip_the_steps_and_keep_the_books_their_runs_do(tmp_path):
    """PC skips a batch without a complementary label (``skipped``): that member's weights, Adam state and BatchNorm
    statistics stay as they were while the others step. POP purifies its candidate sets at epoch ends
    (``after_step``). Both stacked match their runs alone (measured: losses within 2e-5 relative, metrics within
    two validation rows for POP)."""
    ds = image_digits()
    S = np.array(ds.S).copy()
    S[np.arange(len(S)) % 10 != 0] = 1  # nine rows in ten hold every label: many batches of 8 have no complement
    mostly_full = dataclasses.replace(ds, name="digits-mostly-full", S=S)
    configs = [(0, 0), (1, 0), (2, 1)]
    for data, algorithm, overrides, flips in ((mostly_full, "PC", {"batch_size": 8}, 1),
                                              (ds, "POP", {"batch_size": 32, "warm_up": 1}, 2)):
        common = {"arch": "digits_cnn", "steps": 40, "checkpoint_freq": 10, "hparams_overrides": overrides}
        separate = [protocol.train_run(data, algorithm, hparams_seed=h, trial_seed=t,
                                       out_dir=tmp_path / f"{algorithm}-s{i}", **common)
                    for i, (h, t) in enumerate(configs)]
        batched = protocol.train_runs_batched(data, algorithm, configs, **common,
                                              out_dirs=[tmp_path / f"{algorithm}-b{i}" for i in range(3)])
        for b, s in zip(batched, separate):
            assert_close_records(b, s, flips=flips)
        assert batched[0][0]["group_size"] == 3
    # the PC runs really skipped steps: replay member 0's batches
    split = plench_split(mostly_full, 0)["train"]
    loader = protocol.CyclicLoader(len(split), 8, protocol.run_args(
        mostly_full.name, "PC", arch="digits_cnn", hparams_seed=0, trial_seed=0, steps=40, checkpoint_freq=10,
        hparams_overrides={"batch_size": 8})["seed"])
    skipped = sum(bool((S[split][next(loader).numpy()] == 1).all()) for _ in range(40))
    assert 5 <= skipped <= 35


def test_stacked_conv_nets_in_bf16_need_cuda(tmp_path):
    """The CPU's autocast does not reach convolutions inside vmap: a bf16 stack there would train in fp32 under a
    bf16 name. Refused before anything trains (sweep_args) and in the trainer itself."""
    ds = image_digits()
    with pytest.raises(ConfigError, match="bf16 need CUDA"):
        protocol.sweep_args([ds], ["PRODEN"], n_hparams=1, n_trials=2, arch="digits_cnn", checkpoint_freq=5, steps=6,
                            hparams_overrides={"batch_size": 32}, precision="bf16", device="cpu", batched=True)
    with pytest.raises(ConfigError, match="bf16 need CUDA"):
        protocol.train_runs_batched(ds, "PRODEN", [(0, 0), (0, 1)], steps=2, checkpoint_freq=1, arch="digits_cnn",
                                    out_dirs=[tmp_path / "a", tmp_path / "b"], precision="bf16",
                                    hparams_overrides={"batch_size": 32})
    auto = protocol.sweep_args([ds], ["PRODEN"], n_hparams=1, n_trials=2, arch="digits_cnn", checkpoint_freq=5,
                               steps=6, hparams_overrides={"batch_size": 32}, precision="auto", device="cpu",
                               batched=True)
    assert len(auto) == 2 and len({a["stack"] for a in auto}) == 1  # "auto" is fp32 on the CPU: stacked as asked
    assert "precision" not in auto[0]  # fp32, the default, keeps the identity of an fp32 run


def test_only_networks_of_one_architecture_stack():
    from plench.stacked import StackedNetwork

    with pytest.raises(ConfigError, match="member 1 has other parameters"):
        StackedNetwork([nn.Linear(4, 2), nn.Linear(4, 3)])
    with pytest.raises(ConfigError, match="member 1 has other parameters"):  # the same tensors, another network
        StackedNetwork([nn.Sequential(nn.Linear(4, 2), nn.ReLU()), nn.Sequential(nn.Linear(4, 2), nn.Tanh())])
    assert len(StackedNetwork([nn.Linear(4, 2), nn.Linear(4, 2)]).params) == 2  # weight and bias, stacked
    with pytest.raises(ConfigError, match="at least one network"):
        StackedNetwork([])


def test_a_stack_with_a_finished_member_trains_whole_and_writes_only_the_rest(tmp_path):
    """A stack killed between its members' ``done`` marks: the rerun must give the unfinished member the numbers
    its identity (its stack) stands for, so the whole stack trains again, and the finished member is left as is."""
    ds = image_digits()
    grid = dict(algorithms=["PRODEN"], n_hparams=1, n_trials=3, arch="digits_cnn", steps=6, checkpoint_freq=5,
                hparams_overrides={"batch_size": 32}, batched=True)
    protocol.sweep([ds], out_dir=tmp_path, **grid)
    args = protocol.sweep_args([ds], **{k: v for k, v in grid.items() if k != "algorithms"}, algorithms=["PRODEN"])
    assert len({a["stack"] for a in args}) == 1  # the three splits' default configurations: one stack
    first, last = (sweep.run_dir_for(a, tmp_path) for a in (args[0], args[-1]))
    kept = (first / sweep.RESULTS_FILE).stat().st_mtime_ns
    before = sweep.read_records(last)
    (last / sweep.DONE_FILE).unlink()
    (last / sweep.RESULTS_FILE).write_text("")
    summary = protocol.sweep([ds], out_dir=tmp_path, **grid)
    assert summary["restarted"] == 1 and (first / sweep.RESULTS_FILE).stat().st_mtime_ns == kept
    assert [stable([r]) for r in sweep.read_records(last)] == [stable([r]) for r in before]


def test_notebooks_that_form_the_same_stack_name_the_same_runs():
    """03's per-algorithm grids and 04's one grid of every algorithm group runs alike: their stacks, and so their
    runs, are the same (the full profile's 04 reads 03's ResNet-32 stacks)."""
    ds = image_digits()
    common = dict(n_hparams=4, n_trials=2, arch="digits_cnn", checkpoint_freq=5, steps=10, batched=True)
    one_grid = protocol.Grid(("PRODEN", "CC", "GA"), **common).run_args([ds])
    per_algorithm = [a for alg in ("PRODEN", "CC", "GA") for a in protocol.Grid((alg,), **common).run_args([ds])]
    key = lambda a: (a["trial_seed"], a["algorithm"], a["hparams_seed"])  # noqa: E731
    assert sorted(one_grid, key=key) == sorted(per_algorithm, key=key)
    assert any("stack" in a for a in one_grid) and not any("stack" in a for a in one_grid if a["algorithm"] == "GA")


def test_measure_batched_speedup_reports_both_timings(small_pll):
    result = protocol.measure_batched_speedup(small_pll, "_ProdenForTests", configs_with_batch_size(64, 2), steps=3,
                                              checkpoint_freq=2)
    assert result["runs"] == 2 and result["one_by_one_s"] > 0 and result["batched_s"] > 0
    assert result["speedup"] == pytest.approx(result["one_by_one_s"] / result["batched_s"])


# -------------------------------------------------------------------------------------------- which runs a table shows
def test_select_runs_takes_exactly_the_runs_of_the_current_settings(small_pll, tmp_path):
    """A larger sweep (3 configurations x 3 splits of one algorithm, and other steps) left in the folder, then a
    smaller run of two algorithms (2 x 2): the tables must show 2 configurations x 2 splits for both."""
    tiny = dict(arch="mlp", checkpoint_freq=2, steps=4)
    larger = protocol.Grid(("_ProdenForTests",), n_hparams=3, n_trials=3, **tiny)
    other_steps = protocol.Grid(("_OwnStep",), n_hparams=2, n_trials=2, arch="mlp", checkpoint_freq=2, steps=6)
    smaller = protocol.Grid(("_ProdenForTests", "_OwnStep"), n_hparams=2, n_trials=2, **tiny)
    protocol.sweep_grids([larger, other_steps], [small_pll], out_dir=tmp_path)
    records, counts = protocol.sweep_grids([smaller], [small_pll], out_dir=tmp_path)
    assert counts == {"total": 8, "skipped": 4, "restarted": 0, "ran": 4}  # _ProdenForTests' 4 runs were done
    everything = protocol.collect(tmp_path)
    assert everything["run"].nunique() == 9 + 4 + 4
    # what the notebooks did before: every record of the chosen datasets and algorithms
    old = results_table(everything[everything["algorithm"].isin(smaller.algorithms)])
    assert set(old["n_trials"]) == {2, 3}
    table = results_table(records)
    assert set(table["n_trials"]) == {2} and set(table["n_configs"]) == {2} and set(table["steps"]) == {4}
    assert records["run"].nunique() == 8
    assert set(map(tuple, records[["hparams_seed", "trial_seed"]].drop_duplicates().to_numpy())) == \
        {(h, t) for h in range(2) for t in range(2)}


def test_select_runs_names_the_runs_that_are_missing(small_pll, tmp_path):
    grid = protocol.Grid(("_ProdenForTests",), n_hparams=1, n_trials=1, arch="mlp", checkpoint_freq=2, steps=3)
    records, _ = protocol.sweep_grids([grid], [small_pll], out_dir=tmp_path)
    wider = protocol.Grid(("_ProdenForTests",), n_hparams=2, n_trials=1, arch="mlp", checkpoint_freq=2, steps=3)
    with pytest.raises(ConfigError, match=r"1 of the 2 runs these settings define have no finished records.*"
                                          r"hparams_seed=1, trial_seed=0"):
        protocol.select_runs(protocol.collect(tmp_path), wider.run_args([small_pll]))
    # a different override is a different run
    overridden = protocol.sweep_args([small_pll], ["_ProdenForTests"], n_hparams=1, n_trials=1, arch="mlp",
                                     checkpoint_freq=2, steps=3, hparams_overrides={"lr": 0.01})
    with pytest.raises(ConfigError, match="1 of the 1 runs"):
        protocol.select_runs(records, overridden)


def test_sweep_args_take_a_named_datasets_own_steps_without_loading_it():
    args = protocol.sweep_args(["digits-USS", "PLDigits-Vaguest"], ["PRODEN"], n_hparams=1, n_trials=1, arch="mlp",
                               checkpoint_freq=1000)
    assert [a["steps"] for a in args] == [10_000, 60_000]


def test_auto_batching_groups_only_the_batch_sizes_where_it_pays(tmp_path):
    """With batched="auto", runs whose step is small (batch size x (features + classes) <= 10,000) are trained
    together, per (dataset, algorithm, steps, batch size); larger ones run alone. True groups every batch size."""
    args = protocol.sweep_args(["digits-USS"], ["_ProdenForTests"], n_hparams=12, n_trials=2, arch="mlp",
                               checkpoint_freq=5, steps=10)
    todo = [(a, tmp_path / str(i)) for i, a in enumerate(args)]
    size = {(a["hparams_seed"], a["trial_seed"]): hparams_for("_ProdenForTests", "mlp", hparams_seed=a["hparams_seed"],
                                                              trial_seed=a["trial_seed"])["batch_size"] for a in args}
    assert set(size.values()) == {32, 64, 128}  # the MLP grid: 2 ** int(uniform(5, 8))

    def sizes(tasks):
        return [sorted({size[a["hparams_seed"], a["trial_seed"]] for a, _ in task}) for task in tasks]

    widths = {"digits-USS": 108 + 16}  # shaped like Lost: 32 and 64 are batched, 128 is not
    auto = protocol.sweep_tasks(todo, batched="auto", widths=widths)
    assert sorted(len(t) for t in auto if sizes([t])[0] == [128]) == [1] * sum(v == 128 for v in size.values())
    assert min(len(t) for t in auto if sizes([t])[0] != [128]) > 1  # groups of 32s and of 64s
    assert all(len(s) == 1 for s in sizes(auto))  # never mixes batch sizes
    assert sum(map(len, auto)) == len(todo)
    every = protocol.sweep_tasks(todo, batched=True)
    assert sorted(map(tuple, sizes(every))) == [(32,), (64,), (128,)]
    assert all(len(t) == 1 for t in protocol.sweep_tasks(todo, batched=False))
    assert [len(t) for t in protocol.sweep_tasks(todo, batched=True, max_group=4)].count(4) >= 3
    overridden = [({**a, "hparams_overrides": {"batch_size": 256}}, d) for a, d in todo]
    assert all(len(t) == 1 for t in protocol.sweep_tasks(overridden, batched="auto", widths=widths))
    # wide data (Soccer Player: 279 features + 171 classes): batching loses even at batch size 32
    assert all(len(t) == 1 for t in protocol.sweep_tasks(todo, batched="auto", widths={"digits-USS": 450}))
    with pytest.raises(ConfigError, match="unknown batched"):
        protocol.sweep_tasks(todo, batched="yes")
    with pytest.raises(ConfigError, match="width"):
        protocol.sweep_tasks(todo, batched="auto")
    cnn = [({**a, "arch": "digits_cnn"}, d) for a, d in todo]  # "auto" batches MLPs only
    assert all(len(t) == 1 for t in protocol.sweep_tasks(cnn, batched="auto", widths=widths))


@pytest.mark.parametrize("batch_size, width, pays", [(32, 74, True), (128, 74, True), (256, 74, False), (64, 124, True),
                                                     (128, 124, False), (64, 160, False), (32, 300, True),
                                                     (32, 345, False), (32, 1550, False)])
def test_batching_pays_for_small_steps_only(batch_size, width, pays):
    assert protocol.batching_pays(batch_size, "auto", width) is pays
    assert protocol.batching_pays(batch_size, True, width) is True
    assert protocol.batching_pays(batch_size, False, width) is False


def test_stacked_batchnorm_normalises_a_lower_precision_input_in_its_statistics_dtype():
    """Under autocast a convolution hands BatchNorm a bf16 input while its running statistics are fp32; CUDA's
    batched (vmap) rule refuses that mix, so the stack casts the input to the statistics' dtype first. The stack's
    output and running statistics are then the fp32 network's on the rounded input."""
    from plench.stacked import StackedNetwork

    torch.manual_seed(0)
    nets = [nn.Sequential(nn.BatchNorm1d(6), nn.Linear(6, 3)) for _ in range(2)]
    stack = StackedNetwork(nets)
    x = torch.randn(2, 8, 6).to(torch.bfloat16)
    out = stack.forward(x)
    assert out.dtype == torch.float32
    for g, net in enumerate(nets):
        expected = net(x[g].float())  # the network alone, in train mode, on the same (bf16-rounded) values
        torch.testing.assert_close(out[g], expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(stack.buffers["0.running_mean"][g], net[0].running_mean)
        torch.testing.assert_close(stack.buffers["0.running_var"][g], net[0].running_var)
