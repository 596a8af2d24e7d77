"""05_nth: Figure 5 and Table II's nth — how instance-dependent CILN's noise is, against its class-conditional floor.

    page = Nth("smoke")
    page.run()                   # nth, its CCN floors and clean-start nth for every setting of the three datasets
    page.figure5()               # CIFAR-10 nth by super-family and level, with the floor and the paper's values
    page.figure_floor()          # nth against its simulated floor, every setting
    page.table2()                # Table II's ten CIFAR-10 settings, CILN-S and CILN-C
    page.fig5_table()            # Figure 5's numbers: paper and ours per corruption and level
    page.compare_with_paper()    # every number the repository reports: paper | ours | diff (long: interactive)
    page.claims()
"""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ciln.benchmark import nth_table
from ciln.pages import AGREEMENT_FORMATS, COMPARISON_FORMATS, Page, agreement_summary, by_severity
from shared.plotting import finish_figure
from shared.report import claim_record, reported, verdict
from shared.tables import show_table

TABLE2_COLUMNS = ["noise_rate", "nth", "floor_simulated", "gap", "frv", "noise_rate_C", "nth_C", "nth_mean_softmax"]
COMPARED = {"nth": "nth", "floor_simulated": "nth_ccn_floor", "nth_C": "nth_C"}  # our column -> the paper's metric


# ----------------------------------------------------------------------------------------- tables
def nth_overview(tables: dict[str, pd.DataFrame], ours_on: dict[str, str]) -> pd.DataFrame:
    """Per dataset: settings, the range of nth and how many settings lie above their simulated CCN floor."""
    return pd.DataFrame([{"dataset": name, "ours on": ours_on[name], "settings": len(t), "nth min": t["nth"].min(),
                          "nth max": t["nth"].max(), "above the CCN floor": int((t["gap"] > 0).sum())}
                         for name, t in tables.items()])


def table2_frame(table: pd.DataFrame, settings) -> pd.DataFrame:
    """Table II's settings (corruption, severity) of one dataset's nth table, in the paper's order."""
    picked = table.set_index(["corruption", "severity"]).loc[[tuple(s) for s in settings]]
    return picked[TABLE2_COLUMNS].reset_index()


def family_means(tables: dict[str, pd.DataFrame], names=("MNIST", "Adult")) -> pd.DataFrame:
    """Mean nth per corruption family (rows) of each dataset in ``names`` (columns; NaN where a family is absent)."""
    return pd.concat({name: tables[name].groupby("family")["nth"].mean() for name in names if name in tables}, axis=1)


def nth_long(tables: dict[str, pd.DataFrame], ours_on: dict[str, str]) -> pd.DataFrame:
    """nth, its simulated floor and clean-start nth of every setting, in the long form of the paper's numbers."""
    long = pd.concat([
        t.melt(id_vars=["corruption", "severity"], value_vars=list(COMPARED), var_name="metric")
        .assign(dataset=name, ours_on=ours_on[name])
        for name, t in tables.items()
    ])
    long["metric"] = long["metric"].replace(COMPARED)
    return long


# ----------------------------------------------------------------------------------------- claims
def nth_claims(tables: dict[str, pd.DataFrame]) -> list[dict]:
    """Section IV-B's statements: nth positive everywhere, rising then falling with severity, lowered but ranked
    alike by clean-start, strongest for MNIST's geometric and Adult's scaling corruptions; and nth above its
    class-conditional floor."""
    everything = pd.concat(tables.values()) if tables else pd.DataFrame(columns=["nth", "nth_C", "gap"])
    out = [claim_record("nth is positive in every setting", verdict(bool((everything["nth"] > 0).all()),
                                                                    *([] if len(everything) else [None])),
                        f"min {everything['nth'].min():.4f} over {len(everything)} settings")]

    statement = "nth rises and then falls with severity for some corruption"
    wide = pd.concat([t.assign(dataset=n) for n, t in tables.items()]).pivot_table(
        index=["dataset", "corruption"], columns="severity", values="nth") if tables else pd.DataFrame()
    if {1, 3, 5} <= set(wide.columns):
        peaked = wide[(wide[3] > wide[1]) & (wide[3] > wide[5])]
        out.append(claim_record(statement, len(peaked) > 0,
                                ", ".join(f"{d} {c}" for d, c in peaked.index[:6]) or "none"))
    else:
        out.append(claim_record(statement, None, "severities 1, 3 and 5 were not all run"))

    lower = (everything["nth_C"] < everything["nth"]).mean()
    out.append(claim_record("Clean-start lowers nth (CILN-C below CILN-S in at least 90 % of settings)",
                            verdict(lower >= 0.9, lower), f"{lower:.0%} of settings"))

    statement = "The most instance-dependent CIFAR-10 settings stay so under clean-start (top 5 overlap >= 3)"
    if "CIFAR10" in tables:
        cifar = tables["CIFAR10"]
        top_s = set(cifar.nlargest(5, "nth")[["corruption", "severity"]].apply(tuple, axis=1))
        top_c = set(cifar.nlargest(5, "nth_C")[["corruption", "severity"]].apply(tuple, axis=1))
        out.append(claim_record(statement, len(top_s & top_c) >= 3, f"{len(top_s & top_c)} of 5 shared"))
    else:
        out.append(claim_record(statement, None, "CIFAR10 was not run"))

    statement = "On MNIST the geometric corruptions give the largest nth"
    if "MNIST" in tables:
        mnist_top = tables["MNIST"].groupby("family")["nth"].mean().dropna().idxmax()
        out.append(claim_record(statement, mnist_top == "Geometric", f"largest family mean: {mnist_top}"))
    else:
        out.append(claim_record(statement, None, "MNIST was not run"))

    statement = "On Adult scaling gives the largest nth"
    if "Adult" in tables:
        adult_top = tables["Adult"].groupby("corruption")["nth"].mean().idxmax()
        out.append(claim_record(statement, adult_top == "scaling", f"largest: {adult_top}"))
    else:
        out.append(claim_record(statement, None, "Adult was not run"))

    above = (everything["gap"] > 0).mean()
    below = everything.loc[everything["gap"] <= 0, ["corruption", "severity"]].values[:6]
    out.append(claim_record("(A check of ours, not in the paper) nth exceeds its simulated CCN floor in most settings",
                            verdict(above > 0.5, above),
                            f"{above:.0%} of settings; below the floor: " + ", ".join(f"{c} ({s})" for c, s in below)))
    return out


# ----------------------------------------------------------------------------------------- the page
class Nth(Page):
    """05: nth of every setting of the three datasets, its CCN floor, Figure 5 and Table II's nth."""

    notebook = "05_nth"

    @cached_property
    def tables(self) -> dict[str, pd.DataFrame]:
        """Per dataset, one row per setting: noise rate, nth, CCN floors, gap and FRV, CILN-S and CILN-C."""
        tables = {name: nth_table(b, self.cfg.ccn_sims) for name, b in self.benchmarks.items()}
        for name, table in tables.items():
            self.report.table(table, f"nth_{name.lower()}")
        return tables

    def run(self):
        """nth of every setting (the voter outputs come from the cache when ``01_benchmark`` ran before)."""
        return show_table(nth_overview(self.tables, self.ours_on), {"nth min": "{:.4f}", "nth max": "{:.4f}"})

    def figure5(self):
        import matplotlib.pyplot as plt

        from ciln.plots import family_bars

        paper = reported("ciln", "settings")
        paper_nth = paper[(paper["dataset"] == "CIFAR10") & (paper["metric"] == "nth")]
        fig, axes = plt.subplots(2, 2, figsize=(12, 7.5), constrained_layout=True, sharey=True)
        for ax, (family, corruptions), letter in zip(axes.ravel(), self.cfg.fig5_panels.items(), "abcd"):
            family_bars(ax, self.tables["CIFAR10"], "nth", corruptions, floor="floor_simulated", paper=paper_nth,
                        ylabel="nth", title=f"({letter}) {family}")
            ax.legend(fontsize="x-small", ncol=2)
        return finish_figure(fig, self.report, "fig5_nth_cifar10")

    def figure_floor(self):
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(self.tables), figsize=(13 / 3 * len(self.tables), 4), constrained_layout=True,
                                 squeeze=False)
        for ax, (name, table) in zip(axes[0], self.tables.items()):
            for family, part in table.groupby("family"):
                ax.scatter(part["floor_simulated"], part["nth"], s=18, label=family)
            top = max(table["nth"].max(), table["floor_simulated"].max()) * 1.05
            ax.plot([0, top], [0, top], color="black", lw=0.8)
            above = (table["gap"] > 0).mean()
            ax.set(xlabel="CCN floor (simulated)", ylabel="nth",
                   title=f"{name}: {above:.0%} of settings above the floor")
            ax.legend(fontsize="x-small")
        return finish_figure(fig, self.report, "nth_vs_floor")

    def table2(self):
        return show_table(table2_frame(self.tables["CIFAR10"], self.cfg.table2_settings),
                          {c: "{:.3f}" for c in TABLE2_COLUMNS})

    def by_family(self):
        """Mean nth per corruption family on MNIST and Adult."""
        return show_table(family_means(self.tables).rename_axis("family").reset_index(),
                          {name: "{:.3f}" for name in ("MNIST", "Adult") if name in self.tables}, na_rep="")

    @cached_property
    def comparison(self) -> pd.DataFrame:
        return self.report.compare(nth_long(self.tables, self.ours_on), "settings",
                                   on=["dataset", "corruption", "severity"])

    def fig5_table(self):
        """Figure 5's numbers: the paper's nth and ours per CIFAR-10 corruption and level, grouped as its panels."""
        cifar = self.comparison[self.comparison["dataset"] == "CIFAR10"]
        pivot = by_severity(cifar, "nth", self.cfg.fig5_panels)
        return show_table(pivot, {c: "{:.3f}" for c in pivot.columns[2:]})

    def comparison_summary(self):
        """Per dataset and measure: how close every setting's number is to the repository's."""
        return show_table(agreement_summary(self.comparison, ["dataset", "metric"]), AGREEMENT_FORMATS)

    def compare_with_paper(self):
        """Every setting's nth, floor and clean-start nth beside the repository's (long: interactive)."""
        return show_table(self.comparison.drop(columns=["item", "note"]), COMPARISON_FORMATS)

    def claims(self) -> pd.DataFrame:
        self.comparison  # recorded for the scorecard before the report is written
        return self._finish(nth_claims(self.tables))


__all__ = ["Nth", "nth_overview", "table2_frame", "family_means", "nth_long", "nth_claims"]
