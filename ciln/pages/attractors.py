"""09_attractors: Table III — attractor classes and purity in high-noise settings, and Co-Teaching on them.

    page = Attractors("smoke")
    page.attractors()            # attractor, gain and purity per high-noise setting and PL-IDN's top tier
    page.figure_origins()        # the true classes of each attractor's rows, the paper's purity as a diamond
    page.run()                   # Co-Teaching on these settings (the runs of 08_downstream, from the cache)
    page.compare_with_paper()
    page.claims()
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ciln.measures import attractor, class_shares, majority_vote
from ciln.pages import COMPARISON_FORMATS, CifarPage, severity_key
from ciln.plidn import labelled_rows
from shared.plotting import PAPER_COLOR, finish_figure
from shared.report import claim_record, reported, verdict
from shared.tables import show_table

FORMATS = {"noise_rate": "{:.1%}", "attractor_gain_pp": "+{:.0f} pp", "purity": "{:.1%}", "cot_clean_img": "{:.1%}",
           "cot_noisy_img": "{:.1%}"}
PAPER_LABEL = "paper purity (Table III"  # the legend entry: "paper purity (Table III, cat)"
COMPARED = ["noise_rate", "purity", "attractor_gain_pp", "cot_clean_img", "cot_noisy_img"]


def scenario_args(cfg) -> dict:
    """The scenarios of Table III's Co-Teaching column: ``table3_cot_settings`` on both image sources and PL-IDN's
    top tier (the scenarios of 08_downstream under the same names, so their runs are shared)."""
    return {"settings": cfg.table3_cot_settings, "image_sources": cfg.image_sources, "tiers": [cfg.plidn_tiers[-1]]}


def run_grid(cfg, scenarios: list) -> list[tuple]:
    """Co-Teaching on every scenario and seed: (scenario, method, seed, variant)."""
    return [(s, "coteaching", seed, None) for s in scenarios for seed in cfg.seeds]


def attractor_sources(bench, settings, raters: dict, tier: str) -> dict:
    """name -> (votes (n, M), true labels, corruption, severity) for the CILN ``settings`` and PL-IDN's ``tier`` (its
    raters' votes on the rows in the release)."""
    sources = {f"{c} ({s})": (bench.votes((c, s)), bench.y, f"{c}", s) for c, s in settings}
    keep = labelled_rows(raters[tier])
    sources[f"PL-IDN-{tier}"] = (raters[tier][keep], bench.y[keep], f"plidn_{tier}", "")
    return sources


def attractor_table(sources: dict, classes) -> pd.DataFrame:
    """One row per source: its noise rate (mean per-voter error), attractor class, gain (pp) and purity (majority
    labels, ties to the lowest class)."""
    rows = []
    for name, (votes, y, corruption, severity) in sources.items():
        a = attractor(votes, y, len(classes))
        rows.append({"setting": name, "corruption": corruption, "severity": severity,
                     "noise_rate": float(np.mean(votes != y[:, None])), "attractor": classes[a.cls],
                     "attractor_gain_pp": a.gain_pp, "purity": a.purity})
    return pd.DataFrame(rows)


def with_cot(table3: pd.DataFrame, cot: pd.DataFrame) -> pd.DataFrame:
    """``table3`` with Co-Teaching's best-epoch accuracy (mean over seeds) on clean and noisy images; ``cot`` has
    one row per run: name (the scenario's setting: "contrast (5)" or the tier "H"), source, best_test. A setting
    without runs gets NaN."""
    acc = cot.groupby(["name", "source"])["best_test"].mean().unstack("source") if len(cot) else pd.DataFrame()
    out = table3.copy()
    for source in ("clean", "noisy"):
        out[f"cot_{source}_img"] = [acc.loc[key, source] if key in acc.index and source in acc else np.nan
                                    for key in out["setting"].str.replace("PL-IDN-", "", regex=False)]
    return out


def table3_long(table3: pd.DataFrame, ours_on: str) -> pd.DataFrame:
    """Our Table III numbers in the reported CSV's long form (the ones we have)."""
    long = table3.melt(id_vars=["corruption", "severity"], value_vars=[c for c in COMPARED if c in table3],
                       var_name="metric")
    return long.dropna(subset=["value"]).assign(ours_on=ours_on)


def paper_purity(paper: pd.DataFrame, corruption: str, severity) -> tuple[float, str] | None:
    """Table III's purity and attractor class (its note) for a setting, or None where it has none."""
    rows = paper[(paper["corruption"] == corruption) & (paper["metric"] == "purity")
                 & (paper["severity"].map(severity_key) == severity_key(severity))]
    if not len(rows):
        return None
    gain = paper[(paper["corruption"] == corruption) & (paper["metric"] == "attractor_gain_pp")
                 & (paper["severity"].map(severity_key) == severity_key(severity))]
    note = gain["note"].iloc[0] if len(gain) and "note" in gain and isinstance(gain["note"].iloc[0], str) else ""
    return float(rows["value"].iloc[0]), note


def origins_figure(sources: dict, table3: pd.DataFrame, classes, paper: pd.DataFrame | None = None, report=None):
    """One panel per source: the true classes of the rows whose majority label is its attractor (the attractor's
    own bar, in red, is its purity); a grey diamond on that bar marks Table III's purity for the same setting."""
    K = len(classes)
    fig, axes = plt.subplots(1, len(sources), figsize=(4 * len(sources), 3.2), constrained_layout=True, sharey=True)
    for ax, (name, (votes, y, corruption, severity)), row in zip(np.atleast_1d(axes), sources.items(),
                                                                 table3.to_dict("records")):
        labels = majority_vote(votes, K)
        cls = list(classes).index(row["attractor"])
        origin = class_shares(y[labels == cls], K)
        ax.bar(range(K), 100 * origin, color=["crimson" if k == cls else "#4292c6" for k in range(K)])
        found = None if paper is None else paper_purity(paper, corruption, severity)
        if found is not None:
            value, attractor_name = found
            ax.scatter([cls], [100 * value], marker="D", s=30, color=PAPER_COLOR, zorder=4,
                       label=f"{PAPER_LABEL}{', ' + attractor_name if attractor_name else ''})")
            ax.legend(fontsize="x-small", loc="upper right")
        ax.set_xticks(range(K), classes, fontsize="small")
        ax.set_title(f"{name}: label {row['attractor']}\npurity {row['purity']:.0%}", loc="left", fontsize="small")
        ax.set_ylabel("true class of its rows (%)")
    return finish_figure(fig, report, "attractor_origins")


def attractor_claims(table3: pd.DataFrame) -> list[dict]:
    """Table III's statements: strong, impure attractors in the CILN settings; a weaker one, and a better
    Co-Teaching, on PL-IDN's top tier."""
    plidn = table3["setting"].str.startswith("PL-IDN")
    ciln, plidn_rows = table3[~plidn], table3[plidn]
    out = [
        claim_record("High-noise CILN settings have a strong attractor (>= 10 pp)",
                     bool((ciln["attractor_gain_pp"] >= 10).all()),
                     ", ".join(f"{r.setting}: {r.attractor} +{r.attractor_gain_pp:.0f} pp" for r in ciln.itertuples())),
        claim_record("Their purity is well below 1 - noise rate (most attractor rows are wrong)",
                     bool((ciln["purity"] < 1 - ciln["noise_rate"]).all()),
                     ", ".join(f"{r.setting}: {r.purity:.0%} vs {1 - r.noise_rate:.0%}" for r in ciln.itertuples())),
    ]
    weaker = "PL-IDN at high noise has a weaker attractor than the CILN settings"
    cot = "Co-Teaching does better on PL-IDN's high tier than on the high-noise CILN settings (clean-img)"
    if not len(plidn_rows):
        return out + [claim_record(weaker, None, "no PL-IDN tier"), claim_record(cot, None, "no PL-IDN tier")]
    row = plidn_rows.iloc[0]
    cot_plidn = row.get("cot_clean_img", np.nan)
    cot_ciln = ciln["cot_clean_img"].max() if "cot_clean_img" in ciln else np.nan
    return out + [
        claim_record(weaker, bool(row["attractor_gain_pp"] < ciln["attractor_gain_pp"].min()),
                     f"{row['setting']}: +{row['attractor_gain_pp']:.0f} pp"),
        claim_record(cot, verdict(cot_plidn > cot_ciln, cot_plidn, cot_ciln),
                     f"PL-IDN {cot_plidn:.1%}, CILN best {cot_ciln:.1%}"),
    ]


class Attractors(CifarPage):
    """09: Table III (attractor, gain, purity, Co-Teaching accuracy), where the attractors' rows come from."""

    notebook = "09_attractors"

    @property
    def top_tier(self) -> str:
        return self.cfg.plidn_tiers[-1]

    @cached_property
    def sources(self) -> dict:
        return attractor_sources(self.bench, self.cfg.table3_settings, self.raters, self.top_tier)

    @cached_property
    def table3(self) -> pd.DataFrame:
        return attractor_table(self.sources, self.bench.classes)

    def attractors(self):
        return show_table(self.table3, FORMATS)

    def figure_origins(self):
        return origins_figure(self.sources, self.table3, self.bench.classes, reported(self.paper, "table3"), self.report)

    @cached_property
    def cot_runs(self) -> pd.DataFrame:
        """Co-Teaching on ``table3_cot_settings`` and PL-IDN's top tier (the runs of 08_downstream, cached)."""
        scenarios = self.scenarios_of(scenario_args(self.cfg))
        return pd.DataFrame([self.train(s, method, seed, variant) | {"name": s.setting, "source": s.image_source}
                             for s, method, seed, variant in run_grid(self.cfg, scenarios)])

    @cached_property
    def table3_cot(self) -> pd.DataFrame:
        table = with_cot(self.table3, self.cot_runs)
        self.report.table(table, "table3")
        return table

    def run(self):
        """Table III with Co-Teaching's clean-test accuracy (best epoch) on clean and corrupted images."""
        return show_table(self.table3_cot.drop(columns=["corruption", "severity"]), FORMATS)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        return self.report.compare(table3_long(self.table3_cot, self.bench.dataset), "table3",
                                   on=["corruption", "severity"])

    def compare_with_paper(self):
        return show_table(self.comparison.drop(columns=["item", "source"]), COMPARISON_FORMATS)

    def claims(self) -> pd.DataFrame:
        self.comparison  # recorded for the scorecard before the report is written
        return self._finish(attractor_claims(self.table3_cot))


__all__ = ["Attractors", "scenario_args", "run_grid", "attractor_sources", "attractor_table", "with_cot", "table3_long", "paper_purity",
           "origins_figure", "attractor_claims"]
