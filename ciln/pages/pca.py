"""07_pca: Figure 7, the class marginals of the CILN settings, the PL-IDN tiers and the human reference in the
plane of their first two principal components, and the settings closest to the reference (by PCA distance, as
the paper's text ranks them, and by TV, as the official plotting script does).

    page = MarginalPCA("smoke")
    page.marginals_table()        # each benchmark's average label distribution over the test images
    page.figure7()                # all points, and the neighbourhood of the reference, labelled
    page.top_lists()              # the closest settings by PCA distance and by TV
    page.compare_ranks()          # the paper's top-ten settings: their ranks there and here
    page.claims()                 # statement | yes / no / not run | detail
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ciln.benchmark import tv_table
from ciln.measures import class_shares, marginal_pca
from ciln.pages import COMPARISON_FORMATS, CifarPage, family_of
from ciln.plidn import NoPlidnLabels, labelled_rows, plidn_votes
from shared.plotting import finish_figure
from shared.report import claim_record, verdict
from shared.tables import show_table

REFERENCE = "human reference"


def setting_label(corruption: str, severity: int) -> str:
    return f"{corruption} ({severity})"


def class_marginals(setting_shares: dict[str, np.ndarray], raters: dict[str, np.ndarray], humans: np.ndarray,
                    num_classes: int) -> dict[str, np.ndarray]:
    """Name -> average label distribution (K,): each setting's mean vote shares (n, K), each PL-IDN tier's share
    of rater votes (n, R), and the human reference's mean per-image distribution (counts (n, K))."""
    marginals = {name: shares.mean(axis=0) for name, shares in setting_shares.items()}
    marginals.update({f"PL-IDN-{tier}": class_shares(votes.ravel(), num_classes) for tier, votes in raters.items()})
    marginals[REFERENCE] = (humans / humans.sum(1, keepdims=True)).mean(axis=0)
    return marginals


def is_plidn(names) -> np.ndarray:
    return np.array([str(n).startswith("PL-IDN") for n in names], dtype=bool)


def settings_only(table: pd.DataFrame) -> pd.DataFrame:
    """The PCA table's CILN settings (no PL-IDN tier, no reference)."""
    return table[~is_plidn(table.index) & (table.index != REFERENCE)]


def closest(table: pd.DataFrame, top: int) -> pd.DataFrame:
    """The ``top`` settings nearest the reference in the PCA plane, nearest first."""
    return settings_only(table).nsmallest(top, "distance")


def figure7(table: pd.DataFrame, variance, top: int):
    """Fig. 7: every setting, the ``top`` closest highlighted, the PL-IDN tiers and the reference; on the right the
    reference's neighbourhood with the closest settings and the tiers labelled."""
    points, near = settings_only(table), closest(table, top)
    plidn, ref = table[is_plidn(table.index)], table.loc[REFERENCE]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), constrained_layout=True)
    for ax, zoom in zip(axes, (False, True)):
        ax.scatter(points["PC1"], points["PC2"], s=14, color="#9ecae1", label="CILN settings")
        ax.scatter(near["PC1"], near["PC2"], s=30, color="#08519c", label=f"{top} closest to the reference")
        ax.scatter(plidn["PC1"], plidn["PC2"], marker="+", s=120, color="crimson", label="PL-IDN stand-in tiers")
        ax.scatter(ref["PC1"], ref["PC2"], marker="x", s=120, color="black", label=REFERENCE)
        ax.set(xlabel=f"PC1 ({variance[0]:.1%})", ylabel=f"PC2 ({variance[1]:.1%})")
        if zoom:
            radius = 1.6 * near["distance"].max()
            ax.set(xlim=(ref["PC1"] - radius, ref["PC1"] + radius), ylim=(ref["PC2"] - radius, ref["PC2"] + radius),
                   title="around the reference")
            for name, row in pd.concat([near, plidn]).iterrows():
                ax.annotate(name.replace("_", " "), (row["PC1"], row["PC2"]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points", color="crimson" if name.startswith("PL-IDN") else "black")
        else:
            ax.set_title("all settings")
            ax.legend(fontsize="small")
    return fig


def with_names(tv: pd.DataFrame) -> pd.DataFrame:
    """``tv`` with each setting's label ("fog (3)") in a ``name`` column."""
    return tv.assign(name=[setting_label(c, s) for c, s in zip(tv["corruption"], tv["severity"])])


def top_lists(table: pd.DataFrame, tv: pd.DataFrame, top: int) -> pd.DataFrame:
    """Rank 1..``top``: the settings closest by PCA distance and those with the lowest TV (``tv`` with names)."""
    return pd.DataFrame({"rank": range(1, top + 1), "by PCA distance": closest(table, top).index.to_list(),
                         "by TV": tv.nsmallest(top, "tv")["name"].to_list()})


def comparison_rows(table: pd.DataFrame, variance, tv: pd.DataFrame, marginals: dict[str, np.ndarray],
                    ours_on: str) -> pd.DataFrame:
    """Ours in the paper's long form (name, class, metric, value, ours_on): the explained variance, every setting's
    rank by PCA distance and by TV, and the class marginals of the reference and of PL-IDN-H."""
    rows = [{"name": f"PC{i + 1}", "class": "", "metric": "explained_variance", "value": v}
            for i, v in enumerate(variance)]
    pca_rank = settings_only(table)["distance"].rank(method="first")
    tv_rank = tv.set_index("name")["tv"].rank(method="first")
    rows += [{"name": n, "class": "", "metric": "rank_by_pca_distance", "value": r} for n, r in pca_rank.items()]
    rows += [{"name": n, "class": "", "metric": "rank_by_tv", "value": r} for n, r in tv_rank.items()]
    for ours_name, paper_name in ((REFERENCE, "CIFAR-10H"), ("PL-IDN-H", "PL-IDN-H")):
        rows += [{"name": paper_name, "class": k, "metric": "class_marginal", "value": v}
                 for k, v in enumerate(marginals.get(ours_name, []))]
    return pd.DataFrame(rows).assign(ours_on=ours_on)


def rank_layout(comparison: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    """The paper's top-ten settings (by PCA distance, then those only in its TV list), one row each: their rank in
    the paper's rankings and in ours (``ours``: ``comparison_rows``, every setting ranked), missing where the paper
    does not rank the setting."""
    metrics = {"rank_by_pca_distance": "PCA distance", "rank_by_tv": "TV"}
    paper = comparison[comparison["metric"].isin(list(metrics)) & comparison["paper"].notna()]
    names = list(dict.fromkeys(paper["name"]))
    paper = paper.set_index(["name", "metric"])["paper"]
    ours = ours[ours["metric"].isin(list(metrics))].set_index(["name", "metric"])["value"]
    out = pd.DataFrame({"setting": names})
    for metric, label in metrics.items():
        for source, values in (("paper", paper), ("ours", ours)):
            out[f"{label}: {source}"] = [float(values.get((n, metric), np.nan)) for n in names]
    return out


def pca_claims(table: pd.DataFrame, variance, top: int, panels: dict[str, list[str]]) -> list[dict]:
    """The paper's statements about Fig. 7. ``table``: ``marginal_pca``'s table (with the reference and the PL-IDN
    tiers); ``panels``: family -> corruptions."""
    records = []
    near = closest(table, top)
    severities = near.index.str.extract(r"\((\d)\)")[0].astype(int)
    records.append(claim_record(
        f"The {top} settings closest to the human reference are low-severity (at most two at severity 5)",
        verdict((severities == 5).sum() <= 2, *([] if len(near) else [np.nan])),
        f"severities: {sorted(severities.tolist())}"))
    weather_digital = near.index.str.replace(r" \(\d\)$", "", regex=True).map(family_of(panels)).isin(
        ["Weather", "Digital"])
    records.append(claim_record(f"All {top} closest settings are Weather or Digital corruptions",
                                verdict(bool(weather_digital.all()), *([] if len(near) else [np.nan])),
                                f"{weather_digital.sum()}/{top}"))
    plidn = table.index[is_plidn(table.index)]
    ranks = table.drop(index=REFERENCE)["distance"].rank(method="first")
    records.append(claim_record("No PL-IDN tier is among the closest points to the reference",
                                verdict(bool((ranks[plidn] > top).all()), *([] if len(plidn) else [np.nan])),
                                ", ".join(f"{n}: rank {int(r)}" for n, r in ranks[plidn].items()) or "no PL-IDN tier"))
    records.append(claim_record("PC1 explains most of the variance of the class marginals", variance[0] > 0.5,
                                f"PC1 {variance[0]:.1%} (paper 69.3%)"))
    return records


class MarginalPCA(CifarPage):
    """07: Fig. 7 on the CIFAR-10 test split."""

    notebook = "07_pca"

    @cached_property
    def tier_votes(self) -> dict[str, np.ndarray]:
        """PL-IDN votes per tier: the stand-in labels the test images; the real release labels training images only
        (its NLT rows in the release are used)."""
        try:
            return plidn_votes(self.cfg, self.dataset, items="test", data_dir=self.data_dir)
        except NoPlidnLabels:
            return {t: v[labelled_rows(v)] for t, v in self.raters.items()}

    @cached_property
    def marginals(self) -> dict[str, np.ndarray]:
        shares = {setting_label(*s): self.test_bench.vote_shares(s) for s in self.test_bench.settings}
        return class_marginals(shares, self.tier_votes, self.humans, self.test_bench.num_classes)

    @cached_property
    def pca(self) -> tuple[pd.DataFrame, np.ndarray]:
        table, variance = marginal_pca(self.marginals, REFERENCE)
        self.report.table(table.reset_index(names="name"), "pca")
        return table, variance

    def marginals_table(self):
        """Each benchmark's class marginal (a row; one column per class)."""
        frame = pd.DataFrame(self.marginals, index=list(self.test_bench.classes)).T.reset_index(names="name")
        return show_table(frame, {c: "{:.3f}" for c in self.test_bench.classes})

    def explained_variance(self):
        variance = self.pca[1]
        return show_table(pd.DataFrame({"component": [f"PC{i + 1}" for i in range(len(variance))],
                                        "explained variance": variance}), {"explained variance": "{:.1%}"})

    def figure7(self):
        table, variance = self.pca
        return finish_figure(figure7(table, variance, self.cfg.top), self.report, "fig7_pca")

    @cached_property
    def tv(self) -> pd.DataFrame:
        bench = self.test_bench
        return with_names(tv_table(bench, self.humans, n_votes=len(bench.voters), n_boot=self.cfg.tv_n_boot))

    def top_lists(self):
        lists = top_lists(self.pca[0], self.tv, self.cfg.top)
        self.report.table(lists, "top_lists")
        return show_table(lists)

    @cached_property
    def ours(self) -> pd.DataFrame:
        """Our numbers in the paper's long form: explained variance, every setting's ranks, two class marginals."""
        table, variance = self.pca
        return comparison_rows(table, variance, self.tv, self.marginals, self.test_bench.dataset)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        return self.report.compare(self.ours, "fig7", on=["name", "class"])

    def compare_with_paper(self):
        """Every compared number, one per row: explained variance, ranks, class marginals."""
        return show_table(self.comparison.drop(columns=["item", "source"]), COMPARISON_FORMATS)

    def compare_ranks(self):
        """The paper's top-ten settings with their ranks there and here, by PCA distance and by TV."""
        table = rank_layout(self.comparison, self.ours)
        return show_table(table, {c: "{:.0f}" for c in table.columns[1:]})

    def claims(self) -> pd.DataFrame:
        self.comparison  # recorded for the scorecard before the report is written
        table, variance = self.pca
        return self._finish(pca_claims(table, variance, self.cfg.top, self.cfg.fig5_panels))


__all__ = ["MarginalPCA", "class_marginals", "closest", "comparison_rows", "figure7", "pca_claims", "rank_layout",
           "settings_only", "top_lists", "with_names"]
