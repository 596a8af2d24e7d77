"""Label noising on an annotation matrix (shared.noise.annotations; LNLFN's Section 3.2 and Appendix A)."""
import numpy as np
import pytest

from shared.errors import ConfigError
from shared.noise.annotations import (
    HUMAN_KINDS, KINDS, compose, crowd_majority, crowd_majority_labels, dissenting_label, dissenting_worker,
    from_official_params, hard_minority, noise_capacity, noise_targets, trace_transition, uniform_noise,
    vote_counts,
)

K = 4
RATES = {"train": 0.05, "val": 0.075, "test": 0.1}
PAIRFLIP = np.roll(np.eye(K), 1, axis=1) * 0.3 + np.eye(K) * 0.7


@pytest.fixture(scope="module")
def crowd():
    """3,000 items, 6 annotators of varying reliability per item, ~10 % missing annotations, 3 splits."""
    rng = np.random.default_rng(123)
    n, m = 3000, 6
    y = rng.integers(0, K, n)
    p_right = rng.uniform(0.3, 1.0, n)
    wrong = (y[:, None] + rng.integers(1, K, (n, m))) % K
    A = np.where(rng.random((n, m)) < p_right[:, None], y[:, None], wrong)
    A[rng.random((n, m)) < 0.1] = -1
    split = rng.choice(["train", "val", "test"], n, p=[0.6, 0.2, 0.2])
    return A, y, split


def expected_total(split, s):
    return round((split == s).sum() * RATES[s])  # one kind: the official round(n x rate x 1.0), halves to even


def check_consistency(out, A=None):
    """Invariants of any result: flips exactly on noised items, and human labels come from dissenters."""
    assert np.array_equal(out.noisy != out.clean, out.kind != "")
    if A is None:
        return
    for i in np.flatnonzero(np.isin(out.kind, list(HUMAN_KINDS))):
        given = A[i][A[i] >= 0]
        assert out.noisy[i] in given and out.noisy[i] != out.clean[i], (i, out.kind[i], A[i], out.clean[i])


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_noises_exactly_its_target_in_every_split(crowd, kind):
    A, y, split = crowd
    out = compose(A, y, K, rate=RATES, mix={kind: 1.0}, split=split, seed=3, transition=PAIRFLIP,
                  hard_threshold=0.3)
    for s in RATES:
        assert out.counts()[s] == {kind: expected_total(split, s)}
        assert ((split == s) & out.noised).sum() == expected_total(split, s)
    check_consistency(out, A)


def test_human_noise_uses_only_labels_that_a_disagreeing_annotator_gave(crowd):
    A, y, split = crowd
    V = vote_counts(A, K)
    n_ann = (A >= 0).sum(axis=1)
    mix = {"crowd_majority": 0.1, "hard": 0.3, "dissenting_worker": 0.2, "malicious": 0.2, "dissenting_label": 0.2}
    out = compose(A, y, K, rate=0.15, mix=mix, split=split, seed=5, hard_threshold=0.3)
    check_consistency(out, A)
    rows = np.flatnonzero(out.noised)
    votes_for_noisy, votes_for_gold = V[rows, out.noisy[rows]], V[rows, y[rows]]
    kind = out.kind[rows]
    assert np.all(votes_for_noisy >= 1)
    assert np.all(votes_for_noisy[kind == "malicious"] == 1)  # exactly one annotator gave it
    hard = kind == "hard"
    assert np.all(votes_for_noisy[hard] >= 0.3 * n_ann[rows][hard] - 1e-9)
    other = V[rows].copy()
    other[np.arange(len(rows)), y[rows]] = -1
    assert np.all(votes_for_noisy[hard] == other[hard].max(axis=1))  # the top non-gold label
    maj = kind == "crowd_majority"
    assert maj.any() and np.all(votes_for_noisy[maj] == V[rows][maj].max(axis=1))
    assert np.all(votes_for_gold[maj] < votes_for_noisy[maj])  # a gold tie would have kept the gold label


@pytest.mark.parametrize("compat", [True, False])
def test_composition_never_noises_an_item_twice(crowd, compat):
    A, y, split = crowd
    mix = {k: 1 / len(KINDS) for k in KINDS}
    out = compose(A, y, K, rate=0.2, mix=mix, split=split, seed=11, transition=PAIRFLIP, hard_threshold=0.3,
                  compat=compat)
    plan = noise_targets(split, 0.2, mix, compat=compat)
    for s in ("train", "val", "test"):
        in_s = split == s
        per_stage = sum(out.info["noised"][s].values())  # what each stage reports it changed
        n = int(in_s.sum())
        total = sum(round(n * 0.2 * mix[k]) for k in KINDS) if compat else int(np.floor(0.2 * n + 0.5))
        assert per_stage == sum(plan[s].values()) == total
        assert (out.noisy[in_s] != y[in_s]).sum() == per_stage  # a re-noised item would make this smaller
        assert out.counts()[s] == {k: plan[s][k] for k in KINDS}
    check_consistency(out, A)


def test_deterministic_per_seed_and_different_across_seeds(crowd):
    A, y, split = crowd
    kw = dict(rate=0.1, mix={"dissenting_worker": 0.5, "dissenting_label": 0.3, "uniform": 0.2}, split=split)
    a, b = compose(A, y, K, seed=7, **kw), compose(A, y, K, seed=7, **kw)
    assert np.array_equal(a.noisy, b.noisy) and np.array_equal(a.kind, b.kind)
    g1 = compose(A, y, K, seed=np.random.default_rng(9), **kw)
    g2 = compose(A, y, K, seed=np.random.default_rng(9), **kw)
    assert np.array_equal(g1.noisy, g2.noisy)
    c = compose(A, y, K, seed=8, **kw)
    assert a.counts() == c.counts()
    assert (a.noised != c.noised).sum() > 50  # other items are chosen
    for kind in ("dissenting_worker", "dissenting_label", "uniform"):
        assert not np.array_equal(a.kind == kind, c.kind == kind)


def test_insufficient_pool_raises_with_needed_available_and_fix():
    y = np.zeros(100, dtype=np.int64)
    A = np.zeros((100, 5), dtype=np.int64)
    A[:3, 0] = 1  # only 3 items have a dissenting annotation
    with pytest.raises(ConfigError, match=r"dissenting_label noise in split 'all' needs 5 items but only 3 are "
                                          r"available.*lower the rate"):
        dissenting_label(A, y, 2, 0.05)
    A[:10, :2] = 1  # 10 items with a 2-of-5 minority: hard gets them first, leaving label only 0 + 0
    with pytest.raises(ConfigError, match=r"needs 2 items but only 0 are available.*10 eligible, 10 already "
                                          r"noised by hard.*smaller share to hard"):
        compose(A, y, 2, rate=0.12, mix={"hard": 10 / 12, "missed": 2 / 12})
    with pytest.raises(ConfigError, match=r"hard noise .* needs 5 items but only 0.*lower hard_threshold"):
        hard_minority(A, y, 2, 0.05, threshold=0.6)
    out = compose(A, y, 2, rate=0.12, mix={"hard": 10 / 12, "missed": 2 / 12}, die_on_insufficient=False)
    assert out.info["noised"]["all"] == {"hard": 10, "dissenting_label": 0}
    assert out.info["targets"]["all"] == {"hard": 10, "dissenting_label": 2}


def test_class_dependent_noise_follows_its_transition():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 2000)
    T = np.array([[0.9, 0.08, 0.02], [0.1, 0.8, 0.1], [0.25, 0.05, 0.7]])
    rate = float(np.mean(1 - np.diag(T)))  # 0.2: the count T implies, so per-class flip rates match T
    out = compose(None, y, 3, rate=rate, mix="class_dependent", transition=T, seed=rng)
    emp = np.array([np.bincount(out.noisy[y == k], minlength=3) / 2000 for k in range(3)])
    assert np.allclose(np.diag(emp), np.diag(T), atol=1e-12)  # per-class counts are exact
    assert np.abs(emp - T).max() < 0.03  # where they go is random (4 sd is ~0.025 for the 0.1 entries)
    assert np.array_equal(out.info["transition"], T)
    check_consistency(out)


def test_uniform_noise_picks_other_classes_uniformly():
    y = np.zeros(8000, dtype=np.int64)
    out = uniform_noise(y, 5, 0.5, seed=1)
    assert out.noised.sum() == 4000 and not np.any(out.noisy[out.noised] == 0)
    assert np.abs(np.bincount(out.noisy[out.noised], minlength=5)[1:] / 4000 - 0.25).max() < 0.03


def hand_built(per_split=100):
    """Per split: 16 items split 3-2 (gold 0 vs minority 2), 4 items split 4-1 (dissent 1), 80 unanimous."""
    rows, y = [], []
    for _ in range(2):
        rows += [[0, 0, 0, 2, 2]] * 16 + [[0, 1, 0, 0, 0]] * 4 + [[0] * 5] * (per_split - 20)
        y += [0] * per_split
    split = np.repeat(["train", "test"], per_split)
    return np.array(rows), np.array(y), split


def test_official_order_gives_the_spec_shares_on_a_hand_built_matrix():
    A, y, split = hand_built()
    # SNLI-5 style [0.8 hard, 0.2 missed] at 20 %: hard must run first and take all 16 3-2 items; dissenting
    # label, which could also use them, is left with exactly the four 4-1 items.
    out = compose(A, y, 3, rate=0.2, split=split, seed=0, **from_official_params("[0.8,0,0,0.2,0.4,true]"))
    for s in ("train", "test"):
        assert out.counts()[s] == {"hard": 16, "dissenting_label": 4}
    block = np.tile(np.repeat(["hard", "dissenting_label", ""], [16, 4, 80]), 2)
    assert np.array_equal(out.kind, block)
    assert np.all(out.noisy[out.kind == "hard"] == 2) and np.all(out.noisy[out.kind == "dissenting_label"] == 1)
    # TweetNLP-5 style: 4 % dissenting worker + 1 % dissenting label of each split
    for compat in (True, False):
        out = compose(A, y, 3, rate=0.05, mix={"rogue": 0.8, "missed": 0.2}, split=split, seed=0, compat=compat)
        assert out.counts() == {s: {"dissenting_worker": 4, "dissenting_label": 1} for s in ("train", "test")}
    # official docstring example: 10,000 items at 0.05 with [0.4, 0.3, 0.2, 0.1] -> 200/150/100/50
    mix = from_official_params([0.4, 0.3, 0.2, 0.1, 0.6, True])["mix"]
    assert noise_targets(np.zeros(10000), 0.05, mix)[0.0] == {
        "hard": 200, "dissenting_worker": 150, "malicious": 100, "dissenting_label": 50}


def test_our_targets_round_half_up_and_shares_add_up():
    t = noise_targets(np.array(["a"] * 1010 + ["b"] * 30), {"a": 0.05, "b": 0.05}, {"worker": 0.8, "label": 0.2},
                      compat=False)
    assert t == {"a": {"dissenting_worker": 41, "dissenting_label": 10},  # round(50.5) = 51 = 40.4 + 10.1 + 1
                 "b": {"dissenting_worker": 2, "dissenting_label": 0}}  # round(1.5) = 2 = 1.6 + 0.4
    with pytest.raises(ConfigError, match=r"missing: \['b'\]"):
        noise_targets(np.array(["a", "b"]), {"a": 0.1}, "uniform")
    with pytest.raises(ConfigError, match="sum to 1"):
        noise_targets(np.array(["a"]), 0.1, {"uniform": 0.5})
    with pytest.raises(ConfigError, match="unknown annotation noise kind 'typo'"):
        noise_targets(np.array(["a"]), 0.1, {"typo": 1.0})


def test_official_targets_round_each_kind_on_its_own_with_pythons_round():
    split = np.array(["a"] * 1010 + ["b"] * 30 + ["c"] * 50 + ["d"] * 70)
    mix = {"worker": 0.8, "label": 0.2}
    official = noise_targets(split, 0.05, mix)  # compat=True is the default
    ours = noise_targets(split, 0.05, mix, compat=False)
    assert official == {"a": {"dissenting_worker": 40, "dissenting_label": 10},  # 40.4 -> 40, 10.1 -> 10: 50, not 51
                        "b": {"dissenting_worker": 1, "dissenting_label": 0},  # 1.2 -> 1, 0.3 -> 0: 1, not 2
                        "c": {"dissenting_worker": 2, "dissenting_label": 0},  # 2.0 -> 2, 0.5 -> 0 (to even)
                        "d": {"dissenting_worker": 3, "dissenting_label": 1}}  # 2.8 -> 3, 0.7 -> 1
    assert ours == {"a": {"dissenting_worker": 41, "dissenting_label": 10},
                    "b": {"dissenting_worker": 2, "dissenting_label": 0},
                    "c": {"dissenting_worker": 2, "dissenting_label": 1},  # round(2.5) = 3 (halves up) = 2.0 + 0.5 + 1
                    "d": {"dissenting_worker": 3, "dissenting_label": 1}}
    one = {"uniform": 1.0}  # a single kind: Python's round(2.5) = 2 vs halves up 3; 3.5 -> 4 either way
    assert noise_targets(split, 0.05, one)["c"] == {"uniform": 2}
    assert noise_targets(split, 0.05, one, compat=False)["c"] == {"uniform": 3}
    assert noise_targets(split, 0.05, one)["d"] == noise_targets(split, 0.05, one, compat=False)["d"] == {"uniform": 4}
    # compose applies them
    y = np.zeros(50, dtype=np.int64)
    A = np.ones((50, 3), dtype=np.int64)  # everyone dissents
    assert compose(A, y, 2, rate=0.05, mix=mix, seed=0).counts() == {"all": {"dissenting_worker": 2}}
    assert compose(A, y, 2, rate=0.05, mix=mix, seed=0, compat=False).counts() == {
        "all": {"dissenting_worker": 2, "dissenting_label": 1}}


def test_official_hard_rule_ties_by_first_column_and_threshold_on_the_columns():
    # 5 annotation columns, gold 0 everywhere, threshold 0.4: the official rule needs >= 0.4 x 5 = 2 votes
    A = np.array([[1, 2, 2, 1, 0],     # 1 and 2 tie (2 votes each): official takes 1 (first seen in column 0)
                  [0, 2, 1, 1, 2],     # tie again: official takes 2 (column 1 before column 2)
                  [0, 0, 2, 2, 0],     # gold 3 votes, minority 2 with 2 votes (a 3-2 split): 2 for both rules
                  [0, 1, -1, -1, -1],  # 1 of the item's 2 annotations (>= 0.8) but 1 of 5 columns (< 2)
                  [0, 0, 0, 0, 1]])    # 1 vote: below the threshold under both rules
    y = np.zeros(5, dtype=np.int64)
    for seed in range(10):
        out = hard_minority(A, y, 3, "all", threshold=0.4, seed=seed)
        assert np.array_equal(out.noisy, [1, 2, 2, 0, 0]) and out.info["hard_base"] == "columns"
    ours = [hard_minority(A, y, 3, "all", threshold=0.4, seed=seed, compat=False) for seed in range(20)]
    assert all(np.array_equal(o.noised, [True, True, True, True, False]) for o in ours)
    assert all(o.noisy[2] == 2 and o.noisy[3] == 1 for o in ours)
    assert {o.noisy[0] for o in ours} == {1, 2} and {o.noisy[1] for o in ours} == {1, 2}  # ties at random
    assert noise_capacity(A, y, 3, kinds=["hard"], hard_threshold=0.4) == {"all": {"hard": 3}}
    assert noise_capacity(A, y, 3, kinds=["hard"], hard_threshold=0.4, compat=False) == {"all": {"hard": 4}}
    assert from_official_params("[1,0,0,0,0.4,true]")["compat"] is True


def test_dissenting_worker_applies_one_annotator_at_a_time():
    n = 300
    y = np.zeros(n, dtype=np.int64)
    A = np.zeros((n, 4), dtype=np.int64)
    for w in range(3):  # annotator w dissents (label w + 1) on items 10w..10w+9 only
        A[10 * w:10 * w + 10, w] = w + 1
    blocks = [set(range(10 * w, 10 * w + 10)) for w in range(3)]
    seen = set()
    for seed in range(6):
        out = dissenting_worker(A, y, 4, 10 / n, seed=seed)
        chosen = set(np.flatnonzero(out.noised).tolist())
        assert chosen in blocks  # one whole worker, not a scatter of dissenting labels
        seen.add(min(chosen))
        out = dissenting_worker(A, y, 4, 15 / n, seed=seed)
        assert sum(len(set(np.flatnonzero(out.noised)) & b) == 10 for b in blocks) == 1
        check_consistency(out, A)
    assert len(seen) > 1  # the worker order is random
    spread = dissenting_label(A, y, 4, 10 / n, seed=0)
    assert set(np.flatnonzero(spread.noised).tolist()) not in blocks


def test_dissenting_label_pool_has_one_entry_per_dissenting_annotation():
    n = 4000
    y = np.zeros(n, dtype=np.int64)
    A = np.zeros((n, 5), dtype=np.int64)
    A[: n // 2, 0] = 1  # 1 dissenter
    A[n // 2:, :4] = 1  # 4 dissenters: 4x the tickets
    out = dissenting_label(A, y, 2, 0.02, seed=0)
    share = out.noised[n // 2:].sum() / out.noised.sum()
    assert 0.7 < share < 0.9  # about 4/5


def test_crowd_majority_ties_and_keep_all():
    A = np.array([[0, 0, 1, 1], [1, 1, 2, 2], [1, 1, 1, 0], [0, 0, 0, 1], [-1, -1, -1, -1]])
    y = np.array([0, 0, 0, 0, 0])
    labels = {tuple(crowd_majority_labels(A, y, 3, seed=s)) for s in range(20)}
    assert {lab[0] for lab in labels} == {0}  # gold in the tie wins
    assert {lab[1] for lab in labels} == {1, 2}  # other ties at random
    assert all(lab[2:] == (1, 0, -1) for lab in labels)
    out = crowd_majority(A, y, 3)  # rate="all" keeps every disagreement (TweetNLP-M)
    assert np.array_equal(out.noised, [False, True, True, False, False]) and out.noisy[2] == 1
    assert noise_capacity(A, y, 3, kinds=["crowd_majority", "hard"], hard_threshold=0.5) == {
        "all": {"crowd_majority": 2, "hard": 3}}


def test_hard_threshold_selects_three_two_splits_only():
    A, y, _ = hand_built(50)
    out = hard_minority(A, y, 3, 32 / 100, threshold=0.4)
    assert np.array_equal(np.flatnonzero(out.noised), np.r_[0:16, 50:66])
    with pytest.raises(ConfigError, match="needs 33 items but only 32"):
        hard_minority(A, y, 3, 33 / 100, threshold=0.4)
    A = A.copy()
    A[:16, 4] = -1  # 3-1 with one missing: 1/4 of the item's annotators, 1/5 of the columns
    assert noise_capacity(A, y, 3, kinds=["hard"], hard_threshold=0.25, compat=False)["all"]["hard"] == 32
    assert noise_capacity(A, y, 3, kinds=["hard"], hard_threshold=0.25, hard_base="columns",
                          compat=False)["all"]["hard"] == 16
    assert noise_capacity(A, y, 3, kinds=["hard"], hard_threshold=0.25)["all"]["hard"] == 16  # official: columns
    assert noise_capacity(A, y, 3, kinds=["hard"], hard_threshold=0.25, hard_base="item")["all"]["hard"] == 32


def test_inputs_are_validated():
    y = np.zeros(4, dtype=np.int64)
    with pytest.raises(ConfigError, match="annotations must lie in 0..1"):
        dissenting_label(np.full((4, 2), 5), y, 2, 0.5)
    with pytest.raises(ConfigError, match="need the annotation matrix"):
        compose(None, y, 2, rate=0.5, mix="worker")
    with pytest.raises(ConfigError, match="give rate="):
        compose(None, y, 2, mix="uniform")
    with pytest.raises(ConfigError, match="only with a mix of a single kind"):
        compose(np.zeros((4, 2), dtype=int), y, 2, rate="all", mix={"worker": 0.5, "label": 0.5})
    with pytest.raises(ConfigError, match="needs transition="):
        compose(None, y, 2, rate=0.5, mix="class_dependent")
    A = np.array([[0, np.nan], [1, 1], [np.nan, np.nan], [0, 1]])
    out = dissenting_label(A, y, 2, 0.5)  # NaN = missing
    assert np.array_equal(out.noised, [False, True, False, True])


def test_trace_transition_is_row_stochastic_with_the_trace():
    T = trace_transition(3, 0.2, prior=[0.5, 0.2, 0.3], seed=1)
    assert np.allclose(T.sum(axis=1), 1) and np.trace(T) == pytest.approx(3 * 0.8)


def test_trace_transition_over_the_classes_present():
    # class 2 has no items (a subsample): cleanlab rejects every matrix for a zero prior, so the matrix is drawn
    # over classes 0 and 1 (trace 2 x 0.8) and class 2 keeps an identity row and receives no flips
    T = trace_transition(3, 0.2, prior=[0.6, 0.4, 0.0], seed=1)
    assert np.allclose(T.sum(axis=1), 1)
    assert np.array_equal(T[2], [0, 0, 1]) and np.all(T[:2, 2] == 0)
    assert T[0, 0] + T[1, 1] == pytest.approx(2 * 0.8)
    y = np.repeat([0, 1], [600, 400])
    out = compose(None, y, 3, rate=0.2, mix="class_dependent", transition=T, seed=0)
    assert out.noised.sum() == 200 and not np.any(out.noisy == 2)
    with pytest.raises(ConfigError, match=r"at least 2 classes; the prior gives items only to class \[1\] of 3"):
        trace_transition(3, 0.2, prior=[0, 5, 0])


def test_explicit_targets_override_rate_and_mix():
    A, y, split = hand_built()
    out = compose(A, y, 3, split=split, seed=1, targets={"train": {"hard": 3, "missed": 2}, "test": {"uniform": 7}})
    assert out.counts() == {"train": {"hard": 3, "dissenting_label": 2, "uniform": 0},
                            "test": {"hard": 0, "dissenting_label": 0, "uniform": 7}}
    with pytest.raises(ConfigError, match="targets must name every split"):
        compose(A, y, 3, split=split, targets={"train": {"hard": 3}})
