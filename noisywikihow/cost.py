"""NoisywikiHow's cost plan: every run each notebook executes, with its steps, for ``python -m shared.cost noisywikihow``.

``plan(notebook, cfg, params)`` (``shared.cost``'s contract) walks the grids the notebook's page trains
(``noisywikihow.grids.notebook_grids``, which the pages call too) and expands each ``run_grid`` call into the runs
``shared.runlog`` records when it executes:

=========================  ===============================================================================
kind                       one run
=========================  ===============================================================================
``noisywikihow-runs``      one (training set, method, seed, encoder, model) trained by ``experiments.train_run``
                           and cached by ``run_grid``: an MLP (or linear model, BiLSTM) on frozen features in the
                           smoke profile, one of the seven PLMs fine-tuned in the full profile
``text-embeddings``        frozen MiniLM embeddings (``shared.text.encoders.embed``; smoke): TinyHow's training
                           events and open-set pool, which rank the neighbours of the noise injection
                           (``noise_encoder: minilm``), and every text of the noised benchmark (``encoder: minilm``)
``noisywikihow-data``      the features a grid's jobs read from the cache (only with an ``executor``; planned as
                           a cold batch builds it, i.e. when the grid has runs to train)
=========================  ===============================================================================

**Identities.** A run's cache key is ``experiments.run_key(FeatureData.fingerprint, spec, training)``: the hash of
the feature arrays, the spec, the settings that can change that run (``Training.key``) and the code. The plan calls
the same ``run_key`` with a *described* fingerprint in place of the arrays' hash: a hash of what the arrays are made
from (the dataset: TinyHow's seed and noise encoder, or the release's folder; the encoder, or MiniLM's tokens for the
BiLSTM, or the PLM's tokenizer), so two plans' identities are equal exactly when the cache keys are (the base runs
shared by 01, 02, 03, 04 and 05 are one identity), without computing embeddings to plan. Embeddings are keyed by
their texts; their identity describes the texts the same way.

**Sizes** come from the loaders without embeddings: TinyHow's generator (``tinyhow.generate``, a few seconds; its
noisy sets have the training split's rows), the release through ``data.load_noisywikihow`` when it is under
``data_dir``, else the registry of ``noisywikihow.data`` (Table 3: 73,343 / 7,900 / 7,900 events, 158 classes, 50
per class in val and test; the largest class's 2,585 training events, Fig. 1). Every noisy training set has the
training split's rows (the release: one row per event).

**Steps follow ``shared.methods``** for the settings of each run (``hparams.method_config``, as ``train_run``):
an epoch is ``ceil(n / batch_size)`` batches (the last, partial batch kept; Co-teaching too, ``drop_last=False`` as
the official code). ``Work.steps`` counts forward-backward passes of one batch through one network:

- base, Mixup, Data Parameter, LDAM: one per batch; SR: ``sr_epochs`` (Tables 9/11: 20) epochs;
- Co-teaching and CNLCU: two networks, each forward-backward on every batch: two per batch (CNLCU's per-sample
  criteria, numpy KNN outliers on the CPU, are work without a torch step: counted, not priced);
- SEAL: ``seal_rounds`` x ``seal_epochs`` epochs (the official 4 x 10), and after every epoch the softmax of the
  whole training set (``ceil(n / 512)`` inference batches);
- BBN: the conventional and the reversed batch both go through the trunk: two per batch (and per evaluation);
- NCM / cRT / LWS: the base model's epochs (stage 1), then the frozen network over the training set once
  (``ceil(n / 512)``), and for cRT / LWS ``retrain_epochs`` (Table 13: 5) epochs of head-only steps over
  K x max_c N_c class-aware draws (observed labels; the real-noise sets keep the clean labels).

Evaluation (``Method.evaluate`` after every epoch, network 1 only for the two-network methods): val, test and the
test events of each source's classes, in batches of 512 (``predict_logits``), or of 100 for T5 writing its labels
(a 5-beam search, ``GENERATIVE_BATCH``); the per-sample losses after ``loss_epoch`` are one more pass over the
training set. The BiLSTM trains ``bilstm_epochs``.

**Workloads.** An MLP or linear model on frozen features: ``tabular_mlp`` (d,) (MiniLM 384, TF-IDF 128), fp32 (no
NoisywikiHow method autocasts it: every base-model step is clipped, through ``Method.step``). A PLM: ``text_encoder``
(the checkpoint's name as arch, ``num_labels`` 158, or ``task: seq2seq`` for T5 writing its labels) at the width
its batches pad to (``plm_width``: where the benchmark's texts and the PLM's tokenizer are at hand, the mean longest
event of a batch, ``shared.text.widths``; else (128,), ``plm.MAX_LENGTH``, the worst case), bf16 when ``bf16`` is
set and the run is on a GPU (``device`` cuda, or auto in the full profile); where the PLM's folder under
``data_dir`` (``plm.model_folder``) is not the checkpoint's size (the rehearsal's tiny random stand-ins), the
workloads carry its sizes (``plm_sizes``: ``shared.workloads`` size options such as ``layers=1,hidden=32``), so the
plan prices the model that runs; without a folder, or with the released checkpoint, the keys are the full
profile's. The BiLSTM: ``bilstm`` (not a family of ``shared.workloads`` yet; planned with a ``ProposedWorkload``
until one is registered, and unpriced until then).
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from shared.cost import PlannedRun, Work, batched
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.workloads import ProposedWorkload, planned_workload

EVAL_BATCH = 512  # shared.training.predict_logits' batch: Method.evaluate, per_sample_loss, SEAL's softmax, decoupling
ENCODE_BATCH = 64  # shared.text.encoders.embed's default batch_size (noisywikihow.features does not set it)
BILSTM_MAX_LENGTH = 128  # noisywikihow.bilstm.token_ids' max_length (padded to the longest text)
BILSTM_HIDDEN = 32  # noisywikihow.bilstm.BiLSTMClassifier's units per direction
TWO_PASS_METHODS = {"coteaching": "two networks, each a forward-backward pass of every batch",
                    "cnlcu": "two networks, each a forward-backward pass of every batch",
                    "bbn": "the conventional and the reversed batch both through the trunk"}
DECOUPLED = ("ncm", "crt", "lws")


def plan(notebook: str, cfg, params: dict) -> list[PlannedRun]:
    """The runs ``notebook`` (a stem, "03_lnl_realworld") executes under its merged settings ``cfg`` and papermill
    ``params`` (profile, data_dir, device, settings)."""
    from noisywikihow.experiments import Training
    from noisywikihow.grids import notebook_grids

    params = params or {}
    data_dir, device = params.get("data_dir"), params.get("device") or "auto"
    profile = params.get("profile") or cfg.get("profile", "smoke")
    training = Training.from_settings(cfg, device)
    grids = notebook_grids(notebook, cfg, training)
    bench = benchmark_sizes(cfg, data_dir)
    gpu = on_gpu(device, profile)
    runs: list[PlannedRun] = []
    if notebook == "00_dataset_and_noise" or grids:  # every page loads the benchmark (00 directly, the others to train)
        runs += noise_embedding_runs(cfg, bench)
    for grid in grids:
        features = features_of(bench, grid.encoder, grid.model, data_dir)
        if features.embedding is not None:
            runs.append(features.embedding)
        specs = list(dict.fromkeys(grid.specs))  # run_grid trains duplicates once
        if cfg.get("executor") and specs:  # the jobs read the features from the cache (run_grid's CACHE_DATA)
            runs.append(data_run(features))
        runs += [run_plan(features, spec, grid.training, bench, gpu) for spec in specs]
    return runs


# ------------------------------------------------------------------------------------------ the benchmark
@dataclass(frozen=True)
class BenchSizes:
    """What a plan needs of the benchmark: ``key`` describes its data (for identities); split sizes; ``test_sources``
    the test events per noise source (an evaluation set each, when non-empty); ``classes_present`` and
    ``largest_class`` of the training labels (class-aware sampling draws their product per epoch); distinct texts
    for MiniLM: ``pool_texts`` (TinyHow's training events and open-set pool; None for the release) and
    ``all_texts`` (every split and noisy set: exact when the noisy sets are loaded, else an upper bound)."""

    name: str
    key: str
    n_train: int
    n_val: int
    n_test: int
    test_sources: tuple[tuple[str, int], ...]
    num_classes: int
    classes_present: int
    largest_class: int
    pool_texts: int | None
    all_texts: int


def benchmark_sizes(cfg, data_dir=None) -> BenchSizes:
    """The benchmark the settings name (``dataset``), sized as the module docstring says."""
    from noisywikihow.sources import DATASETS

    if cfg.dataset == "tinyhow":
        return _tinyhow_sizes(int(cfg.tinyhow_seed), str(cfg.noise_encoder))
    if cfg.dataset == "noisywikihow":
        return _release_sizes(None if data_dir is None else str(data_dir), bool(cfg.get("official_counts", True)))
    raise unknown_choice("dataset", cfg.dataset, DATASETS)


@lru_cache(maxsize=4)
def _tinyhow_sizes(seed: int, noise_encoder: str) -> BenchSizes:
    """TinyHow(seed) from its generator; the noisy sets (which need the noise encoder's vectors) are not made: they
    have the training split's rows, and swap in at most ``_swaps`` open-set events."""
    from noisywikihow.tinyhow import generate

    bench, pool = generate(seed)
    splits = {*bench.train.texts, *bench.val.texts, *bench.test.texts}
    pool_distinct = len(set(pool.texts))
    return _sizes_of(bench, _hash("tinyhow", seed, noise_encoder), len({*bench.train.texts, *pool.texts}),
                     len(splits) + min(pool_distinct, _swaps(len(bench.train))), keep_texts=True)


@lru_cache(maxsize=4)
def _release_sizes(data_dir: str | None, official: bool) -> BenchSizes:
    """The release under ``data_dir`` through its loader, or, when it is absent, the registry's sizes."""
    from noisywikihow import data as release
    from noisywikihow.features import benchmark_texts
    from shared.paths import data_dir as resolve_data_dir

    try:
        bench = release.load_noisywikihow(data_dir, official=official)
    except DataNotFoundError:
        bench = None
    if bench is not None:
        return _sizes_of(bench, _hash("noisywikihow", bench.meta["path"]), None, len(set(benchmark_texts(bench)[0])),
                         keep_texts=True)
    n = release.OFFICIAL_SIZES
    per_class = release.OFFICIAL_EVAL_PER_CLASS
    sources = tuple((s, classes * per_class) for s, (classes, _) in release.TABLE3.items())
    folder = str(Path(resolve_data_dir(data_dir)).resolve())
    return BenchSizes("NoisywikiHow (registry sizes)", _hash("noisywikihow", folder), n["train"], n["val"], n["test"],
                      sources, release.OFFICIAL_CLASSES, release.OFFICIAL_CLASSES, release.OFFICIAL_LARGEST_CLASS,
                      None, sum(n.values()) + _swaps(n["train"]))


def _sizes_of(bench, key: str, pool_texts: int | None, all_texts: int, *, keep_texts: bool = False) -> BenchSizes:
    import numpy as np

    from noisywikihow.benchmark import SOURCES

    if keep_texts:  # what the PLMs' padded widths are measured on (plm_width)
        _TEXTS[key] = (tuple(bench.train.texts), tuple(bench.val.texts), tuple(bench.test.texts))
    test_source = bench.source[bench.test.labels]
    counts = np.bincount(bench.train.labels, minlength=bench.num_classes)
    return BenchSizes(bench.name, key, len(bench.train), len(bench.val), len(bench.test),
                      tuple((s, int((test_source == s).sum())) for s in SOURCES), int(bench.num_classes),
                      int((counts > 0).sum()), int(counts.max()), pool_texts, all_texts)


def _swaps(n_train: int) -> int:
    """An upper bound on the open-set events the real-noise sets swap in: round(t n) rows per ``mix_t`` and per
    single-source set (``injection.add_noise``'s sets)."""
    from noisywikihow.benchmark import LEVELS, SINGLE_SOURCE_FILES
    from noisywikihow.injection import SINGLE_SOURCE_LEVEL

    return sum(round(t * n_train) for t in LEVELS) + len(SINGLE_SOURCE_FILES) * round(SINGLE_SOURCE_LEVEL * n_train)


# ------------------------------------------------------------------------------------------ features
@dataclass(frozen=True)
class Features:
    """What the runs of one (encoder, model) read: the described ``fingerprint`` (see the module docstring), the
    feature width of frozen features (None for token ids), the embedding run that makes them (or None) and, for a
    PLM, the size options of the model folder the runs load (``plm_sizes``; empty: the checkpoint's size)."""

    encoder: str
    model: str
    fingerprint: str
    width: int | None
    embedding: PlannedRun | None
    sizes: tuple = ()  # a fine-tuned PLM's size options where its folder is not the checkpoint's size (plm_sizes)
    folder: str | None = None  # a fine-tuned PLM's folder under data_dir, where present (its tokenizer: plm_width)


def features_of(bench: BenchSizes, encoder: str, model: str, data_dir=None) -> Features:
    """``sources.encoded(bench, encoder, model=model)`` as a plan: the features and the embedding they need."""
    from noisywikihow.experiments import MODELS
    from noisywikihow.features import ENCODERS, TFIDF_DIM
    from noisywikihow.plm import PLMS
    from shared.paths import data_dir as resolve_data_dir
    from shared.text.encoders import embedding_dim

    if model not in MODELS:
        raise unknown_choice("model", model, MODELS)
    if model == "bilstm":
        if encoder != "minilm":
            raise ConfigError(f"the BiLSTM reads MiniLM's tokens and word embeddings: use encoder minilm, not {encoder!r}")
        return Features(encoder, model, _hash("features", bench.key, "minilm-tokens"), None, None)
    if encoder in PLMS:
        if model != "plm":
            raise ConfigError(f"model {model!r} cannot read {encoder!r} token ids: {MODELS[model]}")
        folder = str(Path(resolve_data_dir(data_dir)).resolve())
        return Features(encoder, model, _hash("features", bench.key, "plm", PLMS[encoder].hf_id, folder), None, None,
                        tuple(sorted(plm_sizes(encoder, data_dir).items())), plm_folder(encoder, data_dir))
    if encoder not in ENCODERS:
        raise unknown_choice("encoder", encoder, [*ENCODERS, *PLMS])
    if model == "plm":
        raise ConfigError("model 'plm' fine-tunes the encoder: set encoder to a language model (noisywikihow.plm.PLMS)")
    fingerprint = _hash("features", bench.key, encoder)
    if encoder == "tfidf":  # fitted in seconds, not cached: no run
        return Features(encoder, model, fingerprint, TFIDF_DIM, None)
    embedding = embedding_run(_hash("benchmark texts", bench.key), bench.all_texts,
                              f"MiniLM embeddings of {bench.name}'s splits and noisy sets")
    return Features(encoder, model, fingerprint, embedding_dim(), embedding)


def plm_sizes(encoder: str, data_dir=None) -> dict:
    """The size options of the PLM folder the runs load (``plm.model_folder(encoder, data_dir)``, as
    ``load_classifier`` and ``load_generator`` resolve it) where it is not the checkpoint's size: a rehearsal's
    tiny random stand-in (``shared.workloads.text_size_options``). ``{}`` without a folder or for the released
    checkpoint, whose workloads keep the full profile's keys."""
    from noisywikihow.plm import PLMS
    from shared.workloads import text_size_options

    folder = plm_folder(encoder, data_dir) if encoder in PLMS else None
    return {} if folder is None else text_size_options(_plm_arch(encoder), folder)


def plm_folder(encoder: str, data_dir=None) -> str | None:
    """The PLM's folder the runs load (``plm.model_folder``), or None where it is absent or unreadable."""
    from noisywikihow.plm import model_folder

    try:
        return str(model_folder(encoder, data_dir))
    except (DataNotFoundError, DataFormatError):
        return None


def _plm_arch(encoder: str) -> str:
    """The ``text_encoder`` architecture of a PLM (its Hugging Face id's last part: facebook/bart-base -> bart-base)."""
    from noisywikihow.plm import PLMS

    return PLMS[encoder].hf_id.split("/")[-1]


def noise_embedding_runs(cfg, bench: BenchSizes) -> list[PlannedRun]:
    """TinyHow's noise injection ranks neighbours with ``noise_encoder`` vectors of its training events and open-set
    pool (``sources._tinyhow``): MiniLM's are cached; the release ships its noise."""
    if cfg.dataset != "tinyhow" or cfg.noise_encoder != "minilm":
        return []
    return [embedding_run(_hash("tinyhow noise texts", int(cfg.tinyhow_seed)), bench.pool_texts,
                          f"MiniLM embeddings of {bench.name}'s training events and open-set pool (noise injection)")]


def embedding_run(texts_key: str, n: int, label: str) -> PlannedRun:
    """``embed`` of ``n`` distinct texts: chunks of 1,024 in batches of 64 (``shared.text.encoders._encode``)."""
    from shared.text import encoders

    chunk = encoders._ENCODE_CHUNK
    steps = (n // chunk) * math.ceil(chunk / ENCODE_BATCH) + math.ceil((n % chunk) / ENCODE_BATCH)
    work = Work(workload("text_encoder", "all-minilm-l6-v2", "infer", ENCODE_BATCH, (_minilm_max_length(),), "fp32",
                         {"task": "embed"}), steps, n, what="frozen all-MiniLM-L6-v2 sentence embeddings", rows=n)
    return PlannedRun(encoders.CACHE_KIND, _hash(encoders.CACHE_KIND, texts_key), f"{label} ({n:,} texts)", (work,))


def data_run(features: Features) -> PlannedRun:
    """``run_grid``'s ``CACHE_DATA`` entry of the features, which the executor's jobs read."""
    from noisywikihow.experiments import CACHE_DATA, data_params, feature_data
    from shared.cache import params_key

    key = params_key(CACHE_DATA, data_params(features.fingerprint), _code(feature_data))
    return PlannedRun(CACHE_DATA, key, f"{features.encoder} features for the jobs",
                      (Work(None, 0, 0, what="features written to the cache"),))


# ------------------------------------------------------------------------------------------ one run
def run_plan(features: Features, spec, training, bench: BenchSizes, gpu: bool) -> PlannedRun:
    """The run ``spec`` of ``run_grid(features, [spec], training)``: its cache identity and its steps."""
    from noisywikihow.experiments import CACHE_KIND, run_key, train_run

    identity = run_key(features.fingerprint, spec, training, _code(train_run))
    work, epochs = run_work(features, spec, training, bench, gpu)
    label = f"{spec.method} {spec.train_set} seed {spec.seed} ({spec.encoder} {spec.model}, {epochs} epochs)"
    return PlannedRun(CACHE_KIND, identity, label, work)


def run_work(features: Features, spec, training, bench: BenchSizes, gpu: bool) -> tuple[tuple[Work, ...], int]:
    """(the steps of ``train_run(data, spec, training)``, its training epochs), as ``shared.methods`` takes them."""
    from noisywikihow.experiments import method_schedule

    training, name, kwargs, epochs = method_schedule(spec, training)
    epochs = epochs or training.epochs
    total = epochs * kwargs["rounds"] if name == "seal" else epochs  # SEAL: epochs per round
    n, B = bench.n_train, training.batch_size
    batches = math.ceil(n / B)
    if name == "coteaching" and kwargs.get("drop_last", True) and n >= B:
        batches = n // B
    passes = 2 if name in TWO_PASS_METHODS else 1
    train, infer, scoring = _workloads(features, spec, training, bench, gpu)
    eval_rows = [bench.n_val, bench.n_test, *(c for _, c in bench.test_sources if c)]
    evaluations = total + ({"ncm": 1, "crt": kwargs.get("retrain_epochs", 0), "lws": kwargs.get("retrain_epochs", 0)}
                           .get(name, 0))
    eval_passes = 2 if name == "bbn" else 1  # BBN's inference feeds the input through both branches
    what = TWO_PASS_METHODS.get(name, "one network")
    # the no-grad passes walk a split in batches of at most their workload's batch (512, a generative T5's 100):
    # priced by the rows they hold (Work.rows)
    work = [Work(train, passes * total * batches, passes * total * n,
                 what=f"{spec.method} training, {total} epochs x {batches} batches of {B} ({what})"),
            batched(infer, eval_rows, times=eval_passes * evaluations,
                    what=f"evaluation after every epoch ({evaluations}): val, test and each source's test events")]
    if training.loss_epoch - 1 < total:  # TrainSetup.log_losses_at: per-sample losses of the training set
        work.append(batched(scoring, n, times=eval_passes,
                            what=f"per-sample training losses after epoch {training.loss_epoch}"))
    if name == "cnlcu":  # per batch and network: the loss history's KNN outliers and bounds, in numpy
        work.append(Work(None, 0, 2 * total * n, what="CNLCU's per-sample selection criteria on the CPU"))
    if name == "seal":  # the softmax of the whole training set after every epoch (the next round's soft labels)
        work.append(batched(infer, n, times=total, what="SEAL's training-set softmax"))
    if name in DECOUPLED:
        work.append(batched(infer, n, what="stage 2: the frozen network over the training set"))
        if name != "ncm":
            draws = bench.classes_present * bench.largest_class  # ClassAwareSampler: K x max_c N_c rows per epoch
            retrain = kwargs.get("retrain_epochs", 5)
            head = _head_workload(features, spec, training, bench, name)
            work.append(Work(head, retrain * math.ceil(draws / B), retrain * draws,
                             what=f"stage 2: {retrain} epochs of the {'classifier' if name == 'crt' else 'class scales'}"
                                  " on class-aware draws"))
    return tuple(work), total


def _workloads(features: Features, spec, training, bench: BenchSizes, gpu: bool):
    """(train, infer, scoring) workloads of the run's network: scoring is a no-grad pass that is not an evaluation
    (the per-sample losses): T5 writing its labels scores them teacher-forced, priced as T5 with a classification
    head (an encoder and a decoder pass), not as its beam search."""
    from noisywikihow.plm import MAX_LENGTH

    K, B = bench.num_classes, training.batch_size
    if spec.model in ("mlp", "linear"):
        hidden = tuple(training.hidden) if spec.model == "mlp" else ()
        shape = (features.width,)
        infer = workload("tabular_mlp", "mlp", "infer", EVAL_BATCH, shape, "fp32", {"hidden": hidden, "num_classes": K})
        return (workload("tabular_mlp", "mlp", "train", B, shape, "fp32",
                         {"hidden": hidden, "num_classes": K, "optimizer": "adamw"}), infer, infer)
    if spec.model == "bilstm":
        opts = {"embed_dim": _minilm_width(), "hidden": BILSTM_HIDDEN, "num_classes": K}
        infer = workload("bilstm", "bilstm", "infer", EVAL_BATCH, (BILSTM_MAX_LENGTH,), "fp32", opts)
        return workload("bilstm", "bilstm", "train", B, (BILSTM_MAX_LENGTH,), "fp32", opts), infer, infer
    arch, sizes = _plm_arch(spec.encoder), dict(features.sizes)
    precision = "bf16" if training.bf16 and gpu else "fp32"

    def width(batch: int, shuffled: bool) -> tuple[int]:
        return (plm_width(bench.key, spec.encoder, features.folder, batch, shuffled) or MAX_LENGTH,)

    if spec.generative(training):
        opts = {"task": "seq2seq", **sizes}
        G = _generative_batch()
        return (workload("text_encoder", arch, "train", B, width(B, True), precision, opts),
                workload("text_encoder", arch, "infer", G, width(G, False), precision, opts),
                workload("text_encoder", arch, "infer", G, width(G, False), precision, {"num_labels": K, **sizes}))
    opts = {"num_labels": K, **sizes}
    infer = workload("text_encoder", arch, "infer", EVAL_BATCH, width(EVAL_BATCH, False), precision, opts)
    return workload("text_encoder", arch, "train", B, width(B, True), precision, opts), infer, infer


_TEXTS: dict[str, tuple[tuple, tuple, tuple]] = {}  # benchmark key -> (train, val, test) texts (_sizes_of)


@lru_cache(maxsize=64)
def plm_width(bench_key: str, encoder: str, folder: str | None, batch: int, shuffled: bool) -> int | None:
    """The mean padded width of a PLM's batches of ``batch`` texts (``shared.text.widths``: shuffled, the training
    split's; in order, the evaluation sets'), rounded up: ``TextClassifier`` drops the columns that are padding in
    a whole batch, so a step works at its longest text, not at ``MAX_LENGTH``. None where the benchmark's texts or
    the PLM's tokenizer (``folder``) are not at hand: the plan then prices the worst case, ``MAX_LENGTH``.

    Approximations, each of texts of one kind: a noisy set's training batches are measured on the clean training
    split (the real-noise sets swap some events for open-set events, also one-sentence events), and the width of
    val + test also prices the no-grad passes over the training set (per-sample losses, SEAL's softmax) and the
    per-source test sets (subsets of test)."""
    import numpy as np

    from noisywikihow.plm import MAX_LENGTH, load_tokenizer
    from shared.text.widths import mean_batch_width, token_lengths

    texts = _TEXTS.get(bench_key)
    if texts is None or folder is None:
        return None
    try:
        tokenizer = load_tokenizer(folder)
        if shuffled:
            return math.ceil(mean_batch_width(token_lengths(tokenizer, texts[0], MAX_LENGTH), batch, shuffled=True))
        evaluated = [split for split in texts[1:] if len(split)]
        widths = [mean_batch_width(token_lengths(tokenizer, split, MAX_LENGTH), batch, shuffled=False)
                  for split in evaluated]
    except (ConfigError, DataFormatError, OSError, ValueError) as e:  # the run will say why; the plan goes on
        print(f"note: {encoder} is priced at {MAX_LENGTH} tokens (the worst case): its texts could not be measured "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return None
    batches = [math.ceil(len(split) / batch) for split in evaluated]
    return math.ceil(float(np.average(widths, weights=batches))) if widths else None


def _head_workload(features: Features, spec, training, bench: BenchSizes, name: str):
    """cRT's linear classifier over the penultimate features, or LWS's class scales over the logits, stepped alone
    on the frozen outputs (fp32: the head is called outside the network's autocast)."""
    K = bench.num_classes
    if name == "lws":
        width = K
    elif spec.model == "mlp":
        width = tuple(training.hidden)[-1] if training.hidden else features.width
    elif spec.model == "linear":
        width = features.width
    elif spec.model == "bilstm":
        width = 2 * BILSTM_HIDDEN
    else:
        width = _plm_width(spec.encoder, features.sizes)
    return workload("tabular_mlp", "mlp", "train", training.batch_size, (width,), "fp32",
                    {"hidden": (), "num_classes": K, "optimizer": "adamw"})


# ------------------------------------------------------------------------------------------ workloads
def workload(family: str, arch: str, phase: str, batch: int, shape: tuple, precision: str, options=None):
    """``shared.workloads.planned_workload``: a ``Workload``, or a ``ProposedWorkload`` for a family not registered
    there yet (the BiLSTM)."""
    return planned_workload(family, arch, phase, batch, shape, precision, **(options or {}))


def on_gpu(device: str, profile: str) -> bool:
    """Whether the runs train on a GPU: ``device`` cuda, or auto in the full profile (the GPU it is priced for)."""
    device = str(device)
    return device.startswith("cuda") or (device == "auto" and profile == "full")


# ------------------------------------------------------------------------------------------ helpers
def _hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@lru_cache(maxsize=4)
def _code(function) -> str:
    """``code_fingerprint(function)``, once per plan process (it hashes the code's files)."""
    from shared.cache import code_fingerprint

    return code_fingerprint(function)


def _generative_batch() -> int:
    from shared.methods.base import GENERATIVE_BATCH

    return GENERATIVE_BATCH


@lru_cache(maxsize=1)
def _minilm_max_length() -> int:
    """MiniLM's ``max_seq_length`` (sentence-transformers truncates there; all-MiniLM-L6-v2: 256)."""
    from shared.text.encoders import model_dir

    try:
        return int(json.loads((model_dir() / "sentence_bert_config.json").read_text()).get("max_seq_length", 256))
    except (OSError, ValueError, DataNotFoundError):
        return 256


def _minilm_width() -> int:
    from shared.text.encoders import embedding_dim

    return embedding_dim()


def _plm_width(encoder: str, sizes=()) -> int:
    """The hidden size of a PLM (what its classification head reads): ``shared.workloads.TEXT_MODELS``'s, or the
    folder's (``sizes``, ``plm_sizes``)."""
    from shared.workloads import text_sizes

    return int(text_sizes(_plm_arch(encoder), **dict(sizes))["hidden"])


__all__ = ["BenchSizes", "Features", "ProposedWorkload", "benchmark_sizes", "data_run", "embedding_run", "features_of",
           "noise_embedding_runs", "on_gpu", "plan", "plm_sizes", "run_plan", "run_work", "workload"]
