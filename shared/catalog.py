"""Each paper's tables and figures, from ``<paper>/items.yaml``: the one source of the README's status rows, the
book's landing page and its closeness scorecard (``shared.scorecard``).

    paper: ciln
    short: CILN
    title: Benchmarking Instance-Dependent Label Noise with Controlled Corruptions
    citation: Islam, Kristiadi, Milani (2026), arXiv:2606.14965
    bib: islam2026ciln                     # its entry in book/references.bib
    links: {paper: https://arxiv.org/abs/2606.14965, code: https://github.com/sh-islam/ciln-bench}
    state: rehearsal                       # the furthest profile every notebook has run in: smoke | rehearsal | full
    replicates: corruptions, voter pools, noise measures, ERM / Co-Teaching / DivideMix
    smoke: MNIST-32 and Adult stand-ins, small CNN voters  # what the smoke profile runs on
    compute:                               # what the paper (or its official code) says the experiments cost
      reported: "a single V100 per run; 60k iterations per image run"   # its words, with where
      hours: [5000, 30000]                 # our reading of it in GPU-hours of ``gpu`` (null where it gives none)
      gpu: V100
      basis: "their per-step time x steps x runs"   # how the hours follow from what it reports
    items:
      - id: table1
        label: Table I
        title: Summary of the benchmark instantiations
        notebook: 01_benchmark.ipynb         # null until a notebook replicates it
        reported: reported/table1.csv        # the paper's numbers, or null if it gives none
        compares: [Table I]                  # the comparison rows (their "item") it counts; default [label]
        tolerance: {abs: 0.02}               # |ours - paper| counted as close, in the reported file's units
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from shared.errors import ConfigError
from shared.paths import PAPERS, paper_dir

NOTEBOOK_PATTERN = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")
STATES = ("not started", "smoke", "rehearsal", "full")  # in order: the furthest an item has run


@dataclass(frozen=True)
class Tolerance:
    """How far ours may be from the paper's number and still count as close: ``abs`` (in the reported file's
    units) or ``rel`` (a share of the paper's number); ``why`` says what the bound means."""

    abs: float | None = None
    rel: float | None = None
    why: str = ""

    def __post_init__(self):
        if (self.abs is None) == (self.rel is None) or min(v for v in (self.abs, self.rel) if v is not None) < 0:
            raise ConfigError(f"a tolerance needs exactly one of abs or rel, non-negative; got abs={self.abs}, "
                              f"rel={self.rel}")

    def within(self, paper, ours):
        """Elementwise ``|ours - paper| <= bound`` (arrays of equal length)."""
        import numpy as np

        paper, ours = np.asarray(paper, float), np.asarray(ours, float)
        bound = self.abs if self.abs is not None else self.rel * np.abs(paper)
        return np.abs(ours - paper) <= bound + 1e-12

    @property
    def text(self) -> str:
        return f"±{self.abs:g}" if self.abs is not None else f"±{100 * self.rel:g} %"


@dataclass(frozen=True)
class Compute:
    """What the paper says its experiments cost: ``reported`` (its words, with where), ``hours`` (a low-high range
    of GPU-hours on ``gpu`` read from them, or None where it states no total) and ``basis`` (how the hours follow)."""

    reported: str
    hours: tuple[float, float] | None = None
    gpu: str = ""
    basis: str = ""

    def __post_init__(self):
        if self.hours is not None and not (len(self.hours) == 2 and 0 < self.hours[0] <= self.hours[1]):
            raise ConfigError(f"compute hours must be [low, high] with 0 < low <= high, got {self.hours!r}")

    @property
    def text(self) -> str:
        if self.hours is None:
            return "not stated"
        low, high = self.hours
        return f"{low:,.0f}" + (f"–{high:,.0f}" if high != low else "") + f" {self.gpu}-hours"


@dataclass(frozen=True)
class Item:
    id: str
    label: str
    title: str
    notebook: str | None
    reported: str | None
    compares: tuple[str, ...] = ()
    tolerance: Tolerance | None = None
    state: str | None = None  # overrides the paper's state for this item


@dataclass(frozen=True)
class PaperCatalog:
    paper: str
    title: str
    citation: str
    items: tuple[Item, ...]
    short: str = ""
    bib: str = ""
    links: dict = field(default_factory=dict)
    state: str = "smoke"
    replicates: str = ""
    smoke: str = ""
    compute: "Compute | None" = None

    @property
    def folder(self) -> Path:
        return paper_dir(self.paper)

    def notebooks(self) -> list[Path]:
        """The paper's numbered notebooks, in order."""
        return sorted(p for p in self.folder.glob("*.ipynb") if NOTEBOOK_PATTERN.match(p.name))

    def item_state(self, item: Item) -> str:
        """'not started' without a notebook, else the item's own state or the paper's."""
        if not item.notebook or not (self.folder / item.notebook).exists():
            return "not started"
        return item.state or self.state


def _state(value, where: str) -> str:
    if value not in STATES[1:]:
        raise ConfigError(f"{where}: state must be one of {list(STATES[1:])}, got {value!r}")
    return value


def _item(data: dict, path: Path) -> Item:
    tolerance = data.get("tolerance")
    if tolerance is not None and not isinstance(tolerance, dict):
        raise ConfigError(f"{path}: item {data.get('id')!r}: tolerance must be a mapping like {{abs: 0.02}}")
    unknown = set(tolerance or {}) - {"abs", "rel", "why"}
    if unknown:
        raise ConfigError(f"{path}: item {data.get('id')!r}: unknown tolerance key(s) {sorted(unknown)}")
    state = data.get("state")
    return Item(str(data["id"]), str(data["label"]), str(data["title"]), data.get("notebook"), data.get("reported"),
                tuple(str(c) for c in data.get("compares") or [data["label"]]),
                Tolerance(**tolerance) if tolerance else None,
                _state(state, f"{path}: item {data['id']!r}") if state is not None else None)


def _compute(data, path: Path) -> Compute | None:
    if data is None:
        return None
    if not isinstance(data, dict) or "reported" not in data or set(data) - {"reported", "hours", "gpu", "basis"}:
        raise ConfigError(f"{path}: compute must be a mapping with reported (and hours, gpu, basis), got {data!r}")
    hours = data.get("hours")
    return Compute(str(data["reported"]), tuple(float(h) for h in hours) if hours is not None else None,
                   str(data.get("gpu", "")), str(data.get("basis", "")))


def load_catalog(paper: str) -> PaperCatalog:
    path = paper_dir(paper) / "items.yaml"
    if not path.exists():
        raise ConfigError(f"{path} is missing: each paper lists its tables and figures there")
    data = yaml.safe_load(path.read_text()) or {}
    try:
        items = tuple(_item(i, path) for i in data["items"])
        return PaperCatalog(data["paper"], data["title"], data.get("citation", ""), items,
                            short=data.get("short", data["paper"]), bib=data.get("bib", ""),
                            links=dict(data.get("links") or {}), state=_state(data.get("state", "smoke"), str(path)),
                            replicates=data.get("replicates", ""), smoke=data.get("smoke", ""),
                            compute=_compute(data.get("compute"), path))
    except (KeyError, TypeError) as e:
        raise ConfigError(f"{path}: each item needs id, label and title ({e})") from e


def all_catalogs() -> list[PaperCatalog]:
    return [load_catalog(p) for p in PAPERS]
