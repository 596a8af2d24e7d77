"""01_benchmark: Table I — Algorithm 1 run for every setting of the three datasets, the release filter and the paper's
Table I beside ours.

    page = Instantiations("smoke")
    page.run()                        # voters trained and every setting's voter outputs computed (cached)
    page.figure_noise_rates()         # noise rate of every setting, CILN-S bars, CILN-C ticks, the paper's diamonds
    page.table1()                     # Table I, ours
    page.compare_with_paper()         # Table I: paper | ours | diff
    page.claims()
"""
from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from ciln.benchmark import instantiation_summary, release_filter
from ciln.pages import AGREEMENT_FORMATS, COMPARISON_FORMATS, Page, agreement_summary
from shared.plotting import finish_figure
from shared.report import claim_record, reported, verdict
from shared.tables import show_table

TABLE1_METRICS = ["voters", "rows_per_setting", "released_settings", "noise_rate_min", "noise_rate_max"]


def _number(value, sign: str = "") -> str:
    """A Table I number: counts as integers, noise rates with three decimals (a zero difference as 0)."""
    value = float(value)
    if value == 0:
        return "0"
    return f"{value:{sign},.0f}" if value.is_integer() else f"{value:{sign}.3f}"


# ----------------------------------------------------------------------------------------- tables
def split_table(benchmarks: dict) -> pd.DataFrame:
    """Per paper dataset: what ours ran on and the size of each split (CLT, NLT, CLV, NLV, TEST)."""
    return pd.DataFrame([{"paper dataset": name, "ours": f"{b.dataset} ({b.source})",
                          **{k.upper(): v for k, v in b.split_sizes.items()}} for name, b in benchmarks.items()])


def voter_table(benchmarks: dict) -> pd.DataFrame:
    """Each voter's clean test accuracy."""
    return pd.DataFrame([{"paper dataset": name, "voter": voter, "clean test accuracy": acc}
                         for name, b in benchmarks.items() for voter, acc in b.voter_accuracy.items()])


def floor_table(benchmarks: dict) -> pd.DataFrame:
    """Per dataset: voters, the noise rate of the uncorrupted rows and the share of rows all voters get right."""
    return pd.DataFrame([{"paper dataset": name, "voters": len(b.voters), "clean noise rate": b.noise_rate(None),
                          "clean-start share": float(b.clean_start_mask().mean())} for name, b in benchmarks.items()])


def release_table(released: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per dataset: settings released of all, and the settings the release filter dropped."""
    rows = []
    for name, table in released.items():
        dropped = table[~table["released"]]
        rows.append({"dataset": name, "released": int(table["released"].sum()), "settings": len(table),
                     "dropped": ", ".join(f"{c} ({s})" for c, s in zip(dropped["corruption"], dropped["severity"]))
                     or "none"})
    return pd.DataFrame(rows)


def table1_long(table1: pd.DataFrame, ours_on: dict[str, str]) -> pd.DataFrame:
    """Table I in long form (dataset, metric, value, ours_on) for the comparison with the paper."""
    long = table1.melt(id_vars="benchmark", value_vars=TABLE1_METRICS, var_name="metric")
    long = long.rename(columns={"benchmark": "dataset"})
    long["ours_on"] = long["dataset"].map(ours_on)
    return long


def per_setting_long(summaries: dict[str, pd.DataFrame], ours_on: dict[str, str]) -> pd.DataFrame:
    """Every setting's noise rate in long form (dataset, corruption, severity, metric, value, ours_on)."""
    return pd.concat([
        t.assign(dataset=name, metric="noise_rate", value=t["noise_rate"], ours_on=ours_on[name])
        for name, t in summaries.items()
    ])[["dataset", "corruption", "severity", "metric", "value", "ours_on"]]


# ----------------------------------------------------------------------------------------- claims
def benchmark_claims(summaries: dict[str, pd.DataFrame], released: dict[str, pd.DataFrame],
                     table1: pd.DataFrame) -> list[dict]:
    """The paper's statements about the instantiations: severity controls the noise, clean-start lowers it, some
    MNIST settings are too mild to release, and Adult's noise-rate range is the narrowest (Table I)."""
    out = []
    statement = "Noise rate grows with severity (severity 5 above severity 1) for most corruptions"
    rises = pd.concat([t.pivot(index="corruption", columns="severity", values="noise_rate").assign(dataset=n)
                       for n, t in summaries.items()]) if summaries else pd.DataFrame()
    if {1, 5} <= set(rises.columns):
        rising = rises[5] > rises[1]
        out.append(claim_record(statement, rising.mean() >= 0.75, f"{rising.sum()}/{len(rising)} corruptions"))
    else:
        out.append(claim_record(statement, None, "severities 1 and 5 were not both run"))

    below = pd.concat(summaries.values()) if summaries else pd.DataFrame(columns=["noise_rate", "noise_rate_C"])
    c_lower = (below["noise_rate_C"] < below["noise_rate"]).mean()
    out.append(claim_record("Clean-start (CILN-C) noise rates are below the standard (CILN-S) ones",
                            verdict(c_lower == 1.0, c_lower), f"{c_lower:.0%} of {len(below)} settings"))

    statement = "Some MNIST settings are too mild to release"
    if "MNIST" in released:
        mnist = released["MNIST"]
        out.append(claim_record(statement, (~mnist["released"]).any(),
                                f"{int((~mnist['released']).sum())} of {len(mnist)} dropped"))
    else:
        out.append(claim_record(statement, None, "MNIST was not run"))

    statement = "Adult's noise-rate range is narrower than both image benchmarks'"
    spans = {n: r["noise_rate_max"] - r["noise_rate_min"] for n, r in table1.set_index("benchmark").iterrows()}
    if {"Adult", "CIFAR10", "MNIST"} <= set(spans):
        out.append(claim_record(statement, spans["Adult"] < min(spans["CIFAR10"], spans["MNIST"]),
                                ", ".join(f"{n} {v:.1%}" for n, v in spans.items())))
    else:
        out.append(claim_record(statement, None, "needs CIFAR10, MNIST and Adult; ran " + (", ".join(spans) or "none")))
    return out


# ----------------------------------------------------------------------------------------- the page
class Instantiations(Page):
    """01: Algorithm 1 for every setting of CIFAR-10, MNIST and Adult (or their stand-ins) and Table I."""

    notebook = "01_benchmark"

    def run(self):
        """Train the voter pools and label every setting (read from the cache when done before): the splits."""
        return show_table(split_table(self.benchmarks))

    def voters(self):
        table = voter_table(self.benchmarks)
        self.report.table(table, "voters")
        return show_table(table, {"clean test accuracy": "{:.3f}"})

    def floors(self):
        return show_table(floor_table(self.benchmarks), {"clean noise rate": "{:.3f}", "clean-start share": "{:.3f}"})

    @cached_property
    def summaries(self) -> dict[str, pd.DataFrame]:
        """Per dataset, one row per setting: noise rate of CILN-S and CILN-C."""
        return {name: b.summary() for name, b in self.benchmarks.items()}

    def figure_noise_rates(self):
        import matplotlib.pyplot as plt

        from ciln.plots import severity_bars

        paper = reported("ciln", "settings")
        fig, axes = plt.subplots(len(self.summaries), 1, figsize=(11, 11 / 3 * len(self.summaries)),
                                 constrained_layout=True, squeeze=False)
        for ax, (name, table) in zip(axes[:, 0], self.summaries.items()):
            ref = paper[(paper["dataset"] == name) & (paper["metric"] == "noise_rate")]
            severity_bars(ax, table, "noise_rate", marker_value="noise_rate_C", paper=ref,
                          ylabel="noise rate δ", title=f"{name} (ours on {self.benchmarks[name].dataset})")
        axes[0, 0].legend(ncol=5, fontsize="small", loc="upper left")
        return finish_figure(fig, self.report, "noise_rates")

    @cached_property
    def released(self) -> dict[str, pd.DataFrame]:
        """Per dataset, every setting with its ``released`` flag (the release rule applies to MNIST only)."""
        cfg = self.cfg
        out = {name: release_filter(b, cfg.release_min_noise, cfg.release_relative_to_clean,
                                    apply=name in cfg.release_filtered) for name, b in self.benchmarks.items()}
        for name, table in out.items():
            self.report.table(table, f"settings_{name.lower()}")
        return out

    def release(self):
        """Settings released and dropped per dataset."""
        return show_table(release_table(self.released))

    @cached_property
    def table1_frame(self) -> pd.DataFrame:
        table = pd.DataFrame([{"benchmark": name, **instantiation_summary(b, self.released[name])}
                              for name, b in self.benchmarks.items()])
        self.report.table(table, "table1")
        return table

    def table1(self):
        return show_table(self.table1_frame, {"noise_rate_min": "{:.1%}", "noise_rate_max": "{:.1%}"})

    def write_release(self):
        """Each benchmark written as a release folder (the authors' layout) and read back; its size."""
        if not self.cfg.write_release:
            return "write_release is off in these settings: no release written"
        from ciln.release import read_release, write_release

        rows = []
        for name, b in self.benchmarks.items():
            folder = write_release(b, self.report.out_dir / "release" / name,
                                   extra={"paper_dataset": name, "profile": self.report.profile})
            back = read_release(folder)
            if not all(np.array_equal(back.probs[s], b.probs[s]) for s in b.settings):
                raise RuntimeError(f"{name}: the release at {folder} does not read back the voter outputs written")
            rows.append({"dataset": name, "settings": len(b.settings), "voters": len(b.voters), "rows": len(b.y),
                         "MB": sum(f.stat().st_size for f in folder.rglob("*")) / 2**20, "read back identical": True})
        return show_table(pd.DataFrame(rows), {"MB": "{:.1f}"})

    @cached_property
    def table1_comparison(self) -> pd.DataFrame:
        return self.report.compare(table1_long(self.table1_frame, self.ours_on), "table1", on=["dataset"])

    def compare_with_paper(self):
        """Table I: paper | ours | diff, with the paper's note (the setting at each extreme)."""
        shown = self.table1_comparison.drop(columns="item")
        return show_table(shown, {"paper": _number, "ours": _number, "diff": lambda v: _number(v, "+")})

    @cached_property
    def setting_comparison(self) -> pd.DataFrame:
        return self.report.compare(per_setting_long(self.summaries, self.ours_on), "settings",
                                   on=["dataset", "corruption", "severity"])

    def per_setting_summary(self):
        """Per dataset: how close every setting's noise rate is to the repository's."""
        return show_table(agreement_summary(self.setting_comparison, ["dataset"]), AGREEMENT_FORMATS)

    def per_setting_comparison(self):
        """Every setting's noise rate beside the repository's (long: interactive)."""
        return show_table(self.setting_comparison.drop(columns=["item", "note"]), COMPARISON_FORMATS)

    def claims(self) -> pd.DataFrame:
        self.table1_comparison, self.setting_comparison  # recorded for the scorecard before the report is written
        return self._finish(benchmark_claims(self.summaries, self.released, self.table1_frame))


__all__ = ["Instantiations", "benchmark_claims", "split_table", "voter_table", "floor_table",
           "release_table", "table1_long", "per_setting_long"]
