"""Each paper's tables and figures, from ``<paper>/items.yaml``.

    paper: ciln
    title: Benchmarking Instance-Dependent Label Noise with Controlled Corruptions
    citation: Islam, Kristiadi, Milani (2026), arXiv:2606.14965
    items:
      - id: table1
        label: Table I
        title: Summary of the benchmark instantiations
        notebook: 01_benchmark.ipynb         # null until a notebook replicates it
        reported: reported/table1.csv          # the paper's numbers, or null if it gives none

The scorecard reads this file: an item without a notebook shows as missing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from shared.errors import ConfigError
from shared.paths import PAPERS, paper_dir

NOTEBOOK_PATTERN = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")


@dataclass(frozen=True)
class Item:
    id: str
    label: str
    title: str
    notebook: str | None
    reported: str | None


@dataclass(frozen=True)
class PaperCatalog:
    paper: str
    title: str
    citation: str
    items: tuple[Item, ...]

    @property
    def folder(self) -> Path:
        return paper_dir(self.paper)

    def notebooks(self) -> list[Path]:
        """The paper's numbered notebooks, in order."""
        return sorted(p for p in self.folder.glob("*.ipynb") if NOTEBOOK_PATTERN.match(p.name))


def load_catalog(paper: str) -> PaperCatalog:
    path = paper_dir(paper) / "items.yaml"
    if not path.exists():
        raise ConfigError(f"{path} is missing: each paper lists its tables and figures there")
    data = yaml.safe_load(path.read_text()) or {}
    try:
        items = tuple(
            Item(str(i["id"]), str(i["label"]), str(i["title"]), i.get("notebook"), i.get("reported"))
            for i in data["items"]
        )
        return PaperCatalog(data["paper"], data["title"], data.get("citation", ""), items)
    except (KeyError, TypeError) as e:
        raise ConfigError(f"{path}: each item needs id, label and title ({e})") from e


def all_catalogs() -> list[PaperCatalog]:
    return [load_catalog(p) for p in PAPERS]
