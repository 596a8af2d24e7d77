"""CILN's notebook pages: one module per notebook (``ciln/pages/<topic>.py``), each a ``Page`` subclass that loads
what its settings name, runs or reads from the cache exactly what they define, and returns the tables, figures,
paper comparison and claims the notebook shows.

    from ciln.pages.downstream import Downstream
    page = Downstream("smoke", settings={"seeds": [0, 1]})
    page.run()
    page.compare_with_paper()     # paper | ours | diff, with what ours was run on
    page.claims()                 # statement | yes / no / not run | detail

What the pages share lives here: ``Page`` (the benchmarks its settings name and what ours ran on), ``CifarPage``
(a page on CIFAR-10 alone: the dataset, its benchmark on the NLT rows and on the test split, the human reference,
PL-IDN's raters, the downstream scenarios and runs), the number formats of a comparison, the families of
Figures 5 and 6 with their table layout, and how close a group of compared numbers is.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from ciln.benchmark import load_benchmarks, split_rows
from shared.errors import ConfigError
from shared.pages import NotebookPage
from shared.tables import show_table

COMPARISON_FORMATS = {"paper": "{:.3f}", "ours": "{:.3f}", "diff": "{:+.3f}"}
AGREEMENT_FORMATS = {"paper mean": "{:.3f}", "ours mean": "{:.3f}", "mean |diff|": "{:.3f}",
                     "rank correlation": "{:+.2f}"}


class Page(NotebookPage):
    """A CILN page: ``benchmarks`` are those of ``benchmark_names`` (None: every dataset of the settings)."""

    paper = "ciln"
    benchmark_names: tuple[str, ...] | None = None
    #: the severities the page's figures are drawn at (their rows or curves): the ``severities`` setting must hold them
    needs_severities: tuple[int, ...] = ()

    def __init__(self, profile: str = "smoke", *, data_dir=None, device="auto", settings=None, out_dir=None):
        super().__init__(profile, settings=settings, out_dir=out_dir)
        self.data_dir, self.device = data_dir, device
        missing = [s for s in self.needs_severities if s not in self.cfg.severities]
        if missing:
            raise ConfigError(
                f"{self.notebook} draws the paper's figures at severities {list(self.needs_severities)}, but the "
                f"severities setting is {list(self.cfg.severities)} (without {missing}); add them, e.g. "
                f"-p settings '{{severities: {sorted(set(self.cfg.severities) | set(self.needs_severities))}}}'")

    def load_benchmarks(self, names=None, split: str = "nlt") -> dict:
        return load_benchmarks(self.cfg, names, split=split, data_dir=self.data_dir, device=self.device)

    @cached_property
    def benchmarks(self) -> dict:
        """Paper dataset -> its benchmark (voters trained and every setting labelled, or read from the cache)."""
        return self.load_benchmarks(self.benchmark_names)

    @property
    def ours_on(self) -> dict[str, str]:
        """Paper dataset -> the dataset ours ran on (the real one or its offline stand-in)."""
        return {name: b.dataset for name, b in self.benchmarks.items()}


class CifarPage(Page):
    """A page on CIFAR-10 (or its stand-in) alone."""

    benchmark_names = ("CIFAR10",)

    @cached_property
    def dataset(self):
        from shared.datasets import load_dataset

        return load_dataset(self.cfg.datasets["CIFAR10"], data_dir=self.data_dir)

    @cached_property
    def bench(self):
        """The benchmark on the NLT rows."""
        return self.benchmarks["CIFAR10"]

    @cached_property
    def test_bench(self):
        """The benchmark on the test split (where the human reference is)."""
        return self.load_benchmarks(["CIFAR10"], split="test")["CIFAR10"]

    @cached_property
    def humans(self) -> np.ndarray:
        """Human label counts per test image (CIFAR-10H, or the pseudo-human stand-in)."""
        from ciln.references import reference_counts

        return reference_counts(self.cfg, self.dataset, self.data_dir)

    @cached_property
    def raters(self) -> dict[str, np.ndarray]:
        """PL-IDN's rater votes on the NLT rows per tier (-1: a row absent from the PL-IDN release)."""
        from ciln.plidn import plidn_votes

        return plidn_votes(self.cfg, self.dataset, items="nlt", data_dir=self.data_dir)

    def overview(self):
        """Test rows, voters, annotators per image and the reference's per-annotator error."""
        bench, humans = self.test_bench, self.humans
        error = np.mean(1 - humans[np.arange(len(humans)), bench.y] / humans.sum(1))
        return show_table(pd.DataFrame([{"test rows": len(bench.y), "voters": len(bench.voters),
                                         "annotators per image": humans.sum(1).mean(),
                                         "human per-annotator error": error}]),
                          {"annotators per image": "{:.0f}", "human per-annotator error": "{:.1%}"})

    @cached_property
    def images(self) -> np.ndarray:
        """The clean images of the NLT rows."""
        return split_rows(self.dataset, "nlt")[0]

    def make_scenarios(self, settings, image_sources, **options) -> list:
        """``ciln.downstream.cifar_scenarios`` for ``settings`` with the page's rows and noisy NLV labels."""
        from ciln.downstream import cifar_scenarios, validation_rows

        cfg = self.cfg
        val = validation_rows(cfg, self.dataset, data_dir=self.data_dir, device=self.device)
        return cifar_scenarios(self.bench, self.images, settings, image_sources=image_sources,
                               master_seed=cfg.master_seed, max_rows=cfg.downstream_rows, val=val, **options)

    def scenarios_of(self, args: dict) -> list:
        """The scenarios of ``args`` (a page's ``scenario_args(cfg)``: settings, image_sources, clean_start,
        tiers), PL-IDN's tiers labelled by the page's raters. ``ciln.downstream.scenario_specs(**args)`` names the
        same scenarios in the same order without the data (``ciln/cost.py``)."""
        return self.make_scenarios(args["settings"], args["image_sources"], clean_start=args.get("clean_start", ()),
                                   raters={t: self.raters[t] for t in args.get("tiers", ())})

    def train(self, scenario, method: str, seed: int, variant: str | None = None) -> dict:
        """One run of ``method`` on ``scenario`` (``ciln.downstream.run``: read from the cache when done before)."""
        from ciln.downstream import run

        return run(scenario, method, self.cfg, seed=seed, test=(self.dataset.test.X, self.dataset.test.y),
                   variant=variant, device=self.device)


# ----------------------------------------------------------------------------------------- comparison helpers
def family_of(panels: dict[str, list[str]]) -> dict[str, str]:
    """Corruption -> the paper's family (the panels of Figs. 5 and 6)."""
    return {c: family for family, cs in panels.items() for c in cs}


def by_severity(comparison: pd.DataFrame, metric: str, panels: dict[str, list[str]]) -> pd.DataFrame:
    """Figures 5 and 6 as a table: one ``metric`` of a settings comparison (one dataset), a row per corruption by
    family in the figures' order (corruptions in no family last, as "other"), the paper's value and ours at each
    severity."""
    part = comparison[comparison["metric"] == metric].assign(severity=lambda d: d["severity"].astype(int))
    if part.empty:
        raise KeyError(f"no {metric!r} in the comparison; metrics: {sorted(comparison['metric'].unique())}")
    wide = part.pivot(index="corruption", columns="severity", values=["paper", "ours"])
    order = [c for cs in panels.values() for c in cs if c in wide.index]
    order += [c for c in wide.index if c not in order]
    out = pd.DataFrame({"family": [family_of(panels).get(c, "other") for c in order], "corruption": order})
    for severity in sorted(part["severity"].unique()):
        for source in ("paper", "ours"):
            values = wide[(source, severity)].reindex(order)
            out[f"{source} {severity}"] = pd.to_numeric(values, errors="coerce").to_numpy()
    return out


def agreement_summary(comparison: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group of a paper-vs-ours table: numbers compared (both present), their means, the mean absolute
    difference and the Spearman rank correlation of ours with the paper's (NaN below 3 numbers)."""
    rows = []
    for key, part in comparison.groupby(by, sort=False):
        both = part.assign(paper=pd.to_numeric(part["paper"], errors="coerce"),
                           ours=pd.to_numeric(part["ours"], errors="coerce")).dropna(subset=["paper", "ours"])
        rho = both["paper"].corr(both["ours"], method="spearman") if len(both) >= 3 else np.nan
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "compared": len(both), "of": len(part),
                     "paper mean": both["paper"].mean(), "ours mean": both["ours"].mean(),
                     "mean |diff|": (both["ours"] - both["paper"]).abs().mean(), "rank correlation": rho})
    return pd.DataFrame(rows)


def severity_key(value) -> str:
    """A severity as text that matches across the CSV and the scenarios: 5, 5.0 and "5" -> "5"; "", None, NaN -> ""."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return ""
    number = float(value)
    return "" if np.isnan(number) else str(int(number)) if number.is_integer() else str(number)


__all__ = ["Page", "CifarPage", "COMPARISON_FORMATS", "AGREEMENT_FORMATS", "family_of", "by_severity",
           "agreement_summary", "severity_key"]
