import cv2
import numpy as np
import pytest
from skimage.filters import gaussian

from ciln.corruptions import CORRUPTIONS, cifar, corrupt, frost as frost_module, item_rngs, list_corruptions
from shared.datasets import load_dataset
from shared.errors import ConfigError
from shared.seeding import item_seed


@pytest.fixture(scope="module")
def images():
    return {"cifar10": load_dataset("mnist32rgb").train.X[:24], "mnist": load_dataset("mnist5k").train.X[:24]}


IMAGE_CASES = [(d, c) for d in ("cifar10", "mnist") for c in CORRUPTIONS[d]]
# Constants that make the distortion non-monotone in severity (imagecorruptions' definitions, as the official code calls them): elastic's affine jitter
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
        d = [np.abs(corrupt("cifar10", images["cifar10"], name, s, split="test").astype(float) - x).mean() for s in (1, 3, 5)]
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


@pytest.mark.parametrize("severity", [3.0, True, np.bool_(True), "3", 2.5])
def test_a_severity_that_is_not_an_integer_is_a_clear_error(images, severity):
    # 3.0 and True used to pass the membership test (3.0 == 3, True == 1); 3.0 then crashed on indexing
    with pytest.raises(ConfigError, match="severity must be an integer"):
        corrupt("cifar10", images["cifar10"][:2], "fog", severity, split="test")


def test_numpy_integer_severities_are_fine(images):
    x = images["cifar10"][:2]
    assert np.array_equal(corrupt("cifar10", x, "fog", np.int64(3), split="test"), corrupt("cifar10", x, "fog", 3, split="test"))


def test_an_unknown_split_is_a_clear_error(images):
    # the split enters every item's seed: a typo used to give silently different corruptions
    with pytest.raises(ConfigError, match="unknown split 'tset'; valid splits: noisy_label_train, noisy_label_valid, test"):
        corrupt("cifar10", images["cifar10"][:2], "fog", 3, split="tset")
    with pytest.raises(ConfigError, match="unknown split 'nlt'"):
        item_rngs("cifar10", "fog", 3, "nlt", [0])


def test_operator_options_are_checked(images):
    x = images["cifar10"][:2]
    with pytest.raises(ConfigError, match="takes no option 'compat'; valid options: params, swap"):
        corrupt("cifar10", x, "glass_blur", 1, split="test", options={"compat": False})
    with pytest.raises(ConfigError, match="unknown glass blur swap 'real'"):
        corrupt("cifar10", x, "glass_blur", 1, split="test", options={"swap": "real"})
    with pytest.raises(ConfigError, match="one constant per severity"):
        corrupt("cifar10", x, "fog", 1, split="test", options={"params": [(1, 2)]})
    with pytest.raises(ConfigError, match="valid options: none"):
        corrupt("mnist", images["mnist"][:2], "glass_blur", 1, split="test", options={"swap": "true"})
    # other constants are used when given: contrast with constant 1 leaves the image as it is
    unchanged = corrupt("cifar10", x, "contrast", 2, split="test", options={"params": [1] * 5})
    assert np.abs(unchanged.astype(int) - x).max() <= 1  # x / 255 * 255 may round down


# ------------------------------------------------------------------------------------------ glass blur
def official_glass_blur(x: np.ndarray, constants, rng: np.random.Generator, code: str) -> np.ndarray:
    """Glass blur written as the official loops are (the random draws from ``rng`` instead of the global
    state): ``code="cifar10c"``, hendrycks/robustness ``make_cifar_c.py``, whose tuple-assignment "swap" on an
    RGB array copies; ``code="ciln"``, sh-islam/ciln-bench ``cifar_funcs.py``, which copies both pixels first."""
    sigma, delta, iterations = constants
    x = np.uint8(gaussian(np.array(x) / 255.0, sigma=sigma, channel_axis=-1) * 255)
    for _ in range(iterations):
        for h in range(32 - delta, delta, -1):
            for w in range(32 - delta, delta, -1):
                dx, dy = rng.integers(-delta, delta, size=(2,))
                h_prime, w_prime = h + dy, w + dx
                if code == "cifar10c":
                    x[h, w], x[h_prime, w_prime] = x[h_prime, w_prime], x[h, w]
                else:
                    x[h, w], x[h_prime, w_prime] = x[h_prime, w_prime].copy(), x[h, w].copy()
    return np.clip(gaussian(x / 255.0, sigma=sigma, channel_axis=-1), 0, 1) * 255


def test_the_official_swap_of_a_colour_pixel_is_a_copy():
    colour = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    colour[0, 0], colour[1, 1] = colour[1, 1], colour[0, 0]  # views: the second write reads the first
    assert colour[0, 0].tolist() == colour[1, 1].tolist() == [9, 10, 11]
    grey = np.arange(4, dtype=np.uint8).reshape(2, 2)
    grey[0, 0], grey[1, 1] = grey[1, 1], grey[0, 0]  # scalars: a real swap (MNIST-C's grey images)
    assert grey.tolist() == [[3, 1], [2, 0]]


@pytest.fixture(scope="module")
def glass_images(images):
    return images["cifar10"][:6]


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_glass_blur_is_cilns_operator_with_cifar10c_one_option_away(glass_images, severity):
    x = glass_images
    constants = cifar.PARAMS["glass_blur"][severity - 1]

    def reference(code):
        rngs = item_rngs("cifar10", "glass_blur", severity, "test", range(len(x)))
        return np.uint8(np.clip([official_glass_blur(xi, constants, r, code) for xi, r in zip(x, rngs)], 0, 255))

    ours = corrupt("cifar10", x, "glass_blur", severity, split="test")
    as_cifar10c = corrupt("cifar10", x, "glass_blur", severity, split="test", options={"swap": "copy"})
    assert np.array_equal(ours, reference("ciln")) and np.array_equal(as_cifar10c, reference("cifar10c"))
    strength = {name: np.abs(out.astype(float) - x).mean() for name, out in (("ciln", ours), ("cifar10c", as_cifar10c))}
    # the true swap is the stronger corruption (mean |change| 1.4x at severity 1 on natural images)
    assert strength["ciln"] > strength["cifar10c"] * (1.2 if severity <= 2 else 1.02), strength


@pytest.mark.parametrize("constants", [(0.9, 2, 1), (1.1, 3, 2)])
def test_glass_blur_matches_both_official_loops_with_larger_offsets(glass_images, constants):
    # offsets up to +delta - 1 read pixels already written in the pass (the sequential path)
    x = glass_images[:3]
    for swap, code in (("true", "ciln"), ("copy", "cifar10c")):
        ours = corrupt("cifar10", x, "glass_blur", 2, split="test", options={"params": [constants] * 5, "swap": swap})
        rngs = item_rngs("cifar10", "glass_blur", 2, "test", range(len(x)))
        official = np.uint8(np.clip([official_glass_blur(xi, constants, r, code) for xi, r in zip(x, rngs)], 0, 255))
        assert np.array_equal(ours, official), swap


# ----------------------------------------------------------------------------------------------- frost
def lag1_correlation(layers: np.ndarray) -> float:
    """Pixel-to-neighbour correlation of grey frost layers (n, 32, 32, 3), each centred on its own mean:
    about 0.68 for crops of the full-size photographs, 0.34 at CIFAR-10-C's 0.2x."""
    g = layers.astype(float).mean(-1)
    g = g - g.mean(axis=(1, 2), keepdims=True)
    return float(((g[:, :, 1:] * g[:, :, :-1]).mean() + (g[:, 1:] * g[:, :-1]).mean()) / 2 / (g * g).mean())


def frost_layers(severity: int, n: int, **options) -> np.ndarray:
    """The frost layer the operator adds: its output on black images divided by the blend weight b."""
    rngs = item_rngs("cifar10", "frost", severity, "test", range(n))
    out = cifar.frost(np.zeros((n, 32, 32, 3), np.uint8), severity, rngs, **options)
    return out / cifar.PARAMS["frost"][severity - 1][1]


def random_crops(textures, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    crops = []
    for _ in range(n):
        t = textures[rng.integers(0, 5)]
        top, left = rng.integers(0, t.shape[0] - 32), rng.integers(0, t.shape[1] - 32)
        crops.append(t[top : top + 32, left : left + 32])
    return np.stack(crops)


def test_frost_crops_full_size_textures_like_ciln_and_shrunk_ones_like_cifar10c():
    full = frost_module.frost_textures(1.0)
    shrunk = [cv2.resize(np.ascontiguousarray(t), (0, 0), fx=0.2, fy=0.2) for t in full]  # make_cifar_c.py's call
    for textures, options in ((full, {}), (shrunk, {"texture_scale": frost_module.CIFAR10C_TEXTURE_SCALE})):
        layers = frost_layers(5, 8, **options)
        for layer, rng in zip(layers, item_rngs("cifar10", "frost", 5, "test", range(8))):
            t = textures[rng.integers(0, 5)]
            top, left = rng.integers(0, t.shape[0] - 32), rng.integers(0, t.shape[1] - 32)
            assert np.allclose(layer, t[top : top + 32, left : left + 32])


def test_frost_texture_scale_statistic():
    full = frost_module.frost_textures(1.0)
    at_02 = lag1_correlation(random_crops(frost_module.frost_textures(0.2), 400))
    at_full = lag1_correlation(random_crops(full, 400))
    ours = lag1_correlation(frost_layers(5, 400))  # CILN cifar_funcs' full-size crops
    fine = lag1_correlation(frost_layers(5, 400, texture_scale=0.2))  # CIFAR-10-C's
    assert ours == pytest.approx(at_full, abs=0.05) and fine == pytest.approx(at_02, abs=0.05)
    assert at_full - at_02 > 0.15, (at_full, at_02)  # the statistic tells the two scales apart


def correlation_length(texture: np.ndarray) -> int:
    """The smallest shift (px) at which a grey texture's autocorrelation falls below 0.5."""
    g = texture.astype(float).mean(-1)
    g = g - g.mean()
    for lag in range(1, min(g.shape) // 2):
        if ((g[:, lag:] * g[:, :-lag]).mean() + (g[lag:] * g[:-lag]).mean()) / 2 / (g * g).mean() < 0.5:
            return lag
    return min(g.shape) // 2


def test_procedural_frost_fallback_is_shrunk_the_same_way(monkeypatch):
    monkeypatch.setattr(frost_module, "frost_dir", lambda: None)
    frost_module.frost_textures.cache_clear()
    try:
        full, shrunk = frost_module.frost_textures(1.0), frost_module.frost_textures(0.2)
        assert "procedural fallback" in frost_module.frost_source()
        assert all(s.shape == (51, 51, 3) for s in shrunk)
        lengths = [(correlation_length(f), correlation_length(s)) for f, s in zip(full, shrunk)]
        # photographs: 5-37 px at full size, 1-8 px at 0.2x (median 13 and 3); the fallback's follow
        assert all(s <= 6 and f >= 3 * s for f, s in lengths), lengths
        (layer,) = frost_layers(3, 1, texture_scale=0.2)
        (rng,) = item_rngs("cifar10", "frost", 3, "test", [0])
        t = shrunk[rng.integers(0, 5)]
        top, left = rng.integers(0, t.shape[0] - 32), rng.integers(0, t.shape[1] - 32)
        assert np.allclose(layer, t[top : top + 32, left : left + 32])
    finally:
        frost_module.frost_textures.cache_clear()


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
        corrupt("adult", X, "scaling", 2, split="test")
    with pytest.raises(ConfigError, match="need a pandas DataFrame"):
        corrupt("adult", np.zeros((3, 13)), "scaling", 1, split="test")
