"""03_label_distributions: Figures 2 and 3, the label distributions a corruption induces (one voter per row, PL-IDN's
protocol), how strongly each setting pulls the labels towards an attractor class, and the paper's claims.

    page = LabelDistributions("smoke")
    page.figure2()                # the four image panels; page.figure3(): Adult
    page.panel_shifts()           # per panel: the class gaining most by level 5, and the level-1 deviation
    page.attractor_scan()         # every image setting, strongest attractor first
    page.compare_with_paper()     # the repository's sorted class shares beside ours, rank by rank
    page.claims()                 # statement | yes / no / not run | detail
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ciln.pages import COMPARISON_FORMATS, Page
from ciln.plots import class_share_bars
from shared.plotting import finish_figure
from shared.report import claim_record, verdict
from shared.tables import show_table

Panel = tuple[str, str]  # (paper dataset name, corruption)
Shares = dict[str, np.ndarray]  # level ("clean", "1", "3", "5") -> class shares (K,)

# The panels whose sorted class shares the official repository publishes (reported/fig2.csv)
COMPARED_PANELS: list[Panel] = [("CIFAR10", "pixelate"), ("CIFAR10", "gaussian_noise"), ("MNIST", "brightness")]
PP = {"gain (pp)": "{:.1f}", "max deviation at level 1 (pp)": "{:.1f}"}


def shift(shares: Shares) -> tuple[int, float, float]:
    """(class whose share grows most from clean to level 5, that gain in pp, largest |level 1 - clean| in pp)."""
    gain = shares["5"] - shares["clean"]
    return int(np.argmax(gain)), 100 * gain.max(), 100 * np.abs(shares["1"] - shares["clean"]).max()


def shift_table(shares: dict[Panel, Shares], classes: dict[str, tuple], class_column: str) -> pd.DataFrame:
    """One row per panel: dataset, corruption, the top class at level 5 (``class_column``), its gain (pp) and the
    largest deviation from the clean shares at level 1 (pp)."""
    rows = []
    for (name, corruption), levels in shares.items():
        cls, gain, dev1 = shift(levels)
        rows.append({"dataset": name, "corruption": corruption, class_column: classes[name][cls],
                     "gain (pp)": gain, "max deviation at level 1 (pp)": dev1})
    return pd.DataFrame(rows, columns=["dataset", "corruption", class_column, "gain (pp)",
                                       "max deviation at level 1 (pp)"])


def panel_table(shares: dict[Panel, Shares], classes: dict[str, tuple]) -> pd.DataFrame:
    """The shift of each figure panel, in the figures' order."""
    return shift_table(shares, classes, "top class at level 5")


def scan_table(shares: dict[Panel, Shares], classes: dict[str, tuple]) -> pd.DataFrame:
    """The shift of every image setting, strongest attractor (largest gain) first."""
    return shift_table(shares, classes, "attractor").sort_values("gain (pp)", ascending=False)


def share_figure(panels: list[Panel], shares: dict[Panel, Shares], classes: dict[str, tuple], *, nrows: int,
                 ncols: int, figsize: tuple[float, float]):
    """Grouped class-share bars (clean and each severity) per panel, lettered (a), (b), ...; legend on the first."""
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, constrained_layout=True)
    axes = np.atleast_1d(axes).ravel()
    for ax, (name, corruption), letter in zip(axes, panels, "abcdefghij"):
        class_share_bars(ax, shares[(name, corruption)], classes[name],
                         title=f"({letter}) {name} {corruption.replace('_', ' ')}")
    axes[0].legend(fontsize="small")
    return fig


def ranked_shares(shares: dict[Panel, Shares], ours_on: dict[str, str]) -> pd.DataFrame:
    """Long rows (dataset, corruption, severity, rank, metric "share", value, ours_on): each corrupted level's class
    shares sorted from the most frequent label down, for comparison with the paper by rank."""
    rows = []
    for (name, corruption), levels in shares.items():
        for level, values in levels.items():
            if level == "clean":
                continue
            for rank, value in enumerate(np.sort(values)[::-1], 1):
                rows.append({"dataset": name, "corruption": corruption, "severity": int(level), "rank": rank,
                             "metric": "share", "value": value, "ours_on": ours_on[name]})
    return pd.DataFrame(rows)


def ranked_layout(comparison: pd.DataFrame) -> pd.DataFrame:
    """The comparison by rank as the repository lays it out: one row per panel, level and source (paper, ours),
    one column per rank (1 = the most frequent label); ranks the paper does not report are missing."""
    keys = ["dataset", "corruption", "severity"]
    ranks = sorted(comparison["rank"].unique(), key=int)
    rows = []
    for key, part in comparison.groupby(keys, sort=False):
        part = part.set_index("rank")
        for source in ("paper", "ours"):
            rows.append({**dict(zip(keys, key)), "from": source,
                         **{str(r): part[source].get(r, np.nan) for r in ranks}})
    return pd.DataFrame(rows, columns=keys + ["from"] + [str(r) for r in ranks])


def _at(panels: pd.DataFrame, dataset: str, corruption: str, column: str):
    """``column`` of one panel's row; NaN (numbers) or "" (text) when the panel was not run."""
    row = panels[(panels["dataset"] == dataset) & (panels["corruption"] == corruption)]
    if row.empty:
        return np.nan if column != "top class at level 5" else ""
    return row[column].iloc[0]


def label_distribution_claims(panels: pd.DataFrame, scan: pd.DataFrame, image_shares: dict[Panel, Shares],
                              adult_shares: dict[str, Shares], adult_majority: int | None) -> list[dict]:
    """The paper's statements about Figs. 2 and 3. ``panels``: ``panel_table``; ``scan``: ``scan_table``;
    ``image_shares``: the Fig. 2 panels' shares; ``adult_shares``: the Fig. 3 panels' (corruption -> shares);
    ``adult_majority``: Adult's majority class among the true labels (None: Adult not run)."""
    records = []
    bright = _at(panels, "CIFAR10", "brightness", "gain (pp)")
    records.append(claim_record("Brightness barely changes the CIFAR-10 label distribution (gain < 5 pp at level 5)",
                                verdict(bright < 5, bright), f"{bright:.1f} pp"))
    mnist = _at(panels, "MNIST", "brightness", "gain (pp)")
    records.append(claim_record(
        "Brightness concentrates MNIST labels on an attractor (gain >= 10 pp at level 5)", verdict(mnist >= 10, mnist),
        f"{_at(panels, 'MNIST', 'brightness', 'top class at level 5')} +{mnist:.1f} pp"))
    for corruption in ("pixelate", "gaussian_noise"):
        gain = _at(panels, "CIFAR10", corruption, "gain (pp)")
        records.append(claim_record(
            f"CIFAR-10 {corruption.replace('_', ' ')} shifts labels towards a few classes (gain >= 10 pp at level 5)",
            verdict(gain >= 10, gain), f"{gain:.1f} pp"))
    stronger = sum(shift(s)[1] > 100 * np.max(s["1"] - s["clean"]) for s in image_shares.values())
    records.append(claim_record(
        "Severity increases concentration (level 5 gains more than level 1 in the image panels)",
        (stronger == len(image_shares)) if image_shares else None, f"{stronger}/{len(image_shares)} panels"))
    pushed = {} if adult_majority is None else {
        c: 100 * (s["5"][adult_majority] - s["clean"][adult_majority]) for c, s in adult_shares.items()}
    records.append(claim_record(
        "On Adult, missing values push labels towards the majority class",
        all(v > 0 for v in pushed.values()) if pushed else None,
        ", ".join(f"{c} {v:+.1f} pp" for c, v in pushed.items()) or "Adult was not run"))
    if scan.empty:
        records.append(claim_record("Some image setting has an attractor (>= 10 pp) and some is flat (< 3 pp at "
                                    "level 1)", None, "no image setting was run"))
    else:
        top = scan.iloc[0]
        records.append(claim_record(
            "Some image setting has an attractor (>= 10 pp) and some is flat (< 3 pp at level 1)",
            bool((scan["gain (pp)"] >= 10).any() and (scan["max deviation at level 1 (pp)"] < 3).any()),
            f"strongest: {top['dataset']} {top['corruption']} +{top['gain (pp)']:.1f} pp"))
    return records


class LabelDistributions(Page):
    """03: Figs. 2 and 3 on the benchmarks 01_benchmark generated (read from the cache)."""

    notebook = "03_label_distributions"
    needs_severities = (1, 5)  # Figs. 2 and 3 compare level 1 and level 5 with the clean shares
    IMAGE_DATASETS = ("CIFAR10", "MNIST")

    @property
    def classes(self) -> dict[str, tuple]:
        return {name: b.classes for name, b in self.benchmarks.items()}

    @cached_property
    def _shares(self) -> dict[Panel, Shares]:
        return {}

    def shares(self, name: str, corruption: str) -> Shares:
        """Label shares of the clean rows and of each severity of one setting (hard labels, ``label_seed``)."""
        if (name, corruption) not in self._shares:
            self._shares[(name, corruption)] = self.benchmarks[name].level_shares(corruption, self.cfg.label_seed)
        return self._shares[(name, corruption)]

    def _of(self, panels) -> dict[Panel, Shares]:
        return {(name, corruption): self.shares(name, corruption) for name, corruption in panels}

    def datasets(self):
        """What each paper dataset is in this run (the real one or its offline stand-in)."""
        return show_table(pd.DataFrame([{"paper dataset": name, "ours": b.dataset, "source": b.source}
                                        for name, b in self.benchmarks.items()]))

    def figure2(self):
        panels = [tuple(p) for p in self.cfg.fig2_panels]
        fig = share_figure(panels, self._of(panels), self.classes, nrows=2, ncols=2, figsize=(12, 7))
        return finish_figure(fig, self.report, "fig2_label_distributions")

    def figure3(self):
        panels = [tuple(p) for p in self.cfg.fig3_panels]
        fig = share_figure(panels, self._of(panels), self.classes, nrows=1, ncols=2, figsize=(9, 3.5))
        return finish_figure(fig, self.report, "fig3_adult_label_distributions")

    @cached_property
    def panels(self) -> pd.DataFrame:
        table = panel_table(self._of(self.cfg.fig2_panels + self.cfg.fig3_panels), self.classes)
        self.report.table(table, "panel_shifts")
        return table

    def panel_shifts(self):
        return show_table(self.panels, PP)

    @cached_property
    def scan(self) -> pd.DataFrame:
        settings = [(name, c) for name in self.IMAGE_DATASETS if name in self.benchmarks
                    for c in dict.fromkeys(c for c, _ in self.benchmarks[name].settings)]
        table = scan_table(self._of(settings), self.classes)
        self.report.table(table, "attractor_scan")
        return table

    def attractor_scan(self, top: int = 8):
        """The ``top`` strongest attractors; the whole scan is ``page.scan`` (and attractor_scan.csv)."""
        return show_table(self.scan.head(top), PP)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        ours = ranked_shares(self._of(COMPARED_PANELS), self.ours_on)
        return self.report.compare(ours, "fig2", on=["dataset", "corruption", "severity", "rank"])

    def compare_with_paper(self, long: bool = False):
        """By rank, paper and ours one above the other; ``long=True``: one row per number, with the paper's class
        (``note``), diff and what ours was computed on."""
        if long:
            return show_table(self.comparison.drop(columns=["item", "source"]), COMPARISON_FORMATS)
        layout = ranked_layout(self.comparison)
        return show_table(layout, {c: "{:.3f}" for c in layout.columns[4:]})

    def claims(self) -> pd.DataFrame:
        self.comparison  # recorded for the scorecard before the report is written
        adult = self.benchmarks.get("Adult")
        adult_shares = {c: self.shares(name, c) for name, c in self.cfg.fig3_panels} if adult else {}
        majority = int(np.argmax(adult.label_shares(None))) if adult else None
        records = label_distribution_claims(self.panels, self.scan, self._of(self.cfg.fig2_panels), adult_shares,
                                            majority)
        return self._finish(records)


__all__ = ["LabelDistributions", "label_distribution_claims", "panel_table", "ranked_layout", "ranked_shares",
           "scan_table", "share_figure", "shift"]
