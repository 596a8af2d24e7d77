"""08_downstream: Table II — PL-IDN and CILN at comparable noise rates (noise rate, nth, TV, and the clean test
accuracy of ERM, Co-Teaching and DivideMix trained on the noisy labels).

    page = Downstream("smoke")
    page.characteristics()       # noise rate, nth and TV of Table II's rows
    page.run()                   # every scenario x learner x seed (cached); accuracy under three selection rules
    page.figure_accuracy()       # bars per rule, the paper's best-epoch accuracies as grey diamonds
    page.compare_with_paper()    # Table II, paper | ours | diff (interactive: one row per paper number)
    page.claims()

The pure functions below build the tables, the figure and the claims from records, so they are tested on small
synthetic inputs.
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ciln import measures
from ciln.pages import COMPARISON_FORMATS, CifarPage, severity_key
from ciln.plidn import NoPlidnLabels, labelled_rows, plidn_votes
from ciln.references import subsample_raters
from shared.errors import ConfigError
from shared.plotting import PAPER_COLOR, finish_figure
from shared.report import claim_record, reported, verdict
from shared.tables import show_table

KEYS = ["variant", "corruption", "severity"]  # a row of Table II (ciln/reported/table2.csv)
RULES = {"best_test": "best epoch on test (paper)", "val_selected": "best epoch on noisy validation",
         "last": "last epoch"}
METHOD_METRIC = {"erm": "erm", "coteaching": "cot", "dividemix": "dm"}  # Table II's column prefixes
PAPER_LABEL = "paper (Table II)"
PAPER_DM_VARIANT = "ciln_compact"  # Table II's DivideMix: CILN's compact variant (its released code), not the official one
TOLERANCE = 0.03  # "matches" and "beats": 3 points (see the notebook)
RATE_FORMATS = {"noise_rate": "{:.1%}", "nth": "{:.3f}", "tv": "{:.3f}", "tv_ci95": "{:.3f}"}


# ------------------------------------------------------------------------------------------------ the runs
def scenario_args(cfg) -> dict:
    """Table II's scenarios (``CifarPage.scenarios_of``): the CILN settings on clean and corrupted images, their
    clean-start versions and PL-IDN's tiers."""
    return {"settings": cfg.downstream_settings, "image_sources": cfg.image_sources,
            "clean_start": cfg.clean_start_settings, "tiers": list(cfg.plidn_tiers)}


def run_grid(cfg, scenarios: list) -> list[tuple]:
    """Every scenario x learner (x DivideMix variant) x seed, in run order: (scenario, method, seed, variant)."""
    return [(s, method, seed, variant) for s in scenarios for method in cfg.methods
            for variant in (cfg.dm_variants if method == "dividemix" else [None]) for seed in cfg.seeds]


# ------------------------------------------------------------------------------------------------ tables
def characteristics_table(bench, test_bench, raters_nlt: dict, raters_test: dict | None, humans: np.ndarray,
                          settings, n_boot: int) -> pd.DataFrame:
    """Noise rate and nth on the benchmark rows, TV to the human reference on the test split: one row per PL-IDN
    tier (its raters' vote shares, on the rows in the release; TV only where ``raters_test`` labels the test split)
    and per CILN setting in ``settings`` as CILN-S (all rows) and CILN-C (clean-start rows)."""
    M = len(bench.voters)
    mask, test_mask = bench.clean_start_mask(), test_bench.clean_start_mask()
    rows = []
    for tier, votes in raters_nlt.items():
        keep = labelled_rows(votes)  # rows in the PL-IDN release (all rows for the stand-in)
        shares = measures.vote_shares(votes[keep], bench.num_classes)
        tv = None if raters_test is None else measures.tv_to_reference(
            subsample_raters(raters_test[tier], M, bench.num_classes), test_bench.y, humans, n_votes=M, n_boot=n_boot)
        rows.append({"variant": "PL-IDN", "corruption": f"plidn_{tier}", "severity": "",
                     "noise_rate": measures.noise_rate(shares, bench.y[keep]),
                     "nth": measures.nth(shares, bench.y[keep]),
                     "tv": tv.tv if tv else np.nan, "tv_ci95": tv.tv_ci95 if tv else np.nan})
    for corruption, severity in settings:
        for variant, keep, test_keep in (("S", slice(None), slice(None)), ("C", mask, test_mask)):
            shares = bench.vote_shares((corruption, severity))[keep]
            tv = measures.tv_to_reference(test_bench.vote_shares((corruption, severity))[test_keep],
                                          test_bench.y[test_keep], humans[test_keep], n_votes=M, n_boot=n_boot)
            rows.append({"variant": variant, "corruption": corruption, "severity": severity,
                         "noise_rate": measures.noise_rate(shares, bench.y[keep]),
                         "nth": measures.nth(shares, bench.y[keep]), "tv": tv.tv, "tv_ci95": tv.tv_ci95})
    return pd.DataFrame(rows)


def runs_frame(records: list[dict]) -> pd.DataFrame:
    """One row per run: the records of ``ciln.downstream.run`` without their arrays."""
    return pd.DataFrame([{k: v for k, v in r.items() if k not in ("history", "losses", "clean_probability")}
                         for r in records])


def selection_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy over seeds per scenario and learner under the three selection rules, in run order."""
    return runs.groupby(["scenario", "noise_rate", "method"], sort=False)[list(RULES)].mean().reset_index()


def scenario_keys(scenarios) -> pd.DataFrame:
    """Each scenario's Table II row (variant, corruption, severity) and image source."""
    return pd.DataFrame([{"scenario": s.name, **dict(zip(KEYS, s.table2_key)), "image_source": s.image_source}
                         for s in scenarios])


def table2_metric(method: str, image_source: str) -> str:
    """Table II's accuracy column of a learner: "dividemix (official)" on noisy images -> "dm_noisy_img"."""
    return f"{METHOD_METRIC[method.split(' (')[0]]}_{image_source}_img"


def table2_learners(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the learners Table II reports: one DivideMix, the paper's. CILN's Table II comes from its own
    compact DivideMix (``PAPER_DM_VARIANT``); where several variants ran (the full profile runs both) only that
    one fills the "dm" columns, and a run of a single variant (the smoke profile's official one) stands in for it."""
    dm = runs["method"].str.startswith("dividemix (")
    if runs.loc[dm, "method"].nunique() > 1:
        paper = f"dividemix ({PAPER_DM_VARIANT})"
        if not (runs["method"] == paper).any():
            raise ConfigError(f"DivideMix ran as {sorted(set(runs.loc[dm, 'method']))} but not as {paper!r}, the "
                              f"variant of Table II: add {PAPER_DM_VARIANT!r} to dm_variants, or run a single variant")
        runs = runs[~dm | (runs["method"] == paper)]
    return runs


def accuracy_rows(runs: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """Best-epoch accuracy (mean over seeds) per scenario and learner, keyed like Table II (one DivideMix variant
    per ``table2_learners``)."""
    means = table2_learners(runs).groupby(["scenario", "method"], sort=False)["best_test"].mean().reset_index()
    out = means.merge(keys, on="scenario", how="left", validate="many_to_one")
    out["metric"] = [table2_metric(m, s) for m, s in zip(out["method"], out["image_source"])]
    return out.rename(columns={"best_test": "value"})[["scenario", "method", *KEYS, "metric", "value"]]


def ours_long(characteristics: pd.DataFrame, accuracy: pd.DataFrame, ours_on: str) -> pd.DataFrame:
    """Our Table II numbers in the reported CSV's long form (keys, metric, value, ours_on)."""
    long = characteristics.melt(id_vars=KEYS, value_vars=["noise_rate", "nth", "tv", "tv_ci95"], var_name="metric")
    return pd.concat([long, accuracy[[*KEYS, "metric", "value"]]]).assign(ours_on=ours_on)


def paper_markers(accuracy: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's best-epoch accuracy beside each of our (scenario, learner) rows that Table II reports: the
    rows of ``accuracy`` (``accuracy_rows``) with a ``paper`` column. Severities match by number (the CSV reads
    "5" as 5.0; PL-IDN rows have none)."""
    left = accuracy.assign(_sev=accuracy["severity"].map(severity_key))
    right = paper[[*KEYS, "metric", "value"]].rename(columns={"value": "paper"})
    right = right.assign(_sev=right["severity"].map(severity_key)).drop(columns="severity")
    merged = left.merge(right, on=["variant", "corruption", "_sev", "metric"], how="inner", validate="many_to_one")
    return merged.drop(columns="_sev").reset_index(drop=True)


def comparison_pivot(comparison: pd.DataFrame, fmt: str = "{:.3f}") -> pd.DataFrame:
    """The paper numbers we have ours for, one row per Table II row and one column per metric: "ours (paper)"."""
    have = comparison[pd.to_numeric(comparison["ours"], errors="coerce").notna()]
    cells = have.assign(cell=[f"{fmt.format(float(o))} ({fmt.format(float(p))})"
                              for o, p in zip(have["ours"], have["paper"])])
    cells[KEYS] = cells[KEYS].fillna("")  # PL-IDN rows have no severity
    wide = cells.set_index([*KEYS, "metric"])["cell"].unstack("metric")
    rows = pd.MultiIndex.from_frame(cells[KEYS].drop_duplicates())  # in the paper's order
    wide = wide.reindex(index=rows, columns=list(dict.fromkeys(cells["metric"])))
    return wide.reset_index().rename_axis(columns=None)


# ------------------------------------------------------------------------------------------------ figure
def accuracy_figure(runs: pd.DataFrame, markers: pd.DataFrame, report=None):
    """Three panels (selection rules), one bar per scenario and learner; in the paper's rule (best epoch on test)
    a grey diamond per ``markers`` row (``paper_markers``), labelled "paper (Table II)"."""
    fig, axes = plt.subplots(len(RULES), 1, figsize=(12, 10), constrained_layout=True, sharey=True)
    methods = list(dict.fromkeys(runs["method"]))
    names = list(dict.fromkeys(runs["scenario"]))
    width = 0.8 / len(methods)
    for ax, rule in zip(axes, RULES):
        labelled = False
        for j, method in enumerate(methods):
            values = runs[runs["method"] == method].groupby("scenario", sort=False)[rule].mean().reindex(names)
            x = np.arange(len(names)) + (j - (len(methods) - 1) / 2) * width
            ax.bar(x, 100 * values, width, label=method)
            mine = markers[(markers["method"] == method) & markers["scenario"].isin(names)]
            if rule == "best_test" and len(mine):
                at = dict(zip(names, x))
                ax.scatter([at[s] for s in mine["scenario"]], 100 * mine["paper"].to_numpy(float), marker="D", s=16,
                           color=PAPER_COLOR, zorder=4, label=None if labelled else PAPER_LABEL)
                labelled = True
        ax.set_xticks(np.arange(len(names)), [n.replace(" clean-img", "\nclean-img").replace(" noisy-img", "\nnoisy-img")
                                              for n in names], fontsize="small")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(RULES[rule], fontsize="medium", loc="left")
    axes[0].legend(ncol=4, fontsize="small", loc="lower right", bbox_to_anchor=(1, 1), frameon=False)  # above the bars
    return finish_figure(fig, report, "table2_accuracy")


# ------------------------------------------------------------------------------------------------ claims
def best_accuracy(runs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Best-epoch accuracy (mean over seeds), scenarios x learners, with erm, coteaching and the DivideMix variant
    first (a learner not run: NaN); and the DivideMix column's name."""
    methods = list(dict.fromkeys(runs["method"]))
    best = runs.groupby(["scenario", "method"])["best_test"].mean().unstack()
    dm = next((m for m in methods if m.startswith("dividemix")), "dividemix")
    return best.reindex(columns=list(dict.fromkeys(["erm", "coteaching", dm, *best.columns]))), dm


def downstream_claims(runs: pd.DataFrame, low: str, high: str, image_sources, top_tier: str) -> list[dict]:
    """Table II's statements under the paper's rule (best epoch on test), and the cost of the honest rule.

    ``low`` / ``high``: the low- and high-noise CILN-S settings ("CILN-S frost (1)"); ``top_tier``: "PL-IDN-H".
    A scenario or learner that was not run makes its claims "not run".
    """
    best, dm = best_accuracy(runs)
    need = [f"{s} {src}-img" for s in (low, high) for src in ("clean", *image_sources)] + [top_tier]
    best = best.reindex(index=list(dict.fromkeys([*best.index, *need])))
    out = []
    for source in image_sources:
        row = best.loc[f"{low} {source}-img"]
        gap = row["coteaching"] - row["erm"]
        out.append(claim_record(f"At low noise Co-Teaching matches ERM ({low}, {source}-img; within 3 points)",
                                verdict(abs(gap) <= TOLERANCE, gap),
                                f"Co-T {row['coteaching']:.1%} vs ERM {row['erm']:.1%}"))
        row = best.loc[f"{high} {source}-img"]
        out.append(claim_record(
            f"At high noise Co-Teaching and DivideMix do not beat ERM on CILN ({high}, {source}-img; by more than 3 points)",
            verdict(row["coteaching"] <= row["erm"] + TOLERANCE and row[dm] <= row["erm"] + TOLERANCE,
                    *row[["erm", "coteaching", dm]]),
            f"ERM {row['erm']:.1%}, Co-T {row['coteaching']:.1%}, DM {row[dm]:.1%}"))
    row = best.loc[top_tier]
    out.append(claim_record(
        f"Co-Teaching holds up on the rate-matched fallible-rater tier ({top_tier}: Co-T >= ERM - 1 point)",
        verdict(row["coteaching"] >= row["erm"] - 0.01, row["erm"], row["coteaching"]),
        f"ERM {row['erm']:.1%}, Co-T {row['coteaching']:.1%}"))
    drop = {m: best.loc[f"{low} clean-img", m] - best.loc[f"{high} clean-img", m] for m in ("erm", "coteaching")}
    out.append(claim_record("ERM degrades less than Co-Teaching from low to high CILN noise (clean-img)",
                            verdict(drop["erm"] < drop["coteaching"], *drop.values()),
                            f"ERM -{drop['erm']:.1%}, Co-T -{drop['coteaching']:.1%}"))
    gap = (runs["best_test"] - runs["val_selected"]).mean()
    out.append(claim_record("Selecting the epoch on noisy validation labels instead of the test set costs little accuracy "
                            "(mean gap below 3 points)", verdict(gap < TOLERANCE, gap),
                            f"mean best-on-test minus noisy-validation-selected: {gap:.1%} over {len(runs)} runs"))
    return out


# ------------------------------------------------------------------------------------------------ the page
class Downstream(CifarPage):
    """08: Table II's characteristics and accuracies, the accuracy figure, the comparison and the claims."""

    notebook = "08_downstream"

    @cached_property
    def raters_test(self) -> dict | None:
        try:
            return plidn_votes(self.cfg, self.dataset, items="test", data_dir=self.data_dir)
        except NoPlidnLabels as err:  # the real release labels no test image; the paper quotes Gu et al.'s TV
            print(err)
            return None

    @cached_property
    def characteristics_frame(self) -> pd.DataFrame:
        table = characteristics_table(self.bench, self.test_bench, self.raters, self.raters_test, self.humans,
                                      self.cfg.table2_settings, self.cfg.tv_n_boot)
        self.report.table(table, "table2_characteristics")
        return table

    def characteristics(self):
        return show_table(self.characteristics_frame, RATE_FORMATS)

    @cached_property
    def scenarios(self) -> list:
        return self.scenarios_of(scenario_args(self.cfg))

    @cached_property
    def runs(self) -> pd.DataFrame:
        """Every scenario x learner (x DivideMix variant) x seed, trained unless cached."""
        records = [self.train(*run) for run in run_grid(self.cfg, self.scenarios)]
        runs = runs_frame(records)
        self.report.table(runs, "runs")
        return runs

    def run(self):
        """Train (or read from the cache) every run; the mean accuracy under the three selection rules."""
        table = selection_table(self.runs).rename(columns=RULES)
        return show_table(table, {"noise_rate": "{:.1%}", **{name: "{:.1%}" for name in RULES.values()}})

    @cached_property
    def accuracy(self) -> pd.DataFrame:
        return accuracy_rows(self.runs, scenario_keys(self.scenarios))

    def figure_accuracy(self):
        markers = paper_markers(self.accuracy, reported(self.paper, "table2"))
        return accuracy_figure(self.runs, markers, self.report)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        ours = ours_long(self.characteristics_frame, self.accuracy, self.bench.dataset)
        return self.report.compare(ours, "table2", on=KEYS)

    def compare_with_paper(self):
        """Every number of Table II: paper | ours | diff (ours empty where the setting was not run)."""
        return show_table(self.comparison.drop(columns=["item", "source"], errors="ignore"), COMPARISON_FORMATS)

    def comparison_summary(self):
        """The Table II rows this run covers, one column per metric: ours (paper)."""
        return show_table(comparison_pivot(self.comparison))

    def claims(self) -> pd.DataFrame:
        self.comparison  # recorded for the scorecard before the report is written
        low, high = (f"CILN-S {c} ({s})" for c, s in self.cfg.downstream_settings[:2])
        return self._finish(downstream_claims(self.runs, low, high, self.cfg.image_sources,
                                              f"PL-IDN-{self.cfg.plidn_tiers[-1]}"))


__all__ = ["Downstream", "scenario_args", "run_grid", "characteristics_table", "runs_frame", "selection_table", "scenario_keys", "table2_metric",
           "accuracy_rows", "ours_long", "paper_markers", "comparison_pivot", "accuracy_figure", "downstream_claims"]
