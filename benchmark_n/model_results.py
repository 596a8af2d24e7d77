"""Tables and claims of the model-level notebooks (03-07): runs as records, summaries over seeds, the paper's
numbers beside ours and the paper's findings checked.

    records = run_records(runs)                     # one row per run: label, kind, name, tier, rate, seed, loss, scores (%)
    summary = summarise(records)                    # mean, sd and n over seeds per training noise and loss
    retained(summary, "mask_AP")                    # each setting's share of the clean score (%)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from benchmark_n.noise import TIER_ORDER
from benchmark_n.runs import SCORE_KEYS
from shared.report import claim_record, verdict

PERCENT = [k for k in SCORE_KEYS if "AP" in k]  # fractions shown as %
SETTING = ["label", "kind", "name", "tier", "rate", "loss"]
TIERS = ("clean", *TIER_ORDER)
DATASET_NAMES = {"shapes": "COCO-N", "coco2017": "COCO-N", "cityscapes": "CityScapes-N", "lvis_v1": "LVIS-N",
                 "viper": "VIPER-N"}
#: the paper's tables of Mask R-CNN R-50 per tier, by dataset (the rest are in Tables 3, 8 and 11)
TIER_TABLES = {"LVIS-N": ["table12"], "VIPER-N": ["table2"]}


def run_records(runs) -> pd.DataFrame:
    """One row per run: its setting (``SETTING``), seed, the AP scores in % and the confidence and detection
    count as they are."""
    rows = []
    for run in runs:
        noise = run.spec.noise
        tier = "clean" if noise.kind == "clean" else noise.tier
        scores = {k: (100 * v if k in PERCENT else v) for k, v in run.scores.items()}
        rows.append({"label": noise.label, "kind": noise.kind, "name": noise.name, "tier": tier,
                     "rate": noise.rate, "loss": run.spec.loss, "seed": run.spec.seed, **scores})
    return pd.DataFrame(rows)


def summarise(records: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of every score per setting (columns ``<score>``), with ``<score>_sd`` and ``seeds``."""
    scores = [c for c in SCORE_KEYS if c in records.columns]
    grouped = records.groupby(SETTING, sort=False, dropna=False)
    summary = grouped[scores].mean()
    summary = summary.join(grouped[scores].std().add_suffix("_sd")).join(grouped.size().rename("seeds"))
    return summary.reset_index()


def tier_table(summary: pd.DataFrame, metrics=("mask_AP", "boundary_AP", "box_AP"), loss: str = "ce") -> pd.DataFrame:
    """Rows = metrics, columns = the tiers run (clean, low, mid, high, then any other, e.g. "text"), cells "mean ±
    sd" (%) over seeds: the layout of Tables 3, 8 and 11 for one model."""
    part = summary[summary["loss"] == loss].set_index("tier")
    tiers = [t for t in TIERS if t in part.index] + [t for t in dict.fromkeys(part.index) if t not in TIERS]
    cells = {m: {t: _cell(part.loc[t, m], part.loc[t, f"{m}_sd"]) for t in tiers} for m in metrics}
    return pd.DataFrame(cells).T[tiers]


def _cell(mean: float, sd: float) -> str:
    return f"{mean:.1f}" if pd.isna(sd) else f"{mean:.1f} ± {sd:.1f}"


def share(value, clean) -> float:
    """``100 * value / clean`` (%), NaN where the clean score is 0 or missing (an untrained model's)."""
    value, clean = np.asarray(value, dtype=float), np.asarray(clean, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(clean > 0, 100 * value / np.where(clean > 0, clean, 1), np.nan)


def retained(frame: pd.DataFrame, metric: str, keys=(), clean_where=None) -> pd.Series:
    """``share`` of ``frame[metric]`` in the clean value of the same ``keys`` (the rows where ``clean_where``, by
    default ``tier == "clean"``); NaN without a clean row."""
    keys = list(keys)
    is_clean = frame["tier"].eq("clean") if clean_where is None else clean_where
    if not is_clean.any():
        return pd.Series(np.nan, index=frame.index)
    clean = frame[is_clean].set_index(keys)[metric] if keys else frame.loc[is_clean, metric].iloc[0]
    base = frame.set_index(keys).index.map(clean) if keys else clean
    return pd.Series(share(frame[metric], base), index=frame.index)


def paper_retained(paper: pd.DataFrame, keys=("dataset", "model", "backbone", "metric")) -> pd.DataFrame:
    """The paper's rows of a tier table (Tables 3, 8, 11, 12) as shares of their clean value: metric
    ``<metric>_retained``."""
    out = paper.copy()
    out["value"] = retained(out, "value", keys).round(1)
    out["metric"] = out["metric"] + "_retained"
    return out[out["tier"] != "clean"]


def ours_tier_long(summary: pd.DataFrame, dataset: str, metrics, *, absolute: bool, ours_on: str,
                   model: str = "M-RCNN", backbone: str = "R-50", loss: str = "ce") -> pd.DataFrame:
    """Our tier summary in the long form of the paper's tier tables (dataset, model, backbone, tier, metric, value):
    absolute scores (%) or, with ``absolute=False``, shares of the clean score."""
    part = summary[summary["loss"] == loss]
    rows = []
    for metric in metrics:
        values = part[metric] if absolute else retained(part, metric)
        for tier, value in zip(part["tier"], values):
            if absolute or tier != "clean":
                rows.append({"dataset": dataset, "model": model, "backbone": backbone, "tier": tier,
                             "metric": metric if absolute else f"{metric}_retained", "value": round(value, 1)})
    return pd.DataFrame(rows).assign(ours_on=ours_on)


def _mean(summary: pd.DataFrame, tier: str, metric: str, loss: str = "ce") -> float:
    part = summary[(summary["tier"] == tier) & (summary["loss"] == loss)]
    return float(part[metric].iloc[0]) if len(part) else float("nan")


def _drop(summary: pd.DataFrame, metric: str, tier: str = "high") -> float:
    """Relative drop (fraction) of a metric from clean to ``tier``."""
    return 1 - float(share(_mean(summary, tier, metric), _mean(summary, "clean", metric))) / 100


def train_eval_claims(summary: pd.DataFrame) -> list[dict]:
    """Notebook 03 (Tables 3, 8, 11; faithfulness checks): clean > hard, the larger relative drop of Boundary AP, the
    monotone fall over the tiers, box AP dropping less than mask AP."""
    clean = {m: _mean(summary, "clean", m) for m in ("mask_AP", "boundary_AP", "box_AP")}
    high = {m: _mean(summary, "high", m) for m in ("mask_AP", "boundary_AP", "box_AP")}
    records = [claim_record(
        "Training on the Hard (high) annotations costs mask AP and Boundary AP against training on clean ones "
        "(Tables 3, 8)", verdict(clean["mask_AP"] > high["mask_AP"] and clean["boundary_AP"] > high["boundary_AP"],
                                 *clean.values(), *high.values()),
        f"mask AP {clean['mask_AP']:.1f} -> {high['mask_AP']:.1f}, Boundary AP {clean['boundary_AP']:.1f} -> "
        f"{high['boundary_AP']:.1f} (mean over seeds)")]
    d_mask, d_boundary, d_box = (_drop(summary, m) for m in ("mask_AP", "boundary_AP", "box_AP"))
    records.append(claim_record(
        "Spatial noise hits the boundaries hardest: Boundary AP falls by a larger fraction than mask AP (Sec. 4.4; "
        "the paper's Mask R-CNN shows the opposite in Tables 8 vs 3, -21 % vs -36 % at Hard)",
        verdict(d_boundary > d_mask, d_boundary, d_mask),
        f"high vs clean: Boundary AP -{100 * d_boundary:.0f} %, mask AP -{100 * d_mask:.0f} %"))
    means = [_mean(summary, t, "mask_AP") for t in TIERS]
    records.append(claim_record(
        "Mask AP falls with every tier, clean > low > mid > high (Table 3, Mask R-CNN R-50 on COCO-N)",
        verdict(bool(np.all(np.diff(means) < 0)), *means),
        " > ".join("—" if np.isnan(v) else f"{v:.1f}" for v in means) + " (clean, low, mid, high)"))
    records.append(claim_record(
        "Box AP drops less than mask AP (Table 11 vs Table 3: -12 % vs -36 % at Hard for Mask R-CNN R-50)",
        verdict(d_box < d_mask, d_box, d_mask), f"box AP -{100 * d_box:.0f} %, mask AP -{100 * d_mask:.0f} %"))
    return records


# ------------------------------------------------------------------------------------------------ 04: Table 7
def ablation_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mask and Boundary AP (%) of the clean model and of each ablation run, per operation and level."""
    part = summary[summary["kind"].isin(["clean", "ablation"])]
    frame = part.assign(operation=part["name"].where(part["kind"] == "ablation", "clean"))
    return frame.set_index(["operation", "tier"])[["mask_AP", "boundary_AP", "seeds"]].round(1)


def _clean_value(summary: pd.DataFrame, metric: str, loss: str = "ce") -> float:
    return _mean(summary, "clean", metric, loss)


def ablation_retained(summary: pd.DataFrame) -> pd.DataFrame:
    """Table 7's long form for our runs (operation, level, metric ``<m>_retained``, value %): each ablation run's
    share of the clean model's score; the clean row 100 at every level run."""
    part = summary[summary["kind"] == "ablation"]
    rows = [{"operation": r["name"], "level": r["tier"], "metric": f"{m}_retained",
             "value": round(float(share(r[m], _clean_value(summary, m))), 1)}
            for _, r in part.iterrows() for m in ("mask_AP", "boundary_AP")]
    rows += [{"operation": "clean", "level": level, "metric": f"{m}_retained", "value": 100.0}
             for level in dict.fromkeys(part["tier"]) for m in ("mask_AP", "boundary_AP")]
    return pd.DataFrame(rows, columns=["operation", "level", "metric", "value"])


def _ablation(summary: pd.DataFrame, operation: str, level: str, metric: str) -> float:
    part = summary[(summary["kind"] == "ablation") & (summary["name"] == operation) & (summary["tier"] == level)]
    return float(part[metric].iloc[0]) if len(part) else float("nan")


def ablation_claims(summary: pd.DataFrame) -> list[dict]:
    """Notebook 04 (Table 7): erosion hurts more than dilation, opening is harmless, random scale is milder than
    either, every spatial operation costs AP; each at the levels run."""
    records = []
    levels = [t for t in TIER_ORDER if t in set(summary["tier"])]
    for level in levels or ["high"]:
        ero, dil = (_ablation(summary, op, level, "mask_AP") for op in ("erosion", "dilation"))
        ero_b, dil_b = (_ablation(summary, op, level, "boundary_AP") for op in ("erosion", "dilation"))
        records.append(claim_record(
            f"Erosion hurts a model more than dilation with the same kernel ({level}; Table 7: 17.4 vs 26.4 mask AP "
            "at High)", verdict(ero < dil and ero_b < dil_b, ero, dil, ero_b, dil_b),
            f"mask AP {ero:.1f} vs {dil:.1f}, Boundary AP {ero_b:.1f} vs {dil_b:.1f}"))
        opening, clean = _ablation(summary, "opening", level, "mask_AP"), _clean_value(summary, "mask_AP")
        records.append(claim_record(
            f"Opening leaves the model as good as the clean one ({level}; Table 7: 34.6 vs 34.6), within 2 AP points",
            verdict(abs(opening - clean) <= 2, opening, clean), f"{opening:.1f} vs clean {clean:.1f}"))
        scale = _ablation(summary, "random_scale", level, "mask_AP")
        records.append(claim_record(
            f"Random scale (half dilated, half eroded) costs less than dilation or erosion alone ({level}; Table 7: "
            "30.8 vs 26.4 and 17.4 at High)", verdict(scale > max(ero, dil), scale, ero, dil),
            f"{scale:.1f} vs dilation {dil:.1f}, erosion {ero:.1f}"))
    return records


# ------------------------------------------------------------------------------------------------ 05: Tables 9, 10
def _setting_name(row) -> str:
    """Table 10's setting names: "clean", "50 %" (class noise alone), "40 % + Hard" (the README engine's tier)."""
    if row["kind"] == "clean":
        return "clean"
    if row["kind"] == "class_noise":
        return f"{100 * row['rate']:g} %" + ("" if row["name"] == "uniform" else " asym")
    if row["kind"] == "engine" and row["name"] == "legacy_v0":
        return {"low": "20 % + Easy", "mid": "30 % + Medium", "high": "40 % + Hard"}[row["tier"]]
    return row["label"]


def setting_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary indexed by Table 10's setting names."""
    return summary.assign(setting=summary.apply(_setting_name, axis=1)).set_index("setting")


def setting_table(summary: pd.DataFrame, metrics) -> pd.DataFrame:
    """Rows = training settings (clean, class noise, class + spatial), columns = ``metrics``, "mean ± sd" (%)."""
    frame = setting_frame(summary)
    return pd.DataFrame({m: [_cell(v, sd) for v, sd in zip(frame[m], frame[f"{m}_sd"])] for m in metrics},
                        index=frame.index)


def class_noise_retained(summary: pd.DataFrame) -> pd.DataFrame:
    """Table 9's long form for our class-noise runs: model, backbone, class_noise, rate, metric ``<m>_retained``."""
    part = summary[summary["kind"] == "class_noise"]
    return pd.DataFrame([{"model": "M-RCNN", "backbone": "R-50", "class_noise": r["name"], "rate": r["rate"],
                          "metric": f"{m}_retained", "value": round(float(share(r[m], _clean_value(summary, m))), 1)}
                         for _, r in part.iterrows() for m in ("box_AP", "mask_AP")],
                        columns=["model", "backbone", "class_noise", "rate", "metric", "value"])


def paper_class_retained(paper: pd.DataFrame) -> pd.DataFrame:
    """Table 9 as shares of each model's clean score."""
    out = paper.copy()
    out["tier"] = np.where(out["class_noise"] == "clean", "clean", "noisy")
    out["value"] = retained(out, "value", ["model", "backbone", "metric"]).round(1)
    out["metric"] = out["metric"] + "_retained"
    return out[out["tier"] != "clean"].drop(columns="tier")


def table10_retained(summary: pd.DataFrame) -> pd.DataFrame:
    """Table 10's long form for our runs: setting, metric ``<class-agnostic metric>_retained``, value (%)."""
    frame = setting_frame(summary)
    metrics = ("box_AP_agnostic", "mask_AP_agnostic", "boundary_AP_agnostic")
    return pd.DataFrame([{"setting": s, "metric": f"{m}_retained",
                          "value": round(float(share(frame.loc[s, m], frame.loc["clean", m])), 1)}
                         for s in frame.index if s != "clean" for m in metrics],
                        columns=["setting", "metric", "value"])


def paper_table10_retained(paper: pd.DataFrame) -> pd.DataFrame:
    out = paper.copy()
    out["tier"] = np.where(out["setting"] == "clean", "clean", "noisy")
    out["value"] = retained(out, "value", ["metric"]).round(1)
    out["metric"] = out["metric"] + "_retained"
    return out[out["tier"] != "clean"].drop(columns="tier")


def class_noise_claims(summary: pd.DataFrame) -> list[dict]:
    """Notebook 05: class-agnostic evaluation gives back much of what class noise costs (Table 10 vs 9), and a
    spatial tier on top of class noise costs more than 50 % class noise alone (Table 10)."""
    frame = setting_frame(summary)
    records = []
    has_clean = "clean" in frame.index
    for setting in [s for s in frame.index if frame.loc[s, "kind"] == "class_noise"]:
        row = frame.loc[setting]
        kept = float(share(row["mask_AP"], frame.loc["clean", "mask_AP"])) if has_clean else None
        kept_agnostic = float(share(row["mask_AP_agnostic"], frame.loc["clean", "mask_AP_agnostic"])) if has_clean else None
        records.append(claim_record(
            f"Class-agnostic evaluation gives back much of what {setting} class noise costs: the model keeps a larger "
            "share of its clean mask AP class-agnostically than per class (Tables 10 vs 9 at 50 %: 91.3 % vs "
            "84.4 %)", verdict(kept_agnostic is not None and kept is not None and kept_agnostic > kept,
                               kept, kept_agnostic),
            "" if kept is None else f"kept {kept_agnostic:.1f} % class-agnostically vs {kept:.1f} % per class"))
    combined = [s for s in ("20 % + Easy", "30 % + Medium", "40 % + Hard") if s in frame.index]
    if combined and "50 %" in frame.index:
        alone, hardest = frame.loc["50 %", "mask_AP_agnostic"], frame.loc[combined[-1], "mask_AP_agnostic"]
        records.append(claim_record(
            "Adding spatial noise costs more than class noise alone in foreground/background AP (Table 10: "
            "40 % + Hard 30.6 < 50 % 32.7)", verdict(hardest < alone, hardest, alone),
            f"{combined[-1]}: {hardest:.1f}; 50 % class noise alone: {alone:.1f}"))
    else:
        records.append(claim_record("Adding spatial noise costs more than class noise alone (Table 10)", None,
                                    "needs the 50 % class-noise run and a class + spatial run"))
    return records


# ------------------------------------------------------------------------------------------------ 06: Table 13, Figs. 8, 13
def loss_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Table 13's layout: rows CE / SCE, columns mask and Boundary AP per tier ("mean ± sd", %)."""
    cells = {}
    for _, r in summary.iterrows():
        for m in ("mask_AP", "boundary_AP"):
            cells.setdefault((r["tier"], m), {})[r["loss"].upper()] = _cell(r[m], r[f"{m}_sd"])
    frame = pd.DataFrame(cells)
    order = [(t, m) for t in TIERS for m in ("mask_AP", "boundary_AP") if (t, m) in frame.columns]
    return frame[order]


def sce_gain(summary: pd.DataFrame) -> pd.DataFrame:
    """SCE minus CE (AP points) per tier run: the comparison Table 13 supports (its CE row is not Table 3's)."""
    rows = []
    for tier in dict.fromkeys(summary["tier"]):
        for m in ("mask_AP", "boundary_AP"):
            ce, sce = _mean(summary, tier, m, "ce"), _mean(summary, tier, m, "sce")
            rows.append({"tier": tier, "metric": f"sce_minus_ce_{m}", "value": round(sce - ce, 1)})
    return pd.DataFrame(rows, columns=["tier", "metric", "value"])


def paper_sce_gain(paper: pd.DataFrame) -> pd.DataFrame:
    wide = paper.pivot_table(index=["tier", "metric"], columns="loss", values="value").reset_index()
    return pd.DataFrame({"item": "Table 13", "tier": wide["tier"], "metric": "sce_minus_ce_" + wide["metric"],
                         "value": (wide["SCE"] - wide["CE"]).round(1), "source": "paper",
                         "note": "SCE row minus CE row"})


def separability(losses: pd.DataFrame) -> pd.DataFrame:
    """Per logged epoch, how well a loss singles out the noisy instances: the AUROC of the class loss for the
    class-flipped ones and of the mask loss for the spatially noised ones (0.5 = intermixed, 1 = separated;
    NaN when an epoch has no noisy or no clean instance)."""
    from sklearn.metrics import roc_auc_score

    def auc(flags, scores):
        return roc_auc_score(flags, scores) if 0 < flags.sum() < len(flags) else float("nan")
    rows = [{"epoch": epoch, "class_loss_AUROC (class flipped)": auc(part["class_flipped"], part["class_loss"]),
             "mask_loss_AUROC (spatially noised)": auc(part["spatially_noised"], part["mask_loss"])}
            for epoch, part in losses.groupby("epoch")]
    return pd.DataFrame(rows).round(3)


def loss_claims(summary: pd.DataFrame, separation: pd.DataFrame) -> list[dict]:
    """Notebook 06: class noise is separable by the class loss, spatial noise is not by the mask loss (Figs. 8,
    13); SCE, a loss made for class noise, does not give back what spatial noise costs (Table 13)."""
    last = separation.iloc[-1] if len(separation) else pd.Series(dtype=float)
    class_auc = last.get("class_loss_AUROC (class flipped)", float("nan"))
    mask_auc = last.get("mask_loss_AUROC (spatially noised)", float("nan"))
    records = [claim_record(
        "Class-flipped instances stand out by their class loss (Figs. 8, 13: \"two roughly distinct Gaussian "
        "distributions\"): AUROC above 0.8 at the last logged epoch", verdict(class_auc > 0.8, class_auc),
        f"AUROC {class_auc:.2f}"), claim_record(
        "Spatially noised instances do not stand out by their mask loss as class-flipped ones do by their class loss "
        "(Figs. 8, 13: the losses \"remain intermixed\")", verdict(mask_auc < class_auc, mask_auc, class_auc),
        f"mask-loss AUROC {mask_auc:.2f} vs class-loss AUROC {class_auc:.2f}")]
    noisy = [t for t in TIER_ORDER if t in set(summary["tier"])]
    tier = noisy[-1] if noisy else "high"
    gain = _mean(summary, tier, "mask_AP", "sce") - _mean(summary, tier, "mask_AP", "ce")
    loss = _mean(summary, "clean", "mask_AP", "ce") - _mean(summary, tier, "mask_AP", "ce")
    records.append(claim_record(
        f"SCE gives back less than half of what the {tier} tier costs with CE (Table 13: +0.4 of 6.2 mask AP points "
        "at Hard)", verdict(gain < 0.5 * loss, gain, loss), f"SCE - CE = {gain:+.1f}; clean - {tier} (CE) = {loss:.1f}"))
    return records


# ------------------------------------------------------------------------------------------------ 07: Figs. 7b, 10, 15
def confidence_table(summary: pd.DataFrame) -> pd.DataFrame:
    cols = ["mean_confidence", "confident_share", "mean_score", "detections"]
    return summary.set_index("tier")[cols].round(3)


def conflicting_classes(runs, val: dict, iou: float = 0.5) -> pd.DataFrame:
    """Per run: the share (%) of val instances matched (mask IoU >= ``iou``) by detections of two or more classes,
    each scoring above 0.5 (Fig. 10: "multiple conflicting classes for a single instance, fooling the NMS")."""
    from pycocotools import mask as mask_utils

    from benchmark_n.coco import ann_to_rle, image_sizes
    sizes = image_sizes(val)
    rows = []
    for run in runs:
        by_image = {}
        for d in run.detections:
            if d["score"] > 0.5:
                by_image.setdefault(d["image_id"], []).append(d)
        conflicted, total = 0, 0
        for ann in val["annotations"]:
            total += 1
            dets = by_image.get(ann["image_id"], [])
            if not dets:
                continue
            gt = [ann_to_rle(ann, *sizes[ann["image_id"]])]
            overlaps = mask_utils.iou([d["segmentation"] for d in dets], gt, [0])[:, 0]
            conflicted += len({d["category_id"] for d, o in zip(dets, overlaps) if o >= iou}) >= 2
        tier = "clean" if run.spec.noise.kind == "clean" else run.spec.noise.tier
        rows.append({"tier": tier, "seed": run.spec.seed, "conflicting %": 100 * conflicted / max(total, 1)})
    return pd.DataFrame(rows)


def confidence_claims(summary: pd.DataFrame, conflicts: pd.DataFrame, overlapping: bool = True) -> list[dict]:
    """Notebook 07: noisier training lowers the confidence (Fig. 7b: the mean score of the detections above 0.5);
    noisy training gives instances detected as several classes (Fig. 10). ``overlapping``: whether the model can
    detect overlapping instances at all (a semantic segmenter's components cannot: that claim is then not run)."""
    noisy = [t for t in TIER_ORDER if t in set(summary["tier"])]
    tier = noisy[-1] if noisy else "high"
    clean_conf, noisy_conf = _mean(summary, "clean", "mean_confidence"), _mean(summary, tier, "mean_confidence")
    clean_share, noisy_share = _mean(summary, "clean", "confident_share"), _mean(summary, tier, "confident_share")
    if noisy_share == 0 and clean_share > 0:  # nothing above 0.5 at all: the lowest confidence there is
        holds = True
    else:
        holds = verdict(noisy_conf < clean_conf, clean_conf, noisy_conf)
    records = [claim_record(
        f"Higher noise lowers the models' confidence (Fig. 7b: the mean score of the detections above 0.5), clean "
        f"vs {tier}", holds, f"mean score above 0.5: {clean_conf:.3f} -> {noisy_conf:.3f}; share of detections above "
        f"0.5: {clean_share:.0f} % -> {noisy_share:.0f} %")]
    means = conflicts.groupby("tier")["conflicting %"].mean() if len(conflicts) else pd.Series(dtype=float)
    c, n = means.get("clean", float("nan")), means.get(tier, float("nan"))
    statement = (f"A model trained on noisy annotations more often detects one instance as several classes (Fig. 10), "
                 f"clean vs {tier}")
    if not overlapping:
        records.append(claim_record(statement, None, "this model labels each pixel once, so its instances never "
                                    "overlap: the effect needs an instance detector (backend torchvision or mmdet)"))
    else:
        records.append(claim_record(statement, verdict(n > c, c, n), f"{c:.1f} % vs {n:.1f} % of the val instances"))
    return records



# ------------------------------------------------------------------------------------------------ 08: COCO-WAN
def prompt_table(quality: pd.DataFrame) -> pd.DataFrame:
    """Per prompt, mean over seeds (%): mask and Boundary AP of the weak labels against the clean annotations, mean
    IoU and Dice, and the detection F1 at IoU 0.5."""
    cols = ["mask_AP", "boundary_AP", "mean_iou", "mean_dice", "det_f1_50"]
    return (100 * quality.groupby("prompt", sort=False)[cols].mean()).round(1)


SAM_COLUMNS = ["mean_iou", "mean_dice", "det_f1_50"]


def table14_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Table 14, ours (%): per method (zero-shot, fine-tune) and training or prompting annotations (clean or a noisy
    tier), the mean over seeds of the masks' mean IoU and Dice ("F1") with the clean ones and the detection F1 at
    IoU 0.5."""
    return (100 * rows.groupby(["method", "annotations"], sort=False)[SAM_COLUMNS].mean()).round(1)


def table14_long(rows: pd.DataFrame) -> pd.DataFrame:
    """``table14_table`` in Table 14's long form: method, annotations, metric (iou, f1 = Dice), value (%)."""
    means = rows.groupby(["method", "annotations"], sort=False)[["mean_iou", "mean_dice"]].mean()
    frame = (100 * means).round(2).rename(columns={"mean_iou": "iou", "mean_dice": "f1"}).reset_index()
    return frame.melt(id_vars=["method", "annotations"], var_name="metric", value_name="value")


#: Table 4's prompts -> the tier of our run trained on their labels (COCO-WAN easy = box, medium = centre point)
TABLE4_RUNS = {"box": "low", "point": "mid", "text": "text"}


def paper_table4_retained(paper: pd.DataFrame) -> pd.DataFrame:
    """Table 4's cells as shares (%) of the model trained on the original labels (34.6 mask AP, 20.6 Boundary AP):
    metric ``<metric>_retained``, the "original labels" rows dropped."""
    base = paper[paper["prompt"] == "original labels"].set_index("metric")["value"]
    out = paper[paper["prompt"] != "original labels"].copy()
    out["value"] = np.round(share(out["value"], out["metric"].map(base)), 1)
    out["metric"] = out["metric"] + "_retained"
    return out


NOISY_PROMPT_NOT_RUN = "not run: no model is trained on noisy-prompt labels here (their labels are scored above)"


def ours_table4_retained(summary: pd.DataFrame, ours_on: str, metrics=("mask_AP", "boundary_AP")) -> pd.DataFrame:
    """Our models trained on box-, point- and text-prompted labels (``TABLE4_RUNS``) as shares (%) of the clean
    model's score, in Table 4's long form (prompt, prompt_noise, metric ``<metric>_retained``, value, ours_on): every
    cell of Table 4, NaN with ``ours_on`` "not run: ..." where no run of ours stands behind it (the noisy prompts,
    a prompt the settings leave out), so the paper's cell is shown beside an explicit gap."""
    rows = []
    for prompt, tier in TABLE4_RUNS.items():
        for metric in metrics:
            value = round(float(share(_mean(summary, tier, metric), _mean(summary, "clean", metric))), 1)
            rows.append({"prompt": prompt, "prompt_noise": "clean", "metric": f"{metric}_retained", "value": value,
                         "ours_on": ours_on if not np.isnan(value) else
                         f"not run: no model trained on {prompt}-prompted labels in these settings"})
            if prompt != "text":
                rows.append({"prompt": prompt, "prompt_noise": "noisy", "metric": f"{metric}_retained",
                             "value": float("nan"), "ours_on": NOISY_PROMPT_NOT_RUN})
    return pd.DataFrame(rows, columns=["prompt", "prompt_noise", "metric", "value", "ours_on"])


def paper_table5_retained(paper: pd.DataFrame) -> pd.DataFrame:
    """Table 5's text-prompted ("noisy") cells as shares (%) of the same backbone's clean cells: model, backbone,
    labels "noisy", metric ``<metric>_retained``."""
    wide = paper.pivot_table(index=["item", "model", "backbone", "metric"], columns="labels", values="value",
                             sort=False)
    out = np.round(share(wide["noisy"], wide["clean"]), 1)
    out = pd.Series(out, index=wide.index, name="value").reset_index()
    return out.assign(labels="noisy", metric=out["metric"] + "_retained", source="paper")


def ours_table5_retained(summary: pd.DataFrame, ours_on: str, model: str = "M2F",
                         backbone: str = "R-50") -> pd.DataFrame:
    """Our model trained on text-prompted labels (tier "text") as shares (%) of the clean model's mask and box AP,
    keyed as Table 5's ``model`` / ``backbone`` row it is set beside (``ours_on`` says what ours is); without a text
    run the values are NaN and ``ours_on`` says "not run", so the paper's cells still show."""
    rows = []
    for metric in ("mask_AP", "box_AP"):
        value = round(float(share(_mean(summary, "text", metric), _mean(summary, "clean", metric))), 1)
        rows.append({"model": model, "backbone": backbone, "labels": "noisy", "metric": f"{metric}_retained",
                     "value": value, "ours_on": ours_on if not np.isnan(value) else
                     "not run: no model trained on text-prompted labels (the text setting is off)"})
    return pd.DataFrame(rows, columns=["model", "backbone", "labels", "metric", "value", "ours_on"])


def text_prompt_change(paper: pd.DataFrame, summary: pd.DataFrame, ours: str) -> pd.DataFrame:
    """Table 5's relative change (%) of each backbone's mask and box AP from clean to text-prompted labels (the cells
    the paper's text summarises as "approximately 48 % in R-50 and 37.3 % in Swin-S"), and a last row ``ours``: our
    model's change from its clean run to its run on text-prompted labels (NaN without them)."""
    wide = paper.pivot_table(index=["backbone", "metric"], columns="labels", values="value", sort=False)
    table = (100 * (wide["noisy"] / wide["clean"] - 1)).round(1).unstack("metric")[["mask_AP", "box_AP"]]
    table.loc[ours] = [round(float(share(_mean(summary, "text", m), _mean(summary, "clean", m))) - 100, 1)
                       for m in ("mask_AP", "box_AP")]
    return table


def wan_claims(quality: pd.DataFrame, summary: pd.DataFrame, sam_rows: pd.DataFrame) -> list[dict]:
    """Notebook 08: box prompts give better labels than point prompts, noisy prompts worse ones (Table 4); a model
    trained on weak labels loses AP, more with point than with box prompts (Table 3's COCO-WAN row); noisy boxes
    give worse zero-shot masks, fine-tuning beats zero-shot and suffers less from noisy masks (Table 14, rows with
    ``method``, ``annotations`` and ``mean_iou`` as ``WeakAnnotations.table14`` makes them); a model trained on
    text-prompted labels (tier "text") scores below those on box and point labels (Table 4) and loses more than a
    third of its clean mask and box AP (Table 5)."""
    means = quality.groupby("prompt")["mask_AP"].mean() if len(quality) else pd.Series(dtype=float)
    def get(k):
        return 100 * means.get(k, float("nan"))

    box, box_noisy, point, point_random = (get(k) for k in ("box", "box_noisy", "point_center_bbox",
                                                             "point_random_in_mask"))
    text = get("text")
    records = [
        claim_record("Box prompts give better weak labels than centre-point prompts (Table 4: 32.8 vs 24.4 mask AP "
                     "of the model trained on them)", verdict(box > point, box, point),
                     f"mask AP of the labels: box {box:.1f}, point {point:.1f}"),
        claim_record("Text prompts give noisier labels than box and point prompts (Table 4: 22.0 mask AP of the model "
                     "trained on them, below point prompts' 24.4 and box prompts' 32.8)", verdict(text < point and text < box, text,
                                                                                   point, box),
                     f"mask AP of the labels: text {text:.1f}, point {point:.1f}, box {box:.1f}"),
        claim_record("Noisy prompts give worse labels than clean ones (Table 4: box 32.8 -> 25.3, point 24.4 -> "
                     "21.6)", verdict(box_noisy < box and point_random < point, box_noisy, box, point_random, point),
                     f"box {box:.1f} -> {box_noisy:.1f}, point {point:.1f} -> {point_random:.1f}")]
    clean, easy, medium = (_mean(summary, t, "mask_AP") for t in ("clean", "low", "mid"))
    records.append(claim_record(
        "A model trained on box-prompted labels loses less than one trained on point-prompted labels, and both lose "
        "against clean labels (Table 3, COCO-WAN: 34.6 / 32.8 / 24.4)",
        verdict(clean > easy > medium, clean, easy, medium), f"clean {clean:.1f}, box {easy:.1f}, point {medium:.1f}"))
    text_mask, text_box, clean_box = (_mean(summary, t, m) for t, m in (("text", "mask_AP"), ("text", "box_AP"),
                                                                         ("clean", "box_AP")))
    records.append(claim_record(
        "A model trained on text-prompted labels scores below the models trained on box- and point-prompted labels "
        "(Table 4: 22.0 vs 32.8 and 24.4 mask AP)", verdict(text_mask < easy and text_mask < medium, text_mask, easy,
                                                            medium),
        f"mask AP: text {text_mask:.1f}, box {easy:.1f}, point {medium:.1f}"))
    iou = sam_rows.groupby(["method", "annotations"])["mean_iou"].mean() * 100 if len(sam_rows) else pd.Series(
        dtype=float)
    tools = sam_rows.groupby("method")["annotator"].first() if "annotator" in sam_rows else pd.Series(dtype=str)
    tuned, zero = tools.get("fine-tune", "fine-tuned"), tools.get("zero-shot", "zero-shot")
    noisy = next((a for _, a in iou.index if a != "clean"), None)
    z_clean, z_noisy, f_clean, f_noisy = (iou.get((m, a), float("nan")) for m in ("zero-shot", "fine-tune")
                                          for a in ("clean", noisy))
    records.append(claim_record(
        "Boxes from noisy annotations prompt worse masks than boxes from clean ones (Table 14 zero-shot: IoU 79.8 "
        "-> 68.0)", verdict(z_noisy < z_clean, z_clean, z_noisy), f"mean IoU {z_clean:.1f} -> {z_noisy:.1f}"))
    records.append(claim_record(
        "Fine-tuning on clean masks gives better masks from clean boxes than zero-shot prompting (Table 14: IoU "
        "79.9 vs 79.8)", verdict(f_clean > z_clean, f_clean, z_clean),
        f"mean IoU {tuned} {f_clean:.1f}, {zero} {z_clean:.1f}"))
    records.append(claim_record(
        "Noisy training masks cost the fine-tuned model less than noisy prompts cost the zero-shot one (Table 14: "
        "IoU -2.4 vs -11.8 points)", verdict(f_clean - f_noisy < z_clean - z_noisy, f_clean, f_noisy, z_clean,
                                             z_noisy),
        f"{tuned} {f_clean:.1f} -> {f_noisy:.1f} ({f_noisy - f_clean:+.1f}), {zero} {z_clean:.1f} -> "
        f"{z_noisy:.1f} ({z_noisy - z_clean:+.1f})"))
    records.append(claim_record(
        "Text-prompted labels cost more than a third of a model's clean mask and box AP (Table 5: Mask2Former loses "
        "37-39 % of its mask AP and 36-47 % of its box AP with each of four backbones; the text: about 48 % with "
        "R-50, 37.3 % with Swin-S)", verdict(text_mask < 2 / 3 * clean and text_box < 2 / 3 * clean_box, text_mask,
                                              clean, text_box, clean_box),
        f"mask AP {clean:.1f} -> {text_mask:.1f} ({float(share(text_mask, clean)) - 100:+.0f} %), box AP "
        f"{clean_box:.1f} -> {text_box:.1f} ({float(share(text_box, clean_box)) - 100:+.0f} %)"))
    return records


__all__ = ["share", "PERCENT", "SETTING", "TIERS", "DATASET_NAMES", "TIER_TABLES", "run_records", "summarise",
           "tier_table", "retained", "paper_retained", "ours_tier_long", "train_eval_claims", "ablation_table",
           "ablation_retained", "ablation_claims", "setting_frame", "setting_table", "class_noise_retained",
           "paper_class_retained", "table10_retained", "paper_table10_retained", "class_noise_claims", "loss_table",
           "sce_gain", "paper_sce_gain", "separability", "loss_claims", "confidence_table", "conflicting_classes",
           "confidence_claims", "prompt_table", "SAM_COLUMNS", "table14_table", "table14_long", "TABLE4_RUNS",
           "NOISY_PROMPT_NOT_RUN", "paper_table4_retained", "ours_table4_retained", "paper_table5_retained",
           "ours_table5_retained", "text_prompt_change", "wan_claims"]
