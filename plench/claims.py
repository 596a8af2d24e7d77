"""The paper's qualitative claims, checked on our results: one function per notebook, each returning ``Claim``s.

    claims = tabular_claims(table, datasets, compat=True, n_trials=2)     # notebook 02
    record_claims(report, claims)                                         # into shared.report.NotebookReport
    records = claim_records(claims)                                       # as claims.json stores them

A claim holds (True), does not hold (False) or was **not run** (``holds=None``): an algorithm, dataset or
criterion it needs was not in this run's settings, or its data were absent. A claim that was not run is never
counted as failing; its ``detail`` says what is missing. Inputs are the notebooks' tables:
``plench.selection.results_table`` (per dataset, algorithm, criterion: ``mean``), ``plench.reports.step_costs``,
``plench.reports.compat_confidences``, ``plench.reports.arm_differences`` and ``plench.reports.CrowdStatistics``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from plench.algorithms import display_name
from plench.data import PLLDataset, class_share_in_test
from plench.selection import CRITERIA

COLLAPSING = ("EXP", "MCL_GCE", "MCL_MSE")  # undefined on candidate sets equal to the label set (|S| = q)
COSTLY = ("PiCO", "ABLE", "CRDPLL", "DIRK", "ALIM", "PiCO_plus")  # Fig. 4: the holistic and noisy-PLL methods


class Claim(NamedTuple):
    statement: str
    holds: bool | None  # None: not run
    detail: str


def record_claims(report, claims: Sequence[Claim]) -> None:
    """Record ``claims`` in a ``shared.report.NotebookReport`` (``holds=None`` is recorded as "not run")."""
    for claim in claims:
        report.claim(claim.statement, None if claim.holds is None else bool(claim.holds), claim.detail)


def claim_records(claims: Sequence[Claim]) -> list[dict]:
    """``claims`` as ``shared.report.claim_record`` stores them (for ``shared.pages.NotebookPage._finish``)."""
    from shared.report import claim_record

    return [claim_record(c.statement, None if c.holds is None else bool(c.holds), c.detail) for c in claims]


def _not_run(statement: str, what: str) -> Claim:
    return Claim(statement, None, f"not run: {what}")


def _names(algorithms) -> str:
    return ", ".join(display_name(a) for a in algorithms)


def accuracy(table: pd.DataFrame, dataset: str, algorithm: str, criterion: str, **match) -> float:
    """``table``'s mean for one cell (``match``: further columns, e.g. compat=False, arch="mlp"); NaN if absent."""
    rows = table[(table["dataset"] == dataset) & (table["algorithm"] == algorithm) & (table["criterion"] == criterion)]
    for key, value in match.items():
        rows = rows[rows[key] == value]
    return float(rows["mean"].iloc[0]) if len(rows) else float("nan")


def _absent(values: Mapping[str, object]) -> list[str]:
    """The keys whose value (a number or a list of numbers) is missing (NaN)."""
    return [k for k, v in values.items() if np.isnan(np.asarray(v, dtype=float)).any()]


def _has_full_sets(ds: PLLDataset) -> bool:
    return bool((np.asarray(ds.S).sum(1) == ds.S.shape[1]).any())


# ------------------------------------------------------------------------------------------------ 00: Table 5, Fig. 2
def dataset_claims(stats) -> list[Claim]:
    """Figure 2 and Table 5's statements about the crowd-annotated datasets (``plench.reports.crowd_statistics``):
    the noise rate falls as annotators are added, Aggregate has larger sets and less noise than Vaguest, both
    flipping matrices are far from uniform, and Vaguest is noisy class by class. A statement about a dataset that
    is not present is not run."""
    agg, vag = stats.roles
    present, claims = stats.present, []

    def why(*names):
        return "; ".join(f"{n} {stats.missing[n]}" for n in names if n in stats.missing)

    statement = "The noise rate falls as annotators are added to the union (Fig. 2b)"
    if stats.source is None:
        claims.append(_not_run(statement, f"no crowd-annotated dataset ({why(agg, vag)})"))
    else:
        by_k = stats.noise_by_annotators
        claims.append(Claim(statement, bool(np.all(np.diff(by_k) <= 0)),
                            f"{stats.source}: {100 * by_k[0]:.1f} % with one annotator, {100 * by_k[-1]:.2f} % with all"))
    statement = "Aggregate has larger candidate sets and a lower noise rate than Vaguest (Table 5)"
    if agg in present and vag in present:
        size = {n: float(present[n].S.sum(1).mean()) for n in (agg, vag)}
        noise = {n: float((present[n].S[np.arange(len(present[n].y)), present[n].y] == 0).mean()) for n in (agg, vag)}
        claims.append(Claim(statement, size[agg] > size[vag] and noise[agg] < noise[vag],
                            f"avg |S| {size[agg]:.2f} vs {size[vag]:.2f}, noise {100 * noise[agg]:.2f} % vs "
                            f"{100 * noise[vag]:.2f} %"))
    else:
        claims.append(_not_run(statement, why(agg, vag)))
    for name in (agg, vag):
        statement = f"{name}'s flipping matrix is far from uniform (off-diagonal max/min > 2)"
        if name not in stats.matrices:
            claims.append(_not_run(statement, why(name)))
            continue
        matrix = stats.matrices[name]
        off = matrix[~np.eye(len(matrix), dtype=bool)]
        claims.append(Claim(statement, bool(off.max() / max(off.min(), 1e-9) > 2),
                            f"off-diagonal {off.min():.3f} to {off.max():.3f}"))
    statement = f"{vag} is noisy class by class: every diagonal entry is below 1 (Fig. 2d)"
    if vag in stats.matrices:
        diag = np.diag(stats.matrices[vag])
        claims.append(Claim(statement, bool((diag < 1).all()), f"diagonal {diag.min():.2f} to {diag.max():.2f}"))
    else:
        claims.append(_not_run(statement, why(vag)))
    return claims


# ------------------------------------------------------------------------------------------------ 01: theory
def theory_claims(eq8: pd.DataFrame, bound: pd.DataFrame, thm2: pd.DataFrame, counter: pd.DataFrame) -> list[Claim]:
    """Proposition 1, Theorems 1-2 and the class-dependent counterexample on ``plench.theory``'s tables
    (``eq8_table``, ``bound_table``, ``theorem2_table``, ``class_dependent_counterexample``: classifier A first).

    Eq. 8 holds when every |z| < 3; Theorem 1 when, per generator, CR ranks the classifiers exactly as ACC;
    Proposition 1 when every row's ``holds``; Theorem 2 when the calibrated classifier (power 1) has |z| < 3; AA is
    biased the right way when every power > 1 gives AA > ACC and every power < 1 gives AA < ACC; the counterexample
    when A is less accurate than B but has the higher CR."""
    classifiers = int(eq8.groupby("generator").size().max())
    ranks_agree = all(part["ACC"].rank().equals(part["CR"].rank()) for _, part in eq8.groupby("generator"))
    calibrated = thm2[thm2["power"] == 1]
    sharp, flat = thm2[thm2["power"] > 1], thm2[thm2["power"] < 1]
    a, b = counter.iloc[0], counter.iloc[1]
    return [
        Claim("Eq. 8: (CR - c)/(1 - c) recovers the accuracy within 3 standard errors, for every generator and "
              "classifier", bool((eq8["z"].abs() < 3).all()),
              f"max |z| = {eq8['z'].abs().max():.2f} over {len(eq8)} cases"),
        Claim("Theorem 1: CR orders the classifiers exactly as accuracy does (USS and constant FPS)", ranks_agree,
              f"{eq8['generator'].nunique()} generators x {classifiers} classifiers"),
        Claim("Proposition 1: CR - ACC <= (1 - ACC) gamma in every case", bool(bound["holds"].all()),
              f"largest CR - ACC {bound['CR - ACC'].max():.3f}"),
        Claim("Theorem 2: AA equals accuracy for the calibrated classifier (within 3 SE)",
              bool((calibrated["z"].abs() < 3).all()),
              ", ".join(f"{g}: {d:+.4f}" for g, d in zip(calibrated["generator"], calibrated["AA - ACC"]))),
        Claim("AA overestimates accuracy when over-confident and underestimates it when under-confident",
              bool((sharp["AA - ACC"] > 0).all() and (flat["AA - ACC"] < 0).all()),
              f"over-confident: +{sharp['AA - ACC'].min():.3f} or more; under-confident: "
              f"{flat['AA - ACC'].max():+.3f} or less"),
        Claim("With a class-dependent flipping matrix, CR can prefer the less accurate classifier",
              bool(a["ACC"] < b["ACC"] and a["CR"] > b["CR"]),
              f"A: ACC {a['ACC']:.3f}, CR {a['CR']:.3f}; B: ACC {b['ACC']:.3f}, CR {b['CR']:.3f}"),
    ]


# ------------------------------------------------------------------------------------------------ 02: tabular tables
def tabular_claims(table: pd.DataFrame, datasets: Mapping[str, PLLDataset], *, compat: bool,
                   n_trials: int) -> list[Claim]:
    """The tabular notebook's claims on ``results_table``'s frame (mean per dataset, algorithm, compat, criterion;
    ``compat`` is the main variant's, the other one is the "(fixed)" rerun):

    on datasets with sets equal to the label set, EXP, MCL-GCE and MCL-MSE collapse to the class-0 share (what
    a NaN network predicts) under every criterion, and train with the fixed formulas; on the others EXP and
    MCL-GCE train normally; under USS (digits-USS) CR selects within 3 points of OA & ES; on a noisy (Vaguest)
    dataset AA selects worse than CR for most algorithms; NN and GA are far below Forward and SCL-NL.
    """
    claims = []
    full_sets = [n for n, ds in datasets.items() if _has_full_sets(ds)]
    main = table[table["compat"] == compat]

    def acc(algorithm, name, criterion, **match):
        return accuracy(match.pop("frame", main), name, algorithm, criterion, **match)

    for name in full_sets:
        statement = (f"On {name} (sets equal to the label set), EXP, MCL-GCE and MCL-MSE collapse to the class-0 share "
                     "under every criterion (Table 1: EXP 10.00)")
        collapsed = {a: [acc(a, name, c) for c in CRITERIA] for a in COLLAPSING}
        if _absent(collapsed):
            claims.append(_not_run(statement, f"{_names(_absent(collapsed))} not among the algorithms run"))
        else:
            share = class_share_in_test(datasets[name], 0, n_trials)
            claims.append(Claim(statement, all(abs(v - share) <= 1.0 for vs in collapsed.values() for v in vs),
                                f"class-0 share {share:.2f} %; " + "; ".join(
                                    f"{display_name(a)} {min(v):.2f}-{max(v):.2f}" for a, v in collapsed.items())))
        statement = f"With the fixed formulas they train on {name} (> 50 % with CR)"
        fixed = {a: acc(a, name, "CR", frame=table, compat=False) for a in COLLAPSING}
        if _absent(fixed):
            claims.append(_not_run(statement, f"the fixed {_names(_absent(fixed))} were not run "
                                              "(fixed_variants, or not among the algorithms)"))
        else:
            claims.append(Claim(statement, all(v > 50 for v in fixed.values()),
                                ", ".join(f"{display_name(a)} {v:.1f}" for a, v in fixed.items())))
    for name in [n for n in datasets if n not in full_sets]:
        statement = f"On {name} (no such sets) EXP and MCL-GCE train normally: within 10 points of PRODEN with CR"
        values = {a: acc(a, name, "CR") for a in ("PRODEN", "EXP", "MCL_GCE")}
        if _absent(values):
            claims.append(_not_run(statement, f"{_names(_absent(values))} not among the algorithms run"))
        else:
            gaps = {a: values["PRODEN"] - values[a] for a in ("EXP", "MCL_GCE")}
            claims.append(Claim(statement, all(g <= 10 for g in gaps.values()),
                                ", ".join(f"{display_name(a)} {g:+.1f} below" for a, g in gaps.items())))
    if "digits-USS" in datasets:
        statement = "Under USS (Theorem 1) CR selects within 3 points of OA & ES for PRODEN, CC and Forward"
        pairs = {a: [acc(a, "digits-USS", "CR"), acc(a, "digits-USS", "OA&ES")] for a in ("PRODEN", "CC", "Forward")}
        if _absent(pairs):
            claims.append(_not_run(statement, f"{_names(_absent(pairs))} not among the algorithms run"))
        else:
            gaps = {a: abs(cr - es) for a, (cr, es) in pairs.items()}
            claims.append(Claim(statement, all(g <= 3 for g in gaps.values()),
                                ", ".join(f"{display_name(a)} {g:.1f}" for a, g in gaps.items())))
    for name in [n for n in datasets if n.endswith("Vaguest")]:
        statement = f"On the noisy {name}, AA selects worse than CR for most algorithms (Table 2: 24/26)"
        run = [a for a in dict.fromkeys(main.loc[main["dataset"] == name, "algorithm"]) if a not in ("NN", "GA")]
        pairs = {a: (acc(a, name, "AA"), acc(a, name, "CR")) for a in run}
        pairs = {a: p for a, p in pairs.items() if not np.isnan(p).any()}
        if not pairs:
            claims.append(_not_run(statement, f"no algorithm other than NN and GA was run on {name}"))
        else:
            below = [a for a, (aa, cr) in pairs.items() if aa < cr]
            claims.append(Claim(statement, len(below) > len(pairs) / 2, f"{len(below)}/{len(pairs)}"))
    for name in full_sets:
        statement = f"NN and GA are far below Forward and SCL-NL on {name} (>= 15 points with CR)"
        values = {a: acc(a, name, "CR") for a in ("Forward", "SCL_NL", "NN", "GA")}
        if _absent(values):
            claims.append(_not_run(statement, f"{_names(_absent(values))} not among the algorithms run"))
        else:
            gap = min(values["Forward"], values["SCL_NL"]) - max(values["NN"], values["GA"])
            claims.append(Claim(statement, gap >= 15, f"gap {gap:.1f} points"))
    return claims


def batching_claim(speed: pd.DataFrame) -> Claim:
    """Ours, not the paper's: training configurations together pays at the batch sizes ``sweep(batched="auto")``
    batches (``speed``: ``plench.reports.batched_speedup``'s rows); the other sizes are reported, not judged."""
    statement = ("Training configurations together is faster than one by one at the batch sizes "
                 "sweep(batched='auto') batches")
    batched = speed[speed["batched_by_auto"]]
    detail = ", ".join(f"batch size {r['batch_size']}: {r['speedup']:.2f}x"
                       + ("" if r["batched_by_auto"] else " (run one by one)") for _, r in speed.iterrows())
    if batched.empty:
        return _not_run(statement, f"no measured batch size is batched by the rule ({detail})")
    first = speed.iloc[0]
    return Claim(statement, bool((batched["speedup"] > 1).all()),
                 f"{detail}; {first['runs']} {first['algorithm']} configurations x {first['steps']} steps on "
                 f"{first['dataset']} ({first['device']}, {first['threads']} thread(s))")


# ------------------------------------------------------------------------------------------------ 03: image tables
def image_claims(table: pd.DataFrame, costs: pd.DataFrame, compat_check: pd.DataFrame,
                 datasets: Mapping[str, PLLDataset], *, archs: Sequence[str], n_trials: int,
                 paper: pd.DataFrame | None = None) -> list[Claim]:
    """The image notebook's claims: the EXP / MCL collapse where sets equal the label set and no collapse
    elsewhere (OA & ES), PRODEN within 5 points of the best with CR, Fig. 4's costs (median seconds per step of
    ``costs``: the holistic and noisy-PLL methods and FREDIS above PRODEN; GPU memory only with CUDA peaks), and
    the PiCO+/ALIM warm-up of the official code (``compat_check``). ``paper``: Tables 1-4 (long form, for the
    details; default ``reported("plench", "results")``)."""
    from plench.reports import IMAGE_NETWORKS, paper_counterpart
    from shared.report import reported

    if paper is None:
        paper = reported("plench", "results")
    paper = paper[(paper["metric"] == "test_acc") & paper["item"].isin(["Table 1", "Table 2", "Table 3", "Table 4"])]
    claims = []
    full_sets = [n for n, ds in datasets.items() if _has_full_sets(ds)]
    run = list(dict.fromkeys(table["algorithm"]))

    def theirs(name, arch, criterion):
        return paper[(paper["dataset"] == paper_counterpart(name)) & (paper["network"] == IMAGE_NETWORKS.get(arch))
                     & (paper["criterion"] == criterion)].set_index("algorithm")["value"]

    for arch in archs:
        for name in datasets:
            share = class_share_in_test(datasets[name], 0, n_trials)
            if name in full_sets:
                statement = (f"On {name} (sets equal to the label set) with {arch}, EXP, MCL-GCE and MCL-MSE collapse "
                             "to the class-0 share under every criterion (Table 1: EXP 10.00)")
                collapsed = {a: [accuracy(table, name, a, c, arch=arch) for c in CRITERIA] for a in COLLAPSING}
                if _absent(collapsed):
                    claims.append(_not_run(statement, f"{_names(_absent(collapsed))} not among the algorithms run"))
                    continue
                claims.append(Claim(statement, all(abs(v - share) <= 1.0 for vs in collapsed.values() for v in vs),
                                    f"class-0 share {share:.2f} %; " + "; ".join(
                                        f"{display_name(a)} {min(v):.2f}-{max(v):.2f}" for a, v in collapsed.items())))
            else:
                statement = (f"On {name} (no such sets) with {arch}, EXP, MCL-GCE and MCL-MSE do not collapse: at least "
                             "5 points above the class-0 share with OA & ES")
                above = {a: accuracy(table, name, a, "OA&ES", arch=arch) - share for a in COLLAPSING}
                if _absent(above):
                    claims.append(_not_run(statement, f"{_names(_absent(above))} not among the algorithms run"))
                    continue
                published = theirs(name, arch, "OA&ES")
                claims.append(Claim(statement, all(v >= 5 for v in above.values()),
                                    f"class-0 share {share:.2f} %; " + ", ".join(
                                        f"{display_name(a)} {v:+.1f}" for a, v in above.items())
                                    + f"; the paper's {paper_counterpart(name)} {IMAGE_NETWORKS.get(arch)}: " + ", ".join(
                                        f"{display_name(a)} {published.get(display_name(a), np.nan):.2f}" for a in above)))
        for name in datasets:
            statement = f"PRODEN is competitive on {name} with {arch}: within 5 points of the best algorithm with CR"
            scores = {a: accuracy(table, name, a, "CR", arch=arch) for a in run}
            scores = {a: v for a, v in scores.items() if not np.isnan(v)}
            if "PRODEN" not in scores:
                claims.append(_not_run(statement, "PRODEN not among the algorithms run"))
                continue
            best = max(scores, key=scores.get)
            published = theirs(name, arch, "CR")
            paper_gap = published.max() - published.get("PRODEN", np.nan) if len(published) else np.nan
            claims.append(Claim(statement, scores[best] - scores["PRODEN"] <= 5,
                                f"{scores[best] - scores['PRODEN']:.1f} below {display_name(best)} "
                                f"(of {len(scores)} algorithms); the paper's {paper_counterpart(name)} "
                                f"{IMAGE_NETWORKS.get(arch)} table: {paper_gap:.2f} below its best"))
    claims += _cost_claims(costs)
    claims += _compat_claims(compat_check)
    return claims


def _cost_claims(costs: pd.DataFrame) -> list[Claim]:
    statement = "PiCO, ABLE, CRDPLL, DIRK, ALIM and PiCO+ each take more time per step than PRODEN (Fig. 4)"
    seconds = costs.set_index("algorithm")["step_time_median_s"] if len(costs) else pd.Series(dtype=float)
    costly = [a for a in COSTLY if a in seconds]
    claims = []
    if "PRODEN" not in seconds or not costly:
        claims.append(_not_run(statement, "PRODEN or all of these were not run"))
    else:
        ratios = {a: seconds[a] / seconds["PRODEN"] for a in costly}
        left_out = [a for a in COSTLY if a not in seconds]
        claims.append(Claim(statement, all(r > 1 for r in ratios.values()),
                            ", ".join(f"{display_name(a)} {r:.1f}x" for a, r in ratios.items())
                            + f" PRODEN's {1000 * seconds['PRODEN']:.1f} ms (medians over checkpoint intervals)"
                            + (f"; not run: {_names(left_out)}" if left_out else "")))
    statement = "FREDIS also takes more time per step than PRODEN (Fig. 4 groups it with the costly methods)"
    if "PRODEN" not in seconds or "FREDIS" not in seconds:
        claims.append(_not_run(statement, "PRODEN or FREDIS not among the algorithms run"))
    else:
        ratio = seconds["FREDIS"] / seconds["PRODEN"]
        claims.append(Claim(statement, ratio > 1, f"{ratio:.2f}x PRODEN's time"))
    statement = "PiCO, ABLE, CRDPLL, DIRK, ALIM and PiCO+ each need more GPU memory than PRODEN (Fig. 4b)"
    on_gpu = len(costs) and set(costs["mem_source"]) == {"cuda_max_allocated"}
    if not on_gpu:
        claims.append(_not_run(statement, "trained on a CPU, where the recorded memory is the whole process's peak "
                                          "resident memory, not the algorithm's"))
    elif "PRODEN" not in seconds or not costly:
        claims.append(_not_run(statement, "PRODEN or all of these were not run"))
    else:
        memory = costs.set_index("algorithm")["peak_mem_gb"]
        claims.append(Claim(statement, all(memory[a] > memory["PRODEN"] for a in costly),
                            ", ".join(f"{display_name(a)} {memory[a]:.2f} GB" for a in ["PRODEN", *costly])))
    return claims


def _compat_claims(check: pd.DataFrame) -> list[Claim]:
    statements = ("With the official update (compat) PiCO+ and ALIM never leave warm-up: their confidences stay "
                  "exactly s/|S|", "With the fixed update their confidences move away from s/|S|")
    stuck, moved = check[check["compat"]], check[~check["compat"].astype(bool)]
    if stuck.empty or moved.empty:
        return [_not_run(s, "the compat check trained no algorithm") for s in statements]
    return [Claim(statements[0], bool(stuck["uniform"].all() and (stuck["curr_iter"] == 0).all()),
                  ", ".join(f"{r['algorithm']}: curr_iter {r['curr_iter']} after {r['steps']} steps"
                            for _, r in stuck.iterrows())),
            Claim(statements[1], bool((~moved["uniform"].astype(bool)).all()),
                  ", ".join(f"{r['algorithm']}: max change {r['max |w - s/|S||']:.3f}" for _, r in moved.iterrows()))]


# ------------------------------------------------------------------------------------------------ 04: Figure 1(a, b)
def validation_use_claims(differences: pd.DataFrame, datasets: Sequence[str]) -> list[Claim]:
    """Figure 1(a, b): on each dataset, for most algorithms (a majority of those run, comparing means over
    splits), training on the clean validation rows beats using them for selection (``arm_differences``)."""
    claims = []
    for name in datasets:
        statement = (f"On {name}, for most algorithms, training on the clean validation data (|S| = 1, default "
                     "hyperparameters) beats using it to select hyperparameters and checkpoints (OA & ES) (Fig. 1)")
        part = differences[differences["dataset"] == name] if len(differences) else differences
        if part.empty:
            claims.append(_not_run(statement, f"no algorithm was run on {name} in both arms"))
            continue
        better = part[part["training - validation"] > 0]
        claims.append(Claim(statement, len(better) > len(part) / 2,
                            f"{len(better)}/{len(part)}: " + ", ".join(
                                f"{r['algorithm']} {r['training - validation']:+.1f}" for _, r in part.iterrows())))
    return claims
