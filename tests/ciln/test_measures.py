import numpy as np
import pytest

from ciln.measures import (
    attractor, ccn_floor_analytic, ccn_floor_simulated, class_means, flip_rate_variance, label_entropy,
    majority_vote, noise_rate, nth, tv_to_reference, upsample_reference,
)
from shared.errors import ConfigError


def shares_from_votes(votes, K):
    from ciln.measures import vote_shares

    return vote_shares(votes, K)


def test_nth_is_zero_when_every_item_of_a_class_looks_the_same():
    shares = np.array([[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0.25, 0.75], [0, 0.25, 0.75]])
    y = np.array([0, 0, 2, 2])
    assert nth(shares, y) == 0.0
    assert np.allclose(class_means(shares, y)[1], 0)  # absent class


def test_nth_known_value():
    # class 0: items (1, 0) and (0, 1), mean (0.5, 0.5): squared distance 0.5 each; N = 2
    assert nth(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 0])) == pytest.approx(0.5)
    with pytest.raises(ConfigError, match=r"vote shares must be \(n, K\)"):
        nth(np.ones((3, 2)), np.zeros(2, int))


def test_simulated_ccn_floor_matches_the_analytic_one(rng):
    K, M, n = 10, 4, 6000
    y = rng.integers(0, K, n)
    T = 0.7 * np.eye(K) + 0.3 * rng.dirichlet(np.ones(K), K)
    votes = np.stack([rng.choice(K, size=M, p=T[c]) for c in y])  # genuinely class-conditional votes
    shares = shares_from_votes(votes, K)
    analytic = ccn_floor_analytic(shares, y, M)
    assert ccn_floor_simulated(shares, y, M) == pytest.approx(analytic, rel=0.03)
    assert nth(shares, y) == pytest.approx(analytic, rel=0.05)  # CCN noise sits at its floor ...
    idn = shares.copy()
    idn[: n // 2] = np.eye(K)[y[: n // 2]]  # ... instance-dependent noise (half the items clean) rises above it
    assert nth(idn, y) > ccn_floor_simulated(idn, y, M) * 1.2


def test_noise_rate_flip_variance_and_entropy():
    shares = np.array([[1.0, 0], [0.5, 0.5], [0, 1.0], [0, 1.0]])
    y = np.array([0, 0, 1, 1])
    assert noise_rate(shares, y) == pytest.approx(0.125)
    assert flip_rate_variance(shares, y) == pytest.approx((0.0625 + 0.0) / 2)
    assert label_entropy(np.arange(10), 10) == pytest.approx(3.321928, abs=1e-6)  # the paper's clean H
    assert label_entropy(np.zeros(5, int), 10) == 0.0


def test_majority_vote_and_attractor():
    votes = np.array([[1, 1, 0, 2], [0, 0, 1, 1], [1, 1, 1, 2], [2, 2, 2, 2]])
    assert majority_vote(votes, 3).tolist() == [1, 0, 1, 2]  # ties go to the lowest class
    y = np.array([0, 0, 2, 2])
    a = attractor(votes, y, 3)
    assert a.cls == 1 and a.gain_pp == pytest.approx(50.0) and a.purity == 0.0


def test_upsampling_reaches_the_target_noise_rate(rng):
    y = rng.integers(0, 10, 500)
    counts = np.full((500, 10), 1) + 40 * np.eye(10)[y]
    for target in (0.3, 0.6):
        soft = upsample_reference(counts, y, target)
        assert np.mean(1 - soft[np.arange(500), y]) == pytest.approx(target)
    assert np.allclose(upsample_reference(counts, y, 0.01), counts / counts.sum(1, keepdims=True))


def test_tv_protocol(rng):
    K, n = 10, 2000
    y = rng.integers(0, K, n)
    humans = 40 * np.eye(K)[y] + 10 * np.eye(K)[(y + 1) % K]  # people confuse class c with c + 1
    clean_shares = np.eye(K)[y]
    result = tv_to_reference(clean_shares, y, humans, n_boot=5)
    assert 0 <= result.tv <= 1 and result.noise_rate == 0.0 and result.tv_ci95 >= 0
    # a benchmark with the humans' structured confusion is closer to them than symmetric noise at its rate
    votes = np.stack([rng.choice(K, size=4, p=h / h.sum()) for h in humans])
    human_like = tv_to_reference(shares_from_votes(votes, K), y, humans, n_boot=5)
    assert human_like.tv < human_like.tv_symmetric
    again = tv_to_reference(shares_from_votes(votes, K), y, humans, n_boot=5)
    assert again == human_like  # seeded bootstraps


def test_tv_of_no_rows_is_nan():
    """A CILN-C subset can be empty (no test row right for every voter): NaN, not the upsampling's error."""
    empty = tv_to_reference(np.zeros((0, 10)), np.zeros(0, int), np.zeros((0, 10)), n_boot=3)
    assert all(np.isnan(v) for v in (empty.tv, empty.tv_ci95, empty.tv_symmetric, empty.tv_ccn, empty.noise_rate))


def test_tv_is_nan_when_the_reference_cannot_be_raised_to_the_noise_rate():
    """Two rows where every human agrees with y but a voter does not: no disagreement to scale up."""
    y = np.array([0, 1])
    humans = np.eye(3)[y] * 50
    shares = np.array([[0.75, 0.25, 0.0], [0.0, 1.0, 0.0]])
    out = tv_to_reference(shares, y, humans, n_boot=2)
    assert np.isnan(out.tv) and np.isnan(out.tv_symmetric) and out.noise_rate == pytest.approx(0.125)
    assert tv_to_reference(np.eye(3)[y], y, humans, n_boot=2).tv == 0.0  # no noise: nothing to raise


def test_marginal_pca_ranks_by_distance_to_the_reference():
    from ciln.measures import marginal_pca

    base = np.full(4, 0.25)
    marginals = {"ref": base, "near": base + [0.01, -0.01, 0, 0], "far": base + [0.2, -0.2, 0, 0],
                 "mid": base + [0, 0, 0.1, -0.1]}
    table, ratios = marginal_pca(marginals, "ref")
    assert table.loc[["near", "mid", "far"], "rank"].tolist() == [1, 2, 3] and np.isnan(table.loc["ref", "rank"])
    assert table.loc["ref", "distance"] == 0 and ratios.sum() == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="reference 'humans' is not among"):
        marginal_pca(marginals, "humans")
