"""Benchmark-N's tables: the noise presets (Table 1), what an engine did to a dataset, and the annotation-quality
summaries (Fig. 11, the annotation-level analogue of Table 7), each with a long form for ``shared.report``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pycocotools import mask as mask_utils

from benchmark_n.coco import ann_to_rle, image_sizes
from benchmark_n.noise import LEGACY_V0_PRESETS, PRESETS, TIER_ORDER, noise_dataset
from benchmark_n.quality import COUNTS

#: Table 1's (mean, std) rows: label -> the preset's field
TABLE1_ROWS = {"approx": "approximation", "loc": "localization", "scale": "scale"}


def table1() -> pd.DataFrame:
    """Table 1 as the paper prints it, from the engine's ``PRESETS``: rows (mu, sigma) per operation, p_class and
    p_delete; columns low / mid / high."""
    rows = {f"(µ{k}, σ{k})": {t: "({:g}, {:g})".format(*getattr(PRESETS[t], f)) for t in TIER_ORDER}
            for k, f in TABLE1_ROWS.items()}
    rows["p_class"] = {t: f"{PRESETS[t].p_cls:g}" for t in TIER_ORDER}
    rows["p_delete"] = {t: f"{PRESETS[t].p_del:g}" for t in TIER_ORDER}
    return pd.DataFrame(rows).T[list(TIER_ORDER)]


def table1_long() -> pd.DataFrame:
    """Table 1's numbers in long form (tier, metric, value) for the comparison with the paper."""
    rows = []
    for tier in TIER_ORDER:
        p = PRESETS[tier]
        for key, field in TABLE1_ROWS.items():
            mean, std = getattr(p, field)
            rows += [{"tier": tier, "metric": f"{key}_mean", "value": mean},
                     {"tier": tier, "metric": f"{key}_std", "value": std}]
        rows += [{"tier": tier, "metric": "p_class", "value": p.p_cls},
                 {"tier": tier, "metric": "p_delete", "value": p.p_del}]
    return pd.DataFrame(rows)


def legacy_presets() -> pd.DataFrame:
    """The README engine's presets (``noise_annotations.py --benchmark easy|medium|hard``): each spatial noise's
    share of the instances and parameter, and the class-mixing ratio."""
    rows = {}
    for tier in TIER_ORDER:
        p = LEGACY_V0_PRESETS[tier]
        rows[tier] = {"approximation (share, tolerance)": f"({p.approximation[0]:g}, {p.approximation[1]:g})",
                      "localization (share, sd)": f"({p.localization[0]:g}, {p.localization[1]:g})",
                      "dilate/erode (share, kernel)": f"({p.rand[0]:g}, {p.rand[1]:g})",
                      "class mixing p": f"{p.flip_class:g}"}
    return pd.DataFrame(rows)


def mean_iou(clean: dict, noisy: dict) -> float:
    """Mean mask IoU of every kept non-crowd noisy annotation with its clean version (same id); deleted ones and the
    crowds (copied unchanged) not counted."""
    sizes = image_sizes(clean)
    by_id = {a["id"]: a for a in clean["annotations"]}
    ious = [mask_utils.iou([ann_to_rle(a, *sizes[a["image_id"]])],
                           [ann_to_rle(by_id[a["id"]], *sizes[a["image_id"]])], [0])[0, 0]
            for a in noisy["annotations"] if not a.get("iscrowd", 0)]
    return float(np.mean(ious)) if ious else float("nan")


def engine_effects(dataset: dict, engines, seed: int = 0, **options) -> pd.DataFrame:
    """What each engine does at each tier to ``dataset`` (one seed): the manifest's counts as shares of the
    instances and the mean mask IoU of the kept annotations with their clean versions."""
    rows = []
    for engine in engines:
        for tier in TIER_ORDER:
            noisy = noise_dataset(dataset, engine, tier, seed, **options.get(engine, {}))
            m = noisy.manifest
            n = m["annotations_in"]
            rows.append({"engine": engine, "tier": tier, "instances": n,
                         **{f"{k} %": 100 * m[k] / n for k in COUNTS if k not in ("annotations_in", "kept")},
                         "mean IoU with clean": mean_iou(dataset, noisy.dataset)})
    return pd.DataFrame(rows)


def quality_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation, min and max over seeds of every score, per (kind, name, tier); the tiers in
    order."""
    scores = [c for c in ("mask_AP", "boundary_AP", "mask_AP50", "mask_AP75") if c in frame]
    grouped = frame.groupby(["kind", "name", "tier"], sort=False)[scores]
    summary = grouped.agg(["mean", "std", "min", "max"])
    summary.columns = [f"{metric}_{stat}" for metric, stat in summary.columns]
    summary = summary.reset_index()
    summary["seeds"] = grouped.size().to_numpy()
    summary["tier"] = pd.Categorical(summary["tier"], TIER_ORDER, ordered=True)
    return summary.sort_values(["kind", "name", "tier"], kind="stable").reset_index(drop=True)


def quality_wide(summary: pd.DataFrame, kind: str, clean: dict | None = None) -> pd.DataFrame:
    """One row per engine or operation, columns "<tier> mask AP" / "<tier> boundary AP" as "mean ± sd" (%); with
    ``clean`` (``quality.clean_scores``) a first row of the clean annotations scored against themselves."""
    rows = {}
    if clean is not None:
        rows["clean (vs itself)"] = {f"{t} {label}": f"{100 * clean[m]:.1f}" for t in TIER_ORDER
                                     for m, label in (("mask_AP", "mask AP"), ("boundary_AP", "boundary AP"))}
    for _, r in summary[summary["kind"] == kind].iterrows():
        for metric, label in (("mask_AP", "mask AP"), ("boundary_AP", "boundary AP")):
            sd = r[f"{metric}_std"]
            text = f"{100 * r[f'{metric}_mean']:.1f}" + ("" if np.isnan(sd) else f" ± {100 * sd:.1f}")
            rows.setdefault(r["name"], {})[f"{r['tier']} {label}"] = text
    columns = [f"{t} {m}" for t in TIER_ORDER for m in ("mask AP", "boundary AP")]
    return pd.DataFrame(rows).T.reindex(columns=[c for c in columns if any(c in v for v in rows.values())])


def benchmark_files(entries) -> pd.DataFrame:
    """One row per written benchmark file (``benchmarks.BenchmarkFile``): what made it and what its manifest counts,
    as shares of the instances."""
    rows = []
    for e in entries:
        m, n = e.manifest, max(e.manifest["annotations_in"], 1)
        rows.append({"file": e.path.name, "engine": m["engine"], "tier": m["tier"], "seed": m["seed"],
                     "instances": m["annotations_in"], "kept": m["kept"],
                     **{f"{k} %": round(100 * m[k] / n, 2) for k in ("deleted", "implicitly_deleted", "class_flipped",
                                                                    "spatially_noised")},
                     "MB": round(e.path.stat().st_size / 1e6, 3), "written now": e.written})
    return pd.DataFrame(rows)


def manifest_table1(entries) -> pd.DataFrame:
    """Table 1's numbers as the paper-engine files' manifests record them (tier, metric, value)."""
    rows, seen = [], set()
    for e in entries:
        m = e.manifest
        if m["engine"] != "paper" or m["tier"] in seen:
            continue
        seen.add(m["tier"])
        preset = m["preset"]
        for key, field in TABLE1_ROWS.items():
            rows += [{"tier": m["tier"], "metric": f"{key}_mean", "value": preset[field][0]},
                     {"tier": m["tier"], "metric": f"{key}_std", "value": preset[field][1]}]
        rows += [{"tier": m["tier"], "metric": "p_class", "value": preset["p_cls"]},
                 {"tier": m["tier"], "metric": "p_delete", "value": preset["p_del"]}]
    return pd.DataFrame(rows, columns=["tier", "metric", "value"])


#: Table 7's rows and the ablation operation that is our annotation-level analogue of each
TABLE7_OPERATIONS = ("dilation", "erosion", "opening", "random_scale", "shift", "localization", "approximation")


def table7_retained(paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 7 (``reported/table7.csv``) as the share of the clean model's score each noisy model
    keeps (%): metric ``<metric>_retained``; the clean row is 100."""
    clean = paper[paper["operation"] == "clean"].set_index(["level", "metric"])["value"]
    out = paper.copy()
    out["value"] = [100 * v / clean[(lvl, m)] for v, lvl, m in zip(out["value"], out["level"], out["metric"])]
    out["metric"] = out["metric"] + "_retained"
    return out


def table7_ours(summary: pd.DataFrame, clean: dict) -> pd.DataFrame:
    """Our annotation-level AP (%, mean over seeds) of Table 7's operations in its long form (operation, level,
    metric ``<metric>_retained``, value), as shares of the clean annotations' own score (``quality.clean_scores``:
    100 % unless the evaluation loses instances)."""
    part = summary[(summary["kind"] == "ablation") & summary["name"].isin(TABLE7_OPERATIONS)]
    rows = [{"operation": r["name"], "level": str(r["tier"]), "metric": f"{m}_retained",
             "value": 100 * r[f"{m}_mean"] / clean[m]} for _, r in part.iterrows() for m in ("mask_AP", "boundary_AP")]
    rows += [{"operation": "clean", "level": t, "metric": f"{m}_retained", "value": 100 * clean[m] / clean[m]}
             for t in TIER_ORDER for m in ("mask_AP", "boundary_AP")]
    return pd.DataFrame(rows)


__all__ = ["benchmark_files", "manifest_table1", "table1", "table1_long", "legacy_presets", "mean_iou", "engine_effects", "quality_summary",
           "quality_wide", "TABLE7_OPERATIONS", "table7_retained", "table7_ours"]
