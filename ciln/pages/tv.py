"""06_tv: Figure 6 and Table II's TV column, the total variation between CILN's vote shares on the CIFAR-10
test images and the human reference (CIFAR-10H, or the pseudo-human stand-in), with its baselines.

    page = TotalVariation("smoke")
    page.run()                    # TV of every setting (bootstrapped reference), cached for the page
    page.plidn_tiers()            # the PL-IDN stand-in measured under the same protocol
    page.figure6()                # TV by family and severity, with the paper's values
    page.compare_with_paper()     # Fig. 6 as a table: paper and ours per severity (long=True: every number)
    page.compare_table2()         # Table II's TV column, the paper's rows
    page.claims()                 # statement | yes / no / not run | detail
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from ciln.benchmark import tv_table
from ciln.measures import tv_to_reference
from ciln.pages import COMPARISON_FORMATS, CifarPage, by_severity, family_of
from ciln.plidn import NoPlidnLabels, plidn_votes
from ciln.plots import family_bars
from ciln.references import subsample_raters
from shared.plotting import finish_figure
from shared.report import claim_record, reported, verdict
from shared.tables import show_table

TV_COLUMNS = ["corruption", "severity", "noise_rate_test", "tv", "tv_ci95", "tv_sym", "tv_ccn", "tv_C"]
SETTING_METRICS = ["noise_rate_test", "tv", "tv_ci95", "tv_sym", "tv_ccn", "noise_rate_test_C", "tv_C"]
VARIANTS = {"PL-IDN": "PL-IDN", "S": "CILN-S", "C": "CILN-C"}


def closest_settings(tv: pd.DataFrame, noise_rate: float, k: int = 3) -> pd.DataFrame:
    """The ``k`` settings whose test noise rate is closest to ``noise_rate``, closest first."""
    return tv.iloc[(tv["noise_rate_test"] - noise_rate).abs().argsort()[:k]]


def measured_tier(tier: str, votes: np.ndarray, y: np.ndarray, humans: np.ndarray, n_votes: int, n_boot: int,
                  num_classes: int) -> dict:
    """One PL-IDN tier under CILN's protocol: ``n_votes`` of its raters drawn per image give the vote shares."""
    result = tv_to_reference(subsample_raters(votes, n_votes, num_classes), y, humans, n_votes=n_votes, n_boot=n_boot)
    return {"tier": f"PL-IDN-{tier}", "source": "measured", "per-rater noise": float(np.mean(votes != y[:, None])),
            "noise_rate_test": result.noise_rate, "tv": result.tv, "tv_ci95": result.tv_ci95,
            "tv_sym": result.tv_symmetric, "tv_ccn": result.tv_ccn}


def quoted_tiers(table2: pd.DataFrame) -> pd.DataFrame:
    """PL-IDN's tiers as Table II quotes them (Gu et al.'s protocol), for when no test image has PL-IDN votes."""
    quoted = table2.query("variant == 'PL-IDN'").pivot(index="corruption", columns="metric", values="value")
    return pd.DataFrame([{"tier": f"PL-IDN-{name[-1]}", "source": "paper (Gu et al.'s protocol)",
                          "noise_rate_test": row["noise_rate"], "tv": row["tv"], "tv_ci95": row["tv_ci95"]}
                         for name, row in quoted.iterrows()])


def matched_table(tv: pd.DataFrame, tiers: pd.DataFrame, k: int = 3) -> pd.DataFrame:
    """Each PL-IDN tier followed by the ``k`` CILN-S settings closest to it in test noise rate."""
    rows = []
    for _, tier in tiers.iterrows():
        rows.append({"benchmark": tier["tier"], "noise": tier["noise_rate_test"], "TV": tier["tv"],
                     "TV ±": tier["tv_ci95"]})
        rows += [{"benchmark": f"CILN-S {r.corruption} ({r.severity})", "noise": r.noise_rate_test, "TV": r.tv,
                  "TV ±": r.tv_ci95} for r in closest_settings(tv, tier["noise_rate_test"], k).itertuples()]
    return pd.DataFrame(rows, columns=["benchmark", "noise", "TV", "TV ±"])


def settings_rows(tv: pd.DataFrame, ours_on: str) -> pd.DataFrame:
    """Every setting's test numbers in long form (dataset, corruption, severity, metric, value, ours_on)."""
    long = tv.melt(id_vars=["corruption", "severity"], var_name="metric", value_vars=SETTING_METRICS)
    return long.assign(dataset="CIFAR10", ours_on=ours_on)


def table2_rows(tv: pd.DataFrame, tiers: pd.DataFrame, ours_on: str) -> pd.DataFrame:
    """Table II's TV column, ours: the measured PL-IDN tiers (TV and its ±), then every setting's CILN-S and
    CILN-C TV (variant, corruption, severity, metric, value, ours_on)."""
    rows = [{"variant": "PL-IDN", "corruption": f"plidn_{t['tier'][-1]}", "severity": "", "metric": m, "value": t[m],
             "ours_on": f"{ours_on} fallible raters"} for _, t in tiers.iterrows() if t["source"] == "measured"
            for m in ("tv", "tv_ci95")]
    for variant, suffix in (("S", ""), ("C", "_C")):
        rows += [{"variant": variant, "corruption": r.corruption, "severity": r.severity, "metric": "tv",
                  "value": getattr(r, f"tv{suffix}"), "ours_on": ours_on} for r in tv.itertuples()]
    return pd.DataFrame(rows)


def table2_layout(comparison: pd.DataFrame) -> pd.DataFrame:
    """Table II's TV column in the paper's row order: benchmark (PL-IDN / CILN-S / CILN-C), setting, TV paper |
    ours | diff, the ± paper | ours, and what ours was computed on."""
    rows = []
    for (variant, corruption, severity), part in comparison.groupby(["variant", "corruption", "severity"], sort=False):
        part = part.set_index("metric")
        cell = lambda metric, column: part[column].get(metric, np.nan)  # noqa: E731
        setting = f"PL-IDN-{corruption[-1]}" if variant == "PL-IDN" else f"{corruption} ({severity})"
        rows.append({"benchmark": VARIANTS.get(variant, variant), "setting": setting,
                     "TV paper": cell("tv", "paper"), "TV ours": cell("tv", "ours"), "diff": cell("tv", "diff"),
                     "± paper": cell("tv_ci95", "paper"), "± ours": cell("tv_ci95", "ours"),
                     "ours_on": cell("tv", "ours_on")})
    return pd.DataFrame(rows)


def figure6(tv: pd.DataFrame, tiers: pd.DataFrame, panels: dict[str, list[str]], paper_tv: pd.DataFrame):
    """TV by family (a panel each) and severity; symmetric-baseline ticks, the paper's diamonds, and the PL-IDN
    low and medium tiers as horizontal lines."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5), constrained_layout=True, sharey=True)
    for ax, (family, corruptions), letter in zip(axes.ravel(), panels.items(), "abcd"):
        family_bars(ax, tv, "tv", corruptions, floor="tv_sym", floor_label="symmetric baseline", paper=paper_tv,
                    ylabel="TV to the human reference", title=f"({letter}) {family}")
        for (tier, value), style in zip(tiers.set_index("tier")["tv"].items(), ("--", ":")):
            if tier.endswith(("L", "M")):
                ax.axhline(value, color="crimson", ls=style, lw=1, label=f"{tier} (stand-in)")
        ax.legend(fontsize="x-small", ncol=2)
    return fig


def tv_claims(tv: pd.DataFrame, tiers: pd.DataFrame, panels: dict[str, list[str]]) -> list[dict]:
    """The paper's statements about Fig. 6 and Table II's TV column. ``tv``: ``ciln.benchmark.tv_table``;
    ``tiers``: PL-IDN's tiers (measured or quoted); ``panels``: family -> corruptions."""
    records = []
    below = (tv["tv"] < tv[["tv_sym", "tv_ccn"]].min(axis=1))
    records.append(claim_record(
        "CILN is closer to the human reference than symmetric and class-conditional noise at the same rate",
        verdict(below.mean() >= 0.8, below.mean()), f"{below.sum()}/{len(tv)} settings (paper: 45/45)"))
    rho = spearmanr(tv["noise_rate_test"], tv["tv"]).statistic if len(tv) > 1 else np.nan
    records.append(claim_record("TV rises with the noise rate (Spearman rho >= 0.8 across settings)",
                                verdict(rho >= 0.8, rho), f"rho = {rho:.2f}"))
    wide = tv.pivot(index="corruption", columns="severity", values="tv")
    milder = (wide[1] < wide[5]).mean() if {1, 5} <= set(wide.columns) else np.nan
    records.append(claim_record("Mild corruptions are more human-like than severe ones (TV at level 1 below level 5)",
                                verdict(milder >= 0.8, milder), f"{milder:.0%} of corruptions"))
    family_mean = tv.assign(panel=tv["corruption"].map(family_of(panels))).groupby("panel")["tv"].mean().sort_values()
    records.append(claim_record(
        "Weather and Digital corruptions have the lowest TV",
        verdict(set(family_mean.index[:2]) == {"Weather", "Digital"}, *([np.nan] if len(family_mean) < 2 else [])),
        ", ".join(f"{k} {v:.3f}" for k, v in family_mean.items())))
    wins = [(closest_settings(tv, tier["noise_rate_test"])["tv"] < tier["tv"]).mean() for _, tier in tiers.iterrows()]
    source = tiers["source"].iloc[0] if len(tiers) else "not run"
    records.append(claim_record(
        f"CILN is closer to humans than PL-IDN at matched noise rates (PL-IDN: {source})",
        verdict(bool(wins) and float(np.mean(wins)) > 0.5, *(wins or [np.nan])),
        ", ".join(f"{t}: {w:.0%} of matched settings" for t, w in zip(tiers.get("tier", []), wins))))
    return records


class TotalVariation(CifarPage):
    """06: Fig. 6 and Table II's TV column on the CIFAR-10 test split."""

    notebook = "06_tv"
    tier_note = ""

    @cached_property
    def tv(self) -> pd.DataFrame:
        """Per setting: test noise rate, TV with its ±, the symmetric and CCN baselines; CILN-S and CILN-C."""
        table = tv_table(self.test_bench, self.humans, n_votes=len(self.test_bench.voters), n_boot=self.cfg.n_boot)
        self.report.table(table, "tv_cifar10")
        return table

    def run(self):
        """TV of every setting (one progress bar); the table, one row per setting."""
        return show_table(self.tv[TV_COLUMNS], {c: "{:.3f}" for c in TV_COLUMNS[2:]})

    @cached_property
    def tiers(self) -> pd.DataFrame:
        """PL-IDN's tiers measured under this protocol, or (no PL-IDN votes on test images) as Table II quotes them."""
        try:
            votes = plidn_votes(self.cfg, self.dataset, items="test", data_dir=self.data_dir)
        except NoPlidnLabels as err:  # the real release labels no test image
            self.tier_note = str(err)
            votes = {}
        M, K = len(self.test_bench.voters), self.test_bench.num_classes
        tiers = pd.DataFrame([measured_tier(tier, v, self.test_bench.y, self.humans, M, self.cfg.n_boot, K)
                              for tier, v in votes.items()])
        if not votes:
            tiers = quoted_tiers(reported("ciln", "table2"))
        self.report.table(tiers, "tv_plidn_standin")
        return tiers

    def plidn_tiers(self):
        tiers = self.tiers
        return show_table(tiers, {c: "{:.3f}" for c in tiers.columns if c not in ("tier", "source")},
                          caption=self.tier_note or None)

    def figure6(self):
        paper = reported("ciln", "settings")
        paper_tv = paper[(paper["dataset"] == "CIFAR10") & (paper["metric"] == "tv")]
        return finish_figure(figure6(self.tv, self.tiers, self.cfg.fig5_panels, paper_tv), self.report, "fig6_tv")

    def table2_matched(self):
        matched = matched_table(self.tv, self.tiers)
        self.report.table(matched, "table2_tv_matched")
        return show_table(matched, {"noise": "{:.1%}", "TV": "{:.3f}", "TV ±": "{:.3f}"})

    @cached_property
    def comparisons(self) -> dict[str, pd.DataFrame]:
        """Every setting's numbers beside the repository's, then Table II's TV column (both kept for the scorecard)."""
        settings = self.report.compare(settings_rows(self.tv, self.test_bench.dataset), "settings",
                                       on=["dataset", "corruption", "severity"])
        table2 = self.report.compare(table2_rows(self.tv, self.tiers, self.test_bench.dataset), "table2",
                                     on=["variant", "corruption", "severity"])
        return {"settings": settings, "table2": table2}

    def compare_with_paper(self, metric: str = "tv", long: bool = False):
        """Figure 6 as a table: ``metric`` per corruption, the paper's value and ours at each severity. ``long=True``:
        every compared number (all settings' metrics and Table II's TV column) with its diff, one per row."""
        if long:
            both = pd.concat([self.comparisons["settings"], self.comparisons["table2"]], ignore_index=True)
            front = ["item", "variant", "corruption", "severity", "metric", "paper", "ours", "diff"]
            both = both[front + [c for c in both.columns if c not in front and c != "dataset"]]
            return show_table(both, COMPARISON_FORMATS)
        table = by_severity(self.comparisons["settings"], metric, self.cfg.fig5_panels)
        return show_table(table, {c: "{:.3f}" for c in table.columns[2:]})

    def compare_table2(self):
        table = table2_layout(self.comparisons["table2"])
        return show_table(table, {c: "{:.3f}" for c in ("TV paper", "TV ours", "± paper", "± ours")} |
                          {"diff": "{:+.3f}"})

    def claims(self) -> pd.DataFrame:
        self.comparisons  # recorded for the scorecard before the report is written
        return self._finish(tv_claims(self.tv, self.tiers, self.cfg.fig5_panels))


__all__ = ["TotalVariation", "closest_settings", "figure6", "matched_table",
           "measured_tier", "quoted_tiers", "settings_rows", "table2_layout", "table2_rows", "tv_claims"]
