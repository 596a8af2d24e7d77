"""CILN's cost plan: every run each notebook executes, with its steps, for ``python -m shared.cost ciln``.

``plan(notebook, cfg, params)`` (``shared.cost``'s contract) names the runs a notebook touches through the functions
its page calls: the paper datasets a page loads (``Page.benchmark_names``, ``panel_datasets``, ``CifarPage``'s
splits), a benchmark's voters (``ciln.voters.parse_pool``) and settings (``ciln.benchmark.benchmark_settings``,
``checked_options``, ``votes_params``), the references (``reference_counts``, ``plidn_votes``) and the downstream
runs (each page's ``scenario_args`` and ``run_grid`` over ``ciln.downstream.scenario_specs``, keyed by
``run_params``). The kinds are those ``shared.runlog`` records:

========================  ====================================================================================
kind                      one run
========================  ====================================================================================
``ciln-voter``            a trained voter: a torch recipe (``_train_torch``), a scikit-learn stand-in, DeiT3-Small
                          fine-tuned at 224 px, XGBoost, CatBoost, the RTDL MLP or FT-Transformer (CLIP and
                          TabPFN train nothing and are not cached: their cost is in the votes)
``ciln-votes``            every voter's probabilities on one split's rows under one setting (clean or corrupted,
                          Algorithm 1), and on the clean test split (the voters' accuracy)
``ciln-pseudo-human``     the simulated annotators standing in for CIFAR-10H (smoke)
``ciln-fallible-raters``  PL-IDN's stand-in: 10 fallible raters per tier voting on test, NLT and NLV (smoke)
``ciln-plidn-release``    one tier of Gu et al.'s PL-IDN release parsed from its TFRecord shards (full)
``ciln-downstream``       ERM, Co-Teaching or DivideMix trained on a scenario's labels (Table II, III, Fig. 8)
========================  ====================================================================================

**Identities.** A cache key hashes the contents of a run's inputs (the rows' images and labels) and the code; the
plan never loads the data, so its identity is ``params_key(kind, params)`` of the call site's own parameters
(``votes_params``, ``run_params``, the voter's recipe) with each data fingerprint replaced by what determines that
data: the dataset's name (and data folder, for the real ones), the split, and for a scenario the benchmark and label
source it is drawn from. Two runs have equal identities exactly when their keys are equal for the same code, so
the runs one notebook shares with another (the voter pools, 08's and 09's Co-Teaching runs) are one identity.

**Sizes.** The rows of each split come from ``ciln.benchmark.DATASET_SIZES`` (the official releases and the
offline stand-ins) through the same ``gu_five_way_split``; a real dataset present under ``data_dir`` (the
rehearsal data) is loaded for its sizes. Where a count depends on what the voters predict, the paper's value is
used: CILN-C keeps 17,469 of 22,500 NLT rows (Sec. 3.5), PL-IDN's release labels 19,987 of them, and DivideMix's
labelled set is taken to be the rows its label noise leaves (1 - the paper's noise rate of the setting).

**Steps** follow the code: optimizer steps are ``epochs * ceil(rows / batch)`` (``train_epoch`` keeps the last
batch; Co-Teaching and DivideMix's MixMatch drop it), every prediction pass is ``ceil(rows / batch)`` batches at its
own batch size (``predict_logits``: 512; DeiT: ``infer_batch``; CLIP: 256; the RTDL networks: 4,096), priced by the
rows it holds (``shared.cost.Work.rows``: a split of 140 rows is 140/512 of a full batch; TabPFN's chunks, which
carry a fixed training context, as full ones), and mixed precision (fp16) applies where the code uses ``amp_scaler``
on CUDA: the torch voters, DeiT's fine-tuning, the downstream learners' training (ERM, Co-Teaching, DivideMix; none
with ``train: {amp: false}``, ``TrainSetup.amp``) and the two-network learners' inference
(``Method.mixed_precision``: accuracy, the logged and DivideMix's per-sample losses); ERM's and the voters'
inference run in fp32. ``device: auto`` is taken as CUDA in the full profile (where it is priced on a GPU) and as
the CPU otherwise. Steps of networks ``shared.workloads`` has no family or architecture for (the Adult pool's
FT-Transformer and TabPFN v1) are planned as ``ProposedWorkload`` s: counted, with their key, but not priced until
the family exists; scikit-learn, XGBoost and CatBoost fits, the corruptions and the references' simulated raters are
work without a torch step (counted, not priced).
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from shared.cache import params_key
from shared.cost import PlannedRun, Work, batched
from shared.errors import ConfigError, DataNotFoundError, unknown_choice
from shared.workloads import ProposedWorkload, planned_workload

VOTER, VOTES, DOWNSTREAM = "ciln-voter", "ciln-votes", "ciln-downstream"
PSEUDO_HUMAN, RATERS, RELEASE = "ciln-pseudo-human", "ciln-fallible-raters", "ciln-plidn-release"

# The paper's CIFAR-10 counts a plan needs before the voters have voted (spec Sec. 3.5 and 3.8): the clean-start
# subset (CILN-C) keeps 17,469 of the 22,500 NLT rows; PL-IDN's release labels 19,987 of them (its train split).
CLEAN_START_SHARE = 17_469 / 22_500
PLIDN_RELEASE_NLT_SHARE = 19_987 / 22_500
UNKNOWN_NOISE_RATE = 0.5  # DivideMix's labelled share for a setting whose noise rate the paper does not report


def plan(notebook: str, cfg, params: dict) -> list[PlannedRun]:
    """The runs ``notebook`` (a stem, "08_downstream") executes under its merged settings ``cfg`` and papermill
    ``params`` (profile, data_dir, device, settings)."""
    planners: dict[str, Callable[[Context], list[PlannedRun]]] = {
        "01_benchmark": _plan_all_benchmarks, "02_examples": _plan_panel_benchmarks,
        "03_label_distributions": _plan_all_benchmarks, "04_sorted_profiles": _plan_panel_benchmarks,
        "05_nth": _plan_all_benchmarks, "06_tv": _plan_tv, "07_pca": _plan_pca, "08_downstream": _plan_downstream,
        "09_attractors": _plan_attractors, "10_loss_distributions": _plan_loss_distributions}
    if notebook not in planners:
        raise unknown_choice("CILN notebook", notebook, planners)
    return planners[notebook](Context.of(cfg, params))


@dataclass(frozen=True)
class Context:
    """A notebook's settings, its data folder (resolved) and whether it runs on CUDA."""

    cfg: Any
    data_dir: str
    cuda: bool

    @classmethod
    def of(cls, cfg, params: dict) -> Context:
        from shared.paths import data_dir

        device = str(params.get("device") or "auto")
        if device == "auto":  # priced where the profile runs: a GPU for the full profile, the CPU otherwise
            cuda = params.get("profile", "smoke") == "full"
        elif device == "cpu" or device.startswith("cuda"):
            cuda = device.startswith("cuda")
        else:
            raise ConfigError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")
        return cls(cfg, str(data_dir(params.get("data_dir")).resolve()), cuda)

    def amp(self) -> str:
        """The precision of a step under ``amp_scaler`` (fp16 autocast on CUDA only)."""
        return "fp16" if self.cuda else "fp32"


# ------------------------------------------------------------------------------------------ the notebooks
def _plan_all_benchmarks(ctx: Context) -> list[PlannedRun]:
    """01, 03, 05: every paper dataset's benchmark on the NLT rows (``Page.benchmarks``, all of ``cfg.datasets``)."""
    return benchmark_runs(ctx, None, "nlt")


def _plan_panel_benchmarks(ctx: Context) -> list[PlannedRun]:
    """02, 04: the benchmarks of the figure's panels' datasets (``panel_datasets``)."""
    from ciln.pages.examples import panel_datasets

    return benchmark_runs(ctx, panel_datasets(ctx.cfg), "nlt")


def _plan_tv(ctx: Context) -> list[PlannedRun]:
    """06: the test-split benchmark, the human reference and PL-IDN's votes on the test images (``tiers``)."""
    return benchmark_runs(ctx, ["CIFAR10"], "test") + reference_runs(ctx) + plidn_runs(ctx, "test")


def _plan_pca(ctx: Context) -> list[PlannedRun]:
    """07: the test-split benchmark, the human reference and PL-IDN's marginals (``tier_votes``: its test votes,
    or its NLT rows where the real release labels no test image)."""
    test = plidn_runs(ctx, "test")
    return benchmark_runs(ctx, ["CIFAR10"], "test") + reference_runs(ctx) + (
        test if ctx.cfg.plidn != "release" else plidn_runs(ctx, "nlt"))


def _plan_downstream(ctx: Context) -> list[PlannedRun]:
    """08: Table II's characteristics (NLT and test benchmarks, the reference, PL-IDN on NLT and test) and every
    scenario x learner x seed (``scenario_args``, ``run_grid``), each with its noisy NLV rows."""
    from ciln.pages.downstream import run_grid, scenario_args

    runs = _cifar_sources(ctx) + benchmark_runs(ctx, ["CIFAR10"], "test") + reference_runs(ctx)
    runs += plidn_runs(ctx, "test")
    return runs + downstream_runs(ctx, run_grid(ctx.cfg, _scenarios(ctx, scenario_args(ctx.cfg))))


def _plan_attractors(ctx: Context) -> list[PlannedRun]:
    """09: Table III on the NLT benchmark and PL-IDN's top tier, and Co-Teaching's runs (shared with 08)."""
    from ciln.pages.attractors import run_grid, scenario_args

    return _cifar_sources(ctx) + downstream_runs(ctx, run_grid(ctx.cfg, _scenarios(ctx, scenario_args(ctx.cfg))))


def _plan_loss_distributions(ctx: Context) -> list[PlannedRun]:
    """10: DivideMix on Figure 8's scenarios and on a symmetric-noise control rate-matched to one of them."""
    from ciln.pages.loss_distributions import CONTROL_OF, run_grid, scenario_args

    scenarios = _scenarios(ctx, scenario_args(ctx.cfg))
    if len(scenarios) <= CONTROL_OF:
        raise ConfigError(f"10_loss_distributions needs at least {CONTROL_OF + 1} scenarios (fig8_settings x "
                          f"fig8_image_source) for its symmetric control, got {len(scenarios)}")
    controls = [scenarios[CONTROL_OF].symmetric_control()]
    return _cifar_sources(ctx) + downstream_runs(ctx, run_grid(ctx.cfg, scenarios, controls))


def _cifar_sources(ctx: Context) -> list[PlannedRun]:
    """What a downstream page reads before it trains: the NLT benchmark (``bench``), PL-IDN's NLT votes
    (``raters``) and the NLV rows of every scenario (``validation_rows``: the NLV benchmark and PL-IDN's NLV votes)."""
    return (benchmark_runs(ctx, ["CIFAR10"], "nlt") + plidn_runs(ctx, "nlt") + benchmark_runs(ctx, ["CIFAR10"], "nlv")
            + plidn_runs(ctx, "nlv"))


# ------------------------------------------------------------------------------------------ data
@dataclass(frozen=True)
class Data:
    """One dataset as the plan sees it: its rows per split, one input's tensor shape and its classes."""

    name: str
    ref: str  # what identifies its contents: the name, and the data folder for a real dataset
    train: int
    test: int
    image: tuple[int, ...] | None  # (H, W) or (H, W, C) uint8 images; None for Adult's tables
    classes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """A voter's input tensor: (C, H, W) for images (``as_tensor``), (columns,) for tables."""
        if self.image is None:
            from shared.datasets.real import ADULT_CATEGORICAL, ADULT_NUMERIC

            return (len(ADULT_NUMERIC) + len(ADULT_CATEGORICAL),)
        return (1, *self.image) if len(self.image) == 2 else (self.image[2], self.image[0], self.image[1])

    def rows(self, split: str) -> int:
        """Rows of a split: "clt", "nlt", "clv", "nlv" (``gu_five_way_split`` of the train pool) or "test"."""
        return self.test if split == "test" else _split_sizes(self.train, self.classes)[split]

    def part(self, split: str) -> str:
        """What stands for ``data_fingerprint`` of a split's rows in an identity."""
        return f"{self.ref}:{split}"


@cache
def _split_sizes(n: int, classes: int) -> dict[str, int]:
    """The sizes of ``gu_five_way_split`` on ``n`` rows (stratified sizes do not depend on the labels' values)."""
    import numpy as np

    from ciln.splits import gu_five_way_split

    return {k: len(v) for k, v in gu_five_way_split(np.arange(n) % max(classes, 2)).items()}


def dataset(name: str, data_dir: str) -> Data:
    """``name`` (a ``shared.datasets`` name the profiles use): sizes from the data where a real dataset is present
    under ``data_dir``, else from ``ciln.benchmark.DATASET_SIZES``."""
    return _dataset(name, data_dir)


@cache
def _dataset(name: str, data_dir: str) -> Data:
    from ciln.benchmark import DATASET_SIZES
    from shared.datasets import DATASETS, load_dataset

    if name not in DATASET_SIZES:
        raise ConfigError(f"no size for dataset {name!r} in ciln.benchmark.DATASET_SIZES (known: "
                          f"{', '.join(DATASET_SIZES)}); add its train and test rows there to plan its runs")
    train, test, image = DATASET_SIZES[name]
    real = name in DATASETS and DATASETS[name].kind == "real"
    classes = 2 if image is None else 10
    if real:
        try:  # the data present (the rehearsal's small files, or the real ones): its own sizes
            ds = load_dataset(name, data_dir=data_dir)
            train, test, classes = len(ds.train.y), len(ds.test.y), len(ds.classes)
            image = None if image is None else tuple(ds.train.X.shape[1:])
        except DataNotFoundError:
            pass
    return Data(name, f"{name}@{data_dir}" if real else name, train, test, image, classes)


# ------------------------------------------------------------------------------------------ workloads
def workload(family: str, arch: str, phase: str, batch: int, shape, precision: str = "fp32", **options):
    """``shared.workloads.planned_workload``: a ``Workload``, or a ``ProposedWorkload`` for a kind not registered."""
    return planned_workload(family, arch, phase, batch, shape, precision, **options)


def _batches(rows: int, batch: int) -> int:
    return math.ceil(rows / batch) if rows > 0 else 0


def _default(fn, name: str):
    """The default of parameter ``name`` of ``fn`` (the code's own batch sizes and hyperparameters)."""
    return inspect.signature(fn).parameters[name].default


def _predict_batch() -> int:
    from shared.training import predict_logits

    return _default(predict_logits, "batch_size")


# ------------------------------------------------------------------------------------------ voters
@dataclass(frozen=True)
class VoterPlan:
    """A voter of a pool: its training run (None where nothing is cached) and its inference on ``n`` rows."""

    name: str
    run: PlannedRun | None
    infer: Callable[[int], tuple[Work, ...]]


def pool_plan(ctx: Context, data: Data, pool) -> list[VoterPlan]:
    """Every voter of ``pool`` (``parse_pool``) on ``data``, as ``train_pool`` trains it: on CLT, selected on CLV,
    with ``cfg.voter_seed``."""
    from ciln.voters import VOTERS, parse_pool

    out = []
    tabular = data.image is None
    for name, overrides in parse_pool(pool):
        if name not in VOTERS:
            raise unknown_choice("voter", name, VOTERS)
        spec = VOTERS[name]
        if (spec.modality == "tabular") != tabular:
            raise ConfigError(f"voter {name} is for {spec.modality} data; the dataset is "
                              f"{'tabular' if tabular else 'images'}")
        if spec.kind in ("pretrained", "tabular_full"):  # fit_pretrained_voter / fit_tabular_voter check the keys
            unknown = sorted(set(overrides) - set(spec.recipe))
            if unknown:
                raise ConfigError(f"unknown recipe keys {unknown} for voter {name!r}; valid keys: "
                                  f"{', '.join(spec.recipe)}")
        recipe = dict(spec.recipe, **overrides)
        out.append(_voter_plan(ctx, data, spec, recipe))
    return out


def _voter_params(ctx: Context, data: Data, name: str, recipe: dict) -> dict:
    """``train_voter``'s cache parameters with the CLT and CLV fingerprints replaced by their rows' names."""
    return {"voter": name, "recipe": recipe, "seed": ctx.cfg.voter_seed, "num_classes": data.classes,
            "data": data.part("clt"), "val": data.part("clv")}


def _voter_plan(ctx: Context, data: Data, spec, recipe: dict) -> VoterPlan:
    name, kind = spec.name, spec.kind
    n_clt = data.rows("clt")
    label = f"voter {name} on {data.name}"
    if kind == "sklearn":
        work = (Work(None, 0, n_clt, what=f"scikit-learn fit of {name} on {n_clt} rows"),)
        return VoterPlan(name, _voter_run(ctx, data, name, recipe, label, work),
                         lambda n: (Work(None, 0, n, what=f"{name} predict_proba"),))
    if kind == "torch":
        return _torch_voter(ctx, data, name, recipe, label)
    if name == "deit3_small":
        return _deit_voter(ctx, data, recipe, label)
    if name == "clip_vit_b32":  # zero-shot: nothing trained or cached; images resized on the device
        size, batch = recipe["image_size"], recipe["infer_batch"]
        infer = workload("vit_infer", "clip_vit_b32", "infer", batch, (3, size, size), source=data.image[0])
        return VoterPlan(name, None, lambda n: (batched(infer, n, what="CLIP ViT-B/32 zero-shot"),))
    return _tabular_voter(ctx, data, name, recipe, label)


def _voter_run(ctx, data, name, recipe, label, work) -> PlannedRun:
    return PlannedRun(VOTER, params_key(VOTER, _voter_params(ctx, data, name, recipe)), label, tuple(work))


def _torch_voter(ctx: Context, data: Data, name: str, recipe: dict, label: str) -> VoterPlan:
    """``_train_torch``: ``epochs`` passes of ``train_epoch`` over CLT (last batch kept), each followed by the CLV
    accuracy (``predict_proba``, 512 rows a batch); fp16 AMP on CUDA; inference in fp32."""
    arch, epochs, batch, K = recipe["arch"], recipe["epochs"], recipe["batch"], data.classes
    n_clt, n_clv, eval_batch = data.rows("clt"), data.rows("clv"), _predict_batch()
    if arch == "mlp":
        flat = (math.prod(data.shape),)
        mlp = {"hidden": tuple(recipe.get("hidden", (128,))), "num_classes": K}
        train = workload("tabular_mlp", "mlp", "train", batch, flat, ctx.amp(), dropout=float(recipe.get("dropout", 0.0)),
                         optimizer=recipe["optimizer"], **mlp)
        infer = workload("tabular_mlp", "mlp", "infer", eval_batch, flat, **mlp)
    else:
        width = {"width": recipe["width"]} if "width" in recipe else {}
        train = workload("cifar_resnet", arch, "train", batch, data.shape, ctx.amp(), num_classes=K,
                         optimizer=recipe["optimizer"], augment="crop_flip" if recipe.get("augment") else "none",
                         **width)
        infer = workload("cifar_resnet", arch, "infer", eval_batch, data.shape, num_classes=K, **width)
    work = (Work(train, epochs * _batches(n_clt, batch), epochs * n_clt, what=f"{epochs} epochs on CLT"),
            batched(infer, n_clv, times=epochs, what="CLV accuracy after every epoch"))
    return VoterPlan(name, _voter_run(ctx, data, name, recipe, label, work),
                     lambda n: (batched(infer, n, what=f"{name} predict_proba"),))


def _deit_voter(ctx: Context, data: Data, recipe: dict, label: str) -> VoterPlan:
    """``_finetune_deit``: ``epochs`` passes over CLT in DataLoader batches of ``batch`` (an odd last batch loses
    one image, a last batch of one is skipped: Mixup pairs images), fp16 AMP on CUDA; CLV accuracy after every
    epoch and all inference in fp32 at ``infer_batch``, every image resized to ``image_size`` on the CPU."""
    size, batch, epochs, infer_batch = recipe["image_size"], recipe["batch"], recipe["epochs"], recipe["infer_batch"]
    n_clt, n_clv, K = data.rows("clt"), data.rows("clv"), data.classes
    steps = n_clt // batch + (1 if n_clt % batch >= 2 else 0)
    options = {"num_classes": K} if K != 10 else {}
    train = workload("vit_train", "deit3_small", "train", batch, (3, size, size), ctx.amp(),
                     drop_path=float(recipe["drop_path"]), **options)
    infer = workload("vit_infer", "deit3_small", "infer", infer_batch, (3, size, size), **options)
    # the weight file is part of the key through its digest: the setting and the folder it is read from stand in
    recipe = dict(recipe, weights=f"{recipe['weights']}@{ctx.data_dir}" if recipe["weights"] == "default"
                  else str(recipe["weights"]))
    work = (Work(train, epochs * steps, epochs * n_clt, what=f"fine-tuning, {epochs} epochs on CLT at {size} px"),
            batched(infer, n_clv, times=epochs, what="CLV accuracy after every epoch"))
    return VoterPlan("deit3_small", _voter_run(ctx, data, "deit3_small", recipe, label, work),
                     lambda n: (batched(infer, n, what=f"DeiT3-Small at {size} px"),))


def _tabular_voter(ctx: Context, data: Data, name: str, recipe: dict, label: str) -> VoterPlan:
    """The paper's Adult voters (``ciln.voters_tabular``)."""
    from ciln.voters_tabular import TorchTabularVoter
    from shared.datasets.real import ADULT_CATEGORICAL, ADULT_NUMERIC

    n_clt, n_clv, K = data.rows("clt"), data.rows("clv"), data.classes
    if name in ("xgboost", "catboost"):  # CPU fits with early stopping on CLV
        trees = recipe["n_estimators" if name == "xgboost" else "iterations"]
        work = (Work(None, 0, n_clt, what=f"{name} fit: up to {trees} trees on {n_clt} rows, early stopping on CLV"),)
        return VoterPlan(name, _voter_run(ctx, data, name, recipe, label, work),
                         lambda n: (Work(None, 0, n, what=f"{name} predict_proba"),))
    if name == "tabpfn":  # no training; each member scores the rows in chunks of predict_batch
        # full steps (no Work.rows): every chunk also carries the member's 1,000-row training context, whose cost
        # does not shrink with the chunk's rows
        chunk, members = recipe["predict_batch"], recipe["members"]
        step = workload("tabpfn", "tabpfn_v1", "infer", chunk, (recipe["max_features"],),
                        train_rows=recipe["subsample"], ensemble=recipe["n_ensemble_configurations"])
        return VoterPlan(name, None, lambda n: (
            Work(step, members * _batches(n, chunk), members * n, what=f"TabPFN v1, {members} members"),))
    # rtdl_mlp / ft_transformer: up to max_epochs of AdamW over CLT (batch 256; early stopping after ``patience``
    # epochs without a better CLV accuracy may end sooner), CLV accuracy after every epoch
    batch, epochs = recipe["batch"], recipe["max_epochs"]
    eval_batch = _default(TorchTabularVoter.__init__, "batch_size")
    if name == "rtdl_mlp":
        mlp = {"hidden": tuple(recipe["layers"]), "num_classes": K}
        width = (len(ADULT_NUMERIC) + len(ADULT_CATEGORICAL) * recipe["d_embedding"],)
        train = workload("tabular_mlp", "mlp", "train", batch, width, dropout=float(recipe["dropout"]),
                         optimizer="adamw", **mlp)
        infer = workload("tabular_mlp", "mlp", "infer", eval_batch, width, **mlp)
    else:
        train = workload("rtdl", "ft_transformer", "train", batch, data.shape, n_blocks=recipe["n_blocks"],
                         num_classes=K, optimizer="adamw")
        infer = workload("rtdl", "ft_transformer", "infer", eval_batch, data.shape, n_blocks=recipe["n_blocks"],
                         num_classes=K)
    work = (Work(train, epochs * _batches(n_clt, batch), epochs * n_clt, what=f"at most {epochs} epochs on CLT"),
            batched(infer, n_clv, times=epochs, what="CLV accuracy after every epoch"))
    return VoterPlan(name, _voter_run(ctx, data, name, recipe, label, work),
                     lambda n: (batched(infer, n, what=f"{name} predict_proba"),))


# ------------------------------------------------------------------------------------------ benchmarks
def benchmark_runs(ctx: Context, names, split: str) -> list[PlannedRun]:
    """``load_benchmarks(cfg, names, split=split)``: per paper dataset (all of ``cfg.datasets`` for None) read
    from a release folder (no run) or generated (``dataset_benchmark_runs``)."""
    from ciln.splits import SPLIT_NAMES

    cfg = ctx.cfg
    if split not in SPLIT_NAMES:
        raise unknown_choice("benchmark split", split, SPLIT_NAMES)
    names = list(cfg.datasets) if names is None else list(names)
    unknown = [n for n in names if n not in cfg.datasets]
    if unknown:
        raise ConfigError(f"unknown paper dataset(s) {unknown}; configured: {', '.join(cfg.datasets)}")
    releases = cfg.get("release_dirs") or {}
    # a dataset with a release folder is read from it (ciln.release.read_release): nothing is computed
    return [run for name in names if not releases.get(name) for run in dataset_benchmark_runs(ctx, name, split)]


def dataset_benchmark_runs(ctx: Context, name: str, split: str) -> list[PlannedRun]:
    """``generate_benchmark`` of paper dataset ``name`` on ``split``: its voters, the clean and every setting's
    votes on the split's rows, and the votes on the clean test split that give the voters' accuracy."""
    from ciln.benchmark import benchmark_settings, checked_options, votes_params
    from ciln.corruptions import domain_of

    cfg = ctx.cfg
    data = dataset(cfg.datasets[name], ctx.data_dir)
    domain = domain_of(data.name)
    settings = benchmark_settings(domain, "all", cfg.severities)
    options = checked_options(domain, (cfg.get("corruption_options") or {}).get(name))
    voters = pool_plan(ctx, data, cfg.pools[name])

    def votes_run(split: str, setting=None) -> PlannedRun:
        n = data.rows(split)
        base = {"dataset": data.name, "split": split, "data": data.part(split), "pool": cfg.pools[name],
                "voter_seed": cfg.voter_seed, "master_seed": cfg.master_seed}
        params = votes_params(base, setting, options.get(setting[0]) if setting else None)
        what = "clean" if setting is None else f"{setting[0]} ({setting[1]})"
        work = tuple(w for v in voters for w in v.infer(n))
        if setting is not None:
            work = (Work(None, 0, n, what=f"corrupting {n} rows: {what}"), *work)
        return PlannedRun(VOTES, params_key(VOTES, params), f"{name} {split} votes, {what}", work)

    runs = [v.run for v in voters if v.run is not None]
    runs += [votes_run(split)] + [votes_run(split, s) for s in settings]
    if split != "test":
        runs.append(votes_run("test"))  # the voters' accuracy on the clean test split
    return runs


# ------------------------------------------------------------------------------------------ references
def reference_runs(ctx: Context) -> list[PlannedRun]:
    """``reference_counts``: CIFAR-10H is read (no run); the pseudo-human stand-in is simulated and cached."""
    from ciln.references import pseudo_human_counts

    cfg = ctx.cfg
    if cfg.reference == "cifar10h":
        return []
    if cfg.reference != "pseudo_human":
        raise unknown_choice("human reference", cfg.reference, ["cifar10h", "pseudo_human"])
    data = dataset(cfg.datasets["CIFAR10"], ctx.data_dir)
    params = {k: _default(pseudo_human_counts, k) for k in ("annotators", "target_error", "seed")}
    params.update(cfg.pseudo_human)
    work = Work(None, 0, data.train + data.test, what=f"PCA-64 and {params['annotators']} logistic-regression "
                "annotators on 60 % of CLT + CLV, votes on the test split")
    return [PlannedRun(PSEUDO_HUMAN, params_key(PSEUDO_HUMAN, _reference_params(params, data)),
                       "pseudo-human annotators", (work,))]


def _reference_params(params: dict, data: Data) -> dict:
    """``ciln.references._cached``'s parameters with the data fingerprints replaced by the dataset's name."""
    return dict(params, dataset=data.name, data=data.part("train"), test=data.part("test"))


def plidn_runs(ctx: Context, items: str) -> list[PlannedRun]:
    """``plidn_votes(cfg, ds, items=...)``: the fallible-rater stand-in (one cached artifact voting on every item
    set) or the release, one parsed tier per ``cfg.raters["tiers"]`` (the release labels no test image: nothing)."""
    from ciln.plidn import LEVELS, SOURCES
    from ciln.references import fallible_rater_votes

    cfg = ctx.cfg
    if items not in ("nlt", "nlv", "test"):
        raise unknown_choice("PL-IDN items", items, ["nlt", "nlv", "test"])
    data = dataset(cfg.datasets["CIFAR10"], ctx.data_dir)
    if cfg.plidn == "fallible_raters":
        params = {"tiers": cfg.raters["tiers"], "n_raters": cfg.raters["n_raters"],
                  "seed": _default(fallible_rater_votes, "seed")}
        work = Work(None, 0, data.train + data.test, what=f"PCA-64 and {cfg.raters['n_raters']} MLP raters per tier, "
                    "calibrated on NLV + NLT, voting on test, NLT and NLV")
        return [PlannedRun(RATERS, params_key(RATERS, _reference_params(params, data)), "fallible raters", (work,))]
    if cfg.plidn != "release":
        raise unknown_choice("plidn source", cfg.plidn, SOURCES)
    if items == "test":
        return []  # NoPlidnLabels is raised before any shard is read
    out = []
    for tier in cfg.raters["tiers"]:
        if tier not in LEVELS:
            raise unknown_choice("PL-IDN tier", tier, LEVELS)
        folder = f"{ctx.data_dir}/plidn/cifar10/{LEVELS[tier]}"
        out.append(PlannedRun(RELEASE, params_key(RELEASE, {"folder": folder}), f"PL-IDN release {tier}",
                              (Work(None, 0, data.train, what=f"parsing the TFRecord shards of tier {tier}"),)))
    return out


# ------------------------------------------------------------------------------------------ downstream
@dataclass(frozen=True)
class PlannedScenario:
    """A scenario without its data: its spec (``scenario_specs``), what its rows and labels are drawn from
    (``source``: stands for the data fingerprints), its rows, its NLV rows and its noise rate (the paper's)."""

    spec: Any
    source: dict
    rows: int
    val_rows: int | None
    noise: float
    val_source: dict | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def noise_rate(self) -> str:  # ``method_hparams`` gives Co-Teaching the scenario's noise rate (data-dependent)
        return f"noise rate of {self.name}"

    def symmetric_control(self) -> PlannedScenario:
        """``symmetric_control``: the same rows on clean images, symmetric labels at the same rate, no NLV rows."""
        from ciln.downstream import ScenarioSpec

        spec = ScenarioSpec(f"symmetric control of {self.name}", "symmetric", self.spec.setting, "clean")
        return PlannedScenario(spec, {"symmetric": self.source, "seed": 0}, self.rows, None, self.noise)


def _scenarios(ctx: Context, args: dict) -> list[PlannedScenario]:
    """``CifarPage.scenarios_of(args)``: ``scenario_specs(**args)`` with their rows, on the NLT rows of CIFAR-10
    (or ``downstream_rows`` of them), each with its NLV rows (``validation_rows``)."""
    from ciln.downstream import scenario_specs

    cfg = ctx.cfg
    data = dataset(cfg.datasets["CIFAR10"], ctx.data_dir)
    n, n_val = data.rows("nlt"), data.rows("nlv")
    subset = cfg.downstream_rows if cfg.downstream_rows is not None and cfg.downstream_rows < n else None
    release = cfg.plidn == "release"
    noise = _paper_noise_rates()
    options = (cfg.get("corruption_options") or {}).get("CIFAR10") or {}
    bench = {"dataset": data.ref, "pool": cfg.pools["CIFAR10"], "voter_seed": cfg.voter_seed,
             "master_seed": cfg.master_seed}
    plidn = ({"release": ctx.data_dir} if release else
             {"fallible_raters": cfg.raters["tiers"], "n_raters": cfg.raters["n_raters"], "data": data.ref})
    out = []
    for spec in scenario_specs(**args):
        if spec.benchmark == "PL-IDN":
            share, val_share = (PLIDN_RELEASE_NLT_SHARE if release else 1.0), 1.0
            rate = cfg.raters["tiers"].get(spec.tier, UNKNOWN_NOISE_RATE)
            source = {"plidn": plidn, "tier": spec.tier}
        else:
            share = val_share = CLEAN_START_SHARE if spec.benchmark == "CILN-C" else 1.0
            rate = noise.get((spec.benchmark, spec.corruption, spec.severity), UNKNOWN_NOISE_RATE)
            source = dict(bench, setting=[spec.corruption, spec.severity], options=options.get(spec.corruption))
        rows = round((subset if subset is not None else n) * share)
        out.append(PlannedScenario(spec, dict(source, rows="nlt", subset=subset), rows, round(n_val * val_share), rate,
                                   dict(source, rows="nlv", plidn_nlv=plidn)))
    return out


@cache
def _paper_noise_rates() -> dict[tuple, float]:
    """(CILN-S / CILN-C, corruption, severity) -> the paper's CIFAR-10 noise rate (``reported/settings.csv``)."""
    from shared.report import reported

    table = reported("ciln", "settings")
    table = table[(table["dataset"] == "CIFAR10") & table["metric"].isin(["noise_rate", "noise_rate_C"])]
    return {("CILN-S" if m == "noise_rate" else "CILN-C", c, int(s)): float(v)
            for c, s, m, v in zip(table["corruption"], table["severity"], table["metric"], table["value"])}


def downstream_runs(ctx: Context, grid: list[tuple]) -> list[PlannedRun]:
    """One ``ciln-downstream`` run per (scenario, method, seed, variant) of a page's ``run_grid``."""
    from ciln.downstream import run_params

    cfg = ctx.cfg
    data = dataset(cfg.datasets["CIFAR10"], ctx.data_dir)
    out = []
    for scenario, method, seed, variant in grid:
        params = run_params(scenario, method, cfg, seed=seed, variant=variant, data=scenario.source,
                            test=data.part("test"), val=scenario.val_source if scenario.val_rows is not None else None)
        label = f"{method}{f' ({variant})' if variant else ''} on {scenario.name}, seed {seed}"
        out.append(PlannedRun(DOWNSTREAM, params_key(DOWNSTREAM, params), label,
                              _learner_work(ctx, data, scenario, method, params["hparams"])))
    return out


def _learner_work(ctx: Context, data: Data, scenario: PlannedScenario, method: str, hp: dict) -> tuple[Work, ...]:
    """The steps of ``Method.fit`` (``ciln.downstream.run``): per epoch the method's training steps, then each
    network's accuracy on the test split and the NLV rows (``predict_logits``), and the per-sample losses of
    network 1 at ``log_losses_at``. With ``train.amp`` (default true) on CUDA every learner trains in fp16 and the
    two-network learners also infer in fp16 (``Method.mixed_precision``); ERM infers in fp32."""
    from shared.methods import METHODS
    from shared.methods.coteaching import CoTeaching

    if method not in METHODS:
        raise unknown_choice("method", method, METHODS)
    if method not in ("erm", "coteaching", "dividemix"):
        raise ConfigError(f"the CILN plan knows the steps of erm, coteaching and dividemix, not {method!r}")
    train = ctx.cfg.train
    epochs, B, n = train["epochs"], train["batch_size"], scenario.rows
    arch, eval_batch = train["arch"], _predict_batch()
    width = {"width": train["width"]} if arch == "tiny_cnn" else {}
    augment = "crop_flip" if train.get("crop_pad", 4) else "none"

    amp = ctx.amp() if train.get("amp", True) else "fp32"  # TrainSetup.amp (ciln.downstream._setup)

    def step(**options):
        return workload("cifar_resnet", arch, "train", B, data.shape, amp, augment=augment, **width, **options)

    infer = workload("cifar_resnet", arch, "infer", eval_batch, data.shape, "fp32" if method == "erm" else amp, **width)
    nets = 1 if method == "erm" else 2
    logged = sum(1 for e in train.get("log_losses_at", ()) if e < epochs)
    # inference walks each split in batches of at most eval_batch: priced by its rows (Work.rows)
    work = [batched(infer, (data.test, scenario.val_rows or 0), times=epochs * nets,
                    what="accuracy on the test split and the NLV rows after every epoch"),
            batched(infer, n, times=logged, what="per-sample losses logged")]
    if method == "erm":  # shared.training.train_epoch: the last batch kept, fp16 AMP on CUDA
        work.insert(0, Work(step(), epochs * _batches(n, B), epochs * n, what="ERM"))
    elif method == "coteaching":  # two networks, one step each per batch; the last, smaller batch dropped; AMP on CUDA
        per_epoch = n // B if hp.get("drop_last", _default(CoTeaching.__init__, "drop_last")) and n >= B else \
            _batches(n, B)
        work.insert(0, Work(step(), 2 * epochs * per_epoch, 2 * epochs * n, what="Co-Teaching, two networks"))
    else:
        work[:0] = _dividemix_work(scenario, hp, epochs, B, n, step, infer, augment != "none")
    return tuple(w for w in work if w.steps or w.examples)


def _dividemix_work(scenario, hp, epochs, B, n, step, infer, augmented: bool) -> list[Work]:
    """``DivideMix``: ``warmup`` cross-entropy epochs of both networks; then per epoch both networks' per-sample
    losses (the division) and, for each network, a MixMatch pass over its labelled rows (``labelled // B`` steps,
    each on B labelled + B unlabelled rows x ``k`` views, with 3k no-grad passes of B rows for the guesses; k = 2
    for the official variant with augmentation, else 1), or a cross-entropy epoch where either set is smaller
    than a batch. The labelled set is taken as the rows the label noise leaves: n (1 - the paper's noise rate)."""
    from shared.methods.dividemix import DivideMix

    warmup = min(epochs, hp.get("warmup", _default(DivideMix.__init__, "warmup")))
    variant = hp.get("variant", _default(DivideMix.__init__, "variant"))
    mix_epochs = epochs - warmup
    labelled = round(n * (1 - scenario.noise))
    k = 2 if variant == "official" and augmented else 1
    out = [Work(step(), 2 * warmup * _batches(n, B), 2 * warmup * n, what=f"DivideMix warm-up, {warmup} epochs"),
           batched(infer, n, times=2 * mix_epochs, what="per-sample losses of both networks (the division)")]
    if labelled >= B and n - labelled >= B:
        steps = labelled // B
        out.append(Work(step(views=2 * k, nograd=3 * k), 2 * mix_epochs * steps, 2 * mix_epochs * steps * 2 * B,
                        views=k, what=f"MixMatch ({variant}), ~{labelled} labelled rows per network"))
    else:
        out.append(Work(step(), 2 * mix_epochs * _batches(n, B), 2 * mix_epochs * n,
                        what="cross-entropy epochs (a set smaller than a batch)"))
    return out


__all__ = ["CLEAN_START_SHARE", "DOWNSTREAM", "PLIDN_RELEASE_NLT_SHARE", "PSEUDO_HUMAN", "RATERS", "RELEASE", "VOTER",
           "VOTES", "Context", "Data", "PlannedScenario", "ProposedWorkload", "VoterPlan", "benchmark_runs", "dataset",
           "dataset_benchmark_runs", "downstream_runs", "plan", "plidn_runs", "pool_plan", "reference_runs",
           "workload"]
