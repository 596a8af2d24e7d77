"""TinyHow and its noise: structure of the benchmark, exact noise counts, open-set replacements, determinism."""
import hashlib

import numpy as np
import pytest

from noisywikihow.benchmark import SOURCES, Benchmark, Split, noise_name
from noisywikihow.features import TextFeatures, text_features
from noisywikihow.injection import add_noise, real_noise, synthetic_noise
from noisywikihow.tinyhow import N_TAIL, generate
from shared.errors import ConfigError
from shared.noise.open_set import round_half_up


@pytest.fixture(scope="module")
def tiny():
    bench, pool = generate(0)
    texts = [*bench.train.texts, *pool.texts]
    vectors = text_features(texts, "tfidf")  # fast, no model: the injection does not depend on the encoder's kind
    return bench, pool, vectors, add_noise(bench, pool, vectors)


def test_generation_is_deterministic_and_seeded():
    a, pool_a = generate(0)
    b, pool_b = generate(0)
    c, _ = generate(1)
    def digest(bench):
        return hashlib.sha256("|".join(bench.train.texts).encode()).hexdigest()

    assert digest(a) == digest(b) and list(pool_a.texts) == list(pool_b.texts)
    assert digest(a) != digest(c)


def test_structure_long_tail_balanced_eval_and_sources(tiny):
    bench, pool, _, _ = tiny
    counts = bench.counts
    assert counts.max() / counts.min() >= 5  # long-tailed, as Fig. 1
    assert set(np.bincount(bench.val.labels)) == {20} and set(np.bincount(bench.test.labels)) == {20}
    assert sorted(set(bench.source)) == sorted(SOURCES)
    tail = bench.classes_of("TC")
    assert len(tail) == N_TAIL and counts[tail].max() <= np.sort(counts)[N_TAIL - 1]
    # no event belongs to two classes, and no benchmark event is in the open-set pool
    everything = [*bench.train.texts, *bench.val.texts, *bench.test.texts]
    assert len(set(everything)) == len(everything)
    assert not set(everything) & set(pool.texts)
    assert not set(pool.category) & set(bench.classes)
    # the texts look like the release's: lower case, tokenised, ending with " ."
    assert all(t == t.lower() and t.endswith(" .") for t in bench.train.texts[:200])


def test_real_noise_counts_per_source_and_open_set(tiny):
    bench, _, _, noised = tiny
    sources = bench.source[bench.train.labels]
    for level in (0.1, 0.2, 0.4, 0.6):
        noisy = noised.noise[noise_name("real", level)]
        for s in SOURCES:
            assert noisy.is_noisy[sources == s].sum() == round_half_up(level, (sources == s).sum())
        assert np.array_equal(noisy.labels, bench.train.labels)  # labels kept
        swapped = noisy.is_noisy
        assert np.all(noisy.texts[~swapped] == bench.train.texts[~swapped])
        assert not set(noisy.texts[swapped]) & set(bench.train.texts)
        # the observed label is never the true category of the swapped-in text
        assert not np.any(noisy.true_category[swapped] == bench.classes[noisy.labels[swapped]])
        assert not set(noisy.true_category[swapped]) & set(bench.classes)
    # a fixed ranking: levels are nested
    for low, high in [(0.1, 0.2), (0.2, 0.4), (0.4, 0.6)]:
        assert np.all(noised.noise[f"mix_{high:g}"].is_noisy >= noised.noise[f"mix_{low:g}"].is_noisy)


def test_sc_replacements_come_from_sibling_categories(tiny):
    bench, pool, _, noised = tiny
    noisy = noised.noise["mix_0.4"]
    sc = noisy.is_noisy & (bench.source[bench.train.labels] == "SC")
    parent_of = dict(zip(pool.category, pool.parent))
    assert all(parent_of[c] == p for c, p in zip(noisy.true_category[sc], bench.parent[bench.train.labels[sc]]))


def test_single_source_sets_put_all_noise_in_one_source(tiny):
    bench, _, _, noised = tiny
    sources = bench.source[bench.train.labels]
    total = round_half_up(0.1, len(bench.train))
    for name, source in (("neighbor_0.1", "SC"), ("uncommon_0.1", "BCC"), ("tail_0.1", "TC")):
        noisy = noised.noise[name]
        assert noisy.is_noisy.sum() == total
        assert set(sources[noisy.is_noisy]) == {source}


def test_single_source_too_large_is_a_clear_error(tiny):
    bench, pool, vectors, _ = tiny
    with pytest.raises(ConfigError, match="TC"):
        real_noise(bench, pool, vectors, 0.4, single_source="TC")


def test_symmetric_noise_exact_count_and_different_class(tiny):
    bench, _, _, noised = tiny
    for level in (0.1, 0.2, 0.4, 0.6):
        noisy = noised.noise[noise_name("symmetric", level)]
        assert noisy.is_noisy.sum() == round_half_up(level, len(bench.train))
        assert np.all((noisy.labels != bench.train.labels) == noisy.is_noisy)
        assert np.array_equal(noisy.texts, bench.train.texts)
    again = synthetic_noise(bench, 0.4, seed=0)
    assert np.array_equal(again.labels, noised.noise["sym_0.4"].labels)
    assert not np.array_equal(synthetic_noise(bench, 0.4, seed=1).labels, again.labels)


def test_symmetric_targets_are_uniform_over_other_classes():
    K, n = 5, 20000
    labels = np.zeros(n, np.int64)
    split = Split(np.array([f"e{i}" for i in range(n)], object), labels, np.arange(n))
    classes = np.array([f"c{k}" for k in range(K)], object)
    bench = Benchmark("toy", classes, np.array(["SC"] * K, object), np.array([""] * K, object), split, split, split)
    flipped = synthetic_noise(bench, 0.6).labels
    shares = np.bincount(flipped[flipped != 0], minlength=K)[1:] / (flipped != 0).sum()
    assert np.allclose(shares, 1 / (K - 1), atol=0.02)


def test_text_features_lookup_and_unknown_text():
    table = TextFeatures("tfidf", np.array(["a .", "b ."], object), np.eye(2, dtype=np.float32))
    assert np.array_equal(table(["b .", "a .", "b ."]), np.eye(2)[[1, 0, 1]])
    with pytest.raises(ConfigError, match="not encoded"):
        table(["c ."])


def test_benchmark_rejects_out_of_range_labels_and_unknown_sources():
    split = Split(np.array(["x"], object), np.array([3]), np.array([0]))
    classes = np.array(["a", "b"], object)
    with pytest.raises(ConfigError, match=r"\[0, 2\)"):
        Benchmark("bad", classes, np.array(["SC", "TC"], object), np.array(["", ""], object), split, split, split)
    ok = Split(np.array(["x"], object), np.array([1]), np.array([0]))
    with pytest.raises(ConfigError, match="noise source"):
        Benchmark("bad", classes, np.array(["SC", "XX"], object), np.array(["", ""], object), ok, ok, ok)
