"""LNLFN's noised benchmarks and noising methods, on a ``TextDataset`` with per-annotator labels.

The paper's fixed benchmarks (App. A) and their offline analogues on the VADER crowd stand-in:

=============  ==========================================================  ======================
benchmark      noise (per split, exact counts; ``shared.noise.annotations``)  stands in for
=============  ==========================================================  ======================
tweetnlp5      5 %: 80 % dissenting worker + 20 % dissenting label         (the paper's TweetNLP-5)
tweetnlpM      every crowd-majority label that differs from gold           (the paper's TweetNLP-M)
snli5          5 %: 80 % minority of a 3-2 split (hard, 0.4) + 20 % label  (the paper's SNLI-5)
vader5         as tweetnlp5, on VADER's 10 rater columns                   TweetNLP-5
vaderM         crowd majority of 3 random raters vs the 10-rater gold      TweetNLP-M
vaderH5        as snli5 with hard = >= 4 of 10 raters on one wrong class   SNLI-5
imdb5/amazon5  5 % class-dependent noise on the original labels (Table 4)  (the paper's I-5, A-5)
rt_u5          5 % uniform noise on Rotten Tomatoes snippets              IMDB-5
=============  ==========================================================  ======================

``NOISE_METHODS`` are Fig. 3's five single-kind noisings in the paper's order of hypothesized realism; any of
them (or a benchmark's mix) is applied by ``noise_dataset``. Class-dependent noise draws its transition
matrix with Northcutt et al.'s trace generator (``trace_transition``) from the dataset's class prior (the paper
gives no matrix; a class absent from the dataset keeps an identity row and receives no flips).

Rules: by default (``compat=True``) the details the paper leaves open follow the official noiser
(github.com/dcx/lnlfm, ``code/human_noiser.py``), which produced the paper's benchmarks: each kind's count per
split is ``round(n * rate * share)`` with Python's ``round``, and the ``hard`` noiser breaks ties between wrong
labels by the first annotation column and counts its threshold in annotation columns. ``compat=False`` gives
ours (a split total ``round(rate * n)``, halves up, shared by largest remainder; random ties; the item's own
annotations as the threshold base); see ``shared.noise.annotations``.

    ds = load_text_dataset("vader")
    noised = make_benchmark("vader5", ds)           # NoisedLabels: noisy, clean, kind, split, info
    noised = noise_dataset(ds, "dissenting_label", 0.10, seed=1)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from shared.errors import ConfigError, unknown_choice
from shared.noise.annotations import HUMAN_KINDS, NoisedLabels, canonical_kind, compose, trace_transition
from shared.seeding import item_seed

#: Fig. 3's noising methods, in the paper's order of hypothesized realism (least realistic first).
NOISE_METHODS = ("uniform", "class_dependent", "dissenting_label", "dissenting_worker", "crowd_majority")
METHOD_LABELS = {"uniform": "Uniform", "class_dependent": "Class-based", "dissenting_label": "Dissenting label",
                 "dissenting_worker": "Dissenting worker", "crowd_majority": "Crowd majority", "hard": "Minority (3-2)"}
DEFAULT_NOISE_SEED = 42  # the official noiser's default


@dataclass(frozen=True)
class Benchmark:
    """A fixed noised benchmark: which dataset, which noise, what it stands in for."""

    name: str
    dataset: str
    rate: float | str
    mix: dict
    stands_in_for: str
    options: dict = field(default_factory=dict)  # hard_threshold, majority_k

    @property
    def description(self) -> str:
        rate = "all disagreements" if self.rate == "all" else f"{self.rate:.0%} of each split"
        parts = ", ".join(f"{share:.0%} {METHOD_LABELS.get(kind, kind).lower()}" for kind, share in self.mix.items())
        opts = "".join(f", {k}={v}" for k, v in self.options.items())
        return f"{rate}: {parts}{opts}"


TWEET_MIX = {"dissenting_worker": 0.8, "dissenting_label": 0.2}
SNLI_MIX = {"hard": 0.8, "dissenting_label": 0.2}
BENCHMARKS = {b.name: b for b in (
    Benchmark("tweetnlp5", "tweetnlp", 0.05, TWEET_MIX, "TweetNLP-5"),
    Benchmark("tweetnlpM", "tweetnlp", "all", {"crowd_majority": 1.0}, "TweetNLP-M"),
    Benchmark("snli5", "snli", 0.05, SNLI_MIX, "SNLI-5", {"hard_threshold": 0.4}),
    Benchmark("vader5", "vader", 0.05, TWEET_MIX, "TweetNLP-5"),
    Benchmark("vaderM", "vader", "all", {"crowd_majority": 1.0}, "TweetNLP-M", {"majority_k": 3}),
    Benchmark("vaderH5", "vader", 0.05, SNLI_MIX, "SNLI-5", {"hard_threshold": 0.4}),
    # Table 4's I-5 / A-5: synthetic noise on top of the original labels, which count as clean (Northcutt et al.)
    Benchmark("imdb5", "imdb", 0.05, {"class_dependent": 1.0}, "IMDB-5"),
    Benchmark("amazon5", "amazon", 0.05, {"class_dependent": 1.0}, "Amazon-5"),
    Benchmark("rt_u5", "rt_snippets", 0.05, {"uniform": 1.0}, "IMDB-5"),
)}


def benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise unknown_choice("LNLFN benchmark", name, BENCHMARKS)
    return BENCHMARKS[name]


def class_transition(ds, rate: float, *, seed: int = 0) -> np.ndarray:
    """(K, K) row-stochastic class-dependent noise matrix with trace K (1 - rate), prior = the class shares.

    A class with no item in ``ds`` (a subsample, say) keeps an identity row and receives no flips; the matrix
    is drawn over the classes present, with trace K' (1 - rate) (``shared.noise.annotations.trace_transition``).
    """
    prior = np.bincount(ds.labels, minlength=ds.num_classes) / len(ds)
    return trace_transition(ds.num_classes, min(max(rate, 0.01), 0.99), prior=prior,
                            seed=item_seed("lnlfn-transition", seed) % 2**31)


def noise_dataset(ds, method, rate, *, seed: int = DEFAULT_NOISE_SEED, majority_k: int | None = None,
                  hard_threshold: float = 0.4, die_on_insufficient: bool = True, compat: bool = True) -> NoisedLabels:
    """Noise ``ds.labels`` split by split to exact counts (``shared.noise.annotations.compose``).

    Args:
        ds: a ``TextDataset``; human-originated kinds need ``ds.annotations`` (n, m), -1 = not annotated.
        method: one kind (``NOISE_METHODS``, "hard", aliases such as "rogue") or a mix ``{kind: share}``.
        rate: the fraction of each split to noise, or "all" (every eligible item; one kind only).
        seed: the noise seed (same seed, same labels).
        majority_k: crowd majority over k random annotations per item (VADER-M: 3); None = all of them.
        hard_threshold: share of the annotators that must give the top non-gold label ("hard"): of the
            annotation columns (compat) or of the item's own annotations (ours).
        die_on_insufficient: raise when a split cannot reach its target; False noises what it can and
            ``info["noised"]`` records the shortfall (Fig. 3's crowd-majority curve is capped this way).
        compat: True (default) the official noiser's rules for the per-kind targets and "hard"; False ours
            (module doc).

    Returns: ``NoisedLabels`` (noisy, clean, kind per item, split, info).
    """
    mix = {method: 1.0} if isinstance(method, str) else dict(method)
    kinds = [canonical_kind(k) for k in mix]
    if any(k in HUMAN_KINDS for k in kinds) and ds.annotations is None:
        raise ConfigError(f"{ds.name} has no per-annotator labels, so it cannot take human-originated noise "
                          f"({', '.join(k for k in kinds if k in HUMAN_KINDS)}); use uniform or class_dependent")
    if rate != "all" and float(rate) == 0.0:
        n = len(ds)
        return NoisedLabels(ds.labels.copy(), ds.labels.copy(), np.full(n, "", dtype=object).astype(str),
                            np.asarray(ds.split), {"order": [], "rate": 0.0, "compat": bool(compat)})
    transition = None
    if "class_dependent" in kinds:
        transition = class_transition(ds, 0.2 if rate == "all" else float(rate), seed=seed)
    return compose(ds.annotations, ds.labels, ds.num_classes, rate=rate, mix=mix, split=ds.split, seed=seed,
                   transition=transition, hard_threshold=hard_threshold, majority_k=majority_k,
                   die_on_insufficient=die_on_insufficient, compat=compat)


def make_benchmark(name: str, ds, *, seed: int = DEFAULT_NOISE_SEED, compat: bool = True) -> NoisedLabels:
    """The benchmark ``name`` (``BENCHMARKS``) applied to ``ds`` (a dataset of the benchmark's kind).

    ``compat=True`` (default): the official noiser's rules (module doc), as the paper's benchmarks were built.
    """
    spec = benchmark(name)
    if not (ds.name == spec.dataset or ds.name.startswith(spec.dataset + "_")):
        raise ConfigError(f"benchmark {name} is built on {spec.dataset!r}, but the dataset given is {ds.name!r}")
    return noise_dataset(ds, spec.mix, spec.rate, seed=seed, compat=compat, **spec.options)


def shortfalls(noised: NoisedLabels) -> dict:
    """``{split: {kind: target - noised}}`` for every kind that noised fewer items than its target (the rules'
    counts, ``info["targets"]``: per kind ``round(n x rate x share)`` under the official rules); {} when every
    target was met exactly."""
    counts = noised.counts()
    out = {}
    for split, targets in noised.info["targets"].items():
        short = {k: t - counts[split].get(k, 0) for k, t in targets.items() if counts[split].get(k, 0) != t}
        if short:
            out[split] = short
    return out


def noise_summary(noised: NoisedLabels) -> list[dict]:
    """One row per split: items, noised items, rate and the count per kind (for a DataFrame)."""
    rows = []
    for s, counts in noised.counts().items():
        inside = noised.split == s
        rows.append({"split": s, "items": int(inside.sum()), "noised": int(noised.noised[inside].sum()),
                     "rate": float(noised.noised[inside].mean()), **counts})
    return rows


__all__ = ["NOISE_METHODS", "METHOD_LABELS", "DEFAULT_NOISE_SEED", "Benchmark", "BENCHMARKS", "benchmark",
           "class_transition", "noise_dataset", "make_benchmark", "shortfalls", "noise_summary"]
