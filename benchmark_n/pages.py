"""One class per notebook: each loads the annotations its settings name, computes (or reads from the cache) what
they define, and returns the tables, figures, paper comparison and claims the page shows.

    page = AnnotationQuality("smoke", settings={"seeds": [0, 1, 2]})
    page.run()                    # scores every noisy variant not cached yet; one progress bar
    page.figure11()               # the paper's Fig. 11, ours
    page.compare_with_paper()     # paper | ours | diff, with what ours was computed on
    page.claims()                 # statement | yes / no / not run | detail (also written for the book)
"""
from __future__ import annotations

import time
from functools import cached_property

import pandas as pd

from benchmark_n import claims as C
from benchmark_n import figures, plans, tables
from benchmark_n.benchmarks import write_benchmark
from benchmark_n.noise import noise_dataset
from benchmark_n.quality import clean_scores, quality_table
from benchmark_n.shapes import coins, horse
from benchmark_n.sources import load_annotations
from shared.pages import NotebookPage
from shared.report import compare_with_paper, reported
from shared.runlog import log_run

PAPER = "benchmark_n"


class Page(NotebookPage):
    paper = PAPER

    def __init__(self, profile: str = "smoke", *, data_dir=None, settings=None, out_dir=None):
        super().__init__(profile, settings=settings, out_dir=out_dir)
        self.data_dir = data_dir

    @cached_property
    def data(self):
        return load_annotations(self.cfg, self.data_dir)

    @property
    def dataset(self) -> dict:
        return self.data.dataset

class NoiseEngine(Page):
    """00: Table 1, the two engines' effect on a dataset, and Figs. 2, 3 and 12."""

    notebook = "00_noise_engine"

    def table1(self) -> pd.DataFrame:
        return tables.table1()

    def legacy_presets(self) -> pd.DataFrame:
        return tables.legacy_presets()

    @cached_property
    def effects(self) -> pd.DataFrame:
        effects = tables.engine_effects(self.dataset, self.cfg.engines)
        self.report.table(effects, "engine_effects")
        return effects

    def engine_effects(self) -> pd.DataFrame:
        return self.effects.round(2)

    def figure2(self):
        return figures.figure2(horse(), self.report)

    def _images(self) -> list[int]:
        """The first ``example_images`` images with at least two instances."""
        counts = pd.Series([a["image_id"] for a in self.dataset["annotations"]]).value_counts()
        ids = [im["id"] for im in self.dataset["images"] if counts.get(im["id"], 0) >= 2]
        return ids[: self.cfg.example_images]

    def figure3(self, engine: str = "paper"):
        """Fig. 3: clean annotations and the three tiers of ``engine`` on a few images of the dataset."""
        ids = self._images()
        images = [self.data.image(i) for i in ids]
        rows = {"clean": self._per_image(self.dataset, ids)}
        for tier in ("low", "mid", "high"):
            rows[tier] = self._per_image(noise_dataset(self.dataset, engine, tier, 0).dataset, ids)
        title = f"{self.data.name}: clean and {engine}-engine annotations at the low, mid and high tiers"
        return figures.annotation_grid(images, rows, title, f"figure3_{engine}", self.report)

    def figure12(self):
        """Fig. 12: many instances of a real image (scikit-image's coins) under both engines' tiers."""
        data = coins()
        rows = {"clean": [data.dataset["annotations"]]}
        for engine in self.cfg.engines:
            for tier in ("low", "mid", "high"):
                rows[f"{engine}, {tier}"] = [noise_dataset(data.dataset, engine, tier, 0).dataset["annotations"]]
        return figures.annotation_grid([data.images[0]], rows, "scikit-image coins: clean and noisy annotations",
                                       "figure12", self.report)

    @staticmethod
    def _per_image(dataset: dict, ids: list[int]) -> list[list[dict]]:
        return [[a for a in dataset["annotations"] if a["image_id"] == i] for i in ids]

    def compare_with_paper(self) -> pd.DataFrame:
        ours = tables.table1_long().assign(ours_on="the engine's presets (benchmark_n/noise.py)")
        return self.report.compare(ours, "table1", on=["tier"])

    def claims(self) -> pd.DataFrame:
        return self._finish(C.engine_claims(self.dataset, self.effects))


class BenchmarkFiles(Page):
    """02: the noisy benchmark files (the dataset under each engine, tier and seed) with their manifests."""

    notebook = "02_benchmark_files"

    @property
    def folder(self):
        return self.report.out_dir / "benchmarks"

    def _write(self) -> list:
        """Every file of ``plans.benchmark_files``, each logged to ``shared.runlog`` (built: written now; loaded: an
        identical one was kept)."""
        prefix = f"{self.data.source}-n_{self.cfg.get('split', 'val')}"
        entries = []
        for engine, tier, seed in plans.benchmark_files(self.cfg):
            start = time.perf_counter()
            entry = write_benchmark(self.dataset, self.folder, prefix, engine, tier, seed)
            log_run(plans.FILE_KIND, plans.logged_key(plans.FILE_KIND, plans.file_params(
                self.cfg, self.data_dir, engine, tier, seed)), built=entry.written, seconds=time.perf_counter() - start)
            entries.append(entry)
        return entries

    def write(self) -> pd.DataFrame:
        """Write every file the settings define (kept where an identical one is there); one row per file."""
        self.entries = self._write()
        self.files = tables.benchmark_files(self.entries)
        self.report.table(self.files, "benchmark_files")
        return self.files

    def figure(self):
        return figures.benchmark_counts(self.files, self.report)

    def compare_with_paper(self) -> pd.DataFrame:
        ours = tables.manifest_table1(self.entries).assign(ours_on="the presets recorded in the files' manifests")
        return self.report.compare(ours, "table1", on=["tier"])

    def claims(self) -> pd.DataFrame:
        return self._finish(C.benchmark_claims(self.entries, self._write()))


class AnnotationQuality(Page):
    """01: Fig. 11 and the annotation-level analogue of Table 7: noisy annotations scored against the clean ones."""

    notebook = "01_annotation_quality"

    def run(self) -> pd.DataFrame:
        """Score every variant the settings define (cached); returns the per-seed table."""
        cfg = self.cfg
        variants = plans.quality_variants(cfg)
        self.clean = clean_scores(self.dataset, dilation_ratio=cfg.dilation_ratio)
        self.frame = quality_table(self.dataset, variants, dilation_ratio=cfg.dilation_ratio)
        self.report.table(self.frame, "annotation_quality")
        self.summary = tables.quality_summary(self.frame)
        return self.frame.groupby(["kind", "name"], sort=False).size().rename("variants scored").to_frame()

    def engines_table(self) -> pd.DataFrame:
        return tables.quality_wide(self.summary, "engine")

    def ablation_table(self) -> pd.DataFrame:
        return tables.quality_wide(self.summary, "ablation", clean=self.clean)

    def figure11(self):
        return figures.figure11(self.summary, self.report)

    @property
    def ours_on(self) -> str:
        reduced = "reduced: " if self.data.root is None or self.overridden else ""
        return (f"{reduced}annotation-level analogue on {self.data.name}: noisy vs clean annotations, no model "
                f"trained; mean of {len(self.cfg.seeds)} seed(s)")

    @cached_property
    def comparison(self) -> pd.DataFrame:
        """Table 7 as the share of the clean score kept: the paper's trained Mask R-CNN beside our annotations. The
        two are different measurements, so no difference is taken (``diff`` left empty)."""
        ours = tables.table7_ours(self.summary, self.clean).assign(ours_on=self.ours_on)
        table = compare_with_paper(ours, tables.table7_retained(reported(PAPER, "table7")), on=["operation", "level"])
        table["diff"] = float("nan")
        self.report.comparisons.append(table)
        return table

    def compare_with_paper(self) -> pd.DataFrame:
        return self.comparison

    def table7_ordering(self):
        return figures.paper_vs_ours_table7(self.comparison, self.report)

    def claims(self) -> pd.DataFrame:
        return self._finish(C.quality_claims(self.frame, self.summary))


__all__ = ["Page", "NoiseEngine", "BenchmarkFiles", "AnnotationQuality"]
