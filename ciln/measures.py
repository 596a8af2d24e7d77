"""CILN's measures of a benchmark setting (paper §IV-A2; official code ``analyze/public/metrics.py``, ``tv.py``).

Inputs are vote shares ``p`` (n, K) — the share of the M voters choosing each class, which the official
code uses for every reported number — true labels ``y`` (n,) and, where sampled, hard labels.

- ``nth``: Noise Transition Heterogeneity, (1/N) sum_k sum_{i in I_k} ||p_i - mean_{I_k} p||^2
- ``ccn_floor_analytic`` / ``ccn_floor_simulated``: what nth would be if the M votes of every row were
  drawn i.i.d. from its class's mean vote distribution (class-conditional noise): nth is not 0 under CCN
  with finitely many voters, so the floor is the baseline nth has to beat to show instance dependence
- ``flip_rate_variance`` (the repository's "m1"), ``label_entropy``, ``attractor`` and purity
- ``tv_to_reference``: the total-variation protocol against human annotations (CIFAR-10H), with its
  symmetric and class-conditional baselines and bootstrap intervals
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shared.errors import ConfigError


def _check(shares: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    shares, y = np.asarray(shares, dtype=np.float64), np.asarray(y)
    if shares.ndim != 2 or len(shares) != len(y):
        raise ConfigError(f"vote shares must be (n, K) with n = len(y); got {shares.shape} and {y.shape}")
    return shares, y


def class_means(shares: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(K, K): row k is the mean vote-share vector of the items of class k (zeros for an absent class)."""
    shares, y = _check(shares, y)
    K = shares.shape[1]
    sums = np.zeros((K, K))
    np.add.at(sums, y, shares)
    counts = np.bincount(y, minlength=K)[:, None]
    return np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)


def noise_rate(shares: np.ndarray, y: np.ndarray) -> float:
    """delta = mean over items of 1 - p_i[y_i] (the mean per-voter error)."""
    shares, y = _check(shares, y)
    return float(np.mean(1 - shares[np.arange(len(y)), y]))


def nth(shares: np.ndarray, y: np.ndarray) -> float:
    """Noise Transition Heterogeneity: mean squared distance of each item's shares from its class mean."""
    shares, y = _check(shares, y)
    return float(np.mean(np.sum((shares - class_means(shares, y)[y]) ** 2, axis=1)))


def ccn_floor_analytic(shares: np.ndarray, y: np.ndarray, n_voters: int) -> float:
    """E[nth] under class-conditional noise with M i.i.d. votes: (1/M) sum_k pi_k (1 - ||T_k||^2)."""
    shares, y = _check(shares, y)
    T = class_means(shares, y)
    prior = np.bincount(y, minlength=shares.shape[1]) / len(y)
    return float(np.sum(prior * (1 - np.sum(T**2, axis=1))) / n_voters)


def ccn_floor_simulated(shares: np.ndarray, y: np.ndarray, n_voters: int, sims: int = 5, seed: int = 100) -> float:
    """nth of simulated CCN votes (each row's M votes drawn from its class mean), averaged over ``sims``.

    Simulation s uses ``default_rng(seed + s)`` and draws classes in order 0..K-1, as the official code.
    """
    shares, y = _check(shares, y)
    T, K = class_means(shares, y), shares.shape[1]
    values = []
    for s in range(sims):
        rng = np.random.default_rng(seed + s)
        simulated = np.zeros_like(shares)
        for k in range(K):
            members = np.flatnonzero(y == k)
            if len(members) == 0:
                continue
            votes = rng.choice(K, size=(len(members), n_voters), p=T[k] / T[k].sum())
            simulated[members] = np.stack([np.bincount(v, minlength=K) for v in votes]) / n_voters
        values.append(nth(simulated, y))
    return float(np.mean(values))


def flip_rate_variance(shares: np.ndarray, y: np.ndarray) -> float:
    """The repository's "m1": mean over classes of the variance of items' flip rates 1 - p_i[y_i]."""
    shares, y = _check(shares, y)
    flip = 1 - shares[np.arange(len(y)), y]
    return float(np.mean([flip[y == k].var() for k in np.unique(y)]))


def class_shares(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Share of items carrying each label (K,)."""
    return np.bincount(np.asarray(labels), minlength=num_classes) / len(labels)


def label_entropy(labels: np.ndarray, num_classes: int) -> float:
    """Shannon entropy in bits of the label distribution (log2 K when balanced)."""
    f = class_shares(labels, num_classes)
    f = f[f > 0]
    return float(-(f * np.log2(f)).sum())


def majority_vote(votes: np.ndarray, num_classes: int) -> np.ndarray:
    """Per-row majority of the voters' labels (n, M) -> (n,), ties to the lowest class index."""
    counts = np.stack([np.bincount(v, minlength=num_classes) for v in np.asarray(votes)])
    return counts.argmax(axis=1)


@dataclass(frozen=True)
class Attractor:
    cls: int
    gain_pp: float  # percentage points of label share gained over the clean distribution
    purity: float  # share of rows labelled cls (by majority) that truly are cls
    shares: np.ndarray  # (K,) majority-label shares


def attractor(votes: np.ndarray, y: np.ndarray, num_classes: int) -> Attractor:
    """The class whose (majority-vote) label share grows most over the true distribution (Table III)."""
    labels = majority_vote(votes, num_classes)
    shares = class_shares(labels, num_classes)
    gain = shares - class_shares(y, num_classes)
    a = int(np.argmax(gain))
    assigned = labels == a
    purity = float(np.mean(np.asarray(y)[assigned] == a)) if assigned.any() else float("nan")
    return Attractor(a, float(100 * gain[a]), purity, shares)


# ---------------------------------------------------------------------------------------------- TV protocol
def upsample_reference(counts: np.ndarray, y: np.ndarray, target_rate: float) -> np.ndarray:
    """Human soft labels (n, K) raised to ``target_rate`` noise when theirs is lower (official ``tv.py``).

    Rows are normalised counts; if the reference's noise rate is below ``target_rate``, every wrong-class
    count is multiplied by k = rate * sum_i h_i[y_i] / ((1 - rate) * sum_i sum_{c != y_i} h_ic).
    """
    counts = np.asarray(counts, dtype=np.float64)
    target_rate = min(target_rate, 0.999)  # a reference with no right answers at all is undefined
    idx = np.arange(len(y))
    right = counts[idx, y]
    current = float(np.mean(1 - right / counts.sum(axis=1)))
    if target_rate <= current:
        return counts / counts.sum(axis=1, keepdims=True)
    wrong_total = counts.sum() - right.sum()
    if wrong_total == 0:
        raise ConfigError("the reference has no disagreement to scale up; cannot reach the target noise rate")
    k = target_rate * right.sum() / ((1 - target_rate) * wrong_total)
    scaled = counts * k
    scaled[idx, y] = right
    return scaled / scaled.sum(axis=1, keepdims=True)


def vote_shares(votes: np.ndarray, num_classes: int) -> np.ndarray:
    """Labels of R raters or voters per item (n, R) -> the share of them choosing each class (n, K)."""
    votes = np.asarray(votes)
    if votes.size and (votes.min() < 0 or votes.max() >= num_classes):
        raise ConfigError(f"votes must be class indices in [0, {num_classes}); got values from {votes.min()} to "
                          f"{votes.max()} (PL-IDN rows absent from the release are -1: drop them with "
                          "ciln.plidn.labelled_rows first)")
    out = np.zeros((len(votes), num_classes))
    np.add.at(out, (np.arange(len(votes))[:, None], votes), 1.0)
    return out / votes.shape[1]


def _draw_rows(rng: np.random.Generator, probs: np.ndarray, n_votes: int) -> np.ndarray:
    """``n_votes`` class draws per row of ``probs`` (vectorised inverse-CDF sampling)."""
    cumulative = np.cumsum(probs, axis=1)
    u = rng.random((len(probs), n_votes)) * cumulative[:, -1:]
    return np.minimum((u[:, :, None] > cumulative[:, None, :]).sum(axis=2), probs.shape[1] - 1)


@dataclass(frozen=True)
class TVResult:
    tv: float
    tv_ci95: float  # 1.96 x standard deviation over bootstraps (numpy ddof 0), the paper's "±"
    tv_symmetric: float
    tv_ccn: float
    noise_rate: float


def tv_to_reference(shares: np.ndarray, y: np.ndarray, reference_counts: np.ndarray, *, n_votes: int = 4,
                    n_boot: int = 50) -> TVResult:
    """Mean per-item total variation between benchmark vote shares and a subsampled human reference.

    For bootstrap b: the reference is ``n_votes`` draws per item from the (upsampled) human distribution
    (``default_rng(b)``); the symmetric baseline gives each of ``n_votes`` voters a uniformly random wrong
    class with probability delta (``default_rng(b + 1000)``); the class-conditional baseline draws
    ``n_votes`` labels from the class mean of the shares (``default_rng(b + 2000)``). TV_b = mean_i
    0.5 ||p_i - ref_i||_1. Draws are vectorised, so streams differ from the official per-row loop.
    No rows (e.g. a CILN-C subset when no test row is right for every voter), or a few rows on which the
    reference never disagrees with y while the shares do (so it cannot be raised to delta): every field is NaN.
    """
    shares, y = _check(shares, y)
    if len(y) == 0:
        return TVResult(*[float("nan")] * 5)
    K = shares.shape[1]
    delta = noise_rate(shares, y)
    counts = np.asarray(reference_counts, dtype=np.float64)
    if delta > 0 and counts.sum() == counts[np.arange(len(y)), y].sum():
        return TVResult(*[float("nan")] * 4, delta)
    soft = upsample_reference(reference_counts, y, delta)
    T = class_means(shares, y)
    tv, sym, ccn = [], [], []
    for b in range(n_boot):
        ref = vote_shares(_draw_rows(np.random.default_rng(b), soft, n_votes), K)
        rng = np.random.default_rng(b + 1000)
        flip = rng.random((len(y), n_votes)) < delta
        other = rng.integers(0, K - 1, (len(y), n_votes))
        other = other + (other >= y[:, None])  # skip the true class
        sym_votes = np.where(flip, other, y[:, None])
        ccn_votes = _draw_rows(np.random.default_rng(b + 2000), T[y], n_votes)
        for store, p in ((tv, shares), (sym, vote_shares(sym_votes, K)),
                         (ccn, vote_shares(ccn_votes, K))):
            store.append(0.5 * np.abs(p - ref).sum(axis=1).mean())
    return TVResult(float(np.mean(tv)), float(1.96 * np.std(tv)), float(np.mean(sym)), float(np.mean(ccn)), delta)


def marginal_pca(marginals: dict[str, np.ndarray], reference: str, n_components: int = 2):
    """PCA of class-marginal vectors (Fig. 7); returns (table, explained variance ratios).

    ``marginals`` maps a name (setting, rater tier, reference) to its mean label distribution (K,). The
    table has each name's principal-component coordinates, its Euclidean distance to ``reference`` in that
    space and its rank by distance (the reference itself excluded).
    """
    import pandas as pd
    from sklearn.decomposition import PCA

    if reference not in marginals:
        raise ConfigError(f"reference {reference!r} is not among the marginals")
    names = list(marginals)
    pca = PCA(n_components).fit(np.stack([marginals[n] for n in names]))
    coords = pca.transform(np.stack([marginals[n] for n in names]))
    table = pd.DataFrame(coords, columns=[f"PC{i + 1}" for i in range(n_components)], index=names)
    table["distance"] = np.linalg.norm(coords - coords[names.index(reference)], axis=1)
    others = table.drop(index=reference)
    table["rank"] = others["distance"].rank(method="first").reindex(table.index)
    return table, pca.explained_variance_ratio_
