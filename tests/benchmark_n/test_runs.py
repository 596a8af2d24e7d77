"""Model-level runs (``benchmark_n.runs``) and their tables and claims (``benchmark_n.model_results``)."""
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import benchmark_n.runs as runs_module
from benchmark_n import sam_finetune, tiny_seg
from benchmark_n import model_results as R
from benchmark_n.runs import (DataRecipe, FineTuning, RunResult, RunSpec, Training, TrainNoise, evaluate, finetune_grid,
                              first_images, load_pair, run_grid)
from benchmark_n.coco import ann_to_rle, rle_json
from shared.cache import ArtifactCache
from shared.errors import ConfigError
from shared.report import compare_with_paper, reported

TINY = DataRecipe(n_train=8, n_val=4, image_size=64)


def test_train_noise_is_checked_and_named():
    assert TrainNoise().label == "clean"
    assert TrainNoise("engine", "legacy_v0", "hard").tier == "high"
    assert TrainNoise("class_noise", "uniform", rate=0.5).label == "uniform 50 %"
    for bad in (dict(kind="blur"), dict(kind="engine", name="v9", tier="low"), dict(kind="ablation", name="x"),
                dict(kind="class_noise", name="uniform", rate=1.5)):
        with pytest.raises(ConfigError):
            TrainNoise(**bad)


def test_training_noise_changes_what_it_says():
    train, _ = load_pair(TINY)
    flipped = TrainNoise("class_noise", "uniform", rate=1.0).draw(train, 0)
    assert [a["segmentation"] for a in flipped["annotations"]] == [a["segmentation"] for a in train.dataset["annotations"]]
    assert any(a["category_id"] != b["category_id"] for a, b in zip(flipped["annotations"], train.dataset["annotations"]))
    assert TrainNoise().draw(train, 0) is train.dataset


def _as_detections(dataset):
    sizes = {im["id"]: (im["height"], im["width"]) for im in dataset["images"]}
    return [{"image_id": a["image_id"], "category_id": a["category_id"], "score": 0.9,
             "segmentation": rle_json(ann_to_rle(a, *sizes[a["image_id"]])), "bbox": a["bbox"]}
            for a in dataset["annotations"]]


def test_evaluate_scores_the_ground_truth_perfectly_and_a_wrong_class_only_per_class():
    _, val = load_pair(TINY)
    perfect = evaluate(val.dataset, _as_detections(val.dataset))
    assert all(perfect[k] == pytest.approx(1.0) for k in ("mask_AP", "box_AP", "boundary_AP", "mask_AP_agnostic"))
    assert perfect["mean_confidence"] == pytest.approx(0.9) and perfect["confident_share"] == 100
    wrong = [{**d, "category_id": 1 + d["category_id"] % 6} for d in _as_detections(val.dataset)]
    scores = evaluate(val.dataset, wrong)
    assert scores["mask_AP"] == 0 and scores["mask_AP_agnostic"] == pytest.approx(1.0)


def test_an_lvis_run_is_scored_by_lvis_rules_and_its_class_agnostic_scores_by_cocos(tmp_path):
    from benchmark_n import formats
    from benchmark_n.lvis_eval import lvis_ap
    from benchmark_n.shapes import generate_shapes, preset

    shapes = generate_shapes(6, 1, **preset("model", height=64, width=64))
    val = formats.load_split(formats.write_layout(tmp_path, "lvis_v1", {"val": shapes}), "lvis_v1", "val")
    dets = _as_detections(val)
    image = val["images"][0]["id"]
    here = {a["category_id"] for a in val["annotations"] if a["image_id"] == image}
    absent = min({a["category_id"] for a in val["annotations"]} - here)  # annotated elsewhere, unverified here
    unverified = dets + [{**dets[0], "image_id": image, "category_id": absent, "score": 1.0,
                          "segmentation": next(d for d in dets if d["image_id"] == image)["segmentation"]}]
    scores = evaluate(val, unverified, federated=True)
    assert scores["mask_AP"] == pytest.approx(1.0) == lvis_ap(val, unverified)["AP"]  # never verified: not counted
    assert scores["box_AP"] == pytest.approx(1.0) and scores["boundary_AP"] == pytest.approx(1.0)
    assert evaluate(val, unverified)["mask_AP"] < 1  # COCO's rules count it as a false positive
    assert scores["mask_AP_agnostic"] == evaluate(val, unverified)["mask_AP_agnostic"]
    assert "lvis_v1" in runs_module.FEDERATED


def test_run_grid_trains_once_and_reads_the_cache_after(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    cache = ArtifactCache(tmp_path / "cache")
    training = Training("tiny", {"epochs": 1})
    specs = [RunSpec(TrainNoise(), 0), RunSpec(TrainNoise("engine", "paper", "high"), 0), RunSpec(TrainNoise(), 0)]
    first = run_grid(TINY, specs, training, cache=cache)
    assert len(first) == 2 and all(0 <= r.scores["mask_AP"] <= 1 for r in first)
    monkeypatch.setattr(tiny_seg, "fit_predict", lambda *a, **k: pytest.fail("a cached run was trained again"))
    again = run_grid(TINY, specs[:2], training, cache=cache)
    assert [r.scores for r in again] == [r.scores for r in first]


def test_a_library_upgrade_trains_the_run_again(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    cache, training, spec = ArtifactCache(tmp_path), Training("tiny", {"epochs": 1}), RunSpec(TrainNoise(), 0)
    first = run_grid(TINY, [spec], training, cache=cache)[0]
    assert torch.__version__.startswith(runs_module.library_versions()["torch"])  # "2.14.1" of "2.14.1+cu130"
    assert runs_module.libraries(spec, training) == runs_module.LIBRARIES  # the tiny backend adds none
    assert "torchvision" in runs_module.libraries(spec, Training("torchvision"))
    assert "transformers" in runs_module.libraries(RunSpec(TrainNoise("text", "grounding_dino")), training)
    versions = runs_module.library_versions
    monkeypatch.setattr(runs_module, "library_versions", lambda names: {**versions(names), "pycocotools": "99.0"})
    calls, fit_predict = [], tiny_seg.fit_predict
    monkeypatch.setattr(tiny_seg, "fit_predict", lambda *a, **k: calls.append(1) or fit_predict(*a, **k))
    again = run_grid(TINY, [spec], training, cache=cache)[0]
    assert calls == [1] and again.scores == first.scores  # trained again (same code, same numbers)


def test_a_runs_key_names_weights_by_what_they_hold_not_where_they_lie(tmp_path):
    for folder in (tmp_path / "a" / "grounding-dino-base", tmp_path / "b" / "grounding-dino-base"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"model_type": "grounding-dino"}')
        (folder / "model.safetensors").write_bytes(b"w" * 100)

    def noise(folder, **extra):
        return TrainNoise("text", "grounding_dino", options={"detector_options": {"model_dir": str(folder), **extra},
                                                             "checkpoint": str(folder / "model.safetensors")})

    moved = noise(tmp_path / "a" / "grounding-dino-base"), noise(tmp_path / "b" / "grounding-dino-base", device="cuda")
    assert moved[0] != moved[1] and moved[0].key() == moved[1].key()  # another mount or device: the same run
    key = moved[0].key()["options"]
    assert key["detector_options"]["model_dir"]["weights_bytes"] == 100 and key["checkpoint"]["bytes"] == 100
    (tmp_path / "b" / "grounding-dino-base" / "model.safetensors").write_bytes(b"w" * 120)  # -tiny in -base's place
    assert moved[1].key() != moved[0].key()
    weights = tmp_path / "a" / "grounding-dino-base" / "model.safetensors"
    assert Training("torchvision", {"backbone_weights": str(weights)}).key()["hparams"]["backbone_weights"] == {
        "name": "model.safetensors", "bytes": 100}


def test_run_grid_on_an_executor_gives_the_same_run(tmp_path):
    torch.set_num_threads(1)
    spec, training = RunSpec(TrainNoise("engine", "legacy_v0", "low"), 1), Training("tiny", {"epochs": 1})
    here = run_grid(TINY, [spec], training, cache=ArtifactCache(tmp_path / "a"))[0]
    jobs = run_grid(TINY, [spec], training, cache=ArtifactCache(tmp_path / "b"), executor={"kind": "local", "jobs": 1})[0]
    assert jobs.scores == here.scores and jobs.detections == here.detections


def test_mask_rcnn_precision_keys_bf16_runs_apart_and_leaves_fp32_keys_as_they_were(monkeypatch):
    from benchmark_n import maskrcnn
    from shared.cache import params_key

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    before = {k: v for k, v in maskrcnn.DEFAULTS.items() if k != "precision"}  # the hparams before the setting
    cpu = Training("torchvision", {}, "cpu")
    assert cpu.key() == {"backend": "torchvision", "hparams": before, "dilation_ratio": 0.02}
    # the default Mask R-CNN training's key as it was before precision existed (every CPU run's cache stays valid)
    assert params_key(runs_module.CACHE_KIND, cpu.key()) == "b453cc4117547dde"
    fp32 = [Training("torchvision", hp, device) for hp, device in
            (({}, "auto"), ({"precision": "auto"}, "cpu"), ({"precision": "fp32"}, "cpu"),
             ({"precision": "fp32"}, "cuda"))]
    assert all(t.key() == cpu.key() for t in fp32)
    bf16 = [Training("torchvision", hp, device) for hp, device in
            (({}, "cuda"), ({"precision": "bf16"}, "cpu"), ({"precision": "auto"}, "cuda:0"))]
    assert all(t.key() == {**cpu.key(), "hparams": {**before, "precision": "bf16"}} for t in bf16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert Training("torchvision", {}, "auto").key() == bf16[0].key()  # "auto" on a machine with CUDA
    spec = RunSpec(TrainNoise(), 0)
    recipe = DataRecipe("coco2017", dataset_dir="coco", data_dir="/data")
    names = runs_module.data_names(recipe)  # the planner's stand-ins: no data needed
    assert runs_module.run_key(recipe, spec, cpu, names) != runs_module.run_key(recipe, spec, bf16[0], names)
    assert runs_module.run_key(recipe, spec, cpu, names) == runs_module.run_key(recipe, spec, fp32[3], names)


def test_executor_jobs_train_the_precision_keyed_where_they_are_submitted(monkeypatch):
    """A CPU login node keys device "auto" as fp32; its jobs on GPU nodes must train and store that run, not bf16."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    tiny = Training("tiny", {"epochs": 1})
    slurm = SimpleNamespace(kind="slurm")
    assert runs_module.jobs_training(tiny, slurm) is tiny
    with pytest.warns(UserWarning, match="device cuda"):
        auto = runs_module.jobs_training(Training("torchvision", {}, "auto"), slurm)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # local jobs run here, where "auto" resolves as it does in the key
        assert runs_module.jobs_training(Training("torchvision", {}, "auto"), SimpleNamespace(kind="local")) == auto
    assert auto.hparams == {"precision": "fp32"} and auto.key() == Training("torchvision", {}, "auto").key()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what the job's machine would resolve
    assert auto.key() == Training("torchvision", {}, "cpu").key()  # still the submitter's key
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the device is named
        cuda = runs_module.jobs_training(Training("torchvision", {}, "cuda"), slurm)
    assert cuda.hparams == {"precision": "bf16"} and cuda.key() == Training("torchvision", {}, "cuda").key()


def _sam_noise(kind="weak", **options):
    base = {"annotator": "sam", "checkpoint": "/w/sam_vit_h_4b8939.pth", **options}
    if kind == "text":
        return TrainNoise("text", "stand_in", options={**base, "score_threshold": 0.0,
                                                       "detector_options": {"hparams": {"epochs": 1}}})
    return TrainNoise("weak", tier="easy", options=base)


@pytest.mark.parametrize("kind", ["weak", "text"])
def test_sam_precision_keys_bf16_noise_apart_and_leaves_fp32_and_grabcut_keys_as_they_were(monkeypatch, kind):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    before = _sam_noise(kind)  # the options of a SAM noise before the precision option existed
    fp32 = [before.key("cpu"), before.key("auto"), before.key(None), _sam_noise(kind, precision="auto").key("cpu"),
            _sam_noise(kind, precision="fp32").key("cpu"), _sam_noise(kind, precision="fp32").key("cuda")]
    assert all(key == fp32[0] for key in fp32) and "precision" not in fp32[0]["options"]
    assert fp32[0]["options"]["checkpoint"] == {"name": "sam_vit_h_4b8939.pth", "bytes": None}
    bf16 = [before.key("cuda"), before.key("cuda:1"), _sam_noise(kind, precision="auto").key(torch.device("cuda")),
            _sam_noise(kind, precision="bf16").key("cpu")]
    assert all(key == {**fp32[0], "options": {**fp32[0]["options"], "precision": "bf16"}} for key in bf16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # "auto" on a machine with a GPU
    assert before.key() == before.key("auto") == bf16[0] and before.key("cpu") == fp32[0]
    # GrabCut: no precision, the same key on every device
    grabcut = TrainNoise("weak", tier="easy", options={"annotator": "grabcut"})
    assert grabcut.key("cuda") == grabcut.key("cpu") == grabcut.key() and grabcut.sam_precision("cuda") is None
    assert grabcut.pinned("cuda") is grabcut
    # the run keys: the noise keyed against the training's device, the rest as before
    recipe = DataRecipe("coco2017", dataset_dir="coco", data_dir="/data")
    names = runs_module.data_names(recipe)
    spec = RunSpec(before, 0)

    def run_key(noise, device):
        return runs_module.run_key(recipe, RunSpec(noise, 0), Training("tiny", {}, device), names)

    assert run_key(before, "cpu") == run_key(_sam_noise(kind, precision="fp32"), "cuda") == \
        run_key(_sam_noise(kind, precision="auto"), "cpu")
    assert run_key(before, "cuda") == run_key(_sam_noise(kind, precision="bf16"), "cpu") != run_key(before, "cpu")
    assert runs_module._params(recipe, spec, Training("tiny", {}, "cpu"), names)["spec"]["noise"] == fp32[0]
    with pytest.raises(ConfigError, match="must be one of auto, bf16, fp32"):
        _sam_noise(kind, precision="fp16").key("cpu")


def test_sam_draws_on_the_training_device_in_the_noise_precision(monkeypatch, cache_dir):
    from benchmark_n import wan

    loads = []

    def load_sam(checkpoint=None, model_type=None, device=None, precision="auto"):
        loads.append((device, precision))
        return wan.GrabCutAnnotator()

    monkeypatch.setattr(wan, "load_sam", load_sam)
    train, _ = load_pair(TINY)
    for kind in ("weak", "text"):
        loads.clear()
        _sam_noise(kind, precision="bf16").draw(train, 0, TINY, device="cuda")
        assert loads == [("cuda", "bf16")], kind
        _sam_noise(kind).draw(train, 0, TINY)  # no device: load_sam's default (auto), as the key's default
        assert loads[-1] == (None, "auto") and len(loads) == 2
    loads.clear()
    TrainNoise("weak", tier="easy", options={"annotator": "grabcut"}).draw(train, 0, device="cuda")  # no device there
    assert loads == []
    torch.set_num_threads(1)
    run_grid(TINY, [RunSpec(_sam_noise(), 0)], Training("tiny", {"epochs": 1}, "cpu"))
    assert loads == [("cpu", "auto")]  # the run's device (a run keyed on "cpu" draws on the CPU)


def test_executor_jobs_draw_sams_labels_in_the_precision_keyed_where_they_are_submitted(monkeypatch, cache_dir):
    """A CPU login node keys a SAM noise's "auto" as fp32 on device "auto"; its jobs on GPU nodes must label in fp32."""
    from benchmark_n import wan

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    specs = [RunSpec(_sam_noise(), 0), RunSpec(_sam_noise("text"), 0), RunSpec(TrainNoise(), 0)]
    for slurm in ("slurm", {"kind": "slurm", "partition": "gpu"}, SimpleNamespace(kind="slurm")):
        with pytest.warns(UserWarning, match="annotator_precision"):
            pinned = runs_module.jobs_specs(specs, "auto", slurm)
        with pytest.warns(UserWarning, match="device cuda"):  # the backend's warning reads a mapping too
            runs_module.jobs_training(Training("torchvision", {}, "auto"), slurm)
    assert [dict(s.noise.options).get("precision") for s in pinned] == ["fp32", "fp32", None]
    assert pinned[2] == specs[2]  # no SAM: as it was
    keys = [s.noise.key("auto") for s in specs]
    assert [s.noise.key("auto") for s in pinned] == keys
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what the job's machine would resolve
    assert [s.noise.key("auto") for s in pinned] == keys != [s.noise.key("auto") for s in specs]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # local jobs run here; a named device resolves the same everywhere
        assert runs_module.jobs_specs(specs, "auto", {"kind": "local"}) == pinned
        on_gpu = runs_module.jobs_specs(specs, "cuda", "slurm")
        assert runs_module.jobs_specs(specs[2:], "auto", "slurm") == specs[2:]  # no SAM: nothing to warn of
    assert [dict(s.noise.options).get("precision") for s in on_gpu] == ["bf16", "bf16", None]
    assert [s.noise.key("cuda") for s in on_gpu] == [s.noise.key("cuda") for s in specs]
    # run_grid's jobs get the pinned noise and store the run under the key looked up here
    loads = []

    def load_sam(checkpoint=None, model_type=None, device=None, precision="auto"):
        loads.append((device, precision))
        return wan.GrabCutAnnotator()

    monkeypatch.setattr(wan, "load_sam", load_sam)
    torch.set_num_threads(1)
    cache = ArtifactCache(cache_dir)
    spec, training = RunSpec(_sam_noise(), 0), Training("tiny", {"epochs": 1}, "auto")
    run_grid(TINY, [spec], training, cache=cache, executor={"kind": "debug"})
    assert loads == [("auto", "fp32")]  # drawn once, in the job, with the precision resolved here
    run_grid(TINY, [spec], training, cache=cache)
    assert len(loads) == 1  # read from the cache: the job stored it under this key


def test_unknown_backend_or_hyperparameter_is_refused():
    with pytest.raises(ConfigError, match="backend"):
        Training("detectron")
    with pytest.raises(ConfigError, match="epoch"):
        Training("tiny", {"epoch": 3}).key()


# ------------------------------------------------------------------------------------------------ model_results
def _run(kind="clean", name="", tier="", rate=0.0, seed=0, loss="ce", **scores):
    base = {k: 0.5 for k in runs_module.SCORE_KEYS}
    return RunResult(RunSpec(TrainNoise(kind, name, tier, rate), seed, loss), {**base, **scores}, [], [], [])


def _summary(*runs):
    return R.summarise(R.run_records(runs))


def test_records_are_percent_and_summaries_average_the_seeds():
    summary = _summary(_run(mask_AP=0.6, seed=0), _run(mask_AP=0.4, seed=1),
                       _run("engine", "legacy_v0", "high", mask_AP=0.3))
    clean = summary[summary["tier"] == "clean"].iloc[0]
    assert clean["mask_AP"] == pytest.approx(50) and clean["seeds"] == 2 and clean["mask_AP_sd"] == pytest.approx(np.std([60, 40], ddof=1))
    assert R.retained(summary, "mask_AP").tolist() == pytest.approx([100, 60])


def test_paper_retained_reproduces_the_papers_percentages():
    t3 = reported("benchmark_n", "table3")
    shares = R.paper_retained(t3[(t3["dataset"] == "COCO-N") & (t3["model"] == "M-RCNN") & (t3["backbone"] == "R-50")])
    assert shares.set_index("tier")["value"].to_dict() == {"low": 80.6, "mid": 71.7, "high": 64.5}  # Sec. 4.2


def test_train_eval_claims_hold_fail_and_are_not_run():
    holds = _summary(_run(mask_AP=0.6, boundary_AP=0.4, box_AP=0.6),
                     _run("engine", "legacy_v0", "high", mask_AP=0.45, boundary_AP=0.2, box_AP=0.55))
    verdicts = [r["verdict"] for r in R.train_eval_claims(holds)]
    assert verdicts == ["yes", "yes", "not run", "yes"]
    fails = _summary(_run(mask_AP=0.6, boundary_AP=0.4, box_AP=0.6),
                     _run("engine", "legacy_v0", "high", mask_AP=0.3, boundary_AP=0.3, box_AP=0.2))
    assert [r["verdict"] for r in R.train_eval_claims(fails)] == ["yes", "no", "not run", "no"]


def test_class_agnostic_recovery_claim():
    summary = _summary(_run(mask_AP=0.6, mask_AP_agnostic=0.62), _run("class_noise", "uniform", rate=0.5,
                                                                       mask_AP=0.4, mask_AP_agnostic=0.58))
    first = R.class_noise_claims(summary)[0]
    assert first["verdict"] == "yes" and "kept 93.5 % class-agnostically vs 66.7 % per class" in first["detail"]
    summary = _summary(_run(mask_AP=0.6, mask_AP_agnostic=0.62), _run("class_noise", "uniform", rate=0.5,
                                                                       mask_AP=0.4, mask_AP_agnostic=0.4))
    assert R.class_noise_claims(summary)[0]["verdict"] == "no"
    assert R.class_noise_claims(summary)[1]["verdict"] == "not run"
    both = _summary(_run(mask_AP_agnostic=0.6), _run("class_noise", "uniform", rate=0.5, mask_AP_agnostic=0.5),
                    _run("engine", "legacy_v0", "high", mask_AP_agnostic=0.4))
    assert R.class_noise_claims(both)[1]["verdict"] == "yes"


def test_confidence_claim_reads_the_mean_score_above_one_half():
    summary = _summary(_run(mean_confidence=0.8, confident_share=60), _run("engine", "paper", "high",
                                                                          mean_confidence=0.7, confident_share=30))
    assert R.confidence_claims(summary, pd.DataFrame(), overlapping=False)[0]["verdict"] == "yes"
    nothing = _summary(_run(mean_confidence=0.8, confident_share=60), _run("engine", "paper", "high",
                                                                          mean_confidence=float("nan"), confident_share=0))
    assert R.confidence_claims(nothing, pd.DataFrame(), overlapping=False)[0]["verdict"] == "yes"
    assert R.confidence_claims(nothing, pd.DataFrame(), overlapping=False)[1]["verdict"] == "not run"


def test_sce_gain_of_the_paper_and_ours():
    gain = R.paper_sce_gain(reported("benchmark_n", "table13")).set_index(["tier", "metric"])["value"]
    assert gain[("high", "sce_minus_ce_mask_AP")] == pytest.approx(0.4)
    assert gain[("clean", "sce_minus_ce_mask_AP")] == pytest.approx(-2.1)
    ours = R.sce_gain(_summary(_run("engine", "legacy_v0", "high", mask_AP=0.3),
                               _run("engine", "legacy_v0", "high", loss="sce", mask_AP=0.32)))
    assert ours.set_index("metric").loc["sce_minus_ce_mask_AP", "value"] == pytest.approx(2.0)


def test_separability_is_the_auroc_of_the_noisy_instances_losses():
    losses = pd.DataFrame({"epoch": 1, "class_loss": [3.0, 2.5, 0.1, 0.2], "mask_loss": [0.1, 0.3, 0.3, 0.1],
                           "class_flipped": [True, True, False, False], "spatially_noised": [True, False, True, False]})
    row = R.separability(losses).iloc[0]
    assert row["class_loss_AUROC (class flipped)"] == 1.0 and row["mask_loss_AUROC (spatially noised)"] == 0.5
    records = R.loss_claims(_summary(_run()), R.separability(losses))
    assert [r["verdict"] for r in records] == ["yes", "yes", "not run"]


def test_conflicting_classes_counts_instances_detected_as_two_classes():
    _, val = load_pair(TINY)
    dets = _as_detections(val.dataset)
    doubled = dets + [{**dets[0], "category_id": 1 + dets[0]["category_id"] % 6}]
    runs = [RunResult(RunSpec(TrainNoise(), 0), {}, [], dets, []),
            RunResult(RunSpec(TrainNoise("engine", "paper", "high"), 0), {}, [], doubled, [])]
    table = R.conflicting_classes(runs, val.dataset).set_index("tier")["conflicting %"]
    assert table["clean"] == 0 and table["high"] == pytest.approx(100 / len(val.dataset["annotations"]))


def test_wan_claims_read_the_prompt_table_the_runs_and_table14s_rows():
    quality = pd.DataFrame({"prompt": ["box", "box_noisy", "point_center_bbox", "point_random_in_mask", "text"],
                            "mask_AP": [0.8, 0.7, 0.6, 0.65, 0.3]})
    summary = _summary(_run(mask_AP=0.6, box_AP=0.6), _run("weak", tier="easy", mask_AP=0.5),
                       _run("weak", tier="medium", mask_AP=0.4), _run("text", "stand_in", mask_AP=0.35, box_AP=0.38))
    sam = pd.DataFrame({"method": ["zero-shot", "zero-shot", "fine-tune", "fine-tune", "fine-tune", "fine-tune"],
                        "annotations": ["clean", "high", "clean", "high", "clean", "high"],
                        "mean_iou": [0.8, 0.6, 0.84, 0.78, 0.86, 0.70], "mean_dice": [0.85, 0.7, 0.9, 0.8, 0.9, 0.8],
                        "det_f1_50": [1, 0.9, 1, 1, 1, 1]})
    claims = R.wan_claims(quality, summary, sam)
    # fine-tuned: mean of two seeds 85 -> 74 (-11) beats zero-shot's 80 -> 60 (-20); text labels: 35 < 40 < 50 and
    # mask AP 60 -> 35 (-42 %) but box AP 60 -> 38 (-37 %): both more than a third
    assert [r["verdict"] for r in claims] == ["yes", "yes", "no", "yes", "yes", "yes", "yes", "yes", "yes"]
    assert claims[1]["detail"] == "mask AP of the labels: text 30.0, point 60.0, box 80.0"
    assert claims[4]["detail"] == "mask AP: text 35.0, box 50.0, point 40.0"
    assert claims[8]["detail"] == "mask AP 60.0 -> 35.0 (-42 %), box AP 60.0 -> 38.0 (-37 %)"
    assert "fine-tuned 85.0 -> 74.0 (-11.0), zero-shot 80.0" in claims[7]["detail"]
    assert R.wan_claims(quality.iloc[:4], summary, sam)[1]["verdict"] == "not run"  # no text row: never "no"
    mild = _summary(_run(mask_AP=0.6, box_AP=0.6), _run("text", "stand_in", mask_AP=0.35, box_AP=0.45))
    assert R.wan_claims(quality, mild, sam)[8]["verdict"] == "no"  # box AP lost only a quarter
    named = R.wan_claims(quality, summary, sam.assign(annotator=["grabcut"] * 2 + ["tiny-box-finetuned"] * 4))
    assert named[6]["detail"] == "mean IoU tiny-box-finetuned 85.0, grabcut 80.0"
    worse = sam.assign(mean_iou=[0.8, 0.6, 0.84, 0.5, 0.86, 0.5])  # noisy masks now cost the fine-tuned model more
    assert R.wan_claims(quality, summary, worse)[7]["verdict"] == "no"
    long = R.table14_long(sam).set_index(["method", "annotations", "metric"])["value"]
    assert long[("zero-shot", "high", "iou")] == 60.0 and long[("fine-tune", "clean", "f1")] == 90.0
    assert R.table14_table(sam).loc[("fine-tune", "high"), "mean_iou"] == 74.0
    empty = R.wan_claims(quality.iloc[:0], _summary(_run()), sam.iloc[:0])
    assert [r["verdict"] for r in empty] == ["not run"] * 9


def test_tables_4_and_5_as_shares_of_the_clean_model_paper_and_ours():
    table4, table5 = reported("benchmark_n", "table4"), reported("benchmark_n", "table5")
    paper4 = R.paper_table4_retained(table4).set_index(["prompt", "prompt_noise", "metric"])["value"]
    assert paper4[("text", "clean", "mask_AP_retained")] == 63.6  # 22.0 / 34.6
    assert paper4[("box", "noisy", "boundary_AP_retained")] == 77.2  # 15.9 / 20.6
    assert "original labels" not in paper4.index.get_level_values("prompt")
    paper5 = R.paper_table5_retained(table5).set_index(["backbone", "metric"])["value"]
    assert paper5[("R-50", "box_AP_retained")] == 52.7 and paper5[("Swin-S", "mask_AP_retained")] == 61.6
    summary = _summary(_run(mask_AP=0.5, boundary_AP=0.4, box_AP=0.6), _run("weak", tier="easy", mask_AP=0.45),
                       _run("text", "stand_in", mask_AP=0.3, boundary_AP=0.1, box_AP=0.45))
    ours4 = R.ours_table4_retained(summary, "test")
    values = ours4.dropna(subset=["value"]).set_index(["prompt", "metric"])["value"].to_dict()
    assert values == {("box", "mask_AP_retained"): 90.0, ("box", "boundary_AP_retained"): 125.0,
                      ("text", "mask_AP_retained"): 60.0, ("text", "boundary_AP_retained"): 25.0}
    table = compare_with_paper(ours4, R.paper_table4_retained(table4), ["prompt", "prompt_noise"])
    assert len(table) == 10 and table["ours"].notna().sum() == 4  # the point and noisy-prompt cells: no run of ours
    gaps = table[table["ours"].isna()].set_index(["prompt", "prompt_noise"])["ours_on"]
    assert gaps[("point", "clean")].iloc[0].startswith("not run: no model trained on point-prompted labels")
    assert (gaps.loc[("box", "noisy")] == R.NOISY_PROMPT_NOT_RUN).all()
    nothing = compare_with_paper(R.ours_table4_retained(_summary(_run()), "test"), R.paper_table4_retained(table4),
                                 ["prompt", "prompt_noise"])
    assert len(nothing) == 10 and nothing["ours"].isna().all() and nothing["ours_on"].str.startswith("not run").all()
    ours5 = R.ours_table5_retained(summary, "test")
    table = compare_with_paper(ours5, R.paper_table5_retained(table5), ["model", "backbone", "labels"]).set_index(
        ["backbone", "metric"])
    assert table.loc[("R-50", "mask_AP_retained"), "diff"] == pytest.approx(60.0 - 61.1)
    assert table.loc[("R-50", "box_AP_retained"), "ours"] == 75.0
    assert pd.isna(table.loc[("Swin-B", "box_AP_retained"), "ours"])  # ours is set beside the R-50 row only
    change = R.text_prompt_change(table5, summary, "ours (tiny)")
    # the text: "approximately 48 % in R-50 and 37.3 % in Swin-S"; the cells give R-50 box -47.3 %, Swin-S mask -38.4 %
    assert change.loc["R-50", "box_AP"] == -47.3 and change.loc["Swin-S", "mask_AP"] == -38.4
    assert change.loc["ours (tiny)"].tolist() == [-40.0, -25.0]
    assert R.text_prompt_change(table5, _summary(_run()), "ours").loc["ours"].isna().all()
    no_text = compare_with_paper(R.ours_table5_retained(_summary(_run()), "test"), R.paper_table5_retained(table5),
                                 ["model", "backbone", "labels"])
    assert len(no_text) == 8 and no_text["ours"].isna().all()  # the paper's cells still shown, beside "not run"
    assert no_text.loc[no_text["backbone"] == "R-50", "ours_on"].str.startswith("not run").all()


def test_text_prompted_training_noise_is_keyed_checked_and_drawn_from_the_detector(monkeypatch):
    monkeypatch.setenv("NOISY_PROGRESS", "0")
    torch.set_num_threads(1)
    noise = TrainNoise("text", "stand_in", options={"annotator": "grabcut", "score_threshold": 0.0,
                                                     "detector_options": {"hparams": {"epochs": 3}}})
    assert (noise.label, noise.tier) == ("text", "text")
    assert dict(noise.options)["detector_options"] == '{"hparams": {"epochs": 3}}'  # hashable, and part of the key
    assert len({RunSpec(noise), RunSpec(noise)}) == 1
    with pytest.raises(ConfigError, match=r"unknown text-prompt option\(s\) \['box_threshold'\]"):
        TrainNoise("text", "stand_in", options={"box_threshold": 0.3})
    with pytest.raises(ConfigError, match="text name"):
        TrainNoise("text", "owl_vit")
    train, _ = load_pair(TINY)
    with pytest.raises(ConfigError, match="pass recipe"):
        noise.draw(train, 0)
    drawn = noise.draw(train, 0, TINY)
    assert drawn["annotations"] and all(a["noise"]["spatial"] == ["weak_text"] for a in drawn["annotations"])
    assert {im["id"] for im in drawn["images"]} == {im["id"] for im in train.dataset["images"]}
    assert noise.draw(train, 0, TINY) == drawn  # same seed, same labels


def test_finetune_grid_scores_clean_val_boxes_caches_each_run_and_cuts_the_train_images(tmp_path, monkeypatch):
    recipe = DataRecipe(n_train=12, n_val=6)
    cache = ArtifactCache(tmp_path)
    tuning = FineTuning("tiny", {"epochs": 2}, max_images=8)
    noises = {"clean": TrainNoise(), "high": TrainNoise("engine", "legacy_v0", "high")}
    records = finetune_grid(recipe, noises, [0], tuning, cache=cache)
    assert [r["annotations"] for r in records] == ["clean", "high"]
    val = load_pair(recipe)[1]
    assert all(r["n_gt"] == len(val.dataset["annotations"]) and 0 < r["mean_iou"] <= r["mean_dice"] <= 1
               for r in records)
    monkeypatch.setattr(sam_finetune, "finetune", lambda *a, **k: pytest.fail("trained again"))
    assert finetune_grid(recipe, noises, [0], tuning, cache=cache) == records
    train = load_pair(recipe)[0].dataset
    cut = first_images(train, 8)
    assert [im["id"] for im in cut["images"]] == [im["id"] for im in train["images"][:8]]
    assert {a["image_id"] for a in cut["annotations"]} <= {im["id"] for im in cut["images"]}
    assert len(cut["annotations"]) == sum(a["image_id"] in {im["id"] for im in cut["images"]}
                                          for a in train["annotations"])
    with pytest.raises(ConfigError, match="fine-tuning backend"):
        FineTuning("sam2")
    with pytest.raises(ConfigError, match="max_images"):
        FineTuning(max_images=0)


def test_a_viper_run_is_compared_with_table2_cell_by_cell():
    paper = pd.concat([reported("benchmark_n", t) for t in R.TIER_TABLES["VIPER-N"]], ignore_index=True)
    tiers = sorted(set(paper["tier"]))
    runs = [_run(mask_AP=0.158, mask_AP_S=0.06)] + [_run("engine", "legacy_v0", t, mask_AP=0.1) for t in tiers
                                                       if t != "clean"]
    ours = R.ours_tier_long(_summary(*runs), R.DATASET_NAMES["viper"], sorted(set(paper["metric"])), absolute=True,
                            ours_on="test")
    table = compare_with_paper(ours, paper, ["dataset", "model", "backbone", "tier"])
    assert len(table) == len(paper) and table["ours"].notna().all()  # every Table 2 cell has ours beside it
    clean = table[table["tier"] == "clean"].set_index("metric")
    assert clean.loc["mask_AP", "diff"] == pytest.approx(0) and clean.loc["mask_AP_S", "diff"] == pytest.approx(0)


def test_a_finetune_override_updates_the_profiles_setting_key_by_key_and_pins_the_weights_file(tmp_path):
    full = {"backend": "sam", "hparams": {"epochs": 1}, "max_images": 5000}
    tuning = FineTuning.from_settings({"hparams": {"epochs": 2}}, full, checkpoint=str(tmp_path / "sam_vit_b.pth"))
    assert (tuning.backend, dict(tuning.hparams), tuning.max_images) == ("sam", {"epochs": 2}, 5000)
    assert FineTuning.from_settings({"backend": "tiny", "hparams": None}, full, checkpoint="x.pth").checkpoint is None
    with pytest.raises(ConfigError, match="unknown finetune setting.*checkpoint"):
        FineTuning.from_settings({"checkpoint": "x.pth"}, full)
    assert tuning.key()["checkpoint"] == {"name": "sam_vit_b.pth", "bytes": None}  # not there (yet)
    (tmp_path / "sam_vit_b.pth").write_bytes(b"12345")
    replaced = tuning.key()
    assert replaced["checkpoint"]["bytes"] == 5 and replaced["hparams"]["lr"] == sam_finetune.SAM_DEFAULTS["lr"]
    with pytest.raises(ConfigError, match="lr must be a number"):
        sam_finetune.finetune(load_pair(DataRecipe(n_train=4, n_val=2))[0], "tiny", {"lr": "1e-5"})
