"""Benchmark-N's cost planner (``benchmark_n.cost``): the runs it plans are the runs the notebooks execute, with the
keys they log and the steps their code takes. Nothing here trains a model but 09's two one-epoch 32 px U-Nets."""
import json
import math

import pytest

from benchmark_n import cost, formats, maskrcnn, plans, quality, runs
from benchmark_n.pages import BenchmarkFiles
from benchmark_n.runs import CACHE_KIND
from shared import runlog
from shared.cache import code_fingerprint, params_key
from shared.errors import ConfigError
from shared.profiles import load_profiles, notebook_settings

NOTEBOOKS = [k for k in load_profiles("benchmark_n") if k != "common"]
COCO_TRAIN, COCO_VAL = 118_287, 5_000


def planned(notebook, profile="full", settings=None, data_dir="/data"):
    cfg = notebook_settings("benchmark_n", notebook, profile, settings)
    return cost.plan(notebook, cfg, {"profile": profile, "data_dir": data_dir, "settings": settings or {}})


def by_kind(planned_runs):
    out = {}
    for run in planned_runs:
        out.setdefault(run.kind, set()).add(run.identity)
    return {kind: len(ids) for kind, ids in out.items()}


def test_full_profile_plans_every_notebook():
    counts = {nb: by_kind(planned(nb)) for nb in NOTEBOOKS}
    assert counts["00_noise_engine"] == {}  # nothing with an identity: its noise draws are redone for each figure
    assert all(counts[nb] for nb in NOTEBOOKS if nb != "00_noise_engine")
    # the paper's protocol at one seed: 4 tiers (03), 7 operations x 3 levels + clean (04), 4 class-noise settings
    # + 3 combined tiers + clean (05), CE and SCE at 4 tiers (06; clean CE is 03's clean run), 08: 3 COCO-WAN tiers,
    # the text prompts and clean, 2 fine-tunings, 4 prompts + 4 figure panels + Table 14's noisy zero-shot
    assert counts["03_train_eval"] == counts["07_confidence"] == {CACHE_KIND: 4}
    assert counts["04_noise_ablation"] == {CACHE_KIND: 22}
    assert counts["05_class_noise"] == {CACHE_KIND: 8}
    assert counts["06_lnl"] == {CACHE_KIND: 8}
    assert counts["08_coco_wan"] == {CACHE_KIND: 5, runs.FINETUNE_KIND: 2, plans.WEAK_KIND: 9, plans.TEXT_KIND: 1}
    assert counts["09_camus_ef"] == {plans.CAMUS_KIND: 2}
    assert counts["02_benchmark_files"] == {plans.FILE_KIND: 6}


def test_shared_runs_have_equal_identities_across_notebooks():
    ids = {nb: {r.identity for r in planned(nb) if r.kind == CACHE_KIND} for nb in plans.MODEL_SPECS}
    assert ids["03_train_eval"] == ids["07_confidence"]
    clean = {r.identity for r in planned("03_train_eval") if r.label.startswith("clean")}
    assert len(clean) == 1 and all(clean <= ids[nb] for nb in ("04_noise_ablation", "05_class_noise", "06_lnl",
                                                              "08_coco_wan"))
    # another data folder is another dataset: no identity in common
    assert not ids["03_train_eval"] & {r.identity for r in planned("03_train_eval", data_dir="/elsewhere")}


@pytest.mark.parametrize("notebook, kind", [("03_train_eval", CACHE_KIND), ("04_noise_ablation", CACHE_KIND),
                                            ("09_camus_ef", plans.CAMUS_KIND)])
def test_doubling_the_seeds_doubles_the_seeded_runs(notebook, kind):
    one, two = (by_kind(planned(notebook, settings={"seeds": seeds}))[kind] for seeds in ([0], [0, 1]))
    assert two == 2 * one


def test_mask_rcnn_steps_follow_the_1x_schedule():
    per_epoch = math.ceil(COCO_TRAIN / 16)  # mmdet's total batch 16 on one device
    steps = {r.label: r.steps for r in planned("03_train_eval")}
    assert steps["clean, seed 0"] == 12 * per_epoch + math.ceil(COCO_VAL / 16)
    # an engine tier also logs its per-instance losses after epochs 4, 8 and 12: a pass over the train images each
    assert steps["legacy_v0 high, seed 0"] == 12 * per_epoch + 3 * per_epoch + math.ceil(COCO_VAL / 16)
    short = {"epochs": 1, "max_iters": 3, "batch_size": 2, "loss_epochs": [1]}
    run = next(r for r in planned("03_train_eval", settings={"hparams": short}) if "high" in r.label)
    train = next(w for w in run.work if w.workload is not None and w.workload.phase == "train")
    assert (train.steps, train.workload.batch, train.workload.shape) == (3, 2, (3, 800, 1333))
    losses = next(w for w in run.work if "per-instance" in w.what)
    assert losses.steps == math.ceil(COCO_TRAIN / 2)  # the epoch cut short by max_iters still logs its losses


def test_mask_rcnn_passes_are_priced_as_the_code_runs_them():
    """The per-instance losses run the heads on the annotated boxes (instance_losses: no RPN, no post-processing),
    and the val predictions carry detections_per_image: the mask head runs on that many boxes per image."""
    run = next(r for r in planned("03_train_eval", settings={"hparams": {"detections_per_image": 10}})
               if "high" in r.label)
    losses = next(w.workload for w in run.work if "per-instance" in w.what)
    val = next(w.workload for w in run.work if w.what == "val predictions")
    assert (losses.phase, losses.opts["own_boxes"], val.phase, val.opts["own_boxes"]) == ("infer", 1, "infer", 0)
    assert val.opts["detections"] == 10 and "detections=10" in val.key
    default = next(r for r in planned("03_train_eval") if "high" in r.label)
    assert next(w.workload for w in default.work if w.what == "val predictions").key \
        == "maskrcnn/maskrcnn_r50_fpn/infer/b16/3x800x1333/fp32"  # the paper's 100 detections: the default key


def test_mask_rcnn_workloads_and_keys_follow_the_device_parameter(monkeypatch):
    from shared.workloads import Workload

    monkeypatch.setattr(maskrcnn.torch.cuda, "is_available", lambda: False)  # "auto" plans for this CPU machine
    cfg = notebook_settings("benchmark_n", "03_train_eval", "full")

    def plan(device=None, hparams=None):
        settings = {"hparams": {**cfg.hparams, **hparams}} if hparams else None
        params = {"data_dir": "/data", **({"device": device} if device else {})}
        return cost.plan("03_train_eval", notebook_settings("benchmark_n", "03_train_eval", "full", settings), params)

    def precisions(planned_runs):
        return {w.workload.precision for r in planned_runs for w in r.work if w.workload is not None}

    cuda, cpu, auto = plan("cuda"), plan("cpu"), plan()
    assert precisions(cuda) == {"bf16"} and precisions(cpu) == precisions(auto) == {"fp32"}
    train = next(w.workload for w in cuda[0].work if w.workload is not None and w.workload.phase == "train")
    assert isinstance(train, Workload)
    assert train.key == "maskrcnn/maskrcnn_r50_fpn/train/b16/3x800x1333/bf16"  # 80 classes: the default
    # bf16 runs are other runs (other keys); an fp32 run is the same wherever it is planned
    assert not {r.identity for r in cuda} & {r.identity for r in cpu}
    fp32_on_cuda = plan("cuda", {"precision": "fp32"})
    assert [r.identity for r in cpu] == [r.identity for r in auto] == [r.identity for r in fp32_on_cuda]
    assert precisions(fp32_on_cuda) == {"fp32"}
    assert precisions(plan("cpu", {"precision": "bf16"})) == {"bf16"}
    monkeypatch.setattr(maskrcnn.torch.cuda, "is_available", lambda: True)  # "auto" on a machine with a GPU
    assert [r.identity for r in plan()] == [r.identity for r in cuda] and precisions(plan()) == {"bf16"}
    with pytest.raises(ConfigError, match="never fp16"):  # bf16 needs no GradScaler; fp16 would, and is not used
        cost.workload("maskrcnn", "maskrcnn_r50_fpn", "train", 16, (3, 800, 1333), "fp16")


def _sam_work(planned_runs):
    """kind -> {precision: SAM embeddings}"""
    out = {}
    for run in planned_runs:
        for w in run.work:
            if w.workload is not None and w.workload.arch == "sam_vit_h":
                counts = out.setdefault(run.kind, {})
                counts[w.workload.precision] = counts.get(w.workload.precision, 0) + w.steps
    return out


def _ids(planned_runs, *kinds):
    return [r.identity for r in planned_runs if not kinds or r.kind in kinds]


def test_sam_embeddings_and_keys_are_bf16_where_the_notebook_runs_on_cuda(monkeypatch):
    from shared.workloads import FULL_PROFILE_WORKLOADS

    monkeypatch.setattr(maskrcnn.torch.cuda, "is_available", lambda: False)  # "auto" plans for this CPU machine
    fp32_maskrcnn = {**notebook_settings("benchmark_n", "08_coco_wan", "full").hparams, "precision": "fp32"}

    def plan(device=None, precision=None):
        settings = {"hparams": fp32_maskrcnn, **({"annotator_precision": precision} if precision else {})}
        cfg = notebook_settings("benchmark_n", "08_coco_wan", "full", settings)  # Mask R-CNN's keys alone would
        return cost.plan("08_coco_wan", cfg, {"data_dir": "/data", **({"device": device} if device else {})})

    cuda, cpu, auto = plan("cuda"), plan("cpu"), plan()
    on_cuda, on_cpu = _sam_work(cuda), _sam_work(cpu)
    # the COCO-WAN labels of the val images (Table 4, Fig. 14, Table 14's zero-shot), of the text prompts' boxes and
    # of the weak-label runs' train images in bf16; Table 14's fine-tuning in fp32 (sam_finetune does not autocast)
    assert set(on_cuda[plans.WEAK_KIND]) == set(on_cuda[plans.TEXT_KIND]) == set(on_cuda[CACHE_KIND]) == {"bf16"}
    assert set(on_cuda[runs.FINETUNE_KIND]) == {"fp32"}
    assert on_cuda[CACHE_KIND]["bf16"] == 3 * COCO_TRAIN + COCO_TRAIN  # 3 COCO-WAN tiers and the text prompts' boxes
    assert _sam_work(auto) == on_cpu and all(set(counts) == {"fp32"} for counts in on_cpu.values())
    assert {k: sum(c.values()) for k, c in on_cuda.items()} == {k: sum(c.values()) for k, c in on_cpu.items()}
    # keys: what SAM labelled in bf16 is another label set and another run; the rest is the same on every device
    sam_made = {r.identity for r in cpu if r.kind in (plans.WEAK_KIND, plans.TEXT_KIND)
                or (r.kind == CACHE_KIND and not r.label.startswith("clean"))}
    assert len(sam_made) == 9 + 1 + 3 + 1  # label sets (Table 4, Fig. 14, Table 14), text, 3 tiers, text runs
    assert not sam_made & set(_ids(cuda))  # each keyed apart on CUDA
    assert set(_ids(cuda)) & set(_ids(cpu)) == set(_ids(cpu)) - sam_made  # the clean runs, the fine-tunings
    assert len(set(_ids(cuda)) - set(_ids(cpu))) == len(sam_made)
    assert _ids(auto) == _ids(cpu)
    # annotator_precision fp32 on CUDA: fp32 embeddings and the fp32 keys (those of a CPU plan: as before the setting)
    official = plan("cuda", "fp32")
    assert _ids(official) == _ids(cpu) and all(set(c) == {"fp32"} for c in _sam_work(official).values())
    # bf16 on the CPU: the keys and workloads of a CUDA plan with auto
    forced = plan("cpu", "bf16")
    assert _ids(forced) == _ids(cuda) and _sam_work(forced) == on_cuda
    monkeypatch.setattr(maskrcnn.torch.cuda, "is_available", lambda: True)  # "auto" on a machine with a GPU
    assert _sam_work(plan(None)) == on_cuda and _ids(plan(None)) == _ids(cuda)
    with pytest.raises(ConfigError, match="annotator_precision='fp16' is invalid; it must be one of auto, bf16"):
        plan("cuda", "fp16")
    bf16 = next(w.workload for r in cuda for w in r.work if w.workload is not None and w.workload.precision == "bf16")
    assert bf16.key == "vit_infer/sam_vit_h/infer/b1/3x1024x1024/bf16"
    assert {bf16.key, bf16.key.replace("bf16", "fp32")} <= {w.key for w in FULL_PROFILE_WORKLOADS}


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_planned_sam_precision_is_the_one_its_key_names(monkeypatch, device):
    """The planner prices a label set or run in bf16 exactly where its key says bf16 (one resolution for both)."""
    monkeypatch.setattr(maskrcnn.torch.cuda, "is_available", lambda: False)
    cfg = notebook_settings("benchmark_n", "08_coco_wan", "full")
    recipe = plans.recipe(cfg, "/data")
    training = plans.training(cfg, recipe, device)
    planned_runs = {r.identity: r for r in cost.plan("08_coco_wan", cfg, {"data_dir": "/data", "device": device})}
    keyed = {}  # identity -> the SAM precision its key names (None: none, fp32)
    for label_set in plans.weak_label_sets(cfg):
        params = plans.weak_params(cfg, "/data", recipe, **label_set, device=device)
        keyed[plans.logged_key(plans.WEAK_KIND, params)] = params["annotator"].get("precision")
    for seed in cfg.seeds:
        params = plans.text_params(cfg, "/data", recipe, seed, device=device)
        keyed[plans.logged_key(plans.TEXT_KIND, params)] = params["noise"]["options"].get("precision")
    for spec in plans.model_specs("08_coco_wan", cfg, "/data"):
        if spec.noise.sam:
            params = runs._params(recipe, spec, training, runs.data_names(recipe))
            keyed[runs.run_key(recipe, spec, training, runs.data_names(recipe))] = \
                params["spec"]["noise"]["options"].get("precision")
    assert len(keyed) == 9 + 1 + 4 and set(keyed) <= set(planned_runs)
    for identity, named in keyed.items():
        sam = {w.workload.precision for w in planned_runs[identity].work
               if w.workload is not None and w.workload.arch == "sam_vit_h"}
        assert sam == {"bf16" if named else "fp32"} and named in (None, "bf16")
    assert {named for named in keyed.values()} == {"bf16" if device == "cuda" else None}


def test_a_weak_noise_is_priced_in_its_own_precision(monkeypatch):
    monkeypatch.setattr(maskrcnn.torch.cuda, "is_available", lambda: False)
    cfg = notebook_settings("benchmark_n", "08_coco_wan", "full")
    recipe = plans.recipe(cfg, "/data")
    n = cost.sizes(recipe)

    def priced(options, device):
        noise = runs.TrainNoise("weak", tier="easy", options=options)
        return [w.workload and w.workload.precision for w in cost.noise_work(noise, cfg, recipe, n, device)]

    assert priced({"annotator": "sam", "precision": "fp32"}, "cuda") == ["fp32"]
    assert priced({"annotator": "sam"}, "cuda") == priced({"annotator": "sam", "precision": "bf16"}, "cpu") == ["bf16"]
    assert priced({"annotator": "sam"}, "cpu") == ["fp32"]
    assert priced({"annotator": "grabcut"}, "cuda") == [None]
    with pytest.raises(ConfigError, match="must be one of"):
        priced({"annotator": "sam", "precision": "fp16"}, "cuda")


@pytest.mark.parametrize("device, named", [("cuda", "bf16"), ("cpu", None)])
def test_the_label_sets_page_08_logs_are_the_planned_ones(tmp_path, monkeypatch, cache_dir, device, named):
    """Page 08 run with SAM (a stand-in that records how it is loaded) on ``device``: it loads SAM on that device with
    the annotator_precision setting, and logs the label sets under the planned keys, bf16 named on CUDA only."""
    from benchmark_n import model_pages, wan
    from benchmark_n.model_pages import WeakAnnotations

    monkeypatch.setattr(maskrcnn.torch.cuda, "is_available", lambda: False)  # device cuda is a name here
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    loads = []

    def load_sam(checkpoint=None, model_type=None, device=None, precision="auto"):
        loads.append((checkpoint, device, precision))
        return wan.GrabCutAnnotator()  # SAM's masks do not matter here: how the page asks for them and logs them

    monkeypatch.setattr(wan, "load_sam", load_sam)
    monkeypatch.setattr(model_pages, "finetune_grid", lambda *args, **kwargs: [])  # trains on the page's device
    settings = {"annotator": "sam", "n_train": 8, "n_val": 3, "example_images": 2,
                "prompts": ["box", "point_center_bbox"], "text": {"detector": "stand_in", "hparams": {"epochs": 1}}}
    page = WeakAnnotations("smoke", device=device, settings=settings, out_dir=tmp_path / "out")
    page.prompt_quality()  # Table 4, with the text prompt's row
    page.figure()
    page.table14()
    cfg = notebook_settings("benchmark_n", "08_coco_wan", "smoke", settings)
    assert len(loads) == 1 + 1 + 2 + 2 and set(loads) == {(plans.sam_checkpoint(cfg), device, "auto")}
    planned_runs = cost.plan("08_coco_wan", cfg, {"data_dir": None, "device": device})
    expected = {(r.kind, r.identity) for r in planned_runs if r.kind in (plans.WEAK_KIND, plans.TEXT_KIND)}
    # 2 prompts, 2 figure panels, Table 14's noisy zero-shot (its clean one is Table 4's box), the text prompt
    assert _logged(log) == expected and len(expected) == 2 + 2 + 1 + 1
    recipe = plans.recipe(cfg)
    params = [plans.weak_params(cfg, None, recipe, **s, device=device) for s in plans.weak_label_sets(cfg)]
    assert {p["annotator"].get("precision") for p in params} == {named}
    # fp32 keys are those of annotator_precision fp32 on any device: the keys of before the setting
    fp32 = {plans.logged_key(plans.WEAK_KIND, plans.weak_params(
        notebook_settings("benchmark_n", "08_coco_wan", "smoke", {**settings, "annotator_precision": "fp32"}),
        None, recipe, **s, device="cuda")) for s in plans.weak_label_sets(cfg)}
    assert (fp32 <= {key for _, key in expected}) == (named is None)
    # the model runs: the planned keys are run_grid's for the page's specs and training (on its device)
    cached = {r.identity for r in planned_runs if r.kind == CACHE_KIND}
    assert cached == {runs.run_key(page.recipe, spec, page.training) for spec in page.specs()}


class _Images:
    def __init__(self, sizes):
        self.entries = [{"width": w, "height": h} for w, h in sizes]

    def __len__(self):
        return len(self.entries)


@pytest.mark.parametrize("landscape, portrait, batch", [(37, 0, 8), (16, 0, 8), (13, 6, 4)])
def test_iterations_are_the_epoch_batches_of_maskrcnn(landscape, portrait, batch):
    torch = pytest.importorskip("torch")
    images = _Images([(640, 480)] * landscape + [(480, 640)] * portrait)
    real = len(maskrcnn.epoch_batches(images, batch, 0.5, torch.Generator().manual_seed(0)))
    hp = maskrcnn.check_hparams({"batch_size": batch, "epochs": 2})
    total, per_epoch, last = cost.maskrcnn_iterations(hp, len(images))
    if portrait == 0:  # one orientation: exact
        assert (per_epoch, total, last) == (real, 2 * real, 2)
    else:  # orientation groups can add one batch per epoch
        assert per_epoch <= real <= per_epoch + 1


def test_tiny_steps_and_camus_steps():
    tiny = notebook_settings("benchmark_n", "03_train_eval", "smoke")
    n = cost.Sizes(112, 40, None, None, 6, (96, 96))
    spec = plans.spec(tiny, plans.noise(tiny, "high"), 0)
    work = cost.train_work(spec, plans.training(tiny, plans.recipe(tiny)), n)
    # 8 epochs of ceil(112 / 8) steps; losses after epochs 1, 3, 6 and 8, 7 batches of 16 each; 3 val batches
    assert [w.steps for w in work] == [8 * 14, 4 * 7, 3]
    # the no-grad passes are priced by the images they hold (shared.cost.Work.rows), the training steps as full
    assert [w.rows for w in work] == [None, 4 * 112, 40]
    camus_runs = planned("09_camus_ef")
    # CAMUS: 500 patients, 375 train (750 frames), 15 epochs of batch 8, 125 test patients in batches of 32
    assert [w.steps for w in camus_runs[0].work if w.workload is not None] == [15 * math.ceil(750 / 8),
                                                                                math.ceil(250 / 32)]
    assert [w.rows for w in camus_runs[0].work if w.workload is not None] == [None, 250]


def test_model_run_identities_are_the_cache_keys(monkeypatch):
    cfg = notebook_settings("benchmark_n", "05_class_noise", "smoke", {"n_train": 8, "n_val": 4})
    recipe, training = plans.recipe(cfg), plans.training(cfg, plans.recipe(cfg))
    expected = {params_key(CACHE_KIND, runs._params(recipe, spec, training), code_fingerprint(*runs._code(training)))
                for spec in plans.class_noise_specs(cfg)}
    assert {r.identity for r in cost.plan("05_class_noise", cfg, {"data_dir": None})} == expected
    tuning = plans.tuning(notebook_settings("benchmark_n", "08_coco_wan", "smoke", {"n_train": 8, "n_val": 4}))
    key = runs.finetune_key(recipe, runs.TrainNoise(), 0, tuning)
    assert key == params_key(runs.FINETUNE_KIND, runs.finetune_params(recipe, runs.TrainNoise(), 0, tuning),
                             code_fingerprint(*runs.finetune_code()))


def test_quality_identities_are_the_cache_keys():
    cfg = notebook_settings("benchmark_n", "01_annotation_quality", "smoke",
                            {"n_images": 3, "engines": ["paper"], "ablations": ["dilation", "shift"]})
    from benchmark_n.sources import load_annotations

    data = quality.fingerprint(load_annotations(cfg).dataset)
    code = code_fingerprint(quality.score_variant)
    def key(variant):
        return params_key(quality.CACHE_KIND, {"data": data, "variant": variant, "dilation_ratio": 0.02}, code)

    expected = {params_key(quality.CACHE_KIND, {"data": data, "variant": "clean", "dilation_ratio": 0.02},
                           code_fingerprint(quality._clean_scores))}
    for tier in ("low", "mid", "high"):
        expected |= {key({"kind": "engine", "name": "paper", "tier": tier, "seed": s}) for s in (0, 1)}
        expected |= {key({"kind": "ablation", "name": "shift", "tier": tier, "seed": s}) for s in (0, 1)}
        expected.add(key({"kind": "ablation", "name": "dilation", "tier": tier, "seed": None}))  # seed-free
    assert {r.identity for r in cost.plan("01_annotation_quality", cfg, {"data_dir": None})} == expected


def _logged(path):
    return {(e["kind"], e["key"]) for e in runlog.read_log(path)}


def test_logged_runs_of_02_and_09_are_the_planned_ones(tmp_path, monkeypatch):
    from benchmark_n.model_pages import CamusEF

    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    settings = {"n_images": 3, "engines": ["paper"], "tiers": ["low", "high"]}
    BenchmarkFiles("smoke", settings=settings, out_dir=tmp_path / "02").write()
    camus_settings = {"n_patients": 8, "size": 32, "seeds": [0], "hparams": {"epochs": 1, "width": 4}}
    CamusEF("smoke", settings=camus_settings, out_dir=tmp_path / "09").run()
    expected = {(r.kind, r.identity) for nb, s in (("02_benchmark_files", settings), ("09_camus_ef", camus_settings))
                for r in planned(nb, "smoke", s, data_dir=None)}
    assert _logged(log) == expected and len(expected) == 4
    log.unlink()
    BenchmarkFiles("smoke", settings=settings, out_dir=tmp_path / "02").write()  # kept: logged as loaded, same keys
    assert {e["built"] for e in runlog.read_log(log)} == {False}
    assert _logged(log) <= expected


def test_proposed_workloads_keep_the_key_format():
    from shared.workloads import Workload

    real = cost.workload("maskrcnn", "maskrcnn_r50_fpn", "train", 16, (3, 800, 1333), num_classes=8)
    assert isinstance(real, Workload)
    proposed = cost.ProposedWorkload("maskrcnn", "maskrcnn_r50_fpn", "train", 16, (3, 800, 1333), "fp32",
                                     (("num_classes", 8),))
    assert proposed.key == real.key
    assert isinstance(cost.workload("tiny_unet", "unet3_w8", "train", 8, (3, 96, 96)), cost.ProposedWorkload)


def test_bad_settings_raise_config_errors():
    with pytest.raises(ConfigError, match="formats.SIZES"):
        planned("03_train_eval", settings={"dataset": "viper", "dataset_dir": "viper"})
    with pytest.raises(ConfigError, match="notebook"):
        cost.plan("10_nothing", notebook_settings("benchmark_n", "03_train_eval", "full"), {})
    with pytest.raises(ConfigError, match="text-prompt detector"):
        planned("08_coco_wan", settings={"text": {"detector": "owl"}})


def test_plans_are_json_labelled_and_sized():
    for run in planned("08_coco_wan"):
        assert run.label and run.work and all(w.examples >= 0 and w.steps >= 0 for w in run.work)
        json.dumps([w.what for w in run.work])


def test_a_real_layout_on_disk_is_planned_at_its_own_size_the_release_size_otherwise(tmp_path):
    """The rehearsal's COCO folder (a few images in COCO 2017's layout) is what its runs read: planned at the
    release's 118,287 train images its Mask R-CNN loss passes and val predictions were priced ~6,000x too high."""
    from benchmark_n.rehearsal import write_rehearsal_data

    write_rehearsal_data(tmp_path)
    cfg = notebook_settings("benchmark_n", "03_train_eval", "full")
    on_disk = cost.sizes(plans.recipe(cfg, str(tmp_path)))
    released = cost.sizes(plans.recipe(cfg, str(tmp_path / "elsewhere")))
    train = json.loads(formats.annotation_path(tmp_path / "coco", "coco2017", "train").read_text())
    assert (on_disk.train, on_disk.train_annotations) == (len(train["images"]), len(train["annotations"]))
    assert on_disk.categories == len(train["categories"]) and 0 < on_disk.val < 100
    assert (released.train, released.val) == (118_287, 5_000)


def test_an_unreadable_annotation_file_is_named_not_a_json_traceback(tmp_path):
    from benchmark_n.rehearsal import write_rehearsal_data
    from shared.errors import DataFormatError

    write_rehearsal_data(tmp_path)
    path = formats.annotation_path(tmp_path / "coco", "coco2017", "train")
    path.write_text('{"images": [')  # a download cut short
    cfg = notebook_settings("benchmark_n", "03_train_eval", "full")
    with pytest.raises(DataFormatError, match="instances_train2017.json is not a COCO annotation file"):
        cost.sizes(plans.recipe(cfg, str(tmp_path)))
    path.write_text('{"images": []}')
    with pytest.raises(DataFormatError, match="needs 'images' and 'annotations' lists"):
        cost.sizes(plans.recipe(cfg, str(tmp_path)))
