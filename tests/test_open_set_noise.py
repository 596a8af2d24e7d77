"""NoisywikiHow's open-set nearest-neighbour noise (shared.noise.open_set)."""
import numpy as np
import pytest

from shared.errors import ConfigError, DataFormatError
from shared.noise import nearest_open_set, open_set_noise, round_half_up, select_hard

SOURCES = np.array(["SC"] * 50 + ["BCC"] * 30 + ["TC"] * 20)


def _unit(V):
    return V / np.linalg.norm(V, axis=1, keepdims=True)


def _brute_nearest(X, P, item_groups=None, pool_groups=None):
    sims = _unit(X) @ _unit(P).T
    if item_groups is not None:
        allowed = np.array([[g is None or g == h for h in pool_groups] for g in item_groups])
        sims = np.where(allowed, sims, -np.inf)
    index = sims.argmax(axis=1)
    return index, sims[np.arange(len(X)), index]


def _brute_hard(score, sources, counts):
    hard = np.zeros(len(score), dtype=bool)
    for s, k in counts.items():
        hard[sorted(np.flatnonzero(sources == s), key=lambda i: (-score[i], i))[:k]] = True
    return hard


@pytest.fixture
def toy(rng):
    """Items of 6 classes under 3 parents (class c has parent c // 2) and an open-set pool of 9 categories
    (ids 6..14, parent (id - 6) // 3), disjoint from the item labels; vectors cluster by parent."""
    parent_centre = rng.normal(size=(3, 16)) * 3
    labels = rng.integers(0, 6, 300)
    item_parents = labels // 2
    pool_category = rng.integers(6, 15, 120)
    pool_parents = (pool_category - 6) // 3
    items = parent_centre[item_parents] + rng.normal(size=(300, 16))
    pool = parent_centre[pool_parents] + rng.normal(size=(120, 16))
    sources = np.array(["SC", "BCC", "TC"])[labels % 3]
    return dict(items=items, labels=labels, item_parents=item_parents, pool=pool, pool_category=pool_category,
                pool_parents=pool_parents, sources=sources)


def _noise(toy, level, **kw):
    return open_set_noise(toy["items"], toy["sources"], toy["pool"], level, item_parents=toy["item_parents"],
                          pool_parents=toy["pool_parents"], **kw)


@pytest.mark.parametrize("level, n, expected", [
    (0.4, 50, 20), (0.1, 25, 3), (0.1, 15, 2), (0.1, 5, 1), (0.1, 4, 0), (0.58, 25, 15), (0.29, 50, 15), (0.0, 9, 0),
])
def test_round_half_up(level, n, expected):
    assert round_half_up(level, n) == expected  # 0.58 * 25 == 14.499999999999998 in floating point


@pytest.mark.parametrize("level, expected", [(0.4, (20, 12, 8)), (0.1, (5, 3, 2)), (0.25, (13, 8, 5)),
                                             (0.05, (3, 2, 1)), (0.0, (0, 0, 0))])
def test_exact_count_per_source_with_half_up_rounding(rng, level, expected):
    hard = select_hard(rng.random(100), SOURCES, level)
    assert tuple(int(hard[SOURCES == s].sum()) for s in ("SC", "BCC", "TC")) == expected


def test_selection_is_the_top_scores_per_source_ties_by_index(rng):
    score = rng.integers(0, 4, 400).astype(float)  # many ties
    sources = rng.choice(["SC", "BCC", "TC"], 400)
    for level in (0.1, 0.35, 0.6):
        counts = {s: round_half_up(level, np.sum(sources == s)) for s in ("SC", "BCC", "TC")}
        assert np.array_equal(select_hard(score, sources, level), _brute_hard(score, sources, counts))
        single = select_hard(score, sources, 0.2, single_source="BCC")
        assert np.array_equal(single, _brute_hard(score, sources, {"BCC": 80}))


def test_single_source_draws_the_total_count_from_one_source(rng):
    hard = select_hard(rng.random(100), SOURCES, 0.1, single_source="TC")
    assert hard.sum() == 10 and hard[SOURCES == "TC"].sum() == 10
    assert select_hard(rng.random(100), SOURCES, 0.2, single_source="TC").sum() == 20  # the whole source
    with pytest.raises(ConfigError, match=r"= 25 noisy items, all from source 'TC', which has only 20.*at most 20/100"):
        select_hard(rng.random(100), SOURCES, 0.25, single_source="TC")
    with pytest.raises(ConfigError, match="unknown noise source 'XX'.*BCC, SC, TC"):
        select_hard(rng.random(100), SOURCES, 0.1, single_source="XX")


def test_nearest_neighbour_matches_brute_force_with_groups_and_chunks(rng):
    X, P = rng.normal(size=(200, 8)), rng.normal(size=(150, 8))
    item_groups = np.array([None if i % 3 else i % 4 for i in range(200)], dtype=object)
    pool_groups = rng.integers(0, 4, 150)
    for groups in ((None, None), (item_groups, pool_groups)):
        expected_index, expected_score = _brute_nearest(X, P, *groups)
        for chunk in (3, 64, 4096):
            index, score = nearest_open_set(X, P, item_groups=groups[0], pool_groups=groups[1], chunk=chunk)
            assert index.dtype == np.int64 and np.array_equal(index, expected_index)
            np.testing.assert_allclose(score, expected_score, rtol=0, atol=1e-12)


def test_nearest_neighbour_ties_go_to_the_lowest_pool_index():
    a, b, c = np.eye(3)
    pool = np.array([b, c, 2 * a, b, a, c, 3 * a])  # a's direction at 2, 4 and 6
    items = np.array([a, b, 5 * a])
    for chunk in (1, 2, 3, 4096):
        index, score = nearest_open_set(items, pool, chunk=chunk)
        assert index.tolist() == [2, 0, 2] and np.allclose(score, 1)
        index, _ = nearest_open_set(items, pool, item_groups=np.array(["g", None, "g"], dtype=object),
                                    pool_groups=np.array(list("hhhggg") + ["g"]), chunk=chunk)
        assert index.tolist() == [4, 0, 4]  # a-direction rows of group g: 4 and 6


def test_sc_items_search_only_their_parents_pool_rows(toy):
    toy = dict(toy, items=toy["items"] + 4 * np.random.default_rng(1).normal(size=toy["items"].shape))  # blur parents
    noise = _noise(toy, 0.4)
    sc = toy["sources"] == "SC"
    assert np.array_equal(toy["pool_parents"][noise.neighbour[sc]], toy["item_parents"][sc])
    index, score = _brute_nearest(toy["items"], toy["pool"],
                                  [p if s else None for p, s in zip(toy["item_parents"], sc)], toy["pool_parents"])
    assert np.array_equal(noise.neighbour, index) and np.allclose(noise.score, score)
    unrestricted = nearest_open_set(toy["items"], toy["pool"])[0]
    assert np.array_equal(noise.neighbour[~sc], unrestricted[~sc])
    assert (noise.neighbour[sc] != unrestricted[sc]).any()  # the restriction mattered for some SC items


def test_observed_label_is_never_the_true_category_of_the_swapped_in_text(toy):
    for level in (0.1, 0.6):
        noise = _noise(toy, level)
        assert noise.replaced.any()
        kept_labels = toy["labels"][noise.replaced]
        assert not np.isin(toy["pool_category"][noise.neighbour[noise.replaced]], kept_labels).any()


def test_levels_are_nested_and_results_deterministic(toy):
    masks = [_noise(toy, level).replaced for level in (0.0, 0.1, 0.2, 0.4, 0.6)]
    assert not masks[0].any()
    for smaller, larger in zip(masks, masks[1:]):
        assert not (smaller & ~larger).any() and smaller.sum() < larger.sum()
    first, again, chunked = _noise(toy, 0.4), _noise(toy, 0.4), _noise(toy, 0.4, chunk=3)
    for name in ("replaced", "neighbour", "score"):
        assert np.array_equal(getattr(first, name), getattr(again, name))
    assert np.array_equal(first.replaced, chunked.replaced) and np.array_equal(first.neighbour, chunked.neighbour)


def test_rate_by_source(toy):
    noise = _noise(toy, 0.2)
    rates = noise.rate_by_source(toy["sources"])
    assert set(rates) == {"SC", "BCC", "TC"}
    for s, rate in rates.items():
        n = np.sum(toy["sources"] == s)
        assert rate == round_half_up(0.2, n) / n
    single = _noise(toy, 0.1, single_source="TC")
    n_tc = np.sum(toy["sources"] == "TC")
    assert single.replaced.sum() == 30 and single.rate_by_source(toy["sources"]) == {"BCC": 0, "SC": 0, "TC": 30 / n_tc}


def test_pool_too_small_and_bad_inputs_are_clear_errors(toy):
    no_parent_1 = toy["pool_parents"] != 1  # parent 1 holds the SC class 3
    with pytest.raises(ConfigError, match=r"no event under parent categories \[1\].*too small"):
        open_set_noise(toy["items"], toy["sources"], toy["pool"][no_parent_1], 0.1, item_parents=toy["item_parents"],
                       pool_parents=toy["pool_parents"][no_parent_1])
    with pytest.raises(ConfigError, match="pass item_parents"):
        open_set_noise(toy["items"], toy["sources"], toy["pool"], 0.1)
    pool = toy["pool"].copy()
    pool[3, 5] = np.nan
    with pytest.raises(DataFormatError, match="pool_vectors.*row 3"):
        _noise(dict(toy, pool=pool), 0.1)
    items = toy["items"].copy()
    items[7] = 0
    with pytest.raises(DataFormatError, match="item_vectors.*zero rows.*row 7"):
        _noise(dict(toy, items=items), 0.1)
    with pytest.raises(DataFormatError, match="dimension 16 but pool_vectors 15"):
        _noise(dict(toy, pool=toy["pool"][:, :15]), 0.1)
    with pytest.raises(ConfigError, match="pool is empty"):
        nearest_open_set(toy["items"], np.zeros((0, 16)))
    with pytest.raises(ConfigError, match=r"sources must hold one entry per item.*\(300,\)"):
        _noise(dict(toy, sources=toy["sources"][:-1]), 0.1)
    with pytest.raises(ConfigError, match="item_parents must hold one entry per item"):
        _noise(dict(toy, item_parents=toy["item_parents"][:-1]), 0.1)
    with pytest.raises(ConfigError, match="no pool row has group 9"):
        nearest_open_set(toy["items"][:2], toy["pool"], item_groups=np.array([9, None], dtype=object),
                         pool_groups=toy["pool_parents"])
    for level in (1.0, -0.1, float("nan")):
        with pytest.raises(ConfigError, match=r"noise level must be in \[0, 1\)"):
            _noise(toy, level)
