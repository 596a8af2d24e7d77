"""NoisywikiHow's noisy training sets made from a clean benchmark: real (open-set) noise and symmetric noise.

The release ships its noisy training sets but not the code that made them; this module makes them for TinyHow
the way Section 3.3 of the paper describes (``shared.noise.open_set``): each training event's nearest open-set
event (cosine of the events' embeddings; for SC classes only among the open-set sibling categories of the same
parent) and its similarity s_x; at level t the top t of each source by s_x get the neighbour's text and keep
their label (``mix_t``); the single-source sets put all round(0.1 n) replacements in one source (``neighbor``,
``uncommon``, ``tail``_0.1, Table 5). Symmetric noise (Section 4.5) flips exactly round(t n) labels, each to a
uniformly chosen different class (``sym_t``; over the whole training set, not class by class as
``shared.noise.symmetric_noise(exact=True)`` counts).

    bench = add_noise(bench, pool, vectors)           # vectors: noisywikihow.features.TextFeatures
    bench.noise["mix_0.4"].is_noisy.mean()            # 0.4 within rounding, per source too
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from noisywikihow.benchmark import LEVELS, SINGLE_SOURCE_FILES, Benchmark, NoisyTrain, noise_name
from shared.noise.open_set import open_set_noise, round_half_up
from shared.seeding import item_rng

SINGLE_SOURCE_LEVEL = 0.1


def real_noise(bench: Benchmark, pool, vectors, level: float, *, single_source: str | None = None) -> NoisyTrain:
    """The training set with open-set noise at ``level`` (all sources, or ``single_source`` only)."""
    train = bench.train
    noise = open_set_noise(vectors(train.texts), bench.source[train.labels], vectors(pool.texts), level,
                           item_parents=bench.parent[train.labels], pool_parents=pool.parent,
                           single_source=single_source)
    swapped = noise.neighbour[noise.replaced]
    texts, category = train.texts.copy(), bench.classes[train.labels].copy()
    texts[noise.replaced], category[noise.replaced] = pool.texts[swapped], pool.category[swapped]
    return NoisyTrain(noise_name("real", level, single_source), "real", texts, train.labels.copy(),
                      noise.replaced.copy(), category)


def synthetic_noise(bench: Benchmark, level: float, *, seed: int = 0) -> NoisyTrain:
    """The training set with exactly round(level n) labels flipped to a uniformly chosen different class."""
    train = bench.train
    rng = item_rng("noisywikihow-symmetric", seed, level)
    flipped = np.zeros(len(train), bool)
    flipped[rng.choice(len(train), round_half_up(level, len(train)), replace=False)] = True
    labels = train.labels.copy()  # a uniformly chosen different class: an offset in 1..K-1
    labels[flipped] = (labels[flipped] + rng.integers(1, bench.num_classes, int(flipped.sum()))) % bench.num_classes
    return NoisyTrain(noise_name("symmetric", level), "symmetric", train.texts.copy(), labels, flipped,
                      bench.classes[train.labels].copy())


def add_noise(bench: Benchmark, pool, vectors, *, levels=LEVELS, seed: int = 0) -> Benchmark:
    """``bench`` with the release's noisy training sets: ``mix_t`` and ``sym_t`` for each level and the three
    single-source sets at 10 %."""
    sets = [real_noise(bench, pool, vectors, t) for t in levels]
    sets += [real_noise(bench, pool, vectors, SINGLE_SOURCE_LEVEL, single_source=s) for s in SINGLE_SOURCE_FILES.values()]
    sets += [synthetic_noise(bench, t, seed=seed) for t in levels]
    meta = {**bench.meta, "noise_encoder": vectors.encoder, "noise_seed": seed}
    return replace(bench, noise={s.name: s for s in sets}, meta=meta)


__all__ = ["SINGLE_SOURCE_LEVEL", "real_noise", "synthetic_noise", "add_noise"]
