"""The paper's claims (and the official code's behaviour) checked on our runs; each function returns claim records
(``shared.report.claim_record``): statement, holds (True / False / None = not run) and the numbers behind it."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from benchmark_n.noise import TIER_ORDER, ablate, noise_dataset, sibling_map
from shared.report import claim_record, verdict



def _falls(values) -> bool:
    """Strictly decreasing from low to high."""
    return bool(np.all(np.diff(np.asarray(values, dtype=float)) < 0))


def engine_claims(dataset: dict, effects: pd.DataFrame, p_cls: float = 0.05) -> list[dict]:
    """Notebook 00: the tiers' severity, the class noise per tier and engine, the official v2 flip, Monte-Carlo
    variants. ``effects``: ``tables.engine_effects`` of ``dataset``."""
    records = []
    for engine, part in effects.groupby("engine", sort=False):
        part = part.set_index("tier").reindex(TIER_ORDER)
        iou = part["mean IoU with clean"]
        records.append(claim_record(
            f"{engine} engine: the tiers increase the noise (mean mask IoU of the noisy instances with their clean "
            "versions falls from low to mid to high; Sec. 3.3)",
            verdict(_falls(iou), *iou), " > ".join(f"{v:.3f}" for v in iou)))
        flips = part["class_flipped %"]
        records.append(claim_record(
            f"{engine} engine: higher tiers flip more classes (Sec. 4.2: the tiers increase class confusion)",
            verdict(bool(np.all(np.diff(flips) > 0)), *flips),
            " / ".join(f"{v:.1f} %" for v in flips) + " of the instances at low / mid / high"))
    records.append(_flip_rate_claim(dataset, p_cls))
    runs = [json.dumps(noise_dataset(dataset, "paper", "high", s).dataset, sort_keys=True) for s in (0, 0, 1)]
    records.append(claim_record(
        "Each seed draws another corrupted variant of the same dataset, and a seed gives the same variant again "
        "(Sec. 3.3: Monte-Carlo variants)", runs[0] == runs[1] and runs[0] != runs[2],
        "seed 0 twice: identical JSON; seeds 0 and 1: different"))
    return records


FLIP_TRIALS = 3000  # instance draws pooled over seeds for the flip-rate test (binomial sd 0.4 points at 5 %)


def _flip_rate_claim(dataset: dict, p_cls: float) -> dict:
    """The class flip alone (``ablate(..., "class_flip")``), pooled over enough seeds for ``FLIP_TRIALS`` draws of
    the instances that have a sibling class: the share flipped is p_class within 3 binomial sd; the released v2
    draw and test, run as written, flip nothing."""
    siblings = sibling_map(dataset["categories"])
    eligible = sum(1 for a in dataset["annotations"] if not a.get("iscrowd", 0) and siblings.get(a["category_id"]))
    if eligible == 0:
        return claim_record("The class flip changes p_class = 5 % of the instances that have a sibling class (Table 1); "
                            "the released v2 code changes none", None, "no instance has a sibling class")
    seeds = range(min(50, -(-FLIP_TRIALS // eligible)))
    flipped = sum(ablate(dataset, "class_flip", "mid", s).manifest["class_flipped"] for s in seeds)
    as_is = noise_dataset(dataset, "paper", "mid", 0, class_flip="v2_asis").manifest["class_flipped"]
    n = eligible * len(seeds)
    within = abs(flipped - p_cls * n) <= 3 * np.sqrt(n * p_cls * (1 - p_cls)) + 1
    return claim_record(
        "The class flip changes p_class = 5 % of the instances that have a sibling class (Table 1); the released v2 "
        "code changes none (it draws an index among the siblings and writes it back only when it equals the "
        "category id)", within and as_is == 0,
        f"fixed: {flipped} of {n} draws ({100 * flipped / n:.2f} %; {eligible} instances with a sibling x "
        f"{len(seeds)} seeds); released v2: {as_is} flips")


def _means(summary: pd.DataFrame, kind: str, name: str, metric: str) -> pd.Series:
    part = summary[(summary["kind"] == kind) & (summary["name"] == name)].set_index("tier")
    return part[f"{metric}_mean"].reindex(list(TIER_ORDER)).astype(float)


def quality_claims(frame: pd.DataFrame, summary: pd.DataFrame) -> list[dict]:
    """Notebook 01: the annotation-quality findings (Fig. 11, Sec. 4.4, Table 7's ordering) on our variants.
    ``frame``: ``quality.quality_table``; ``summary``: ``tables.quality_summary`` of it."""
    records = []
    engines = frame[frame["kind"] == "engine"]
    for engine, part in engines.groupby("name", sort=False):
        per_seed = {s: g.set_index("tier").reindex(list(TIER_ORDER)) for s, g in part.groupby("seed")}
        falls = [_falls(g[m]) for g in per_seed.values() for m in ("mask_AP", "boundary_AP")]
        scores = [v for g in per_seed.values() for m in ("mask_AP", "boundary_AP") for v in g[m]]  # NaN: tier not run
        records.append(claim_record(
            f"{engine} engine: mask AP and Boundary AP of the noisy annotations fall from low to mid to high, for "
            f"every seed (Fig. 11)", verdict(all(falls), *scores),
            "; ".join(f"seed {s}: " + " > ".join(f"{v:.3f}" for v in g["mask_AP"]) for s, g in per_seed.items())))
        below = (part["boundary_AP"] <= part["mask_AP"] + 1e-9).all()
        high = part[part["tier"] == "high"]
        drop_mask, drop_boundary = 1 - high["mask_AP"].mean(), 1 - high["boundary_AP"].mean()
        records.append(claim_record(
            f"{engine} engine: Boundary AP is at most mask AP at every tier and falls by a larger fraction "
            "(boundary fidelity suffers most; Sec. 4.4)",
            verdict(below and drop_boundary > drop_mask, drop_mask, drop_boundary),
            f"high tier: mask AP -{100 * drop_mask:.0f} %, Boundary AP -{100 * drop_boundary:.0f} %"))
    records += _ablation_claims(summary)
    return records


def _ablation_claims(summary: pd.DataFrame) -> list[dict]:
    m = {op: _means(summary, "ablation", op, "mask_AP") for op in
         ("dilation", "erosion", "opening", "random_scale", "shift", "localization", "approximation", "class_flip",
          "deletion")}
    b = {op: _means(summary, "ablation", op, "boundary_AP") for op in ("class_flip", "deletion")}
    geometry_free = [bool(np.allclose(m[op], b[op], atol=1e-9)) for op in ("class_flip", "deletion")]
    others_low = [m[op]["low"] for op in ("dilation", "erosion", "random_scale", "shift", "localization")]
    return [
        claim_record("Erosion hurts more than dilation at every level (Table 7, Sec. 4.4: erosions affect boundary "
                     "fidelity most)", verdict(bool((m["erosion"] < m["dilation"]).all()), *m["erosion"], *m["dilation"]),
                     "mask AP erosion / dilation: " + ", ".join(
                         f"{t} {e:.3f} / {d:.3f}" for t, e, d in zip(TIER_ORDER, m["erosion"], m["dilation"]))),
        claim_record("Opening (erode then dilate) leaves the annotations almost clean (Table 7: opening = clean)",
                     verdict(bool((m["opening"] >= 0.95).all()), *m["opening"]),
                     "mask AP " + " / ".join(f"{v:.3f}" for v in m["opening"])),
        claim_record("Random scale (dilate or erode at random) is milder than dilation and erosion alone (Table 7)",
                     verdict(bool((m["random_scale"] > np.maximum(m["dilation"], m["erosion"])).all()),
                             *m["random_scale"], *m["dilation"], *m["erosion"]),
                     "mask AP at high: random " + f"{m['random_scale']['high']:.3f}, dilation "
                     f"{m['dilation']['high']:.3f}, erosion {m['erosion']['high']:.3f}; an annotation is dilated "
                     "or eroded, so its score lies between; the paper's gain is a trained model's"),
        claim_record("A rigid shift hurts more than vertex jitter at every level (Table 7: shifting vs localization)",
                     verdict(bool((m["shift"] < m["localization"]).all()), *m["shift"], *m["localization"]),
                     "mask AP shift / localization: " + ", ".join(
                         f"{t} {s:.3f} / {j:.3f}" for t, s, j in zip(TIER_ORDER, m["shift"], m["localization"]))),
        claim_record("Approximation is the mildest spatial noise at the low tier (Table 7: 34.7, the clean score)",
                     verdict(bool(m["approximation"]["low"] >= max(others_low)), m["approximation"]["low"],
                             *others_low),
                     f"low-tier mask AP: approximation {m['approximation']['low']:.3f}, next best "
                     f"{np.max(others_low):.3f}"),
        claim_record("Class flips and deletions leave Boundary AP equal to mask AP (they do not move boundaries)",
                     verdict(all(geometry_free), *m["class_flip"], *m["deletion"], *b["class_flip"], *b["deletion"]),
                     f"class flip {m['class_flip']['low']:.3f} / {b['class_flip']['low']:.3f}, deletion "
                     f"{m['deletion']['low']:.3f} / {b['deletion']['low']:.3f} (mask / boundary)"),
    ]


def benchmark_claims(entries, again) -> list[dict]:
    """Notebook 02: every file is valid COCO whose annotations match its manifest's count, and writing the same
    benchmarks again keeps them byte for byte (``again``: the ``BenchmarkFile`` list of the second write)."""
    import contextlib
    import io

    from pycocotools import mask as mask_utils
    from pycocotools.coco import COCO

    from benchmark_n.benchmarks import read_benchmark

    problems = []
    for e in entries:
        dataset, manifest = read_benchmark(e.path)
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(str(e.path))
        areas = [float(mask_utils.area(coco.annToRLE(a))) for a in coco.dataset["annotations"]]
        if len(dataset["annotations"]) != manifest["kept"] or not all(a > 0 for a in areas):
            problems.append(e.path.name)
    kept = [a for a in again if not a.written]
    same = all(a.manifest["sha256"] == e.manifest["sha256"] for a, e in zip(again, entries))
    return [
        claim_record("Every benchmark file is COCO JSON that pycocotools loads, with as many annotations as its "
                     "manifest records, every mask non-empty", verdict(not problems, *([1] if entries else [None])),
                     f"{len(entries) - len(problems)} of {len(entries)} files"
                     + (f"; not: {', '.join(problems[:3])}" if problems else "")),
        claim_record("The same source, engine, tier, seed and code give the same file again (Sec. 3.3: reproducible "
                     "stress tests)", verdict(len(kept) == len(entries) and same, *([1] if entries else [None])),
                     f"second write: {len(kept)} of {len(entries)} files kept, checksums "
                     f"{'identical' if same else 'different'}"),
    ]


__all__ = ["engine_claims", "quality_claims", "benchmark_claims"]
