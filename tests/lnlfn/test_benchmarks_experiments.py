"""LNLFN's benchmarks (lnlfn.benchmarks) and the shared protocol of its notebooks (lnlfn.experiments)."""
from __future__ import annotations

import numpy as np
import pytest

from lnlfn import benchmarks as B
from lnlfn import experiments as X
from lnlfn.data import TextDataset, load_rt_snippets, load_vader
from lnlfn.scoring import HeadConfig, SweepResult, loss_detection
from shared.errors import ConfigError


@pytest.fixture(scope="module")
def vader():
    return load_vader()


@pytest.mark.parametrize("name, kinds", [("vader5", {"dissenting_worker", "dissenting_label"}),
                                         ("vaderH5", {"hard", "dissenting_label"})])
def test_five_percent_benchmarks_hit_exact_counts_with_the_official_mix(vader, name, kinds):
    out = B.make_benchmark(name, vader)
    for s, n in vader.split_counts().items():
        inside = out.split == s
        total = int(round(0.05 * n))
        assert out.noised[inside].sum() == total
        counts = out.counts()[s]
        assert set(k for k, c in counts.items() if c) == kinds
        main = "dissenting_worker" if "dissenting_worker" in kinds else "hard"
        assert counts[main] == int(round(0.8 * total)) or abs(counts[main] - 0.8 * total) <= 1
    assert B.shortfalls(out) == {}  # every kind's target met exactly
    # every noisy label is one some rater of that item gave, and differs from gold
    rows = np.flatnonzero(out.noised)
    assert (out.noisy[rows] != out.clean[rows]).all()
    assert all(out.noisy[i] in vader.annotations[i] for i in rows)


def test_shortfalls_name_the_kinds_that_ran_out_of_eligible_items(vader):
    # far more than the 3-rater disagreements allow
    capped = B.noise_dataset(vader, "crowd_majority", 0.5, majority_k=3, die_on_insufficient=False)
    short = B.shortfalls(capped)
    assert set(short) == set(vader.split_counts()) and all(v["crowd_majority"] > 0 for v in short.values())
    assert short["train"]["crowd_majority"] == capped.info["targets"]["train"]["crowd_majority"] - capped.counts()["train"]["crowd_majority"]


def test_crowd_majority_benchmark_keeps_every_disagreement_of_three_raters(vader):
    out = B.make_benchmark("vaderM", vader)
    assert set(out.kind[out.noised]) == {"crowd_majority"}
    rate = out.noised.mean()
    assert 0.04 < rate < 0.10  # the natural rate: majority of 3 random raters vs the 10-rater plurality
    again = B.make_benchmark("vaderM", vader)
    other = B.make_benchmark("vaderM", vader, seed=7)
    assert np.array_equal(out.noisy, again.noisy) and not np.array_equal(out.noisy, other.noisy)


def test_noise_dataset_levels_zero_and_capped(vader):
    zero = B.noise_dataset(vader, "uniform", 0.0)
    assert not zero.noised.any() and np.array_equal(zero.noisy, vader.labels)
    capped = B.noise_dataset(vader, "crowd_majority", 0.15, majority_k=3, die_on_insufficient=False)
    assert capped.noised.mean() < 0.10  # crowd majority runs out before 15 %
    with pytest.raises(ConfigError, match="crowd_majority"):
        B.noise_dataset(vader, "crowd_majority", 0.15, majority_k=3)
    cd = B.noise_dataset(vader, "class_dependent", 0.10)
    assert np.isclose(cd.noised[cd.split == "test"].mean(), 0.10, atol=1e-3)
    assert "transition" in cd.info


def test_benchmark_errors_name_the_problem(vader):
    rt = load_rt_snippets(sizes=(200, 50, 50))
    with pytest.raises(ConfigError, match="no per-annotator labels"):
        B.noise_dataset(rt, "dissenting_label", 0.05)
    with pytest.raises(ConfigError, match="built on 'vader'"):
        B.make_benchmark("vader5", rt)
    with pytest.raises(ConfigError, match="unknown LNLFN benchmark"):
        B.benchmark("vader50")
    # 5 % of the 50 test items is 2.5: the official noiser's round() gives 2 (halves to even), ours 3 (halves up)
    assert B.make_benchmark("rt_u5", rt).noised[rt.split == "test"].sum() == 2
    assert B.make_benchmark("rt_u5", rt, compat=False).noised[rt.split == "test"].sum() == 3


def test_official_rules_are_the_default_and_ours_are_one_switch_away(vader):
    official, ours = B.make_benchmark("vaderH5", vader), B.make_benchmark("vaderH5", vader, compat=False)
    assert official.info["compat"] is True and official.info["hard_base"] == "columns"
    assert ours.info["compat"] is False and ours.info["hard_base"] == "item"
    n = vader.split_counts()
    assert official.info["targets"] == {
        s: {"hard": round(n[s] * 0.05 * 0.8), "dissenting_label": round(n[s] * 0.05 * 0.2)} for s in n}
    again = B.noise_dataset(vader, B.SNLI_MIX, 0.05, hard_threshold=0.4)
    assert np.array_equal(again.noisy, official.noisy)


def test_class_dependent_noise_on_a_subsample_without_one_class():
    n = 300
    labels = np.repeat([0, 2], [180, 120])  # class 1 is absent from this (sub)sample
    split = np.tile(["train", "val", "test"], n // 3)
    ds = TextDataset(name="tiny3", texts=[f"t{i}" for i in range(n)], labels=labels, classes=("neg", "neu", "pos"),
                     annotations=None, split=split, ids=np.arange(n).astype(str), source="test")
    T = B.class_transition(ds, 0.1, seed=0)
    assert np.array_equal(T[1], [0, 1, 0]) and np.all(T[[0, 2], 1] == 0)
    out = B.noise_dataset(ds, "class_dependent", 0.1, seed=0)
    assert all(out.noised[split == s].sum() == 10 for s in ("train", "val", "test"))
    assert not np.any(out.noisy == 1)  # no label moves to the class the data does not have
    assert np.array_equal(out.noisy[out.noised], 2 - out.clean[out.noised])


def tiny_dataset(split):
    n = len(split)
    return TextDataset(name="tiny", texts=[f"t{i}" for i in range(n)], labels=np.zeros(n, dtype=np.int64),
                       classes=("a", "b"), annotations=None, split=np.array(split), ids=np.arange(n).astype(str),
                       source="test")


def test_selected_accuracy_selects_on_validation_and_measures_on_test():
    ds = tiny_dataset(["train", "val", "val", "test", "test", "test"])
    # two runs over the 5 scored rows (val, val, test, test, test); run 1 is right on val, run 0 on test
    p0 = np.array([[.9, .1], [.9, .1], [.1, .9], [.1, .9], [.1, .9]])
    p1 = np.array([[.1, .9], [.1, .9], [.9, .1], [.9, .1], [.1, .9]])
    labels = np.array([0, 1, 1, 1, 1, 1])
    sweep = SweepResult((HeadConfig(), HeadConfig(C=2.0)), np.stack([p0, p1]), labels[1:], np.array([0.5, 0.5]),
                        np.array([0.5, 0.6]))
    clean = np.array([0, 1, 1, 1, 1, 0])
    by_own = X.selected_accuracy(sweep, ds, eval_labels=labels)
    assert by_own["run"] == 0 and np.isclose(by_own["accuracy"], 1.0)  # tie on accuracy -> lower loss
    by_clean = X.selected_accuracy(sweep, ds, eval_labels=clean, select_labels=np.array([0, 1, 1, 0, 0, 0]))
    assert by_clean["run"] == 1 and np.allclose(by_clean["accuracies"], [2 / 3, 0.0])
    assert list(X.test_items(ds)) == [2, 3, 4] and list(X.val_items(ds)) == [0, 1]


def test_detection_row_known_values_and_flagged_sets():
    probs = np.array([[.9, .1], [.2, .8], [.6, .4], [.95, .05], [.3, .7], [.5, .5]])
    labels = np.zeros(6, dtype=np.int64)
    err = np.array([0, 1, 0, 0, 1, 0], dtype=bool)
    det = loss_detection(probs, labels)  # ranking by loss: items 1, 4, 5, 2, 0, 3
    row = X.detection_row(det, err)
    assert row["p_at_err"] == 1.0 and row["r_at_2err"] == 1.0 and row["n_flagged"] == 6
    assert np.isclose(row["aupr"], 1.0)
    flagged = type(det)("set", det.scores, det.labels, det.probs, flagged=np.array([0, 1, 0, 0, 0, 0], dtype=bool))
    row = X.detection_row(flagged, err)
    assert row["n_flagged"] == 1 and row["p_at_err"] == 0.5 and row["r_at_2err"] == 0.5  # empty slots are misses
    with pytest.raises(ConfigError, match="no label errors"):
        X.detection_row(det, np.zeros(6, dtype=bool))


def test_with_validation_carves_a_seeded_share_of_train_only_when_needed():
    ds = tiny_dataset(["train"] * 20 + ["test"] * 5)
    out = X.with_validation(ds, 0.1, seed=3)
    assert (out.split == "val").sum() == 2 and (out.split == "test").sum() == 5
    assert np.array_equal(out.split, X.with_validation(ds, 0.1, seed=3).split)
    assert X.with_validation(out) is out


def test_baseline_sweep_learns_from_char_ngrams_and_configs_dispatch():
    words = ["good", "great", "nice", "fine", "bad", "awful", "poor", "sad"] * 20
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1] * 20)
    split = np.random.default_rng(0).permutation(np.array((["train"] * 6 + ["val"] + ["test"]) * 20))
    ds = TextDataset(name="toy", texts=words, labels=labels, classes=("pos", "neg"), annotations=None, split=split,
                     ids=np.arange(len(words)).astype(str), source="test")
    sweep = X.baseline_sweep(ds, labels)
    assert sweep.probs.shape == (2, 40, 2)
    assert (sweep.probs.argmax(2) == labels[split != "train"]).mean() > 0.9  # every test word is seen in training
    assert X.make_configs("all-minilm-l6-v2", [{"kind": "logreg", "C": 2.0}]) == [HeadConfig("logreg", C=2.0)]
    from lnlfn.finetune import FinetuneConfig
    assert X.make_configs("microsoft/deberta-v3-base", [{"lr": 1e-5, "epochs": 2, "batch_size": 8}]) == \
        [FinetuneConfig(lr=1e-5, epochs=2, batch_size=8)]
    assert X.task_of(ds) == "sequence"


def test_corrected_labels_restore_only_the_true_errors_among_each_splits_top_items():
    ds = tiny_dataset(["train"] * 2 + ["val"] * 4 + ["test"] * 4)
    clean = np.zeros(10, dtype=np.int64)
    noisy = clean.copy()
    noisy[[2, 3, 6, 9]] = 1  # errors: val rows 2, 3; test rows 6, 9
    # scores over the 8 scored rows (val 2-5, test 6-9): val checks row 2 (error) and row 4 (not);
    # test checks rows 7 (not) and 6 (error); rows 3 and 9 are errors nobody checks
    scores = np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.9, 0.1, 0.3])
    out = X.corrected_labels(ds, noisy, clean, scores, rate=0.5)
    assert out.tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    # TweetNLP-M's rate is "all": each split checks as many items as it has errors (2 of 4 here, as rate 0.5)
    assert X.corrected_labels(ds, noisy, clean, scores, rate="all").tolist() == out.tolist()
    with pytest.raises(ConfigError, match="one entry per scored item"):
        X.corrected_labels(ds, noisy, clean, scores[:5], rate=0.5)


def test_true_rank_and_precision_recall_f1():
    assert [X.true_rank(r, [0.8, 0.9, 0.8, 0.7]) for r in range(4)] == [2, 1, 2, 4]
    p, r, f = X.precision_recall_f1([0, 1, 2, 3], np.array([1, 0, 1, 0, 0, 1, 1, 0], dtype=bool))
    assert (p, r) == (0.5, 0.5) and np.isclose(f, 0.5)
    assert X.precision_recall_f1([], np.array([1, 0], dtype=bool)) == (0.0, 0.0, 0.0)
    with pytest.raises(ConfigError, match="no label errors"):
        X.precision_recall_f1([0], np.zeros(3, dtype=bool))


def test_sweep_draws_check_their_ranges_for_heads_and_fine_tuning():
    from lnlfn.finetune import random_finetune_configs
    from lnlfn.scoring import random_heads

    for make in (random_heads, random_finetune_configs):
        with pytest.raises(ConfigError, match="positive number of runs"):
            make(0)
        with pytest.raises(ConfigError, match="lr_range"):
            make(2, lr_range=(1e-3, 1e-5))
        with pytest.raises(ConfigError, match="epochs"):
            make(2, epochs=(3, 2))
    assert [h.name for h in random_heads(2, seed=0, train_fractions=(0.25, 0.5, 1.0))] == [
        "mlp(h=256, lr=0.00079, ep=4, bs=16, frac=0.5, seed=0)", "mlp(h=256, lr=0.00017, ep=8, bs=64, frac=0.25, seed=1)"]


def test_the_executor_setting_reaches_the_fine_tuning_sweep(monkeypatch):
    """The notebooks' path: ``model_sweep(..., executor=cfg.executor)`` with ``-p settings '{executor: ...}'``."""
    from lnlfn import finetune
    from shared.profiles import notebook_settings

    seen = []
    monkeypatch.setattr(finetune, "finetune_sweep", lambda *a, **kw: seen.append(kw["executor"]) or "swept")
    on_slurm = {"kind": "slurm", "gpus_per_node": 1, "wait": False}
    cfg = notebook_settings("lnlfn", "03_detection_main", "full", {"executor": on_slurm})
    ds = TextDataset(name="toy", texts=["good", "bad"] * 6, labels=np.array([0, 1] * 6), classes=("pos", "neg"),
                     annotations=None, split=np.repeat(["train", "val", "test"], 4), ids=np.arange(12).astype(str),
                     source="test")
    assert X.model_sweep(ds, ds.labels, model="org/any-model", configs=[], executor=cfg.executor) == "swept"
    assert seen == [on_slurm]
    X.model_sweep(ds, ds.labels, model="org/any-model", configs=[])
    assert seen[-1] is None


@pytest.mark.parametrize("notebook", ["00_data_and_noising", "01_noise_realism", "02_model_survey",
                                      "03_detection_main", "04_mturk_reanalysis", "05_end_to_end"])
def test_every_notebook_has_the_executor_setting_off_by_default(notebook):
    from shared.profiles import notebook_settings

    assert all(notebook_settings("lnlfn", notebook, p).executor is None for p in ("smoke", "full"))


def test_every_model_sweep_of_the_pages_passes_the_executor_setting():
    """The notebooks' sweeps run in their page modules (lnlfn/pages/); each passes the profile's executor."""
    import ast

    from shared.paths import paper_dir

    calls = []
    for path in sorted((paper_dir("lnlfn") / "pages").glob("*.py")):
        calls += [(path.stem, node) for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
                  and getattr(node.func, "id", None) == "model_sweep"]
    assert {stem for stem, _ in calls} == {"noise_realism", "model_survey", "detection_main", "end_to_end"}
    for stem, call in calls:
        passed = {kw.arg: ast.unparse(kw.value) for kw in call.keywords}
        assert passed.get("executor") in ("cfg.executor", "self.cfg.executor"), \
            f"{stem}: model_sweep(...) without executor=cfg.executor"
