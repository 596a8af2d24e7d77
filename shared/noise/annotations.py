"""Label noise on an annotation matrix: synthetic and human-originated (Chong, Hong & Manning, EMNLP 2022).

Inputs shared by every function here:

* ``A`` (n_items, n_annotators) int: ``A[i, a]`` is the class that annotator (column) ``a`` gave item ``i``,
  or -1 where ``a`` did not annotate ``i`` (a float matrix with NaN for "missing" is accepted too). The
  column position is the annotator's identity, as in the official noiser (``label_a{i}`` columns).
* ``clean`` (n,) int in ``0..K-1``: the gold / final labels that get noised.
* ``split`` (n,) of split names (e.g. "train"/"val"/"test"), or None for one split named ``"all"``.
  Every split is noised to its own exact number of items per kind, not a Bernoulli rate (``noise_targets``).
* ``seed``: an int or a ``numpy.random.Generator``; the same seed gives the same noise.
* ``compat``: which rules settle the details the paper leaves open (``noise_targets``, ``hard``).
  ``compat=True`` (default): the official noiser's (``code/human_noiser.py`` of github.com/dcx/lnlfm, which
  produced the paper's benchmarks): each kind's target is ``round(n_split * rate * share)`` on its own, with
  Python's ``round`` (halves to even); ``hard`` takes ties between wrong labels by the first annotation column
  that gave them and counts its threshold in annotation columns. ``compat=False``: ours: the split's total is
  ``round(rate * n_split)`` (halves up), shared among the kinds by largest remainder so the kinds always add
  up to it; ``hard`` breaks ties at random and counts its threshold in the item's own annotations. The two
  differ by one item in some kinds' targets for about a fifth of split sizes at the paper's 80/20 mixes (for
  one kind alone, only where ``rate * n_split`` ends in .5); ``hard``'s eligible items and labels differ only
  where wrong labels tie or annotations are missing, but its random draws differ, so the items picked do too.

Noise kinds, in the order ``compose`` applies them (``KINDS``); an item is never noised twice:

* ``crowd_majority`` — the plurality label of the item's annotations (optionally of k random ones) where it
  differs from the gold label; a tie that includes the gold label counts as gold, other ties are broken at
  random. Items are drawn uniformly among those that disagree (``rate="all"`` keeps all of them: TweetNLP-M).
* ``hard`` — (official ``hard``; SNLI's "minority label of a 3-2 split") the most frequent non-gold
  annotation of the item, eligible if at least ``hard_threshold`` of the annotators gave it (of the annotation
  columns, or of the item's own annotators with ``compat=False``). The pool holds one entry per such
  annotation, so an item whose top wrong label has 3 votes is 3x as likely.
* ``dissenting_worker`` — (official ``rogue``) annotators in random order; each applies all of their
  annotations that disagree with the gold label, to items in random order, until every split reaches its
  target. The column is the worker; datasets without worker ids (SNLI) cannot use it.
* ``malicious`` — (official ``malicious``; unused by the paper's benchmarks) a non-gold label that exactly
  one annotator gave; one pool entry per such annotation.
* ``dissenting_label`` — (official ``missed``) a pool with one entry per annotation that disagrees with
  the gold label, shuffled and walked, skipping items already noised.
* ``class_dependent`` — the exact number of items, spread over classes in proportion to
  ``n_k (1 - T[k, k])`` (largest remainder), each relabelled from the off-diagonal part of ``T[k]``.
* ``uniform`` — the exact number of items chosen uniformly, each given a uniformly chosen *other* class.

The human-originated kinds only ever use a label that some annotator of that item actually gave and that
differs from the gold label. The official order (hard -> rogue -> malicious -> missed) spends the scarcest
pools first; crowd majority (not in the official noiser) goes first and the synthetic kinds, which can
take any item, go last.

    from shared.noise.annotations import compose
    out = compose(A, y, 3, rate=0.05, mix={"dissenting_worker": 0.8, "dissenting_label": 0.2},
                  split=split, seed=42)                      # a TweetNLP-5-style benchmark
    out.noisy, out.clean, out.kind, out.counts()
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from shared.errors import ConfigError, unknown_choice
from shared.noise.classic import check_labels, check_transition_matrix, pairflip_transition, symmetric_transition
from shared.seeding import as_generator

#: Application order of ``compose`` (official: hard -> rogue -> malicious -> missed).
KINDS = ("crowd_majority", "hard", "dissenting_worker", "malicious", "dissenting_label", "class_dependent",
         "uniform")
ANNOTATION_NOISE = {
    "crowd_majority": "plurality label of the annotations where it differs from the gold label",
    "hard": "top non-gold annotation given by >= hard_threshold of the item's annotators (official 'hard')",
    "dissenting_worker": "one annotator at a time applies all their disagreeing labels (official 'rogue')",
    "malicious": "a non-gold label given by exactly one annotator (official 'malicious')",
    "dissenting_label": "a random disagreeing annotation, weighted per annotation (official 'missed')",
    "class_dependent": "new label drawn from the off-diagonal row of a transition matrix T",
    "uniform": "new label drawn uniformly from the other classes",
}
HUMAN_KINDS = frozenset({"crowd_majority", "hard", "dissenting_worker", "malicious", "dissenting_label"})
#: Other accepted names (the official noiser's, and short ones) and the kind each stands for.
ALIASES = {
    "majority": "crowd_majority", "minority": "hard", "hard_minority": "hard", "rogue": "dissenting_worker",
    "worker": "dissenting_worker", "adv": "malicious", "missed": "dissenting_label", "label": "dissenting_label",
    "classdep": "class_dependent", "class": "class_dependent", "symmetric": "uniform",
}
HARD_BASES = ("item", "columns")
#: Where ``compat`` picks the rules, in one line each (for tables and notebooks).
RULES = {True: "official (dcx/lnlfm code/human_noiser.py): per-kind round(n x rate x share), hard ties by "
               "first annotation column, hard threshold x number of columns",
         False: "ours: round(rate x n) per split (halves up) shared by largest remainder, hard ties at random, "
                "hard threshold x the item's annotations"}
_ALL = "all"


@dataclass(frozen=True)
class NoisedLabels:
    """Result of a noising run; all arrays are (n,).

    ``noisy`` and ``clean`` are int64 labels; ``kind`` holds the noise kind of each noised item and "" for
    untouched ones (so ``noisy != clean`` exactly where ``kind != ""``); ``split`` is the split of each item.
    ``info`` holds ``{split: {kind: count}}`` dicts ``targets``, ``available`` (eligible, not yet noised
    items when the kind's turn came) and ``noised``, the ``order`` applied, and the parameters used
    (``transition`` when class-dependent noise ran).
    """

    noisy: np.ndarray
    clean: np.ndarray
    kind: np.ndarray
    split: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def noised(self) -> np.ndarray:
        """Boolean mask (n,) of noised items."""
        return self.kind != ""

    def counts(self) -> dict:
        """``{split: {kind: number of items noised}}``, over every split and the kinds that were applied."""
        kinds = self.info.get("order", sorted(set(self.kind.tolist()) - {""}))
        return {s: {k: int(((self.split == s) & (self.kind == k)).sum()) for k in kinds}
                for s in _unique_in_order(self.split)}

    def rates(self) -> dict:
        """``{split: fraction of the split's items noised}``."""
        return {s: float(self.noised[self.split == s].mean()) for s in _unique_in_order(self.split)}


# ------------------------------------------------------------------------------------------ validation




def check_annotations(A, num_classes: int, n_items: int | None = None) -> np.ndarray:
    """The annotation matrix as int64 (n, m) with -1 for missing; NaN in a float matrix also means missing."""
    A = np.asarray(A)
    if A.ndim != 2:
        raise ConfigError(f"the annotation matrix must be 2-D (n_items, n_annotators), got shape {A.shape}")
    if np.issubdtype(A.dtype, np.floating):
        missing = np.isnan(A)
        if not np.all(np.mod(A[~missing], 1) == 0):
            raise ConfigError("a float annotation matrix may hold only whole class indices and NaN (missing)")
        A = np.where(missing, -1, A)
    elif not (np.issubdtype(A.dtype, np.integer) or A.dtype == bool):
        raise ConfigError(f"the annotation matrix must hold integers (-1 = missing), got dtype {A.dtype}")
    A = A.astype(np.int64)
    if A.size and (A.min() < -1 or A.max() >= num_classes):
        raise ConfigError(f"annotations must lie in 0..{num_classes - 1}, or be -1 for 'did not annotate'; "
                          f"found {A.min()}..{A.max()}")
    if n_items is not None and len(A) != n_items:
        raise ConfigError(f"the annotation matrix has {len(A)} rows but there are {n_items} clean labels")
    return A


def _unique_in_order(values) -> list:
    values = np.asarray(values)
    _, first = np.unique(values, return_index=True)
    return [values[i].item() if hasattr(values[i], "item") else values[i] for i in np.sort(first)]


def _splits(split, n: int) -> tuple[np.ndarray, list, np.ndarray]:
    """(split array (n,), split names in order of appearance, split code per item)."""
    if split is None:
        split = np.full(n, _ALL)
    split = np.asarray(split)
    if split.shape != (n,):
        raise ConfigError(f"split must give one split name per item, shape ({n},), got {split.shape}")
    names = _unique_in_order(split)
    code = np.empty(n, dtype=np.int64)
    for c, s in enumerate(names):
        code[split == s] = c
    return split, names, code


def canonical_kind(kind: str) -> str:
    """The canonical noise-kind name for ``kind`` or one of its ``ALIASES``."""
    if kind in ANNOTATION_NOISE:
        return kind
    if kind in ALIASES:
        return ALIASES[kind]
    raise unknown_choice("annotation noise kind", kind, list(ANNOTATION_NOISE) + list(ALIASES))


def _check_mix(mix) -> dict:
    if isinstance(mix, str):
        mix = {mix: 1.0}
    if not isinstance(mix, Mapping) or not mix:
        raise ConfigError(f"mix must be a dict {{kind: share}} with shares summing to 1, got {mix!r}")
    out: dict = {}
    for k, share in mix.items():
        kind = canonical_kind(k)
        if kind in out:
            raise ConfigError(f"mix names the kind {kind!r} twice (directly or through an alias)")
        if not 0.0 <= float(share) <= 1.0:
            raise ConfigError(f"the share of {k!r} in the mix must be in [0, 1], got {share}")
        out[kind] = float(share)
    if abs(sum(out.values()) - 1.0) > 1e-6:
        raise ConfigError(f"the shares of the mix must sum to 1, got {sum(out.values()):g} for {mix!r}")
    return {k: out[k] for k in KINDS if out.get(k, 0.0) > 0}


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5 + 1e-9))


def _round_official(x: float) -> int:
    return int(round(x))  # Python's round: halves to the even integer, as the official noiser


def noise_targets(split, rate, mix, *, compat: bool = True) -> dict:
    """Exact number of items to noise, ``{split: {kind: count}}``.

    ``compat=True`` (the official noiser, github.com/dcx/lnlfm ``code/human_noiser.py``): each kind's count is
    ``round(n_s * rate_s * share)`` on its own, with Python's ``round`` (halves go to the even integer, on the
    floating-point product computed in that order), so the kinds can add up to one item more or less than
    ``round(rate_s * n_s)``; e.g. 50 items at 5 % with 80/20 shares give 2 + 0 (2.5 x 0.8 = 2, 2.5 x 0.2 = 0.5).
    ``compat=False`` (ours): a split's total is ``round(rate_s * n_s)`` (halves up), shared among the kinds of
    ``mix`` by largest remainder (ties go to the kind applied first), so the per-kind counts always add up to
    it (50 items: 2 + 1). ``rate`` is a float for every split or a dict ``{split: rate}`` naming each split.
    """
    split = np.asarray(split)
    names = _unique_in_order(split)
    mix = _check_mix(mix)
    if isinstance(rate, Mapping):
        unknown = [s for s in rate if s not in names]
        missing = [s for s in names if s not in rate]
        if unknown or missing:
            raise ConfigError(f"rate must give one noise fraction per split; splits present: {names}"
                              + (f"; unknown: {unknown}" if unknown else "")
                              + (f"; missing: {missing}" if missing else ""))
        rates = {s: rate[s] for s in names}
    else:
        rates = {s: rate for s in names}
    out = {}
    for s in names:
        r = float(rates[s])
        if not 0.0 <= r <= 1.0:
            raise ConfigError(f"the noise rate of split {s!r} must be in [0, 1], got {rates[s]}")
        n_s = int((split == s).sum())
        if compat:
            out[s] = {k: _round_official(n_s * r * mix[k]) for k in mix}
            continue
        total = _round_half_up(r * n_s)
        kinds = list(mix)
        quota = np.array([total * mix[k] for k in kinds])
        base = np.floor(quota + 1e-9).astype(np.int64)
        extra = total - int(base.sum())
        frac = quota - base
        for j in sorted(range(len(kinds)), key=lambda j: (-round(frac[j], 9), j))[:max(extra, 0)]:
            base[j] += 1
        out[s] = {k: int(c) for k, c in zip(kinds, base)}
    return out


# ------------------------------------------------------------------------------------------ per-item candidates
def vote_counts(A, num_classes: int) -> np.ndarray:
    """(n, K) int: how many annotators gave each class to each item."""
    A = check_annotations(A, num_classes)
    V = np.zeros((len(A), num_classes), dtype=np.int64)
    rows, cols = np.nonzero(A >= 0)
    np.add.at(V, (rows, A[rows, cols]), 1)
    return V


def crowd_majority_labels(A, clean, num_classes: int, *, k: int | None = None, seed=0) -> np.ndarray:
    """Plurality label (n,) of each item's annotations, -1 for an item nobody annotated.

    Ties: if the gold label is among the most voted labels the result is the gold label, otherwise one of
    the tied labels at random (Chong et al., 2022, App. A). With ``k``, each item's vote uses k of its
    annotations chosen at random (all of them if it has fewer), e.g. k = 3 for the VADER-M stand-in.
    """
    clean = check_labels(clean, num_classes)
    A = check_annotations(A, num_classes, len(clean))
    rng = as_generator(seed)
    n = len(A)
    if k is not None:
        if int(k) < 1:
            raise ConfigError(f"the crowd-majority sample size k must be >= 1, got {k}")
        keys = rng.random(A.shape)
        keys[A < 0] = np.inf
        rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
        A = np.where(rank < int(k), A, -1)
    V = vote_counts(A, num_classes)
    top = V.max(axis=1)
    tied = V == top[:, None]
    pick = np.argmax(np.where(tied, rng.random(V.shape), -1.0), axis=1)
    rows = np.arange(n)
    pick[tied[rows, clean]] = clean[tied[rows, clean]]
    pick[top == 0] = -1
    return pick


def first_columns(A, num_classes: int) -> np.ndarray:
    """(n, K) int: the first annotation column (from the left) that gave each class to each item; m if none."""
    A = check_annotations(A, num_classes)
    first = np.full((len(A), num_classes), A.shape[1], dtype=np.int64)
    for a in range(A.shape[1] - 1, -1, -1):
        rows = np.flatnonzero(A[:, a] >= 0)
        first[rows, A[rows, a]] = a
    return first


def _hard_candidates(V, clean, rng, threshold: float, base: np.ndarray, first: np.ndarray | None = None):
    """Top non-gold label of each item, its vote count, and whether it passes the rule.

    Ties between wrong labels: with ``first`` (the official rule) the label whose first annotation is in the
    leftmost column (the official noiser sorts the item's labels by count, stably, in the order it met them
    column by column), and ``threshold * base`` compared exactly as there; without it, at random, with a
    tolerance of 1e-9 on ``threshold * base``.
    """
    rows = np.arange(len(V))
    wrong = V.astype(np.float64)
    wrong[rows, clean] = -1.0
    top = wrong.max(axis=1)
    tied = wrong == top[:, None]
    key = rng.random(V.shape) if first is None else -first.astype(np.float64)
    label = np.argmax(np.where(tied, key, -np.inf), axis=1)
    count = V[rows, label]
    need = threshold * base if first is not None else threshold * base - 1e-9
    ok = (count >= 1) & (count >= need)
    ok &= label != clean
    return label, np.where(ok, count, 0)


# ------------------------------------------------------------------------------------------ appliers
def _take_per_split(order, code, remaining) -> np.ndarray:
    """The first ``remaining[s]`` items of each split, from distinct items listed in walk order."""
    chosen = [order[code[order] == s][:t] for s, t in enumerate(remaining) if t > 0]
    return np.concatenate(chosen) if chosen else np.empty(0, dtype=np.int64)


def _walk_pool(items, labels, weights, free, code, remaining, rng):
    """Shuffle a pool with ``weights[e]`` entries of (items[e], labels[e]) and walk it, skipping noised items."""
    keep = (weights > 0) & free[items]
    items, labels, weights = items[keep], labels[keep], weights[keep]
    entry = np.repeat(np.arange(len(items)), weights)
    entry = entry[rng.permutation(len(entry))]
    _, first = np.unique(items[entry], return_index=True)
    walk = entry[np.sort(first)]  # one pool entry per item: the first one met in the shuffled pool
    order = items[walk]
    chosen = _take_per_split(order, code, remaining)
    label_of = dict(zip(order.tolist(), labels[walk].tolist()))
    return chosen, np.array([label_of[i] for i in chosen.tolist()], dtype=np.int64)


def _apportion(total: int, weights: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Integers summing to ``total``, proportional to ``weights`` (largest remainder), each <= its cap."""
    alloc = np.zeros(len(weights), dtype=np.int64)
    free = (weights > 0) & (caps > 0)
    remaining = total
    while remaining > 0 and free.any():
        quota = np.zeros(len(weights))
        quota[free] = remaining * weights[free] / weights[free].sum()
        over = free & (quota > caps - alloc)
        if over.any():  # these classes are exhausted: give them everything they have, then share the rest
            remaining -= int((caps - alloc)[over].sum())
            alloc[over] = caps[over]
            free &= ~over
            continue
        base = np.floor(quota + 1e-9).astype(np.int64)
        extra = remaining - int(base[free].sum())
        frac = np.where(free, quota - base, -1.0)
        base[np.argsort(-frac, kind="stable")[:extra]] += 1
        alloc[free] += base[free]
        remaining = 0
    return alloc


def _resolve_transition(transition, num_classes: int) -> np.ndarray:
    if transition is None:
        raise ConfigError("class-dependent noise needs transition=: a (K, K) row-stochastic matrix "
                          "(T[i, j] = P(noisy = j | clean = i)), 'pairflip', or trace_transition(...)")
    if isinstance(transition, str):
        if transition == "pairflip":
            return pairflip_transition(num_classes, 0.5)
        if transition == "symmetric":
            return symmetric_transition(num_classes, 0.5)
        raise unknown_choice("named transition", transition, ["pairflip", "symmetric"])
    T = check_transition_matrix(transition)
    if T.shape != (num_classes, num_classes):
        raise ConfigError(f"the transition matrix must be ({num_classes}, {num_classes}), got {T.shape}")
    return T


def trace_transition(num_classes: int, rate: float, *, prior=None, frac_zero_noise_rates: float = 0.0,
                     seed: int = 0) -> np.ndarray:
    """A random row-stochastic (K, K) transition with trace ``K (1 - rate)``, Northcutt et al.'s generator.

    Wraps ``cleanlab.benchmarking.noise_generation.generate_noise_matrix_from_trace`` (valid_noise_matrix=True,
    ``py = prior``, uniform if None) and transposes its column-stochastic ``P(noisy | true)`` so that
    ``T[i, j] = P(noisy = j | clean = i)``. Note: cleanlab seeds numpy's *global* random state with ``seed``.

    Classes absent from the data (``prior`` 0, e.g. in a subsample): the paper draws the matrix for the data
    being noised, with its class prior (following Northcutt et al. 2021a), and cleanlab's validity check
    divides by each class's prior, so it rejects every matrix when a class has none. A class without items has
    nothing to flip, and a confusion among the data's classes gives no reason to move labels to a class that
    none of its items has; so the matrix is drawn over the K' present classes (prior renormalised, trace
    ``K' (1 - rate)``: the same mean flip rate per class as before), and absent classes get identity rows and
    receive no flips. Fewer than two present classes raise ConfigError.
    """
    from cleanlab.benchmarking.noise_generation import generate_noise_matrix_from_trace

    if not 0.0 < rate < 1.0:
        raise ConfigError(f"the class-dependent noise rate must be in (0, 1), got {rate}")
    K = int(num_classes)
    py = np.full(K, 1.0 / K) if prior is None else np.asarray(prior, dtype=np.float64)
    if py.shape != (K,) or not np.all(np.isfinite(py)) or (py < 0).any() or py.sum() <= 0:
        raise ConfigError(f"prior must be {K} non-negative class shares, got {prior!r}")
    py = py / py.sum()
    present = np.flatnonzero(py > 0)
    if len(present) < 2:
        raise ConfigError(f"class-dependent noise needs items of at least 2 classes; the prior gives items only to "
                          f"class {present.tolist()} of {K}")
    k = len(present)
    M = generate_noise_matrix_from_trace(k, k * (1.0 - rate), py=py[present], valid_noise_matrix=True,
                                         frac_zero_noise_rates=frac_zero_noise_rates, seed=int(seed))
    if M is None:
        raise ConfigError(f"cleanlab found no valid noise matrix with trace {k * (1 - rate):g} for this "
                          "prior; lower the rate or frac_zero_noise_rates")
    T = np.eye(K)
    T[np.ix_(present, present)] = np.asarray(M).T
    return check_transition_matrix(T)


# ------------------------------------------------------------------------------------------ composition
_NEEDS = {
    "crowd_majority": "a crowd plurality label that differs from the gold label",
    "hard": "a non-gold label given by at least hard_threshold of their annotators",
    "dissenting_worker": "an annotator who disagrees with the gold label",
    "malicious": "a non-gold label given by exactly one annotator",
    "dissenting_label": "an annotator who disagrees with the gold label",
    "class_dependent": "a class that the transition matrix lets flip",
    "uniform": "(any item)",
}


def _shortfall_message(kind, s, target, available, eligible, hard_threshold, earlier) -> str:
    taken = eligible - available
    fixes = "lower the rate or this kind's share of the mix"
    if kind == "hard":
        fixes += f", lower hard_threshold (now {hard_threshold:g})"
    if taken:
        fixes += f", give a smaller share to {', '.join(earlier)}"
    fixes += ", or pass die_on_insufficient=False to noise as many as possible"
    why = f" ({eligible} eligible, {taken} already noised by {', '.join(earlier)}, applied first)" if taken else ""
    return (f"{kind} noise in split {s!r} needs {target} items but only {available} are available: items with "
            f"{_NEEDS[kind]} that are not yet noised{why}; {fixes}")


def compose(A, clean, num_classes: int, *, rate=None, mix=None, split=None, seed=0, transition=None,
            hard_threshold: float = 0.4, hard_base: str | None = None, majority_k: int | None = None,
            majority=None, targets: Mapping | None = None, die_on_insufficient: bool = True,
            compat: bool = True) -> NoisedLabels:
    """Noise ``clean`` labels with a mix of kinds, applied in the order ``KINDS``, to exact per-split targets.

    ``A`` (n, m) annotations (-1 = missing; may be None if the mix only has uniform/class-dependent noise);
    ``clean`` (n,) gold labels; ``rate`` a float, ``{split: rate}``, or ``"all"`` to noise every eligible item
    (a one-kind mix only: TweetNLP-M keeps all crowd-majority disagreements); ``mix`` ``{kind: share}`` with
    shares summing to 1 (aliases such as the official ``rogue``/``missed`` accepted), or one kind name.
    ``targets`` ``{split: {kind: count}}`` overrides ``rate``/``noise_targets``. ``transition`` (K, K) is for
    ``class_dependent``; ``hard_threshold`` is the share of annotators that must give the top non-gold label
    for ``hard``, of the item's own annotations (``hard_base="item"``) or of all columns (``"columns"``; the
    same on a full matrix); None follows ``compat``. ``compat=True`` (default) applies the official noiser's
    rules (per-kind rounding of the targets, ``hard`` ties by first column, threshold on the columns);
    ``compat=False`` ours (see the module doc and ``noise_targets``). ``majority_k`` samples k annotations per item for
    ``crowd_majority``; ``majority`` (n,) gives the aggregate labels directly (-1 = none; taken as given, not
    checked against ``A``).
    With ``die_on_insufficient`` (default) a kind that cannot reach its target in a split raises ConfigError;
    otherwise it noises what it can and ``info["noised"]`` shows the shortfall.
    """
    clean = check_labels(clean, num_classes)
    n = len(clean)
    rng = as_generator(seed)
    split, names, code = _splits(split, n)
    if targets is not None:
        if set(targets) != set(names):
            raise ConfigError(f"targets must name every split present, {names}; got {list(targets)}")
        plan = {s: {canonical_kind(k): int(c) for k, c in targets[s].items()} for s in names}
        for s in names:
            if any(c < 0 for c in plan[s].values()) or sum(plan[s].values()) > int((split == s).sum()):
                raise ConfigError(f"targets for split {s!r} must be >= 0 and add up to at most its size")
        kinds = [k for k in KINDS if any(plan[s].get(k, 0) > 0 for s in names)]
    elif rate is None or mix is None:
        raise ConfigError("give rate= (a fraction, {split: fraction} or 'all') and mix= ({kind: share} or a kind), "
                          "or targets= ({split: {kind: count}})")
    elif isinstance(rate, str):
        kinds = list(_check_mix(mix))
        if rate != "all" or len(kinds) != 1:
            raise ConfigError(f"rate={rate!r}: the only word accepted is 'all' (noise every eligible item), "
                              "and only with a mix of a single kind")
        plan = None
    else:
        plan = noise_targets(split, rate, mix, compat=compat)
        kinds = [k for k in KINDS if any(plan[s].get(k, 0) > 0 for s in names)]
    if hard_base is None:
        hard_base = "columns" if compat else "item"
    if hard_base not in HARD_BASES:
        raise unknown_choice("hard_base", hard_base, HARD_BASES)
    if not 0.0 <= hard_threshold <= 1.0:
        raise ConfigError(f"hard_threshold must be in [0, 1], got {hard_threshold}")
    if majority is not None and majority_k is not None:
        raise ConfigError("give either majority= (precomputed aggregate labels) or majority_k=, not both")
    human = [k for k in kinds if k in HUMAN_KINDS and not (k == "crowd_majority" and majority is not None)]
    if human and A is None:
        raise ConfigError(f"the kinds {human} need the annotation matrix A (n_items, n_annotators)")
    if A is not None:
        A = check_annotations(A, num_classes, n)
    if num_classes < 2 and kinds:
        raise ConfigError("noising needs at least 2 classes")

    noisy = clean.copy()
    kind_of = np.full(n, "", dtype=f"<U{max(map(len, KINDS))}")
    info = {"order": kinds, "targets": {s: {} for s in names}, "available": {s: {} for s in names},
            "noised": {s: {} for s in names}, "compat": bool(compat), "rules": RULES[bool(compat)],
            "hard_threshold": hard_threshold, "hard_base": hard_base, "majority_k": majority_k}
    n_split = len(names)
    rows = np.arange(n)
    V = vote_counts(A, num_classes) if A is not None and human else None
    T = None

    for kind in kinds:
        free = kind_of == ""
        # ---- eligibility of every item for this kind (before excluding noised items)
        if kind == "uniform":
            eligible = np.ones(n, dtype=bool)
        elif kind == "class_dependent":
            T = _resolve_transition(transition, num_classes)
            info["transition"] = T
            eligible = (1.0 - np.diag(T))[clean] > 1e-12
        elif kind == "crowd_majority":
            if majority is None:
                maj = crowd_majority_labels(A, clean, num_classes, k=majority_k, seed=rng)
            else:
                maj = np.asarray(majority)
                if maj.shape != (n,) or not np.issubdtype(maj.dtype, np.integer) or \
                        (n and (maj.min() < -1 or maj.max() >= num_classes)):
                    raise ConfigError(f"majority must be (n,) ints in -1..{num_classes - 1} (-1 = no aggregate)")
                maj = maj.astype(np.int64)
            eligible = (maj >= 0) & (maj != clean)
        elif kind == "hard":
            base = (A >= 0).sum(axis=1) if hard_base == "item" else np.full(n, A.shape[1])
            first = first_columns(A, num_classes) if compat else None
            hard_label, hard_weight = _hard_candidates(V, clean, rng, hard_threshold, base, first)
            eligible = hard_weight > 0
        elif kind == "malicious":
            wrong = V.copy()
            wrong[rows, clean] = 0
            eligible = (wrong == 1).any(axis=1)
        else:  # dissenting_label, dissenting_worker
            wrong = V.copy()
            wrong[rows, clean] = 0
            eligible = wrong.sum(axis=1) > 0
        avail = np.bincount(code[eligible & free], minlength=n_split)
        n_eligible = np.bincount(code[eligible], minlength=n_split)
        target = avail.copy() if plan is None else np.array([plan[s].get(kind, 0) for s in names])
        for c, s in enumerate(names):
            info["available"][s][kind] = int(avail[c])
            if target[c] > avail[c] and die_on_insufficient:
                raise ConfigError(_shortfall_message(kind, s, int(target[c]), int(avail[c]), int(n_eligible[c]),
                                                     hard_threshold, kinds[:kinds.index(kind)]))
        remaining = np.minimum(target, avail)
        for c, s in enumerate(names):
            info["targets"][s][kind] = int(target[c])

        # ---- apply
        if kind == "uniform":
            order = rng.permutation(np.flatnonzero(free))
            chosen = _take_per_split(order, code, remaining)
            new = (clean[chosen] + rng.integers(1, num_classes, len(chosen))) % num_classes
        elif kind == "class_dependent":
            weight = 1.0 - np.diag(T)
            parts = []
            for c in range(n_split):
                in_split = free & eligible & (code == c)
                caps = np.bincount(clean[in_split], minlength=num_classes)
                alloc = _apportion(int(remaining[c]), weight * caps, caps)
                for k in np.flatnonzero(alloc):
                    parts.append(rng.choice(np.flatnonzero(in_split & (clean == k)), alloc[k], replace=False))
            chosen = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
            off = T.copy()
            np.fill_diagonal(off, 0.0)
            off /= np.maximum(off.sum(axis=1, keepdims=True), 1e-300)
            cum = np.cumsum(off[clean[chosen]], axis=1)
            u = rng.random(len(chosen)) * cum[:, -1]
            new = np.minimum((u[:, None] >= cum).sum(axis=1), num_classes - 1)
        elif kind == "crowd_majority":
            order = rng.permutation(np.flatnonzero(free & eligible))
            chosen = _take_per_split(order, code, remaining)
            new = maj[chosen]
        elif kind == "hard":
            idx = np.flatnonzero(eligible)
            chosen, new = _walk_pool(idx, hard_label[idx], hard_weight[idx], free, code, remaining, rng)
        elif kind in ("malicious", "dissenting_label"):
            item, label = np.nonzero(wrong > 0)
            weight = wrong[item, label]
            if kind == "malicious":
                weight = (weight == 1).astype(np.int64)
            chosen, new = _walk_pool(item, label, weight, free, code, remaining, rng)
        else:  # dissenting_worker: annotator by annotator, over all splits at once (as the official noiser)
            parts, labels = [], []
            left = remaining.copy()
            for a in rng.permutation(A.shape[1]):
                if left.sum() == 0:
                    break
                items = rng.permutation(np.flatnonzero(A[:, a] >= 0))
                items = items[(kind_of[items] == "") & (A[items, a] != clean[items])]
                take = _take_per_split(items, code, left)
                kind_of[take] = kind  # mark now so the next annotators skip these items
                left -= np.bincount(code[take], minlength=n_split)
                parts.append(take)
                labels.append(A[take, a])
            chosen = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
            new = np.concatenate(labels) if labels else np.empty(0, dtype=np.int64)
        assert np.all(new != clean[chosen]) and len(np.unique(chosen)) == len(chosen)
        noisy[chosen] = new
        kind_of[chosen] = kind
        done = np.bincount(code[chosen], minlength=n_split)
        for c, s in enumerate(names):
            info["noised"][s][kind] = int(done[c])
    return NoisedLabels(noisy=noisy, clean=clean, kind=kind_of, split=split, info=info)


def noise_capacity(A, clean, num_classes: int, *, split=None, kinds=None, transition=None,
                   hard_threshold: float = 0.4, hard_base: str | None = None, majority_k: int | None = None,
                   seed=0, compat: bool = True) -> dict:
    """``{split: {kind: items eligible}}``: the most items each kind could noise if applied alone.

    Use it to choose feasible rates and mixes (kinds applied together share items, so their sum can
    overstate what a composition reaches). ``kinds`` defaults to the human-originated kinds.
    """
    kinds = [canonical_kind(k) for k in (kinds or [k for k in KINDS if k in HUMAN_KINDS])]
    out = None
    for kind in kinds:
        if kind == "class_dependent" and transition is None:
            raise ConfigError("noise_capacity of class_dependent needs transition=")
        res = compose(A, clean, num_classes, rate="all", mix={kind: 1.0}, split=split, seed=seed,
                      transition=transition, hard_threshold=hard_threshold, hard_base=hard_base,
                      majority_k=majority_k, compat=compat)
        if out is None:
            out = {s: {} for s in res.info["available"]}
        for s, avail in res.info["available"].items():
            out[s][kind] = avail[kind]
    return out or {}


def from_official_params(custom_params) -> dict:
    """Keyword arguments for ``compose`` from the official noiser's ``custom_params``.

    ``custom_params`` is the JSON string (or list) ``[hard, rogue, malicious, missed, hard_threshold,
    die_on_insufficient]``; None or "" gives the official default, 100 % missed (dissenting label) with
    threshold 0. Returns ``{"mix", "hard_threshold", "die_on_insufficient", "compat"}`` (``compat=True``: the
    official code's rules for targets and ``hard``).
    """
    if custom_params is None or (isinstance(custom_params, str) and not custom_params.strip()):
        params = [0, 0, 0, 1, 0, True]
    else:
        params = json.loads(custom_params) if isinstance(custom_params, str) else list(custom_params)
    if len(params) != 6:
        raise ConfigError("official custom_params are [hard, rogue, malicious, missed, hard_threshold, "
                          f"die_on_insufficient]; got {len(params)} values: {params!r}")
    hard, rogue, malicious, missed, threshold, die = params
    mix = {"hard": hard, "dissenting_worker": rogue, "malicious": malicious, "dissenting_label": missed}
    return {"mix": {k: float(v) for k, v in mix.items() if v}, "hard_threshold": float(threshold),
            "die_on_insufficient": bool(die), "compat": True}


# ------------------------------------------------------------------------------------------ one-kind wrappers
def dissenting_label(A, clean, num_classes: int, rate, *, split=None, seed=0, **kw) -> NoisedLabels:
    """Dissenting-label noise (official ``missed``) alone; see ``compose``."""
    return compose(A, clean, num_classes, rate=rate, mix={"dissenting_label": 1.0}, split=split, seed=seed, **kw)


def dissenting_worker(A, clean, num_classes: int, rate, *, split=None, seed=0, **kw) -> NoisedLabels:
    """Dissenting-worker noise (official ``rogue``; column = worker) alone; see ``compose``."""
    return compose(A, clean, num_classes, rate=rate, mix={"dissenting_worker": 1.0}, split=split, seed=seed, **kw)


def crowd_majority(A, clean, num_classes: int, rate="all", *, split=None, seed=0, k: int | None = None,
                   majority=None, **kw) -> NoisedLabels:
    """Crowd-majority noise alone; ``rate="all"`` (default) keeps every disagreement (TweetNLP-M)."""
    return compose(A, clean, num_classes, rate=rate, mix={"crowd_majority": 1.0}, split=split, seed=seed,
                   majority_k=k, majority=majority, **kw)


def hard_minority(A, clean, num_classes: int, rate, *, split=None, seed=0, threshold: float = 0.4,
                  **kw) -> NoisedLabels:
    """Hard / minority-label noise (official ``hard``; 3-2 splits of 5 at threshold 0.4) alone."""
    return compose(A, clean, num_classes, rate=rate, mix={"hard": 1.0}, split=split, seed=seed,
                   hard_threshold=threshold, **kw)


def uniform_noise(clean, num_classes: int, rate, *, split=None, seed=0, **kw) -> NoisedLabels:
    """Exactly ``round(rate * n_split)`` items per split get a uniformly chosen other class."""
    return compose(None, clean, num_classes, rate=rate, mix={"uniform": 1.0}, split=split, seed=seed, **kw)


def class_dependent_noise(clean, num_classes: int, rate, transition, *, split=None, seed=0, **kw) -> NoisedLabels:
    """Exactly ``round(rate * n_split)`` items per split, relabelled following the off-diagonal of ``transition``."""
    return compose(None, clean, num_classes, rate=rate, mix={"class_dependent": 1.0}, split=split, seed=seed,
                   transition=transition, **kw)


__all__ = [
    "KINDS", "ANNOTATION_NOISE", "HUMAN_KINDS", "ALIASES", "RULES", "NoisedLabels", "compose", "noise_targets",
    "first_columns",
    "noise_capacity", "from_official_params", "check_annotations", "vote_counts", "crowd_majority_labels",
    "trace_transition", "canonical_kind", "dissenting_label", "dissenting_worker", "crowd_majority",
    "hard_minority", "uniform_noise", "class_dependent_noise",
]
