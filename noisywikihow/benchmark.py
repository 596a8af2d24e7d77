"""The benchmark as every notebook sees it: clean splits, the classes' noise sources and the noisy training sets.

The same structure holds the official NoisywikiHow release (``noisywikihow.data.load_noisywikihow``) and its
offline stand-in TinyHow (``noisywikihow.tinyhow``):

    bench.classes                  # (K,) category names, index = label (the release's ``cat_id``)
    bench.source                   # (K,) "SC", "BCC" or "TC": the noise source each class belongs to
    bench.train / .val / .test     # Split: texts (n,), labels (n,), ids (n,)
    bench.noise["mix_0.4"]         # NoisyTrain: the texts and labels a model trains on at 40 % real noise

Noisy training sets are named as the release's files: ``clean`` (= ``train.csv``), ``mix_{t}`` (real noise from
all three sources, Section 3.3 of the paper), ``sym_{t}`` (symmetric synthetic noise, Section 4.5) and
``neighbor_0.1`` / ``uncommon_0.1`` / ``tail_0.1`` (all noise from SC, BCC or TC, Table 5).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from shared.errors import ConfigError, unknown_choice

SOURCES = ("SC", "BCC", "TC")
LEVELS = (0.1, 0.2, 0.4, 0.6)
# the release's single-source files and the source each draws from (Table 5)
SINGLE_SOURCE_FILES = {"neighbor": "SC", "uncommon": "BCC", "tail": "TC"}
KINDS = ("clean", "real", "symmetric")


def noise_name(kind: str, level: float, source: str | None = None) -> str:
    """The release's name of a noisy training set: ``noise_name("real", 0.4) == "mix_0.4"``,
    ``noise_name("symmetric", 0.2) == "sym_0.2"``, ``noise_name("real", 0.1, "TC") == "tail_0.1"``, level 0: "clean"."""
    if kind not in KINDS:
        raise unknown_choice("noise kind", kind, KINDS)
    if level == 0 or kind == "clean":
        return "clean"
    if source is not None:
        if kind != "real":
            raise ConfigError("single-source noise is real (open-set) noise; symmetric noise has no source")
        prefix = {v: k for k, v in SINGLE_SOURCE_FILES.items()}.get(source)
        if prefix is None:
            raise unknown_choice("noise source", source, SOURCES)
        return f"{prefix}_{level:g}"
    return f"{'mix' if kind == 'real' else 'sym'}_{level:g}"


@dataclass(frozen=True)
class Split:
    """Clean events: ``texts`` (n,) str, ``labels`` (n,) int64 in [0, K), ``ids`` (n,) int64 event ids."""

    texts: np.ndarray
    labels: np.ndarray
    ids: np.ndarray

    def __post_init__(self):
        n = len(self.texts)
        if len(self.labels) != n or len(self.ids) != n:
            raise ConfigError(f"a split needs as many labels and ids as texts: {n}, {len(self.labels)}, {len(self.ids)}")

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class NoisyTrain:
    """One training set as a model sees it, row i being the training event i of the clean split.

    Attributes:
        name: the release's file stem ("mix_0.4", "sym_0.4", "tail_0.1", "clean").
        kind: "real" (open-set: the text replaced, the label kept), "symmetric" (the label flipped) or "clean".
        texts: (n,) the observed texts.
        labels: (n,) int64 the observed labels.
        is_noisy: (n,) bool, True where the observed pair is wrong.
        true_category: (n,) str, the category the observed text really belongs to (for real noise the category
            of the swapped-in event, outside the benchmark's classes; otherwise the clean class's name).
    """

    name: str
    kind: str
    texts: np.ndarray
    labels: np.ndarray
    is_noisy: np.ndarray
    true_category: np.ndarray

    @property
    def noise_rate(self) -> float:
        return float(np.mean(self.is_noisy)) if len(self.is_noisy) else 0.0


@dataclass
class Benchmark:
    """Classes, their sources, the clean splits and the noisy training sets (see the module docstring).

    ``parent`` (K,) names each class's parent category (the SC pool is its open-set siblings); ``counts`` is
    ``np.bincount`` of the training labels. ``meta`` records how the benchmark was made (generator settings,
    encoder of the noise injection, the folder it was read from).
    """

    name: str
    classes: np.ndarray
    source: np.ndarray
    parent: np.ndarray
    train: Split
    val: Split
    test: Split
    noise: dict[str, NoisyTrain] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        K = len(self.classes)
        if len(self.source) != K or len(self.parent) != K:
            raise ConfigError(f"{K} classes but {len(self.source)} sources and {len(self.parent)} parents")
        bad = sorted(set(map(str, self.source)) - set(SOURCES))
        if bad:
            raise ConfigError(f"unknown noise source(s) {bad}; valid sources: {', '.join(SOURCES)}")
        for name in ("train", "val", "test"):
            labels = getattr(self, name).labels
            if len(labels) and (labels.min() < 0 or labels.max() >= K):
                raise ConfigError(f"{self.name} {name} labels must lie in [0, {K}); found {labels.min()}..{labels.max()}")

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(self.train.labels, minlength=self.num_classes)

    def classes_of(self, source: str) -> np.ndarray:
        """Indices of the classes of one noise source."""
        if source not in SOURCES:
            raise unknown_choice("noise source", source, SOURCES)
        return np.flatnonzero(self.source == source)

    def training_set(self, name: str) -> NoisyTrain:
        """The training set of a name: "clean" or one of ``self.noise``."""
        if name == "clean":
            t = self.train
            return NoisyTrain("clean", "clean", t.texts, t.labels, np.zeros(len(t), bool), self.classes[t.labels])
        if name not in self.noise:
            raise unknown_choice(f"noisy training set of {self.name}", name, ["clean", *self.noise])
        return self.noise[name]
