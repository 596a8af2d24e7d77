import hashlib

import numpy as np
import pytest

from ciln.benchmark import Benchmark
from ciln.downstream import ValidationRows, cifar_scenarios, label_draw_seed, method_hparams, run, symmetric_control
from shared.cache import ArtifactCache
from shared.errors import ConfigError
from shared.profiles import Settings


@pytest.fixture
def bench(rng):
    n, K = 200, 10
    y = rng.integers(0, K, n)
    clean = np.eye(K)[None, y].repeat(3, axis=0).astype(np.float32)
    noisy = clean.copy()
    noisy[1, :50] = np.eye(K)[(y[:50] + 1) % K]  # voter 1 errs on the first 50 rows after corruption
    return Benchmark("mnist32rgb", "cifar10", tuple("0123456789"), "nlt", ["a", "b", "c"], y, clean,
                     {("contrast", 5): noisy})


def test_label_draw_seed_is_the_official_one():
    assert label_draw_seed("frost", 1) == int(hashlib.sha256(b"v4__frost_sev1").hexdigest()[:8], 16) % 2**31


def test_scenarios(bench, rng):
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    raters = {"H": rng.integers(0, 10, (200, 10))}
    out = cifar_scenarios(bench, images, [("contrast", 5)], clean_start=[["contrast", 5]], raters=raters)
    assert [s.name for s in out] == ["CILN-S contrast (5) clean-img", "CILN-S contrast (5) noisy-img",
                                     "CILN-C contrast (5) clean-img", "CILN-C contrast (5) noisy-img", "PL-IDN-H"]
    s_clean, s_noisy = out[0], out[1]
    assert s_clean.table2_key == ("S", "contrast", 5) and out[2].table2_key == ("C", "contrast", 5)
    assert out[4].table2_key == ("PL-IDN", "plidn_H", "")
    assert np.array_equal(s_clean.labels, s_noisy.labels)  # one label draw for both image sources
    assert np.array_equal(s_clean.images, images) and not np.array_equal(s_noisy.images, images)
    assert 0 < s_clean.noise_rate < 0.25 + 1e-9  # at most the rows voter 1 got wrong, a third of the time
    assert len(out[2].labels) == 200  # every row is clean-start here (all voters right on clean inputs)
    control = symmetric_control(s_noisy, images, 10)
    assert control.noise_rate == pytest.approx(s_noisy.noise_rate, abs=0.01) and np.array_equal(control.images, images)
    small = cifar_scenarios(bench, images, [("contrast", 5)], raters=raters, max_rows=50)
    assert all(len(s.labels) == len(s.images) == len(s.rows) == 50 for s in small)
    assert np.array_equal(small[0].labels, out[0].labels[small[0].rows])  # labels do not depend on the subset
    sub_control = symmetric_control(small[1], images, 10)
    assert np.array_equal(sub_control.images, images[small[1].rows])
    with pytest.raises(ConfigError, match="20 images for a benchmark of 200 rows"):
        cifar_scenarios(bench, images[:20], [("contrast", 5)])


def test_noisy_images_are_corrupted_with_the_benchmarks_operator_options(bench, rng):
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    default = cifar_scenarios(bench, images, [("contrast", 5)], image_sources=["noisy"])[0]
    bench.corruption_options["contrast"] = {"params": [1.0] * 5}  # contrast factor 1: the image unchanged
    unchanged = cifar_scenarios(bench, images, [("contrast", 5)], image_sources=["noisy"])[0]
    assert np.abs(unchanged.images.astype(int) - images).max() <= 1 < np.abs(default.images.astype(int) - images).max()


def test_empty_clean_start_scenario_is_a_clear_error(bench, rng):
    bench.clean_probs[0] = np.eye(10)[(bench.y + 1) % 10]  # voter a errs on every clean input: no clean-start row
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    assert len(cifar_scenarios(bench, images, [("contrast", 5)])) == 2  # CILN-S keeps its rows
    with pytest.raises(ConfigError, match=r"CILN-C contrast \(5\) clean-img.*have no rows.*clean_start_settings"):
        cifar_scenarios(bench, images, [("contrast", 5)], clean_start=[["contrast", 5]])


def test_coteaching_is_told_the_true_noise_rate(bench, rng):
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    scenario = cifar_scenarios(bench, images, [("contrast", 5)], image_sources=["clean"])[0]
    cfg = Settings(train={"lr": 0.05}, methods={"coteaching": {"ramp_epochs": 3}, "dividemix": {"warmup": 2, "lr": 0.02}})
    assert method_hparams("coteaching", cfg, scenario) == {"lr": 0.05, "ramp_epochs": 3, "forget_rate": scenario.noise_rate}
    assert method_hparams("dividemix", cfg, scenario, "ciln_compact") == {"lr": 0.02, "warmup": 2, "variant": "ciln_compact"}


def test_run_is_cached_and_logs_losses(bench, rng, tmp_path):
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    scenario = cifar_scenarios(bench, images, [("contrast", 5)], image_sources=["clean"])[0]
    cfg = Settings(train={"arch": "tiny_cnn", "width": 4, "epochs": 2, "batch_size": 64, "lr": 0.05, "weight_decay": 5e-4,
                          "crop_pad": 0, "log_losses_at": [1]}, methods={"erm": {}})
    test = (images[:50], bench.y[:50])
    cache = ArtifactCache(tmp_path)
    first = run(scenario, "erm", cfg, seed=0, test=test, device="cpu", cache=cache)
    assert set(first["history"]) >= {"epoch", "train_loss", "test_acc"} and first["losses"][1].shape == (200,)
    again = run(scenario, "erm", cfg, seed=0, test=test, device="cpu", cache=cache)
    assert again["best_test"] == first["best_test"] and len(list(tmp_path.glob("ciln-downstream/*/meta.json"))) == 1


def test_plidn_scenarios_train_on_the_rows_in_the_release(bench, rng):
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    votes = rng.integers(0, 10, (200, 10))
    absent = rng.permutation(200)[:30]
    partial = votes.copy()
    partial[absent] = -1  # rows the PL-IDN release does not hold
    full, matched = (cifar_scenarios(bench, images, [], raters={"M": v})[0] for v in (votes, partial))
    assert len(full.rows) == 200 and np.array_equal(matched.rows, np.setdiff1d(np.arange(200), absent))
    assert np.array_equal(matched.images, images[matched.rows]) and np.array_equal(matched.clean_labels, bench.y[matched.rows])
    assert np.array_equal(matched.labels, full.labels[matched.rows])  # the same rater draw per row
    small = cifar_scenarios(bench, images, [], raters={"M": partial}, max_rows=50)[0]
    assert np.isin(small.rows, matched.rows).all() and np.array_equal(small.images, images[small.rows])


def _nlv_bench(rng, n=60, K=10):
    y = rng.integers(0, K, n)
    clean = np.eye(K)[None, y].repeat(3, axis=0).astype(np.float32)
    noisy = clean.copy()
    noisy[0, :20] = np.eye(K)[(y[:20] + 3) % K]
    return Benchmark("mnist32rgb", "cifar10", tuple("0123456789"), "nlv", ["a", "b", "c"], y, clean,
                     {("contrast", 5): noisy})


def test_validation_rows_are_labelled_like_the_training_rows(bench, rng):
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    nlv = _nlv_bench(rng)
    val_images = rng.integers(0, 256, (60, 32, 32, 3), dtype=np.uint8)
    val_votes = rng.integers(0, 10, (60, 10))
    val_votes[:5] = -1  # not in the release
    val = ValidationRows(nlv, val_images, {"H": val_votes})
    out = cifar_scenarios(bench, images, [("contrast", 5)], raters={"H": rng.integers(0, 10, (200, 10))}, val=val)
    clean_img, noisy_img, plidn = out
    for s in out:
        v_images, v_labels, v_clean = s.val
        assert len(v_images) == len(v_labels) == len(v_clean)
    # the voter draw: a row's NLV label is one of its three voters' labels; voter 0 errs on the first 20 rows
    votes = nlv.votes(("contrast", 5))
    assert all(label in row for label, row in zip(clean_img.val[1], votes))
    assert np.array_equal(clean_img.val[1], noisy_img.val[1]) and np.array_equal(clean_img.val[0], val_images)
    assert not np.array_equal(noisy_img.val[0], val_images)  # corrupted NLV images for noisy-img
    assert 0 < np.mean(clean_img.val[1] != nlv.y) <= 20 / 60
    assert len(plidn.val[1]) == 55 and np.isin(plidn.val[1], np.arange(10)).all()
    with pytest.raises(ConfigError, match="nlv"):
        cifar_scenarios(bench, images, [("contrast", 5)], val=ValidationRows(bench, images))


def test_val_selected_accuracy_is_the_test_accuracy_at_the_best_validation_epoch(bench, rng, tmp_path):
    images = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    val = ValidationRows(_nlv_bench(rng), rng.integers(0, 256, (60, 32, 32, 3), dtype=np.uint8))
    scenario = cifar_scenarios(bench, images, [("contrast", 5)], image_sources=["clean"], val=val)[0]
    cfg = Settings(train={"arch": "tiny_cnn", "width": 4, "epochs": 3, "batch_size": 64, "lr": 0.05, "weight_decay": 5e-4,
                          "crop_pad": 0}, methods={"erm": {}})
    record = run(scenario, "erm", cfg, seed=0, test=(images[:50], bench.y[:50]), device="cpu", cache=ArtifactCache(tmp_path))
    history = record["history"]
    assert len(history["val_acc"]) == 3
    assert record["val_selected"] == history["test_acc"][int(np.argmax(history["val_acc"]))]
    assert min(history["test_acc"]) <= record["val_selected"] <= record["best_test"]
