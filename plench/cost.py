"""Plench's cost plan: every run each notebook executes, with its steps, for ``python -m shared.cost plench``.

``plan(notebook, cfg, params)`` (``shared.cost``'s contract) enumerates the runs through the functions the
notebook's page calls: ``reports.tabular_grids`` / ``reports.image_grids`` / ``reports.validation_use_grid``
give the ``protocol.Grid`` of each sweep, ``Grid.run_args`` its runs (trial seeds x datasets x algorithms x
hyperparameter draws, ``protocol.sweep_args``, which also names the stack a run trains in with ``batched``),
``reports.validation_training_args`` Figure 1's "training" arm, ``reports.speedup_calls`` the batching measurement
and ``reports.compat_check_calls`` the PiCO+/ALIM check. Each becomes the run that
``shared.runlog`` records:

========================  ===================================================================================
kind                      one run
========================  ===================================================================================
``plench-run``            one run of a sweep (02, 03, 04's "validation" arm): ``protocol.train_run`` or a
                          member of ``train_runs_batched``; logged by ``protocol._SweepWorker`` / ``sweep``
``plench-training-arm``   one run of 04's "training" arm (validation rows trained on, ``shared.sweep.launch``)
``plench-speedup``        one ``protocol.measure_batched_speedup`` call (02: per batch size, 2 x configs runs)
``plench-compat-check``   one ``reports.train_model`` of 03's PiCO+/ALIM check (per algorithm and compat)
========================  ===================================================================================

Identities. A run's log key is its folder name, ``shared.sweep.args_hash`` of its ``run_args`` (the speed-up
and compat-check models: the hash of what they train, ``protocol.speedup_args`` / ``reports.compat_check_key``).
Sweeps that train runs alone share one folder per kind (``plench.store``): a run two notebooks define (03's and
04's full ResNet-32 runs on PLCIFAR10) is trained once, so its planned identity is the folder, the datasets it
trains on (by name; the folder is keyed by their contents, ``plench.store.data_key``) and the key,
``plench-sweeps/shared/runs/<dataset+dataset>/<hash>``, priced once in a paper's total ("shared once") and, in the
per-notebook rows, by the first notebook that plans it. A stacked run's ``run_args`` name its stack
(``protocol.sweep_args``), so it is shared only with notebooks that form the same stack: 03's and 04's full
ResNet-32 stacks are the same. The speed-up and compat-check models are the notebook's own:
``<notebook>/speedup/<hash>``, ``<notebook>/compat_check/<hash>``.

Work of a run (``run_work``). ``steps`` optimizer steps of the batch size its hyperparameters draw (Table 8:
``2**int(U(6, 9))`` for the image networks, ``2**int(U(5, 8))`` for the MLP; the defaults 256 and 128), every
step a full batch (``CyclicLoader`` drops the last partial batch); per step the passes each algorithm makes
(``shared.workloads.PLENCH_IMAGE_PASSES``: forward-backward passes of the batch and no-grad forwards, e.g.
DIRK's student on two views and its teacher on two; VALEN and PiCO+ by phase, ``step_passes``), and the views
it builds per image (``Algorithm.views``: PRODEN 1 (weak), PiCO 2 (weak, strong), DIRK 3 (+ distill); the
tabular views are the features themselves: 1). A checkpoint (every ``checkpoint_freq`` steps and the last)
evaluates the validation and test rows in batches of 512 (``protocol.EVAL_BATCH_SIZE``).

Precision. A run's precision is the notebook's ``precision`` setting resolved against the device the plan is for
(``params["device"]``: "cpu", "cuda[:N]" or "auto", which is this machine's: CUDA if available), exactly as the
notebook resolves it (``protocol.resolve_precision``): "auto" gives bf16 mixed precision on CUDA and fp32
elsewhere, "fp32" is the official behaviour. A bf16 run names its precision in its ``run_args`` (so its identity
differs from the fp32 run's, and every CPU run keeps its identity) and its work is priced as bf16 workloads,
the conv nets channels_last as the protocol keeps them (FLOPs are counted the same way; the rate is the device's
bf16 one); an fp32 run as fp32 workloads.

Sizes come from the dataset registry (``plench.data.PLL_DATASETS``: Table 5's rows, features and classes,
PLCIFAR10's 10,000 test images) unless a real dataset's files are present (the rehearsal's stand-ins), which are
then loaded; the stand-ins of the smoke profile are generated with exactly the registry's sizes (tested). The
splits are ``plench_split``'s (and ``validation_as_training``'s) on a data-less copy of that size.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from plench import protocol, reports, store
from plench.algorithms import ALGORITHMS
from plench.data import PLLDataset, load_pll_dataset, plench_split, pll_dataset_spec
from plench.hparams import hparam_for
from shared import sweep as runs
from shared.cost import PlannedRun, Work, batched
from shared.errors import ConfigError, DataNotFoundError, unknown_choice

RUN = protocol.RUN_KIND
SPEEDUP = protocol.SPEEDUP_KIND
TRAINING_ARM = reports.TRAINING_ARM_KIND
COMPAT_CHECK = reports.COMPAT_CHECK_KIND
# The sweep folders every notebook shares (plench.store: Page.records_dir; 04's "training" arm)
RECORDS, TRAINING_ARM_DIR = store.RUNS, store.TRAINING_ARM
IMAGE_ARCHS = ("resnet32", "densenet_bc")      # plench.networks' CIFAR networks: shared.workloads' cifar_resnet
DIGITS_FAMILY = "plench_digits_cnn"            # the smoke profile's 8x8 CNN (registered below; see the report)


def plan(notebook: str, cfg, params: dict) -> list[PlannedRun]:
    """The runs ``notebook`` (a stem, "03_image") executes under its merged settings ``cfg`` and papermill
    ``params`` (profile, data_dir, device, settings). ``params["device"]`` (default "auto", the notebooks')
    resolves the ``precision`` setting, hence the runs' identities and workloads."""
    planners: dict[str, Callable] = {"00_datasets": _plan_nothing, "01_selection_theory": _plan_nothing,
                                     "02_tabular": _plan_tabular, "03_image": _plan_image,
                                     "04_validation_use": _plan_validation_use}
    if notebook not in planners:
        raise unknown_choice("Plench notebook", notebook, planners)
    device = params.get("device") or "auto"
    protocol.device_type(device)  # an unknown device is a ConfigError here, as in the notebook
    return planners[notebook](notebook, cfg, params.get("data_dir"), device)


# ------------------------------------------------------------------------------------------ the notebooks
def _plan_nothing(notebook, cfg, data_dir, device) -> list[PlannedRun]:
    """00 (Tables 5, 6, 8, Fig. 2) reads the datasets and the registries; 01 (Prop. 1, Thms. 1-2) is Monte Carlo
    with numpy: nothing is trained or cached."""
    return []


def _plan_tabular(notebook, cfg, data_dir, device) -> list[PlannedRun]:
    """02 (Tables 7, 9-16, Fig. 3): per grid of ``tabular_grids`` (the paper: 20 algorithms x 20 configurations x
    5 splits on each of 9 PALM tables, 10,000 or 20,000 steps; plus EXP/MCL fixed), then the batching speed-up."""
    sizes = dataset_sizes(cfg["datasets"], None, data_dir)
    out = []
    for grid in reports.tabular_grids(cfg):
        out += sweep_runs(notebook, RECORDS, grid, sizes, device)
    out += speedup_runs(notebook, cfg, sizes, device)
    return out


def _plan_image(notebook, cfg, data_dir, device) -> list[PlannedRun]:
    """03 (Tables 1-4): one sweep per network and algorithm (the paper: 26 algorithms x 20 configurations x 3 splits
    on both PLCIFAR10 versions with ResNet-32 and DenseNet, 60,000 steps each), then the PiCO+/ALIM check."""
    sizes = dataset_sizes(cfg["datasets"], "image", data_dir)
    out = []
    for grid in reports.image_grids(cfg):
        out += sweep_runs(notebook, RECORDS, grid, sizes, device)
    timed = reports.figure4_datasets(cfg, list(sizes))
    for grid in reports.figure4_grids(cfg):  # Figure 4's runs alone, when the sweep stacks
        out += sweep_runs(notebook, RECORDS, grid, sizes, device, only=timed)
    out += compat_check_runs(notebook, cfg, sizes, device)
    return out


def _plan_validation_use(notebook, cfg, data_dir, device) -> list[PlannedRun]:
    """04 (Fig. 1(a, b)): the "validation" arm's random search and the "training" arm's one run per split."""
    sizes = dataset_sizes(cfg["datasets"], cfg["modality"], data_dir)
    grid, common = reports.validation_use_grid(cfg)
    out = sweep_runs(notebook, RECORDS, grid, sizes, device)
    stubs = [size.stub() for size in sizes.values()]
    for args in reports.validation_training_args(stubs, list(cfg["algorithms"]), **common, device=device):
        moved = sizes[args["dataset"]].validation_in_training()
        out.append(PlannedRun(TRAINING_ARM, identity(notebook, TRAINING_ARM_DIR, runs.args_hash(args), datasets=sizes),
                              _label(args, "training arm"), tuple(run_work(moved, args))))
    return out


# ------------------------------------------------------------------------------------------ the runs
def identity(notebook: str, folder: str, key: str, *, datasets=()) -> str:
    """A run's planned identity: its run-log ``key`` in ``folder``, a sweep folder (``RECORDS``, ``TRAINING_ARM_DIR``:
    the same for every notebook training on the same ``datasets``, ``plench.store``) or one of ``notebook``'s own
    ("speedup", "compat_check")."""
    if folder in (RECORDS, TRAINING_ARM_DIR):
        return f"{store.ROOT}/shared/{folder}/{'+'.join(sorted(datasets))}/{key}"
    return f"{notebook}/{folder}/{key}"


def _label(args: dict, what: str = "") -> str:
    return (f"{args['dataset']} {args['algorithm']} {args['arch']} hparams {args['hparams_seed']} trial "
            f"{args['trial_seed']} {args['steps']:,} steps{' compat' if args['compat'] else ' fixed'}"
            + (f" ({what})" if what else ""))


def sweep_runs(notebook: str, folder: str, grid: protocol.Grid, sizes: dict[str, DataSize],
               device="cpu", only: Sequence[str] | None = None) -> list[PlannedRun]:
    """The runs of one ``protocol.sweep`` call for ``grid`` on the datasets ``sizes`` (``only``: on these of them,
    in the folder of all) on ``device``, as ``sweep`` trains them (which are stacked), each with its work."""
    trained = [size for name, size in sizes.items() if only is None or name in only]
    args_list = grid.run_args([size.stub() for size in trained], device,
                              widths={n: s.width for n, s in sizes.items()})
    stack = Counter(args["stack"] for args in args_list if "stack" in args)
    return [PlannedRun(RUN, identity(notebook, folder, runs.args_hash(args), datasets=sizes), _label(args),
                       tuple(run_work(sizes[args["dataset"]], args, stack=stack.get(args.get("stack"), 1))))
            for args in args_list]


def speedup_runs(notebook: str, cfg, sizes: dict[str, DataSize], device="cpu") -> list[PlannedRun]:
    """02's ``batched_speedup``: per batch size one ``measure_batched_speedup`` call, which trains the first
    configuration 2 steps alone and the first two 2 steps stacked (untimed warm-up), then every configuration
    alone and all of them stacked."""
    out = []
    for call in reports.speedup_calls(list(sizes), cfg["speedup"], checkpoint_freq=cfg["checkpoint_freq"],
                                      precision=reports.precision_setting(cfg), device=device):
        size, configs = sizes[call["dataset"]], [tuple(c) for c in call["configs"]]

        def member(h, t, steps, freq, call=call):
            return protocol.run_args(call["dataset"], call["algorithm"], arch="mlp", hparams_seed=h, trial_seed=t,
                                     steps=steps, checkpoint_freq=freq, compat=call["compat"],
                                     hparams_overrides=call["hparams_overrides"],
                                     precision=call.get("precision", "fp32"))

        stacked = protocol.algorithm_stacks(call["algorithm"])
        work = run_work(size, member(*configs[0], 2, 1))
        for h, t in configs[:2]:
            work += run_work(size, member(h, t, 2, 1), stack=min(2, len(configs)) if stacked else 1)
        for h, t in configs:
            work += run_work(size, member(h, t, call["steps"], call["checkpoint_freq"]))
            work += run_work(size, member(h, t, call["steps"], call["checkpoint_freq"]),
                             stack=len(configs) if stacked else 1)
        label = (f"{call['dataset']} {call['algorithm']} batch size {call['hparams_overrides']['batch_size']}: "
                 f"{len(configs)} configurations x {call['steps']} steps, alone and stacked")
        out.append(PlannedRun(SPEEDUP, identity(notebook, "speedup", runs.args_hash(call)), label,
                              tuple(merge(work))))
    return out


def compat_check_runs(notebook: str, cfg, sizes: dict[str, DataSize], device="cpu") -> list[PlannedRun]:
    """03's ``image_compat_check``: per algorithm and compat one ``train_model`` of ``steps`` steps (no
    checkpoints), on Fig. 4's network; nothing when its dataset is not among the notebook's."""
    check = cfg["compat_check"]
    if check["dataset"] not in sizes:
        return []
    arch, size = cfg["fig4"]["arch"], sizes[check["dataset"]]
    calls = reports.compat_check_calls(check["algorithms"], arch=arch, steps=check["steps"],
                                       overrides={a: reports.image_overrides(cfg, a) for a in check["algorithms"]},
                                       precision=reports.precision_setting(cfg), device=device)
    out = []
    for call in calls:
        args = protocol.run_args(size.name, call["algorithm"], arch=arch, hparams_seed=0, trial_seed=0,
                                 steps=call["steps"], checkpoint_freq=call["steps"], compat=call["compat"],
                                 hparams_overrides=call["hparams_overrides"], precision=call.get("precision", "fp32"))
        out.append(PlannedRun(COMPAT_CHECK, identity(notebook, "compat_check",
                                                     reports.compat_check_key(size.name, call)),
                              _label(args, "compat check"), tuple(run_work(size, args, evaluate=False))))
    return out


# ------------------------------------------------------------------------------------------ dataset sizes
@dataclass(frozen=True)
class DataSize:
    """A dataset as a run sees it: the network's input shape, classes, rows (and a fixed test set's rows, or None:
    the test rows are split off), the registry's steps, and the rows of its split: ``train``, ``val`` and ``test``
    of ``plench_split`` (the same for every trial seed)."""

    name: str
    modality: str
    input_shape: tuple[int, ...]
    classes: int
    examples: int
    test_examples: int | None
    steps: int
    train: int = 0
    val: int = 0
    test: int = 0

    def __post_init__(self):
        split = plench_split(self.stub(), 0)
        test = len(split["test"]) if split["test"] is not None else self.test_examples
        for name, value in (("train", len(split["train"])), ("val", len(split["val"])), ("test", test)):
            object.__setattr__(self, name, int(value))

    def stub(self) -> PLLDataset:
        """A data-less ``PLLDataset`` of this size (no features), for the split functions and ``sweep_args``."""
        test = None if self.test_examples is None else (np.empty((self.test_examples, 0), np.float32),
                                                         np.zeros(self.test_examples, np.int64))
        return PLLDataset(self.name, np.empty((self.examples, 0), np.float32),
                          np.zeros((self.examples, self.classes), np.uint8), np.zeros(self.examples, np.int64),
                          tuple(str(j) for j in range(self.classes)), self.modality, test, self.steps)

    @property
    def width(self) -> int:
        """``protocol.data_width``: input features plus classes."""
        return math.prod(self.input_shape) + self.classes

    def validation_in_training(self) -> DataSize:
        """The dataset ``reports.validation_as_training`` makes of this one (Fig. 1's "training" arm): its split
        trains on the original training and validation rows; its test set is the original split's test rows."""
        return _moved(self)


@cache
def _moved(size: DataSize) -> DataSize:
    moved = reports.validation_as_training(size.stub(), 0)
    return DataSize(size.name, size.modality, size.input_shape, size.classes, len(moved), len(moved.test[1]),
                    size.steps)


def dataset_sizes(names, modality: str | None, data_dir) -> dict[str, DataSize]:
    """``DataSize`` of every dataset of the settings, as ``load_available(names, data_dir, modality)`` would load
    it (every one planned as present): a real dataset whose files are there is loaded (the rehearsal's
    stand-ins), the others are sized from the registry."""
    return {name: _size(name, modality, None if data_dir is None else str(data_dir)) for name in names}


@cache
def _size(name: str, modality: str | None, data_dir: str | None) -> DataSize:
    spec = pll_dataset_spec(name)
    modality = modality or spec.modality
    if modality != spec.modality and (modality == "tabular" or spec.image_size is None):
        raise ConfigError(f"{name} has no {modality} form; load it with modality={spec.modality!r}")
    if spec.kind == "real":
        try:
            ds = load_pll_dataset(name, data_dir, modality)
        except DataNotFoundError:  # the pricing machine has no data: the registry's sizes
            pass
        else:
            shape = tuple(ds.X.shape[1:])
            shape = shape if len(shape) == 1 else (shape[2], shape[0], shape[1])  # RunData.input_shape
            return DataSize(name, modality, shape, ds.num_classes, len(ds),
                            None if ds.test is None else len(ds.test[1]), ds.steps)
    if spec.examples is None or spec.classes is None:
        raise ConfigError(f"the registry entry of {name} has no size; add it to plench.data.PLL_DATASETS")
    return DataSize(name, modality, spec.input_shape(modality), spec.classes, spec.examples, spec.test_examples,
                    spec.steps)


# ------------------------------------------------------------------------------------------ the work of a run
@dataclass(frozen=True)
class Phase:
    """``steps`` optimizer steps that each make ``passes`` forward-backward passes and ``nograd`` no-grad forwards
    of the batch; ``cpu``: whole-split work at the phase's start (VALEN's kNN graph)."""

    steps: int
    passes: int
    nograd: int
    what: str = ""
    cpu: str = ""


def step_passes(algorithm: str, hparam: Callable[[str], object], *, compat: bool, steps: int,
                n_train: int) -> list[Phase]:
    """The phases of a run of ``algorithm`` whose hyperparameter ``name`` is ``hparam(name)``:
    ``shared.workloads.PLENCH_IMAGE_PASSES`` (counted by hooking the networks during ``update``) for every
    algorithm but VALEN; PiCO+ adds its mixup pass after ``prot_start`` unless ``compat`` (whose ``curr_iter``
    never advances). A stacked step (``train_runs_batched``) makes the same passes as a run alone."""
    from shared.workloads import PLENCH_IMAGE_PASSES

    if algorithm == "VALEN":
        return _valen_phases(hparam, compat=compat, steps=steps, n_train=n_train)
    if algorithm not in PLENCH_IMAGE_PASSES:
        raise unknown_choice("algorithm with known passes", algorithm, PLENCH_IMAGE_PASSES)
    passes, nograd, _ = PLENCH_IMAGE_PASSES[algorithm]
    if algorithm == "PiCO_plus" and not compat:  # robust_loss: a mixup forward from prot_start on
        warm = min(steps, int(hparam("prot_start")))
        return [p for p in (Phase(warm, 1, 1, "warm-up"), Phase(steps - warm, 2, 1, "robust loss")) if p.steps]
    return [Phase(steps, passes, nograd)]


def _valen_phases(hparam: Callable[[str], object], *, compat: bool, steps: int, n_train: int) -> list[Phase]:
    """VALEN (``holistic.VALEN.phase``): warm-up steps (t < warm_up), feature collection (one no-grad featurizer
    forward while t < warm_up + n_train / batch_size + 1), the kNN graph at the next step, then variational steps:
    the network's forward-backward and the encoder's forward (frozen with compat, trained without)."""
    warm_up = int(hparam("warm_up"))
    collect_end = warm_up + n_train / hparam("batch_size") + 1
    graph = math.ceil(collect_end)
    warm = min(steps, warm_up)
    collect = max(0, min(steps, graph) - warm_up)
    phases = [Phase(warm, 1, 0, "warm-up"), Phase(collect, 0, 1, "feature collection")]
    if graph < steps:
        phases.append(Phase(1, 0, 0, "kNN graph", cpu="VALEN kNN graph of the training features"))
        phases.append(Phase(steps - graph - 1, 1 if compat else 2, 1 if compat else 0, "variational"))
    return [p for p in phases if p.steps]


def checkpoints(steps: int, checkpoint_freq: int) -> int:
    """How many steps ``protocol.is_checkpoint`` marks: every multiple of ``checkpoint_freq`` and the last."""
    protocol._check_schedule(steps, checkpoint_freq)
    return (steps - 1) // checkpoint_freq + 1 + (1 if (steps - 1) % checkpoint_freq else 0)


def run_work(size: DataSize, args: dict, *, stack: int = 1, evaluate: bool = True,
             eval_batch_size: int = protocol.EVAL_BATCH_SIZE) -> list[Work]:
    """The work of one run with ``protocol.run_args`` ``args`` on data of ``size``: its training steps (one
    ``Work`` per phase and pass kind) and, with ``evaluate``, its checkpoints' evaluation passes, in the run's
    precision (``args["precision"]``: bf16 runs name it, fp32 runs do not). ``stack``: the runs trained with it as
    one model (``train_runs_batched``; 1: alone), whose training steps share their operators' dispatch."""
    algorithm, arch, steps = args["algorithm"], args["arch"], int(args["steps"])
    precision = args.get("precision", "fp32")
    overrides = args.get("hparams_overrides") or {}

    def hp(name: str):  # the run's hyperparameter (protocol.setup_run: hparams_for, then the overrides)
        if name in overrides:
            return overrides[name]
        return hparam_for(name, algorithm, arch, hparams_seed=args["hparams_seed"], trial_seed=args["trial_seed"],
                          dataset=args["dataset"], compat=args["compat"])

    batch = int(hp("batch_size"))
    n_train, n_val, n_test = size.train, size.val, size.test
    if n_train < batch:  # protocol.CyclicLoader refuses it
        raise ConfigError(f"{args['dataset']}: the training split has {n_train} rows, fewer than the batch size "
                          f"{batch} of {algorithm}; use a smaller batch_size (hparams_overrides)")
    views = _views_built(algorithm, size.modality)
    work = []
    for phase in step_passes(algorithm, hp, compat=args["compat"], steps=steps, n_train=n_train):
        what = f"{algorithm} {phase.what}".strip()
        if phase.cpu:
            work.append(Work(None, 0, n_train, what=phase.cpu))
            continue
        examples = phase.steps * batch
        if arch == "mlp":  # tabular_mlp has no nograd option: the extra forwards are inference steps
            if phase.passes:
                work.append(Work(workload(size, arch, "train", batch, precision=precision), phase.steps * phase.passes,
                                 examples, views, what=f"{what}: {phase.passes} forward-backward pass(es) per step",
                                 stack=stack))
            if phase.nograd:
                work.append(Work(workload(size, arch, "infer", batch, precision=precision), phase.steps * phase.nograd,
                                 0 if phase.passes else examples, views,
                                 what=f"{what}: {phase.nograd} no-grad forward(s) per step", stack=stack))
        elif phase.passes:
            step = workload(size, arch, "train", batch, algorithm=algorithm, passes=phase.passes, nograd=phase.nograd,
                            precision=precision)
            # a stack's members share the network's operators (the counted ones: forward and backward)
            work.append(Work(step, phase.steps, examples, views, what=what, stack=stack))
        else:
            work.append(Work(workload(size, arch, "infer", batch, precision=precision), phase.steps * phase.nograd,
                             examples, views, what=what))
    if evaluate:
        n = checkpoints(steps, int(args["checkpoint_freq"]))
        # each checkpoint walks both splits in batches of at most eval_batch_size: priced by its rows (Work.rows)
        work.append(batched(workload(size, arch, "infer", eval_batch_size, precision=precision), (n_val, n_test),
                            times=n, what=f"{n} checkpoints: OA, CR, AA on {n_val} validation rows, accuracy on "
                                          f"{n_test} test rows"))
    return work


def _views_built(algorithm: str, modality: str) -> int:
    """Views ``protocol.make_batch`` builds per training row: the algorithm's ``views`` for images (weak; weak +
    strong; weak + strong + distill), the features themselves for tabular data."""
    return 1 if modality == "tabular" else len(set(ALGORITHMS[algorithm].views))


@cache
def workload(size: DataSize, arch: str, phase: str, batch: int, *, algorithm: str | None = None, passes: int = 1,
             nograd: int = 0, precision: str = "fp32"):
    """The ``shared.workloads.Workload`` of a step of ``arch`` on ``size``'s inputs: the MLP (tabular_mlp),
    ResNet-32 / DenseNet-BC (cifar_resnet) or the digits CNN, with Adam, the algorithm's views, in the run's
    ``precision`` ("fp32", or "bf16" with the conv nets channels_last, as ``protocol.setup_run`` keeps them)."""
    from shared.workloads import Workload

    if arch == "mlp":
        return Workload("tabular_mlp", "mlp", phase, batch, (math.prod(size.input_shape),), precision,
                        {"num_classes": size.classes})
    family = "cifar_resnet" if arch in IMAGE_ARCHS else DIGITS_FAMILY if arch == "digits_cnn" else None
    if family is None:
        raise unknown_choice("Plench network", arch, ("mlp", *IMAGE_ARCHS, "digits_cnn"))
    if family == DIGITS_FAMILY:
        register_digits_family()
    options = {"num_classes": size.classes, **({"channels_last": True} if precision == "bf16" else {})}
    if phase == "train":
        options.update(optimizer="adam", augment="_".join(ALGORITHMS[algorithm].views), views=passes, nograd=nograd)
    return Workload(family, arch, phase, batch, size.input_shape, precision, options)


def merge(work: list[Work]) -> list[Work]:
    """Work items of the same workload and description summed (a run made of many short trainings)."""
    merged: dict[tuple, Work] = {}
    for w in work:
        key = (None if w.workload is None else w.workload.key, w.views, w.what)
        if key in merged:
            m = merged[key]
            rows = None if m.rows is None and w.rows is None else _rows(m) + _rows(w)
            merged[key] = Work(m.workload, m.steps + w.steps, m.examples + w.examples, m.views, None, m.what, rows)
        else:
            merged[key] = w
    return list(merged.values())


def _rows(w: Work) -> int:
    """The rows ``w``'s steps process: its ``rows``, or full batches where it has none."""
    return w.steps * w.workload.batch if w.rows is None else w.rows


# ------------------------------------------------------------------------------------------ the digits CNN
def register_digits_family() -> None:
    """Register ``DIGITS_FAMILY`` in ``shared.workloads``: the smoke profile's ``digits_cnn`` (two 3x3 convolutions,
    32 and 64 channels, global average pooling, a linear head) on 8x8 grey images with Plench's digits views;
    ``cifar_resnet``'s step otherwise. Until ``shared.workloads`` has it, it lives here."""
    from shared import workloads as W

    if DIGITS_FAMILY in W.FAMILIES:
        return

    class PlenchDigitsCNN(W.CifarResNet):
        name = DIGITS_FAMILY
        archs = ("digits_cnn",)

        def check(self, w) -> None:
            if len(w.shape) != 3:
                raise ConfigError(f"{w.family} workloads take images (C, H, W), got shape {w.shape}")
            o = w.opts
            if o["views"] < 1:
                raise ConfigError(f"{w.key}: views must be >= 1")
            if w.phase == "infer" and (o["views"] != 1 or o["nograd"] or o["augment"] != "none"):
                raise ConfigError(f"{w.key}: views, nograd and augment describe training steps")

        @staticmethod
        def model(w):
            import torch

            from plench import networks

            feat = networks.featurizer("digits_cnn", w.shape)
            return torch.nn.Sequential(feat, torch.nn.Linear(feat.n_outputs, w.opts["num_classes"]))

    W.register(PlenchDigitsCNN)


__all__ = ["COMPAT_CHECK", "RUN", "SPEEDUP", "TRAINING_ARM", "DataSize", "Phase", "checkpoints", "dataset_sizes",
           "identity", "merge", "plan", "run_work", "step_passes", "workload"]
