import numpy as np
import pandas as pd
import pytest

from ciln.corruptions import CORRUPTIONS, corrupt, item_rngs, list_corruptions
from shared.datasets import load_dataset
from shared.errors import ConfigError
from shared.seeding import item_seed


@pytest.fixture(scope="module")
def images():
    return {"cifar10": load_dataset("mnist32rgb").train.X[:24], "mnist": load_dataset("mnist5k").train.X[:24]}


IMAGE_CASES = [(d, c) for d in ("cifar10", "mnist") for c in CORRUPTIONS[d]]
# Constants that make the distortion non-monotone in severity (spec §3.3 and §9.9): elastic's affine jitter
# shrinks with severity while its displacement grows; MNIST's scale is 0.7/0.8/0.9/1.1/1.2 in random
# directions; the structural corruptions ignore severity.
NOT_MONOTONE = {("cifar10", "elastic_transform"), ("mnist", "scale")} | {("mnist", c) for c in ("canny_edges", "dotted_line", "stripe", "zigzag")}


@pytest.mark.parametrize("domain,name", IMAGE_CASES, ids=lambda v: str(v))
def test_image_corruption_contract(images, domain, name):
    x = images[domain]
    outs = {s: corrupt(domain, x, name, s, split="noisy_label_train") for s in (1, 3, 5)}
    for out in outs.values():
        assert out.shape == x.shape and out.dtype == np.uint8
    again = corrupt(domain, x, name, 3, split="noisy_label_train")
    assert np.array_equal(outs[3], again), "same seed, same result"
    if not CORRUPTIONS[domain][name].deterministic:
        other = corrupt(domain, x, name, 3, split="noisy_label_train", master_seed=1)
        assert not np.array_equal(outs[3], other), "another master seed gives other randomness"
    distance = {s: np.abs(o.astype(float) - x).mean() for s, o in outs.items()}
    assert distance[5] > 0.5, "severity 5 changes the images"
    if (domain, name) not in NOT_MONOTONE:
        assert distance[5] > distance[1], f"distortion grows with severity: {distance}"


def test_a_subset_is_corrupted_like_the_full_batch(images):
    x = images["cifar10"]
    full = corrupt("cifar10", x, "glass_blur", 3, split="test")
    part = corrupt("cifar10", x[5:9], "glass_blur", 3, split="test", indices=np.arange(5, 9))
    assert np.array_equal(full[5:9], part)


def test_test_split_seeds_leave_out_the_split_name():
    (rng,) = item_rngs("cifar10", "fog", 3, "test", [7])
    assert rng.random() == np.random.default_rng(item_seed(0, "cifar10", "fog", 3, 7)).random()
    (rng,) = item_rngs("cifar10", "fog", 3, "noisy_label_train", [7])
    assert rng.random() == np.random.default_rng(item_seed(0, "cifar10", "fog", 3, "noisy_label_train", 7)).random()


def test_noise_corruptions_grow_strictly_with_severity(images):
    x = images["cifar10"].astype(float)
    for name in ("gaussian_noise", "shot_noise", "impulse_noise", "contrast", "fog"):
        d = [np.abs(corrupt("cifar10", images["cifar10"], name, s, split="t").astype(float) - x).mean() for s in (1, 3, 5)]
        assert d[0] < d[1] < d[2], name


def test_bad_inputs_are_clear(images):
    with pytest.raises(ConfigError, match="unknown cifar10 corruption 'blurr'.*brightness"):
        corrupt("cifar10", images["cifar10"], "blurr", 1, split="test")
    with pytest.raises(ConfigError, match="severity 6 is not defined.*1, 2, 3, 4, 5"):
        corrupt("cifar10", images["cifar10"], "fog", 6, split="test")
    with pytest.raises(ConfigError, match=r"uint8 images of shape \(n, 28, 28\)"):
        corrupt("mnist", images["cifar10"], "fog", 1, split="test")
    with pytest.raises(ConfigError, match="unknown dataset for CILN corruptions 'svhn'"):
        corrupt("svhn", images["cifar10"], "fog", 1, split="test")


def test_corruption_tables():
    table = list_corruptions("cifar10")
    assert len(table) == 15 and set(table["family"]) == {"Noise", "Blur", "Weather", "Geometric", "Digital"}
    assert table.set_index("corruption").loc["gaussian_noise", "severity constants"] == [0.04, 0.06, 0.08, 0.09, 0.10]
    assert len(list_corruptions("mnist")) == 15 and len(list_corruptions("adult_like")) == 5


# ---------------------------------------------------------------------------------------------- tabular
@pytest.fixture(scope="module")
def table():
    ds = load_dataset("adult_like", n=20_000)
    return ds.train.X, ds.test.X


def rows_all_nan(frame, except_cols=()):
    cols = [c for c in frame.columns if c not in except_cols]
    return frame[cols].isna().all(axis=1)


@pytest.mark.parametrize("severity,rate", [(1, 0.05), (3, 0.25), (5, 0.50)])
def test_mcar_removes_whole_rows_at_the_severity_rate(table, severity, rate):
    X, _ = table
    out = corrupt("adult", X, "missing_mcar", severity, split="noisy_label_train")
    gone = rows_all_nan(out)
    assert gone.mean() == pytest.approx(rate, abs=4 * np.sqrt(rate * (1 - rate) / len(X)))
    assert out.isna().any(axis=1).equals(gone)  # nothing else is touched


def test_mar_depends_on_sex_and_keeps_it(table):
    _, X = table
    out = corrupt("adult", X, "missing_mar", 3, split="noisy_label_train")
    gone = rows_all_nan(out, except_cols=["sex"])
    female = X["sex"] == "Female"
    assert gone[female].mean() == pytest.approx(1.5 * 0.25, abs=0.03)
    assert gone[~female].mean() == pytest.approx(0.75 * 0.25, abs=0.03)
    assert out["sex"].notna().all()


def test_mnar_removes_large_values_more_often(table):
    reference, X = table
    out = corrupt("adult", X, "missing_mnar", 5, split="noisy_label_train", reference=reference)
    age_missing = out["age"].isna()
    old = X["age"] > X["age"].median()
    assert age_missing[old].mean() > age_missing[~old].mean() + 0.1
    # a frequent category is removed less often than rare ones: p = r (1.5 - freq)
    us = X["native-country"] == "United-States"
    assert out["native-country"].isna()[us].mean() < out["native-country"].isna()[~us].mean()
    with pytest.raises(ConfigError, match="missing_mnar needs reference"):
        corrupt("adult", X, "missing_mnar", 5, split="noisy_label_train")


def test_value_corruptions(table):
    _, X = table
    scaled = corrupt("adult", X, "scaling", 5, split="noisy_label_train")
    ratio = scaled["age"] / X["age"]
    assert set(np.round(ratio.unique(), 6)) == {1.0, 1000.0}
    assert (ratio == 1000).mean() == pytest.approx(0.5, abs=0.02)
    noisy = corrupt("adult", X, "gaussian_noise", 5, split="noisy_label_train")
    delta = (noisy["hours-per-week"] - X["hours-per-week"])[lambda d: d != 0]
    assert delta.std() == pytest.approx(5.0, rel=0.1) and len(delta) / len(X) == pytest.approx(0.5, abs=0.02)
    assert (noisy["sex"] == X["sex"]).all()  # categorical cells are untouched
    with pytest.raises(ConfigError, match="severity 2 is not defined.*1, 3, 5"):
        corrupt("adult", X, "scaling", 2, split="t")
    with pytest.raises(ConfigError, match="need a pandas DataFrame"):
        corrupt("adult", np.zeros((3, 13)), "scaling", 1, split="t")
