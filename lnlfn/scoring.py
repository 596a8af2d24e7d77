"""Label-error scores from out-of-sample probabilities: FML, FME, Confident Learning and the CL overlays.

LNLFN (the paper's Sec. 3) ranks items by the loss of their *given* (possibly noisy) label under a model that
never trained on them. The smoke profile replaces fine-tuning with small heads on frozen features
(``shared.text.encoders``), so a "sweep run" here is one head configuration (``HeadConfig``), and its
out-of-sample probabilities come from either

* **K-fold cross-fitting** over the scored items (each item is predicted by the head trained on the
  other K-1 folds; ``cross_fit_probs``), or
* **a held-out split** (the paper's protocol: train on the noisy train split, score val/test;
  ``holdout_probs``).

``run_sweep`` fits a list of heads one of these two ways and records each head's *validation* accuracy
and loss against the given labels (on ``val`` items, all items by default). Heads are selected by
validation task performance (accuracy, as in the paper's Sec. 6; ties broken by lower loss), or by loss (``by="loss"``).
Then:

* **FML** = loss ranking of the best head (``fml``; ``rank=r`` for the r-th best, for the paper's "average
  of the top-3 models' individual scores" reporting rule),
* **FME** = loss ranking under the average of the top-k heads' probabilities (``fme``, k = 3),
* **CL** = ``cleanlab.filter.find_label_issues`` on some probabilities (``cl``): a flagged set, ranked by
  self-confidence,
* **FML+CL / FME+CL** = CL run on FML's/FME's own probabilities; only the flagged items are hypothesized,
  in descending FML/FME loss (``with_cl``).

Every method returns a ``Detection``: ``scores`` (n,) float64 with **higher = more likely a label error**
(finite, a full ranking, ready for ``shared.metrics.detection``), plus ``n_flagged`` for methods that
hypothesize a fixed set (CL and the overlays): their flagged items are exactly the top ``n_flagged`` of the
ranking, and ``Detection.aupr`` integrates only up to there by default (the paper's truncated evaluation;
``full=True`` integrates the whole ranking, the rest continuing in the same score order).

    sweep = run_sweep(E, noisy, smoke_heads())             # cross-fitted over all items
    dets = detect(sweep, baseline_probs=None)              # {"FML", "FME", "CL", "FML+CL", "FME+CL"}
    dets["FME"].aupr(noisy != clean)

    # the paper's protocol: heads train on the noisy train split, are selected on val, score test
    ev = split != "train"
    sweep = run_sweep(E[ev], noisy[ev], smoke_heads(), train=(E[~ev], noisy[~ev]), val=split[ev] == "val")
    dets = detect(sweep.restrict(split[ev] == "test"))

Expensive fits are cached per head in the artifact cache, keyed by the features, labels, head config, fold
assignment, seed and code (this module and the project modules it imports, e.g. ``shared.seeding``).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np

from shared.cache import ArtifactCache
from shared.errors import ConfigError, unknown_choice
from shared.progress import progress
from shared.seeding import item_seed

HEAD_KINDS = ("logreg", "mlp")
SELECT_BY = ("accuracy", "loss")
CL_FILTERS = ("prune_by_noise_rate", "prune_by_class", "both", "confident_learning", "predicted_neq_given",
              "low_normalized_margin", "low_self_confidence")
CL_RANKS = ("self_confidence", "normalized_margin", "confidence_weighted_entropy")
LOSS_EPS = 1e-12  # probabilities are clipped here before -log, so every loss is finite (<= 27.6)


# ------------------------------------------------------------------------------------------ head configs
@dataclass(frozen=True)
class HeadConfig:
    """One "sweep run" of the linear-probe stand-in: a small classifier head on frozen features.

    Attributes:
        kind: "logreg" (scikit-learn multinomial logistic regression, lbfgs) or "mlp" (one hidden ReLU layer,
            torch, Adam, cross-entropy, fixed number of epochs, no early stopping).
        C: inverse L2 strength of "logreg".
        hidden, lr, epochs, batch_size, weight_decay: the "mlp" head (the paper's sweep varies lr, epochs
            and batch size).
        standardize: z-score the features with the training part's statistics first (sparse input: scale
            only). Off by default: on the unit-norm MiniLM embeddings, z-scoring made the heads overconfident
            (VADER noisy-val loss 0.65-1.3 vs 0.60-0.64) and cost 0.04-0.05 FME AUPR.
        train_fraction: train on this random share of the available training rows (Fig. 2's sweep).
        seed: initialisation, shuffling and subsampling seed (per fold: ``item_seed("lnlfn-head", seed, fold)``).
    """

    kind: str = "logreg"
    C: float = 1.0
    hidden: int = 256
    lr: float = 1e-3
    epochs: int = 20
    batch_size: int = 64
    weight_decay: float = 0.0
    standardize: bool = False
    train_fraction: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if self.kind not in HEAD_KINDS:
            raise unknown_choice("head kind", self.kind, HEAD_KINDS)
        for name in ("C", "lr"):
            if not float(getattr(self, name)) > 0:
                raise ConfigError(f"HeadConfig.{name} must be positive, got {getattr(self, name)!r}")
        for name in ("hidden", "epochs", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"HeadConfig.{name} must be a positive integer, got {value!r}")
        if self.weight_decay < 0:
            raise ConfigError(f"HeadConfig.weight_decay must be >= 0, got {self.weight_decay!r}")
        if not 0 < self.train_fraction <= 1:
            raise ConfigError(f"HeadConfig.train_fraction must be in (0, 1], got {self.train_fraction!r}")

    def params(self) -> dict:
        """The fields that matter for this kind (a JSON-able dict; the cache key and the sweep table)."""
        d = asdict(self)
        drop = ("hidden", "lr", "epochs", "batch_size", "weight_decay") if self.kind == "logreg" else ("C",)
        return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in d.items() if k not in drop}

    @property
    def name(self) -> str:
        frac = "" if self.train_fraction == 1 else f", frac={self.train_fraction:g}"
        if self.kind == "logreg":
            return f"logreg(C={self.C:g}{frac}, seed={self.seed})"
        return (f"mlp(h={self.hidden}, lr={self.lr:.3g}, ep={self.epochs}, bs={self.batch_size}"
                f"{', wd=%g' % self.weight_decay if self.weight_decay else ''}{frac}, seed={self.seed})")


def smoke_heads() -> list[HeadConfig]:
    """The smoke sweep (5 heads): logistic regression with C in {0.3, 1, 3} and two MLP
    heads (256 hidden units, lr 1e-3, 20 epochs, batch 64, Adam) that differ only in their seed.

    On VADER 3-class with 5 % uniform noise (train 5,000 / val 1,000 / test 1,520, 2 seeds) this gives
    FME AUPR 0.560 and FML 0.537 against 0.560 and 0.524 in an earlier prototype of the same setting."""
    return ([HeadConfig("logreg", C=c) for c in (0.3, 1.0, 3.0)]
            + [HeadConfig("mlp", hidden=256, lr=1e-3, epochs=20, batch_size=64, seed=s) for s in (0, 1)])


def random_heads(n: int, *, seed: int = 0, lr_range: tuple[float, float] = (1e-4, 1e-2),
                 epochs: tuple[int, int] = (2, 8), batch_sizes: Sequence[int] = (8, 16, 64, 128),
                 hidden: Sequence[int] = (64, 256), train_fractions: Sequence[float] = (1.0,)) -> list[HeadConfig]:
    """``n`` MLP heads drawn like the paper's sweep (App. D): lr log-uniform in ``lr_range``, integer epochs
    uniform in ``epochs`` (inclusive), batch size from ``batch_sizes``; plus hidden width and training share.

    The paper's lr range (1e-6 to 1e-3) is for fine-tuning a whole transformer; a freshly initialised head
    needs larger steps, hence the default 1e-4 to 1e-2 (pass ``lr_range=(1e-6, 1e-3)`` for the paper's).
    """
    rng = np.random.default_rng(item_seed("lnlfn-random-heads", seed))
    return [HeadConfig("mlp", **draw, hidden=int(rng.choice(hidden)), train_fraction=float(rng.choice(train_fractions)),
                       seed=i) for i, draw in enumerate(draw_sweep(n, rng, lr_range, epochs, batch_sizes))]


def draw_sweep(n: int, rng: np.random.Generator, lr_range: tuple[float, float], epochs: tuple[int, int],
               batch_sizes: Sequence[int]):
    """Yield ``n`` draws of the paper's sweep (App. D): ``{"lr", "epochs", "batch_size"}`` with lr log-uniform in
    ``lr_range``, integer epochs uniform in ``epochs`` (inclusive), batch size uniform over ``batch_sizes``.

    A generator, so a caller can draw its own extra fields from ``rng`` between runs (``random_heads``)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError(f"n must be a positive number of runs, got {n!r}")
    lo, hi = lr_range
    if not 0 < lo <= hi:
        raise ConfigError(f"lr_range must be (low, high) with 0 < low <= high, got {lr_range}")
    if not 1 <= epochs[0] <= epochs[1]:
        raise ConfigError(f"epochs must be (low, high) with 1 <= low <= high, got {epochs}")
    if len(batch_sizes) == 0:
        raise ConfigError("batch_sizes is empty")
    for _ in range(n):
        lr = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        yield {"lr": lr, "epochs": int(rng.integers(epochs[0], epochs[1] + 1)), "batch_size": int(rng.choice(batch_sizes))}


# ------------------------------------------------------------------------------------------ inputs
def _is_sparse(X) -> bool:
    import scipy.sparse as sp

    return sp.issparse(X)


def _features(X, name: str = "X"):
    if _is_sparse(X):
        if X.ndim != 2:
            raise ConfigError(f"{name} must be 2-D (n_items, n_features), got shape {X.shape}")
        return X.tocsr()
    X = np.asarray(X)
    if X.ndim != 2:
        raise ConfigError(f"{name} must be 2-D (n_items, n_features), got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number):
        raise ConfigError(f"{name} must be numeric, got dtype {X.dtype}")
    if not np.isfinite(X).all():
        raise ConfigError(f"{name} contains NaN or inf")
    return X


def _labels(labels, n: int, n_classes: int | None, name: str = "labels") -> tuple[np.ndarray, int]:
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != n:
        raise ConfigError(f"{name} must be 1-D with one label per item ({n}), got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        if np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)):
            y = y.astype(np.int64)
        else:
            raise ConfigError(f"{name} must be integer class ids 0..K-1, got dtype {y.dtype}")
    y = y.astype(np.int64)
    if n and y.min() < 0:
        raise ConfigError(f"{name} must be class ids 0..K-1; found {int(y.min())}")
    k = int(y.max()) + 1 if n_classes is None else int(n_classes)
    if n and y.max() >= k:
        raise ConfigError(f"{name} has class {int(y.max())} but n_classes={k}")
    if k < 2:
        raise ConfigError(f"need at least 2 classes, got {k}")
    return y, k


def _items(items, n: int, name: str = "items") -> np.ndarray:
    """Indices (m,) from a boolean mask (n,) or an index array."""
    a = np.asarray(items)
    if a.dtype == bool:
        if a.shape != (n,):
            raise ConfigError(f"{name} as a mask must have shape ({n},), got {a.shape}")
        return np.flatnonzero(a)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise ConfigError(f"{name} must be a boolean mask or a 1-D array of item indices")
    if len(a) and (a.min() < 0 or a.max() >= n):
        raise ConfigError(f"{name} holds indices outside 0..{n - 1}")
    return a.astype(np.int64)


def array_hash(X) -> str:
    """SHA-256 (16 hex digits) of a dense array or a scipy sparse matrix: shape, dtype and values."""
    digest = hashlib.sha256()
    if _is_sparse(X):
        X = X.tocsr()
        X.sort_indices()
        digest.update(f"csr{X.shape}{X.dtype}".encode())
        for part in (X.data, X.indices, X.indptr):
            digest.update(np.ascontiguousarray(part).tobytes())
    else:
        X = np.ascontiguousarray(X)
        digest.update(f"dense{X.shape}{X.dtype}".encode())
        digest.update(X.tobytes())
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------------------ folds
def make_folds(labels, n_folds: int = 5, *, seed: int = 0) -> np.ndarray:
    """Stratified fold ids (n,) in 0..n_folds-1: every item in exactly one fold, fold sizes within 1.

    Each class's items are shuffled (``item_seed("lnlfn-folds", seed)``) and dealt round-robin, continuing
    the deal across classes, so both class shares and fold sizes are balanced.
    """
    y = np.asarray(labels)
    n = len(y)
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ConfigError(f"n_folds must be an integer >= 2, got {n_folds!r}")
    if n < n_folds:
        raise ConfigError(f"n_folds={n_folds} exceeds the number of items ({n})")
    rng = np.random.default_rng(item_seed("lnlfn-folds", seed))
    folds = np.empty(n, dtype=np.int64)
    offset = 0
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        folds[idx] = (offset + np.arange(len(idx))) % n_folds
        offset += len(idx)
    return folds


# ------------------------------------------------------------------------------------------ heads
def _rows(X, idx):
    return X[idx]


def _standardizer(X_train):
    """(mean, scale) of the training part; sparse input keeps its zeros (mean 0)."""
    if _is_sparse(X_train):
        sq = X_train.multiply(X_train).mean(axis=0)
        mean = np.asarray(X_train.mean(axis=0)).ravel()
        var = np.asarray(sq).ravel() - mean ** 2
        scale = np.sqrt(np.maximum(var, 0))
        scale[scale < 1e-12] = 1.0
        return np.zeros_like(mean), scale
    mean = X_train.mean(axis=0)
    scale = X_train.std(axis=0)
    scale[scale < 1e-12] = 1.0
    return mean, scale


def _apply_standardizer(X, mean, scale):
    if _is_sparse(X):
        import scipy.sparse as sp

        return (X @ sp.diags(1.0 / scale)).tocsr().astype(np.float32)
    return ((X - mean) / scale).astype(np.float32)


def _fit_predict(X_train, y_train, X_eval, config: HeadConfig, n_classes: int, seed: int) -> np.ndarray:
    """Fit one head on (X_train, y_train) and return its probabilities (len(X_eval), n_classes) float64.

    Runs with one BLAS/OpenMP thread: the heads are small, and on a busy 2-core machine multi-threaded BLAS
    made lbfgs 20-30x slower (VADER, 6,000 x 384: 0.2 s vs 2.4-4.7 s wall) and its iteration count
    thread-dependent. One thread also makes the fits reproducible across machines' core counts.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _fit_predict_1thread(X_train, y_train, X_eval, config, n_classes, seed)


def _fit_predict_1thread(X_train, y_train, X_eval, config: HeadConfig, n_classes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if config.train_fraction < 1:
        size = max(n_classes, int(round(config.train_fraction * X_train.shape[0])))
        keep = np.sort(rng.permutation(X_train.shape[0])[:size])
        X_train, y_train = _rows(X_train, keep), y_train[keep]
    if config.standardize:
        mean, scale = _standardizer(X_train)
        X_train, X_eval = _apply_standardizer(X_train, mean, scale), _apply_standardizer(X_eval, mean, scale)
    present = np.unique(y_train)
    out = np.zeros((X_eval.shape[0], n_classes))
    if len(present) == 1:  # degenerate training part: predict its only class
        out[:, present[0]] = 1.0
        return out
    if config.kind == "logreg":
        from sklearn.linear_model import LogisticRegression

        clf = LogisticRegression(C=config.C, max_iter=2000, tol=1e-5)
        clf.fit(X_train, y_train)
        out[:, clf.classes_] = clf.predict_proba(X_eval)
        return out
    return _fit_predict_mlp(X_train, y_train, X_eval, config, n_classes, seed)


def _dense_batch(X, idx):
    import torch

    part = X[idx]
    part = part.toarray() if _is_sparse(part) else part
    return torch.as_tensor(np.asarray(part, dtype=np.float32))


def _fit_predict_mlp(X_train, y_train, X_eval, config: HeadConfig, n_classes: int, seed: int) -> np.ndarray:
    """The MLP head on CPU with one torch thread: its matrices are tiny, and on a busy 2-core machine two
    OpenMP threads spin-waiting on each other made each step 4-80x slower (0.9 ms vs 4-75 ms)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_mlp(X_train, y_train, X_eval, config, n_classes, seed)
    finally:
        torch.set_num_threads(threads)


def _train_mlp(X_train, y_train, X_eval, config: HeadConfig, n_classes: int, seed: int) -> np.ndarray:
    import torch

    gen = torch.Generator().manual_seed(seed % 2**63)
    d = X_train.shape[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed % 2**63)
        net = torch.nn.Sequential(torch.nn.Linear(d, config.hidden), torch.nn.ReLU(),
                                  torch.nn.Linear(config.hidden, n_classes))
    opt = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    y = torch.as_tensor(y_train)
    n = X_train.shape[0]
    dense = None if _is_sparse(X_train) else torch.as_tensor(np.asarray(X_train, dtype=np.float32))
    net.train()
    for _ in range(config.epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, config.batch_size):
            idx = order[start:start + config.batch_size]
            xb = dense[idx] if dense is not None else _dense_batch(X_train, idx.numpy())
            loss = torch.nn.functional.cross_entropy(net(xb), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    out = []
    with torch.no_grad():
        for start in range(0, X_eval.shape[0], 4096):
            xb = _dense_batch(X_eval, np.arange(start, min(start + 4096, X_eval.shape[0])))
            out.append(torch.softmax(net(xb).double(), dim=1).numpy())
    return np.concatenate(out) if out else np.zeros((0, n_classes))


# ------------------------------------------------------------------------------------------ out-of-sample probabilities
def _cache_of(cache) -> ArtifactCache | None:
    if cache is False:
        return None
    return cache if isinstance(cache, ArtifactCache) else ArtifactCache()


@dataclass(frozen=True)
class CrossFit:
    """Out-of-fold probabilities: ``probs`` (n, K) float64, row i from the head that did not see fold ``folds[i]``."""

    probs: np.ndarray
    folds: np.ndarray


def cross_fit_probs(X, labels, config: HeadConfig, *, n_classes: int | None = None, n_folds: int = 5, seed: int = 0,
                    folds=None, cache: ArtifactCache | None | bool = None) -> CrossFit:
    """K-fold cross-fitted probabilities of one head: item i is predicted by the head trained on the other folds.

    Args:
        X: features (n, d), dense or scipy sparse.
        labels: the given (possibly noisy) labels (n,), ints 0..K-1; the heads train on these.
        config: the head.
        n_classes: K (default max label + 1).
        n_folds, seed: the stratified fold assignment (``make_folds(labels, n_folds, seed=seed)``), unless
            ``folds`` (n,) ints 0..F-1 is given.
        cache: an ArtifactCache; None = the default one; False = no caching. The key covers the features,
            labels, head config, fold assignment and seed.
    """
    X = _features(X)
    y, k = _labels(labels, X.shape[0], n_classes)
    folds = make_folds(y, n_folds, seed=seed) if folds is None else np.asarray(folds, dtype=np.int64)
    if folds.shape != y.shape:
        raise ConfigError(f"folds must have one fold id per item ({len(y)}), got shape {folds.shape}")
    ids = np.unique(folds)
    if len(ids) < 2 or ids.min() < 0:
        raise ConfigError(f"folds must hold at least two distinct non-negative fold ids, got {ids.tolist()[:10]}")

    def build() -> dict:
        probs = np.zeros((len(y), k))
        for f in ids:
            held = folds == f
            probs[held] = _fit_predict(_rows(X, ~held), y[~held], _rows(X, held), config, k,
                                       item_seed("lnlfn-head", config.seed, int(f)))
        return {"probs": probs}

    store = _cache_of(cache)
    if store is None:
        return CrossFit(build()["probs"], folds)
    params = {"X": array_hash(X), "labels": array_hash(y), "n_classes": k, "head": config.params(),
              "folds": array_hash(folds), "seed": seed}
    return CrossFit(store.get_or_build("lnlfn-crossfit", params, build, code=[cross_fit_probs])["probs"], folds)


def holdout_probs(X_train, y_train, X_eval, config: HeadConfig, *, n_classes: int | None = None,
                  cache: ArtifactCache | None | bool = None) -> np.ndarray:
    """Probabilities (n_eval, K) of ``X_eval`` from one head trained on the whole of (X_train, y_train).

    The paper's protocol (Sec. 3): train on the noisy train split, score the validation/test split.
    """
    X_train, X_eval = _features(X_train, "X_train"), _features(X_eval, "X_eval")
    if X_train.shape[1] != X_eval.shape[1]:
        raise ConfigError(f"X_train has {X_train.shape[1]} features but X_eval has {X_eval.shape[1]}")
    y, k = _labels(y_train, X_train.shape[0], n_classes, "y_train")

    def build() -> dict:
        return {"probs": _fit_predict(X_train, y, X_eval, config, k, item_seed("lnlfn-head", config.seed, "holdout"))}

    store = _cache_of(cache)
    if store is None:
        return build()["probs"]
    params = {"X_train": array_hash(X_train), "y_train": array_hash(y), "X_eval": array_hash(X_eval),
              "n_classes": k, "head": config.params()}
    return store.get_or_build("lnlfn-holdout", params, build, code=[holdout_probs])["probs"]


# ------------------------------------------------------------------------------------------ sweep
def loss_scores(probs, labels, *, eps: float = LOSS_EPS) -> np.ndarray:
    """Per-item loss of the given label, -log p(y_i | x_i) (n,) float64 (probabilities clipped at ``eps``)."""
    P = np.asarray(probs, dtype=np.float64)
    if P.ndim != 2:
        raise ConfigError(f"probs must be 2-D (n_items, n_classes), got shape {P.shape}")
    y, _ = _labels(labels, P.shape[0], P.shape[1])
    return -np.log(np.clip(P[np.arange(len(y)), y], eps, 1.0))


def ensemble_probs(probs) -> np.ndarray:
    """FME's synthetic distribution: the mean (n, K) of several heads' probabilities ((m, n, K) or a list)."""
    P = np.asarray([np.asarray(p, dtype=np.float64) for p in probs]) if isinstance(probs, (list, tuple)) \
        else np.asarray(probs, dtype=np.float64)
    if P.ndim != 3 or P.shape[0] == 0:
        raise ConfigError(f"expected m >= 1 probability matrices of one shape (m, n, K), got shape {P.shape}")
    return P.mean(axis=0)


@dataclass(frozen=True)
class SweepResult:
    """A head sweep over the same n scored items.

    Attributes:
        configs: the m heads.
        probs: (m, n, K) float64 out-of-sample probabilities of every scored item under every head.
        labels: (n,) the given labels of the scored items (the ones losses are taken against).
        val_accuracy, val_loss: (m,) each head's accuracy and mean loss against the given labels on the
            validation items (selection metrics; they are noisy-label metrics, as in the paper).
        folds: (n,) fold ids when cross-fitted, else None (held-out protocol).
        items: (n,) positions of these items in the sweep's original item list (``restrict`` narrows them).
    """

    configs: tuple
    probs: np.ndarray
    labels: np.ndarray
    val_accuracy: np.ndarray
    val_loss: np.ndarray
    folds: np.ndarray | None = None
    items: np.ndarray = field(default=None)

    def order(self, by: str = "accuracy") -> np.ndarray:
        """Head indices best first: by validation accuracy (ties: lower loss) or by validation loss."""
        if by not in SELECT_BY:
            raise unknown_choice("selection metric", by, SELECT_BY)
        idx = np.arange(len(self.configs))
        if by == "accuracy":
            return np.lexsort((idx, self.val_loss, -self.val_accuracy))
        return np.lexsort((idx, self.val_loss))

    def top(self, k: int = 3, by: str = "accuracy") -> np.ndarray:
        if not 1 <= k <= len(self.configs):
            raise ConfigError(f"k={k} heads requested but the sweep has {len(self.configs)}")
        return self.order(by)[:k]

    def restrict(self, items) -> "SweepResult":
        """The same sweep scored on a subset of its items (e.g. the test split); selection metrics unchanged."""
        idx = _items(items, self.probs.shape[1])
        base = np.arange(self.probs.shape[1]) if self.items is None else self.items
        return replace(self, probs=self.probs[:, idx], labels=self.labels[idx],
                       folds=None if self.folds is None else self.folds[idx], items=base[idx])

    def table(self) -> list[dict]:
        """One row per head: its name, parameters and validation metrics (for a DataFrame)."""
        rank = np.empty(len(self.configs), dtype=int)
        rank[self.order()] = np.arange(1, len(self.configs) + 1)
        return [{"head": c.name, **c.params(), "val_accuracy": float(a), "val_loss": float(loss), "rank": int(r)}
                for c, a, loss, r in zip(self.configs, self.val_accuracy, self.val_loss, rank)]


def run_sweep(X, labels, configs: Iterable[HeadConfig], *, n_classes: int | None = None, n_folds: int = 5,
              seed: int = 0, train: tuple | None = None, val=None, cache: ArtifactCache | None | bool = None,
              desc: str = "head sweep") -> SweepResult:
    """Out-of-sample probabilities of the n items of ``X`` under every head of ``configs``.

    Args:
        X: features (n, d) of the items to score (dense or sparse).
        labels: their given (possibly noisy) labels (n,).
        configs: the heads (``smoke_heads()``, ``random_heads(...)``).
        n_classes: K (default: max label + 1 over all labels seen).
        n_folds, seed: cross-fitting folds (``make_folds``) when ``train`` is None.
        train: ``(X_train, y_train)`` to use the held-out protocol instead: every head trains once on it and
            scores all of ``X`` (no cross-fitting).
        val: the items (mask or indices into X) whose accuracy/loss select heads; default all items. For
            the held-out protocol pass the validation split's positions and restrict to the test split later.
        cache: see ``cross_fit_probs``.
    """
    configs = check_configs(configs, HeadConfig, "smoke_heads()")
    X = _features(X)
    if train is not None:
        X_train = _features(train[0], "X_train")
        seen = np.concatenate([np.asarray(labels).ravel(), np.asarray(train[1]).ravel()])
        k = _labels(seen, len(seen), n_classes)[1]
    else:
        k = n_classes
    y, k = _labels(labels, X.shape[0], k)
    val_idx = np.arange(len(y)) if val is None else _items(val, len(y), "val")
    if len(val_idx) == 0:
        raise ConfigError("val selects no items; head selection needs at least one")
    folds = make_folds(y, n_folds, seed=seed) if train is None else None
    probs = []
    for config in progress(configs, desc=desc, total=len(configs)):
        if train is None:
            probs.append(cross_fit_probs(X, y, config, n_classes=k, folds=folds, seed=seed, cache=cache).probs)
        else:
            probs.append(holdout_probs(X_train, train[1], X, config, n_classes=k, cache=cache))
    P = np.stack(probs)
    acc = (P[:, val_idx].argmax(axis=2) == y[val_idx]).mean(axis=1)
    loss = np.array([loss_scores(p[val_idx], y[val_idx]).mean() for p in P])
    return SweepResult(configs, P, y, acc, loss, folds, np.arange(len(y)))


# ------------------------------------------------------------------------------------------ detections
@dataclass(frozen=True)
class Detection:
    """A label-error ranking of n items.

    Attributes:
        name: "FML", "FME", "CL", "FML+CL", ...
        scores: (n,) float64, higher = more likely an error; finite, a full ranking.
        labels: (n,) the given labels scored.
        probs: (n, K) the probabilities behind the scores.
        flagged: (n,) bool, the items the method hypothesizes when it flags a fixed set (CL, overlays); they
            are exactly the top ``n_flagged`` of the ranking. None: the whole ranking is hypothesized.
        heads: the sweep heads used (indices), empty for external probabilities.
    """

    name: str
    scores: np.ndarray
    labels: np.ndarray
    probs: np.ndarray
    flagged: np.ndarray | None = None
    heads: tuple = ()

    @property
    def n_flagged(self) -> int | None:
        return None if self.flagged is None else int(self.flagged.sum())

    def ranked(self) -> np.ndarray:
        """Hypothesized item indices in inspection order (all n, or the ``n_flagged`` flagged ones)."""
        order = np.argsort(-self.scores, kind="stable")
        return order if self.flagged is None else order[:self.n_flagged]

    def aupr(self, is_error, *, n_errors: int | None = None, full: bool = False,
             truncate_at: int | None = None) -> float:
        """Trapezoid AUPR (``shared.metrics.aupr_trapezoid``) over the hypothesized items.

        For a flagged-set method the curve stops after its ``n_flagged`` items (0.0 if it flags none) unless
        ``full``; recall is over all errors (``n_errors``, default ``is_error.sum()``). ``truncate_at`` (e.g.
        CL's count for IMDB/Amazon-style verification) stops earlier still.
        """
        from shared.metrics.detection import aupr_trapezoid

        stop = None if (full or self.flagged is None) else self.n_flagged
        if truncate_at is not None:
            stop = truncate_at if stop is None else min(stop, truncate_at)
        if stop == 0:
            return 0.0
        err = np.asarray(is_error)
        if n_errors is None:
            n_errors = int(err.astype(bool).sum())
        return aupr_trapezoid(self.scores, err, truncate_at=stop, n_errors=n_errors)


def loss_detection(probs, labels, *, name: str = "loss", heads: tuple = ()) -> Detection:
    """Loss ranking of arbitrary out-of-sample probabilities (n, K)."""
    P = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    return Detection(name, loss_scores(P, y), y.astype(np.int64), P, None, tuple(int(h) for h in heads))


def fml(sweep: SweepResult, *, rank: int = 0, by: str = "accuracy") -> Detection:
    """FML: loss ranking of the best head by validation ``by`` (``rank=r``: the (r+1)-th best)."""
    order = sweep.order(by)
    if not 0 <= rank < len(order):
        raise ConfigError(f"rank={rank} but the sweep has {len(order)} heads")
    h = int(order[rank])
    return loss_detection(sweep.probs[h], sweep.labels, name="FML", heads=(h,))


def fme(sweep: SweepResult, *, k: int = 3, by: str = "accuracy") -> Detection:
    """FME: loss ranking under the mean probabilities of the top-``k`` heads by validation ``by``."""
    heads = sweep.top(k, by)
    return loss_detection(ensemble_probs(sweep.probs[heads]), sweep.labels, name="FME", heads=tuple(heads))


def cl_mask(probs, labels, *, filter_by: str = "prune_by_noise_rate") -> np.ndarray:
    """Confident Learning's flagged set (n,) bool: ``cleanlab.filter.find_label_issues`` (cleanlab 2.x)."""
    from cleanlab.filter import find_label_issues

    if filter_by not in CL_FILTERS:
        raise unknown_choice("CL filter", filter_by, CL_FILTERS)
    P = np.asarray(probs, dtype=np.float64)
    y, _ = _labels(labels, P.shape[0], P.shape[1])
    P = np.clip(P, 0.0, 1.0)
    P = P / P.sum(axis=1, keepdims=True)
    return np.asarray(find_label_issues(y, P, filter_by=filter_by, n_jobs=1), dtype=bool)


def _flagged_first(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Shift the flagged items' scores above every other item's, keeping both groups' internal order."""
    out = np.asarray(scores, dtype=np.float64).copy()
    if mask.any() and (~mask).any():
        gap = out[~mask].max() - out[mask].min()
        out[mask] += max(gap, 0.0) + 1.0
    return out


def cl(probs, labels, *, filter_by: str = "prune_by_noise_rate", rank_by: str = "self_confidence",
       name: str = "CL") -> Detection:
    """Confident Learning as a Detection: the flagged set of ``find_label_issues`` ranked by ``rank_by``
    (``cleanlab.rank.get_label_quality_scores``; score = 1 - quality), then the unflagged items by the same score.

    With ``rank_by="self_confidence"`` the ranking inside the set is the loss ranking of the same probabilities.
    """
    from cleanlab.rank import get_label_quality_scores

    if rank_by not in CL_RANKS:
        raise unknown_choice("CL ranking", rank_by, CL_RANKS)
    P = np.asarray(probs, dtype=np.float64)
    y, _ = _labels(labels, P.shape[0], P.shape[1])
    mask = cl_mask(P, y, filter_by=filter_by)
    Pn = np.clip(P, 0.0, 1.0)
    Pn = Pn / Pn.sum(axis=1, keepdims=True)
    quality = np.asarray(get_label_quality_scores(y, Pn, method=rank_by), dtype=np.float64)
    return Detection(name, _flagged_first(1.0 - quality, mask), y, P, mask)


def with_cl(base: Detection, *, filter_by: str = "prune_by_noise_rate") -> Detection:
    """The CL overlay (FML+CL, FME+CL): CL run on ``base``'s own probabilities; only its flagged items are
    hypothesized, in ``base``'s order (descending loss). The unflagged items follow in ``base``'s order."""
    mask = cl_mask(base.probs, base.labels, filter_by=filter_by)
    return Detection(f"{base.name}+CL", _flagged_first(base.scores, mask), base.labels, base.probs, mask, base.heads)


def detect(sweep: SweepResult, *, k: int = 3, by: str = "accuracy", baseline_probs=None,
           filter_by: str = "prune_by_noise_rate", rank_by: str = "self_confidence") -> dict[str, Detection]:
    """All of Table 3's methods on one sweep: ``{"FML", "FME", "CL", "FML+CL", "FME+CL"}``.

    "CL" runs on ``baseline_probs`` (n, K) (the paper: the non-pretrained baseline's probabilities; pass
    the n-gram sweep's FML probabilities), or on FML's probabilities when None (then, ranked by
    self-confidence, it equals FML+CL).
    """
    f_ml, f_me = fml(sweep, by=by), fme(sweep, k=min(k, len(sweep.configs)), by=by)
    base = f_ml.probs if baseline_probs is None else np.asarray(baseline_probs, dtype=np.float64)
    if base.shape != f_ml.probs.shape:
        raise ConfigError(f"baseline_probs must have shape {f_ml.probs.shape}, got {base.shape}")
    return {"FML": f_ml, "FME": f_me, "CL": cl(base, sweep.labels, filter_by=filter_by, rank_by=rank_by),
            "FML+CL": with_cl(f_ml, filter_by=filter_by), "FME+CL": with_cl(f_me, filter_by=filter_by)}


__all__ = [
    "HEAD_KINDS", "SELECT_BY", "CL_FILTERS", "CL_RANKS", "LOSS_EPS", "HeadConfig", "smoke_heads", "random_heads",
    "draw_sweep",
    "array_hash", "make_folds", "CrossFit", "cross_fit_probs", "holdout_probs", "loss_scores", "ensemble_probs",
    "SweepResult", "run_sweep", "Detection", "loss_detection", "fml", "fme", "cl_mask", "cl", "with_cl", "detect",
]


def check_configs(configs, kind: type, example: str) -> tuple:
    """``configs`` as a tuple, or a ConfigError if it is empty or holds anything but ``kind`` objects."""
    configs = tuple(configs)
    if not configs:
        raise ConfigError(f"configs is empty; pass at least one {kind.__name__} (e.g. {example})")
    bad = [c for c in configs if not isinstance(c, kind)]
    if bad:
        raise ConfigError(f"configs must be {kind.__name__} objects, got {type(bad[0]).__name__}")
    return configs
