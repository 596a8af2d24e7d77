"""Training runs of NoisywikiHow's experiments, cached: one (training set, method, seed, model) per run.

Every run trains through ``shared.methods`` with the paper's hyperparameters (``noisywikihow.hparams``) and
evaluates after each epoch on the clean validation and test sets (Top-1 and Top-5), as the official
``tm_main.py`` does, plus the test events of each noise source's classes. A run is stored in the artifact
cache, keyed by its data, settings and code, so the notebooks that share runs (the base model at 40 % real noise
appears in Tables 4, 8 and 12) train it once. ``run_grid(..., executor=...)`` trains the runs not cached yet as
jobs (local processes or a Slurm job array, ``shared.sweep.map_jobs``) and collects them from the cache.

    training = Training.from_settings(cfg)
    runs = run_grid(data, [RunSpec("mix_0.4", "coteaching", seed=0)], training)
    runs[0].history            # epoch, train_loss, val_acc, val_top5, test_acc, test_top5, test_TC_acc, ...
    runs[0].score("peak")      # {"top1": ..., "top5": ...}: the paper's peak test accuracy
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, fields, replace
from functools import partial

import numpy as np
import pandas as pd
import torch

from noisywikihow import hparams
from noisywikihow.benchmark import SOURCES, Benchmark
from shared.cache import ArtifactCache, code_fingerprint, params_key
from shared.errors import ConfigError, unknown_choice
from shared.methods import TrainSetup, make_method
from shared.methods.base import STABLE_EPOCHS
from shared.models import MLP
from shared.progress import progress
from shared.runlog import log_run
from shared.sweep import map_jobs
from shared.text.models import model_fingerprint

CACHE_KIND = "noisywikihow-runs"
MODELS = {"mlp": "an MLP on frozen features", "linear": "a linear model on frozen features",
          "bilstm": "a BiLSTM trained on the encoder's frozen word embeddings (encoder minilm; noisywikihow.bilstm)",
          "plm": "the encoder itself, a pre-trained language model, fine-tuned (noisywikihow.plm)"}
SELECTIONS = {
    "peak": "the best test accuracy over epochs, Top-1 and Top-5 each at its own best epoch (the paper's numbers)",
    "val": "the test accuracy at the epoch of the best validation Top-1 (what a practitioner can select)",
    "stable": "the mean test accuracy of the last 5 epochs (the official code's stable_acc)",
}


@dataclass(frozen=True)
class Training:
    """Optimisation settings shared by every run of a notebook (a profile's settings, see ``profiles.yaml``)."""

    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    hidden: tuple[int, ...] = (256, 256)
    sr_epochs: int = 20
    seal_rounds: int = 4
    seal_epochs: int = 10  # epochs per SEAL iteration
    loss_epoch: int = 4  # per-sample training losses are stored after this epoch (1-based; Fig. 3)
    ldam_drw: bool = False  # LDAM with deferred re-weighting
    bf16: bool = False  # a language model's forward passes under bfloat16 autocast on a GPU
    t5_generative: bool = False  # T5 writes the category's name, scored on 5 beams (the paper); False: a classifier head
    bilstm_epochs: int = 8  # the BiLSTM's epochs in place of ``epochs`` (it converges sooner; 4 s a run on a CPU)
    device: str = "auto"  # resolved where the run trains (a Slurm job's node), not where it is submitted

    @classmethod
    def from_settings(cls, settings, device: str = "auto") -> Training:
        names = {f.name for f in fields(cls)} - {"device"}
        values = {k: (tuple(v) if k == "hidden" else v) for k, v in settings.items() if k in names}
        return cls(**values, device=device)

    def key(self, spec: RunSpec) -> dict:
        """The settings that can change ``spec``'s run (its cache key): not the device, and a method's or model's
        own settings only for that method or model, so runs are shared across pages that set them differently."""
        drop = {"device"}
        drop |= set() if spec.method == "sr" else {"sr_epochs"}
        drop |= set() if spec.method == "seal" else {"seal_rounds", "seal_epochs"}
        drop |= set() if spec.method == "ldam" else {"ldam_drw"}
        drop |= set() if spec.model == "plm" else {"bf16"}
        drop |= set() if _is_t5(spec) else {"t5_generative"}
        drop |= set() if spec.model == "mlp" else {"hidden"}
        drop |= set() if spec.model == "bilstm" else {"bilstm_epochs"}
        return {k: v for k, v in asdict(self).items() if k not in drop}

    def setup(self, seed: int, epochs: int | None = None, grad_clip: float | None = None,
              eval_net: int | None = None) -> TrainSetup:
        return TrainSetup(epochs=epochs or self.epochs, batch_size=self.batch_size, lr=self.lr, optimizer="adamw",
                          weight_decay=self.weight_decay, cosine=False, device=self.device, seed=seed,
                          log_losses_at=(self.loss_epoch - 1,), topk=(1, 5), grad_clip=grad_clip,
                          eval_net=eval_net, amp=False)  # fp32 as the official code and cost.py (PLMs: ``bf16``)


@dataclass(frozen=True)
class RunSpec:
    """One run: a training set (a release file stem, e.g. "mix_0.4"), a method of ``hparams.METHODS``, a seed, the
    frozen encoder and the model on top."""

    train_set: str
    method: str = "base"
    seed: int = 0
    encoder: str = "minilm"
    model: str = "mlp"

    def generative(self, training: Training) -> bool:
        """Whether this run's network writes its labels: T5 fine-tuned with ``Training.t5_generative``."""
        return training.t5_generative and _is_t5(self)

    @property
    def kind(self) -> str:
        return "clean" if self.train_set == "clean" else ("symmetric" if self.train_set.startswith("sym") else "real")

    @property
    def level(self) -> float:
        return 0.0 if self.train_set == "clean" else float(self.train_set.split("_")[1])


def _is_t5(spec: RunSpec) -> bool:
    from noisywikihow.plm import PLMS

    return spec.model == "plm" and spec.encoder in PLMS and PLMS[spec.encoder].architecture == "t5"


@dataclass(frozen=True)
class RunResult:
    spec: RunSpec
    history: pd.DataFrame  # one row per epoch
    losses: np.ndarray  # (n_train,) per-sample CE under the observed labels after Training.loss_epoch

    def score(self, selection: str = "peak", prefix: str = "test") -> dict:
        """Top-1 and Top-5 accuracy (%) of ``prefix`` ("test", "test_TC", ...) under a selection rule."""
        if selection not in SELECTIONS:
            raise unknown_choice("selection", selection, SELECTIONS)
        h = self.history
        if selection == "peak":
            if prefix == "test":
                return {"top1": 100 * h["test_acc"].max(), "top5": 100 * h["test_top5"].max()}
            row = h.iloc[int(h["test_acc"].to_numpy().argmax())]  # a source's accuracy at the overall peak epoch
        elif selection == "val":
            row = h.iloc[int(h["val_acc"].to_numpy().argmax())]
        else:
            row = h.tail(STABLE_EPOCHS).mean(numeric_only=True)
        return {"top1": 100 * float(row[f"{prefix}_acc"]), "top5": 100 * float(row.get(f"{prefix}_top5", np.nan))}


@dataclass(frozen=True)
class FeatureData:
    """What runs train on: features of the validation and test events, the benchmark's training sets as
    features, the test events' classes' sources. Built by ``feature_data``. For a language model the features
    are token ids (int64) and ``model_path`` is its folder."""

    name: str
    encoder: str
    train: dict  # training-set name -> (X (n, d) float32 or (n, L) int64 token ids, labels (n,) int64)
    val: tuple
    test: tuple
    test_source: np.ndarray  # (n_test,) source of each test event's class
    class_names: tuple  # (K,) the categories' names, index = label (what a generative T5 learns to write)
    fingerprint: str  # of the arrays, the class names and, for a language model, of its files
    model_path: str | None = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def arrays(self) -> dict:
        """Every array, by name (what ``run_grid`` stores for its jobs)."""
        out = {"val_X": self.val[0], "val_y": self.val[1], "test_X": self.test[0], "test_y": self.test[1],
               "test_source": self.test_source.astype(str)}
        for name, (X, y) in self.train.items():
            out[f"train_X_{name}"], out[f"train_y_{name}"] = X, y
        return out

    def hollow(self) -> FeatureData:
        """This without its arrays: what a job is sent (it reads the arrays from the cache, ``filled``)."""
        return replace(self, train={name: None for name in self.train}, val=(), test=(), test_source=np.array([]))

    def filled(self, arrays: dict) -> FeatureData:
        return replace(self, train={n: (arrays[f"train_X_{n}"], arrays[f"train_y_{n}"]) for n in self.train},
                       val=(arrays["val_X"], arrays["val_y"]), test=(arrays["test_X"], arrays["test_y"]),
                       test_source=arrays["test_source"].astype(object))


def feature_data(bench: Benchmark, features, model_path: str | None = None) -> FeatureData:
    """Features of every split and training set of ``bench`` (``features``: a ``TextFeatures`` table);
    ``model_path``: the folder of the language model whose token ids they are."""
    train = {name: (features(s.texts), s.labels) for name, s in
             [("clean", bench.training_set("clean")), *bench.noise.items()]}
    val = (features(bench.val.texts), bench.val.labels)
    test = (features(bench.test.texts), bench.test.labels)
    digest = hashlib.sha256()
    for X, y in [*train.values(), val, test]:
        digest.update(np.ascontiguousarray(X).tobytes() + np.ascontiguousarray(y).tobytes())
    digest.update("\n".join(bench.classes).encode())
    if model_path is not None:
        digest.update(model_fingerprint(model_path).encode())
    return FeatureData(bench.name, features.encoder, train, val, test, bench.source[bench.test.labels],
                       tuple(str(c) for c in bench.classes), digest.hexdigest()[:16], model_path)


def _make_model(model: str, dim: int, class_names: tuple, hidden: tuple[int, ...], model_path: str | None = None,
                bf16: bool = False, generative: bool = False):
    num_classes = len(class_names)
    if generative:
        from noisywikihow.plm import load_generator

        return load_generator(model_path, class_names, bf16=bf16)[0]
    if model == "bilstm":
        from noisywikihow.bilstm import BiLSTMClassifier, word_embeddings

        return BiLSTMClassifier(word_embeddings(), num_classes)
    if model == "plm":
        from noisywikihow.plm import load_classifier

        if model_path is None:
            raise ConfigError("model 'plm' fine-tunes the encoder: set encoder to a language model (noisywikihow.plm.PLMS)")
        return load_classifier(model_path, num_classes, bf16=bf16)[0]
    return MLP(dim, num_classes, hidden if model == "mlp" else ())


def _tensor(X: np.ndarray) -> torch.Tensor:
    """Token ids stay int64; features become float32."""
    return torch.as_tensor(X) if np.issubdtype(X.dtype, np.integer) else torch.as_tensor(X, dtype=torch.float32)


def method_schedule(spec: RunSpec, training: Training) -> tuple[Training, str, dict, int | None]:
    """(the run's training settings, its method's name, keyword arguments and epochs) for ``train_run`` and the cost
    plan (``noisywikihow.cost``): the BiLSTM trains its own epochs, T5 writing its labels trains the base method only."""
    if spec.model == "bilstm":
        training = replace(training, epochs=training.bilstm_epochs)
    if spec.generative(training) and spec.method != "base":
        raise ConfigError(f"T5 writing its labels (t5_generative: true) trains with the base method only, as the official "
                          f"code; set t5_generative: false to fine-tune T5 with a classification head for {spec.method!r}")
    name, kwargs, epochs = hparams.method_config(spec.method, spec.kind, spec.level, training)
    return training, name, kwargs, epochs


def train_run(data: FeatureData, spec: RunSpec, training: Training) -> dict:
    """Train one run; returns its history columns (``h_<column>``) and per-sample losses as arrays."""
    if spec.model not in MODELS:
        raise unknown_choice("model", spec.model, MODELS)
    if spec.train_set not in data.train:
        raise unknown_choice(f"training set of {data.name}", spec.train_set, data.train)
    X, y = data.train[spec.train_set]
    tokens = np.issubdtype(X.dtype, np.integer)
    if tokens != (spec.model in ("plm", "bilstm")):
        raise ConfigError(f"model {spec.model!r} cannot read {data.encoder!r} "
                          f"{'token ids' if tokens else 'features'}: {MODELS[spec.model]}")
    training, name, kwargs, epochs = method_schedule(spec, training)
    make = partial(_make_model, spec.model, X.shape[1], data.class_names, tuple(training.hidden), data.model_path,
                   training.bf16, spec.generative(training))
    method = make_method(name, make, data.num_classes, training.setup(spec.seed, epochs, hparams.grad_clip(spec.method), hparams.eval_net(spec.method)),
                         **kwargs)
    tensor = _tensor
    evals = {"val": (tensor(data.val[0]), data.val[1]), "test": (tensor(data.test[0]), data.test[1])}
    for source in SOURCES:
        rows = data.test_source == source
        if rows.any():
            evals[f"test_{source}"] = (tensor(data.test[0][rows]), data.test[1][rows])
    result = method.fit(tensor(X), y, evals, desc=f"{spec.method} {spec.train_set} seed {spec.seed}")
    history = result.history.select_dtypes("number")
    losses = result.losses.get(training.loss_epoch - 1, np.full(len(y), np.nan))
    return {**{f"h_{c}": history[c].to_numpy() for c in history.columns}, "losses": np.asarray(losses, np.float32)}


CACHE_DATA = "noisywikihow-data"


def data_params(fingerprint: str) -> dict:
    """The cache parameters of the features a job of ``run_grid`` reads (``CACHE_DATA``, code ``feature_data``)."""
    return {"fingerprint": fingerprint}


def run_params(fingerprint: str, spec: RunSpec, training: Training) -> dict:
    """The cache parameters of ``spec``'s run on the features with ``fingerprint`` (``FeatureData.fingerprint``):
    what ``run_grid`` keys a run by and ``noisywikihow.cost`` plans it by."""
    return {"data": fingerprint, "spec": asdict(spec), "training": training.key(spec)}


def run_key(fingerprint: str, spec: RunSpec, training: Training, code: str | None = None) -> str:
    """The artifact-cache key of that run (``CACHE_KIND``); ``code``: ``code_fingerprint(train_run)`` if known
    (computing it hashes the code's files)."""
    return params_key(CACHE_KIND, run_params(fingerprint, spec, training), code or code_fingerprint(train_run))


def _params(data: FeatureData, spec: RunSpec, training: Training) -> dict:
    return run_params(data.fingerprint, spec, training)


def _run_key(data: FeatureData, spec: RunSpec, training: Training) -> str:
    return run_key(data.fingerprint, spec, training)


def _load_run(arrays: dict, spec: RunSpec) -> RunResult:
    history = pd.DataFrame({k[2:]: v for k, v in arrays.items() if k.startswith("h_")})
    return RunResult(spec, history, arrays["losses"])


def _absent(_):
    raise ConfigError("the features of a job's runs are not in the artifact cache; the cache folder must be one the "
                      "submitting machine and the jobs share ($NOISY_CACHE_DIR)")


def _cached_run(task: tuple, cache_root: str) -> None:
    """What a job of ``run_grid`` does: read the features from the cache, train the run unless cached."""
    hollow, spec, training = task
    cache = ArtifactCache(cache_root)
    data = hollow.filled(cache.get_or_build(CACHE_DATA, data_params(hollow.fingerprint), partial(_absent, None),
                                            code=[feature_data]))
    cache.get_or_build(CACHE_KIND, _params(data, spec, training), partial(train_run, data, spec, training),
                       code=[train_run])


def run_grid(data: FeatureData, specs, training: Training, *, executor=None,
             cache: ArtifactCache | None = None) -> list[RunResult]:
    """Every run of ``specs`` (duplicates once), trained unless cached. ``executor`` (see ``shared.sweep.map_jobs``;
    None: in this process, one run after the other) trains the runs not cached yet as jobs, which read the
    features from the artifact cache (so it must be a folder they share) and store their runs there."""
    specs = list(dict.fromkeys(specs))
    cache = cache or ArtifactCache()
    found = {s: cache.lookup(CACHE_KIND, _params(data, s, training), code=[train_run]) for s in specs}
    todo = [s for s in specs if found[s] is None]
    if executor is not None and todo:
        cache.get_or_build(CACHE_DATA, data_params(data.fingerprint), data.arrays, code=[feature_data])
        hollow = data.hollow()
        map_jobs(partial(_cached_run, cache_root=str(cache.root)), [(hollow, s, training) for s in todo],
                 executor=executor, desc="NoisywikiHow runs", folder=cache.root / CACHE_KIND / ".submitit",
                 units=lambda task: [_run_key(data, task[1], training)])
    results = []
    for spec in progress(specs, desc="runs"):
        if found[spec] is not None:  # found by lookup, which logs nothing: a loaded run (shared.runlog)
            log_run(CACHE_KIND, _run_key(data, spec, training), built=False)
            arrays = found[spec]
        else:
            arrays = cache.get_or_build(CACHE_KIND, _params(data, spec, training),
                                        partial(train_run, data, spec, training), code=[train_run])
        results.append(_load_run(arrays, spec))
    return results


def scores(runs: list[RunResult], selections=("peak", "val"), prefix: str = "test") -> pd.DataFrame:
    """One row per run and selection: train_set, kind, level, method, seed, encoder, model, selection, top1, top5."""
    rows = []
    for run in runs:
        s = run.spec
        for selection in selections:
            rows.append({"train_set": s.train_set, "kind": s.kind, "level": s.level, "method": s.method,
                         "seed": s.seed, "encoder": s.encoder, "model": s.model, "selection": selection,
                         **run.score(selection, prefix)})
    return pd.DataFrame(rows)


__all__ = [
    "MODELS",
    "SELECTIONS",
    "FeatureData",
    "RunResult",
    "RunSpec",
    "Training",
    "data_params",
    "feature_data",
    "run_grid",
    "run_key",
    "run_params",
    "scores",
    "train_run",
]
