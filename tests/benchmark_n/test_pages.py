"""Benchmark-N's tables, claims, cached annotation-quality runs, data sources and pages on small inputs."""
import numpy as np
import pandas as pd
import pytest

from benchmark_n import claims, tables
from benchmark_n.quality import COUNTS, SCORES, Variant, ablation_variants, engine_variants, quality_table
from benchmark_n.shapes import generate_shapes, preset
from benchmark_n.sources import load_annotations
from shared.cache import ArtifactCache
from shared.errors import ConfigError, DataNotFoundError
from shared.profiles import Settings
from shared.report import reported


@pytest.fixture(scope="module")
def shapes():
    return generate_shapes(8, seed=3, **preset("annotation")).dataset


def test_table1_is_the_papers(shapes):
    ours = tables.table1_long().set_index(["tier", "metric"])["value"]
    paper = reported("benchmark_n", "table1").set_index(["tier", "metric"])["value"]
    assert len(paper) == 24 and ours.sort_index().equals(paper.astype(float).sort_index())
    assert tables.table1().loc["(µapprox, σapprox)", "high"] == "(15, 10)"


def test_table7_as_shares_of_the_clean_score():
    paper = tables.table7_retained(reported("benchmark_n", "table7")).set_index(["operation", "level", "metric"])
    assert paper.loc[("clean", "mid", "boundary_AP_retained"), "value"] == pytest.approx(100)
    assert paper.loc[("erosion", "high", "mask_AP_retained"), "value"] == pytest.approx(100 * 17.4 / 34.6)


def frame_of(values: dict, kind="engine") -> pd.DataFrame:
    """A quality table: ``values[name][seed] = (mask APs low/mid/high, boundary APs low/mid/high)``."""
    rows = []
    for name, seeds in values.items():
        for seed, (mask, boundary) in seeds.items():
            for tier, m, b in zip(("low", "mid", "high"), mask, boundary):
                rows.append({"kind": kind, "name": name, "tier": tier, "seed": seed, "mask_AP": m, "boundary_AP": b,
                             **{k: np.nan for k in SCORES if k not in ("mask_AP", "boundary_AP")}})
    return pd.DataFrame(rows)


def test_summary_statistics_over_seeds():
    frame = frame_of({"paper": {0: ((0.7, 0.5, 0.3), (0.6, 0.4, 0.1)), 1: ((0.5, 0.5, 0.3), (0.4, 0.4, 0.1))}})
    summary = tables.quality_summary(frame).set_index("tier")
    assert summary.loc["low", "mask_AP_mean"] == pytest.approx(0.6) and summary.loc["low", "mask_AP_min"] == 0.5
    assert summary.loc["low", "mask_AP_std"] == pytest.approx(np.std([0.7, 0.5], ddof=1)) and summary["seeds"].eq(2).all()
    assert list(summary.index) == ["low", "mid", "high"]
    assert tables.quality_wide(tables.quality_summary(frame), "engine").loc["paper", "low mask AP"] == "60.0 ± 14.1"


def test_engine_claims_need_every_seed_to_fall():
    falling = frame_of({"paper": {0: ((0.7, 0.5, 0.3), (0.6, 0.4, 0.1))}})
    flat = frame_of({"paper": {0: ((0.7, 0.5, 0.3), (0.6, 0.4, 0.1)), 1: ((0.5, 0.5, 0.3), (0.4, 0.4, 0.1))}})
    for frame, expected in ((falling, "yes"), (flat, "no")):
        records = claims.quality_claims(frame, tables.quality_summary(frame))
        first = records[0]
        assert first["claim"].startswith("paper engine: mask AP and Boundary AP") and first["verdict"] == expected
        assert records[1]["verdict"] == "yes"  # boundary below mask, and it fell by 83 % vs 57 %
    # the ablation was not run: its claims are "not run", never "no"
    assert {r["verdict"] for r in records[2:]} == {"not run"}


def test_ablation_claims_read_the_operations():
    ops = {"dilation": (0.9, 0.8, 0.7), "erosion": (0.8, 0.7, 0.6), "opening": (0.99, 0.98, 0.97),
           "random_scale": (0.85, 0.75, 0.65), "shift": (0.6, 0.5, 0.4), "localization": (0.88, 0.8, 0.7),
           "approximation": (0.95, 0.85, 0.7), "class_flip": (0.95,) * 3, "deletion": (0.94,) * 3}
    frame = frame_of({op: {0: (m, m if op in ("class_flip", "deletion") else tuple(v - 0.1 for v in m))}
                      for op, m in ops.items()}, kind="ablation")
    found = {r["claim"]: r["verdict"] for r in claims._ablation_claims(tables.quality_summary(frame))}
    assert found["Erosion hurts more than dilation at every level (Table 7, Sec. 4.4: erosions affect boundary "
                 "fidelity most)"] == "yes"
    assert found["Random scale (dilate or erode at random) is milder than dilation and erosion alone (Table 7)"] == "no"
    assert found["Class flips and deletions leave Boundary AP equal to mask AP (they do not move boundaries)"] == "yes"
    assert found["Approximation is the mildest spatial noise at the low tier (Table 7: 34.7, the clean score)"] == "yes"


def test_engine_claims_on_a_dataset(shapes):
    effects = tables.engine_effects(shapes, ["paper", "legacy_v0"])
    assert set(effects["engine"]) == {"paper", "legacy_v0"} and (effects["mean IoU with clean"] < 1).all()
    found = {r["claim"]: r for r in claims.engine_claims(shapes, effects)}
    flip = next(r for c, r in found.items() if c.startswith("The class flip changes p_class"))
    assert flip["holds"] and flip["detail"].endswith("released v2: 0 flips")
    seeds = next(r for c, r in found.items() if c.startswith("Each seed draws"))
    assert seeds["holds"]


def test_the_flip_rate_claim_is_binomial_over_the_instances_with_a_sibling(shapes, monkeypatch):
    """Pooled over seeds to about 3,000 draws (at most 50 seeds); a flip rate other than p_class fails it; a dataset
    without sibling classes cannot test it ("not run")."""
    record = claims._flip_rate_claim(shapes, 0.05)
    eligible = int(record["detail"].split("; ")[1].split(" instances")[0].lstrip("("))
    draws = int(record["detail"].split(" of ")[1].split(" draws")[0])
    assert record["holds"] and draws == eligible * min(50, -(-claims.FLIP_TRIALS // eligible))
    assert claims._flip_rate_claim(shapes, 0.2)["holds"] is False  # 5 % observed is not 20 %
    lonely = {**shapes, "categories": [{**c, "supercategory": c["name"]} for c in shapes["categories"]]}
    assert claims._flip_rate_claim(lonely, 0.05)["holds"] is None


def test_missing_tiers_or_operations_make_claims_not_run():
    frame = frame_of({"paper": {0: ((0.7, np.nan, 0.3), (0.6, np.nan, 0.1))}}).dropna(subset=["mask_AP"])
    first = claims.quality_claims(frame, tables.quality_summary(frame))[0]
    assert first["verdict"] == "not run"  # mid was not run: "no" would be wrong
    ops = {"random_scale": (0.85, 0.75, 0.65), "approximation": (0.95, 0.85, 0.7)}  # no dilation or erosion
    summary = tables.quality_summary(frame_of({op: {0: (m, m)} for op, m in ops.items()}, kind="ablation"))
    found = {r["claim"].split(" (")[0]: r["verdict"] for r in claims._ablation_claims(summary)}
    assert found["Random scale"] == "not run" and found["Approximation is the mildest spatial noise at the low tier"] == "not run"


def test_quality_runs_are_cached_and_scored(shapes, tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path)
    variants = engine_variants(["paper"], ["low", "high"], [0]) + ablation_variants(["opening", "shift"], ["mid"], [0])
    frame = quality_table(shapes, variants, cache=cache)
    assert list(frame.columns) == ["kind", "name", "tier", "seed", *SCORES, *COUNTS] and len(frame) == 4
    by = frame.set_index(["name", "tier"])
    assert by.loc[("paper", "low"), "mask_AP"] > by.loc[("paper", "high"), "mask_AP"]
    assert by.loc[("opening", "mid"), "mask_AP"] > 0.9 > by.loc[("shift", "mid"), "mask_AP"]
    assert (frame["boundary_AP"] <= frame["mask_AP"] + 1e-9).all()
    monkeypatch.setattr("benchmark_n.quality.annotation_quality", lambda *a, **k: pytest.fail("recomputed a cached variant"))
    assert quality_table(shapes, variants, cache=cache).equals(frame)
    # a seed-free operation (opening) is scored once for every seed; a random one (shift) per seed
    more = quality_table(shapes, ablation_variants(["opening"], ["mid"], [0, 1, 2]), cache=cache)
    assert len(more) == 3 and more["mask_AP"].nunique() == 1


def test_variants_are_checked():
    with pytest.raises(ConfigError, match="unknown engine .v3.; valid engines: legacy_v0, paper"):
        Variant("engine", "v3", "low", 0)
    with pytest.raises(ConfigError, match="tier"):
        Variant("ablation", "erosion", "extreme", 0)
    assert Variant("engine", "paper", "hard", 0).tier == "high"


def test_sources_read_the_real_layout_and_name_what_is_missing(tmp_path):
    from benchmark_n.rehearsal import write_rehearsal_data

    cfg = Settings(dataset="coco2017", dataset_dir="coco", split="val")
    with pytest.raises(DataNotFoundError, match="instances_val2017.json"):
        load_annotations(cfg, tmp_path)
    assert write_rehearsal_data(tmp_path) == ["coco", "camus", "weights/grounding-dino-base"]
    data = load_annotations(cfg, tmp_path)
    first = data.dataset["images"][0]
    assert data.source == "coco2017" and data.image(first["id"]).shape == (first["height"], first["width"], 3)
    (tmp_path / "coco" / "val2017" / first["file_name"]).unlink()
    assert data.image(first["id"]).shape == (first["height"], first["width"], 3)  # a grey canvas for the annotations
    with pytest.raises(DataNotFoundError, match=first["file_name"]):
        data.image(first["id"], required=True)  # but a model needs the image
    shapes = load_annotations(Settings(dataset="shapes", n_images=3, shapes_seed=0, shapes_preset="annotation"))
    assert shapes.images.shape == (3, 480, 640, 3) and shapes.image(shapes.dataset["images"][2]["id"]) is not None


def test_annotation_quality_page_end_to_end(tmp_path, cache_dir):
    from benchmark_n.pages import AnnotationQuality

    settings = {"n_images": 6, "seeds": [0], "engines": ["paper"], "ablations": ["dilation", "erosion", "opening"]}
    page = AnnotationQuality("smoke", settings=settings, out_dir=tmp_path)
    assert page.run()["variants scored"].sum() == 12
    assert page.clean["mask_AP"] == pytest.approx(1.0) and page.ablation_table().index[0] == "clean (vs itself)"
    comparison = page.compare_with_paper()
    assert comparison["ours"].notna().sum() == 6 * 4 and "reduced" in comparison["ours_on"].iloc[0]
    assert comparison["diff"].isna().all()  # a trained model's share and the annotations' are not subtracted
    records = page.claims()
    assert (tmp_path / "claims.json").exists() and (tmp_path / "comparison.csv").exists()
    assert "not run" in set(records["verdict"])  # shift, localization, ... were not in the settings
    assert page.figure11() is not None and page.table7_ordering() is not None


def test_benchmark_files_page_writes_checks_and_compares(tmp_path, cache_dir):
    from benchmark_n.pages import BenchmarkFiles

    page = BenchmarkFiles("smoke", settings={"n_images": 4, "tiers": ["low", "high"]}, out_dir=tmp_path)
    table = page.write()
    assert len(table) == 4 and table["written now"].all() and (tmp_path / "benchmarks").is_dir()
    assert page.figure() is not None and (tmp_path / "benchmark_counts.png").exists()
    comparison = page.compare_with_paper()
    assert set(comparison["tier"]) == {"low", "mid", "high"} and comparison["diff"].abs().max() == 0  # mid: not written
    assert comparison["ours"].notna().sum() == 16
    assert set(page.claims()["verdict"]) == {"yes"}


def test_sams_weights_are_looked_for_under_the_pages_data_dir(tmp_path):
    from benchmark_n.model_pages import WeakAnnotations

    full = WeakAnnotations("full", data_dir=tmp_path, out_dir=tmp_path / "out")
    assert full.sam_checkpoint == str(tmp_path / "weights" / "sam_vit_h_4b8939.pth")
    mine = WeakAnnotations("full", data_dir=tmp_path, settings={"checkpoint": "/w/sam_vit_b_01ec64.pth"},
                           out_dir=tmp_path / "out")
    assert mine.sam_checkpoint == "/w/sam_vit_b_01ec64.pth"
    assert WeakAnnotations("smoke", out_dir=tmp_path / "out").sam_checkpoint is None  # GrabCut, tiny fine-tune


def test_sam_follows_the_pages_device_and_annotator_precision_setting(tmp_path):
    from benchmark_n.model_pages import WeakAnnotations

    full = WeakAnnotations("full", data_dir=tmp_path, device="cuda", out_dir=tmp_path / "out")
    assert full.cfg.annotator_precision == "auto"  # the profile's default, written out
    assert full.annotator_args == {"annotator": "sam", "checkpoint": full.sam_checkpoint, "precision": "auto",
                                   "device": "cuda"}
    official = WeakAnnotations("full", data_dir=tmp_path, device="cpu", settings={"annotator_precision": "fp32"},
                               out_dir=tmp_path / "out")
    assert official.annotator_args["precision"] == "fp32" and official.annotator_args["device"] == "cpu"
    weak = [s.noise for s in official.specs() if s.noise.kind in ("weak", "text")]
    assert weak and all(dict(n.options)["precision"] == "fp32" for n in weak)  # the runs' SAM: the same setting
    smoke = WeakAnnotations("smoke", device="cuda", settings={"annotator_precision": "bf16"}, out_dir=tmp_path)
    assert smoke.cfg.annotator_precision == "bf16" and smoke.annotator_args == {"annotator": "grabcut"}  # no SAM
    for profile in ("smoke", "full"):
        with pytest.raises(ConfigError, match="annotator_precision='fp16' is invalid; it must be one of auto, bf16, "
                                              "fp32"):
            WeakAnnotations(profile, settings={"annotator_precision": "fp16"}, out_dir=tmp_path)  # before any run


def test_the_text_prompt_setting_is_checked_before_anything_trains(tmp_path):
    from benchmark_n.model_pages import WeakAnnotations

    with pytest.raises(ConfigError, match=r"unknown text setting\(s\) \['model_dir'\] for detector stand_in"):
        WeakAnnotations("smoke", settings={"text": {"detector": "stand_in", "model_dir": "x"}},
                        out_dir=tmp_path).text_quality()
    with pytest.raises(ConfigError, match="grounding_dino, stand_in"):
        WeakAnnotations("smoke", settings={"text": {"detector": "owl_vit"}}, out_dir=tmp_path).text_quality()
    coco = WeakAnnotations("full", settings={"annotator": "grabcut", "finetune": {"backend": "tiny"},
                                             "text": {"detector": "stand_in"}}, out_dir=tmp_path)
    with pytest.raises(ConfigError, match="stand-in text detector trains on COCO-shapes"):
        coco.specs()  # refused before any run: the weak runs would come first


def test_pages_share_their_runs_and_only_engine_runs_log_losses(tmp_path):
    from benchmark_n.model_pages import (ClassNoise, Confidence, NoiseAblation, NoisyLosses, TrainEval,
                                         WeakAnnotations)

    specs = {cls.__name__: cls("smoke", out_dir=tmp_path / cls.__name__).specs()
             for cls in (TrainEval, NoiseAblation, ClassNoise, NoisyLosses, Confidence, WeakAnnotations)}
    every = [s for page in specs.values() for s in page]
    assert all(s.log_losses == (s.noise.kind == "engine") for s in every)
    assert {s.noise.kind for s in every if not s.log_losses} == {"clean", "ablation", "class_noise", "weak", "text"}
    trained_by_03 = set(specs["TrainEval"])
    assert set(specs["Confidence"]) == trained_by_03  # 07 reads 03's runs
    for page in ("NoiseAblation", "ClassNoise", "NoisyLosses", "WeakAnnotations"):
        clean = {s for s in specs[page] if s.noise.kind == "clean"}
        assert clean and clean <= trained_by_03, page  # one clean model for every page
    shared_engine = {s for s in specs["ClassNoise"] + specs["NoisyLosses"] if s.noise.kind == "engine" and s.loss == "ce"}
    assert shared_engine and shared_engine <= trained_by_03  # "40 % + Hard" and 06's CE run are 03's high runs


def test_lvis_runs_keep_300_detections_from_a_score_of_1e4_as_lvis_evaluates_them(tmp_path):
    from benchmark_n.model_pages import LVIS_DETECTIONS, TrainEval

    lvis = TrainEval("full", settings={"dataset": "lvis_v1", "dataset_dir": "lvis"}, out_dir=tmp_path)
    assert {k: lvis.training.hparams[k] for k in LVIS_DETECTIONS} == {"detections_per_image": 300,
                                                                      "score_threshold": 1e-4}
    coco = TrainEval("full", out_dir=tmp_path)
    assert "detections_per_image" not in coco.training.hparams  # COCO: Mask R-CNN's own 100 and 0.05
    mine = TrainEval("full", settings={"dataset": "lvis_v1", "hparams": {"score_threshold": 0.01}}, out_dir=tmp_path)
    assert mine.training.hparams["score_threshold"] == 0.01  # the settings win
