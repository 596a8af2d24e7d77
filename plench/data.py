"""Plench's partial-label datasets: the real ones (PALM ``.mat`` files, PLCIFAR10) and offline stand-ins.

    from plench.data import load_pll_dataset, plench_split, table5_row
    ds = load_pll_dataset("PLDigits-Vaguest")                   # offline: digits + a simulated crowd
    ds = load_pll_dataset("Lost", data_dir="~/data")            # <data_dir>/Lost.mat (name matched loosely)
    split = plench_split(ds, trial_seed=0)                      # {"train", "val", "test"} row indices

Registry ``PLL_DATASETS`` (``list_pll_datasets()`` shows it): the 9 tabular PALM datasets (Lost, MSRCv2,
Mirflickr, Birdsong, Malagasy, SoccerPlayer, Italian, YahooNews, English), PLCIFAR10_Aggregate/_Vaguest, and
the stand-ins digits-USS, digits-FPS{p} (any p in [0, 1]), PLDigits-Aggregate/-Vaguest and
synthetic-manyclass. Stand-in candidate sets are generated once with seed 0, like a released dataset: only
the splits change with the trial. Tabular features are z-scored over the whole set before splitting, as
PLENCH does (``plench_standardize``). The real files are never shipped: the PALM page and the PLCIFAR10
repository license them for academic use only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np

from shared.datasets.files import check_not_lfs_pointer, load_pickle
from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.noise.partial import (
    aggregate_union, aggregate_vaguest, average_size, crowd_candidates, fps_candidates, pll_noise_rate,
    uss_candidates,
)
from shared.paths import data_dir as resolve_data_dir
from shared.seeding import seed_hash

MODALITIES = ("tabular", "image")
PALM_URL = "https://palm.seu.edu.cn/zhangml/Resources.htm#data"
PLCIFAR10_URL = "https://github.com/wwangwitsel/PLCIFAR10"
LICENCE_NOTE = ("licence: academic use only, proprietary to the authors of the referred literature; "
                "not redistributed with this repository")
PALM_KEYS = ("data", "target", "partial_target")
DIGIT_CLASSES = tuple(str(d) for d in range(10))
DIGITS_SIZE = (1797, 64, 10)  # scikit-learn's digits: rows, features (8 x 8 grey), classes
SYNTHETIC_MANYCLASS = dict(n_samples=3000, n_features=100, n_informative=40, n_classes=40, fps_p=0.05, n_full=9)

# The real datasets by registry name -> their name in the paper's tables (their Table 5 numbers are in
# plench/reported/table5.csv).
PAPER_NAMES = {
    "Lost": "Lost", "MSRCv2": "MSRCv2", "Mirflickr": "Mirflickr", "Birdsong": "Birdsong", "Malagasy": "Malagasy",
    "SoccerPlayer": "Soccer Player", "Italian": "Italian", "YahooNews": "Yahoo! News", "English": "English",
    "PLCIFAR10_Aggregate": "PLCIFAR10-Aggregate", "PLCIFAR10_Vaguest": "PLCIFAR10-Vaguest",
}


@dataclass
class PLLDataset:
    """A partial-label dataset: features, candidate sets, hidden true labels (metrics only)."""

    name: str
    X: np.ndarray  # (n, d) float32 z-scored features, or (n, H, W, C) uint8 images
    S: np.ndarray  # (n, q) uint8 candidate sets
    y: np.ndarray  # (n,) int64 true labels
    classes: tuple[str, ...]
    modality: str  # "tabular" | "image"
    test: tuple[np.ndarray, np.ndarray] | None  # fixed test set (X, y) (PLCIFAR10: CIFAR-10 test); None: split
    steps: int  # the paper's training steps (10k / 20k tabular, 60k image; a stand-in: its counterpart's)
    meta: dict = field(default_factory=dict)  # source, licence, per-annotator sets (n, A, q) for crowds

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class PLLDatasetSpec:
    name: str
    loader: Callable[..., PLLDataset]  # loader(data_dir or None, modality) -> dataset
    kind: str  # "real" | "offline"
    modality: str  # the default modality
    image_size: int | None  # side of the image form; None: tabular only
    steps: int
    stands_in_for: str | None  # the Table 5 row(s) an offline stand-in replaces
    description: str
    # Sizes of the dataset the loader returns (Table 5 for the real ones), so that the cost of a sweep can be
    # planned without the data (``plench.cost``): rows, features per row (an image's H x W x C), classes, and the
    # rows of a fixed test set (None: the test rows are split off the rows, ``plench_split``).
    examples: int | None = None
    features: int | None = None
    classes: int | None = None
    test_examples: int | None = None

    def input_shape(self, modality: str | None = None) -> tuple[int, ...]:
        """One example as the networks see it (``plench.protocol.RunData.input_shape``): (features,) in the
        tabular form, (C, H, W) in the image form."""
        modality = modality or self.modality
        if self.features is None:
            raise ConfigError(f"the registry entry of {self.name} has no size (features)")
        if modality == "tabular":
            return (self.features,)
        if self.image_size is None:
            raise ConfigError(f"{self.name} has no image form")
        return (self.features // self.image_size ** 2, self.image_size, self.image_size)


PLL_DATASETS: dict[str, PLLDatasetSpec] = {}


def _register(name, loader, *, kind, modality, steps, description, image_size=None, stands_in_for=None, size=()):
    """``size``: (examples, features, classes[, test_examples]) of the dataset the loader returns."""
    PLL_DATASETS[name] = PLLDatasetSpec(name, loader, kind, modality, image_size, steps, stands_in_for, description,
                                        *size)


def plench_standardize(X) -> np.ndarray:
    """PLENCH's z-score over all rows (test included): ``(X - mean) / (std + 1e-6)``, float32 (n, d)."""
    X = np.asarray(X, dtype=np.float64)
    return ((X - X.mean(axis=0, keepdims=True)) / (X.std(axis=0, keepdims=True) + 1e-6)).astype(np.float32)


# ------------------------------------------------------------------------------------------ offline stand-ins
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.data, digits.target.astype(np.int64)  # (1797, 64) in 0..16, (1797,)


def _digit_features(X: np.ndarray, modality: str) -> np.ndarray:
    if modality == "image":
        return np.round(X * (255 / 16)).astype(np.uint8).reshape(-1, 8, 8, 1)
    return plench_standardize(X)


def _digits_dataset(name, S, y, X, modality, steps, meta) -> PLLDataset:
    meta = {"source": "offline stand-in: scikit-learn digits (BSD-3-Clause)", **meta}
    return PLLDataset(name, _digit_features(X, modality), S, y, DIGIT_CLASSES, modality, None, steps, meta)


def _load_digits_uss(data_dir, modality: str) -> PLLDataset:
    X, y = _digits()
    S = uss_candidates(y, 10, seed=0)
    return _digits_dataset("digits-USS", S, y, X, modality, 10_000, {"generator": "USS (exact), seed 0"})


def _load_digits_fps(p: float, data_dir, modality: str) -> PLLDataset:
    X, y = _digits()
    S = fps_candidates(y, 10, p, seed=0)
    return _digits_dataset(f"digits-FPS{p:g}", S, y, X, modality, 10_000, {"generator": f"FPS p = {p:g}, seed 0"})


def _load_pldigits(version: str, data_dir, modality: str) -> PLLDataset:
    X, y = _digits()
    sets = crowd_candidates(X, y, 10, n_annotators=10, seed=0)
    S = aggregate_union(sets) if version == "Aggregate" else aggregate_vaguest(sets)
    meta = {"generator": "10 simulated annotators (the offline stand-in for PLCIFAR10's), seed 0", "annotator_sets": sets}
    return _digits_dataset(f"PLDigits-{version}", S, y, X, modality, 60_000, meta)


def _load_synthetic_manyclass(data_dir, modality: str) -> PLLDataset:
    from sklearn.datasets import make_classification

    cfg = SYNTHETIC_MANYCLASS
    X, y = make_classification(n_samples=cfg["n_samples"], n_features=cfg["n_features"],
                               n_informative=cfg["n_informative"], n_classes=cfg["n_classes"],
                               n_clusters_per_class=1, class_sep=1.0, random_state=0)
    rng = np.random.default_rng(0)
    S = fps_candidates(y, cfg["n_classes"], cfg["fps_p"], rng)
    S[rng.choice(len(y), cfg["n_full"], replace=False)] = 1  # a few sets equal to the whole label set
    meta = {"source": "offline stand-in: sklearn make_classification", "generator": dict(cfg, seed=0)}
    return PLLDataset("synthetic-manyclass", plench_standardize(X), S, y.astype(np.int64),
                      tuple(f"class {j}" for j in range(cfg["n_classes"])), modality, None, 20_000, meta)


_register("digits-USS", _load_digits_uss, kind="offline", modality="tabular", image_size=8, steps=10_000,
          stands_in_for="Lost, MSRCv2, Birdsong (small tabular)", size=DIGITS_SIZE,
          description="1,797 scikit-learn digits, exact USS candidate sets (E|S| = 5.49): Theorem 1 holds")
for _p in (0.1, 0.3, 0.5):
    _register(f"digits-FPS{_p:g}", partial(_load_digits_fps, _p), kind="offline", modality="tabular", image_size=8,
              steps=10_000, stands_in_for="Lost, MSRCv2, Birdsong (small tabular)", size=DIGITS_SIZE,
              description=f"1,797 scikit-learn digits, FPS candidate sets with p = {_p:g} (E|S| = {1 + 9 * _p:g})")
for _version, _counterpart in (("Aggregate", "PLCIFAR10-Aggregate"), ("Vaguest", "PLCIFAR10-Vaguest")):
    _register(f"PLDigits-{_version}", partial(_load_pldigits, _version), kind="offline", modality="tabular",
              image_size=8, steps=60_000, stands_in_for=_counterpart, size=DIGITS_SIZE,
              description=f"digits with 10 simulated annotators (<= 6 labels each), {_version.lower()} sets")
_register("synthetic-manyclass", _load_synthetic_manyclass, kind="offline", modality="tabular", steps=20_000,
          stands_in_for="Soccer Player, Yahoo! News, Malagasy (many classes)",
          size=tuple(SYNTHETIC_MANYCLASS[k] for k in ("n_samples", "n_features", "n_classes")),
          description="make_classification 3,000 x 100, q = 40, FPS p = 0.05, 9 sets equal to the label set")

_FPS_NAME = re.compile(r"digits-FPS(\d*\.?\d+)")


# ------------------------------------------------------------------------------------------ PALM .mat files
PALM_STEPS = {"Lost": 10_000, "MSRCv2": 10_000, "Mirflickr": 10_000, "Birdsong": 10_000, "Malagasy": 10_000,
              "SoccerPlayer": 20_000, "Italian": 20_000, "YahooNews": 20_000, "English": 20_000}
# (examples, features, classes) of each PALM file: Table 5 (plench/reported/table5.csv)
PALM_SIZES = {"Lost": (1122, 108, 16), "MSRCv2": (1758, 48, 23), "Mirflickr": (2780, 1536, 14),
              "Birdsong": (4998, 38, 13), "Malagasy": (5303, 384, 44), "SoccerPlayer": (17472, 279, 171),
              "Italian": (21878, 519, 90), "YahooNews": (22991, 163, 219), "English": (24000, 300, 45)}
# PLCIFAR10: the 50,000 CIFAR-10 training images (32 x 32 x 3), 10 classes; the 10,000 test images are its test set
PLCIFAR10_SIZE = (50_000, 32 * 32 * 3, 10, 10_000)


def _name_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def find_palm_file(name: str, data_dir=None) -> Path | None:
    """``<data_dir>/<name>.mat`` or ``<data_dir>/plench/<name>.mat``, the name matched ignoring case and
    punctuation ("Soccer Player.mat", "SoccerPlayer.mat", "soccer_player.MAT"); None if absent."""
    root = resolve_data_dir(data_dir)
    for folder in (root, root / "plench"):
        if folder.is_dir():
            hits = sorted(p for p in folder.iterdir()
                          if p.suffix.lower() == ".mat" and _name_key(p.stem) == _name_key(name))
            if hits:
                return hits[0]
    return None


def _dense(matrix) -> np.ndarray:
    import scipy.sparse

    return matrix.toarray() if scipy.sparse.issparse(matrix) else np.asarray(matrix)


def read_palm_mat(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A PALM ``.mat`` file: raw features (n, d) float64, candidate sets (n, q) uint8, true labels (n,) int64.

    The file holds ``data`` (n x d) and the q x n matrices ``target`` (one-hot) and ``partial_target`` (0/1),
    sparse or dense; the label matrices are transposed and densified, as PLENCH does.
    """
    import scipy.io

    path = check_not_lfs_pointer(path)
    try:
        mat = scipy.io.loadmat(path)
    except Exception as e:  # noqa: BLE001  scipy's reader fails on damaged bytes in many ways (IndexError, zlib.error, ...)
        raise DataFormatError(f"{path} is not a MATLAB .mat file scipy can read ({type(e).__name__}: {e}); it may be "
                              "truncated or damaged (download it again), or a v7.3 file (re-save it as v7)") from e
    for key in PALM_KEYS:
        if key not in mat:
            found = sorted(k for k in mat if not k.startswith("__"))
            raise DataFormatError(f"{path}: no variable {key!r}; a PALM file holds 'data' (n x d), 'target' (q x n, "
                                  f"one-hot) and 'partial_target' (q x n, 0/1); found {found}")
    X = _dense(mat["data"]).astype(np.float64)
    target, S = _dense(mat["target"]).T, _dense(mat["partial_target"]).T
    if X.ndim != 2 or target.shape[0] != len(X) or S.shape != target.shape:
        raise DataFormatError(f"{path}: 'data' {X.shape} needs n rows and 'target' / 'partial_target' "
                              f"{target.T.shape} / {S.T.shape} must both be q x n (labels in rows)")
    if not np.isin(target, (0, 1)).all() or not (target.sum(axis=1) == 1).all():
        bad = np.flatnonzero(target.sum(axis=1) != 1)
        raise DataFormatError(f"{path}: 'target' is not one-hot: each of the n columns must hold exactly one 1 "
                              f"(columns {bad[:5].tolist()} do not, or it holds values other than 0/1)")
    if not np.isin(S, (0, 1)).all():
        raise DataFormatError(f"{path}: 'partial_target' must hold only 0 and 1")
    return X, S.astype(np.uint8), target.argmax(axis=1).astype(np.int64)


def locate_palm(name: str, data_dir=None) -> Path:
    """The PALM ``.mat`` file of ``name`` (``find_palm_file``); DataNotFoundError naming where it looked if absent."""
    from shared.datasets.real import missing_data_error

    path = find_palm_file(name, data_dir)
    if path is None:
        root = resolve_data_dir(data_dir)
        raise missing_data_error(
            f"The PALM partial-label dataset {name}", [root / f"{name}.mat", root / "plench" / f"{name}.mat"],
            f"Download {name}.mat from {PALM_URL} (any spelling of the name works, e.g. 'Soccer Player.mat'); "
            f"{LICENCE_NOTE}.")
    return path


def _load_palm(name: str, data_dir, modality: str) -> PLLDataset:
    path = locate_palm(name, data_dir)
    X, S, y = read_palm_mat(path)
    q = S.shape[1]
    meta = {"source": str(path), "licence": LICENCE_NOTE}
    return PLLDataset(name, plench_standardize(X), S, y, tuple(f"class {j}" for j in range(q)), "tabular", None,
                      PALM_STEPS[name], meta)


for _name, _steps in PALM_STEPS.items():
    _register(_name, partial(_load_palm, _name), kind="real", modality="tabular", steps=_steps,
              description=f"PALM .mat file ({PAPER_NAMES[_name]}), {LICENCE_NOTE}", size=PALM_SIZES[_name])


# ------------------------------------------------------------------------------------------ PLCIFAR10
def read_plcifar10_annotations(path, n: int, q: int = 10) -> np.ndarray:
    """``plcifar10.pkl`` (dict image index -> list of per-annotator label lists) as sets (n, A_max, q) uint8.

    Absent annotators are all-zero rows. A label repeated within one annotator's list counts once (PLENCH's
    Vaguest compares list lengths, which differs only for such lists). The pickle is read with
    ``shared.datasets.files.load_pickle`` (plain containers and numpy numbers only), so a crafted file cannot
    run code.
    """
    annotations = load_pickle(path, "annotation pickle", fix=f"download plcifar10.pkl again from {PLCIFAR10_URL}")
    layout = "a dict image index (int) -> list of per-annotator lists of int labels"
    if not isinstance(annotations, dict):
        raise DataFormatError(f"{path} must hold {layout}, got {type(annotations).__name__}")
    try:
        keys = {int(k) for k in annotations}
        width = max(len(value) for value in annotations.values())
        cells = [(int(i), a, int(label)) for i, value in annotations.items()
                 for a, labels in enumerate(value) for label in labels]
    except (TypeError, ValueError) as e:
        raise DataFormatError(f"{path} must hold {layout}: {e}") from e
    missing, extra = sorted(set(range(n)) - keys), sorted(k for k in keys if not 0 <= k < n)
    if missing or extra:
        raise DataFormatError(f"{path} must annotate exactly the {n} CIFAR-10 training images 0..{n - 1}: "
                              f"missing {missing[:5]}, out of range {extra[:5]}")
    index = np.array(cells, dtype=np.int64).reshape(-1, 3)
    if len(index) and (index[:, 2].min() < 0 or index[:, 2].max() >= q):
        raise DataFormatError(f"{path}: labels must lie in 0..{q - 1}, found {index[:, 2].min()}..{index[:, 2].max()}")
    sets = np.zeros((n, width, q), dtype=np.uint8)
    sets[index[:, 0], index[:, 1], index[:, 2]] = 1
    unlabelled = np.flatnonzero(sets.sum(axis=(1, 2)) == 0)
    if len(unlabelled):
        raise DataFormatError(f"{path}: images {unlabelled[:5].tolist()} have no candidate label at all")
    return sets


def locate_plcifar10(data_dir=None) -> Path:
    """``plcifar10.pkl`` under ``data_dir`` (or its ``plcifar10/``); DataNotFoundError naming where it looked."""
    from shared.datasets.real import missing_data_error

    root = resolve_data_dir(data_dir)
    candidates = [root / "plcifar10" / "plcifar10.pkl", root / "plcifar10.pkl"]
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        raise missing_data_error("The PLCIFAR10 annotations", candidates,
                                 f"Download plcifar10.pkl from {PLCIFAR10_URL} (the CIFAR-10 images come separately); "
                                 f"{LICENCE_NOTE}.")
    return path


def _load_plcifar10(version: str, data_dir, modality: str) -> PLLDataset:
    from shared.datasets.real import CIFAR10_CLASSES, load_cifar10

    path = locate_plcifar10(data_dir)
    check_not_lfs_pointer(path)  # before CIFAR-10, so that a pointer is reported even when the images are missing too
    cifar = load_cifar10(data_dir=data_dir)
    sets = read_plcifar10_annotations(path, len(cifar.train))
    S = aggregate_union(sets) if version == "Aggregate" else aggregate_vaguest(sets)
    meta = {"source": f"{path} + {cifar.meta['path']}", "licence": LICENCE_NOTE, "annotator_sets": sets}
    return PLLDataset(f"PLCIFAR10_{version}", cifar.train.X, S, cifar.train.y, CIFAR10_CLASSES, "image",
                      (cifar.test.X, cifar.test.y), 60_000, meta)


for _version in ("Aggregate", "Vaguest"):
    _register(f"PLCIFAR10_{_version}", partial(_load_plcifar10, _version), kind="real", modality="image",
              image_size=32, steps=60_000, size=PLCIFAR10_SIZE,
              description=f"CIFAR-10 train with MTurk candidate sets ({_version.lower()}), test = CIFAR-10 test")


# ------------------------------------------------------------------------------------------ lookup, split, stats
def pll_dataset_spec(name: str) -> PLLDatasetSpec:
    """The registry entry of ``name``; ``digits-FPS<p>`` works for any p in [0, 1]."""
    if name in PLL_DATASETS:
        return PLL_DATASETS[name]
    match = _FPS_NAME.fullmatch(name)
    if match:
        p = float(match.group(1))
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"{name}: the FPS flipping probability must be in [0, 1], got {p:g}")
        template = PLL_DATASETS["digits-FPS0.3"]
        return PLLDatasetSpec(name, partial(_load_digits_fps, p), "offline", "tabular", 8, template.steps,
                              template.stands_in_for, f"1,797 scikit-learn digits, FPS candidate sets with p = {p:g}",
                              *DIGITS_SIZE)
    raise unknown_choice("PLL dataset", name, list(PLL_DATASETS) + ["digits-FPS<p>"])


def load_pll_dataset(name: str, data_dir=None, modality: str | None = None) -> PLLDataset:
    """Load a registered dataset; real ones read from ``data_dir`` (see ``shared.paths.data_dir``).

    ``modality`` defaults to the dataset's own; the digits stand-ins also come as (n, 8, 8, 1) uint8 images.
    """
    spec = pll_dataset_spec(name)
    modality = spec.modality if modality is None else modality
    if modality not in MODALITIES:
        raise unknown_choice("modality", modality, MODALITIES)
    if modality != spec.modality and (modality == "tabular" or spec.image_size is None):
        raise ConfigError(f"{name} has no {modality} form; load it with modality={spec.modality!r}")
    return spec.loader(data_dir, modality)


def load_available(names, data_dir=None, modality: str | None = None) -> tuple[dict[str, PLLDataset], dict[str, str]]:
    """The datasets ``names`` whose files are present, and for the others why they were skipped.

    A real dataset whose files are absent (``DataNotFoundError``) is skipped with the reason, so that a notebook
    shows what the user has: e.g. Table 5 for the PALM files without PLCIFAR10. A file that is present but
    damaged still raises. If none of ``names`` can be loaded, the first missing dataset's error is raised.
    """
    from shared.errors import DataNotFoundError

    loaded, skipped, errors = {}, {}, []
    for name in names:
        try:
            loaded[name] = load_pll_dataset(name, data_dir=data_dir, modality=modality)
        except DataNotFoundError as e:
            errors.append(e)
            skipped[name] = "data not found: " + str(e).splitlines()[0].removesuffix(" Looked for:")
    if errors and not loaded:
        raise errors[0]
    return loaded, skipped


def list_pll_datasets():
    """The registry as a table: name, kind, modality, image size, steps, stands in for, description."""
    import pandas as pd

    rows = [(s.name, s.kind, s.modality, s.image_size, s.steps, s.stands_in_for or "", s.description)
            for s in PLL_DATASETS.values()]
    return pd.DataFrame(rows, columns=["name", "kind", "modality", "image_size", "steps", "stands_in_for",
                                       "description"])


def _shuffled(n: int, seed: int) -> np.ndarray:
    keys = np.arange(n)
    np.random.RandomState(seed).shuffle(keys)  # the same permutation as shuffling list(range(n))
    return keys


def plench_split(ds: PLLDataset, trial_seed: int, holdout_fraction: float = 0.1,
                 test_fraction: float = 0.1) -> dict[str, np.ndarray | None]:
    """PLENCH's split of one trial: row indices ``train``, ``val`` and ``test`` (None with a fixed test set).

    Tabular (``ds.test is None``): shuffle with ``RandomState(seed_hash(trial_seed))``; the last
    ``n - int(n (1 - test_fraction))`` rows are test. Of the rest, the first ``int(holdout_fraction n_rest)`` of
    a second shuffle with the same seed are validation, the others training (Lost: 909 / 100 / 113).
    With a fixed test set all rows are split into validation and training that way. Indices keep PLENCH's
    order, so ``train[k]`` is the row at training-split position k.
    """
    for label, fraction in (("holdout_fraction", holdout_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= fraction < 1.0:
            raise ConfigError(f"{label} must be in [0, 1), got {fraction}")
    seed = seed_hash(trial_seed)
    if ds.test is None:
        keys = _shuffled(len(ds), seed)
        n_pool = int(len(ds) * (1 - test_fraction))
        pool, test = keys[:n_pool], keys[n_pool:]
    else:
        pool, test = np.arange(len(ds)), None
    order = _shuffled(len(pool), seed)
    n_val = int(len(pool) * holdout_fraction)
    return {"train": pool[order[n_val:]], "val": pool[order[:n_val]], "test": test}


def table5_row(ds: PLLDataset) -> dict:
    """The dataset's Table 5 statistics, plus the number of sets equal to the label set (EXP's |S| = q)."""
    return {
        "Dataset": ds.name,
        "# Examples": len(ds),
        "# Features": int(np.prod(ds.X.shape[1:])),
        "# Classes": ds.num_classes,
        "Avg. # CLs": average_size(ds.S),
        "Noise Rate (%)": 100 * pll_noise_rate(ds.S, ds.y),
        "# S = Y": int((ds.S.sum(axis=1) == ds.S.shape[1]).sum()),
    }


def class_share_in_test(ds: PLLDataset, cls: int, n_trials: int) -> float:
    """Share (%) of class ``cls`` among the test rows, averaged over trial splits 0..n_trials-1: the accuracy of a
    network that predicts ``cls`` everywhere (what NaN outputs do: argmax of a NaN row is class 0)."""
    shares = []
    for trial in range(n_trials):
        test = plench_split(ds, trial)["test"]
        labels = ds.y[test] if test is not None else ds.test[1]
        shares.append(np.mean(np.asarray(labels) == cls))
    return 100 * float(np.mean(shares))
