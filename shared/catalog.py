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
                            replicates=data.get("replicates", ""), smoke=data.get("smoke", ""))
    except (KeyError, TypeError) as e:
        raise ConfigError(f"{path}: each item needs id, label and title ({e})") from e


def all_catalogs() -> list[PaperCatalog]:
    return [load_catalog(p) for p in PAPERS]
