"""lnlfn.cost, the planner alone: counts that follow the settings, steps that follow the code, identities that are
the executing code's cache keys (or are equal exactly when those are), and runs shared between notebooks.

The full profile is planned with ``data_dir`` an empty folder, so every dataset is sized from the registry whatever
this machine holds. Notebook execution is compared with the plans by running the smoke batch (see the module doc of
``lnlfn/cost.py``), not here.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from lnlfn import cost
from lnlfn.data import TextDataset, random_split, registry_split_counts, split_sizes
from lnlfn.finetune import CACHE_KIND, FinetuneConfig, random_finetune_configs
from lnlfn.scoring import HeadConfig
from shared.errors import ConfigError
from shared.profiles import notebook_settings
from shared.runlog import ENV, read_log

NOTEBOOKS = ("00_data_and_noising", "01_noise_realism", "02_model_survey", "03_detection_main",
             "04_mturk_reanalysis", "05_end_to_end")


def settings(notebook: str, profile: str = "full", **overrides):
    return notebook_settings("lnlfn", notebook, profile, overrides)


def distinct(runs, kind: str | None = None) -> set:
    return {(r.kind, r.identity) for r in runs if kind is None or r.kind == kind}


@pytest.fixture(scope="module")
def no_data(tmp_path_factory):
    return str(tmp_path_factory.mktemp("no-data"))


@pytest.fixture(scope="module")
def full(no_data):
    """{notebook: planned runs} of the full profile without its data."""
    return {nb: cost.plan(nb, settings(nb), {"profile": "full", "data_dir": no_data}) for nb in NOTEBOOKS}


# ---------------------------------------------------------------------------------------------- counts
def test_the_full_profile_plans_every_notebook_as_its_protocol_says(full):
    cfg1, cfg2, cfg3, cfg5 = (settings(nb) for nb in (NOTEBOOKS[1], NOTEBOOKS[2], NOTEBOOKS[3], NOTEBOOKS[5]))
    assert full["00_data_and_noising"] == [] and full["04_mturk_reanalysis"] == []  # noising; released votes
    # Fig. 3: one run per dataset, method, level and seed, every method's level 0 being the clean labels
    methods = sum(len(m) for m in cfg1.datasets.values())
    levels = len(cfg1.levels)
    assert len(distinct(full["01_noise_realism"], CACHE_KIND)) == \
        len(cfg1.seeds) * len(cfg1.configs) * (methods * (levels - 1) + len(cfg1.datasets))
    # App. D: n_sweep runs per model (10 models, 25 runs), and the n-gram baseline
    assert len(distinct(full["02_model_survey"], CACHE_KIND)) == len(cfg2.models) * cfg2.n_sweep * len(cfg2.seeds)
    assert len(distinct(full["02_model_survey"], cost.HOLDOUT)) == len(cfg2.baseline_configs) * len(cfg2.seeds)
    # Table 3: 25 fine-tuning runs per benchmark and seed, 2 baseline heads
    cases = len(cfg3.benchmarks) * len(cfg3.seeds)
    assert len(distinct(full["03_detection_main"], CACHE_KIND)) == cases * cfg3.n_sweep
    assert len(distinct(full["03_detection_main"], cost.HOLDOUT)) == cases * len(cfg3.baseline_configs)
    # Table 4: 40 runs per benchmark
    assert len(distinct(full["05_end_to_end"])) == len(cfg5.benchmarks) * len(cfg5.seeds) * cfg5.n_sweep
    assert all(r.steps > 0 for nb in NOTEBOOKS for r in full[nb] if r.kind == CACHE_KIND)


def test_doubling_the_seeds_doubles_the_seeded_runs(no_data):
    params = {"profile": "full", "data_dir": no_data}
    one = cost.plan("03_detection_main", settings("03_detection_main", seeds=[0]), params)
    two = cost.plan("03_detection_main", settings("03_detection_main", seeds=[0, 1]), params)
    for kind in (CACHE_KIND, cost.HOLDOUT):
        assert len(distinct(two, kind)) == 2 * len(distinct(one, kind))
    assert distinct(one) < distinct(two)  # seed 0's runs are the same runs


def test_runs_shared_between_notebooks_have_equal_identities(full):
    # 02's DeBERTa-v3-base sweep on TweetNLP-5 (seed 0) is 03's; 05's 40-run sweeps start with 03's 25 runs
    shared = distinct(full["02_model_survey"]) & distinct(full["03_detection_main"])
    assert len([k for k, _ in shared if k == CACHE_KIND]) == settings("03_detection_main").n_sweep
    assert len([k for k, _ in shared if k == cost.HOLDOUT]) == len(settings("02_model_survey").baseline_configs)
    both = {"tweetnlp5", "tweetnlpM"}
    assert len(distinct(full["03_detection_main"]) & distinct(full["05_end_to_end"])) == \
        len(both & set(settings("05_end_to_end").benchmarks)) * settings("03_detection_main").n_sweep
    assert random_finetune_configs(40)[:25] == random_finetune_configs(25)  # why: the same draws


# ---------------------------------------------------------------------------------------------- steps
def test_fine_tuning_steps_follow_epochs_batches_and_the_sequences(no_data):
    tweets = cost.load_data("tweetnlp", no_data)
    assert tweets.task == "token" and tweets.seqs(train=True) == 1000 and tweets.seqs(train=False) == 827
    config = FinetuneConfig(lr=1e-5, epochs=3, batch_size=64)
    run = cost.finetune_run(tweets, cost.Labels("x"), "microsoft/deberta-v3-base", config, "", no_data)
    train, infer = run.work
    assert (train.steps, train.examples) == (3 * math.ceil(1000 / 64), 3 * 1000)
    assert (infer.steps, infer.examples) == (math.ceil(827 / 64), 827)
    w = train.workload
    assert (w.arch, w.phase, w.batch, w.shape, w.precision) == ("deberta-v3-base", "train", 64, (128,), "fp32")
    assert w.opts["task"] == "token" and w.opts["num_labels"] == 12
    bf16 = cost.finetune_run(tweets, cost.Labels("x"), "roberta-large", FinetuneConfig(1e-5, 2, 8, bf16=True), "",
                             no_data)
    assert bf16.work[0].workload.precision == "bf16" and bf16.work[0].workload.arch == "roberta-large"


def test_a_tiny_model_folder_gives_the_workload_its_size(tmp_path, no_data):
    """A rehearsal's stand-in under <data_dir>/models/<name> (the folder finetune_probs loads) is priced as the model
    it is: the workloads carry its sizes; without a folder the key is the full profile's."""
    from shared.text.tiny_models import write_tiny_model
    from shared.workloads import FULL_PROFILE_WORKLOADS

    write_tiny_model(tmp_path / "models" / "microsoft" / "deberta-v3-base", "deberta-v2", ["the film was good ."])
    data = cost.data_of(toy_dataset())
    config = FinetuneConfig(lr=1e-3, epochs=1, batch_size=32)
    tiny = cost.finetune_run(data, cost.Labels("x"), "microsoft/deberta-v3-base", config, "", str(tmp_path))
    bare = cost.finetune_run(data, cost.Labels("x"), "microsoft/deberta-v3-base", config, "", no_data)
    for small, full in zip(tiny.work, bare.work):
        o = small.workload.opts
        assert (o["layers"], o["hidden"], o["heads"], o["intermediate"]) == (1, 32, 2, 64) and o["vocab"] > 0
        assert small.workload.replace(options={k: 0 for k in ("layers", "hidden", "heads", "intermediate",
                                                              "vocab")}, shape=full.workload.shape) == full.workload
        assert "hidden" not in full.workload.key and full.steps == small.steps
    assert bare.work[0].workload.key == "text_encoder/deberta-v3-base/train/b32/128/fp32"  # 2 classes: the default
    assert bare.work[0].workload.replace(options={"num_labels": 3}, precision="bf16") in FULL_PROFILE_WORKLOADS


def test_fine_tuning_is_priced_at_the_width_its_batches_pad_to(tmp_path, no_data):
    """_collate pads a batch to its longest sequence and _predict sorts the scored ones by length, so with the data
    and the model folder at hand a step is priced at the mean padded width: the expectation over the shuffle for
    training batches, exact for the sorted scoring batches; without the folder, at max_length."""
    from lnlfn import finetune
    from shared.text.models import load_tokenizer
    from shared.text.tiny_models import write_tiny_model
    from shared.text.widths import mean_batch_width

    rng = np.random.default_rng(1)
    words = ["good", "bad", "fine"]
    texts = [" ".join(["the", "film", *rng.choice(words, int(rng.integers(1, 40)))]) for _ in range(80)]
    ds = TextDataset("ragged", texts, rng.integers(0, 2, 80), ("neg", "pos"), None,
                     np.array(["train"] * 50 + ["val"] * 10 + ["test"] * 20), np.array([f"r:{i}" for i in range(80)]),
                     "test")
    folder = write_tiny_model(tmp_path / "models" / "bert-base-cased", "bert", texts)
    config = FinetuneConfig(lr=1e-3, epochs=1, batch_size=8, max_length=32)
    run = cost.finetune_run(cost.data_of(ds), cost.Labels("x"), "bert-base-cased", config, "", str(tmp_path))
    tokenizer = load_tokenizer(folder)
    lengths = np.array([len(tokenizer(t, truncation=True, max_length=32)["input_ids"]) for t in texts])
    train, scored = lengths[:50], np.sort(lengths[50:])
    assert run.work[0].workload.shape == (math.ceil(mean_batch_width(train, 8, shuffled=True)),)
    assert run.work[1].workload.shape == (math.ceil(mean_batch_width(scored, finetune.EVAL_BATCH, shuffled=False)),)
    assert run.work[0].workload.shape[0] < 32 and run.work[1].workload.shape == (32,)  # one batch of 30: its longest
    bare = cost.finetune_run(cost.data_of(ds), cost.Labels("x"), "bert-base-cased", config, "", no_data)
    assert {w.workload.shape for w in bare.work} == {(32,)}


def test_sequences_that_cannot_be_measured_are_priced_at_max_length_and_said(tmp_path, capsys):
    from shared.text.tiny_models import write_tiny_model

    folder = write_tiny_model(tmp_path / "models" / "bert-base-cased", "bert", ["the film was good ."])
    (folder / "tokenizer.json").write_text("{")  # a damaged download: the run itself will fail on it
    config = FinetuneConfig(lr=1e-3, epochs=1, batch_size=8, max_length=48)
    run = cost.finetune_run(cost.data_of(toy_dataset()), cost.Labels("x"), "bert-base-cased", config, "",
                            str(tmp_path))
    assert {w.workload.shape for w in run.work} == {(48,)}
    assert "priced at max_length=48 (the worst case)" in capsys.readouterr().err


def test_the_default_precision_follows_the_planned_device(no_data):
    """bf16 "auto" (the default) is planned as the notebook would run it: bf16 with ``device: cuda``, fp32 on the
    CPU, and the CPU plan's identities are those of an explicit ``bf16=False`` (the keys before "auto")."""
    cfg = settings("03_detection_main")
    plans = {device: cost.plan("03_detection_main", cfg, {"device": device, "data_dir": str(no_data)})
             for device in ("cpu", "cuda")}
    tuned = {device: [r for r in runs if r.kind == "lnlfn-finetune"] for device, runs in plans.items()}
    assert tuned["cpu"] and len(tuned["cpu"]) == len(tuned["cuda"])
    assert {w.workload.precision for r in tuned["cpu"] for w in r.work} == {"fp32"}
    assert {w.workload.precision for r in tuned["cuda"] for w in r.work} == {"bf16"}
    assert not {r.identity for r in tuned["cpu"]} & {r.identity for r in tuned["cuda"]}
    tweets = cost.load_data("tweetnlp", no_data)
    explicit = cost.finetune_run(tweets, cost.Labels("x"), "roberta-base", FinetuneConfig(1e-5, 2, 8, bf16=False), "",
                                 no_data)
    auto = cost.finetune_run(tweets, cost.Labels("x"), "roberta-base", FinetuneConfig(1e-5, 2, 8), "", no_data)
    assert auto.identity == explicit.identity  # outside plan(): the CPU
    with pytest.raises(ConfigError, match="unknown device"):
        cost.plan("03_detection_main", cfg, {"device": "tpu", "data_dir": str(no_data)})


def test_amazon_is_sized_as_its_loader_and_with_validation_split_it(no_data):
    options = settings("05_end_to_end").dataset_options
    data = cost.benchmark_data("amazon5", no_data, options, carve=True)
    assert data.counts == {"train": 202_500, "val": 22_500, "test": 25_000}  # 250k lines: 90/10, val 10 % of train
    assert registry_split_counts("amazon", limit=250_000, sizes=[0.9, 0.0, 0.1]) == {"train": 225_000, "test": 25_000}
    names = random_split(1003, (0.7, 0.1, 0.2), seed=3)
    assert {s: int((names == s).sum()) for s in ("train", "val", "test")} == split_sizes(1003, (0.7, 0.1, 0.2))


def test_head_and_embedding_steps(no_data):
    data = cost.Data("toy", "k", "t", {"train": 5000, "val": 1000, "test": 1520}, {}, 3, "sequence", "word", 2100)
    mlp = HeadConfig("mlp", hidden=256, lr=1e-3, epochs=20, batch_size=64)
    train, infer = cost.head_run(data, cost.Labels("y"), ("embed", "all-minilm-l6-v2"), mlp, "scored", 2520, "").work
    assert train.steps == 20 * math.ceil(5000 / 64) and infer.steps == 1  # 2,520 rows in one batch of 4,096
    # ... priced as 2,520 / 4,096 of a full batch (shared.cost.Work.rows); training steps are full batches
    assert infer.rows == 2520 and infer.full_steps == pytest.approx(2520 / 4096) and train.rows is None
    assert train.workload.family == "tabular_mlp" and train.workload.shape == (384,)
    half = cost.head_run(data, cost.Labels("y"), ("embed", "all-minilm-l6-v2"),
                         HeadConfig("mlp", epochs=2, batch_size=100, train_fraction=0.5), "scored", 2520, "")
    assert half.work[0].steps == 2 * 25
    logreg = cost.head_run(data, cost.Labels("y"), ("ngram", "word"), HeadConfig("logreg"), "scored", 2520, "")
    assert logreg.steps == 0 and logreg.work[0].workload is None and logreg.work[0].examples == 5000
    embedding = cost.embedding_run(data, "all-minilm-l6-v2")
    assert embedding.steps == 2 * (1024 // 64) + math.ceil(52 / 64)  # chunks of 1,024 texts, batches of 64
    assert embedding.work[0].rows == 2100  # the last chunk's 52 texts are one short batch
    assert embedding.work[0].workload.opts["task"] == "embed"


# ---------------------------------------------------------------------------------------------- identities
def toy_dataset(n: int = 60) -> TextDataset:
    rng = np.random.default_rng(0)
    words = ["good", "bad", "fine", "awful", "nice", "poor"]
    texts = [f"the film was {rng.choice(words)} and {rng.choice(words)} {i}" for i in range(n)]
    split = np.array(["train"] * (n // 2) + ["val"] * (n // 4) + ["test"] * (n - n // 2 - n // 4))
    return TextDataset("toy", texts, rng.integers(0, 2, n), ("neg", "pos"), None, split,
                       np.array([f"toy:{i}" for i in range(n)]), "test")


def logged(path, kind):
    return [e["key"] for e in read_log(path) if e["kind"] == kind]


def one_to_one(planned: list, keys: list) -> bool:
    """Whether the i-th planned identity and the i-th logged key correspond one to one throughout."""
    return len(planned) == len(keys) and len(set(zip(planned, keys))) == len(set(planned)) == len(set(keys))


def test_fine_tuning_identities_are_the_cache_keys_of_the_executing_code(tmp_path, cache_dir, monkeypatch):
    from lnlfn import experiments, finetune

    model = tmp_path / "data" / "models" / "microsoft" / "deberta-v3-base"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "deberta-v2"}))
    (model / "weights.bin").write_bytes(b"weights")
    ds, configs = toy_dataset(), random_finetune_configs(3)
    monkeypatch.setattr(finetune, "_fit_and_score", lambda path, train, y, ev, config, k, task, device: {
        "probs": np.full((finetune._n_items(ev), k), 1 / k), "train_loss": np.zeros(1),
        "samples_per_second": np.float64(1), "train_seconds": np.float64(1), "wall_seconds": np.float64(1),
        "device": np.str_("cpu")})
    monkeypatch.setenv(ENV, str(tmp_path / "runs.jsonl"))
    data_dir = str(tmp_path / "data")
    noisy = ds.labels.copy()
    noisy[:3] = 1 - noisy[:3]
    experiments.model_sweep(ds, noisy, model="microsoft/deberta-v3-base", configs=configs, data_dir=data_dir)
    data = cost.data_of(ds)
    planned = cost.model_sweep_runs(data, cost.noisy_labels(data, lambda d: noisy, ("any",)),
                                    "microsoft/deberta-v3-base", configs, "toy", data_dir)
    assert [r.identity for r in planned] == logged(tmp_path / "runs.jsonl", CACHE_KIND)
    assert all(r.kind == CACHE_KIND for r in planned)


def test_head_identities_are_equal_exactly_when_the_cache_keys_are(tmp_path, cache_dir, monkeypatch):
    """Labels differing only outside the train split share the baseline's runs; a train label changed does not."""
    from lnlfn import experiments

    ds = toy_dataset()
    base = ds.labels.copy()
    outside = base.copy()
    outside[-1] = 1 - outside[-1]    # a test label: not in the key
    inside = base.copy()
    inside[0] = 1 - inside[0]        # a train label: in the key
    monkeypatch.setenv(ENV, str(tmp_path / "runs.jsonl"))
    heads = (HeadConfig("logreg", C=1.0), HeadConfig("logreg", C=10.0))
    data, planned = cost.data_of(ds), []
    for labels in (base, outside, inside):
        experiments.baseline_sweep(ds, labels, configs=heads)
        planned += cost.baseline_runs(data, cost.noisy_labels(data, lambda d, y=labels: y, None), heads, "toy")
    keys = logged(tmp_path / "runs.jsonl", cost.HOLDOUT)
    assert len(keys) == len(planned) == 6
    assert len(set(keys)) == 4 and one_to_one([r.identity for r in planned], keys)


def test_level_zero_is_one_setting_and_04_reuses_it_in_smoke():
    """Every method at level 0 trains on the clean labels: one run per config, which 04's analogue heads share."""
    cfg = settings("01_noise_realism", "smoke", levels=[0.0], seeds=[0, 1])
    runs = cost.plan("01_noise_realism", cfg, {"profile": "smoke", "data_dir": None})
    heads = distinct(runs, cost.HOLDOUT)
    assert len(heads) == len(cfg.configs)
    analogue = cost.plan("04_mturk_reanalysis", settings("04_mturk_reanalysis", "smoke"), {"profile": "smoke"})
    assert heads < distinct(analogue, cost.HOLDOUT)  # logreg C=1 on clean labels: the same entry
    assert distinct(runs, "text-embeddings") == distinct(analogue, "text-embeddings")
    assert len(distinct(analogue)) == 1 + 5 + 1  # embeddings, the 5 smoke heads, CL's n-gram model


def test_bad_settings_raise_config_errors(no_data):
    with pytest.raises(ConfigError, match="LNLFN notebook"):
        cost.plan("06_nothing", settings("03_detection_main"), {"data_dir": no_data})
    with pytest.raises(ConfigError, match="TEXT_MODELS"):
        cost.text_arch("someone/my-model")
    assert cost.text_arch("microsoft/deberta-v3-large") == "deberta-v3-large"
    assert cost.text_arch("sentence-transformers/all-MiniLM-L6-v2") == cost.text_arch("all-minilm-l6-v2")
    with pytest.raises(ConfigError, match="cannot size"):
        registry_split_counts("imdb", splits=("test",))


def test_the_holdout_kind_is_the_one_scoring_logs():
    import inspect

    from lnlfn import scoring

    assert f'get_or_build("{cost.HOLDOUT}"' in inspect.getsource(scoring.holdout_probs)
    assert os.path.basename(cost.__file__) == "cost.py"
