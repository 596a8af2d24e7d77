"""NoisywikiHow's runs: the paper's settings reach the methods, runs are cached and shared, a language model trains
through the same loop, and the rehearsal data load through the real loader."""
import numpy as np
import pytest

from noisywikihow.benchmark import Benchmark, NoisyTrain, Split
from noisywikihow.experiments import RunSpec, Training, feature_data, run_grid, scores, train_run
from noisywikihow.features import TextFeatures
from shared.cache import ArtifactCache
from shared.errors import ConfigError


def toy_benchmark(n_per_class=40, K=4, seed=0) -> tuple[Benchmark, TextFeatures]:
    """K Gaussian blobs as 'texts' t<i> with 8-d features; a real-noise set with 40 % texts swapped for noise texts."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(K), n_per_class)
    centers = rng.normal(0, 3, (K, 8))
    splits = {}
    start = 0
    for name in ("train", "val", "test"):
        texts = np.array([f"{name}{i} ." for i in range(len(labels))], object)
        splits[name] = (Split(texts, labels.copy(), np.arange(start, start + len(labels))),
                        centers[labels] + rng.normal(0, 1, (len(labels), 8)))
        start += len(labels)
    noisy = rng.random(len(labels)) < 0.4
    noise_texts = np.array([f"noise{i} ." for i in range(len(labels))], object)
    texts = np.where(noisy, noise_texts, splits["train"][0].texts)
    mix = NoisyTrain("mix_0.4", "real", texts, labels.copy(), noisy, np.where(noisy, "outside", "inside").astype(object))
    classes = np.array([f"c{k}" for k in range(K)], object)
    bench = Benchmark("toy", classes, np.array(["SC", "SC", "BCC", "TC"], object), np.array([""] * K, object),
                      *(s for s, _ in splits.values()), noise={"mix_0.4": mix})
    all_texts = np.concatenate([s.texts for s, _ in splits.values()] + [noise_texts])
    vectors = np.concatenate([v for _, v in splits.values()] + [rng.normal(0, 3, (len(labels), 8))]).astype(np.float32)
    order = np.argsort(all_texts)
    return bench, TextFeatures("toy", all_texts[order], vectors[order])


TRAINING = Training(epochs=4, batch_size=32, lr=1e-2, hidden=(16,), sr_epochs=3, seal_rounds=2, seal_epochs=2, loss_epoch=2)


def test_runs_are_cached_and_scored(tmp_path, monkeypatch):
    bench, table = toy_benchmark()
    data = feature_data(bench, table)
    cache = ArtifactCache(tmp_path)
    specs = [RunSpec("clean"), RunSpec("mix_0.4"), RunSpec("mix_0.4", "coteaching"), RunSpec("mix_0.4")]
    runs = run_grid(data, specs, TRAINING, cache=cache)
    assert len(runs) == 3  # the duplicate once
    clean = runs[0]
    assert list(clean.history["epoch"]) == [0, 1, 2, 3] and clean.score("peak")["top1"] > 90
    assert {"val_acc", "test_top5", "test_SC_acc", "test_BCC_acc", "test_TC_acc"} <= set(clean.history)
    assert clean.losses.shape == (len(bench.train),) and np.isfinite(clean.losses).all()
    calls = []
    monkeypatch.setattr("noisywikihow.experiments.make_method", lambda *a, **k: calls.append(a))
    again = run_grid(data, specs, TRAINING, cache=cache)  # read back, nothing trained
    assert not calls and all(a.history.equals(b.history) for a, b in zip(runs, again))
    table = scores(runs, ("peak", "val"))
    assert set(table["selection"]) == {"peak", "val"} and len(table) == 6


def test_every_paper_method_trains(tmp_path):
    bench, table = toy_benchmark()
    data = feature_data(bench, table)
    methods = ["base", "mixup", "data_parameter", "sr", "coteaching", "cnlcu", "seal", "bbn", "ldam", "ncm", "crt", "lws"]
    runs = run_grid(data, [RunSpec("mix_0.4", m) for m in methods], TRAINING, cache=ArtifactCache(tmp_path))
    epochs = {r.spec.method: len(r.history) for r in runs}
    assert epochs["sr"] == 3 and epochs["seal"] == 4 and epochs["ncm"] == 1 and epochs["crt"] == 5
    assert all(r.score("peak")["top1"] > 50 for r in runs), {r.spec.method: r.score("peak") for r in runs}


def test_unknown_training_set_and_model_are_clear_errors():
    bench, table = toy_benchmark()
    data = feature_data(bench, table)
    with pytest.raises(ConfigError, match="sym_0.4"):
        train_run(data, RunSpec("sym_0.4"), TRAINING)
    with pytest.raises(ConfigError, match="model"):
        train_run(data, RunSpec("clean", model="cnn"), TRAINING)
    with pytest.raises(ConfigError, match="model .plm. cannot read .toy. features"):
        train_run(data, RunSpec("clean", model="plm"), TRAINING)


def test_a_language_model_fine_tunes_through_the_same_runs(tmp_path):
    from noisywikihow.plm import PLMS
    from noisywikihow.sources import encoded
    from shared.text.tiny_models import write_tiny_model

    bench, _ = toy_benchmark(n_per_class=8)
    write_tiny_model(tmp_path / "models" / PLMS["BART"].hf_id, "bart", ["train val test noise c0 c1 ."])
    data = encoded(bench, "BART", data_dir=tmp_path)
    assert data.train["mix_0.4"][0].dtype == np.int64 and data.model_path.endswith("bart-base")
    run = run_grid(data, [RunSpec("mix_0.4", "mixup", 0, "BART", "plm")], Training(epochs=1, batch_size=8, lr=1e-3),
                   cache=ArtifactCache(tmp_path / "cache"))[0]
    assert len(run.history) == 1 and 0 <= run.score("peak")["top1"] <= 100


def test_t5_writes_the_category_names_when_t5_generative_is_set(tmp_path):
    from dataclasses import replace

    from noisywikihow.sources import encoded
    from shared.text.tiny_models import write_tiny_model

    bench, _ = toy_benchmark(n_per_class=8)
    write_tiny_model(tmp_path / "models" / "t5-base", "t5", ["train val test noise c0 c1 c2 c3 ."])
    data = encoded(bench, "T5", data_dir=tmp_path)
    assert data.class_names == ("c0", "c1", "c2", "c3")
    generative = Training(epochs=2, batch_size=8, lr=1e-3, loss_epoch=2, t5_generative=True)
    head = replace(generative, t5_generative=False)
    spec = RunSpec("mix_0.4", "base", 0, "T5", "plm")
    assert spec.generative(generative) and not spec.generative(head)
    bart = RunSpec("mix_0.4", "base", 0, "BART", "plm")  # the setting is no part of the other models' runs
    assert not bart.generative(generative) and generative.key(bart) == head.key(bart) != generative.key(spec)
    cache = ArtifactCache(tmp_path / "cache")
    written, classified = (run_grid(data, [spec], t, cache=cache)[0] for t in (generative, head))
    assert {"test_acc", "test_top5", "val_acc", "test_TC_acc"} <= set(written.history)
    assert np.isfinite(written.losses).all() and not written.history.equals(classified.history)
    assert len(list((tmp_path / "cache").glob("noisywikihow-runs/*/meta.json"))) == 2
    with pytest.raises(ConfigError, match="base method only.*t5_generative: false"):
        train_run(data, RunSpec("mix_0.4", "coteaching", 0, "T5", "plm"), generative)


def test_rehearsal_data_load_through_the_release_loader(tmp_path):
    from noisywikihow.data import load_noisywikihow
    from noisywikihow.rehearsal import write_dataset

    write_dataset(tmp_path)
    bench = load_noisywikihow(tmp_path, official=False)
    assert len(bench.noise) == 11 and sorted(set(bench.source)) == ["BCC", "SC", "TC"]
    assert bench.noise["tail_0.1"].is_noisy.sum() == round(0.1 * len(bench.train))
    with pytest.raises(Exception, match="73,343"):
        load_noisywikihow(tmp_path, official=True)


def test_runs_train_as_jobs_on_an_executor_and_match_in_process_runs(tmp_path):
    bench, table = toy_benchmark()
    data = feature_data(bench, table)
    specs = [RunSpec("mix_0.4", m) for m in ("base", "coteaching")]
    here = run_grid(data, specs, TRAINING, cache=ArtifactCache(tmp_path / "here"))
    jobs = run_grid(data, specs, TRAINING, cache=ArtifactCache(tmp_path / "jobs"), executor={"kind": "local", "jobs": 2})
    assert all(a.history.equals(b.history) for a, b in zip(here, jobs))  # same seed and settings, same numbers
    assert len(list((tmp_path / "jobs").glob("noisywikihow-runs/*/meta.json"))) == 2  # stored by the workers
