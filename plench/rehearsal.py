"""Plench's rehearsal data: stand-in PALM ``.mat`` files and a PLCIFAR10 annotation pickle in the real formats.

``write_rehearsal_data(root)`` (called by ``python -m shared.rehearsal ROOT plench``) writes

- the nine PALM tables under ``root/plench/`` with the public copies' file names (``lost.mat``,
  ``Soccer Player.mat``, ``Yahoo! News.mat``, ``italian.mat``, ...): ``data`` (n, d), ``target`` and
  ``partial_target`` (q, n), sparse csc or dense uint8 as the real files store them (``write_palm``). The
  features are ``make_classification`` tables (the generator of the ``synthetic-manyclass`` stand-in) with each
  dataset's real feature dimension and class count, ``PALM_REHEARSAL_ROWS`` rows; the candidate sets are FPS
  sets whose average size is Table 5's, with Table 5's noisy rows (Malagasy, English) and one set equal to the
  label set in Malagasy (the suspected cause of its EXP collapse).
- ``root/plcifar10/plcifar10.pkl`` (``write_plcifar10``): a dict image index -> per-annotator label lists for
  the CIFAR-10 training images under ``root/cifar-10-batches-py`` (written by ``shared.rehearsal`` first),
  from the PLDigits simulated crowd (``shared.noise.partial.simulate_annotators``) run on those images.

The tests use the same writers for their tiny fixtures (one writer per format).
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PALM_REHEARSAL_ROWS = 500
PLCIFAR10_ANNOTATORS = 10
CROWD_CARE = {"carefulness": (0.05, 0.4), "base_rate": 0.02}  # simulate_annotators' options


@dataclass(frozen=True)
class PalmStandIn:
    """One PALM table's stand-in: file name, real feature dimension, classes, Table 5's average |S| and noise
    rate (%), sets equal to the label set, and the storage of the real file."""

    file_name: str
    d: int
    q: int
    avg_size: float
    noise_pct: float = 0.0
    n_full: int = 0
    sparse: bool = True
    uint8_data: bool = False


PALM_STAND_INS = {
    "Lost": PalmStandIn("lost.mat", 108, 16, 2.23),
    "MSRCv2": PalmStandIn("MSRCv2.mat", 48, 23, 3.16),
    "Mirflickr": PalmStandIn("Mirflickr.mat", 1536, 14, 2.76),
    "Birdsong": PalmStandIn("BirdSong.mat", 38, 13, 2.18),
    "Malagasy": PalmStandIn("malagasy.mat", 384, 44, 8.35, noise_pct=0.04, n_full=1),
    "SoccerPlayer": PalmStandIn("Soccer Player.mat", 279, 171, 2.09),
    "Italian": PalmStandIn("italian.mat", 519, 90, 1.60, sparse=False, uint8_data=True),
    "YahooNews": PalmStandIn("Yahoo! News.mat", 163, 219, 1.91),
    "English": PalmStandIn("English.mat", 300, 45, 1.19, noise_pct=0.97),
}


# ------------------------------------------------------------------------------------------ writers (formats)
def write_palm(path, X, S, y, sparse: bool = True, **override) -> Path:
    """A PALM ``.mat`` file: ``data`` = X (n, d), ``target`` = one-hot of y (q, n) and ``partial_target`` = S.T
    (q, n), the label matrices as ``scipy.sparse.csc_matrix`` (float) or dense uint8. ``override`` replaces a
    variable (None drops it), for malformed-file tests."""
    import scipy.io
    import scipy.sparse

    q = S.shape[1]
    target, partial = np.eye(q, dtype=np.uint8)[np.asarray(y)].T, np.asarray(S, dtype=np.uint8).T.copy()
    if sparse:
        target, partial = (scipy.sparse.csc_matrix(m.astype(float)) for m in (target, partial))
    variables = {"data": X, "target": target, "partial_target": partial, **override}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {k: v for k, v in variables.items() if v is not None}, do_compression=True)
    return path


def write_plcifar10(root, annotations: dict, nested: bool = True) -> Path:
    """``root/plcifar10/plcifar10.pkl`` (``nested``, the code's path) or ``root/plcifar10.pkl`` (the readme's):
    the pickled dict image index -> list of per-annotator lists of labels."""
    path = Path(root) / "plcifar10" / "plcifar10.pkl" if nested else Path(root) / "plcifar10.pkl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(annotations))
    return path


def annotations_from_sets(sets) -> dict[int, list[list[int]]]:
    """Per-annotator sets (n, A, q) 0/1 as the pickle's dict; annotators with an empty set are left out."""
    sets = np.asarray(sets)
    return {i: [np.flatnonzero(row).tolist() for row in sets[i] if row.any()] for i in range(len(sets))}


# ------------------------------------------------------------------------------------------ stand-in contents
def palm_stand_in(spec: PalmStandIn, n: int = PALM_REHEARSAL_ROWS, seed: int = 0):
    """Features (n, d) (float64, or 0/1 uint8 for Italian), candidate sets (n, q) uint8 and labels (n,)."""
    from sklearn.datasets import make_classification

    from shared.noise.partial import fps_candidates

    X, y = make_classification(n_samples=n, n_features=spec.d, n_informative=min(24, spec.d), n_redundant=0,
                               n_classes=spec.q, n_clusters_per_class=1, class_sep=1.5, random_state=seed)
    rng = np.random.default_rng(seed)
    S = fps_candidates(y, spec.q, (spec.avg_size - 1) / (spec.q - 1), rng)
    noisy = rng.choice(n, int(np.ceil(n * spec.noise_pct / 100)), replace=False)
    S[noisy, y[noisy]] = 0
    empty = noisy[S[noisy].sum(axis=1) == 0]
    S[empty, (y[empty] + 1) % spec.q] = 1  # a noisy set still holds one (wrong) label
    S[rng.choice(np.setdiff1d(np.arange(n), noisy), spec.n_full, replace=False)] = 1
    X = (X > 0).astype(np.uint8) if spec.uint8_data else X
    return X, S.astype(np.uint8), y.astype(np.int64)


def crowd_annotations(images, labels, seed: int = 0) -> dict[int, list[list[int]]]:
    """PLCIFAR10-style annotations of ``images`` (n, 32, 32, 3) with true ``labels`` (n,): the PLDigits simulated
    crowd (``PLCIFAR10_ANNOTATORS`` annotators) on a 10-component PCA of the pixels, more careful than PLDigits'
    defaults so that the set sizes come nearer PLCIFAR10's (on the rehearsal's 1,000 digits: Aggregate 6.8 labels,
    Vaguest 3.6 with 13 % noise; the paper's 4.87 and 3.49 with 17.6 %), one annotator dropped for a tenth of the
    images (the real pickle has a varying number of sets per image)."""
    from shared.noise.partial import perception_probabilities, simulate_annotators

    X = np.asarray(images, dtype=np.float64).reshape(len(images), -1) / 255
    P = perception_probabilities(X, labels, 10, n_components=10)
    sets = simulate_annotators(P, labels, PLCIFAR10_ANNOTATORS, seed, **CROWD_CARE)
    rng = np.random.default_rng(seed)
    drop = rng.random(len(sets)) < 0.1
    sets[drop, -1] = 0
    return annotations_from_sets(sets)


def write_palm_stand_ins(root, n: int = PALM_REHEARSAL_ROWS) -> list[str]:
    """The nine PALM stand-ins under ``root/plench/``; returns their paths relative to ``root``."""
    written = []
    for spec in PALM_STAND_INS.values():
        X, S, y = palm_stand_in(spec, n)
        path = write_palm(Path(root) / "plench" / spec.file_name, X, S, y, sparse=spec.sparse)
        written.append(str(path.relative_to(root)))
    return written


def write_rehearsal_data(root: Path) -> list[str]:
    """Every Plench-specific file the full profile reads, under ``root`` (CIFAR-10 must already be there)."""
    from shared.datasets.real import load_cifar10

    root = Path(root)
    cifar = load_cifar10(data_dir=root)
    path = write_plcifar10(root, crowd_annotations(cifar.train.X, cifar.train.y))
    return write_palm_stand_ins(root) + [str(path.relative_to(root))]
