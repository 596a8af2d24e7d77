"""plench.reports: step costs from records (Fig. 4), the validation-in-training arm (Fig. 1(a, b)) and train_model."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from plench.data import PLLDataset, load_pll_dataset, plench_split
from plench.protocol import collect, train_run
from plench.reports import step_costs, train_model, train_with_validation, validation_as_training
from shared.errors import ConfigError

torch.set_num_threads(1)


def records(rows):
    cols = ["run", "dataset", "arch", "algorithm", "compat", "step", "step_time", "mem_gb", "mem_source"]
    return pd.DataFrame(rows, columns=cols)


# -- step_costs ----------------------------------------------------------------------------------------------------
def test_step_costs_weights_records_by_the_steps_they_cover_and_skips_step_0():
    frame = records([
        ("a", "D", "cnn", "PRODEN", True, 0, 9.0, 0.5, "cpu_max_rss"),   # start-up: left out
        ("a", "D", "cnn", "PRODEN", True, 25, 1.0, 0.6, "cpu_max_rss"),  # covers 25 steps
        ("a", "D", "cnn", "PRODEN", True, 30, 4.0, 0.7, "cpu_max_rss"),  # covers 5 steps (the last, steps - 1)
        ("b", "D", "cnn", "PRODEN", True, 0, 9.0, 0.1, "cpu_max_rss"),
        ("b", "D", "cnn", "PRODEN", True, 10, 2.0, 0.2, "cpu_max_rss"),  # covers 10 steps
        ("c", "D", "cnn", "PiCO", True, 0, 9.0, 1.0, "cuda_max_allocated"),
        ("c", "D", "cnn", "PiCO", True, 20, 3.0, 2.0, "cuda_max_allocated"),
    ])
    costs = step_costs(frame.sample(frac=1.0, random_state=0)).set_index("algorithm")
    assert costs.loc["PRODEN", "step_time_s"] == pytest.approx((25 * 1.0 + 5 * 4.0 + 10 * 2.0) / 40)
    assert costs.loc["PRODEN", "step_time_median_s"] == pytest.approx(2.0)  # of 1.0, 4.0, 2.0
    assert costs.loc["PRODEN", "steps_timed"] == 40 and costs.loc["PRODEN", "runs"] == 2
    assert costs.loc["PRODEN", "peak_mem_gb"] == pytest.approx(0.7)
    assert costs.loc["PiCO", "step_time_s"] == pytest.approx(3.0)
    assert costs.loc["PiCO", "mem_source"] == "cuda_max_allocated"
    assert {"dataset", "arch", "compat", "step_time_s", "steps_timed", "runs", "peak_mem_gb"} <= set(costs.columns)


def test_step_costs_groups_by_the_requested_keys_and_names_mixed_memory_sources():
    frame = records([
        ("a", "D1", "cnn", "PRODEN", True, 0, 1.0, 0.1, "cpu_max_rss"),
        ("a", "D1", "cnn", "PRODEN", True, 10, 1.0, 0.1, "cpu_max_rss"),
        ("b", "D2", "cnn", "PRODEN", True, 0, 1.0, 0.1, "cuda_max_allocated"),
        ("b", "D2", "cnn", "PRODEN", True, 10, 3.0, 0.3, "cuda_max_allocated"),
    ])
    per_dataset = step_costs(frame)
    assert len(per_dataset) == 2 and set(per_dataset["dataset"]) == {"D1", "D2"}
    pooled = step_costs(frame, by=["algorithm"])
    assert len(pooled) == 1
    assert pooled["step_time_s"].iloc[0] == pytest.approx(2.0)
    assert pooled["mem_source"].iloc[0] == "cpu_max_rss+cuda_max_allocated"


def test_step_costs_needs_records_after_step_0():
    with pytest.raises(ConfigError, match="after step 0"):
        step_costs(records([("a", "D", "cnn", "PRODEN", True, 0, 1.0, 0.1, "cpu_max_rss")]))
    with pytest.raises(ConfigError, match="missing"):
        step_costs(pd.DataFrame({"run": ["a"], "step": [1]}))


# -- validation_as_training ----------------------------------------------------------------------------------------
def toy(n=203, q=5, fixed_test=False, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, q, n)
    S = (rng.random((n, q)) < 0.4).astype(np.uint8)
    S[np.arange(n), y] = 1
    X = np.column_stack([np.arange(n), rng.normal(size=n)]).astype(np.float32)  # column 0: the row's identity
    test = (rng.normal(size=(17, 2)).astype(np.float32), rng.integers(0, q, 17)) if fixed_test else None
    return PLLDataset("toy", X, S, y, tuple(map(str, range(q))), "tabular", test, 100, {"annotator_sets": S[:, None]})


@pytest.mark.parametrize("fixed_test", [False, True])
@pytest.mark.parametrize("trial_seed", [0, 3])
def test_validation_rows_join_training_with_singleton_sets(fixed_test, trial_seed):
    ds = toy(fixed_test=fixed_test)
    old = plench_split(ds, trial_seed)
    moved = validation_as_training(ds, trial_seed)
    new = plench_split(moved, trial_seed)
    ids = lambda d, rows: d.X[rows, 0].astype(int)  # noqa: E731
    n_train = len(old["train"])
    assert ids(moved, new["train"]).tolist() == ids(ds, old["train"]).tolist() + ids(ds, old["val"]).tolist()
    assert np.array_equal(moved.S[new["train"][:n_train]], ds.S[old["train"]])  # training rows keep their sets
    singles = new["train"][n_train:]
    assert np.array_equal(moved.S[singles], np.eye(5, dtype=np.uint8)[ds.y[old["val"]]])  # |S| = 1, the true label
    assert np.array_equal(moved.y, ds.y[moved.X[:, 0].astype(int)])
    assert set(ids(moved, new["val"])) == set(ids(ds, old["val"]))  # validation: the original rows, partial sets
    assert np.array_equal(moved.S[new["val"]], ds.S[ids(moved, new["val"])])
    assert new["test"] is None
    expected_test = ds.test if fixed_test else (ds.X[old["test"]], ds.y[old["test"]])
    assert np.array_equal(moved.test[0], expected_test[0]) and np.array_equal(moved.test[1], expected_test[1])
    assert moved.name == ds.name and "annotator_sets" not in moved.meta
    assert moved.meta["validation_in_training"]["moved_rows"] == len(old["val"])


def test_validation_as_training_keeps_image_rows(tmp_path):
    ds = load_pll_dataset("PLDigits-Vaguest", modality="image")
    moved = validation_as_training(ds, 1)
    old, new = plench_split(ds, 1), plench_split(moved, 1)
    assert moved.X.shape[1:] == (8, 8, 1) and moved.X.dtype == np.uint8
    assert np.array_equal(moved.X[new["train"][: len(old["train"])]], ds.X[old["train"]])
    assert np.array_equal(moved.X[new["train"][len(old["train"]):]], ds.X[old["val"]])


def test_train_with_validation_runs_the_default_configuration_resumably(tmp_path):
    ds = load_pll_dataset("PLDigits-Vaguest")
    common = dict(n_trials=2, arch="mlp", steps=6, checkpoint_freq=3, out_dir=tmp_path)
    counts = train_with_validation([ds], ["PRODEN", "CC"], **common)
    assert counts == {"total": 4, "skipped": 0, "restarted": 0, "ran": 4}
    found = collect(tmp_path)
    assert set(found["hparams_seed"]) == {0} and set(found["trial_seed"]) == {0, 1}
    assert set(found["dataset"]) == {ds.name} and set(found["step"]) == {0, 3, 5}
    assert train_with_validation([ds], ["PRODEN", "CC"], **common)["skipped"] == 4
    # the PRODEN run of trial 1 is train_run on the rearranged dataset
    direct = train_run(validation_as_training(ds, 1), "PRODEN", arch="mlp", hparams_seed=0, trial_seed=1, steps=6,
                       checkpoint_freq=3, out_dir=tmp_path / "direct")
    mine = found[(found["algorithm"] == "PRODEN") & (found["trial_seed"] == 1)].sort_values("step")
    assert mine["test_acc"].tolist() == [r["test_acc"] for r in direct]
    # its runs are validation_training_args's: select_runs reads exactly them, here one split of two
    from plench.protocol import select_runs
    from plench.reports import validation_training_args

    args = validation_training_args([ds], ["PRODEN", "CC"], n_trials=1, arch="mlp", steps=6, checkpoint_freq=3)
    chosen = select_runs(collect(tmp_path), args)
    assert chosen["run"].nunique() == 2 and set(chosen["trial_seed"]) == {0}


# -- train_model ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, arch, modality", [("PRODEN", "mlp", "tabular"), ("PiCO", "digits_cnn", "image")])
def test_train_model_is_the_model_train_run_ends_with(tmp_path, name, arch, modality):
    ds = load_pll_dataset("PLDigits-Aggregate", modality=modality)
    overrides = {"batch_size": 32, **({"moco_queue": 64, "prot_start": 3} if name == "PiCO" else {})}
    recs = train_run(ds, name, arch=arch, hparams_seed=0, trial_seed=1, steps=7, checkpoint_freq=7,
                     out_dir=tmp_path, hparams_overrides=overrides)
    model = train_model(ds, name, arch=arch, trial_seed=1, steps=7, hparams_overrides=overrides)
    split = plench_split(ds, 1)
    from plench.augment import views_for

    x = ds.X[split["test"]]
    x = views_for("image", 8)["original"](torch.as_tensor(x)) if modality == "image" else torch.as_tensor(x)
    with torch.no_grad():
        acc = float((model.predict(x).argmax(1) == torch.as_tensor(ds.y[split["test"]])).double().mean())
    assert acc == pytest.approx(recs[-1]["test_acc"])
    assert not model.training and model.curr_iter == 7


# -- tabular_paper_rows, image_paper_rows: what was run -------------------------------------------------------------
def results(datasets, algorithms, criteria, values, *, steps=200, n_configs=1, n_trials=2, arch=None):
    frame = pd.DataFrame({"dataset": datasets, "algorithm": algorithms, "criterion": criteria, "value": values,
                          "steps": steps, "n_configs": n_configs, "n_trials": n_trials})
    return frame if arch is None else frame.assign(arch=arch)


def test_tabular_rows_set_each_palm_dataset_beside_its_own_table():
    from plench.reports import tabular_paper_rows
    from shared.report import compare_with_paper, reported

    ours = results(["SoccerPlayer", "Lost", "digits-USS", "synthetic-manyclass"], ["SCL_NL", "PRODEN", "PRODEN", "PRODEN"],
                   ["CR", "OA&ES", "AA", "CR"], [50.0, 60.0, 70.0, 80.0], steps=20_000, n_configs=20, n_trials=5)
    rows = tabular_paper_rows(ours)
    assert rows[["dataset", "network"]].values.tolist() == [["Soccer Player", "MLP"], ["Lost", "MLP"], ["Lost", "MLP"]]
    assert rows["ours_on"].tolist()[0] == "SoccerPlayer (MLP, 20,000 steps, 20 configs x 5 splits)"
    table = compare_with_paper(rows.iloc[:2], reported("plench", "results"), on=["dataset", "network", "algorithm", "criterion"])
    found = table[table["ours"].notna()]
    assert found[["item", "algorithm", "ours"]].values.tolist() == [["Table 7", "PRODEN", 60.0], ["Table 13", "SCL-NL", 50.0]]
    empty = tabular_paper_rows(ours.iloc[3:])  # no counterpart: an empty frame that still compares
    assert len(empty) == 0 and len(compare_with_paper(empty, reported("plench", "results"))) == 0


def test_a_reduced_run_is_tagged_with_what_was_run_not_as_full():
    """A 200-step, one-configuration run was tagged "(MLP, full)"; the tag now gives steps, configs and splits."""
    from plench.reports import PAPER_PROTOCOL, run_tag, tabular_paper_rows

    rows = tabular_paper_rows(results(["Lost"], ["PRODEN"], ["CR"], [60.0], steps=200, n_configs=1, n_trials=2))
    assert rows["ours_on"].tolist() == ["Lost (MLP, 200 steps, 1 config x 2 splits)"]
    assert "full" not in rows["ours_on"].iloc[0]
    assert run_tag("digits_cnn", 100, 1, 1) == "digits CNN, 100 steps, 1 config x 1 split"
    assert "20 configs x 5 splits" in PAPER_PROTOCOL["tabular"]


def test_image_rows_use_the_network_of_each_arch_or_the_one_given():
    from plench.reports import image_paper_rows

    ours = results(["PLDigits-Aggregate", "PLCIFAR10_Vaguest"], ["PRODEN", "PiCO_plus"], ["CR", "AA"], [70.0, 60.0],
                   steps=100, n_trials=1, arch=["digits_cnn", "densenet_bc"])
    rows = image_paper_rows(ours)
    assert rows[["dataset", "network", "algorithm"]].values.tolist() == [
        ["PLCIFAR10-Aggregate", "ResNet", "PRODEN"], ["PLCIFAR10-Vaguest", "DenseNet", "PiCO+"]]
    assert rows["ours_on"].iloc[1] == "PLCIFAR10_Vaguest (DenseNet-BC-22, 100 steps, 1 config x 1 split)"
    assert image_paper_rows(ours.assign(arch="mlp"), network="ResNet")["network"].tolist() == ["ResNet", "ResNet"]
    with pytest.raises(ConfigError, match="n_configs"):
        image_paper_rows(ours.drop(columns=["n_configs"]))


# -- the notebooks' settings as sweeps ------------------------------------------------------------------------------
def test_tabular_grids_follow_the_settings():
    from plench.reports import tabular_grids

    cfg = {"algorithms": ["PRODEN", "EXP", "VALEN"], "fixed_variants": ["EXP", "MCL_GCE"], "n_hparams": 2,
           "n_trials": 3, "steps": None, "checkpoint_freq": 25, "batched": "auto", "compat": True,
           "hparams_overrides": {"VALEN": {"warm_up": 60}, "POP": {"warm_up": 1}}}
    grids = tabular_grids(cfg)
    assert [(g.algorithms, g.compat, g.hparams_overrides) for g in grids] == [
        (("PRODEN", "EXP"), True, None), (("VALEN",), True, {"warm_up": 60}), (("EXP",), False, None)]
    assert {(g.n_hparams, g.n_trials, g.steps, g.batched, g.arch) for g in grids} == {(2, 3, None, "auto", "mlp")}
    assert [g.compat for g in tabular_grids({**cfg, "compat": False})] == [False, False]


def test_image_grids_merge_the_shared_batch_size_with_each_algorithms_overrides():
    from plench.reports import image_grids, image_overrides

    cfg = {"algorithms": ["PRODEN", "PiCO"], "archs": ["digits_cnn"], "n_hparams": 1, "n_trials": 1, "steps": 100,
           "checkpoint_freq": 25, "compat": True, "batch_size": 32, "hparams_overrides": {"PiCO": {"prot_start": 40}}}
    assert [g.hparams_overrides for g in image_grids(cfg)] == [{"batch_size": 32}, {"batch_size": 32, "prot_start": 40}]
    assert image_overrides({**cfg, "batch_size": None}, "PRODEN") is None


# -- Figure 1(a, b) and Table 5 ---------------------------------------------------------------------------------------
def test_arm_differences_pair_the_splits():
    from plench.reports import arm_differences

    arms = pd.DataFrame({"dataset": "A", "algorithm": ["PRODEN", "PRODEN", "CC"], "arm": ["validation", "training", "validation"],
                         "mean": [70.0, 75.0, 60.0], "per_trial": [(60.0, 80.0), (70.0, 80.0), (60.0, 60.0)]})
    table = arm_differences(arms, {"A": 90.0})
    assert table.to_dict("records") == [{"dataset": "A", "algorithm": "PRODEN", "validation": 70.0, "training": 75.0,
                                         "training - validation": 5.0, "splits won by training": "1/2",
                                         "validation rows alone": 90.0}]  # CC has no training arm: left out


def test_table5_rows_name_the_paper_datasets_and_ours():
    from plench.reports import table5, table5_paper_rows

    ds = load_pll_dataset("PLDigits-Vaguest")
    rows = table5_paper_rows(table5({"PLDigits-Vaguest": ds}))
    assert set(rows["dataset"]) == {"PLCIFAR10-Vaguest"} and set(rows["ours_on"]) == {"PLDigits-Vaguest"}
    assert rows.set_index("metric")["value"]["examples"] == 1797
