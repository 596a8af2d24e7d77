import numpy as np
import pytest

from ciln.benchmark import Benchmark, generate_benchmark, instantiation_summary, load_benchmarks, release_filter
from ciln.splits import gu_five_way_split
from ciln.voters import parse_pool, train_voter
from shared.cache import ArtifactCache
from shared.datasets import load_dataset
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.profiles import Settings


def test_gu_split_sizes_and_disjointness():
    y = np.repeat(np.arange(10), 500)
    parts = gu_five_way_split(y)
    assert {k: len(v) for k, v in parts.items()} == {"clt": 2250, "nlt": 2250, "clv": 250, "nlv": 250}
    joined = np.concatenate(list(parts.values()))
    assert len(np.unique(joined)) == len(y)
    assert all(np.all(np.diff(v) > 0) for v in parts.values())
    assert np.bincount(y[parts["nlt"]]).tolist() == [225] * 10  # stratified
    assert all(np.array_equal(parts[k], gu_five_way_split(y)[k]) for k in parts)


def test_five_way_split_of_too_few_rows_names_the_smallest_class():
    """A class too small for the halved validation part is a DataFormatError naming it and the fix, not sklearn's."""
    y = np.repeat(np.arange(4), [40, 40, 40, 5])
    with pytest.raises(DataFormatError, match="class 3: 5.*use more training rows"):
        gu_five_way_split(y)
    assert sum(map(len, gu_five_way_split(np.repeat(np.arange(4), 40)).values())) == 160


def toy_benchmark() -> Benchmark:
    y = np.array([0, 1, 2, 0])
    clean = np.zeros((2, 4, 3))
    clean[0, np.arange(4), [0, 1, 2, 0]] = 1  # voter 0 always right
    clean[1, np.arange(4), [0, 1, 1, 0]] = 1  # voter 1 wrong on row 2
    corrupted = np.zeros((2, 4, 3))
    corrupted[0, np.arange(4), [1, 1, 2, 0]] = 1
    corrupted[1, np.arange(4), [1, 1, 1, 2]] = 1
    return Benchmark("toy", "cifar10", ("a", "b", "c"), "nlt", ["v0", "v1"], y, clean, {("fog", 1): corrupted})


def test_vote_shares_noise_rate_and_clean_start():
    b = toy_benchmark()
    shares = b.vote_shares(("fog", 1))
    assert np.allclose(shares, [[0, 1, 0], [0, 1, 0], [0, 0.5, 0.5], [0.5, 0, 0.5]])
    # delta = mean(1 - share of true class) = mean(1, 0, 0.5, 0.5) = 0.5 = mean per-voter error
    assert b.noise_rate(("fog", 1)) == pytest.approx(0.5)
    assert b.clean_start_mask().tolist() == [True, True, False, True]
    assert b.noise_rate(("fog", 1), clean_start=True) == pytest.approx(0.5)
    assert b.noise_rate(None) == pytest.approx(0.125)
    labels = b.sampled_labels(("fog", 1), seed=0)
    pick = np.random.default_rng(0).integers(0, 2, 4)
    assert labels.tolist() == [b.votes(("fog", 1))[i, pick[i]] for i in range(4)]
    assert np.allclose(b.mean_softmax(("fog", 1)).sum(1), 1)


def test_release_filter_and_summary():
    b = toy_benchmark()
    table = release_filter(b, min_noise=0.6)
    assert table["released"].tolist() == [False]
    assert release_filter(b, min_noise=0.6, apply=False)["released"].tolist() == [True]
    assert release_filter(b, min_noise=0.3, relative_to_clean=True)["released"].tolist() == [True]
    row = instantiation_summary(b, release_filter(b, 0.1))
    assert row == {"voters": 2, "rows_per_setting": 4, "released_settings": 1, "noise_rate_min": 0.5,
                   "noise_rate_max": 0.5, "min_setting": "fog (1)", "max_setting": "fog (1)"}


def test_pool_entries_and_voter_errors():
    assert parse_pool(["a", {"voter": "b", "epochs": 3}]) == [("a", {}), ("b", {"epochs": 3})]
    with pytest.raises(ConfigError, match="a pool entry must be"):
        parse_pool([3])
    X, y = np.zeros((4, 28, 28), np.uint8), np.array([0, 1, 0, 1])
    with pytest.raises(DataNotFoundError, match="pretrained weights of voter 'deit3_small' not found"):
        train_voter("deit3_small", X, y, X, y, num_classes=2)  # routed to ciln/voters_pretrained.py
    with pytest.raises(ConfigError, match="voter hgb is for tabular data"):
        train_voter("hgb", X, y, X, y, num_classes=2)


def test_generate_benchmark_end_to_end_and_cached(tmp_path, monkeypatch):
    ds = load_dataset("mnist5k")
    small = type(ds)("mnist5k", type(ds.train)(ds.train.X[:600], ds.train.y[:600]),
                     type(ds.test)(ds.test.X[:100], ds.test.y[:100]), ds.classes, ds.modality, ds.source)
    cache = ArtifactCache(tmp_path)
    pool = [{"voter": "tiny_cnn", "epochs": 3}, "logreg_pca"]
    bench = generate_benchmark(small, pool=pool, corruptions=["rotate", "stripe"], severities=(1, 5), cache=cache)
    assert bench.voters == ["tiny_cnn", "logreg_pca"] and len(bench.y) == 270
    assert bench.clean_probs.shape == (2, 270, 10)
    assert bench.noise_rate(("rotate", 5)) > bench.noise_rate(("rotate", 1))
    assert np.allclose(bench.probs[("stripe", 1)], bench.probs[("stripe", 5)])  # deterministic, severity-free
    summary = bench.summary()
    assert list(summary.columns) == ["corruption", "family", "severity", "noise_rate", "noise_rate_C"]

    import ciln.benchmark
    import ciln.voters

    monkeypatch.setattr(ciln.voters, "train_epoch", lambda *a, **k: pytest.fail("voter retrained"))
    monkeypatch.setattr(ciln.benchmark, "corrupt", lambda *a, **k: pytest.fail("setting recomputed"))
    again = generate_benchmark(small, pool=pool, corruptions=["rotate", "stripe"], severities=(1, 5), cache=cache)
    assert all(np.array_equal(again.probs[k], bench.probs[k]) for k in bench.probs)


def test_corruption_options_reach_the_operator_and_the_cache_key(tmp_path, monkeypatch):
    import ciln.benchmark

    ds = load_dataset("mnist32rgb")
    rows = np.random.default_rng(0).permutation(len(ds.train.y))[:300]  # the stand-in is sorted by class
    small = type(ds)("mnist32rgb", type(ds.train)(ds.train.X[rows], ds.train.y[rows]),
                     type(ds.test)(ds.test.X[:50], ds.test.y[:50]), ds.classes, ds.modality, ds.source)
    seen = []
    real = ciln.benchmark.corrupt
    monkeypatch.setattr(ciln.benchmark, "corrupt", lambda *a, **k: seen.append(k["options"]) or real(*a, **k))
    kw = dict(pool=["logreg_pca"], corruptions=["frost"], severities=(1,), cache=ArtifactCache(tmp_path))
    ciln_frost = generate_benchmark(small, **kw)
    cifar10c_frost = generate_benchmark(small, corruption_options={"frost": {"texture_scale": 0.2}}, **kw)
    assert seen == [None, {"texture_scale": 0.2}]  # a different option is a different cache entry
    assert ciln_frost.corruption_options == {} and cifar10c_frost.corruption_options == {"frost": {"texture_scale": 0.2}}
    with pytest.raises(ConfigError, match="takes no option 'swap'"):
        generate_benchmark(small, corruption_options={"frost": {"swap": "copy"}}, **kw)
    cfg = Settings(datasets={"CIFAR10": "mnist32rgb"}, corruption_options={"CIFAR-10": {}})
    with pytest.raises(ConfigError, match=r"corruption_options names unknown paper dataset\(s\) \['CIFAR-10'\]"):
        load_benchmarks(cfg)


@pytest.mark.parametrize("voter,shape", [("resnet20", (32, 32, 3)), ("resnet20_mnist", (28, 28)), ("wrn28_10", (32, 32, 3)),
                                         ("lenet5", (28, 28)), ("mlp", (28, 28))])
def test_full_profile_torch_voters_train_with_their_recipes(voter, shape, tmp_path, rng):
    X = rng.integers(0, 256, (16, *shape), dtype=np.uint8)
    y = np.arange(16) % 10
    trained = train_voter(voter, X, y, X[:8], y[:8], num_classes=10, device="cpu", cache=ArtifactCache(tmp_path),
                          recipe_overrides={"epochs": 2, "batch": 8})
    probs = trained.predict_proba(X)
    assert probs.shape == (16, 10) and np.allclose(probs.sum(1), 1, atol=1e-5)
