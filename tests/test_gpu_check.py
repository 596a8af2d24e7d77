"""shared.workloads (the step kinds of the full profile, their keys and FLOPs) and shared.gpu_check (timing them).

The command-line runs go through subprocesses, as on a GPU box: ``python -m shared.gpu_check --budget 60 --device
cpu`` must finish in about 90 s and write a calibration that ``load_calibration`` reads back; the bare-box run
blocks every package a GPU box lacks (sklearn, scipy, matplotlib, open_clip, papermill, cleanlab, pycocotools, ...;
tqdm for the project's own imports: transformers itself needs it).
"""
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from shared.errors import ConfigError
from shared.paths import PAPERS, REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_torch_thread")

W = pytest.importorskip("shared.workloads")


def _env(tmp_path, **extra):
    env = dict(os.environ, NOISY_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO_ROOT),
               OMP_NUM_THREADS="1", NOISY_PROGRESS="0")
    env.update(extra)
    return env


# ------------------------------------------------------------------------------------------------ workloads
def test_full_profile_keys_round_trip():
    keys = [w.key for w in W.FULL_PROFILE_WORKLOADS]
    assert len(keys) == len(set(keys)), "every workload of the full profile has its own key"
    for w in W.FULL_PROFILE_WORKLOADS:
        assert W.Workload.from_key(w.key) == w
        assert W.Workload.from_dict(yaml.safe_load(yaml.safe_dump(w.to_dict()))) == w
        assert W.Workload.from_dict(json.loads(json.dumps(w.to_dict()))).key == w.key
        assert w.key in W.FULL_PROFILE_STEPS_HINT and w.key in W.FULL_PROFILE_USES


def test_key_format_and_option_normalisation():
    w = W.Workload("cifar_resnet", "resnet32", "train", 256, (3, 32, 32), "fp32",
                   {"optimizer": "adam", "views": 2, "augment": "weak_strong", "num_classes": 10})
    assert w.key == "cifar_resnet/resnet32/train/b256/3x32x32/fp32/augment=weak_strong,optimizer=adam,views=2"
    assert w.opts["num_classes"] == 10 and w.opts["nograd"] == 0  # defaults filled, not in the key
    same = W.Workload("cifar_resnet", "resnet32", "train", 256, [3, 32, 32], "fp32",
                      (("views", 2), ("augment", "weak_strong"), ("optimizer", "adam")))
    assert same == w and hash(same) == hash(w)
    mlp = W.Workload("tabular_mlp", "mlp", "train", 128, (108,), options={"hidden": [42, 503], "dropout": 0.5})
    assert mlp.key == "tabular_mlp/mlp/train/b128/108/fp32/dropout=0.5,hidden=42:503"
    assert W.Workload.from_key(mlp.key).opts["hidden"] == (42, 503)
    one = W.Workload.from_key("tabular_mlp/mlp/train/b8/10/fp32/hidden=7")
    assert one.opts["hidden"] == (7,)
    flag = W.Workload.from_key("cifar_resnet/resnet20/train/b64/3x32x32/fp16/channels_last=true")
    assert flag.opts["channels_last"] is True and flag.key.endswith("channels_last=true")


@pytest.mark.parametrize("make, words", [
    (lambda: W.Workload("resnet", "resnet20", "train", 8, (3, 32, 32)), ["workload family", "cifar_resnet",
                                                                          "text_encoder", "maskrcnn"]),
    (lambda: W.Workload("cifar_resnet", "resnet99", "train", 8, (3, 32, 32)), ["arch", "resnet20", "wrn28_10"]),
    (lambda: W.Workload("cifar_resnet", "resnet20", "train", 8, (3, 32, 32), options={"view": 2}),
     ["option", "views", "nograd"]),
    (lambda: W.Workload("cifar_resnet", "resnet20", "train", 8, (3, 32, 32), options={"augment": "strong"}),
     ["augment", "weak_strong", "crop_flip"]),
    (lambda: W.Workload("cifar_resnet", "resnet20", "train", 0, (3, 32, 32)), ["batch"]),
    (lambda: W.Workload("cifar_resnet", "resnet20", "train", 8, (3, 32, 32), "fp8"), ["precision", "bf16"]),
    (lambda: W.Workload("cifar_resnet", "resnet20", "infer", 8, (3, 32, 32), options={"views": 2}), ["infer"]),
    (lambda: W.Workload("vit_infer", "deit3_small", "train", 8, (3, 224, 224)), ["phase", "infer"]),
    (lambda: W.Workload("text_encoder", "roberta-base", "train", 8, (128,), options={"task": "seq2seq"}), ["T5"]),
    (lambda: W.Workload.from_key("cifar_resnet/resnet20/train/256/3x32x32/fp32"), ["b<int>"]),
    (lambda: W.Workload.from_key("cifar_resnet/resnet20/train/b8/3x32x32"), ["family/arch/phase"]),
    (lambda: W.Workload.from_key("cifar_resnet/resnet20/train/b8/3x32x32/fp32/views=two"), ["int"]),
])
def test_bad_workloads_name_the_valid_choices(make, words):
    with pytest.raises(ConfigError) as info:
        make()
    for word in words:
        assert word in str(info.value)


# ------------------------------------------------------------------------------------------------ FLOPs
def test_resnet_train_flops_are_three_forwards(cache_dir):
    train = W.Workload("cifar_resnet", "resnet20", "train", 16, (3, 32, 32), "fp32", {"augment": "crop_flip"})
    forward = W.Workload("cifar_resnet", "resnet20", "infer", 16, (3, 32, 32))
    ratio = W.flops(train) / W.flops(forward)
    assert 2.7 <= ratio <= 3.3, ratio  # backward = 2 x forward, less the first convolution's input gradient
    assert 2 * 40e6 * 16 < W.flops(forward) < 2 * 42e6 * 16  # ResNet-20: 40.8M multiply-adds per 32x32 image


def test_flops_scale_linearly_with_batch(cache_dir):
    for w in (W.Workload("cifar_resnet", "densenet_bc", "train", 4, (3, 32, 32), "fp32",
                         {"optimizer": "adam", "augment": "weak", "views": 2, "nograd": 1}),
              W.Workload("text_encoder", "all-minilm-l6-v2", "infer", 2, (32,), options={"task": "embed"})):
        assert W.flops(w.replace(batch=8)) == pytest.approx(W.flops(w) * 8 / w.batch, rel=1e-6)


def test_views_and_nograd_passes_add_up(cache_dir):
    base = W.Workload("cifar_resnet", "resnet32", "train", 8, (3, 32, 32), "fp32", {"optimizer": "adam"})
    infer = W.flops(W.Workload("cifar_resnet", "resnet32", "infer", 8, (3, 32, 32)))
    two = W.flops(base.replace(options={"views": 2, "nograd": 1}))
    assert two == pytest.approx(2 * W.flops(base) + infer, rel=1e-6)


def test_mlp_flops_closed_form(cache_dir):
    b, d, h, k = 16, 20, 32, 5
    infer = W.Workload("tabular_mlp", "mlp", "infer", b, (d,), options={"hidden": (h,), "num_classes": k})
    forward = 2 * b * (d * h + h * k)
    assert W.flops(infer) == forward
    # backward: every weight gradient (= forward) and every input gradient but the first layer's (no grad of x)
    assert W.flops(infer.replace(phase="train")) == 3 * forward - 2 * b * d * h


def test_flops_are_cached_by_key(cache_dir):
    w = W.Workload("tabular_mlp", "mlp", "infer", 4, (3,), options={"hidden": (2,), "num_classes": 2})
    assert W.flops(w) == 2 * 4 * (3 * 2 + 2 * 2)
    table = json.loads(W.flops_cache_path().read_text())
    assert table["version"] == W.FLOPS_VERSION and table["flops"][w.key] == W.flops(w)
    assert W.flops_cache_path().parent == cache_dir


def test_operators_grow_with_the_network_and_its_backward_not_with_the_batch(cache_dir):
    """A step's operator count (the floor of shared.cost's estimates) is a property of the graph: the same at any
    batch, larger with depth, and a training step (forward + backward) dispatches more than a forward."""
    r20 = W.Workload("cifar_resnet", "resnet20", "train", 8, (3, 32, 32), "fp32", {"optimizer": "adam"})
    r32 = r20.replace(arch="resnet32")
    assert W.count_ops(r20) == W.count_ops(r20.replace(batch=64)) == W.count_ops(r20, "cpu", batch=2)
    assert W.count_ops(r32) > W.count_ops(r20) > W.count_ops(r20.replace(phase="infer", options={})) > 0
    # each basic block (two convolutions, two norms, a ReLU in between and one after the sum) adds the same operators
    per_block = (W.count_ops(r32) - W.count_ops(r20)) / 6  # ResNet-32 has 15 blocks, ResNet-20 9
    assert per_block == int(per_block) and 15 <= per_block <= 60
    assert W.ops(r20) == W.count_ops(r20)  # cached by key, like the FLOPs
    assert json.loads(W.ops_cache_path().read_text())["ops"][r20.key] == W.ops(r20)


def test_dispatch_time_per_operator_is_measured_on_the_device(cache_dir):
    from shared.gpu_check import DISPATCH_WORKLOAD, measure_dispatch

    d = measure_dispatch("cpu", repeats=20)
    assert d["ops"] == W.count_ops(DISPATCH_WORKLOAD, "cpu") and d["workload"] == DISPATCH_WORKLOAD.key
    assert 1e-8 < d["s_per_op"] < 1e-3 and d["s_per_op"] == pytest.approx(d["step_s"] / d["ops"], rel=0.01)


def test_flops_do_not_depend_on_the_precision(cache_dir, monkeypatch):
    """A bf16 channels-last step is the fp32 step's FLOPs, counted once for both: no second count for another
    precision or memory layout."""
    fp32 = W.Workload("cifar_resnet", "resnet20", "train", 8, (3, 32, 32), "fp32")
    bf16 = W.Workload("cifar_resnet", "resnet20", "train", 8, (3, 32, 32), "bf16", {"channels_last": True})
    counted = W.flops(fp32)
    monkeypatch.setattr(W, "_count_anywhere", lambda *a, **k: pytest.fail("counted again for bf16"))
    assert W.flops(bf16) == counted


def test_pricing_for_a_gpu_plans_the_notebooks_on_cuda():
    """The plans priced for a GPU are those of notebooks run there (``-p device cuda``, unless a device is given),
    since the papers' code picks its precision by device; a CPU calibration leaves the arguments alone."""
    from shared.cost import on_device

    assert on_device(["ciln", "-f", "x.yaml"], "nvidia-h100") == ["ciln", "-f", "x.yaml", "-p", "device", "cuda"]
    assert on_device(["ciln", "-p", "device", "cpu"], "nvidia-h100") == ["ciln", "-p", "device", "cpu"]
    assert on_device(["ciln"], "cpu-1core") == ["ciln"]


def test_text_configs_match_the_published_sizes():
    """The configs written in code give each checkpoint's parameter count (base model, no head) within 3 %."""
    import torch

    for arch, spec in W.TEXT_MODELS.items():
        with torch.device("meta"):
            model = W.text_model(arch, "embed")
        params = sum(p.numel() for p in model.parameters()) / 1e6
        assert params == pytest.approx(spec.params_m, rel=0.03), (arch, params)


TINY_CORPUS = ["the cat sat on the mat", "a dog ran in the park", "noisy labels hurt the model ."]


@pytest.mark.parametrize("hub, arch, kind, options", [
    ("microsoft/deberta-v3-base", "deberta-v3-base", "deberta-v2", {"num_labels": 3}),
    ("t5-base", "t5-base", "t5", {"task": "seq2seq", "label_len": 4}),
])
def test_a_tiny_model_folder_is_priced_as_its_own_size(tmp_path, cache_dir, hub, arch, kind, options):
    """A rehearsal's stand-in (``write_tiny_model``) as size options: a key that names them and round-trips, FLOPs
    far below the checkpoint's and equal to FlopCounterMode's count on the model loaded from that very folder."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoModelForSeq2SeqLM, AutoModelForSequenceClassification

    from shared.text.tiny_models import write_tiny_model

    folder = write_tiny_model(tmp_path / "models" / hub, kind, TINY_CORPUS)
    sizes = W.text_size_options(arch, folder)
    assert sizes["hidden"] == 32 and sizes["layers"] == 1 and sizes["heads"] == 2 and "vocab" in sizes
    assert (sizes.get("decoder_layers"), sizes.get("head_dim")) == ((1, 16) if kind == "t5" else (None, None))
    w = W.Workload("text_encoder", arch, "train", 2, (16,), "fp32", {**options, **sizes})
    full = W.Workload("text_encoder", arch, "train", 2, (16,), "fp32", options)
    assert W.Workload.from_key(w.key) == w and "hidden=32" in w.key and "layers=1" in w.key
    assert full.key not in (w.key,) and "hidden" not in full.key
    assert W.flops(w) < W.flops(full) / 100

    torch.manual_seed(0)
    if kind == "t5":
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, local_files_only=True)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=3, local_files_only=True)
    model.train()
    ids = torch.randint(10, model.config.vocab_size - 10, (2, 16))
    if kind != "t5":
        ids[:, -1] = 2
    with FlopCounterMode(display=False) as counter:
        if kind == "t5":
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids[:, :4].clone(), use_cache=False).loss
        else:
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            loss = torch.nn.functional.cross_entropy(logits.float(), torch.zeros(2, dtype=torch.long))
        loss.backward()
    assert W.flops(w) == counter.get_total_flops()


def test_size_options_are_checked_and_dropped_where_they_restate_the_checkpoint(tmp_path):
    base = W.Workload("text_encoder", "bert-base-uncased", "train", 8, (128,), "fp32", {"num_labels": 158})
    assert W.Workload("text_encoder", "bert-base-uncased", "train", 8, (128,), "fp32",
                      {"num_labels": 158, "hidden": 768, "layers": 12, "vocab": 30522}).key == base.key
    assert W.text_sizes("gpt2")["intermediate"] == 3072 and W.text_sizes("t5-base", hidden=32)["hidden"] == 32
    for options, words in (({"decoder_layers": 1}, ["decoder_layers", "bert"]), ({"hidden": 30}, ["multiple"])):
        with pytest.raises(ConfigError) as info:
            base.replace(options=options)
        assert all(w in str(info.value) for w in words)
    # no folder, another model type, or the checkpoint's own sizes: no options (the full profile's key)
    assert W.text_size_options("bert-base-uncased", tmp_path / "absent") == {}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta", "hidden_size": 32}))
    assert W.text_size_options("bert-base-uncased", tmp_path) == {}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
                                                      "n_head": 12, "n_inner": None, "vocab_size": 50257}))
    assert W.text_size_options("gpt2", tmp_path) == {}


def test_plench_passes_match_the_algorithms():
    """PLENCH_IMAGE_PASSES: the featurizer passes of each algorithm's steady-state step, counted with hooks."""
    import collections

    import torch

    from plench import networks
    from plench.algorithms import ALGORITHMS, Batch, make_algorithm
    from plench.hparams import hparams_for

    n, q, B = 400, 10, 16
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, q, (n,), generator=g)
    S = (torch.rand(n, q, generator=g) < 0.3).float()
    S[torch.arange(n), y] = 1
    fast = {"POP": {"warm_up": 1}, "IDGP": {"warm_up_epoch": 1}, "PiCO": {"prot_start": 2, "moco_queue": 64},
            "DIRK": {"prot_start": 2, "moco_queue": 64}, "FREDIS": {"update_interval": 1},
            "ALIM": {"prot_start": 2, "start_epoch": 1, "moco_queue": 64},
            "PiCO_plus": {"prot_start": 2, "knn_start": 3, "moco_queue": 64}}
    for algorithm, (views, nograd, augment) in W.PLENCH_IMAGE_PASSES.items():
        hp = {**hparams_for(algorithm, "digits_cnn"), **fast.get(algorithm, {}), "batch_size": B}
        torch.manual_seed(0)
        model = make_algorithm(algorithm, (1, 8, 8), q, S, hp, arch="digits_cnn", steps=1000)
        counts = collections.Counter()

        def count(module, inputs, output, counts=counts):
            counts[torch.is_grad_enabled()] += inputs[0].shape[0]

        for module in model.modules():
            if isinstance(module, networks.DigitsCNNFeaturizer):
                module.register_forward_hook(count)
        for _ in range(30):
            idx = torch.randperm(n, generator=g)[:B]
            counts.clear()
            model.train()
            model.update(Batch(*(torch.randn(B, 1, 8, 8, generator=g) for _ in range(4)), S[idx], y[idx], idx))
        assert (counts[True] / B, counts[False] / B) == (views, nograd), algorithm
        assert augment == "_".join(ALGORITHMS[algorithm].views), algorithm


# ------------------------------------------------------------------------------------------------ steps
SMALL = [
    "cifar_resnet/resnet20/train/b4/3x32x32/fp16/augment=crop_flip",
    "cifar_resnet/densenet_bc/train/b4/3x32x32/fp32/augment=weak_strong_distill,nograd=2,optimizer=adam,views=2",
    "cifar_resnet/tiny_cnn/train/b4/3x32x32/fp32/width=8",
    "cifar_resnet/lenet5/infer/b4/1x28x28/fp32",
    "tabular_mlp/mlp/train/b8/108/fp32/num_classes=16",
    "text_encoder/all-minilm-l6-v2/infer/b2/16/fp32/task=embed",
    "text_encoder/bart-base/train/b2/16/bf16/num_labels=158",
    "text_encoder/t5-base/train/b2/16/bf16/label_len=4,task=seq2seq",
    "vit_infer/clip_vit_b32/infer/b1/3x64x64/fp32/source=32",
    "maskrcnn/maskrcnn_r50_fpn/train/b1/3x96x128/fp32/instances=2",
]


@pytest.mark.parametrize("key", SMALL)
def test_each_family_steps_on_the_cpu(key):
    w = W.Workload.from_key(key)
    step = W.build(w, "cpu")
    assert step.samples == w.batch and step.amp is False  # autocast is CUDA-only, as in the project
    for _ in range(2):
        out = step()
    if w.phase == "train":
        assert isinstance(out, float) and math.isfinite(out)
    step.close()


@pytest.mark.parametrize("options", ["augment=weak,nograd=1,optimizer=adam,stack=3",
                                     "augment=weak_strong,nograd=2,optimizer=adam,stack=3,views=2",
                                     "augment=weak_strong_distill,nograd=2,optimizer=adam,stack=3,views=2"])
def test_a_stack_of_configurations_steps_on_the_cpu(options, cache_dir):
    """Plench's stacked training (``stack``): every member's batch in one step, its FLOPs the members' sum, its
    operators one member's (dispatched once for the stack); Plench's image steps stack: the loss step of one or two
    views (CRDPLL) and DIRK's, each view built once for the stack."""
    w = W.Workload.from_key(f"cifar_resnet/digits_cnn/train/b4/1x8x8/fp32/{options}")
    step = W.build(w, "cpu")
    assert step.samples == 3 * 4
    losses = [step() for _ in range(3)]
    assert all(math.isfinite(v) for v in losses) and len(set(losses)) == 3  # it trains: the loss moves
    step.close()
    alone = W.unstacked(w)
    assert "stack" not in alone.key and W.flops(w) == pytest.approx(3 * W.flops(alone)) and W.ops(w) == W.ops(alone)
    for bad in ("augment=none,stack=3", "augment=crop_flip,stack=3"):
        with pytest.raises(ConfigError, match="stack"):
            W.Workload.from_key(f"cifar_resnet/digits_cnn/train/b4/1x8x8/fp32/{bad}")


# ------------------------------------------------------------------------------------------------ gpu_check
def test_merge_keeps_measurements_and_newer_wins(tmp_path):
    from shared import gpu_check as G

    old = [{"key": "a", "samples_per_s": 10.0, "step_s": 1.0, "measured_at": "t0"},
           {"key": "b", "samples_per_s": 5.0, "step_s": 2.0, "measured_at": "t0"},
           {"key": "c", "skipped": "over budget", "measured_at": "t0"},
           {"key": "d", "samples_per_s": 1.0, "step_s": 1.0, "measured_at": "t0"}]
    new = [{"key": "a", "skipped": "over budget: no time left", "measured_at": "t1", "flops_per_step": 7.0},
           {"key": "b", "samples_per_s": 6.0, "step_s": 1.5, "measured_at": "t1"},
           {"key": "c", "samples_per_s": 3.0, "step_s": 1.0, "measured_at": "t1"},
           {"key": "d", "skipped": "failed: RuntimeError: boom", "measured_at": "t1"},
           {"key": "e", "skipped": "over budget", "measured_at": "t1"}]
    merged = {e["key"]: e for e in G.merge_workloads(old, new)}
    assert merged["a"]["samples_per_s"] == 10.0 and merged["a"]["flops_per_step"] == 7.0  # a skip never replaces
    assert merged["b"]["samples_per_s"] == 6.0 and merged["c"]["samples_per_s"] == 3.0  # newer measurement wins
    assert merged["d"]["samples_per_s"] == 1.0 and "boom" in merged["d"]["last_failed"]["reason"]
    assert merged["e"]["skipped"] == "over budget"

    path = tmp_path / "cal.yaml"
    header = {"device": {"name": "x", "slug": "x"}, "peak_tflops": {"fp32": 1.0}, "measured_at": "2026-01-01",
              "versions": {}, "budget_s": 10}
    G.write_yaml_atomic(path, G.merge_file(path, header, old, {"started": "r1"}, None))
    G.write_yaml_atomic(path, G.merge_file(path, header, new, {"started": "r2"}, {"p": {"status": "ok"}}))
    cal = W.load_calibration(path)
    assert cal.samples_per_s("a") == 10.0 and cal.samples_per_s("b") == 6.0 and cal.samples_per_s("e") is None
    assert [r["started"] for r in cal.runs] == ["r1", "r2"] and cal.cuda_paths["p"]["status"] == "ok"
    assert not list(tmp_path.glob(".*.tmp")), "atomic writes leave no temporary file"
    # a run of chosen workloads (--only / --workload) keeps the full run's peak rates and budget; it adds the rest
    quick = {**header, "peak_tflops": {"fp32": 0.5}, "budget_s": 1, "dispatch": {"s_per_op": 2e-6}}
    G.write_yaml_atomic(path, G.merge_file(path, quick, [], {"started": "r3"}, None, refine=True))
    cal = W.load_calibration(path)
    assert cal.peak_tflops == {"fp32": 1.0} and cal.budget_s == 10 and cal.dispatch == {"s_per_op": 2e-6}
    G.write_yaml_atomic(path, G.merge_file(path, quick, [], {"started": "r4"}, None))  # a full run replaces them
    assert W.load_calibration(path).peak_tflops == {"fp32": 0.5}


def test_a_failing_dispatch_measurement_is_recorded_not_fatal(monkeypatch):
    from shared import gpu_check as G

    monkeypatch.setattr(G, "measure_dispatch", lambda device: 1 / 0)
    assert G._dispatch_or_why("cpu") == {"skipped": "ZeroDivisionError: division by zero"}


def test_load_calibration_rejects_other_files(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("just: [a, list]\n")
    with pytest.raises(ConfigError, match="not a calibration file"):
        W.load_calibration(bad)
    bad.write_text("device: {name: x}\nworkloads: [{key: a}]\n")
    with pytest.raises(ConfigError, match="neither samples_per_s nor skipped"):
        W.load_calibration(bad)


def test_cli_rejects_unknown_family(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "shared.gpu_check", "--only", "resnets", "--device", "cpu",
                           "--out", str(tmp_path / "x.yaml")], check=False, capture_output=True, text=True, cwd=REPO_ROOT,
                          env=_env(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert "resnets" in proc.stderr and "cifar_resnet" in proc.stderr and "text_encoder" in proc.stderr
    assert not (tmp_path / "x.yaml").exists()


def test_cli_cpu_budget_run(tmp_path):
    """A 60 s budget on the CPU: done in about 90 s, every full-profile workload measured or skipped."""
    out = tmp_path / "cal.yaml"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "shared.gpu_check", "--budget", "60", "--device", "cpu",
                           "--out", str(out)], check=False, capture_output=True, text=True, cwd=REPO_ROOT, env=_env(tmp_path),
                          timeout=300)
    wall = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert wall < 95, f"took {wall:.0f} s"
    cal = W.load_calibration(out)
    assert cal.device["type"] == "cpu" and cal.device["slug"].startswith("cpu-")
    assert cal.peak_tflops["fp32"] > 0 and cal.budget_s == 60
    assert set(cal.workloads) == {w.key for w in W.FULL_PROFILE_WORKLOADS}
    measured = cal.measured()
    assert measured, "at least one workload fits in 60 s"
    for key, e in measured.items():
        assert math.isfinite(e["samples_per_s"]) and e["samples_per_s"] > 0, key
        assert e["step_s"] > 0 and e["steps_timed"] >= 1 and e["peak_mem_mb"] >= 0, key
        assert W.Workload.from_dict(e).key == key
    for key, e in cal.workloads.items():
        assert ("samples_per_s" in e) != ("skipped" in e), key
    assert all(r["status"] == "skipped" for r in cal.cuda_paths.values())
    assert cal.runs[-1]["load_average_start"] is not None and cal.runs[-1]["elapsed_s"] < 90
    # startup (a kernel, each paper's imports) within a quarter of the budget: measured or skipped with the reason
    timed = {k for k, v in cal.startup.items() if isinstance(v, float)}
    assert "kernel" in timed and timed | set(cal.startup.get("skipped", {})) >= {"kernel", *PAPERS}
    assert all(0 < cal.startup[k] < 15 for k in timed) and cal.startup["threads"] >= 1
    assert "samples/s" in proc.stdout and "wrote" in proc.stdout
    assert 0 < cal.dispatch["s_per_op"] < 1e-3 and cal.dispatch["ops"] > 0  # the floor under estimated steps


def test_cuda_paths_code_runs_on_the_cpu():
    """The CUDA path checks are plain project code: the cheap ones run on the CPU (AMP and pinning off)."""
    import torch

    from shared import gpu_check as G

    cheap = ("select_device", "deterministic_mode", "amp_fp16_train_epoch", "plench_views_device",
             "pinned_dataloader_workers", "channels_last_fp16", "plench_step")
    for name in cheap:
        _, check = G.CUDA_PATHS[name]
        assert check(torch.device("cpu")), name
    skipped = G.run_cuda_paths(torch.device("cpu"))
    assert {r["status"] for r in skipped.values()} == {"skipped"}
    for _, check in G.CUDA_PATHS.values():  # the workloads the other checks build are valid
        if hasattr(check, "key"):
            W.Workload.from_key(check.key)


BARE_BOX = textwrap.dedent('''
    import builtins, sys
    BLOCKED = ["sklearn", "scipy", "matplotlib", "open_clip", "papermill", "cleanlab", "pycocotools",
               "sentence_transformers", "rtdl_revisiting_models", "skops", "cv2", "mmdet", "mmcv",
               "segment_anything", "submitit", "nbformat", "nbclient", "jupyter_client", "ipykernel", "xgboost",
               "catboost", "tabpfn"]
    for name in BLOCKED:
        sys.modules[name] = None
    PROJECT = ("shared", "plench", "ciln", "lnlfn", "noisywikihow", "benchmark_n")
    real_import = builtins.__import__

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        # transformers needs tqdm itself; the project's modules must not import it (a bare box's progress is print)
        importer = (globals or {}).get("__name__", "")
        if name.split(".")[0] == "tqdm" and importer.split(".")[0] in PROJECT:
            raise ImportError(f"{importer} imports tqdm")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded
    import shared.workloads as W
    import shared.gpu_check as G

    # every family's lazy imports, at a size that builds in seconds
    import torch
    for key in ["cifar_resnet/densenet_bc/train/b2/3x32x32/fp32/augment=weak_strong,optimizer=adam,views=2",
                "tabular_mlp/mlp/infer/b2/10/fp32", "text_encoder/deberta-v3-xsmall/train/b2/16/fp32",
                "vit_train/deit3_small/train/b1/3x64x64/fp16", "maskrcnn/maskrcnn_r50_fpn/train/b1/3x64x96/fp32"]:
        step = W.build(W.Workload.from_key(key), "cpu")
        step()
        step.close()
    code = G.main(sys.argv[1:])
    leaked = sorted(n for n in BLOCKED if sys.modules.get(n) is not None)
    assert not leaked, leaked
    print("bare box ok", code)
    sys.exit(code)
''')


def test_runs_on_a_bare_box(tmp_path):
    script = tmp_path / "bare.py"
    script.write_text(BARE_BOX)
    out = tmp_path / "bare.yaml"
    proc = subprocess.run([sys.executable, str(script), "--budget", "20", "--device", "cpu", "--only",
                           "tabular_mlp", "cifar_resnet", "--out", str(out)], check=False, capture_output=True, text=True,
                          cwd=REPO_ROOT, env=_env(tmp_path), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bare box ok 0" in proc.stdout
    cal = W.load_calibration(out)
    assert cal.measured() and all(W.Workload.from_key(k).family in ("tabular_mlp", "cifar_resnet")
                                  for k in cal.workloads)


def test_startup_reads_the_notebooks_imports_and_names_what_failed(monkeypatch):
    from shared import gpu_check

    lines = gpu_check.notebook_imports("ciln")
    assert len(lines) == len(set(lines)) and all(line.startswith(("import ", "from ")) for line in lines)
    assert "from ciln.pages.tv import TotalVariation" in lines
    monkeypatch.setattr(gpu_check, "notebook_imports", lambda paper: ["import no_such_module_here"])
    timed = gpu_check.measure_startup(["ciln"], 1, deadline=time.perf_counter() + 60)
    assert timed["skipped"]["ciln"].endswith("No module named 'no_such_module_here'")
    assert "ciln" not in timed and timed["threads"] == 1
    late = gpu_check.measure_startup(["ciln"], 1, deadline=0.0)
    assert late["skipped"] == {"kernel": "over budget", "ciln": "over budget"}


def test_calibration_files_in_the_repository_load():
    for path in sorted((Path(W.CALIBRATION_DIR)).glob("*.yaml")):
        cal = W.load_calibration(path)
        assert cal.device.get("slug") == path.stem
        for key in cal.workloads:
            W.Workload.from_key(key)


def test_maskrcnn_archs_are_the_backbones_benchmark_n_trains(cache_dir):
    """Every backbone ``benchmark_n.maskrcnn`` accepts has a workload arch (the CI rehearsal trains ResNet-18; its
    steps were unpriced while only ResNet-50 was registered), built with that backbone and counted."""
    maskrcnn = pytest.importorskip("benchmark_n.maskrcnn")

    assert set(W.MASKRCNN_BACKBONES) == set(maskrcnn.BACKBONES)
    family = W.family("maskrcnn")
    sizes = {b: sum(p.numel() for p in family.model(80, 64, 96, b).backbone.body.parameters())
             for b in ("resnet18", "resnet50")}
    assert sizes["resnet18"] < sizes["resnet50"] / 2  # 11M vs 23.5M: the arch's backbone, not ResNet-50's
    r18 = W.flops(W.Workload("maskrcnn", "maskrcnn_resnet18_fpn", "train", 1, (3, 64, 96), "fp32", {"instances": 2}))
    assert r18 > 0 and math.isfinite(r18)


def test_maskrcnn_inference_costs_its_detections_and_the_losses_pass_its_boxes(cache_dir):
    """The mask head runs once per detection: 10 per image cost less than torchvision's 100; the per-instance
    losses' pass (the heads on the annotated boxes, no RPN) less still, and it is an inference pass only."""
    infer = W.Workload("maskrcnn", "maskrcnn_resnet18_fpn", "infer", 1, (3, 64, 96), "fp32", {"num_classes": 6})
    hundred, ten = W.flops(infer), W.flops(infer.replace(options={"detections": 10}))
    own = W.flops(infer.replace(options={"own_boxes": 1, "instances": 2}))
    assert 0 < own < ten < hundred / 2
    import torch

    step = W.family("maskrcnn").build(infer.replace(options={"own_boxes": 1, "instances": 2}), torch.device("cpu"))
    logits, masks = step()
    assert logits.shape == (2, 7) and masks.shape == (2, 7)  # one row per annotated box, a score per class
    with pytest.raises(ConfigError, match="own_boxes"):
        W.Workload("maskrcnn", "maskrcnn_resnet18_fpn", "train", 1, (3, 64, 96), "fp32", {"own_boxes": 1})
    with pytest.raises(ConfigError, match="detections"):
        infer.replace(options={"detections": 0})
