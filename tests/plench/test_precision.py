"""Mixed precision (the ``precision`` setting): "auto" is fp32 on the CPU with the old run identities, "bf16"
trains every algorithm under autocast with float32 tables and reaches fp32's accuracy, and the cost planner names
and prices bf16 runs for CUDA."""
from __future__ import annotations

import math

import pytest
import torch

from plench import cost, protocol, reports
from plench.algorithms import ALGORITHMS, make_algorithm
from plench.data import load_pll_dataset
from plench.hparams import hparams_for
from shared import runlog, sweep
from shared.errors import ConfigError
from shared.profiles import notebook_settings
from shared.seeding import seed_hash
from shared.workloads import count_flops

torch.set_num_threads(1)

VOLATILE = ("step_time", "mem_gb")
# The smoke image runs' batch size and a learning rate at which 40 steps of the digits CNN are well above chance
QUICK = {"batch_size": 32, "lr": 5e-3}
# bf16 against fp32 after 40 steps on PLDigits-Vaguest (161 validation, 180 test rows): the largest accuracy gap
# measured was 0.025 (PRODEN's validation accuracy, 4 rows); PiCO's gaps 0.012 and 0.022. The confidence tables
# differ by 0.0023 (PRODEN) and 0.0005 (PiCO) on average (bound: 0.05).
ACCURACY_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def digits_images():
    return load_pll_dataset("PLDigits-Vaguest", modality="image")


def stable(records):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in records]


# -- the setting ----------------------------------------------------------------------------------------------------
def test_an_unknown_precision_is_a_config_error_naming_the_valid_ones(digits_images, tmp_path):
    for bad in ("fp16", "half", None):
        with pytest.raises(ConfigError, match="auto, bf16, fp32"):
            protocol.resolve_precision(bad, "cpu")
    with pytest.raises(ConfigError, match="auto, bf16, fp32"):
        protocol.train_run(digits_images, "PRODEN", arch="digits_cnn", hparams_seed=0, trial_seed=0, steps=2,
                           checkpoint_freq=1, out_dir=tmp_path / "r", precision="fp16", hparams_overrides=QUICK)
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match="auto, bf16, fp32"):
        protocol.sweep_args(["digits-USS"], ["PRODEN"], n_hparams=1, n_trials=1, arch="mlp", checkpoint_freq=1,
                            precision="fp64")
    with pytest.raises(ConfigError, match="resolve_precision"):  # a run's arguments take the resolved precision
        protocol.run_args("digits-USS", "PRODEN", arch="mlp", hparams_seed=0, trial_seed=0, steps=1, checkpoint_freq=1,
                          precision="auto")
    with pytest.raises(ConfigError, match="bf16, fp32"):
        make_algorithm("PRODEN", (4,), 3, torch.eye(3)[[0, 1, 2, 0]], {**hparams_for("PRODEN", "mlp"), "batch_size": 2},
                       arch="mlp", steps=2, precision="tf32")
    for notebook in ("02_tabular", "03_image", "04_validation_use"):
        cfg = notebook_settings("plench", notebook, "smoke", {"precision": "float16"})
        with pytest.raises(ConfigError, match="auto, bf16, fp32"):
            cost.plan(notebook, cfg, {"device": "cpu"})


def test_auto_resolves_against_the_device():
    assert [protocol.resolve_precision("auto", d) for d in ("cpu", "cuda", "cuda:1", torch.device("cpu"))] == \
        ["fp32", "bf16", "bf16", "fp32"]
    assert protocol.resolve_precision("auto", "auto") == ("bf16" if torch.cuda.is_available() else "fp32")
    assert protocol.resolve_precision("fp32", "cuda") == "fp32"
    assert protocol.resolve_precision("bf16", "cpu") == "bf16"
    with pytest.raises(ConfigError, match="unknown device"):
        protocol.resolve_precision("auto", "tpu")


# -- fp32: the runs and names of before -------------------------------------------------------------------------
def test_fp32_runs_keep_the_identities_they_had_before_the_setting():
    """Hashes computed before ``precision`` existed: every run that resolves to fp32 keeps its folder name."""
    args = protocol.run_args("PLDigits-Vaguest", "PRODEN", arch="digits_cnn", hparams_seed=0, trial_seed=0, steps=100,
                             checkpoint_freq=25, hparams_overrides={"batch_size": 32})
    assert "precision" not in args and sweep.args_hash(args) == "e82c6fbf839d97cde01b331fb3085c18"
    args = protocol.run_args("PLCIFAR10_Aggregate", "PiCO", arch="resnet32", hparams_seed=3, trial_seed=1,
                             steps=60_000, checkpoint_freq=1000)
    assert sweep.args_hash(args) == "ce29a8ebe29e0ac94a8cced6e1789049"
    bf16 = protocol.run_args("PLCIFAR10_Aggregate", "PiCO", arch="resnet32", hparams_seed=3, trial_seed=1,
                             steps=60_000, checkpoint_freq=1000, precision="bf16")
    assert bf16 == {**args, "precision": "bf16"}


def test_auto_on_the_cpu_gives_the_fp32_records_and_folder(digits_images, tmp_path, monkeypatch):
    monkeypatch.delenv(runlog.ENV, raising=False)
    common = dict(n_hparams=1, n_trials=1, arch="digits_cnn", checkpoint_freq=3, steps=6, hparams_overrides=QUICK)
    protocol.sweep([digits_images], ["PRODEN"], out_dir=tmp_path / "auto", device="cpu", **common)  # "auto"
    expected = {"dataset": "PLDigits-Vaguest", "algorithm": "PRODEN", "arch": "digits_cnn", "hparams_seed": 0,
                "trial_seed": 0, "steps": 6, "checkpoint_freq": 3, "compat": True,
                "seed": seed_hash("PLDigits-Vaguest", "PRODEN", 0, 0), "hparams_overrides": QUICK}
    folders = [p for p in (tmp_path / "auto").iterdir() if not p.name.startswith(".")]
    assert [p.name for p in folders] == [sweep.args_hash(expected)]
    auto = sweep.read_records(folders[0])
    assert all(r["args"] == expected for r in auto)
    fp32 = protocol.train_run(digits_images, "PRODEN", hparams_seed=0, trial_seed=0, out_dir=tmp_path / "fp32",
                              precision="fp32", **{k: v for k, v in common.items() if k not in ("n_hparams", "n_trials")})
    assert stable(auto) == stable(fp32)  # bit for bit

    # bf16 (asked for on the CPU) is another run: its own folder, its arguments name the precision
    protocol.sweep([digits_images], ["PRODEN"], out_dir=tmp_path / "bf16", device="cpu", precision="bf16", **common)
    folder, = [p for p in (tmp_path / "bf16").iterdir() if not p.name.startswith(".")]
    assert folder.name == sweep.args_hash({**expected, "precision": "bf16"}) != folders[0].name
    bf16 = sweep.read_records(folder)
    assert all(r["args"]["precision"] == "bf16" for r in bf16) and [r["step"] for r in bf16] == [0, 3, 5]
    assert all(math.isfinite(r["loss"]) for r in bf16)


# -- bf16: every algorithm ---------------------------------------------------------------------------------------
IMAGE_SMALL = {"batch_size": 16, "moco_queue": 64, "feat_dim": 16, "prot_start": 1, "knn_start": 2, "warm_up": 0,
               "warm_up_epoch": 0, "start_epoch": 0, "update_interval": 0.05}
ROWS_SUM_TO_ONE = ("confidence", "d", "o_array")  # LWS's confidences sum to about 2: checked non-negative only


def _check_tables(algorithm, dtypes: dict, n: int):
    for name, buffer in algorithm.named_buffers():
        assert buffer.dtype == dtypes[name], name  # no table changed dtype (a bf16 value would have rounded it)
        if buffer.is_floating_point():
            assert torch.isfinite(buffer).all(), name
    assert all(p.dtype == torch.float32 for p in algorithm.parameters())
    for name in ROWS_SUM_TO_ONE:
        table = getattr(algorithm, name, None)
        if isinstance(table, torch.Tensor):
            assert table.dtype in (torch.float32, torch.float64) and bool((table >= 0).all()), name
            if algorithm.name != "LWS":
                assert torch.allclose(table.sum(1).double(), torch.ones(n, dtype=torch.float64), atol=1e-5), name


@pytest.mark.parametrize("name", [a for a in ALGORITHMS if a != "VALEN"])
def test_every_image_algorithm_trains_under_bf16_with_float32_tables(name, digits_pll):
    """A few bf16 steps past every warm-up (CPU autocast): the forwards ran in bf16, the losses are finite and
    every stored table keeps its dtype (float32, or the code's float64), finite, its rows distributions."""
    torch.manual_seed(0)
    hparams = hparams_for(name, "digits_cnn")
    hparams.update({k: v for k, v in IMAGE_SMALL.items() if k in hparams})
    algorithm = make_algorithm(name, (1, 8, 8), 10, digits_pll.S, hparams, arch="digits_cnn", steps=10, compat=False,
                               precision="bf16")
    dtypes = {k: b.dtype for k, b in algorithm.named_buffers()}
    seen = []
    algorithm.featurizer.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    losses = [algorithm.update(b)["loss"] for b in digits_pll.batches(4, 16, image=True, seed=1)]
    assert all(math.isfinite(v) for v in losses), losses
    assert torch.bfloat16 in seen
    _check_tables(algorithm, dtypes, digits_pll.n)
    logits = algorithm.eval().predict(digits_pll.images[:8])
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()


def test_valen_runs_every_phase_under_bf16(digits_pll):
    torch.manual_seed(0)
    hparams = {**hparams_for("VALEN", "mlp"), "batch_size": 64, "warm_up": 2}
    algorithm = make_algorithm("VALEN", (64,), 10, digits_pll.S, hparams, arch="mlp", steps=20, compat=False,
                               precision="bf16")
    dtypes = {k: b.dtype for k, b in algorithm.named_buffers()}
    steps = algorithm.graph_step + 3
    losses = [algorithm.update(b)["loss"] for b in digits_pll.batches(steps, 64, seed=2)]
    assert algorithm.phase(steps - 1) == "variational" and all(math.isfinite(v) for v in losses)
    _check_tables(algorithm, dtypes, digits_pll.n)


# -- bf16 against fp32 at smoke scale ------------------------------------------------------------------------------
@pytest.mark.parametrize("name, overrides", [("PRODEN", {}), ("PiCO", {"prot_start": 15, "moco_queue": 128})])
def test_bf16_reaches_fp32_accuracy_with_float32_confidences(name, overrides, digits_images):
    """40 steps of the digits CNN (channels_last under bf16, as in a run) each way: validation and test accuracy
    within ``ACCURACY_TOLERANCE``; the confidences stay a float32 table of distributions over the candidates."""
    data = protocol.run_data(digits_images, 0)
    metrics, confidence = {}, {}
    for precision in ("fp32", "bf16"):
        model = reports.train_model(digits_images, name, arch="digits_cnn", trial_seed=0, steps=40,
                                    hparams_overrides={**QUICK, **overrides}, precision=precision)
        assert model.precision == precision
        metrics[precision] = protocol.checkpoint_metrics(model.predict, data, "cpu", compat=True)
        w = confidence[precision] = model.confidence
        assert w.dtype == torch.float32 and bool((w >= 0).all())
        assert torch.allclose(w.sum(1), torch.ones(len(w)), atol=1e-5)
        assert bool((w[data.train_S == 0] == 0).all())  # no mass outside the candidate sets
    conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.in_channels > 1)
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert metrics["fp32"]["val_accuracy"] > 0.15  # chance is 0.1: the comparison is between models that learnt
    for key in ("val_accuracy", "test_acc"):
        assert abs(metrics["bf16"][key] - metrics["fp32"][key]) <= ACCURACY_TOLERANCE, (key, metrics)
    assert float((confidence["bf16"] - confidence["fp32"]).abs().mean()) < 0.05


# -- the cost planner -----------------------------------------------------------------------------------------------
def _precisions(plan) -> set[str]:
    return {w.workload.precision for r in plan for w in r.work if w.workload is not None}


def _identities(plan) -> set[str]:
    return {r.identity for r in plan}


# 02 and 04's smoke runs are MLPs, which "auto" keeps in fp32 (the test below): 04 is planned with its image arm
IMAGE_SETTINGS = {"03_image": {}, "04_validation_use": {"modality": "image", "arch": "digits_cnn",
                                                        "algorithms": ["PRODEN", "PiCO"]}}


@pytest.mark.parametrize("notebook", list(IMAGE_SETTINGS))
def test_the_planner_prices_bf16_on_cuda_and_fp32_on_the_cpu(notebook):
    cfg = notebook_settings("plench", notebook, "smoke", IMAGE_SETTINGS[notebook])
    cpu = cost.plan(notebook, cfg, {"device": "cpu"})
    cuda = cost.plan(notebook, cfg, {"device": "cuda"})
    official = cost.plan(notebook, notebook_settings("plench", notebook, "smoke",
                                                     {**IMAGE_SETTINGS[notebook], "precision": "fp32"}),
                         {"device": "cuda:0"})
    assert _precisions(cpu) == _precisions(official) == {"fp32"} and _precisions(cuda) == {"bf16"}
    assert _identities(cpu) == _identities(official)  # the CPU plan (and fp32 on a GPU) names the runs as before
    assert len(_identities(cuda)) == len(_identities(cpu)) and not _identities(cuda) & _identities(cpu)
    if not torch.cuda.is_available():  # "auto" (the default device) is this machine's: the CPU here
        assert _identities(cost.plan(notebook, cfg, {})) == _identities(cpu)
    # the same runs, steps and FLOPs; only the precision (and the conv nets' layout) differ
    assert [sorted((w.steps, w.examples) for w in r.work) for r in sorted(cpu, key=lambda r: r.label)] == \
        [sorted((w.steps, w.examples) for w in r.work) for r in sorted(cuda, key=lambda r: r.label)]


def test_auto_keeps_the_tabular_mlp_in_fp32_on_cuda():
    """Mixed precision is for the image networks: "auto" leaves the MLP (02's tables, the speed-up) in fp32 on CUDA,
    where its tiny steps gain nothing from tensor cores; an explicit "bf16" still applies to it."""
    assert protocol.resolve_precision("auto", "cuda", "resnet32") == "bf16"
    assert protocol.resolve_precision("auto", "cuda", "mlp") == "fp32"
    assert protocol.resolve_precision("bf16", "cuda", "mlp") == "bf16"
    assert protocol.resolve_precision("auto", "cpu", "resnet32") == "fp32"
    cfg = notebook_settings("plench", "02_tabular", "smoke")
    on_cuda = cost.plan("02_tabular", cfg, {"device": "cuda"})
    assert on_cuda and {w.workload.precision for r in on_cuda for w in r.work if w.workload is not None} == {"fp32"}
    assert [r.identity for r in on_cuda] == [r.identity for r in cost.plan("02_tabular", cfg, {"device": "cpu"})]


def test_planned_bf16_identities_are_the_runs_a_cuda_notebook_names():
    cfg = notebook_settings("plench", "03_image", "smoke")
    planned = {r.identity.rsplit("/", 1)[1] for r in cost.plan("03_image", cfg, {"device": "cuda"})
               if r.kind == cost.RUN}
    stubs = [size.stub() for size in cost.dataset_sizes(cfg["datasets"], "image", None).values()]
    named = [args for grid in reports.image_grids(cfg) for args in grid.run_args(stubs, "cuda")]
    assert planned == {sweep.args_hash(args) for args in named}
    assert all(args["precision"] == "bf16" for args in named)
    fp32 = {r.identity.rsplit("/", 1)[1] for r in cost.plan("03_image", cfg, {"device": "cpu"}) if r.kind == cost.RUN}
    assert fp32 == {sweep.args_hash({k: v for k, v in args.items() if k != "precision"}) for args in named}


def test_bf16_image_workloads_are_channels_last_with_the_same_flops():
    size = cost.dataset_sizes(["PLCIFAR10_Aggregate"], "image", "/nonexistent")["PLCIFAR10_Aggregate"]
    args = protocol.run_args(size.name, "PiCO", arch="resnet32", hparams_seed=0, trial_seed=0, steps=60_000,
                             checkpoint_freq=1000, precision="bf16")
    train, evaluate = cost.run_work(size, args)
    assert train.workload.key == ("cifar_resnet/resnet32/train/b256/3x32x32/bf16/"
                                  "augment=weak_strong,channels_last=true,nograd=1,optimizer=adam")
    assert evaluate.workload.key == "cifar_resnet/resnet32/infer/b512/3x32x32/bf16/channels_last=true"
    fp32 = cost.run_work(size, {k: v for k, v in args.items() if k != "precision"})
    assert [w.workload.precision for w in fp32] == ["fp32", "fp32"]
    assert count_flops(train.workload) == count_flops(fp32[0].workload)
    mlp = cost.run_work(size, {**args, "arch": "mlp"})
    assert {w.workload.precision for w in mlp} == {"bf16"}
    assert all("channels_last" not in w.workload.key for w in mlp)
