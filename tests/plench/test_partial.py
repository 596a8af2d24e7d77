"""Candidate-set generators and statistics (shared.noise.partial) against their closed forms."""
from math import comb

import numpy as np
import pytest
from sklearn.datasets import load_digits

from shared.errors import ConfigError
from shared.noise.partial import (
    aggregate_union, aggregate_vaguest, ambiguity_degree, average_size, crowd_candidates, flipping_matrix,
    fps_candidates, label_histogram, noise_rate_by_annotators, perception_probabilities, pll_noise_rate,
    simulate_annotators, uss_candidates,
)

Q, N = 10, 20_000


@pytest.fixture(scope="module")
def labels():
    return np.random.default_rng(0).integers(0, Q, N)


def size_shares(S, q):
    return np.bincount(S.sum(axis=1), minlength=q + 1) / len(S)


def test_uss_exact_matches_eq1(labels):
    S = uss_candidates(labels, Q, seed=1)
    assert S.dtype == np.uint8 and S.shape == (N, Q)
    assert S[np.arange(N), labels].all() and not S.all(axis=1).any()  # y always in S, S never = Y
    expected_mean = (2 ** (Q - 1) * (Q + 1) / 2 - Q) / (2 ** (Q - 1) - 1)
    assert expected_mean == pytest.approx(5.49, abs=0.005)
    assert average_size(S) == pytest.approx(expected_mean, abs=0.04)  # SE 0.011
    expected = [0.0] + [comb(Q - 1, k - 1) / (2 ** (Q - 1) - 1) for k in range(1, Q)] + [0.0]
    assert np.allclose(size_shares(S, Q), expected, atol=0.012)


def test_uss_feng2020_code_variant_has_mean_q_over_2(labels):
    S = uss_candidates(labels, Q, seed=1, variant="feng2020_code")
    assert S[np.arange(N), labels].all() and not S.all(axis=1).any()
    assert average_size(S) == pytest.approx(Q / 2, abs=0.04)
    expected = [0.0] + [comb(Q, k) / (2**Q - 2) for k in range(1, Q)] + [0.0]
    assert np.allclose(size_shares(S, Q), expected, atol=0.012)
    # the false labels are uniform: every wrong class is equally often a candidate
    F = flipping_matrix(S, labels)
    assert np.allclose(F[~np.eye(Q, dtype=bool)], (Q / 2 - 1) / (Q - 1), atol=0.04)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_fps_constant_rate(labels, p):
    S = fps_candidates(labels, Q, p, seed=2)
    assert S[np.arange(N), labels].all() and pll_noise_rate(S, labels) == 0.0
    assert average_size(S) == pytest.approx(1 + p * (Q - 1), abs=0.04)
    off = flipping_matrix(S, labels)[~np.eye(Q, dtype=bool)]
    assert np.allclose(off, p, atol=0.04)
    assert ambiguity_degree(S, labels) == pytest.approx(p, abs=0.04)


def test_fps_matrix_with_noisy_diagonal_is_recovered(labels):
    rng = np.random.default_rng(3)
    P = rng.uniform(0.05, 0.5, (Q, Q))
    np.fill_diagonal(P, 0.8)
    S = fps_candidates(labels, Q, P, seed=4)
    assert S.sum(axis=1).min() >= 1  # empty rows are redrawn
    # P(empty | y = i) = 0.2 * prod_j (1 - P_ij) is under 1 %, so conditioning on a non-empty set barely moves it
    assert pll_noise_rate(S, labels) == pytest.approx(0.2, abs=0.015)
    assert np.abs(flipping_matrix(S, labels, Q) - P).max() < 0.045
    assert ambiguity_degree(S, labels) == pytest.approx(P[~np.eye(Q, dtype=bool)].max(), abs=0.04)


def test_fps_rejects_bad_matrices_and_labels(labels):
    P = np.full((Q, Q), 0.3)
    P[2] = 0.0
    with pytest.raises(ConfigError, match=r"rows \[2\].*all zero"):
        fps_candidates(labels, Q, P)
    with pytest.raises(ConfigError, match=r"\(q, q\)"):
        fps_candidates(labels, Q, np.full((3, 3), 0.2))
    with pytest.raises(ConfigError, match=r"in \[0, 1\]"):
        fps_candidates(labels, Q, 1.5)
    with pytest.raises(ConfigError, match=r"0\.\.9"):
        uss_candidates(np.array([0, 10]), Q)
    with pytest.raises(ConfigError, match="feng2020_code"):
        uss_candidates(labels, Q, variant="feng2020")


def test_same_seed_same_sets_and_generators_accepted(labels):
    assert np.array_equal(uss_candidates(labels, Q, 7), uss_candidates(labels, Q, np.random.default_rng(7)))
    assert not np.array_equal(uss_candidates(labels, Q, 7), uss_candidates(labels, Q, 8))
    assert np.array_equal(fps_candidates(labels, Q, 0.3, 5), fps_candidates(labels, Q, 0.3, 5))
    with pytest.raises(ConfigError, match="seed must be"):
        fps_candidates(labels, Q, 0.3, seed=0.5)


# ------------------------------------------------------------------------------------------ aggregation, stats
# 3 images, 3 annotators, q = 4; the third annotator of image 2 is absent (all zero)
SETS = np.array([
    [[0, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 1]],  # sizes 1, 2, 2 -> vaguest = the first of size 2
    [[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 1]],
    [[1, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]],
], dtype=np.uint8)
Y = np.array([2, 0, 3])


def test_union_and_vaguest_on_a_hand_made_example():
    assert aggregate_union(SETS).tolist() == [[1, 1, 1, 1], [0, 0, 0, 1], [1, 1, 1, 1]]
    assert aggregate_vaguest(SETS).tolist() == [[0, 1, 1, 0], [0, 0, 0, 1], [1, 1, 1, 0]]


def test_statistics_on_a_hand_made_example():
    vaguest = aggregate_vaguest(SETS)
    assert average_size(vaguest) == pytest.approx(6 / 3)
    assert pll_noise_rate(vaguest, Y) == pytest.approx(2 / 3)  # image 1 (y = 0) and image 2 (y = 3) miss y
    F = flipping_matrix(vaguest, Y, 4)
    assert np.isnan(F[1]).all()  # no image of class 1
    assert F[2].tolist() == [0, 1, 1, 0] and F[3].tolist() == [1, 1, 1, 0]
    assert ambiguity_degree(vaguest, Y) == 1.0
    # union of the first k annotators: k=1 misses y for images 0, 1, 2; k=2 for 1 only; k=3 for 1
    assert np.allclose(noise_rate_by_annotators(SETS, Y), [1.0, 1 / 3, 1 / 3])
    assert label_histogram(SETS).tolist() == [2, 3, 2, 5]
    assert label_histogram(vaguest).tolist() == [1, 2, 2, 1]


def test_annotator_cap_keeps_the_most_probable_labels():
    P = np.array([[0.05, 0.3, 0.02, 0.2, 0.1, 0.01, 0.15, 0.12, 0.03, 0.02]])
    y = np.array([3])
    # every label included (base rate 1, no miss): the cap keeps the 6 largest P
    sets = simulate_annotators(P, y, 4, seed=0, base_rate=1.0, miss=0.0, miss_cap=0.0)
    assert (sets.sum(axis=2) == 6).all()
    assert set(np.flatnonzero(sets[0, 0])) == {1, 3, 6, 7, 4, 0}
    # nothing included (carefulness 0, no base rate, true label always missed): the most probable wrong label
    sets = simulate_annotators(P, y, 4, seed=0, carefulness=(0.0, 0.0), base_rate=0.0, miss=1.0, miss_cap=1.0)
    assert (sets.sum(axis=2) == 1).all() and sets[0, :, 1].all()


@pytest.fixture(scope="module")
def pldigits():
    X, y = load_digits(return_X_y=True)
    return crowd_candidates(X, y, 10, n_annotators=10, seed=0), y, X


def test_perception_model_is_a_weak_annotator(pldigits):
    _, y, X = pldigits
    P = perception_probabilities(X, y, 10)
    assert np.allclose(P.sum(axis=1), 1.0)
    assert 0.60 < (P.argmax(axis=1) == y).mean() < 0.68  # spec: about 0.64


def test_pldigits_reproduces_the_spec_statistics(pldigits):
    sets, y, _ = pldigits
    assert sets.shape == (1797, 10, 10) and sets.dtype == np.uint8
    sizes = sets.sum(axis=2)
    assert sizes.min() >= 1 and sizes.max() <= 6  # never empty, PLCIFAR10's cap of 6 labels
    aggregate, vaguest = aggregate_union(sets), aggregate_vaguest(sets)
    # spec 7.1: Aggregate 5.55 / 0.06 %, Vaguest 3.24 / 10.07 % (SE of the Vaguest noise: 0.7 points)
    assert average_size(aggregate) == pytest.approx(5.55, abs=0.15)
    assert pll_noise_rate(aggregate, y) < 0.005
    assert average_size(vaguest) == pytest.approx(3.24, abs=0.15)
    assert 0.07 < pll_noise_rate(vaguest, y) < 0.13
    assert 1 <= (aggregate.sum(axis=1) == 10).sum() <= 20 and (vaguest.sum(axis=1) == 10).sum() == 0


def test_pldigits_figure2_analogs(pldigits):
    sets, y, _ = pldigits
    curve = noise_rate_by_annotators(sets, y)
    assert np.all(np.diff(curve) <= 0) and 0.2 < curve[0] < 0.35  # spec: 27.55 % with one annotator
    assert curve[-1] == pytest.approx(pll_noise_rate(aggregate_union(sets), y))
    off = ~np.eye(10, dtype=bool)
    F_agg, F_vag = flipping_matrix(aggregate_union(sets), y), flipping_matrix(aggregate_vaguest(sets), y)
    assert F_agg[off].max() / F_agg[off].min() > 2 and F_vag[off].max() / F_vag[off].min() > 5
    assert (np.diag(F_vag) < 1).all()  # class-wise noise
    assert label_histogram(sets).sum() == sets.sum()


def test_crowd_is_fixed_by_its_seed(pldigits):
    sets, y, X = pldigits
    assert np.array_equal(crowd_candidates(X, y, 10, n_annotators=10, seed=0), sets)
    assert not np.array_equal(crowd_candidates(X, y, 10, n_annotators=10, seed=1), sets)
