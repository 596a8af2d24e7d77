import numpy as np
import pytest

from shared.errors import ConfigError, DataFormatError
from shared.noise import (
    anchor_transition, apply_transition, empirical_transition, instance_dependent_flip_probabilities,
    instance_dependent_noise, make_noisy_labels, noise_rate, pairflip_transition, symmetric_transition,
)

K, N = 5, 20_000


@pytest.fixture
def labels(rng):
    return rng.integers(0, K, N)


@pytest.mark.parametrize("rate", [0.0, 0.2, 0.45])
def test_symmetric_noise_rate_and_uniform_targets(labels, rate):
    noisy = make_noisy_labels("symmetric", labels, K, rate, seed=1)
    assert noise_rate(labels, noisy) == pytest.approx(rate, abs=4 * np.sqrt(rate * (1 - rate) / N) + 1e-9)
    if rate:
        T = empirical_transition(labels, noisy, K)
        off = T[~np.eye(K, dtype=bool)]
        assert np.allclose(off, rate / (K - 1), atol=0.02)  # every other class equally likely


def test_symmetric_including_true_class_flips_less():
    T = symmetric_transition(K, 0.5, include_true=True)
    assert np.allclose(T.sum(1), 1) and np.allclose(np.diag(T), 0.5 + 0.5 / K)


def test_pairflip_only_flips_to_the_next_class(labels):
    noisy = make_noisy_labels("pairflip", labels, K, 0.3, seed=2)
    flipped = noisy != labels
    assert np.all(noisy[flipped] == (labels[flipped] + 1) % K)
    assert flipped.mean() == pytest.approx(0.3, abs=0.02)


def test_exact_mode_flips_exactly_the_rounded_count_per_class(labels, rng):
    T = pairflip_transition(K, 0.37)
    noisy = apply_transition(labels, T, rng, exact=True)
    for k in range(K):
        members = labels == k
        assert (noisy[members] != k).sum() == round(members.sum() * 0.37)


def test_class_conditional_sampling_matches_T(labels, rng):
    T = rng.dirichlet(np.ones(K) * 2, size=K)
    noisy = apply_transition(labels, T, rng)
    assert np.abs(empirical_transition(labels, noisy, K) - T).max() < 0.04


def test_invalid_inputs_are_clear(labels):
    with pytest.raises(ConfigError, match=r"noise rate must be in \[0, 1\]"):
        symmetric_transition(K, 1.5)
    with pytest.raises(ConfigError, match="rows that sum to 1"):
        apply_transition(labels, np.full((K, K), 0.5), np.random.default_rng())
    with pytest.raises(ConfigError, match="must lie in 0..4"):
        make_noisy_labels("symmetric", np.array([0, 7]), K, 0.1)
    with pytest.raises(ConfigError, match="unknown noise model 'sym'"):
        make_noisy_labels("sym", labels, K, 0.1)
    with pytest.raises(ConfigError, match="needs features"):
        make_noisy_labels("instance", labels, K, 0.1)


def test_instance_dependent_noise(rng):
    X = rng.normal(size=(4000, 30))
    y = rng.integers(0, K, 4000)
    probs = instance_dependent_flip_probabilities(X, y, K, 0.3, rng)
    assert np.allclose(probs.sum(1), 1)
    flip = 1 - probs[np.arange(len(y)), y]
    assert flip.mean() == pytest.approx(0.3, abs=0.01)  # truncated normal centred on the rate
    assert flip.std() > 0.05  # flip rates differ between items ...
    other = probs.copy()
    other[np.arange(len(y)), y] = 0
    target_share = other.max(1) / np.maximum(flip, 1e-12)
    assert target_share.mean() > 1.5 / (K - 1)  # ... and so do the classes they flip to
    noisy = instance_dependent_noise(X, y, K, 0.3, np.random.default_rng(1))
    assert noise_rate(y, noisy) == pytest.approx(0.3, abs=0.03)


def test_anchor_points_recover_T(rng):
    T = rng.dirichlet(np.ones(K) * 3, size=K) * 0.5 + np.eye(K) * 0.5
    clean = rng.dirichlet(np.ones(K) * 0.3, size=3000)
    clean[:K] = np.eye(K)  # one perfect anchor per class
    noisy_posteriors = clean @ T
    assert np.allclose(anchor_transition(noisy_posteriors, quantile=1.0), T)
    assert np.abs(anchor_transition(noisy_posteriors) - T).max() < 0.15  # the robust 97th-percentile anchor


def test_empirical_transition_known_value():
    T = empirical_transition([0, 0, 0, 1], [0, 1, 1, 1], 3)
    assert np.allclose(T, [[1 / 3, 2 / 3, 0], [0, 1, 0], [0, 0, 1]])


def test_noise_needs_at_least_two_classes():
    y = np.zeros(10, dtype=np.int64)
    for call in (lambda: symmetric_transition(1, 0.2), lambda: pairflip_transition(1, 0.2),
                 lambda: make_noisy_labels("symmetric", y, 1, 0.2),
                 lambda: instance_dependent_noise(np.ones((10, 3)), y, 1, 0.2, np.random.default_rng(0))):
        with pytest.raises(ConfigError, match="at least 2 classes"):
            call()


def test_empirical_transition_rejects_labels_out_of_range():
    with pytest.raises(ConfigError, match=r"noisy labels: labels must lie in 0..2, found 0..3"):
        empirical_transition([0, 1, 2], [0, 1, 3], 3)
    with pytest.raises(ConfigError, match=r"clean labels: labels must lie in 0..2"):
        empirical_transition([0, -1, 2], [0, 1, 2], 3)  # -1 would silently count as class 2


def test_anchor_transition_rejects_non_finite_posteriors():
    probs = np.full((5, 3), 1 / 3)
    probs[2, 1] = np.nan
    with pytest.raises(ConfigError, match=r"NaN or infinite values in 1 of 5 rows"):
        anchor_transition(probs)


def test_instance_dependent_noise_rejects_non_finite_features_and_wrong_row_counts(rng):
    X = rng.normal(size=(100, 6))
    y = rng.integers(0, K, 100)
    for bad in (np.nan, np.inf):
        Xb = X.copy()
        Xb[7, 2] = bad
        with pytest.raises(DataFormatError, match=r"in 1 of 100 rows and 1 of 6 columns; .*impute .* or drop"):
            instance_dependent_noise(Xb, y, K, 0.3, np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"one row per label: got 99 rows .* for 100 labels"):
        instance_dependent_noise(X[:99], y, K, 0.3, np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"got 200 rows .* for 100 labels"):  # used to be reshaped silently
        instance_dependent_noise(X.reshape(200, 3), y, K, 0.3, np.random.default_rng(0))
    images = rng.normal(size=(100, 2, 3))  # images are flattened, one per label
    assert instance_dependent_flip_probabilities(images, y, K, 0.3, np.random.default_rng(0)).shape == (100, K)


def test_instance_dependent_noise_is_xia_projection_without_row_normalisation():
    # the reference computation (Xia et al.'s get_instance_noisy_label) on 3 items, flip rate fixed (rate_std=0)
    X = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])
    y = np.array([0, 2, 1])
    probs = instance_dependent_flip_probabilities(X, y, 3, 0.4, np.random.default_rng(5), rate_std=0)
    W = np.random.default_rng(5).standard_normal((3, 2, 3))
    expected = np.zeros((3, 3))
    for i in range(3):
        s = X[i] @ W[y[i]]
        s[y[i]] = -np.inf
        expected[i] = 0.4 * np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        expected[i, y[i]] = 0.6
    assert np.allclose(probs, expected)
    for option in ("standardize", "normalize_rows"):
        changed = instance_dependent_flip_probabilities(X, y, 3, 0.4, np.random.default_rng(5), rate_std=0,
                                                        **{option: True})
        assert not np.allclose(changed, expected)


def test_row_normalisation_spreads_the_flip_targets_on_digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)

    def largest_target_share(**kw):
        probs = instance_dependent_flip_probabilities(X, y, 10, 0.3, np.random.default_rng(0), **kw)
        other = probs.copy()
        other[np.arange(len(y)), y] = 0
        return float(np.mean(other.max(1) / other.sum(1)))

    assert largest_target_share() > 0.9  # Xia's projection of the raw pixels: the flip mass goes to one class
    assert largest_target_share(standardize=True) > 0.7  # unit-variance columns: still mostly one class
    assert largest_target_share(standardize=True, normalize_rows=True) < 0.45  # rows of length 1: spread out
