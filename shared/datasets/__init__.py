"""Dataset registry: real loaders (full profile) and offline stand-ins (smoke profile), in one table.

    from shared.datasets import load_dataset, list_datasets
    ds = load_dataset("digits32rgb")          # offline stand-in for CIFAR-10
    ds.train.X.shape, ds.train.y.shape        # (n, 32, 32, 3) uint8, (n,) int64
    load_dataset("cifar10", data_dir="~/data")  # real; a clear DataNotFoundError if absent

Every loader returns a ``Dataset`` with ``train`` and ``test`` splits. Images are uint8 arrays
``(n, H, W)`` (grey) or ``(n, H, W, 3)`` (RGB); tabular features are a pandas DataFrame or a float
array ``(n, d)``; labels are int64 class indices ``(n,)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from shared.errors import unknown_choice


@dataclass(frozen=True)
class Split:
    """Features ``X`` (n, ...) and integer labels ``y`` (n,) of one split."""

    X: Any
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class Dataset:
    name: str
    train: Split
    test: Split
    classes: tuple[str, ...]
    modality: str  # "image", "tabular" or "text"
    source: str  # "real" or "offline stand-in for <dataset>"
    meta: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.classes)


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    loader: Callable[..., Dataset]
    kind: str  # "real" or "offline"
    modality: str
    stands_in_for: str | None
    description: str


DATASETS: dict[str, DatasetSpec] = {}


def register(name: str, *, kind: str, modality: str, description: str, stands_in_for: str | None = None):
    """Decorator adding a loader to the registry."""

    def wrap(loader: Callable[..., Dataset]) -> Callable[..., Dataset]:
        DATASETS[name] = DatasetSpec(name, loader, kind, modality, stands_in_for, description)
        return loader

    return wrap


def load_dataset(name: str, data_dir=None, **kwargs) -> Dataset:
    """Load a registered dataset. Real datasets read from ``data_dir`` (see ``shared.paths.data_dir``)."""
    if name not in DATASETS:
        raise unknown_choice("dataset", name, DATASETS)
    spec = DATASETS[name]
    if spec.kind == "real":
        return spec.loader(data_dir=data_dir, **kwargs)
    return spec.loader(**kwargs)


def list_datasets():
    """The registry as a table: name, kind, modality, what it stands in for, description."""
    import pandas as pd

    return pd.DataFrame(
        [(s.name, s.kind, s.modality, s.stands_in_for or "", s.description) for s in DATASETS.values()],
        columns=["name", "kind", "modality", "stands_in_for", "description"],
    )


def stratified_holdout(y: np.ndarray, test_fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted train and test indices of a stratified hold-out (scikit-learn's splitter)."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=test_fraction, random_state=seed, stratify=y)
    return np.sort(train), np.sort(test)


# Importing the loader modules fills the registry.
from shared.datasets import offline, real  # noqa: E402,F401
