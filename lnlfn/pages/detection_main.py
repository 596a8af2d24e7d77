"""03_detection_main: Table 3, Figs. 1 and 6 and Tables 8-9 — ranking held-out items by foundation-model loss.

Per benchmark and seed the page noises the dataset, runs the model sweep and the non-pretrained baseline under the
paper's protocol, and scores the test split with H&G, CL, FML, FME and FME+CL (``lnlfn.scoring``).

    page = DetectionMain("smoke", settings={"seeds": [0, 1]})
    page.run()                    # one row per benchmark, seed and method (sweeps cached)
    page.table3()                 # AUPR, P,R@Err%, R@2Err% per method and benchmark, mean over seeds
    page.figure1(); page.figure6()
    page.compare_with_paper()     # paper | ours | diff, with what ours was run on
    page.claims()                 # statement | yes / no / not run | detail

The functions below the page hold the computations; they take plain detections and tables, so the tests build
them from a few synthetic items.
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from lnlfn.benchmarks import BENCHMARKS
from lnlfn.experiments import (baseline_sweep, benchmark_cases, benchmark_labels, claim_each, detection_row,
                               load_benchmark_data, make_configs, model_sweep, prefer, scored_items, sweep_configs,
                               test_items)
from lnlfn.pages import ClaimRecords, Page, benchmark_table, comparison_table, sweep_frame
from lnlfn.scoring import Detection, cl, fml, fme, with_cl
from shared.metrics.detection import jaccard_index, pr_curve
from shared.plotting import finish_figure
from shared.report import verdict
from shared.tables import show_table

METHODS = ("H&G", "CL", "FML", "FME", "FME+CL")  # Table 3's rows
METRICS = ("aupr", "p_at_err", "r_at_2err")
COLORS = {"H&G": "tab:gray", "CL": "tab:gray", "FML": "tab:orange", "FML+CL": "tab:orange", "FME": "tab:blue",
          "FME+CL": "tab:blue"}
RECALL_GRID = np.linspace(0.05, 0.5, 10)  # Fig. 1's claim: precision compared at these recall levels
JACCARD_MIN = 0.5


# ------------------------------------------------------------------------------------------------ the page
class DetectionMain(Page):
    """03: Table 3, Figs. 1 and 6, Tables 8-9 (the crowd-majority benchmark's rows)."""

    notebook = "03_detection_main"

    # ---------------------------------------------------------------- what runs
    @cached_property
    def data(self) -> tuple[dict, dict]:
        """``({dataset: TextDataset}, {benchmark: why it is skipped})``: absent data skips a benchmark."""
        return load_benchmark_data(self.cfg.benchmarks, self.data_dir)

    @property
    def benchmarks_run(self) -> list[str]:
        return [b for b in self.cfg.benchmarks if b not in self.data[1]]

    @cached_property
    def configs(self) -> list:
        return sweep_configs(self.cfg.model, self.cfg.n_sweep)

    @cached_property
    def baseline_configs(self) -> list:
        return make_configs("all-minilm-l6-v2", self.cfg.baseline_configs)  # n-gram heads are always HeadConfigs

    def benchmarks(self):
        """The benchmarks of the settings: what each stands in for, its noise, and whether it runs."""
        return show_table(benchmark_table(self.cfg.benchmarks, self.data[0], self.data[1]))

    def sweep_table(self):
        """The runs of each sweep: the foundation model's and the baseline's."""
        return show_table(sweep_frame({f"FM sweep ({self.cfg.model})": self.configs,
                                       "baseline (TF-IDF n-grams)": self.baseline_configs}))

    @cached_property
    def detections(self) -> dict:
        """``{(benchmark, seed): (detections, is_error, sweep)}`` on the test split (sweeps cached on disk)."""
        cfg, datasets, out = self.cfg, self.data[0], {}
        for bench, seed in benchmark_cases(self.benchmarks_run, cfg.seeds):
            ds = datasets[BENCHMARKS[bench].dataset]
            te = test_items(ds)
            noised = benchmark_labels(bench, ds, cfg, seed)
            err = noised.noised[scored_items(ds)][te]
            sweep = model_sweep(ds, noised.noisy, model=cfg.model, configs=self.configs,
                                device=self.compute_device, data_dir=self.data_dir, desc=f"{bench} seed {seed}",
                                executor=cfg.executor).restrict(te)
            base = baseline_sweep(ds, noised.noisy, configs=self.baseline_configs).restrict(te)
            out[bench, seed] = (methods_of(sweep, base, top_k=cfg.top_k, filter_by=cfg.cl_filter_by,
                                           rank_by=cfg.cl_rank_by), err, sweep)
        return out

    @cached_property
    def results(self) -> pd.DataFrame:
        """One row per benchmark, seed and method: errors, AUPR, P,R@Err%, R@2Err%, items hypothesized."""
        rows = [{"benchmark": bench, "seed": seed, **row}
                for (bench, seed), (dets, err, sweep) in self.detections.items()
                for row in method_rows(dets, err, fml_ranks(sweep, self.cfg.top_k))]
        results = pd.DataFrame(rows)
        self.report.table(results, "table3_runs")
        return results

    def run(self):
        return show_table(self.results, {m: "{:.3f}" for m in METRICS} | {"n_flagged": "{:.0f}"})

    # ---------------------------------------------------------------- Table 3
    @cached_property
    def table3_means(self) -> pd.DataFrame:
        means = table3_means(self.results)
        self.report.table(means.reset_index(), "table3")
        return means

    def table3(self):
        wide = table3_wide(self.table3_means)
        return show_table(wide, {c: "{:.3f}" for c in wide.columns if c != "method"})

    # ---------------------------------------------------------------- Figs. 1 and 6
    @property
    def fig1_case(self) -> tuple[str, int]:
        return prefer(self.cfg.pr_benchmark, self.benchmarks_run), self.cfg.seeds[0]

    def figure1(self):
        bench, seed = self.fig1_case
        dets, err, _ = self.detections[bench, seed]
        title = f"Fig. 1 analogue: {bench} ({BENCHMARKS[bench].stands_in_for}), seed {seed}"
        return finish_figure(pr_figure(dets, err, title), self.report, "fig1_pr_curves")

    @cached_property
    def truncated(self) -> tuple[dict, pd.DataFrame, int]:
        """Fig. 6's curves on the known-error benchmark, stopped at CL's count; the table of where they end."""
        bench = prefer(self.cfg.truncated_benchmark, self.benchmarks_run)
        dets, err, _ = self.detections[bench, self.cfg.seeds[0]]
        dets = with_fml_cl(dets, filter_by=self.cfg.cl_filter_by)
        k_max = dets["CL"].n_flagged
        n_est = int(round(self.cfg.err_rate_estimate * len(err)))
        curves, table = truncated_curves(dets, err, k_max, n_est)
        return curves, table, k_max

    def figure6(self):
        curves, _, k_max = self.truncated
        bench = prefer(self.cfg.truncated_benchmark, self.benchmarks_run)
        fig = truncated_figure(curves, f"Fig. 6 analogue: {bench}, truncated at CL's {k_max} items",
                               f"estimated recall (errors estimated at {self.cfg.err_rate_estimate:.0%})")
        return finish_figure(fig, self.report, "fig6_truncated")

    def truncated_table(self):
        table = self.truncated[1]
        return show_table(table, {c: "{:.3f}" for c in table.columns if c not in ("method", "items checked")})

    # ---------------------------------------------------------------- Tables 8-9
    @property
    def counts_benchmark(self) -> str:
        return prefer(self.cfg.counts_benchmark, self.benchmarks_run)

    @cached_property
    def counts(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        bench = self.counts_benchmark
        table8, table9 = top_item_counts({seed: self.detections[bench, seed][:2] for seed in self.cfg.seeds})
        self.report.table(table8.reset_index(), "table8")
        self.report.table(table9.reset_index(), "table9")
        return table8, table9

    def table8(self):
        return show_table(self.counts[0].reset_index(), {c: "{:.1f}" for c in ("k", "correctable", "non_error")},
                          caption=f"Table 8 analogue ({self.counts_benchmark})")

    def table9(self):
        return show_table(self.counts[1].reset_index(),
                          {c: "{:.2f}" for c in ("k", "correctable", "non_error", "jaccard")},
                          caption=f"Table 9 analogue ({self.counts_benchmark})")

    # ---------------------------------------------------------------- paper vs ours, claims
    @cached_property
    def comparison(self) -> pd.DataFrame:
        """Table 3's columns, then the rows of Tables 8-9, as ``report.compare`` keeps them (comparison.csv)."""
        paper_name = {b: BENCHMARKS[b].stands_in_for for b in self.benchmarks_run}
        profile, bench = self.report.profile, self.counts_benchmark
        table3 = self.report.compare(table3_long(self.table3_means, paper_name, profile), "table3",
                                     on=["dataset", "method"])
        counts = self.report.compare(counts_long(*self.counts, paper_name[bench], f"{bench} ({profile})"),
                                     "detection_counts", on=["item", "dataset", "method"])
        return pd.concat([table3[table3["ours"].notna()], counts], ignore_index=True)

    def compare_with_paper(self):
        return comparison_table(self.comparison)

    def claims(self) -> pd.DataFrame:
        """claim | verdict (yes / no / not run) | detail; the report files are written here."""
        self.comparison  # noqa: B018 -- recorded for comparison.csv before the report is written
        bench, seed = self.fig1_case
        dets, err, _ = self.detections[bench, seed]
        records = detection_claims(self.table3_means, self.counts[1], benchmarks=self.cfg.benchmarks,
                                   fm_beats_baseline=self.cfg.fm_beats_baseline, skipped=self.data[1],
                                   n_seeds=len(self.cfg.seeds), counts_benchmark=self.counts_benchmark,
                                   fig1=(bench, seed, fig1_above(dets, err)))
        return self._finish(records)


# --------------------------------------------------------------------------------------- the computations
def methods_of(sweep, base, *, top_k: int, filter_by: str, rank_by: str) -> dict[str, Detection]:
    """Table 3's methods on one test split: H&G (the baseline's own loss ranking), CL on the baseline's
    probabilities, FML (the best run), FME (the top ``top_k`` runs' mean probabilities) and FME+CL."""
    hg = fml(base)
    dets = {"H&G": hg, "CL": cl(hg.probs, hg.labels, filter_by=filter_by, rank_by=rank_by), "FML": fml(sweep),
            "FME": fme(sweep, k=top_k)}
    dets["FME+CL"] = with_cl(dets["FME"], filter_by=filter_by)
    return dets


def with_fml_cl(dets: dict, *, filter_by: str) -> dict:
    """``dets`` with FML+CL (CL overlaid on FML) next to FML, as Fig. 6 plots it."""
    out = {}
    for method, det in dets.items():
        out[method] = det
        if method == "FML":
            out["FML+CL"] = with_cl(det, filter_by=filter_by)
    return out


def fml_ranks(sweep, top_k: int) -> list[Detection]:
    """FML of the best ``top_k`` runs (each run's own loss ranking)."""
    return [fml(sweep, rank=r) for r in range(min(top_k, len(sweep.configs)))]


def method_rows(dets: dict, err, fml_runs: list[Detection]) -> list[dict]:
    """One row per method: errors and ``detection_row``'s metrics. FML's row is the mean of the top runs' rows
    (``fml_runs``), the paper's rule for the synthetic and human-noised sets (App. E.1)."""
    rows = []
    for method, det in dets.items():
        if method == "FML":
            parts = [detection_row(d, err) for d in fml_runs]
            row = {k: float(np.mean([p[k] for p in parts])) for k in parts[0]}
        else:
            row = detection_row(det, err)
        rows.append({"method": method, "errors": int(np.asarray(err).sum()), **row})
    return rows


def table3_means(results: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (benchmark, method) of the metrics and the items hypothesized."""
    return results.groupby(["benchmark", "method"], sort=False)[[*METRICS, "n_flagged"]].mean()


def table3_wide(means: pd.DataFrame, methods=METHODS) -> pd.DataFrame:
    """Table 3's layout: a row per method, a column per metric and benchmark ("aupr vader5", ...)."""
    wide = means[list(METRICS)].unstack("benchmark").reindex(list(methods))
    wide.columns = [f"{m} {b}" for m, b in wide.columns]
    return wide.rename_axis("method").reset_index()


def _style(det: Detection) -> str:
    return ":" if det.flagged is not None else "-"


def pr_figure(dets: dict, err, title: str):
    """Fig. 1: the precision-recall curve of each method; a flagged set (dotted) stops where the set ends."""
    fig, ax = plt.subplots(figsize=(5.4, 4.2), constrained_layout=True)
    for method, det in dets.items():
        curve = pr_curve(det.scores, err, truncate_at=len(det.ranked()))
        ax.plot(curve.recall, curve.precision, _style(det), color=COLORS.get(method),
                label=f"{method} (AUPR {det.aupr(err):.2f})")
    ax.set(xlabel="recall (errors found)", ylabel="precision", xlim=(0, 1), ylim=(0, 1), title=title)
    ax.legend(fontsize=8)
    return fig


def truncated_curves(dets: dict, err, k_max: int, n_est: int) -> tuple[dict, pd.DataFrame]:
    """Fig. 6's evaluation: each method's curve stopped at ``k_max`` items (CL's count), recall over the estimated
    error count ``n_est`` (at least the errors found). Returns ``{method: (curve, line style)}`` and a row per
    method: items checked, truncated AUPR, precision and estimated recall at the end."""
    err = np.asarray(err, dtype=bool)
    curves, rows = {}, []
    for method, det in dets.items():
        stop = min(k_max, len(det.ranked()))
        curve = pr_curve(det.scores, err, truncate_at=stop, n_errors=max(n_est, int(err[det.ranked()[:stop]].sum())))
        curves[method] = (curve, _style(det))
        rows.append({"method": method, "items checked": stop, "truncated AUPR": curve.aupr(),
                     "precision at the end": float(curve.precision[-1]),
                     "estimated recall at the end": float(curve.recall[-1])})
    return curves, pd.DataFrame(rows)


def truncated_figure(curves: dict, title: str, xlabel: str):
    """Fig. 6: the truncated curves, one per method."""
    fig, ax = plt.subplots(figsize=(5.4, 4.2), constrained_layout=True)
    for method, (curve, style) in curves.items():
        ax.plot(curve.recall, curve.precision, style, color=COLORS.get(method), label=method)
    ax.set(xlabel=xlabel, ylabel="precision", title=title)
    ax.legend(fontsize=8)
    return fig


def _counts(err, top) -> dict:
    return {"correctable": int(err[top].sum()), "non_error": int((~err[top]).sum())}


def top_item_counts(per_seed: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables 8 and 9 from ``{seed: (detections, is_error)}``, mean over seeds, indexed by method.

    Table 8: correctable errors and non-errors among the top k of CL, FML and FME, k = CL's count. Table 9: FME's
    top items and the FME+CL set at FME+CL's count, and their Jaccard index."""
    t8, t9 = [], []
    for seed, (dets, err) in per_seed.items():
        err = np.asarray(err, dtype=bool)
        k = dets["CL"].n_flagged
        for method in ("CL", "FML", "FME"):
            t8.append({"seed": seed, "method": method, "k": k, **_counts(err, dets[method].ranked()[:k])})
        k9 = dets["FME+CL"].n_flagged
        fme_top, overlay = dets["FME"].ranked()[:k9], dets["FME+CL"].ranked()
        for method, top in (("FME", fme_top), ("FME+CL", overlay)):
            t9.append({"seed": seed, "method": method, "k": k9, **_counts(err, top),
                       "jaccard": jaccard_index(fme_top, overlay)})
    table8 = pd.DataFrame(t8).groupby("method", sort=False).mean().drop(columns="seed")
    table9 = pd.DataFrame(t9).groupby("method", sort=False).mean().drop(columns="seed")
    return table8, table9


def table3_long(means: pd.DataFrame, paper_name: dict, profile: str) -> pd.DataFrame:
    """Table 3 (``table3_means``) in the comparison's long form: dataset (the paper's), method, metric, value,
    ours_on (our benchmark and profile)."""
    t3 = means.reset_index()
    return pd.concat([pd.DataFrame({"dataset": t3["benchmark"].map(paper_name), "method": t3["method"], "metric": m,
                                    "value": t3[m], "ours_on": t3["benchmark"] + f" ({profile})"})
                      for m in METRICS])


def counts_long(table8: pd.DataFrame, table9: pd.DataFrame, dataset: str, ours_on: str) -> pd.DataFrame:
    """Tables 8-9 in the comparison's long form (item "Table 8" / "Table 9"), with the Jaccard index as the
    "FME vs FME+CL" row of Table 9."""
    frames = [pd.DataFrame({"item": "Table 8", "dataset": dataset, "method": table8.index, "metric": m,
                            "value": table8[m].values, "ours_on": f"{ours_on}, k = CL's count"})
              for m in ("correctable", "non_error")]
    frames += [pd.DataFrame({"item": "Table 9", "dataset": dataset, "method": table9.index, "metric": m,
                             "value": table9[m].values, "ours_on": f"{ours_on}, k = FME+CL's count"})
               for m in ("correctable", "non_error")]
    frames.append(pd.DataFrame({"item": ["Table 9"], "dataset": [dataset], "method": ["FME vs FME+CL"],
                                "metric": ["jaccard"], "value": [float(table9["jaccard"].iloc[0])],
                                "ours_on": [ours_on]}))
    return pd.concat(frames, ignore_index=True)


def precision_at_recall(det: Detection, err, grid=RECALL_GRID) -> np.ndarray:
    """The precision of ``det``'s full ranking where its recall first reaches each level of ``grid``."""
    curve = pr_curve(det.scores, err)
    return np.array([curve.precision[np.searchsorted(curve.recall, r)] for r in grid])


def fig1_above(dets: dict, err, grid=RECALL_GRID) -> np.ndarray:
    """Whether FME's precision is above the baseline's (H&G) at each recall level of ``grid``."""
    return precision_at_recall(dets["FME"], err, grid) > precision_at_recall(dets["H&G"], err, grid)


def detection_claims(means: pd.DataFrame, table9: pd.DataFrame, *, benchmarks, fm_beats_baseline, skipped: dict,
                     n_seeds: int, counts_benchmark: str, fig1: tuple) -> list[dict]:
    """The page's claims: FME >= FML - 0.02 on each benchmark; FME above the baseline on each of
    ``fm_beats_baseline``; the CL overlay keeps FME's top items (Table 9's Jaccard >= 0.5); Fig. 1's FME curve above
    the baseline's at every recall level of ``RECALL_GRID``. ``means``: ``table3_means``; ``fig1``: (benchmark,
    seed, ``fig1_above``). A benchmark skipped or not run gets "not run"."""
    records = ClaimRecords()
    mean = means["aupr"].unstack("method")
    run = list(mean.index)
    claim_each(records, "FME's AUPR is at least FML's - 0.02 on {bench} ({paper} analogue)", benchmarks,
               skipped=skipped,
               results={b: (verdict(mean.loc[b, "FME"] >= mean.loc[b, "FML"] - 0.02, mean.loc[b, "FME"],
                                    mean.loc[b, "FML"]),
                            f"FME {mean.loc[b, 'FME']:.3f}, FML {mean.loc[b, 'FML']:.3f}") for b in run})
    claim_each(records, "FME's AUPR is above the non-pretrained baseline's on {bench} ({paper} analogue)",
               fm_beats_baseline, skipped=skipped,
               results={b: (verdict(mean.loc[b, "FME"] > mean.loc[b, "H&G"], mean.loc[b, "FME"],
                                    mean.loc[b, "H&G"]),
                            f"FME {mean.loc[b, 'FME']:.3f}, H&G {mean.loc[b, 'H&G']:.3f} (mean of {n_seeds} seeds)")
                        for b in run})
    jaccard = table9["jaccard"].iloc[0]
    records.claim(f"The CL overlay changes FME's top items little on {counts_benchmark}: Jaccard >= {JACCARD_MIN} "
                  "(Table 9: 0.59-0.99)", holds=verdict(jaccard >= JACCARD_MIN, jaccard),
                  detail=f"Jaccard {jaccard:.2f}")
    bench, seed, above = fig1
    records.claim(f"Fig. 1: the FME curve is above the baseline's for recall <= {RECALL_GRID[-1]:g} "
                  f"({bench}, seed {seed})",
                  holds=bool(np.all(above)), detail=f"above at {int(np.sum(above))}/{len(above)} recall levels")
    return list(records)


__all__ = ["DetectionMain", "METHODS", "methods_of", "with_fml_cl", "fml_ranks", "method_rows", "table3_means",
           "table3_wide", "pr_figure", "truncated_curves", "truncated_figure", "top_item_counts", "table3_long",
           "counts_long", "precision_at_recall", "fig1_above", "detection_claims"]
