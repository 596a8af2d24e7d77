"""CILN's cost plan (ciln/cost.py): the runs each notebook executes, their identities and their steps, checked on the
planner alone (no notebook runs; the smoke runs' logs are compared by hand, see the module's docstring)."""
import math
from pathlib import Path

import numpy as np
import pytest

from ciln import cost as C
from ciln.benchmark import DATASET_SIZES, generate_benchmark, split_rows
from ciln.splits import gu_five_way_split
from ciln.voters import data_fingerprint
from shared.errors import ConfigError
from shared.profiles import notebook_settings

NOTEBOOKS = sorted(p.stem for p in (Path(C.__file__).parent).glob("[0-9][0-9]_*.ipynb"))
FULL = {"profile": "full", "device": "cuda", "data_dir": "/nonexistent/ciln-data"}  # ciln/params/full.yaml
SMOKE = {"profile": "smoke", "device": "auto"}


def planned(notebook: str, profile: str = "smoke", settings=None, params=None) -> list:
    params = dict(params or (FULL if profile == "full" else SMOKE))
    return C.plan(notebook, notebook_settings("ciln", notebook, profile, settings), params)


def distinct(runs, kind=None) -> dict:
    return {(r.kind, r.identity): r for r in runs if kind is None or r.kind == kind}


def counts(runs) -> dict:
    out = {}
    for kind, _ in distinct(runs):
        out[kind] = out.get(kind, 0) + 1
    return out


def by_label(runs, kind: str) -> dict:
    return {r.label: r for r in distinct(runs, kind).values()}


# ------------------------------------------------------------------------------------------ the notebooks
def test_full_profile_plans_every_notebook_with_the_papers_grid():
    assert len(NOTEBOOKS) == 10
    plans = {nb: counts(planned(nb, "full")) for nb in NOTEBOOKS}
    # Algorithm 1 (Table I): 45 CIFAR-10, 45 MNIST and 15 Adult settings, each plus the clean rows and the clean test
    # split; 3 + 4 + 4 cached voters (CLIP and TabPFN train nothing)
    assert plans["01_benchmark"] == {"ciln-voter": 11, "ciln-votes": 47 + 47 + 17}
    assert plans["06_tv"] == {"ciln-voter": 3, "ciln-votes": 46}  # CIFAR-10H and PL-IDN's test TV are read
    # Table II: (11 settings x 2 image sources + 5 clean-start x 2 + 3 PL-IDN tiers) x (ERM, Co-T, DM x 2 variants)
    # x 3 seeds
    assert plans["08_downstream"]["ciln-downstream"] == 35 * 4 * 3
    assert plans["09_attractors"]["ciln-downstream"] == 9 * 3  # Table III's Co-Teaching column
    assert plans["10_loss_distributions"]["ciln-downstream"] == 3 + 1  # Fig. 8 + the symmetric control
    assert all(plans[nb].get("ciln-plidn-release") == 3 for nb in ("07_pca", "08_downstream", "09_attractors"))


def test_smoke_profile_counts():
    """The counts the smoke notebooks' run logs show (tiny_cnn, lenet5 and scikit-learn voters; 3 severities)."""
    assert counts(planned("01_benchmark")) == {"ciln-voter": 13, "ciln-votes": 111}
    assert counts(planned("08_downstream")) == {"ciln-downstream": 18, "ciln-fallible-raters": 1,
                                                "ciln-pseudo-human": 1, "ciln-voter": 4, "ciln-votes": 138}
    assert counts(planned("10_loss_distributions"))["ciln-downstream"] == 4


def test_doubling_the_seeds_doubles_the_downstream_runs_only():
    base = counts(planned("08_downstream", "full"))
    doubled = counts(planned("08_downstream", "full", {"seeds": [0, 1, 2, 3, 4, 5]}))
    assert doubled["ciln-downstream"] == 2 * base["ciln-downstream"]
    assert {k: v for k, v in doubled.items() if k != "ciln-downstream"} == \
        {k: v for k, v in base.items() if k != "ciln-downstream"}


def test_runs_shared_between_notebooks_have_equal_identities():
    full = {nb: planned(nb, "full") for nb in ("01_benchmark", "06_tv", "08_downstream", "09_attractors",
                                               "10_loss_distributions")}
    kinds = (C.VOTER, C.VOTES, C.DOWNSTREAM, C.RELEASE)
    ids = {nb: {kind: {i for k, i in distinct(runs) if k == kind} for kind in kinds} for nb, runs in full.items()}
    assert ids["09_attractors"]["ciln-downstream"] < ids["08_downstream"]["ciln-downstream"]  # the same Co-T runs
    assert len(ids["10_loss_distributions"]["ciln-downstream"] - ids["08_downstream"]["ciln-downstream"]) == 1
    assert ids["06_tv"]["ciln-voter"] < ids["01_benchmark"]["ciln-voter"]
    # 01's accuracy entry of CIFAR-10 is 06's clean test-split votes
    assert len(ids["06_tv"]["ciln-votes"] & ids["01_benchmark"]["ciln-votes"]) == 1
    assert ids["08_downstream"]["ciln-plidn-release"] == ids["09_attractors"]["ciln-plidn-release"]


def test_release_dirs_and_bad_settings():
    assert counts(planned("01_benchmark", settings={"release_dirs": {"Adult": "/somewhere"}})) == \
        {"ciln-voter": 8, "ciln-votes": 94}
    with pytest.raises(ConfigError, match="unknown voter"):
        planned("01_benchmark", settings={"pools": {"CIFAR10": ["resnet21"], "MNIST": [], "Adult": []}})
    with pytest.raises(ConfigError, match="takes no option"):
        planned("02_examples", settings={"corruption_options": {"CIFAR10": {"frost": {"swap": "copy"}}}})
    with pytest.raises(ConfigError, match="unknown recipe keys"):
        planned("06_tv", "full", {"pools": {"CIFAR10": [{"voter": "deit3_small", "epoch": 3}]}})
    with pytest.raises(ConfigError, match="device"):
        planned("05_nth", params={"profile": "smoke", "device": "tpu"})
    with pytest.raises(ConfigError, match="CILN notebook"):
        C.plan("11_nothing", notebook_settings("ciln", "05_nth", "smoke"), SMOKE)


# ------------------------------------------------------------------------------------------ steps
def test_downstream_steps_follow_the_learners_loops():
    """Smoke 08 (profiles.yaml): 1,800 NLT rows (4,000 stand-in rows: 400 validation, the rest halved), batch 32,
    8 epochs, tiny_cnn; 200 NLV and 1,000 test rows evaluated by predict_logits in batches of 512."""
    runs = by_label(planned("08_downstream"), "ciln-downstream")
    n, B, E = 1800, 32, 8
    erm = runs["erm on CILN-S frost (1) clean-img, seed 0"]
    assert erm.work[0].steps == E * math.ceil(n / B) and erm.work[0].workload.key.startswith(
        "cifar_resnet/tiny_cnn/train/b32/3x32x32/fp32")
    assert erm.work[1].steps == E * (math.ceil(1000 / 512) + math.ceil(200 / 512))  # one network
    # the test and NLV rows fill 3 batches of 512 per epoch but are priced by their rows (shared.cost.Work.rows)
    assert erm.work[1].rows == E * 1200 and erm.work[1].full_steps == pytest.approx(E * 1200 / 512)
    assert erm.work[0].rows is None  # training steps are full batches
    cot = runs["coteaching on CILN-S frost (1) clean-img, seed 0"]
    assert cot.work[0].steps == 2 * E * (n // B)  # two networks, the last batch dropped
    assert cot.work[1].steps == 2 * E * (2 + 1) and cot.work[1].rows == 2 * E * 1200
    dm = runs["dividemix (official) on CILN-S contrast (5) noisy-img, seed 0"]
    warmup, mixmatch = dm.work[0], dm.work[2]
    assert warmup.steps == 2 * 3 * math.ceil(n / B)  # dividemix: {warmup: 3}
    labelled = round(n * (1 - 0.473))  # the paper's noise rate of contrast (5)
    assert mixmatch.steps == 2 * (E - 3) * (labelled // B)
    division = dm.work[1]  # both networks' per-sample losses over the NLT rows, every MixMatch epoch
    assert (division.steps, division.rows) == (2 * (E - 3) * math.ceil(n / 512), 2 * (E - 3) * n)


def test_downstream_learners_train_in_fp16_on_cuda_and_fp32_on_the_cpu():
    """TrainSetup.amp (default true): every learner trains under fp16 AMP on CUDA, and the two-network learners also
    infer in fp16 (Method.mixed_precision); ERM infers in fp32; on the CPU, or with train: {amp: false}, all fp32."""
    def precisions(params, settings=None):
        runs = by_label(planned("08_downstream", "smoke", settings, params), "ciln-downstream")
        out = {}
        for label, run in runs.items():
            method = label.split(" on ")[0]
            for w in run.work:
                phase = w.workload.key.split("/")[2]
                out.setdefault((method, phase), set()).add(w.workload.precision)
        return out

    cuda = precisions({"profile": "smoke", "device": "cuda"})
    learners = ("coteaching", "dividemix (official)")
    assert {method for method, _ in cuda} >= {"erm", *learners}
    for method in learners:
        assert cuda[method, "train"] == cuda[method, "infer"] == {"fp16"}
    assert cuda["erm", "train"] == {"fp16"} and cuda["erm", "infer"] == {"fp32"}
    cpu = precisions({"profile": "smoke", "device": "cpu"})
    assert set().union(*cpu.values()) == {"fp32"}
    off = precisions({"profile": "smoke", "device": "cuda"}, {"train": {**notebook_settings(
        "ciln", "08_downstream", "smoke").train, "amp": False}})
    assert set().union(*off.values()) == {"fp32"}


def test_voter_and_votes_steps_at_full_scale():
    """CIFAR-10's NLT rows are 22,500 (Table I), CLT 22,500 and CLV 2,500; DeiT3-Small fine-tunes 20 epochs at
    batch 128 (the last batch of 100 images kept), CLIP scores 256 images a batch and DeiT 64, both at 224 px."""
    runs = planned("01_benchmark", "full")
    deit = by_label(runs, "ciln-voter")["voter deit3_small on cifar10"]
    assert deit.work[0].steps == 20 * (22_500 // 128 + 1) and deit.work[0].workload.key.startswith(
        "vit_train/deit3_small/train/b128/3x224x224/fp16")
    assert deit.work[1].steps == 20 * math.ceil(2_500 / 64)
    assert deit.work[0].rows is None and deit.work[1].rows == 20 * 2_500  # CLV inference priced by its rows
    votes = by_label(runs, "ciln-votes")["CIFAR10 nlt votes, contrast (5)"]
    by_arch = {w.workload.arch: w for w in votes.work if w.workload is not None}
    assert by_arch["deit3_small"].steps == math.ceil(22_500 / 64) and by_arch["deit3_small"].examples == 22_500
    assert all(w.rows == 22_500 for w in by_arch.values())  # every voter labels the split's rows in its batches
    assert by_arch["clip_vit_b32"].steps == math.ceil(22_500 / 256)
    assert by_arch["clip_vit_b32"].workload.key == "vit_infer/clip_vit_b32/infer/b256/3x224x224/fp32/source=32"
    assert by_arch["resnet20"].steps == by_arch["wrn28_10"].steps == math.ceil(22_500 / 512)
    resnet = by_label(runs, "ciln-voter")["voter resnet20 on cifar10"]
    assert resnet.work[0].steps == 200 * math.ceil(22_500 / 128)  # 200 epochs, fp16 AMP on CUDA


def test_dataset_sizes_of_the_stand_ins_are_the_loaders():
    from shared.datasets import load_dataset

    for name in ("mnist5k", "adult_like"):
        ds = load_dataset(name)
        train, test, image = DATASET_SIZES[name]
        assert (len(ds.train.y), len(ds.test.y)) == (train, test)
        assert image == (None if ds.modality == "tabular" else tuple(ds.train.X.shape[1:]))
    # mnist32rgb colours the same 5,000 digits with the same 80/20 holdout (its loader takes half a minute)
    assert DATASET_SIZES["mnist32rgb"][:2] == DATASET_SIZES["mnist5k"][:2]
    sizes = C.dataset("mnist5k", "/x")
    assert [sizes.rows(s) for s in ("clt", "nlt", "clv", "nlv", "test")] == [1800, 1800, 200, 200, 1000]


def test_workloads_without_a_family_are_proposed_not_dropped():
    from shared.workloads import Workload

    assert isinstance(C.workload("cifar_resnet", "resnet20", "train", 128, (3, 32, 32), "fp16"), Workload)
    proposed = C.workload("rtdl", "ft_transformer", "infer", 4096, (13,), n_blocks=3, num_classes=2)
    assert isinstance(proposed, C.ProposedWorkload)
    assert proposed.key == "rtdl/ft_transformer/infer/b4096/13/fp32/n_blocks=3,num_classes=2"
    with pytest.raises(ConfigError):
        C.workload("cifar_resnet", "resnet20", "train", 128, (3, 32, 32), optimizer="lbfgs")


# ------------------------------------------------------------------------------------------ identities
class Recorder:
    """An artifact cache that records (kind, params) and builds without storing (``artifacts``: fixed results)."""

    def __init__(self, tmp_path, artifacts=None):
        self.calls, self.tmp, self.artifacts = [], tmp_path, artifacts or {}

    def get_or_build(self, kind, params, build, *, code=(), fmt="npz"):
        self.calls.append((kind, params))
        if kind in self.artifacts:
            return self.artifacts[kind]
        if fmt == "dir":
            folder = self.tmp / f"entry{len(self.calls)}"
            build(folder)
            return folder
        return build()


def capture_plan(monkeypatch, fn, *args):
    """(runs, [(kind, params)]) of a planner function, its identities' parameters captured."""
    seen = []
    real = C.params_key
    monkeypatch.setattr(C, "params_key", lambda kind, params: seen.append((kind, params)) or real(kind, params))
    return fn(*args), seen


def replace(obj, table: dict):
    """``obj`` with every value found in ``table`` replaced (data fingerprints -> what the plan puts instead)."""
    if isinstance(obj, dict):
        return {k: replace(v, table) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [replace(v, table) for v in obj]
    return table.get(obj, obj) if isinstance(obj, (str, float)) else obj


def test_benchmark_identities_are_the_call_sites_parameters(tmp_path, monkeypatch):
    """generate_benchmark's cache calls (voter, clean, setting and test-split votes) are the planned ones, with
    each data fingerprint standing for its rows."""
    from shared.datasets import load_dataset
    from shared.profiles import Settings

    full = load_dataset("mnist5k")
    ds = type(full)("mnist5k", type(full.train)(full.train.X[:600], full.train.y[:600]),  # fewer rows, same name
                    type(full.test)(full.test.X[:100], full.test.y[:100]), full.classes, full.modality, full.source)
    rec = Recorder(tmp_path)
    generate_benchmark(ds, pool=["logreg_pca"], corruptions=["rotate"], severities=(1,), cache=rec)
    splits = gu_five_way_split(ds.train.y)
    table = {data_fingerprint(*split_rows(ds, s)): f"mnist5k:{s}" for s in ("nlt", "test")}
    table |= {data_fingerprint(ds.train.X[splits[s]], ds.train.y[splits[s]]): f"mnist5k:{s}" for s in ("clt", "clv")}
    cfg = Settings(datasets={"MNIST": "mnist5k"}, pools={"MNIST": ["logreg_pca"]}, severities=[1], master_seed=0,
                   voter_seed=42, corruption_options={}, release_dirs={})
    ctx = C.Context.of(cfg, SMOKE)
    _, seen = capture_plan(monkeypatch, C.benchmark_runs, ctx, ["MNIST"], "nlt")
    called = [(kind, replace(params, table)) for kind, params in rec.calls]
    assert len(called) == 4 and all(call in [(k, replace(p, {})) for k, p in seen] for call in called)


def test_downstream_identity_is_the_call_sites_parameters(tmp_path, monkeypatch):
    """ciln.downstream.run keys a run by run_params; the plan calls it with the scenario's sources for the data."""
    from ciln.downstream import Scenario, ScenarioSpec, run

    cfg = notebook_settings("ciln", "08_downstream", "smoke")
    images, labels, clean = np.zeros((4, 32, 32, 3), np.uint8), np.array([0, 1, 2, 3]), np.array([0, 1, 2, 0])
    scenario = Scenario("CILN-S frost (1) clean-img", "CILN-S", "frost (1)", "clean", images, labels, clean,
                        np.arange(4), (images, labels, clean))
    fake = {"ciln-downstream": {"history_test_acc": np.array([0.5]), "history_val_acc": np.array([0.5])}}
    rec = Recorder(tmp_path, fake)
    run(scenario, "coteaching", cfg, seed=0, test=(images, labels), cache=rec)
    spec = ScenarioSpec(scenario.name, "CILN-S", "frost (1)", "clean", "frost", 1)
    plannedscenario = C.PlannedScenario(spec, {"source": "nlt"}, 4, 4, 0.1, {"source": "nlv"})
    ctx = C.Context.of(cfg, SMOKE)
    _, seen = capture_plan(monkeypatch, C.downstream_runs, ctx, [(plannedscenario, "coteaching", 0, None)])
    table = {data_fingerprint(images, labels): "data", scenario.noise_rate: plannedscenario.noise_rate}
    (kind, params), = rec.calls
    expected = replace(params, table) | {"data": {"source": "nlt"}, "test": f"{C.dataset('mnist32rgb', '/x').ref}:test",
                                         "val": {"source": "nlv"}}
    assert seen == [(kind, expected)]
