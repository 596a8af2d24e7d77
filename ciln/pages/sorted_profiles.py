"""04_sorted_profiles: Figure 4 — sorted class-frequency profiles of clean and sampled labels, their entropy, and
each panel's most frequent label at level 5.

    page = SortedProfiles("smoke")
    page.run()                   # the panels' benchmarks (cached): label entropies per level
    page.figure4()               # one panel per (dataset, corruption): class shares sorted by rank, per level
    page.compare_with_paper()    # entropies: paper | ours | diff
    page.attractors()            # the most frequent sampled label at level 5
    page.claims()
"""
from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from ciln.measures import label_entropy
from ciln.pages import Page
from shared.plotting import finish_figure
from shared.report import claim_record, reported
from shared.tables import show_table

LEVELS = ("clean", "1", "5")  # Figure 4's curves
LETTERS = "abcd"
# the paper's drops from level 1 to 5 are 0.14 to 0.64 bits; a drop under 0.05 bits counts as no change
MIN_DROP_BITS = 0.05
ENTROPY_FORMATS = {"paper": "{:.4f}", "ours": "{:.4f}", "diff": "{:+.4f}"}


def level_profile(bench, corruption: str, seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Label shares and label entropy (bits) of the clean labels and of the labels sampled at levels 1 and 5
    (one voter per row, ``seed``): ({"clean": (K,), "1": ..., "5": ...}, {"clean": H, ...})."""
    shares = {k: v for k, v in bench.level_shares(corruption, seed).items() if k in LEVELS}
    labels = {"clean": bench.y, **{k: bench.sampled_labels((corruption, int(k)), seed) for k in shares if k != "clean"}}
    return shares, {k: label_entropy(v, bench.num_classes) for k, v in labels.items()}


def entropy_rows(dataset: str, corruption: str, entropy: dict[str, float], ours_on: str) -> list[dict]:
    """One panel's entropies in the long form of the paper's numbers (metric entropy_bits)."""
    return [{"dataset": dataset, "corruption": corruption, "level": k, "metric": "entropy_bits", "value": v,
             "ours_on": ours_on} for k, v in entropy.items()]


def top_label(bench, corruption: str, seed: int = 0) -> dict:
    """The most frequent sampled label at level 5 and its share."""
    shares = bench.label_shares((corruption, 5), seed)
    return {"most frequent label at level 5": bench.classes[int(np.argmax(shares))], "share": float(shares.max())}


def profile_claims(entropies: pd.DataFrame, tops: pd.DataFrame) -> list[dict]:
    """Entropy falls from level 1 to 5 (by at least ``MIN_DROP_BITS``, level 1 not above clean) for every panel,
    and rotation pulls MNIST labels towards the digit 2."""
    out = []
    wide = entropies.pivot_table(index=["dataset", "corruption"], columns="level", values="value")
    for (name, corruption), row in wide.iterrows():
        statement = f"Entropy falls with severity for {name} {corruption.replace('_', ' ')} (H1 - H5 >= 0.05 bits)"
        if any(level not in row.index or pd.isna(row[level]) for level in LEVELS):
            out.append(claim_record(statement, None, "levels clean, 1 and 5 were not all run"))
            continue
        ok = (row["1"] - row["5"] >= MIN_DROP_BITS) & (row["1"] <= row["clean"] + 1e-9)
        out.append(claim_record(statement, bool(ok), f"{row['clean']:.3f} / {row['1']:.3f} / {row['5']:.3f} bits"))
    statement = "Rotation pulls MNIST labels towards the digit 2"
    top = tops.set_index(["dataset", "corruption"])
    if ("MNIST", "rotate") in top.index:
        rotate = top.loc[("MNIST", "rotate")]
        out.append(claim_record(statement, rotate["most frequent label at level 5"] == "2",
                                f"most frequent at level 5: {rotate['most frequent label at level 5']} "
                                f"({rotate['share']:.1%})"))
    else:
        out.append(claim_record(statement, None, "MNIST rotate is not among the panels"))
    return out


def panel_datasets(cfg) -> list[str]:
    """The datasets of Figure 4's panels (the benchmarks the page loads)."""
    return sorted({name for name, _ in cfg.panels})


class SortedProfiles(Page):
    """04: Figure 4 on this run's benchmarks."""

    notebook = "04_sorted_profiles"
    needs_severities = (1, 5)  # Figure 4's curves (LEVELS)

    @property
    def benchmark_names(self) -> list[str]:
        return panel_datasets(self.cfg)

    @cached_property
    def profiles(self) -> list[tuple[str, str, dict, dict]]:
        """Per panel: (dataset, corruption, label shares per level, entropy per level)."""
        return [(name, corruption, *level_profile(self.benchmarks[name], corruption, self.cfg.label_seed))
                for name, corruption in self.cfg.panels]

    @cached_property
    def entropies(self) -> pd.DataFrame:
        table = pd.DataFrame([row for name, corruption, _, entropy in self.profiles
                              for row in entropy_rows(name, corruption, entropy, self.benchmarks[name].dataset)])
        self.report.table(table, "entropies")
        return table

    def run(self):
        """Label entropy (bits) of each panel's clean and sampled labels, one column per level."""
        wide = self.entropies.pivot_table(index=["dataset", "corruption"], columns="level", values="value", sort=False)
        return show_table(wide[[c for c in LEVELS if c in wide.columns]].reset_index(), {c: "{:.3f}" for c in LEVELS
                                                                                          if c in wide.columns})

    def figure4(self):
        import matplotlib.pyplot as plt

        from ciln.plots import sorted_profiles

        paper = reported("ciln", "fig4")
        fig, axes = plt.subplots(2, 2, figsize=(12, 7.5), constrained_layout=True)
        for ax, (name, corruption, shares, entropy), letter in zip(axes.ravel(), self.profiles, LETTERS):
            ref = paper[(paper["dataset"] == name) & (paper["corruption"] == corruption) & (paper["metric"] == "share")]
            sorted_profiles(ax, shares, entropy, title=f"({letter}) {name} {corruption.replace('_', ' ')}",
                            paper={"5": ref.sort_values("rank")["value"].to_numpy()} if len(ref) else None)
            ax.legend(fontsize="small")
        return finish_figure(fig, self.report, "fig4_sorted_profiles")

    @cached_property
    def comparison(self) -> pd.DataFrame:
        return self.report.compare(self.entropies, "fig4", on=["dataset", "corruption", "level"])

    def compare_with_paper(self):
        return show_table(self.comparison.drop(columns=["item", "rank", "note"]), ENTROPY_FORMATS)

    @cached_property
    def tops(self) -> pd.DataFrame:
        return pd.DataFrame([{"dataset": name, "corruption": corruption,
                              **top_label(self.benchmarks[name], corruption, self.cfg.label_seed)}
                             for name, corruption in self.cfg.panels])

    def attractors(self):
        return show_table(self.tops, {"share": "{:.1%}"})

    def claims(self) -> pd.DataFrame:
        self.comparison  # recorded for the scorecard before the report is written
        return self._finish(profile_claims(self.entropies, self.tops))


__all__ = ["SortedProfiles", "panel_datasets", "level_profile", "entropy_rows", "top_label", "profile_claims"]
