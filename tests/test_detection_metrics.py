"""shared.metrics: trapezoid AUPR (full/truncated), P/R at k, Jaccard, Wasserstein, Fleiss' kappa, MTurk rules.

Hand-computed values are worked out in the comments; spec anchors are from specs/lnlfn.md (sections 2, 3.3, 6.3).
"""
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import wasserstein_distance
from sklearn.metrics import auc, average_precision_score, precision_recall_curve

from shared.errors import ConfigError
from shared.metrics import (
    CORRECTABLE, NON_AGREEMENT, NON_ERROR, at_k, aupr_trapezoid, category_counts, fleiss_kappa,
    given_guessed_to_label_counts, is_label_error, jaccard_index, jaccard_top_k, mturk_categories, pr_at_err,
    pr_curve, precision_at_k, recall_at_2err, recall_at_k, top_k_indices, wasserstein,
)


def ranked(errors):
    """Scores that rank the items in the given order (first = highest score), with their labels."""
    e = np.asarray(errors, dtype=bool)
    return np.arange(len(e), 0, -1, dtype=float), e


# --------------------------------------------------------------------------- AUPR by hand


def test_aupr_hand_example_differs_from_average_precision():
    # ranked errors 1,0,1,0,0; N_err = 2
    # P = 1, 1/2, 2/3, 1/2, 2/5;  R = 1/2, 1/2, 1, 1, 1;  P(0) := P(1) = 1, R(0) = 0
    # trapezoid: 1/2(1+1)(1/2) + 0 + 1/2(1/2 + 2/3)(1/2) + 0 + 0 = 1/2 + 7/24 = 19/24 = 0.7917
    # step (AP):  1 * 1/2 + 2/3 * 1/2                             = 5/6   = 0.8333
    s, e = ranked([1, 0, 1, 0, 0])
    assert aupr_trapezoid(s, e) == pytest.approx(19 / 24)
    assert average_precision_score(e, s) == pytest.approx(5 / 6)
    assert aupr_trapezoid(s, e) != pytest.approx(average_precision_score(e, s))


def test_aupr_first_item_clean_hand_example():
    # ranked errors 0,1,1,0; N_err = 2.  P = 0, 1/2, 2/3, 1/2;  R = 0, 1/2, 1, 1;  P(0) := P(1) = 0
    # trapezoid: 0 + 1/2(0 + 1/2)(1/2) + 1/2(1/2 + 2/3)(1/2) + 0 = 1/8 + 7/24 = 5/12 = 0.4167
    # step (AP):  1/2 * 1/2 + 2/3 * 1/2 = 7/12 = 0.5833   (the trapezoid interpolates from P=0)
    s, e = ranked([0, 1, 1, 0])
    assert aupr_trapezoid(s, e) == pytest.approx(5 / 12)
    assert average_precision_score(e, s) == pytest.approx(7 / 12)


def test_aupr_perfect_and_worst_rankings():
    s, e = ranked([1, 1, 1, 0, 0, 0])
    assert aupr_trapezoid(s, e) == pytest.approx(1.0)
    # all errors last: P = 0,0,0,1/4,2/5,1/2;  R = 0,0,0,1/3,2/3,1
    # area = 1/2(0+1/4)/3 + 1/2(1/4+2/5)/3 + 1/2(2/5+1/2)/3 = (1/4 + 13/20 + 9/10) / 6 = 0.3
    s, e = ranked([0, 0, 0, 1, 1, 1])
    assert aupr_trapezoid(s, e) == pytest.approx(0.3)


def test_aupr_matches_the_spec_numpy_trapezoid_form():
    rng = np.random.default_rng(1)
    s, e = rng.normal(size=300), rng.random(300) < 0.15
    c = pr_curve(s, e)
    expected = np.trapezoid(np.concatenate([c.precision[:1], c.precision]), np.concatenate([[0.0], c.recall]))
    assert aupr_trapezoid(s, e) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(5))
def test_aupr_equals_sklearn_auc_without_ties_but_not_average_precision(seed):
    rng = np.random.default_rng(seed)
    s, e = rng.normal(size=400), rng.random(400) < 0.1
    precision, recall, _ = precision_recall_curve(e, s)
    ours = aupr_trapezoid(s, e)
    assert ours == pytest.approx(auc(recall, precision), abs=1e-12)
    assert abs(ours - average_precision_score(e, s)) > 1e-4


def test_ties_stable_is_order_dependent_and_group_is_not():
    # items 0..3 share the top score; errors at 0 and 3, and a clean item 4 below
    s = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    e = np.array([1, 0, 0, 1, 0])
    # stable: ranked 1,0,0,1,0 -> P = 1,1/2,1/3,1/2; R = 1/2,1/2,1/2,1 -> 1/2 + 1/2(1/3+1/2)(1/2) = 17/24
    assert aupr_trapezoid(s, e) == pytest.approx(17 / 24)
    # the same items in another input order give another stable-tie AUPR
    perm = np.array([1, 2, 0, 3, 4])
    assert aupr_trapezoid(s[perm], e[perm]) != pytest.approx(17 / 24)
    # group: one point (k=4, P=1/2, R=1); P(0) := 1/2 -> area 1/2 for any order
    assert aupr_trapezoid(s, e, ties="group") == pytest.approx(0.5)
    assert aupr_trapezoid(s[perm], e[perm], ties="group") == pytest.approx(0.5)


def test_group_ties_relation_to_sklearn_auc():
    # sklearn starts its curve at (R=0, P=1); ours at (0, P(first point)). They differ by 1/2 (1 - P1) R1.
    rng = np.random.default_rng(0)
    s, e = rng.integers(0, 5, 200).astype(float), rng.random(200) < 0.2
    precision, recall, _ = precision_recall_curve(e, s)
    c = pr_curve(s, e, ties="group")
    assert c.aupr() + 0.5 * (1 - c.precision[0]) * c.recall[0] == pytest.approx(auc(recall, precision))
    # and the stable per-item AUPR is yet another number under heavy ties
    assert aupr_trapezoid(s, e) != pytest.approx(c.aupr())


# --------------------------------------------------------------------------- truncated AUPR


def test_truncated_aupr_hand_example():
    # ranked errors 1,0,1,0 | 1,1 ; only 4 verified (truncate_at=4), estimated N_err = 5
    # P = 1, 1/2, 2/3, 1/2;  R = 1/5, 1/5, 2/5, 2/5
    # area = 1/2(1+1)(1/5) + 0 + 1/2(1/2 + 2/3)(1/5) + 0 = 1/5 + 7/60 = 19/60
    s, e = ranked([1, 0, 1, 0, 1, 1])
    assert aupr_trapezoid(s, e, truncate_at=4, n_errors=5) == pytest.approx(19 / 60)
    # labels after the cut are ignored
    e2 = e.copy()
    e2[4:] = False
    assert aupr_trapezoid(s, e2, truncate_at=4, n_errors=5) == pytest.approx(19 / 60)
    # the same as passing only the 4 verified items
    assert aupr_trapezoid(s[:4], e[:4], n_errors=5) == pytest.approx(19 / 60)
    # default N_err = all errors of the input (4 here): the exact-recall truncated AUPR
    # R = 1/4,1/4,1/2,1/2 -> 1/4 + 1/2(7/6)(1/4) = 19/48
    assert aupr_trapezoid(s, e, truncate_at=4) == pytest.approx(19 / 48)


def test_truncated_aupr_scales_with_the_error_estimate():
    # paper, Limitations: "estimates of AUPR are scaled by a fixed ratio"
    rng = np.random.default_rng(3)
    s, e = rng.normal(size=2000), rng.random(2000) < 0.05
    a = aupr_trapezoid(s, e, truncate_at=300, n_errors=150)
    b = aupr_trapezoid(s, e, truncate_at=300, n_errors=250)
    assert a * 150 == pytest.approx(b * 250)


def test_a_method_that_stops_early_gets_a_smaller_truncated_area():
    # FME+CL flags only its first items (316 of IMDB's 1,310): its curve stops there (spec 3.3)
    rng = np.random.default_rng(4)
    s = np.sort(rng.normal(size=1310))[::-1]
    e = rng.random(1310) < 0.6
    full = aupr_trapezoid(s, e, n_errors=1250)
    early = aupr_trapezoid(s[:316], e[:316], n_errors=1250)
    assert early < full
    assert early == pytest.approx(aupr_trapezoid(s, e, truncate_at=316, n_errors=1250))


def test_pr_curve_points():
    s, e = ranked([1, 0, 1, 0, 0])
    c = pr_curve(s, e, truncate_at=3)
    assert c.k.tolist() == [1, 2, 3]
    assert c.tp.tolist() == [1, 1, 2]
    assert np.allclose(c.precision, [1, 1 / 2, 2 / 3])
    assert np.allclose(c.recall, [1 / 2, 1 / 2, 1])
    assert c.n_errors == 2


# --------------------------------------------------------------------------- P / R at k


def test_precision_recall_f1_at_k_by_hand():
    s, e = ranked([1, 0, 1, 0, 0])
    assert at_k(s, e, 2) == (2, 1, 0.5, 0.5, 0.5)
    r = at_k(s, e, 3)  # P = 2/3, R = 1, F1 = 2 (2/3)(1) / (5/3) = 4/5
    assert (r.tp, r.precision, r.recall, r.f1) == (2, pytest.approx(2 / 3), 1.0, pytest.approx(0.8))
    assert precision_at_k(s, e, 1) == 1.0
    assert recall_at_k(s, e, 1) == 0.5
    assert recall_at_k(s, e, 1, n_errors=4) == 0.25
    assert at_k(s, np.zeros(5), 2, n_errors=3).f1 == 0.0


def test_pr_at_err_and_recall_at_twice_err():
    # ranked 0,1,1,0,1,0,0,0,0,0: N_err = 3
    s, e = ranked([0, 1, 1, 0, 1, 0, 0, 0, 0, 0])
    r = pr_at_err(s, e)  # k = 3: TP 2 -> P = R = 2/3 (paper, footnote 3)
    assert r.k == 3 and r.precision == pytest.approx(2 / 3) and r.recall == pytest.approx(2 / 3)
    assert recall_at_2err(s, e) == 1.0  # k = 6: TP 3
    assert pr_at_err(s, e, multiple=2).precision == 0.5
    # with an estimate N_err = 4: k = 4, TP 2 -> P = R = 1/2
    assert pr_at_err(s, e, n_errors=4)[2:4] == (0.5, 0.5)


def test_top_k_ties_broken_by_input_order():
    assert top_k_indices([0.5, 0.9, 0.5, 0.1], 2).tolist() == [1, 0]


def test_table3_precision_at_cl_count_from_table8_counts():
    # spec section 2 / 6.3: at CL's count k, precision = (Correctable + Non-Agreement) / k reproduces
    # Table 3's P,R@Err% for IMDB/Amazon. Build verdicts with Table 8's counts, in ranked order.
    table8 = {  # dataset: (k, {method: (C, NA, NE)}, {method: Table 3 P,R@Err%})
        "IMDB": (1310, {"CL": (183, 358, 769), "FML": (323, 573, 414), "FME": (328, 581, 401)},
                 {"CL": 0.41, "FML": 0.68, "FME": 0.69}),
        "Amazon": (1000, {"CL": (357, 148, 495), "FML": (508, 131, 361), "FME": (517, 143, 340)},
                   {"CL": 0.51, "FML": 0.64, "FME": 0.66}),
    }
    rng = np.random.default_rng(0)
    for k, counts, expected in table8.values():
        for method, (c, na, ne) in counts.items():
            verdicts = np.array([CORRECTABLE] * c + [NON_AGREEMENT] * na + [NON_ERROR] * ne, dtype=object)
            rng.shuffle(verdicts)
            scores = np.linspace(1.0, 0.0, k)  # ranked as shuffled
            precision = precision_at_k(scores, is_label_error(verdicts), k)
            assert abs(precision - expected[method]) <= 0.005 + 1e-12, (method, precision)
    # text (E.2): "FME correctly identifies 909 label errors" on IMDB; Amazon 660 vs CL's 505
    assert 328 + 581 == 909 and 517 + 143 == 660 and 357 + 148 == 505


# --------------------------------------------------------------------------- Jaccard, Wasserstein


def test_jaccard_by_hand():
    a = [5.0, 4.0, 3.0, 2.0, 1.0]   # top-3: {0, 1, 2}
    b = [1.0, 5.0, 4.0, 3.0, 2.0]   # top-3: {1, 2, 3}
    assert jaccard_top_k(a, b, 3) == pytest.approx(2 / 4)
    assert jaccard_top_k(a, a, 3) == 1.0
    assert jaccard_top_k(a, b, 5) == 1.0
    assert jaccard_index([1, 2, 3], [3, 4]) == pytest.approx(1 / 4)
    assert jaccard_index([1, 1, 2], [2]) == pytest.approx(1 / 2)
    # Table 9 use: FME's top-k against the FME+CL set, k = |FME+CL set|
    cl_set = np.array([3, 0])
    assert jaccard_index(top_k_indices(a, len(cl_set)), cl_set) == pytest.approx(1 / 3)


def test_wasserstein_by_hand_and_against_scipy():
    assert wasserstein([0, 1, 3], [5, 6, 8]) == pytest.approx(5.0)      # a pure shift by 5
    assert wasserstein([0], [1, 3]) == pytest.approx(2.0)                # E|0 - V| = (1 + 3) / 2
    rng = np.random.default_rng(5)
    a, b = rng.exponential(2.0, 300), rng.exponential(0.5, 700)
    assert wasserstein(a, b) == pytest.approx(wasserstein_distance(a, b))
    # equal sizes: mean absolute difference of the sorted samples
    c, d = rng.normal(size=500), rng.normal(1.0, 2.0, size=500)
    assert wasserstein(c, d) == pytest.approx(np.mean(np.abs(np.sort(c) - np.sort(d))))


# --------------------------------------------------------------------------- Fleiss' kappa

# Worked example from Fleiss' kappa's standard textbook illustration (Wikipedia, "Fleiss' kappa"):
# 10 items, 14 raters, 5 categories; P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210.
FLEISS_EXAMPLE = np.array([
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
])


def test_fleiss_kappa_textbook_example():
    # column totals 20, 28, 39, 21, 32 of 140 -> P_e = (400 + 784 + 1521 + 441 + 1024) / 140^2 = 4170 / 19600
    # per-item (sum n_ij^2 - 14) / (14 * 13): numerators 182, 46, 56, 80, 60, 84, 44, 32, 52, 52 (sum 688)
    p_bar = Fraction(688, 10 * 182)
    p_e = Fraction(4170, 19600)
    kappa = (p_bar - p_e) / (1 - p_e)
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(float(kappa), abs=1e-12)
    assert round(fleiss_kappa(FLEISS_EXAMPLE), 3) == 0.210
    assert round(float(p_bar), 3) == 0.378 and round(float(p_e), 3) == 0.213


def test_fleiss_kappa_pairwise_definition_and_extremes():
    # P_i is the share of agreeing rater pairs; check against a brute-force count on random ratings
    rng = np.random.default_rng(6)
    ratings = rng.integers(0, 4, size=(50, 5))
    counts = category_counts(ratings, 4)
    assert counts.sum(axis=1).tolist() == [5] * 50
    pairs = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    p_bar = np.mean([np.mean([r[a] == r[b] for a, b in pairs]) for r in ratings])
    p_e = np.sum((counts.sum(axis=0) / counts.sum()) ** 2)
    assert fleiss_kappa(counts) == pytest.approx((p_bar - p_e) / (1 - p_e))
    # perfect agreement, spread over categories -> 1
    assert fleiss_kappa([[5, 0, 0, 0], [0, 5, 0, 0], [0, 0, 0, 5]]) == pytest.approx(1.0)


def test_given_guessed_mapping_changes_kappa():
    # IMDB CL re-run columns: (given, guessed, neutral, off-topic) votes, label 1 = positive, 0 = negative.
    # Rows from dcx/lnlfm mturk/imdb_mturk_cl_rerun.csv (the first ones of the file).
    rows = np.array([  # label, given, guessed, neutral, off_topic
        [1, 0, 2, 0, 3], [1, 1, 1, 3, 0], [1, 0, 5, 0, 0], [1, 0, 3, 2, 0], [1, 4, 0, 1, 0],
        [0, 0, 5, 0, 0], [0, 0, 3, 1, 1], [0, 0, 4, 0, 1], [0, 0, 5, 0, 0], [1, 0, 5, 0, 0],
    ])
    label = rows[:, 0]
    counts = given_guessed_to_label_counts(rows[:, 1], rows[:, 2], label, 1 - label, n_labels=2, extra=rows[:, 3:])
    # columns (negative, positive, neutral, off-topic)
    assert counts[0].tolist() == [2, 0, 0, 3]      # positive item: guessed (negative) votes go to column 0
    assert counts[5].tolist() == [0, 5, 0, 0]      # negative item: guessed (positive) votes go to column 1
    assert fleiss_kappa(counts) != pytest.approx(fleiss_kappa(rows[:, 1:]))   # spec 3.3: the mapping matters


# --------------------------------------------------------------------------- MTurk rules

# IMDB columns: (negative, positive, neutral, off-topic); task labels 0, 1
IMDB_ROWS = [  # (counts, given, expected)
    ([0, 5, 0, 0], 1, NON_ERROR),
    ([2, 3, 0, 0], 1, NON_ERROR),       # 3 of 5 keep the original label
    ([3, 2, 0, 0], 1, CORRECTABLE),     # 3 agree on the other label
    ([5, 0, 0, 0], 1, CORRECTABLE),
    ([1, 1, 3, 0], 1, NON_AGREEMENT),   # neutral majority on binary IMDB ("NA: Neutral")
    ([2, 0, 0, 3], 1, NON_AGREEMENT),   # off-topic majority
    ([2, 2, 1, 0], 0, NON_AGREEMENT),   # no majority
    ([2, 1, 1, 1], 0, NON_AGREEMENT),
    ([1, 0, 4, 0], 0, NON_AGREEMENT),
]


@pytest.mark.parametrize("counts, given, expected", IMDB_ROWS)
def test_mturk_rules_imdb_single_rows(counts, given, expected):
    assert mturk_categories(counts, given, label_options=(0, 1)) == expected


def test_mturk_rules_vectorised_and_label_errors():
    counts = np.array([r[0] for r in IMDB_ROWS])
    given = np.array([r[1] for r in IMDB_ROWS])
    cats = mturk_categories(counts, given, label_options=(0, 1))
    assert cats.tolist() == [r[2] for r in IMDB_ROWS]
    assert is_label_error(cats).tolist() == [r[2] != NON_ERROR for r in IMDB_ROWS]
    # without label_options every column is a possible replacement: a neutral majority becomes Correctable
    assert mturk_categories([1, 1, 3, 0], 1) == CORRECTABLE


def test_mturk_rules_amazon_guessed_label():
    # Amazon columns (negative, neutral, positive, off-topic); labels 0..2; original label positive (2)
    counts = np.array([[0, 3, 2, 0], [3, 0, 2, 0], [0, 1, 4, 0], [1, 1, 0, 3]])
    given = np.array([2, 2, 2, 2])
    guessed = np.array([0, 0, 0, 0])  # CL guessed negative
    # "any replacement label" rule
    assert mturk_categories(counts, given, label_options=(0, 1, 2)).tolist() == [
        CORRECTABLE, CORRECTABLE, NON_ERROR, NON_AGREEMENT]
    # CL's rule: Correctable only with >= 3 votes for CL's guessed label (reproduces 357/148/495)
    assert mturk_categories(counts, given, label_options=(0, 1, 2), guessed=guessed).tolist() == [
        NON_AGREEMENT, CORRECTABLE, NON_ERROR, NON_AGREEMENT]


def test_mturk_rules_fewer_votes_still_need_three():
    assert mturk_categories([2, 2, 0, 0], 0, label_options=(0, 1)) == NON_AGREEMENT
    assert mturk_categories([0, 3, 0, 0], 0, label_options=(0, 1)) == CORRECTABLE


# --------------------------------------------------------------------------- errors


def test_detection_input_errors():
    s, e = ranked([1, 0, 1, 0, 0])
    with pytest.raises(ConfigError, match="length mismatch"):
        aupr_trapezoid(s, e[:4])
    with pytest.raises(ValueError, match="no positives"):
        aupr_trapezoid(s, np.zeros(5))
    assert aupr_trapezoid(s, np.zeros(5), n_errors=3) == 0.0   # an estimate makes it well defined
    with pytest.raises(ConfigError, match="0/1"):
        aupr_trapezoid(s, [0, 1, 2, 0, 0])
    with pytest.raises(ConfigError, match="NaN"):
        aupr_trapezoid([1.0, np.nan, 0.0, 0.0, 0.0], e)
    with pytest.raises(ConfigError, match="1-D"):
        aupr_trapezoid(s[:, None], e)
    with pytest.raises(ConfigError, match="empty"):
        aupr_trapezoid([], [])
    with pytest.raises(ConfigError, match="out of range"):
        aupr_trapezoid(s, e, truncate_at=6)
    with pytest.raises(ConfigError, match="out of range"):
        aupr_trapezoid(s, e, truncate_at=0)
    with pytest.raises(ConfigError, match="recall would exceed 1"):
        aupr_trapezoid(s, e, n_errors=1)
    with pytest.raises(ConfigError, match="ties mode"):
        aupr_trapezoid(s, e, ties="random")
    with pytest.raises(ConfigError, match="inside a group of tied scores"):
        aupr_trapezoid([2.0, 1.0, 1.0, 0.0], [1, 0, 1, 0], truncate_at=2, ties="group")
    for k in (0, 6, 2.5, True):
        with pytest.raises(ConfigError, match="k"):
            precision_at_k(s, e, k)
    with pytest.raises(ConfigError, match="out of range"):
        pr_at_err(*ranked([1, 1, 1, 0, 0]), multiple=2)   # 2 x 3 > 5 items
    with pytest.raises(ConfigError, match="length mismatch"):
        jaccard_top_k([1.0, 2.0], [1.0, 2.0, 3.0], 1)
    with pytest.raises(ConfigError, match="empty sets"):
        jaccard_index([], [])
    with pytest.raises(ConfigError, match="inf"):
        wasserstein([0.0, np.inf], [1.0])
    with pytest.raises(ConfigError, match="empty"):
        wasserstein([], [1.0])


def test_agreement_input_errors():
    with pytest.raises(ConfigError, match="same number of ratings"):
        fleiss_kappa([[3, 2], [4, 0]])
    with pytest.raises(ConfigError, match="single category"):
        fleiss_kappa([[5, 0], [5, 0]])
    with pytest.raises(ConfigError, match="at least 2"):
        fleiss_kappa([[1, 0], [0, 1]])
    with pytest.raises(ConfigError, match="2-D"):
        fleiss_kappa([1, 2, 3])
    with pytest.raises(ConfigError, match="non-negative"):
        fleiss_kappa([[6, -1], [5, 0]])
    with pytest.raises(ConfigError, match="ratings must lie"):
        category_counts([[0, 4]], 3)
    with pytest.raises(ConfigError, match="majority unique"):
        mturk_categories([3, 3, 0, 0], 0)
    with pytest.raises(ConfigError, match="guessed equals given"):
        mturk_categories([[0, 5]], [1], guessed=[1])
    with pytest.raises(ConfigError, match="not in label_options"):
        mturk_categories([[0, 0, 5]], [2], label_options=(0, 1))
    with pytest.raises(ConfigError, match="one entry per item"):
        mturk_categories([[0, 5], [5, 0]], [1])
    with pytest.raises(ConfigError, match="unknown MTurk categories"):
        is_label_error(["Correctable", "NA: Neutral"])
    with pytest.raises(ConfigError, match="given_label equals guessed_label"):
        given_guessed_to_label_counts([1], [4], [0], [0], n_labels=2)
