"""NoisywikiHow's cost plan (``noisywikihow.cost``): it enumerates the pages' own grids, its identities are the cache
keys ``run_grid`` writes and logs, runs shared between notebooks are one identity, and steps follow the methods."""
import math

import numpy as np
import pytest

from noisywikihow import cost
from noisywikihow.experiments import (
    CACHE_DATA,
    CACHE_KIND,
    FeatureData,
    RunSpec,
    Training,
    run_grid,
    run_key,
)
from noisywikihow.grids import notebook_grids
from shared import runlog
from shared.cache import ArtifactCache
from shared.errors import ConfigError
from shared.profiles import notebook_settings

NOTEBOOKS = ("00_dataset_and_noise", "01_plm_architectures", "02_noise_sources", "03_lnl_realworld",
             "04_real_vs_synthetic", "05_long_tailed")
SMOKE = {"profile": "smoke", "data_dir": None, "device": "cpu"}
FULL = {"profile": "full", "data_dir": "/nonexistent/noisywikihow", "device": "cuda"}


def planned(notebook, params=SMOKE, **settings):
    cfg = notebook_settings("noisywikihow", notebook, params["profile"], settings)
    runs = cost.plan(notebook, cfg, {**params, "settings": settings})
    return {(r.kind, r.identity): r for r in runs}


def of_kind(runs, kind):
    return {ident: r for (k, ident), r in runs.items() if k == kind}


def n_train():
    return cost.benchmark_sizes(notebook_settings("noisywikihow", "03_lnl_realworld", "smoke")).n_train


def test_identity_is_the_key_run_grid_writes_and_logs(tmp_path, monkeypatch):
    """The plan's identity of a run on features with fingerprint f is run_grid's cache key for those features; the
    run is logged built, then loaded (found by lookup) under that key."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 10)
    X = rng.normal(size=(30, 4)).astype(np.float32) + y[:, None]
    data = FeatureData("toy", "toy", {"clean": (X, y)}, (X, y), (X, y), np.array(["SC"] * 30, object),
                       ("a", "b", "c"), "f00d")
    training = Training(epochs=1, batch_size=16, hidden=(8,))
    spec = RunSpec("clean", "base", 0, "toy", "mlp")
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    cache = ArtifactCache(tmp_path / "cache")
    run_grid(data, [spec], training, cache=cache)
    run_grid(data, [spec], training, cache=cache)
    features = cost.Features("toy", "mlp", data.fingerprint, 4, None)
    bench = cost.benchmark_sizes(notebook_settings("noisywikihow", "03_lnl_realworld", "smoke"))
    identity = cost.run_plan(features, spec, training, bench, gpu=False).identity
    assert identity == run_key(data.fingerprint, spec, training)
    assert cache.entry_dir(CACHE_KIND, identity).is_dir()
    entries = [(e["key"], e["built"]) for e in runlog.read_log(log)]
    assert entries == [(identity, True), (identity, False)]


def test_every_notebook_is_planned_in_the_full_profile_without_data():
    counts = {nb: len(of_kind(planned(nb, FULL), CACHE_KIND)) for nb in NOTEBOOKS}
    # 01: 7 PLMs x 5 levels; 02: 7 methods x 4 training sets; 03: 7 x 5; 04: 7 x 4 + Fig. 3's real run + Fig. 4's
    # 5 + 4 curves at 20 epochs; 05: (base + 5) x 5
    assert counts == {"00_dataset_and_noise": 0, "01_plm_architectures": 35, "02_noise_sources": 28,
                      "03_lnl_realworld": 35, "04_real_vs_synthetic": 28 + 1 + 9, "05_long_tailed": 30}
    assert all(not of_kind(planned(nb, FULL), "text-embeddings") for nb in NOTEBOOKS)


def test_doubling_seeds_doubles_the_runs_not_the_embeddings():
    one, two = planned("03_lnl_realworld", seeds=[0]), planned("03_lnl_realworld", seeds=[0, 1])
    assert len(of_kind(two, CACHE_KIND)) == 2 * len(of_kind(one, CACHE_KIND)) == 2 * 35
    assert of_kind(two, "text-embeddings").keys() == of_kind(one, "text-embeddings").keys()


def test_runs_shared_between_notebooks_have_one_identity():
    base = {r.label.split(" (")[0]: i for i, r in of_kind(planned("03_lnl_realworld"), CACHE_KIND).items()
            if r.label.startswith("base ")}
    assert len(base) == 5
    assert set(base.values()) <= of_kind(planned("05_long_tailed"), CACHE_KIND).keys()
    assert set(base.values()) <= of_kind(planned("01_plm_architectures"), CACHE_KIND).keys()
    assert base["base mix_0.1 seed 0"] in of_kind(planned("02_noise_sources"), CACHE_KIND)
    # 04: Fig. 4's curves at the training's epochs are the table's own runs and Fig. 3's; at other epochs they are not
    assert len(of_kind(planned("04_real_vs_synthetic"), CACHE_KIND)) == 28 + 5
    assert len(of_kind(planned("04_real_vs_synthetic", curve_epochs=14), CACHE_KIND)) == 28 + 1 + 9
    # the same MiniLM embeddings in every notebook of the batch
    assert of_kind(planned("00_dataset_and_noise"), "text-embeddings").keys() < \
        of_kind(planned("02_noise_sources"), "text-embeddings").keys()


def test_steps_follow_the_methods():
    runs = {r.label.split(" (")[0]: r for r in of_kind(planned("03_lnl_realworld"), CACHE_KIND).values()}
    batches = math.ceil(n_train() / 256)  # smoke: batch 256, 15 epochs, SR 20, SEAL 4 rounds x 5
    assert runs["base mix_0.4 seed 0"].work[0].steps == 15 * batches
    assert runs["sr mix_0.4 seed 0"].work[0].steps == 20 * batches
    assert runs["coteaching mix_0.4 seed 0"].work[0].steps == 2 * 15 * batches  # two networks
    seal = runs["seal mix_0.4 seed 0"]
    assert seal.work[0].steps == 4 * 5 * batches
    assert seal.work[-1].steps == 20 * math.ceil(n_train() / cost.EVAL_BATCH)  # the softmax after every epoch
    assert seal.work[-1].rows == 20 * n_train()  # priced by the rows it holds (shared.cost.Work.rows)
    base = runs["base mix_0.4 seed 0"]
    evaluation = base.work[1]  # val, test and each source's test events after every epoch, each in its batches
    assert base.work[0].rows is None and evaluation.rows == evaluation.examples
    assert evaluation.full_steps == pytest.approx(evaluation.rows / cost.EVAL_BATCH)
    assert evaluation.full_steps < evaluation.steps  # the splits' last batches are partial
    assert runs["base mix_0.4 seed 0"].work[0].workload.key == \
        "tabular_mlp/mlp/train/b256/384/fp32/hidden=256:256,num_classes=24,optimizer=adamw"


def test_full_profile_workloads_are_the_seven_plms():
    runs = of_kind(planned("01_plm_architectures", FULL), CACHE_KIND).values()
    trains = {r.work[0].workload.key for r in runs}
    assert len(trains) == 7 and all(k.startswith("text_encoder/") and "/b64/128/bf16" in k for k in trains)
    assert "text_encoder/t5-base/train/b64/128/bf16/task=seq2seq" in trains
    t5 = next(r for r in runs if r.label.startswith("base clean") and "T5" in r.label)
    assert t5.work[1].workload.batch == 100  # 5-beam evaluation in batches of GENERATIVE_BATCH
    bart = next(r for r in runs if r.label.startswith("base clean") and "BART" in r.label)
    assert bart.work[0].steps == 10 * math.ceil(73_343 / 64)
    cpu = of_kind(planned("01_plm_architectures", {**FULL, "device": "cpu"}), CACHE_KIND).values()
    assert all(r.work[0].workload.precision == "fp32" for r in cpu)


def test_tiny_model_folders_give_the_workloads_their_sizes(tmp_path):
    """The rehearsal's stand-ins under <data_dir>/models/<id> (the folders load_classifier and load_generator read)
    are priced as the models they are; a PLM without a folder keeps the full profile's key."""
    from shared.text.tiny_models import write_tiny_model

    corpus = ["how to bake bread .", "how to train a dog ."]
    write_tiny_model(tmp_path / "models" / "facebook" / "bart-base", "bart", corpus)
    write_tiny_model(tmp_path / "models" / "t5-base", "t5", corpus)
    runs = of_kind(planned("01_plm_architectures", {**FULL, "data_dir": str(tmp_path)}), CACHE_KIND).values()
    bare = of_kind(planned("01_plm_architectures", FULL), CACHE_KIND).values()

    def first(runs, model):
        return next(r for r in runs if r.label.startswith("base clean") and f"{model} plm" in r.label)

    bart, t5 = first(runs, "BART"), first(runs, "T5")
    for w in (*bart.work, *t5.work):
        o = w.workload.opts
        assert (o["layers"], o["decoder_layers"], o["hidden"], o["heads"], o["intermediate"]) == (1, 1, 32, 2, 64)
    assert t5.work[0].workload.opts["head_dim"] == 16 and t5.work[0].workload.opts["task"] == "seq2seq"
    assert bart.work[0].workload.key.startswith("text_encoder/bart-base/train/b64/128/bf16/decoder_layers=1,")
    assert first(bare, "BART").work[0].workload.key == "text_encoder/bart-base/train/b64/128/bf16/num_labels=158"
    assert first(runs, "BERT").work[0].workload.key == first(bare, "BERT").work[0].workload.key \
        == "text_encoder/bert-base-uncased/train/b64/128/bf16/num_labels=158"
    assert bart.work[0].steps == first(bare, "BART").work[0].steps
    # cRT's classifier reads the stand-in's hidden states
    assert cost._plm_width("BART", cost.plm_sizes("BART", tmp_path).items()) == 32
    assert cost._plm_width("BART") == 768 and cost.plm_sizes("BERT", tmp_path) == {}


def test_executor_adds_the_features_jobs_read():
    runs = planned("01_plm_architectures", executor={"kind": "local", "jobs": 2})
    assert len(of_kind(runs, CACHE_DATA)) == 3  # one per features: MiniLM, TF-IDF (mlp and linear), MiniLM tokens


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="T5 writing its labels"):
        planned("03_lnl_realworld", FULL, encoder="T5")
    with pytest.raises(ConfigError, match="BiLSTM reads MiniLM"):
        planned("01_plm_architectures", architectures=[["tfidf", "bilstm"]])
    with pytest.raises(ConfigError, match="seeds"):
        planned("03_lnl_realworld", seeds=[])
    with pytest.raises(ConfigError):
        notebook_grids("07_nothing", notebook_settings("noisywikihow", "03_lnl_realworld", "smoke"), Training())


def test_plm_steps_are_priced_at_the_width_their_batches_pad_to(tmp_path):
    """TextClassifier pads a batch to its longest event, so where the benchmark's texts and the PLM's tokenizer are
    at hand a step is priced at the mean padded width (shuffled training batches of 64; evaluation batches of 512
    in order, wider); without the tokenizer, at plm.MAX_LENGTH, the worst case."""
    from noisywikihow.plm import MAX_LENGTH, load_tokenizer
    from noisywikihow.tinyhow import generate
    from shared.text.tiny_models import write_tiny_model
    from shared.text.widths import mean_batch_width, token_lengths

    bench, _ = generate(0)
    folder = write_tiny_model(tmp_path / "models" / "facebook" / "bart-base", "bart", list(bench.train.texts))
    runs = of_kind(planned("01_plm_architectures", {**FULL, "data_dir": str(tmp_path)}, dataset="tinyhow"),
                   CACHE_KIND).values()
    bart = next(r for r in runs if r.label.startswith("base clean") and "BART plm" in r.label)
    bert = next(r for r in runs if r.label.startswith("base clean") and "BERT plm" in r.label)
    lengths = token_lengths(load_tokenizer(folder), bench.train.texts, MAX_LENGTH)
    train = next(w.workload for w in bart.work if w.workload.phase == "train")
    infer = next(w.workload for w in bart.work if w.workload.phase == "infer")
    assert train.shape == (math.ceil(mean_batch_width(lengths, 64, shuffled=True)),)
    assert lengths.max() < MAX_LENGTH and train.shape[0] < infer.shape[0] <= lengths.max()
    assert {w.workload.shape for w in bert.work if w.workload is not None} == {(MAX_LENGTH,)}
