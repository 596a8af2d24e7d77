"""One class per notebook: each loads the benchmark its settings name, trains (or reads from the cache) exactly
the runs those settings define, and returns the tables, figures, paper comparison and claims the page shows.

    page = RealNoise("smoke", settings={"seeds": [0, 1]})
    page.run()                    # trains what is not cached; one progress bar
    page.table()                  # the paper's Table 8 layout, ours
    page.compare_with_paper()     # paper | ours | diff, with what ours was run on
    page.claims()                 # statement | yes / no / not run | detail (also written for the book)
"""
from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from noisywikihow import claims as C
from noisywikihow import figures, grids, hparams, tables
from noisywikihow.experiments import RunSpec, Training, run_grid, scores
from noisywikihow.sources import encoded, load_benchmark
from shared.errors import ConfigError
from shared.pages import NotebookPage
from shared.report import reported

PAPER = "noisywikihow"


class Page(NotebookPage):
    paper = PAPER

    def __init__(self, profile: str = "smoke", *, data_dir=None, device="auto", settings=None, out_dir=None):
        super().__init__(profile, settings=settings, out_dir=out_dir)
        self.data_dir, self.device = data_dir, device  # resolved where the work runs (a Slurm job's node)
        self.training = Training.from_settings(self.cfg, device)
        self.runs: list = []
        self._features: dict = {}

    @cached_property
    def bench(self):
        return load_benchmark(self.cfg, self.data_dir, self.device)

    def features(self, encoder: str | None = None, model: str | None = None):
        """What the runs of (encoder, model) read, encoded once per page."""
        key = (encoder or self.cfg.encoder, model or self.cfg.model)
        if key not in self._features:
            self._features[key] = encoded(self.bench, key[0], self.device, self.data_dir, key[1])
        return self._features[key]

    @property
    def ours_on(self) -> str:
        """What our numbers were computed with, for the comparison tables."""
        return self.computed_with(self.cfg.encoder, self.cfg.model)

    def computed_with(self, encoder: str, model: str, seeds: int | None = None) -> str:
        """What a comparison row of ours was computed with; "reduced" unless it is the paper's data and settings."""
        reduced = "reduced: " if self.bench.name != "NoisywikiHow" or self.overridden or model != "plm" else ""
        what = f"fine-tuned {encoder}" if model == "plm" else f"frozen {encoder} + {model}"
        t = self.training
        return (f"{reduced}{self.bench.name}, {what}, {t.epochs} epochs (SR {t.sr_epochs}, SEAL {t.seal_rounds} x "
                f"{t.seal_epochs}), {seeds or len(self.cfg.seeds)} seed(s)")

    def spec(self, train_set: str, method: str = "base", seed: int = 0) -> RunSpec:
        """A run on this page's encoder and model."""
        return RunSpec(train_set, method, seed, self.cfg.encoder, self.cfg.model)

    def train(self, specs, encoder: str | None = None, model: str | None = None) -> list:
        return run_grid(self.features(encoder, model), specs, self.training, executor=self.cfg.executor)

    def train_grid(self, grid: grids.Grid) -> list:
        """The runs of one grid of ``noisywikihow.grids`` (what the cost plan enumerates)."""
        return run_grid(self.features(grid.encoder, grid.model), grid.specs, grid.training,
                        executor=self.cfg.executor)

class DatasetAndNoise(Page):
    """00: Tables 1-3, 6, 7, Fig. 1 and the audit of the noisy training sets."""

    notebook = "00_dataset_and_noise"

    def task_examples(self) -> pd.DataFrame:
        return tables.literature(reported(PAPER, "table1"), ["example"])

    def overview(self) -> pd.DataFrame:
        return tables.dataset_overview(self.bench)

    def figure1(self):
        return figures.figure1(self.bench, self.report)

    def noise_audit(self) -> pd.DataFrame:
        audit = tables.noise_audit(self.bench)
        self.report.table(audit, "noise_audit")
        return audit.round(2)

    @cached_property
    def case(self) -> pd.DataFrame:
        return tables.case_study(self.bench, self.cfg.case_study_per_source)

    def literature(self) -> dict[str, pd.DataFrame]:
        return {"Table 2": tables.literature(reported(PAPER, "table2"), ["field", "dataset"]),
                "Table 7": tables.literature(reported(PAPER, "table7"), ["operation"])}

    def compare_with_paper(self) -> pd.DataFrame:
        ours = tables.long_form(self.overview(), ["noise_source"], self.bench.name)
        return self.report.compare(ours, "table3", on=["noise_source"])

    def claims(self) -> pd.DataFrame:
        return self._finish(C.dataset_claims(self.bench, self.case))


class Architectures(Page):
    """01: Table 4 with frozen encoders and heads standing in for the seven fine-tuned models."""

    notebook = "01_plm_architectures"

    def specs(self):
        return {(g.encoder, g.model): list(g.specs) for g in grids.architecture_grids(self.cfg, self.training)}

    def run(self) -> pd.DataFrame:
        frames = []
        for grid in grids.architecture_grids(self.cfg, self.training):
            runs = self.train_grid(grid)
            enc, model = grid.encoder, grid.model
            frames.append(scores(runs).assign(architecture=enc if model == "plm" else f"{enc}-{model}"))
        self.scores = pd.concat(frames, ignore_index=True)
        return tables.mean_scores(self.scores, ["architecture", "level"]).round(2)

    def table(self, selection: str = "peak") -> pd.DataFrame:
        return tables.accuracy_table(self.scores, "architecture", selection=selection)

    def selection_gap(self) -> pd.DataFrame:
        """How much the paper's peak adds over the epoch chosen on validation data (Top-1 points)."""
        return tables.selection_gap(self.scores, ["architecture", "level"])

    def figure(self):
        """Table 4 as curves: ours per architecture beside the paper's seven models."""
        return figures.table4_figure(self.scores, reported(PAPER, "table4"), self.report)

    def compare_with_paper(self) -> pd.DataFrame:
        """Each fine-tuned language model beside the paper's; with frozen encoders only, the first architecture
        stands in for the paper's BART (the base model) and the six others are not run."""
        plms = self.scores[self.scores["model"] == "plm"]
        if len(plms):
            ours = tables.paper_rows(plms.assign(model=plms["encoder"]), ["model", "level"], "")
            ours["ours_on"] = [self.computed_with(m, "plm") for m in ours["model"]]
        else:
            enc, model = self.cfg.architectures[0]
            ours = tables.paper_rows(self.scores[self.scores["architecture"] == f"{enc}-{model}"], ["level"],
                                     f"stand-in for BART: {self.ours_on}")
            ours["model"] = "BART"
        return self.report.compare(ours, "table4", on=["model", "level"])

    def claims(self) -> pd.DataFrame:
        return self._finish(C.architecture_claims(self.scores))




class NoiseSources(Page):
    """02: Table 5 and Fig. 5: 10 % noise from all sources (mix) or from one (neighbor = SC, uncommon = BCC,
    tail = TC)."""

    notebook = "02_noise_sources"
    SETS = grids.SOURCE_SETS

    def run(self) -> pd.DataFrame:
        (grid,) = grids.source_grids(self.cfg, self.training)
        self.runs = self.train_grid(grid)
        self.scores = scores(self.runs)
        self.source_scores = pd.concat([scores(self.runs, prefix=f"test_{s}").assign(prefix=f"test_{s}")
                                        for s in ("SC", "BCC", "TC")], ignore_index=True)
        return tables.mean_scores(self.scores, ["method", "train_set"]).round(2)

    def table(self, selection: str = "peak") -> pd.DataFrame:
        """Table 5: the base model per noise source."""
        return tables.accuracy_table(self.scores[self.scores["method"] == "base"], "train_set", "method", selection)

    def per_source_accuracy(self, selection: str = "peak") -> pd.DataFrame:
        """Top-1 on the test events of each source's classes (rows: where the noise came from)."""
        base = self.source_scores[self.source_scores["method"] == "base"]
        means = tables.mean_scores(base, ["train_set", "prefix"])
        means = means[means["selection"] == selection]
        return means.pivot(index="train_set", columns="prefix", values="top1").loc[list(self.SETS)].round(2)

    def figure5(self):
        return figures.figure5(self.scores, self.report)

    def compare_with_paper(self) -> pd.DataFrame:
        ours = tables.paper_rows(self.scores[self.scores["method"] == "base"], ["train_set"],
                                 self.computed_with(self.cfg.encoder, self.cfg.model, len(self.cfg.base_seeds)))
        ours["noise_source"] = ours.pop("train_set").str.replace("_0.1", "", regex=False)
        return self.report.compare(ours, "table5", on=["noise_source"])

    def claims(self) -> pd.DataFrame:
        return self._finish(C.source_claims(self.scores, self.source_scores))


class RealNoise(Page):
    """03: Table 8, Fig. 2(a) and Table 9: the LNL methods under real-world noise."""

    notebook = "03_lnl_realworld"
    kind, reported_name = "real", "table8"

    def run(self) -> pd.DataFrame:
        (grid,) = grids.lnl_grids(self.cfg, self.training, self.kind)
        self.runs = self.train_grid(grid)
        self.scores = scores(self.runs, ("peak", "val", "stable"))
        return tables.selection_gap(self.scores, ["method", "level"])

    def table(self, selection: str = "peak") -> pd.DataFrame:
        return tables.accuracy_table(self.scores, "method", selection=selection).rename(index=hparams.METHODS)

    def deltas(self) -> pd.DataFrame:
        """Top-1 minus the base model's, ours beside the paper's."""
        paper = reported(PAPER, self.reported_name)
        paper = paper[paper["metric"] == "top1"].assign(top1=lambda d: d["value"].astype(float), seed=0,
                                                        selection="peak", top5=np.nan)
        both = {"ours": tables.deltas(self.scores), "paper": tables.deltas(paper)}
        return pd.concat(both, axis=1).rename(index=hparams.METHODS)

    def figure2(self):
        return figures.figure2(self.scores, reported(PAPER, self.reported_name), self.kind, self.report)

    def hyperparameters(self) -> pd.DataFrame:
        """Table 9 or 11 as published, beside what these runs use."""
        return hparams.hyperparameter_table(self.kind, self.training)

    def compare_with_paper(self) -> pd.DataFrame:
        ours = tables.paper_rows(self.scores, ["method", "level"], self.ours_on)
        return self.report.compare(ours, self.reported_name, on=["method", "level"])

    def claims(self) -> pd.DataFrame:
        return self._finish(C.lnl_claims(self.scores, self.kind))


class RealVsSynthetic(RealNoise):
    """04: Table 10, Fig. 2(b), Table 11 (symmetric noise), Fig. 3 (losses) and Fig. 4 (test curves)."""

    notebook = "04_real_vs_synthetic"
    kind, reported_name = "symmetric", "table10"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.training.loss_epoch > self.training.epochs:
            raise ConfigError(f"loss_epoch ({self.training.loss_epoch}) must not exceed epochs ({self.training.epochs}): "
                              "Fig. 3 shows the per-sample losses after that epoch")

    def run(self) -> pd.DataFrame:
        gap = super().run()
        (grid,) = grids.loss_grids(self.cfg, self.training)
        self.loss_runs = dict(zip(("real", "symmetric"), self.train_grid(grid)))
        return gap

    def loss_separation(self) -> pd.DataFrame:
        """After the ``loss_epoch``-th epoch at ``loss_level``: the AUROC of the loss flagging noisy samples, and
        the overlap of the two loss histograms."""
        rows = [{"kind": kind, **C.loss_separation(run.losses, self.bench.training_set(run.spec.train_set).is_noisy)}
                for kind, run in self.loss_runs.items()]
        self.separation = pd.DataFrame(rows)
        return self.separation.round(3)

    def figure3(self):
        panels = {f"{kind} noise, {self.cfg.loss_level:.0%}, epoch {self.cfg.loss_epoch}":
                  (run.losses, self.bench.training_set(run.spec.train_set).is_noisy) for kind, run in self.loss_runs.items()}
        return figures.figure3(panels, self.report)

    def figure4(self):
        """The base model trained ``curve_epochs`` at every level of both kinds of noise."""
        (grid,) = grids.curve_grids(self.cfg, self.training)
        runs = self.train_grid(grid)
        self.curve_table = pd.concat([r.history[["epoch", "test_acc"]].assign(
            kind="symmetric" if r.spec.kind == "symmetric" else "real", level=r.spec.level) for r in runs],
            ignore_index=True)
        return figures.figure4(self.curve_table, self.report)

    def claims(self) -> pd.DataFrame:
        records = C.lnl_claims(self.scores, self.kind) + C.synthetic_claims(self.scores, self.separation, self.curve_table)
        return self._finish(records)


class LongTailed(Page):
    """05: Table 12, Fig. 7 and Table 13: long-tailed methods under real-world noise."""

    notebook = "05_long_tailed"

    def run(self) -> pd.DataFrame:
        (grid,) = grids.longtail_grids(self.cfg, self.training)
        self.runs = self.train_grid(grid)
        every = scores(self.runs, ("peak", "val"))
        self.base, self.scores = every[every["method"] == "base"], every[every["method"] != "base"]
        self.tc_scores = scores(self.runs, ("peak",), prefix="test_TC")
        return tables.mean_scores(self.scores, ["method", "level"]).round(2)

    def table(self, selection: str = "peak") -> pd.DataFrame:
        return tables.accuracy_table(self.scores, "method", selection=selection).rename(index=hparams.METHODS)

    def figure7(self):
        paper = reported(PAPER, "table12")
        base = reported(PAPER, "table8")
        rows = pd.concat([paper, base[base["method"] == "base"]])
        rows = rows[rows["metric"] == "top1"].assign(top1=lambda d: d["value"].astype(float), seed=0,
                                                     selection="peak", top5=np.nan)
        ours = tables.deltas(pd.concat([self.scores, self.base]))
        return figures.figure7(ours, self.report, tables.deltas(rows))

    def tail_accuracy(self) -> pd.DataFrame:
        """Mean Top-1 on the TC classes' test events, per method and level."""
        means = tables.mean_scores(self.tc_scores, ["method", "level"])
        return means.pivot(index="method", columns="level", values="top1").round(2).rename(index=hparams.METHODS)

    def hyperparameters(self) -> pd.DataFrame:
        return hparams.table13(self.training)

    def compare_with_paper(self) -> pd.DataFrame:
        ours = tables.paper_rows(self.scores, ["method", "level"], self.ours_on)
        return self.report.compare(ours, "table12", on=["method", "level"])

    def claims(self) -> pd.DataFrame:
        return self._finish(C.longtail_claims(self.scores, self.base, self.tc_scores))


__all__ = ["Page", "DatasetAndNoise", "Architectures", "NoiseSources", "RealNoise", "RealVsSynthetic", "LongTailed"]
