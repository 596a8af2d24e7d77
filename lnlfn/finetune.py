"""The full profile's fine-tuning sweep: a pre-trained language model fine-tuned on noisy labels (Sec. 3, App. D).

LNLFN fine-tunes a foundation model (DeBERTa-v3-base) on the noisy training split, 25 times with random
hyperparameters (lr log-uniform in 1e-6..1e-3, 2..8 epochs, batch size 8..128), selects runs by their *noisy*
validation accuracy and ranks the out-of-sample items (val/test) by the loss of their given label. This module
is the GPU counterpart of the smoke profile's frozen-feature heads (``lnlfn.scoring.run_sweep``): the same
held-out protocol, returning the same ``SweepResult``, so ``fml``/``fme``/``detect`` apply unchanged.

    configs = random_finetune_configs(25)
    ev = ds.split != "train"
    sweep = finetune_sweep("microsoft/deberta-v3-base", [ds.texts[i] for i in np.flatnonzero(ev)], noisy[ev],
                           configs, train=([ds.texts[i] for i in np.flatnonzero(~ev)], noisy[~ev]),
                           val=ds.split[ev] == "val", num_labels=ds.num_classes)
    dets = detect(sweep.restrict(ds.split[ev] == "test"))
    sweep.timings()                                   # samples/s, seconds and device of every run

    # TweetNLP: items are tokens; the model sees whole tweets (token classification)
    tr, ev = ds.subset(ds.split == "train"), ds.subset(ds.split != "train")
    sweep = finetune_sweep(model, TokenItems.from_dataset(ev), ev.labels, configs, task="token",
                           train=(TokenItems.from_dataset(tr), noisy_train), val=ev.split == "val", num_labels=12)

Models are local folders only (``shared.text.models.resolve_model_dir``); nothing is downloaded. Every run is a
plain torch loop (AdamW, linear warm-up/decay, gradient clipping at 1.0, optional bf16 autocast on CUDA),
deterministic given the config's seed (bitwise on CPU; on CUDA up to non-deterministic kernels). Each run's
probabilities, timing and loss curve are cached in the artifact cache, keyed by the model's file contents, the
data, the labels, the config, the task and the code (this module and the project modules it imports), so
re-running a sweep is free. ``finetune_sweep(..., executor={"kind": "slurm", "gpus_per_node": 1})`` trains the runs
as jobs (local processes or a Slurm job array, ``shared.sweep.map_jobs``); each job stores its run in that
cache, where the sweep, or its next launch after ``wait: false``, collects it.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from lnlfn.scoring import SweepResult, _items, _labels, array_hash, check_configs, draw_sweep, loss_scores
from shared.cache import ArtifactCache, code_fingerprint, params_key
from shared.device import select_device
from shared.errors import ConfigError, unknown_choice
from shared.executor import executor_spec
from shared.paths import cache_dir
from shared.progress import progress
from shared.seeding import item_seed
from shared.text import encoders
from shared.text.models import TASKS, load_pretrained, model_fingerprint, resolve_model_dir

MAX_GRAD_NORM = 1.0  # Hugging Face Trainer's default
LOSS_POINTS = 100  # the training loss curve is averaged into at most this many windows
EVAL_BATCH = 64
IGNORE = -100  # label of sub-tokens that carry no word label (cross_entropy's ignore_index)
CACHE_KIND = "lnlfn-finetune"  # <cache>/lnlfn-finetune/<key>/: one run; .submitit/: sweeps run by an executor


# ------------------------------------------------------------------------------------------ configs
@dataclass(frozen=True)
class FinetuneConfig:
    """One fine-tuning run of the sweep.

    The paper sweeps only lr, epochs and batch size (App. D) and states no optimizer, schedule, weight decay,
    warm-up or maximum length, so the defaults assume Hugging Face
    ``Trainer`` defaults: AdamW (weight decay 0, not applied to biases and norm weights when set), no warm-up
    (``warmup_ratio`` 0) and linear decay to 0, gradient clipping at 1.0.

    Attributes:
        lr: peak learning rate.
        epochs: passes over the training items (sentences for the token task).
        batch_size: training sequences per step.
        seed: classifier-head initialisation, dropout and shuffling seed.
        weight_decay: AdamW weight decay (Trainer default: 0).
        warmup_ratio: share of the optimizer steps spent warming up linearly from 0 (Trainer default: 0).
        max_length: sub-token limit per sequence (longer inputs are truncated; pairs ``longest_first``).
        bf16: bfloat16 autocast of the forward passes (mixed precision; weights and optimizer stay float32):
            "auto" (the default) on CUDA only, so a run on the CPU is the plain float32 run; True needs CUDA;
            False is float32 everywhere. The paper states no precision; Hugging Face ``Trainer``'s default,
            which the other defaults follow, is float32: ``bf16=False`` is that behaviour. A config is resolved
            against its device before it keys the cache (``resolved``), so a key always names the precision
            the run really used.
    """

    lr: float
    epochs: int
    batch_size: int
    seed: int = 0
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0
    max_length: int = 128
    bf16: bool | str = "auto"

    def __post_init__(self):
        if isinstance(self.lr, bool) or not (isinstance(self.lr, (int, float, np.number)) and math.isfinite(self.lr)
                                             and self.lr > 0):
            raise ConfigError(f"FinetuneConfig.lr must be a positive finite number, got {self.lr!r}")
        for name, low in (("epochs", 1), ("batch_size", 1), ("seed", 0), ("max_length", 4)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ConfigError(f"FinetuneConfig.{name} must be an integer >= {low}, got {value!r}")
        if not self.weight_decay >= 0:
            raise ConfigError(f"FinetuneConfig.weight_decay must be >= 0, got {self.weight_decay!r}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"FinetuneConfig.warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}")
        if not (isinstance(self.bf16, bool) or self.bf16 == "auto"):
            raise ConfigError(f"FinetuneConfig.bf16 must be True, False or 'auto', got {self.bf16!r}")

    def resolved(self, cuda: bool) -> "FinetuneConfig":
        """This config with ``bf16`` "auto" decided for a device (True on CUDA, False elsewhere): what keys the
        cache, so a CPU run keeps the key it had before "auto" existed and a GPU run says it used bf16."""
        return replace(self, bf16=cuda) if self.bf16 == "auto" else self

    def params(self) -> dict:
        """All fields as a JSON-able dict (the cache key and the sweep table)."""
        return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in asdict(self).items()}

    @property
    def name(self) -> str:
        extra = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                 for k, v in self.params().items() if k in _DEFAULTS and v != _DEFAULTS[k]
                 and not (k == "bf16" and v is not True)]  # bf16 named only where a run used it
        return (f"ft(lr={self.lr:.3g}, ep={self.epochs}, bs={self.batch_size}"
                f"{''.join(', ' + e for e in extra)}, seed={self.seed})")


# the fields a sweep usually fixes (named in ``FinetuneConfig.name`` when not at their defaults)
_DEFAULTS = {f.name: f.default for f in fields(FinetuneConfig) if f.default is not MISSING and f.name != "seed"}


def random_finetune_configs(n: int, *, seed: int = 0, lr_range: tuple[float, float] = (1e-6, 1e-3),
                            epochs: tuple[int, int] = (2, 8), batch_sizes: Sequence[int] = (8, 16, 64, 128),
                            **fixed) -> list[FinetuneConfig]:
    """``n`` runs drawn like the paper's sweep (App. D): lr log-uniform in ``lr_range``, integer epochs uniform
    in ``epochs`` (inclusive), batch size uniform over ``batch_sizes``; run i gets ``seed=i`` (``seed`` only
    drives the draws). ``fixed`` sets the other FinetuneConfig fields of every run (e.g. ``bf16=True``)."""
    bad = sorted(set(fixed) - set(_DEFAULTS))
    if bad:
        raise ConfigError(f"random_finetune_configs cannot fix {bad}; fixable fields: {sorted(_DEFAULTS)}")
    rng = np.random.default_rng(item_seed("lnlfn-random-finetune", seed))
    return [FinetuneConfig(**draw, seed=i, **fixed)
            for i, draw in enumerate(draw_sweep(n, rng, lr_range, epochs, batch_sizes))]


# ------------------------------------------------------------------------------------------ inputs
@dataclass(frozen=True)
class TokenItems:
    """Items of a token-classification task (TweetNLP): one word per item, grouped into sentences.

    Attributes:
        tokens: (n,) the words.
        groups: (n,) sentence id of each word (TweetNLP: ``columns["tweet"]``).
        positions: (n,) the word's index in its sentence (``columns["position"]``); a sentence is its items
            sorted by position (gaps are allowed, duplicates are not).
    """

    tokens: list
    groups: np.ndarray
    positions: np.ndarray

    def __post_init__(self):
        tokens = encoders._check_texts(self.tokens, "tokens")
        groups, positions = np.asarray(self.groups), np.asarray(self.positions)
        for name, a in (("groups", groups), ("positions", positions)):
            if a.shape != (len(tokens),) or not np.issubdtype(a.dtype, np.integer):
                raise ConfigError(f"TokenItems.{name} must be integers, one per token ({len(tokens)}), "
                                  f"got {a.dtype} {a.shape}")
        if len(np.unique(np.stack([groups, positions]), axis=1).T) != len(tokens):
            raise ConfigError("TokenItems has two items with the same (group, position)")
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "groups", groups.astype(np.int64))
        object.__setattr__(self, "positions", positions.astype(np.int64))

    @classmethod
    def from_dataset(cls, ds) -> "TokenItems":
        """The items of a token-level ``TextDataset`` (``lnlfn.data.load_tweetnlp``)."""
        return cls(ds.texts, ds.columns["tweet"], ds.columns["position"])

    def __len__(self) -> int:
        return len(self.tokens)

    def sentences(self) -> list[np.ndarray]:
        """Item indices of each sentence in word order, sentences by ascending group id."""
        order = np.lexsort((self.positions, self.groups))
        return np.split(order, np.flatnonzero(np.diff(self.groups[order])) + 1) if len(order) else []


def _check_items(items, task: str, name: str):
    """``items`` as TokenItems (token task) or as (texts, text_pairs or None) (sequence task)."""
    if task not in TASKS:
        raise unknown_choice("task", task, TASKS)
    if task == "token":
        if not isinstance(items, TokenItems):
            raise ConfigError(f"task='token' needs {name} as TokenItems(tokens, groups, positions), "
                              f"got {type(items).__name__}")
        return items
    if isinstance(items, TokenItems):
        raise ConfigError(f"{name} are TokenItems; pass task='token'")
    texts, pairs = encoders._unpair(items, None, name)
    return encoders._check_texts(texts, name), None if pairs is None else encoders._check_texts(pairs, name)


def _items_hash(items) -> str:
    if isinstance(items, TokenItems):
        return f"{encoders.texts_hash(items.tokens)}-{array_hash(items.groups)}-{array_hash(items.positions)}"
    texts, pairs = items
    return encoders.texts_hash(texts, pairs)


def _n_items(items) -> int:
    return len(items) if isinstance(items, TokenItems) else len(items[0])


def _encode_sequences(tokenizer, items, labels, max_length: int) -> list[dict]:
    """One feature dict per item: the tokenizer's lists (input_ids, attention_mask, ...) and its int label."""
    texts, pairs = items
    enc = tokenizer(texts, text_pair=pairs, truncation=True, max_length=max_length)
    feats = [{k: enc[k][i] for k in enc.keys()} for i in range(len(texts))]
    if labels is not None:
        for f, y in zip(feats, labels.tolist()):
            f["labels"] = y
    return feats


def _encode_tokens(tokenizer, items: TokenItems, labels, max_length: int) -> tuple[list[dict], np.ndarray]:
    """One feature dict per sentence, and each item's (sentence, sub-token) anchor (n, 2) (-1 if truncated).

    A word's label sits on its first sub-token; the other sub-tokens get -100. Words the tokenizer turns into
    nothing (empty strings, zero-width characters) are replaced by the unknown token so every word has one.
    """
    sentences = items.sentences()
    blank = {w for w in set(items.tokens) if not tokenizer.tokenize(w)}
    words = [[items.tokens[i] if items.tokens[i] not in blank else tokenizer.unk_token for i in s] for s in sentences]
    enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
    feats, anchors = [], np.full((len(items), 2), -1, dtype=np.int64)
    for s, idx in enumerate(sentences):
        feats.append({k: enc[k][s] for k in enc.keys()})
        word_ids = enc.word_ids(s)
        firsts = [(t, w) for t, w in enumerate(word_ids) if w is not None and (t == 0 or word_ids[t - 1] != w)]
        for t, w in firsts:
            anchors[idx[w]] = (s, t)
        if labels is not None:
            feats[-1]["labels"] = [IGNORE] * len(word_ids)
            for t, w in firsts:
                feats[-1]["labels"][t] = int(labels[idx[w]])
    return feats, anchors


def _encode(tokenizer, items, labels, max_length: int):
    """(features, anchors): anchors (n, 2) for TokenItems, None for sequences (one feature per item)."""
    if isinstance(items, TokenItems):
        return _encode_tokens(tokenizer, items, labels, max_length)
    return _encode_sequences(tokenizer, items, labels, max_length), None


def _collate(features: list[dict], pad: tuple[int, str]) -> dict:
    """Pad a batch on the tokenizer's side (``pad`` = (pad id, "right" or "left"): XLNet pads left, because its
    classifier reads the last position): input_ids with the pad id, token labels with -100, the rest with 0."""
    import torch

    pad_id, side = pad
    width = max(len(f["input_ids"]) for f in features)
    batch = {}
    for key in features[0]:
        values = [f[key] for f in features]
        if isinstance(values[0], list):
            fill = pad_id if key == "input_ids" else IGNORE if key == "labels" else 0
            values = [v + [fill] * (width - len(v)) if side == "right" else [fill] * (width - len(v)) + v
                      for v in values]
        batch[key] = torch.tensor(values)
    return batch


# ------------------------------------------------------------------------------------------ training
def _optimizer(model, config: FinetuneConfig):
    """AdamW; biases and norm weights (1-D parameters) get no weight decay."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr)


def _autocast(device, config: FinetuneConfig):
    import torch

    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.resolved(device.type == "cuda").bf16)


def _step_loss(model, batch: dict, device, config: FinetuneConfig):
    """Mean cross-entropy of a batch (sequence labels (b,) or token labels (b, L) with -100 ignored)."""
    import torch

    batch = {k: v.to(device) for k, v in batch.items()}
    labels = batch.pop("labels")
    with _autocast(device, config):
        logits = model(**batch).logits
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             ignore_index=IGNORE)


def _train(model, features: list[dict], pad: tuple[int, str], config: FinetuneConfig, device) -> tuple[np.ndarray, float]:
    """Fine-tune in place. Returns the loss curve (mean loss over windows of ceil(steps / 100) optimizer
    steps) and the training seconds."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    n = len(features)
    per_epoch = math.ceil(n / config.batch_size)
    total = config.epochs * per_epoch
    opt = _optimizer(model, config)
    schedule = get_linear_schedule_with_warmup(opt, math.ceil(config.warmup_ratio * total), total)
    shuffle = torch.Generator().manual_seed(config.seed)
    window, curve, step = math.ceil(total / LOSS_POINTS), [], 0
    running = torch.zeros((), device=device)
    model.train()
    start = time.perf_counter()
    with progress(total=total, desc=f"fine-tune {config.name}") as bar:
        for _ in range(config.epochs):
            order = torch.randperm(n, generator=shuffle).tolist()
            for offset in range(0, n, config.batch_size):
                loss = _step_loss(model, _collate([features[i] for i in order[offset:offset + config.batch_size]],
                                                  pad), device, config)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
                opt.step()
                schedule.step()
                opt.zero_grad(set_to_none=True)
                running += loss.detach()
                step += 1
                if step % window == 0 or step == total:
                    curve.append(running.item() / (step - window * len(curve)))
                    running.zero_()
                bar.update()
    return np.asarray(curve, dtype=np.float64), time.perf_counter() - start


def _predict(model, features: list[dict], pad: tuple[int, str], config: FinetuneConfig, device) -> list[np.ndarray]:
    """Softmax probabilities per feature, float64: (K,) per sequence or (length, K) per sentence (padding removed)."""
    import torch

    model.eval()
    order = np.argsort([len(f["input_ids"]) for f in features], kind="stable")  # similar lengths share a batch
    out = [None] * len(features)
    with torch.no_grad():
        for start in range(0, len(order), EVAL_BATCH):
            chunk = order[start:start + EVAL_BATCH]
            batch = {k: v.to(device) for k, v in _collate([features[i] for i in chunk], pad).items()}
            with _autocast(device, config):
                logits = model(**batch).logits
            probs = torch.softmax(logits.double(), dim=-1).cpu().numpy()
            for row, i in enumerate(chunk):
                n = len(features[i]["input_ids"])
                out[i] = probs[row] if probs.ndim == 2 else probs[row, :n] if pad[1] == "right" else probs[row, -n:]
    return out


@dataclass(frozen=True)
class FinetuneRun:
    """One fine-tuning run scored on the eval items.

    Attributes:
        config: the run's FinetuneConfig.
        probs: (n_eval, K) float64 softmax probabilities of the eval items, in input order.
        train_loss: (w,) float64 mean training loss over consecutive windows of ceil(steps / 100) optimizer
            steps (w <= 100; one point per step for short runs).
        samples_per_second: training throughput: training sequences (sentences for the token task) times
            epochs over ``train_seconds``.
        train_seconds: the optimisation loop alone (no loading, tokenisation or inference).
        wall_seconds: the whole run: loading, tokenisation, training and inference.
        device: where it ran ("cpu", "cuda", "cuda:1").
        from_cache: True when this call loaded the run from the artifact cache (the timings are the original
            run's).
    """

    config: FinetuneConfig
    probs: np.ndarray
    train_loss: np.ndarray
    samples_per_second: float
    train_seconds: float
    wall_seconds: float
    device: str
    from_cache: bool = False

    def timing(self) -> dict:
        """The run's name, timings, device and final loss window (a row for a DataFrame)."""
        return {"run": self.config.name, "samples_per_second": self.samples_per_second,
                "train_seconds": self.train_seconds, "wall_seconds": self.wall_seconds, "device": self.device,
                "final_train_loss": float(self.train_loss[-1]), "from_cache": self.from_cache}


def _fit_and_score(path: Path, train_items, y_train, eval_items, config: FinetuneConfig, num_labels: int,
                   task: str, device) -> dict:
    """Train one run and score the eval items (no caching): the arrays of a FinetuneRun."""
    import torch

    start = time.perf_counter()
    fork = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    with torch.random.fork_rng(devices=fork):
        torch.manual_seed(config.seed)
        tokenizer, model = load_pretrained(path, task=task, num_labels=num_labels)
        train_feats, _ = _encode(tokenizer, train_items, y_train, config.max_length)
        eval_feats, anchors = _encode(tokenizer, eval_items, None, config.max_length)
        if anchors is not None and (anchors[:, 0] < 0).any():
            raise ConfigError(f"{int((anchors[:, 0] < 0).sum())} eval words fall beyond max_length="
                              f"{config.max_length} sub-tokens of their sentence; raise max_length")
        model.to(device)
        pad = (tokenizer.pad_token_id, tokenizer.padding_side)
        curve, seconds = _train(model, train_feats, pad, config, device)
        out = _predict(model, eval_feats, pad, config, device)
    probs = np.stack([out[s][t] for s, t in anchors]) if anchors is not None else np.stack(out)
    return {"probs": probs, "train_loss": curve,
            "samples_per_second": np.float64(config.epochs * len(train_feats) / seconds),
            "train_seconds": np.float64(seconds), "wall_seconds": np.float64(time.perf_counter() - start),
            "device": np.str_(str(device))}


def finetune_probs(model: str | os.PathLike, train: tuple, eval_items, config: FinetuneConfig, *, num_labels: int,
                   task: str = "sequence", device="auto", cache: ArtifactCache | None | bool = None,
                   data_dir: str | os.PathLike | None = None) -> FinetuneRun:
    """Fine-tune ``model`` on ``train`` with ``config`` and return the probabilities of ``eval_items``.

    Args:
        model: a local model folder or a name (``resolve_model_dir``).
        train: ``(items, labels)``: the training items and their given (noisy) labels (n_train,) in 0..K-1.
        eval_items: the items to score (n_eval); never trained on.
            ``task="sequence"``: items are strings, or (premise, hypothesis) tuples for sentence pairs (the
            tokenizer's text/text_pair). ``task="token"``: items are ``TokenItems`` (one word per item, grouped
            into sentences); the model reads whole sentences and a word's prediction is taken at its first
            sub-token. Probabilities come back per item in input order either way.
        config: the run (``FinetuneConfig``).
        num_labels: K.
        task: "sequence" (``AutoModelForSequenceClassification``) or "token" (``AutoModelForTokenClassification``).
        device: "auto", "cpu", "cuda" or "cuda:N" (``shared.device.select_device``); not part of the cache key.
        cache: an ArtifactCache; None = the default one; False = no caching. The key covers the model folder's
            contents, the train items and labels, the eval items, K, the task and the config.
        data_dir: where ``models/<name>`` is looked up.

    Returns: a ``FinetuneRun`` (probs (n_eval, K) float64, training throughput, seconds, device, loss curve).
    """
    if not isinstance(config, FinetuneConfig):
        raise ConfigError(f"config must be a FinetuneConfig, got {type(config).__name__}")
    train_items, eval_items = _check_items(train[0], task, "train items"), _check_items(eval_items, task, "eval items")
    y, k = _labels(train[1], _n_items(train_items), num_labels, "train labels")
    if _n_items(train_items) == 0 or _n_items(eval_items) == 0:
        raise ConfigError("the training items and the eval items must not be empty")
    dev = select_device(device)
    config = config.resolved(dev.type == "cuda")
    if config.bf16 and dev.type != "cuda":
        raise ConfigError(f"bf16=True needs a CUDA device, but this run is on {dev}; use bf16=False")
    path = resolve_model_dir(model, data_dir)
    built = []

    def build() -> dict:
        built.append(True)
        return _fit_and_score(path, train_items, y, eval_items, config, k, task, dev)

    if cache is False:
        arrays = build()
    else:
        store = cache if isinstance(cache, ArtifactCache) else ArtifactCache()
        params = {**_data_params(path, train_items, y, eval_items, k, task), "config": config.params()}
        arrays = store.get_or_build(CACHE_KIND, params, build, code=[finetune_probs])
    return _as_run(config, arrays, from_cache=not built)


def _data_params(path: Path, train_items, y: np.ndarray, eval_items, num_labels: int, task: str) -> dict:
    """The cache key's parameters shared by every run of a sweep (all but ``config``)."""
    return {"model": model_fingerprint(path), "train": _items_hash(train_items), "labels": array_hash(y),
            "eval": _items_hash(eval_items), "num_labels": num_labels, "task": task}


def _as_run(config: FinetuneConfig, arrays: dict, *, from_cache: bool) -> FinetuneRun:
    return FinetuneRun(config, arrays["probs"], arrays["train_loss"], float(arrays["samples_per_second"]),
                       float(arrays["train_seconds"]), float(arrays["wall_seconds"]), str(arrays["device"]),
                       from_cache=from_cache)


# ------------------------------------------------------------------------------------------ sweep
@dataclass(frozen=True)
class FinetuneSweep(SweepResult):
    """A ``SweepResult`` of fine-tuning runs, plus each run's ``FinetuneRun`` in ``runs`` (its ``probs`` cover
    all the sweep's items, also after ``restrict``). ``timings()`` tabulates throughput and seconds."""

    runs: tuple = field(default=())

    def timings(self) -> list[dict]:
        """One row per run: name, samples/s, train/wall seconds, device, final loss, whether it was cached."""
        return [run.timing() for run in self.runs]


def finetune_sweep(model: str | os.PathLike, texts, labels, configs: Iterable[FinetuneConfig], *, train: tuple,
                   val, num_labels: int, task: str = "sequence", device="auto",
                   cache: ArtifactCache | None | bool = None, data_dir: str | os.PathLike | None = None,
                   executor=None) -> FinetuneSweep:
    """Every config fine-tuned on ``train`` and scored on all ``texts``: ``run_sweep``'s held-out protocol.

    Args:
        model: a local model folder or a name (``resolve_model_dir``).
        texts: the n items to score (val and test; strings, pairs, or TokenItems for ``task="token"``).
        labels: their given (possibly noisy) labels (n,): the selection metrics and the losses use these.
        configs: the runs (``random_finetune_configs(25)``).
        train: ``(items, labels)`` of the training split.
        val: mask or indices into ``texts`` of the validation items, whose noisy accuracy (ties: lower loss)
            selects runs; restrict the result to the test items afterwards (``sweep.restrict``).
        num_labels, task, device, cache, data_dir: as in ``finetune_probs``. ``device`` is resolved where each
            run trains ("auto": a Slurm job's GPU, if it has one).
        executor: None: the runs train one after another in this process. Otherwise where they train
            (``shared.sweep.map_jobs``): an ``ExecutorSpec`` or a setting for ``shared.executor.executor_spec``
            (``"debug"``, ``{kind: local, jobs: 2}``, ``{kind: slurm, partition: gpu, gpus_per_node: 1,
            wait: false}``); see ``_runs_on_executor`` for the cache and Slurm's bookkeeping.

    Returns: a ``FinetuneSweep`` (a ``SweepResult``: probs (m, n, K), val_accuracy/val_loss (m,), folds None).

    Raises: ``shared.sweep.SweepPending`` (Slurm with ``wait: false``) once the missing runs are submitted;
    calling again with the same arguments collects them.
    """
    configs = check_configs(configs, FinetuneConfig, "random_finetune_configs(25)")
    n = _n_items(_check_items(texts, task, "texts"))
    y, k = _labels(labels, n, num_labels)
    val_idx = _items(val, n, "val")
    if len(val_idx) == 0:
        raise ConfigError("val selects no items; run selection needs at least one")
    common = dict(num_labels=k, task=task, device=device, data_dir=data_dir)
    if executor is None:
        runs = tuple(finetune_probs(model, train, texts, c, cache=cache, **common)
                     for c in progress(configs, desc="fine-tuning sweep"))
    else:
        runs = _runs_on_executor(model, train, texts, configs, executor_spec(executor), cache=cache, **common)
    P = np.stack([r.probs for r in runs])
    acc = (P[:, val_idx].argmax(axis=2) == y[val_idx]).mean(axis=1)
    loss = np.array([loss_scores(p[val_idx], y[val_idx]).mean() for p in P])
    return FinetuneSweep(configs, P, y, acc, loss, folds=None, items=np.arange(n), runs=runs)


class _NotCached(Exception):
    """Raised by ``_cached_run``'s build: the run is not (soundly) in the cache."""


def _not_cached():
    raise _NotCached


def _runs_on_executor(model, train: tuple, texts, configs: tuple, spec, *, cache, num_labels: int, task: str,
                      device, data_dir) -> tuple[FinetuneRun, ...]:
    """The sweep's runs, those not in the artifact cache trained as jobs of ``spec`` (an ExecutorSpec).

    Runs already cached are loaded here and not submitted: so a launch after ``wait: false`` collects what the
    jobs stored and submits only what is missing (and not what Slurm jobs of an earlier launch still run).
    Each job stores its run in the same cache (``cache``: an ArtifactCache, or None for the default one, resolved
    here so every job writes where this process reads; on Slurm it must be on a file system the nodes share).
    ``cache=False`` needs the debug executor: elsewhere a run would live only in a job's return value, lost to
    ``wait: false`` and to an interrupted sweep.

    Slurm's bookkeeping (submitit's scripts and logs, the ledger of jobs in flight) goes to
    ``<cache root>/lnlfn-finetune/.submitit/<sweep>``, ``<sweep>`` 16 hex digits of SHA-256 over the model's
    fingerprint, the train items and labels, the eval items, K and the task: two sweeps over different data or
    models never share a ledger, and the same sweep with more configs finds its earlier jobs. A job's unit (what
    the ledger names) is the config's name with its cache key. Each run is its own array task unless the executor
    spec's ``chunk`` says otherwise.
    """
    from shared.sweep import map_jobs

    if cache is False and spec.kind != "debug":
        raise ConfigError(f"cache=False cannot be used with the {spec.kind!r} executor: each run's result is kept "
                          "only in the artifact cache the job writes, so an interrupted or non-waiting sweep would "
                          "lose it; pass cache=None (the default cache) or an ArtifactCache, or executor='debug' / "
                          "None to train in this process")
    if spec.kind == "slurm" and spec.gpus_per_node and str(device) == "cpu":
        raise ConfigError("the Slurm jobs ask for GPUs (gpus_per_node) but device is 'cpu', which is what 'auto' "
                          "resolves to on a machine without a GPU (e.g. a login node), so the jobs would ignore their GPUs; run the "
                          "notebook itself on a GPU node (python -m shared.run lnlfn ... --executor slurm --gpus 1) or "
                          "drop gpus_per_node to train on the jobs' CPUs")
    store = None if cache is False else cache if isinstance(cache, ArtifactCache) else ArtifactCache()
    train_items, eval_items = _check_items(train[0], task, "train items"), _check_items(texts, task, "eval items")
    y, k = _labels(train[1], _n_items(train_items), num_labels, "train labels")
    data = _data_params(resolve_model_dir(model, data_dir), train_items, y, eval_items, k, task)
    code = code_fingerprint(finetune_probs)
    # bf16 "auto" decided for where the jobs train (a Slurm job's GPU, or this machine's device), so the cache
    # is looked up under the key each job will store its run under
    cuda = bool(spec.gpus_per_node) if spec.kind == "slurm" else select_device(device).type == "cuda"
    configs = tuple(c.resolved(cuda) for c in configs)
    keys = {c: params_key(CACHE_KIND, {**data, "config": c.params()}, code) for c in configs}
    cached = {c: _cached_run(store, c, data, keys[c]) if store is not None else None for c in keys}
    found = {c: run for c, run in cached.items() if run is not None}
    todo = [c for c, run in cached.items() if run is None]
    if todo:
        if spec.kind == "slurm" and spec.chunk is None:  # runs are long: one per array task
            spec = replace(spec, chunk=1)
        sweep = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
        folder = (store.root if store is not None else cache_dir()) / CACHE_KIND / ".submitit" / sweep
        job = partial(finetune_probs, model, train, texts, num_labels=k, task=task, device=device,
                      cache=False if store is None else store, data_dir=data_dir)
        done = map_jobs(job, todo, jobs=spec.jobs, num_threads=spec.threads, executor=spec, folder=folder,
                        units=lambda c: [f"{c.name} [{keys[c]}]"], desc="fine-tuning sweep")
        found.update(zip(todo, done))
    return tuple(found[c] for c in configs)


def _cached_run(store: ArtifactCache, config: FinetuneConfig, data: dict, key: str) -> FinetuneRun | None:
    """The run stored under ``key`` (``finetune_probs``'s entry for ``config``), or None if there is none or it
    is damaged. An absent entry is not looked up further, so no lock a running job holds is waited for."""
    if not store.entry_dir(CACHE_KIND, key).is_dir():
        return None
    try:
        arrays = store.get_or_build(CACHE_KIND, {**data, "config": config.params()}, _not_cached,
                                    code=[finetune_probs])
    except _NotCached:
        return None
    return _as_run(config, arrays, from_cache=True)


__all__ = ["TASKS", "FinetuneConfig", "random_finetune_configs", "TokenItems", "FinetuneRun", "finetune_probs",
           "FinetuneSweep", "finetune_sweep"]
