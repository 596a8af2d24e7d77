"""The kinds of training and inference step the full profile runs, as one registry of *workloads*.

A ``Workload`` names one step kind: a family (how the network is built and stepped), an architecture, the phase
("train": forward, loss, backward, optimizer step; "infer": a no-grad forward), the batch size, the per-sample input
shape, the precision and the family's options. ``shared.gpu_check`` times each of ``FULL_PROFILE_WORKLOADS`` on a
device; ``shared.cost`` prices the full profile from those timings and from ``flops``.

    w = Workload("cifar_resnet", "resnet32", "train", 256, (3, 32, 32), "fp32",
                 {"optimizer": "adam", "augment": "weak_strong", "views": 2})
    w.key        # 'cifar_resnet/resnet32/train/b256/3x32x32/fp32/augment=weak_strong,optimizer=adam,views=2'
    Workload.from_key(w.key) == w                   # True; so is Workload.from_dict(w.to_dict()) == w
    step = build(w, "cuda"); step(); step.samples   # one full step as the project runs it; rows it consumed (256)
    flops(w)                                        # forward + backward FLOPs of one step, cached on disk

**Key**: ``<family>/<arch>/<phase>/b<batch>/<d1>x<d2>.../<precision>[/<name>=<value>,...]``: options sorted by name,
those equal to the family's default left out (so every workload has exactly one key); tuples are written
``42:503:111``, booleans ``true``/``false``. A ``text_encoder`` key names the model's sizes where it runs another
size than the named checkpoint (a rehearsal's tiny stand-in): ``.../deberta-v3-base/train/b16/128/fp32/heads=2,
hidden=32,intermediate=64,layers=1,num_labels=3,vocab=3224`` (sizes equal to the checkpoint's are left out too).

**Families** (``FAMILIES``; one ``Family`` subclass each: ``build(workload, device) -> Step``):

- ``cifar_resnet``: ``resnet20``, ``resnet32``, ``wrn28_10``, ``lenet5``, ``tiny_cnn`` (``shared.models.build_model``),
  ``densenet_bc`` and ``digits_cnn`` (``plench.networks``) on (C, H, W) images (CIFAR (3, 32, 32), MNIST (1, 28, 28)). Training steps go
  through ``shared.training.train_epoch`` (one batch) with ``amp_scaler`` for fp16, as CILN's voters and ERM; with
  ``views``/``nograd``/a Plench ``augment`` they follow Plench's step instead: ``views`` forward-backward passes of
  the batch (one per view: B x views images), ``nograd`` extra no-grad forwards (confidence refresh, momentum or
  teacher encoders), the views built on the device by ``plench.augment`` (``PLENCH_IMAGE_PASSES`` per algorithm).
- ``tabular_mlp``: ``shared.models.MLP`` (Plench's ``Linear(d, 500) -> ReLU -> Linear``, CILN's MNIST MLP and
  its RTDL MLP on Adult's flattened embeddings) on (d,) features.
- ``text_encoder``: transformers models built from configs written here with each named checkpoint's sizes
  (``TEXT_MODELS``; nothing is downloaded): sequence or token classification, T5 writing labels (``seq2seq``, as
  NoisywikiHow trains it; its ``infer`` is the 5-beam search), sentence embeddings (``embed``), on (L,) token ids.
  Size options (``TEXT_SIZE_OPTIONS``: ``layers``, ``decoder_layers``, ``hidden``, ``heads``, ``head_dim``,
  ``intermediate``, ``embedding``, ``vocab``) replace the named architecture's config fields, so a workload
  describes the model that really runs: the planners read them off the model folder the notebook loads
  (``text_size_options(arch, folder)``: the sizes of its ``config.json`` that differ from ``arch``'s), and FLOPs
  are counted on the model built from the overridden config. Without a folder, or with the released checkpoint's,
  there are none and the key is the full profile's.
- ``vit_infer`` / ``vit_train``: timm ViTs at (3, S, S): DeiT3-Small (CILN's voter, fine-tuned with fp16 AMP and
  inferred), the CLIP ViT-B/32 and B/16 image towers, SAM's ViT-H image encoder (Benchmark-N, 1024 px). Random
  weights.
- ``maskrcnn``: torchvision Mask R-CNN R50-FPN as ``benchmark_n.maskrcnn.build_model`` builds it (FrozenBN,
  trainable_layers 3, 1000 RPN proposals), trained on synthetic boxes and masks at (3, H, W) (COCO: (3, 800, 1333)).

**Bare GPU box.** This module and ``shared.gpu_check`` run with only Python, torch, torchvision, transformers, timm,
numpy, pandas and pyyaml: nothing heavy is imported at module level, and a family imports only project modules whose
imports stay inside that set (``shared.models``, ``shared.training``, ``shared.seeding``, ``plench.networks``,
``plench.augment``); where the project's module needs more (``benchmark_n.maskrcnn``: pycocotools; CILN's DeiT:
PIL pipelines and tqdm; RTDL: rtdl_revisiting_models) the same architecture is built here from
torch/torchvision/timm.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from pathlib import Path
from typing import Any, ClassVar

from shared.errors import ConfigError, unknown_choice

PHASES = ("train", "infer")
PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("sgd", "sgd_nesterov", "adam", "adamw")  # shared.training.make_optimizer's names
FLOPS_VERSION = 1  # bump when a family's step changes what FlopCounterMode sees (invalidates the FLOPs cache)
FLOPS_CACHE_FILE = "workload-flops.json"
#: counts committed with the code (``commit_flops``), so that a fresh checkout prices the profiles without counting;
#: a key missing from it is counted and cached as before
COMMITTED_FLOPS_FILE = Path(__file__).resolve().parent / "calibration" / "flops.json"
OPS_CACHE_FILE = "workload-ops.json"
COMMITTED_OPS_FILE = Path(__file__).resolve().parent / "calibration" / "ops.json"  # as flops.json, operator counts
_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")  # arch names and string option values: nothing the key grammar uses


# ================================================================================================ workloads
@dataclass(frozen=True)
class Workload:
    """One kind of step: ``batch`` samples of per-sample ``shape`` through ``family``'s ``arch``.

    ``options`` may be given as a mapping or as (name, value) pairs; they are checked against the family's option
    table (unknown names and bad values raise ConfigError naming the valid ones) and stored as sorted pairs without
    the defaults. ``opts`` gives all of them, defaults included.
    """

    family: str
    arch: str
    phase: str
    batch: int
    shape: tuple[int, ...]
    precision: str = "fp32"
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        fam = family(self.family)
        if self.arch not in fam.archs:
            raise unknown_choice(f"{self.family} arch", self.arch, fam.archs)
        if self.phase not in fam.phases:
            raise unknown_choice(f"{self.family} phase", self.phase, fam.phases)
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise ConfigError(f"batch must be an int >= 1, got {self.batch!r}")
        shape = tuple(self.shape) if isinstance(self.shape, (list, tuple)) else None
        if not shape or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape):
            raise ConfigError(f"shape must be a non-empty tuple of positive ints, got {self.shape!r}")
        if self.precision not in PRECISIONS:
            raise unknown_choice("precision", self.precision, PRECISIONS)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "options", fam.canonical_options(self.arch, fam.normalize_options(self.options)))
        fam.check(self)

    @property
    def opts(self) -> dict[str, Any]:
        """Every option of the family: the given ones over the defaults."""
        return {**family(self.family).defaults(), **dict(self.options)}

    @property
    def key(self) -> str:
        head = (f"{self.family}/{self.arch}/{self.phase}/b{self.batch}/{'x'.join(map(str, self.shape))}"
                f"/{self.precision}")
        if not self.options:
            return head
        return head + "/" + ",".join(f"{k}={_encode(v)}" for k, v in self.options)

    def __str__(self) -> str:
        return self.key

    @classmethod
    def from_key(cls, key: str) -> Workload:
        """The workload of ``key`` (the ``key`` property's format); ConfigError naming the part that is wrong."""
        parts = str(key).split("/")
        if len(parts) not in (6, 7):
            raise ConfigError(f"workload key {key!r} must be family/arch/phase/b<batch>/<shape>/<precision>"
                              "[/<option>=<value>,...]")
        fam_name, arch, phase, batch, shape, precision = parts[:6]
        fam = family(fam_name)
        if not re.fullmatch(r"b[1-9][0-9]*", batch):
            raise ConfigError(f"workload key {key!r}: batch part {batch!r} must be b<int>, e.g. b256")
        if not re.fullmatch(r"[1-9][0-9]*(x[1-9][0-9]*)*", shape):
            raise ConfigError(f"workload key {key!r}: shape part {shape!r} must be ints joined by x, e.g. 3x32x32")
        options = {}
        if len(parts) == 7:
            for item in parts[6].split(","):
                name, sep, text = item.partition("=")
                if not sep:
                    raise ConfigError(f"workload key {key!r}: option {item!r} must be name=value")
                if name not in fam.options:
                    raise unknown_choice(f"{fam_name} option", name, fam.options)
                options[name] = _decode(fam.options[name][0], text, key)
        return cls(fam_name, arch, phase, int(batch[1:]), tuple(int(d) for d in shape.split("x")), precision,
                   options)

    def to_dict(self) -> dict:
        """Plain types for YAML/JSON: shape as a list, options as a mapping (tuples as lists)."""
        return {"family": self.family, "arch": self.arch, "phase": self.phase, "batch": self.batch,
                "shape": list(self.shape), "precision": self.precision,
                "options": {k: list(v) if isinstance(v, tuple) else v for k, v in self.options}}

    @classmethod
    def from_dict(cls, d: Mapping) -> Workload:
        missing = [k for k in ("family", "arch", "phase", "batch", "shape") if k not in d]
        if missing:
            raise ConfigError(f"a workload mapping needs {missing}; got keys {sorted(d)}")
        return cls(d["family"], d["arch"], d["phase"], d["batch"], tuple(d["shape"]), d.get("precision", "fp32"),
                   dict(d.get("options") or {}))

    def replace(self, **changes) -> Workload:
        """A copy with fields changed (``options`` replaces the given options, keeping the others)."""
        if "options" in changes:
            changes["options"] = {**dict(self.options), **dict(changes["options"])}
        return _replace(self, **changes)


def _encode(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ":".join(map(str, value))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _decode(kind: type, text: str, key: str):
    try:
        if kind is bool:
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true"
        if kind is tuple:
            return tuple(int(p) for p in text.split(":")) if text else ()
        return kind(text)
    except ValueError:
        raise ConfigError(f"workload key {key!r}: {text!r} is not a valid {kind.__name__}") from None


# ================================================================================================ steps
class Step:
    """One step of a workload, ready to run: ``step()`` runs it (forward, loss, backward and optimizer step for
    train; a no-grad forward for infer) exactly as the project's code does; ``samples`` is the rows (images,
    sequences) it consumes; ``compute()`` is the forward (+ backward) alone on fixed inputs, what ``flops`` counts;
    ``amp`` whether mixed precision is active (autocast runs on CUDA only, as in the project)."""

    def __init__(self, run: Callable[[], Any], samples: int, *, compute: Callable[[], Any] | None = None,
                 amp: bool = False, model=None):
        self._run, self.samples, self.amp, self.model = run, int(samples), amp, model
        self.compute = compute if compute is not None else run

    def __call__(self):
        return self._run()

    def close(self) -> None:
        """Drop the references to the model, data and optimizer (so the device memory can be freed)."""
        self._run = self.compute = None
        self.model = None


def _torch():
    import torch

    return torch


def _seed() -> None:
    """The project's settings: ``shared.seeding.seed_everything`` (deterministic algorithms, no cuDNN autotuning),
    so a step is timed the way the notebooks run it."""
    from shared.seeding import seed_everything

    seed_everything(0)


def _amp_dtype(precision: str):
    torch = _torch()
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)


def _autocast(device, precision: str):
    """bf16/fp16 autocast on CUDA (the project's mixed precision is CUDA-only); a no-op elsewhere and for fp32."""
    if device.type != "cuda" or precision == "fp32":
        return nullcontext()
    return _torch().autocast("cuda", dtype=_amp_dtype(precision))


def _scaler(device, precision: str):
    """``shared.training.amp_scaler`` for fp16 (enabled on CUDA only), None otherwise."""
    if precision != "fp16":
        return None
    from shared.training import amp_scaler

    return amp_scaler(device)


def _optimizer_step(optimizer, loss, scaler, clip: float | None = None, params=None) -> None:
    """zero_grad, backward, optional gradient clipping and step, through ``scaler`` when it is enabled."""
    torch = _torch()
    optimizer.zero_grad(set_to_none=True)
    if scaler is not None and scaler.is_enabled():
        scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, clip)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()


# ================================================================================================ families
class Family:
    """How one kind of network is built, stepped and counted (one subclass per family, registered in ``FAMILIES``).

    Subclasses set ``name``, ``archs``, ``phases``, ``options`` (name -> (type, default); types int, float, bool,
    str, tuple of ints) and ``choices`` (name -> valid values of a str option), and implement ``build``; ``check``
    adds the family's own rules on a workload. ``meta_flops``: whether ``compute()`` runs on the meta device (FLOPs
    without memory or time); otherwise FLOPs are counted on a real device at ``flops_batch`` and scaled.
    """

    name: ClassVar[str] = ""
    archs: ClassVar[tuple[str, ...]] = ()
    phases: ClassVar[tuple[str, ...]] = PHASES
    options: ClassVar[dict[str, tuple[type, Any]]] = {}
    choices: ClassVar[dict[str, tuple]] = {}
    meta_flops: ClassVar[bool] = True
    flops_batch: ClassVar[int] = 8

    def defaults(self) -> dict[str, Any]:
        return {k: default for k, (_, default) in self.options.items()}

    def normalize_options(self, options) -> tuple[tuple[str, Any], ...]:
        given = dict(options.items() if isinstance(options, Mapping) else options or ())
        out = {}
        for name, value in given.items():
            if name not in self.options:
                raise unknown_choice(f"{self.name} option", name, self.options)
            kind, default = self.options[name]
            value = self._coerce(name, kind, value)
            if value != default:
                out[name] = value
        return tuple(sorted(out.items()))

    def _coerce(self, name: str, kind: type, value):
        bad = ConfigError(f"{self.name} option {name} must be a{'n' if kind is int else ''} {kind.__name__}"
                          f"{' of ints' if kind is tuple else ''}, got {value!r}")
        if kind is bool:
            if not isinstance(value, bool):
                raise bad
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise bad
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise bad
            value = float(value)
        elif kind is tuple:
            if not isinstance(value, (list, tuple)) or any(
                    isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value):
                raise bad
            value = tuple(value)
        elif kind is str:
            if not isinstance(value, str) or not _NAME.match(value):
                raise bad
            if name in self.choices and value not in self.choices[name]:
                raise unknown_choice(f"{self.name} {name}", value, self.choices[name])
        return value

    def canonical_options(self, arch: str, options: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
        """The normalised options as the key holds them for ``arch``: a family whose options can restate what the
        architecture already is (``text_encoder``'s sizes) drops those here, so a workload keeps exactly one key."""
        return options

    def check(self, w: Workload) -> None:
        """Family rules beyond the option table (shape rank, options that only make sense together)."""

    def build(self, w: Workload, device) -> Step:
        raise NotImplementedError


FAMILIES: dict[str, Family] = {}


def register(cls: type[Family]) -> type[Family]:
    FAMILIES[cls.name] = cls()
    return cls


def family(name: str) -> Family:
    """The registered family ``name``; ConfigError listing the valid ones."""
    if name not in FAMILIES:
        raise unknown_choice("workload family", name, FAMILIES)
    return FAMILIES[name]


@dataclass(frozen=True)
class ProposedWorkload:
    """A step kind with no family (or architecture) here yet: ``Workload``'s fields and key format, so a plan counts
    its steps, ``shared.cost`` shows it unpriced, and a calibration that measures the key prices it."""

    family: str
    arch: str
    phase: str
    batch: int
    shape: tuple[int, ...]
    precision: str = "fp32"
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> str:
        head = f"{self.family}/{self.arch}/{self.phase}/b{self.batch}/{'x'.join(map(str, self.shape))}/{self.precision}"
        return head + ("/" + ",".join(f"{k}={v}" for k, v in self.options) if self.options else "")


def planned_workload(family: str, arch: str, phase: str, batch: int, shape, precision: str = "fp32",
                     **options) -> Workload | ProposedWorkload:
    """The ``Workload`` a planner means, checked like any other (bad options of a registered family raise), or a
    ``ProposedWorkload`` where the family or the architecture is not registered yet (``shared.cost``'s planners)."""
    shape = tuple(int(s) for s in shape)
    if family in FAMILIES and arch in FAMILIES[family].archs:
        return Workload(family, arch, phase, int(batch), shape, precision, options)
    return ProposedWorkload(family, arch, phase, int(batch), shape, precision,
                            tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items())))


def build(w: Workload, device="cpu") -> Step:
    """``w``'s step on ``device`` ("cpu", "cuda", "cuda:1", "meta" or a torch.device)."""
    torch = _torch()
    return family(w.family).build(w, torch.device(device))


def _need_shape(w: Workload, rank: int, what: str) -> None:
    if len(w.shape) != rank:
        raise ConfigError(f"{w.family} workloads take {what}, got shape {w.shape}")


# ------------------------------------------------------------------------------------------------ CIFAR networks
_PLENCH_AUGMENTS = {"weak": ("weak",), "weak_strong": ("weak", "strong"),
                    "weak_strong_distill": ("weak", "strong", "distill")}


@register
class CifarResNet(Family):
    """Image classifiers on small images (C, H, W), trained with SGD/Adam on normalised float tensors.

    Options: ``num_classes``; ``optimizer`` (``shared.training.make_optimizer``); ``augment``: "none",
    "crop_flip" (``shared.training.random_crop_flip``, CILN) or Plench's device views "weak", "weak_strong",
    "weak_strong_distill" (``plench.augment``; the batch's uint8 images live on the device, as ``plench.protocol``
    keeps them); ``views``: forward-backward passes of the batch per step; ``nograd``: extra no-grad forwards of the
    batch; ``channels_last``: the model and inputs in channels-last memory format; ``width``: the smoke profiles'
    ``tiny_cnn``'s first width (its other archs have fixed widths).
    """

    name = "cifar_resnet"
    archs = ("resnet20", "resnet32", "wrn28_10", "densenet_bc", "lenet5", "tiny_cnn", "digits_cnn")
    options: ClassVar[dict[str, tuple[type, Any]]] = {
        "num_classes": (int, 10), "optimizer": (str, "sgd"), "augment": (str, "none"), "views": (int, 1),
        "nograd": (int, 0), "channels_last": (bool, False), "width": (int, 16), "stack": (int, 1)}
    choices: ClassVar[dict[str, tuple]] = {"optimizer": OPTIMIZERS, "augment": ("none", "crop_flip", *_PLENCH_AUGMENTS)}
    flops_batch = 8

    def check(self, w: Workload) -> None:
        _need_shape(w, 3, "images (C, H, W)")
        o = w.opts
        if o["views"] < 1:
            raise ConfigError(f"{w.key}: views must be >= 1")
        if w.phase == "infer" and (o["views"] != 1 or o["nograd"] or o["augment"] != "none"):
            raise ConfigError(f"{w.key}: views, nograd and augment describe training steps; an infer workload "
                              "takes none of them")
        if o["augment"] in _PLENCH_AUGMENTS and w.shape[0] != 3 and w.shape[1] != 8:
            raise ConfigError(f"{w.key}: Plench's image views are for RGB images (3, H, W) or its 8x8 digits")
        if "width" in dict(w.options) and w.arch != "tiny_cnn":
            raise ConfigError(f"{w.key}: width is tiny_cnn's option; {w.arch} has fixed widths")
        if o["stack"] < 1:
            raise ConfigError(f"{w.key}: stack must be >= 1")
        if o["stack"] > 1 and (w.phase != "train" or o["augment"] not in _PLENCH_AUGMENTS):
            raise ConfigError(f"{w.key}: stack (plench.protocol.train_runs_batched) trains Plench's image steps: a "
                              "train phase with Plench's views (augment weak, weak_strong or weak_strong_distill)")

    @staticmethod
    def model(w: Workload):
        """The network (on the current default device): shared.models, or Plench's featurizer + linear head."""
        torch = _torch()
        k = w.opts["num_classes"]
        if w.arch in ("densenet_bc", "digits_cnn"):
            # featurizer + nn.Linear classifier, as plench.algorithms.base builds it
            from plench import networks

            feat = networks.featurizer(w.arch, w.shape)
            return torch.nn.Sequential(feat, torch.nn.Linear(feat.n_outputs, k))
        from shared.models import build_model

        return build_model(w.arch, w.shape, k, **({"width": w.opts["width"]} if w.arch == "tiny_cnn" else {}))

    def build(self, w: Workload, device) -> Step:
        if w.opts["stack"] > 1:
            return self._build_stacked(w, device)
        torch = _torch()
        F = torch.nn.functional
        from shared.training import (
            make_optimizer,
            predict_logits,
            random_crop_flip,
            train_epoch,
        )

        _seed()
        o = w.opts
        with torch.device(device):
            model = self.model(w)
        fmt = torch.channels_last if o["channels_last"] else torch.contiguous_format
        model = model.to(memory_format=fmt)
        amp = device.type == "cuda" and w.precision != "fp32"

        def compute():
            x = torch.randn(w.batch, *w.shape, device=device).contiguous(memory_format=fmt)
            if w.phase == "infer":
                model.eval()
                with torch.no_grad(), _autocast(device, w.precision):
                    return model(x)
            model.train()
            y = torch.randint(0, o["num_classes"], (w.batch,), device=device)
            with _autocast(device, w.precision):
                loss = sum(F.cross_entropy(model(x).float(), y) for _ in range(o["views"]))
            loss.backward()
            if o["nograd"]:
                with torch.no_grad(), _autocast(device, w.precision):
                    for _ in range(o["nograd"]):
                        model(x)

        if device.type == "meta":
            return Step(compute, w.batch, compute=compute, amp=amp, model=model)
        if w.phase == "infer":
            model.eval()
            X = torch.randn(w.batch, *w.shape).contiguous(memory_format=fmt)  # on the CPU, as predict_proba's input

            def infer():
                with _autocast(device, w.precision):
                    return predict_logits(model, X, batch_size=w.batch)

            return Step(infer, w.batch, compute=compute, amp=amp, model=model)

        lr = 0.1 if o["optimizer"].startswith("sgd") else 1e-3
        opt = make_optimizer(model, o["optimizer"], lr, weight_decay=5e-4 if lr == 0.1 else 1e-4)
        scaler = _scaler(device, w.precision)
        gen = torch.Generator().manual_seed(0)
        targets = torch.randint(0, o["num_classes"], (w.batch,), generator=gen)
        plain = o["views"] == 1 and not o["nograd"] and o["augment"] in ("none", "crop_flip") and w.precision != "bf16"
        if plain:
            # the project's own loop (CILN's voters, shared.methods' ERM): X on the CPU, one batch = one step
            X = torch.randn(w.batch, *w.shape)
            augment = random_crop_flip if o["augment"] == "crop_flip" else None

            def train():
                return train_epoch(model, X, targets, opt, batch_size=w.batch, generator=gen, augment=augment,
                                   scaler=scaler)

            return Step(train, w.batch, compute=compute, amp=amp, model=model)

        if o["augment"] in _PLENCH_AUGMENTS:
            from plench.augment import views_for

            recipe, names = views_for("image", w.shape[1]), _PLENCH_AUGMENTS[o["augment"]]
            # Plench keeps the split's uint8 images (n, H, W, C) on the device and builds each view there
            raw = torch.randint(0, 256, (w.batch, w.shape[1], w.shape[2], w.shape[0]), dtype=torch.uint8,
                                generator=gen).to(device)

            def make_views(idx):
                batch = raw[idx.to(device)]
                return [getattr(recipe, n)(batch, generator=gen).contiguous(memory_format=fmt) for n in names]
        else:
            X = torch.randn(w.batch, *w.shape)

            def make_views(idx):
                xb = X[idx].to(device, non_blocking=True)
                return [random_crop_flip(xb, gen) if o["augment"] == "crop_flip" else xb]
        y_dev = targets.to(device)

        def train():
            model.train()
            idx = torch.randperm(w.batch, generator=gen)
            xs, yb = make_views(idx), y_dev[idx.to(device)]
            with _autocast(device, w.precision):
                loss = sum(F.cross_entropy(model(xs[i % len(xs)]).float(), yb) for i in range(o["views"]))
            _optimizer_step(opt, loss, scaler)
            if o["nograd"]:
                with torch.no_grad(), _autocast(device, w.precision):
                    for i in range(o["nograd"]):
                        model(xs[i % len(xs)])
            return float(loss.detach())  # Plench's Algorithm.step returns the float (a device sync per step)

        return Step(train, w.batch, compute=compute, amp=amp, model=model)


    def _build_stacked(self, w: Workload, device) -> Step:
        """``stack`` configurations trained as one model (``plench.protocol.train_runs_batched``: ``plench.stacked``'s
        vmapped network and batched Adam), each on its own batch and views (weak; weak and strong for CRDPLL; all
        three for DIRK), each view built once for the stack: ``views`` stacked forward-backward passes and ``nograd``
        stacked no-grad forwards (a refresh, a teacher), over the views in turn. ``samples`` counts every member's."""
        torch = _torch()
        F = torch.nn.functional
        from plench.augment import MemberGenerators, views_for
        from plench.stacked import StackedAdam, StackedNetwork

        _seed()
        o, G = w.opts, w.opts["stack"]
        with torch.device(device):
            models = [self.model(w) for _ in range(G)]
        stack = StackedNetwork(models)
        adam = StackedAdam(stack.params, [torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=1e-4)
                                          for m in models])
        amp = device.type == "cuda" and w.precision != "fp32"
        gen = torch.Generator().manual_seed(0)
        targets = torch.randint(0, o["num_classes"], (G, w.batch), generator=gen).to(device)

        def forward_backward(xs):
            with _autocast(device, w.precision):
                loss = sum(F.cross_entropy(stack.forward(xs[i % len(xs)]).float().flatten(0, 1), targets.flatten(),
                                           reduction="sum") for i in range(o["views"])) / w.batch
            grads = torch.autograd.grad(loss, stack.params)
            if o["nograd"]:
                with torch.no_grad(), _autocast(device, w.precision):
                    for i in range(o["nograd"]):
                        stack.forward(xs[i % len(xs)])
            return loss, grads

        def compute():
            return forward_backward([torch.randn(G, w.batch, *w.shape, device=device)])

        if device.type == "meta":
            return Step(compute, G * w.batch, compute=compute, amp=amp, model=stack)
        recipe, names = views_for("image", w.shape[1]), _PLENCH_AUGMENTS[o["augment"]]
        raw = torch.randint(0, 256, (G, w.batch, w.shape[1], w.shape[2], w.shape[0]), dtype=torch.uint8,
                            generator=gen).to(device)
        members = MemberGenerators([torch.Generator().manual_seed(g) for g in range(G)], w.batch)

        def train():  # as protocol.make_member_batches: each view once for all members, each from its own draws
            batch = torch.cat([raw[g][torch.randperm(w.batch, generator=gen).to(device)] for g in range(G)])
            xs = [getattr(recipe, n)(batch, generator=members).unflatten(0, (G, w.batch)) for n in names]
            loss, grads = forward_backward(xs)
            adam.step(grads)
            return float(loss.detach())

        return Step(train, G * w.batch, compute=compute, amp=amp, model=stack)


# ------------------------------------------------------------------------------------------------ tabular MLPs
@register
class TabularMLP(Family):
    """``shared.models.MLP``: Flatten -> (Linear -> ReLU -> Dropout) per ``hidden`` width -> Linear, on features of
    any shape (flattened: d = prod(shape)), trained through ``shared.training.train_epoch`` with the features on the
    device (Plench's run data). Forward FLOPs: 2 B (d h1 + h1 h2 + ... + hk K)."""

    name = "tabular_mlp"
    archs = ("mlp",)
    options: ClassVar[dict[str, tuple[type, Any]]] = {"hidden": (tuple, (500,)), "num_classes": (int, 10), "dropout": (float, 0.0),
               "optimizer": (str, "adam")}
    choices: ClassVar[dict[str, tuple]] = {"optimizer": OPTIMIZERS}
    flops_batch = 64

    def build(self, w: Workload, device) -> Step:
        torch = _torch()
        from shared.models import MLP
        from shared.training import make_optimizer, predict_logits, train_epoch

        _seed()
        o = w.opts
        with torch.device(device):
            model = MLP(math.prod(w.shape), o["num_classes"], hidden=o["hidden"], dropout=o["dropout"])
        amp = device.type == "cuda" and w.precision != "fp32"

        def compute():
            x = torch.randn(w.batch, *w.shape, device=device)
            if w.phase == "infer":
                model.eval()
                with torch.no_grad(), _autocast(device, w.precision):
                    return model(x)
            model.train()
            with _autocast(device, w.precision):
                out = model(x)
            torch.nn.functional.cross_entropy(out.float(), torch.zeros(w.batch, dtype=torch.long, device=device)
                                              ).backward()

        if device.type == "meta":
            return Step(compute, w.batch, compute=compute, amp=amp, model=model)
        gen = torch.Generator().manual_seed(0)
        X = torch.randn(w.batch, *w.shape, generator=gen).to(device)
        if w.phase == "infer":
            model.eval()

            def infer():
                with _autocast(device, w.precision):
                    return predict_logits(model, X, batch_size=w.batch)

            return Step(infer, w.batch, compute=compute, amp=amp, model=model)
        opt = make_optimizer(model, o["optimizer"], 1e-3, weight_decay=1e-4)
        scaler = _scaler(device, w.precision)
        y = torch.randint(0, o["num_classes"], (w.batch,), generator=gen).to(device)
        if w.precision == "bf16":  # train_epoch's AMP is fp16 + GradScaler; bf16 autocast around the same step
            def train():
                model.train()
                with _autocast(device, w.precision):
                    loss = torch.nn.functional.cross_entropy(model(X).float(), y)
                _optimizer_step(opt, loss, None)
                return float(loss.detach())
        else:
            def train():
                return train_epoch(model, X, y, opt, batch_size=w.batch, generator=gen, scaler=scaler)

        return Step(train, w.batch, compute=compute, amp=amp, model=model)


# ------------------------------------------------------------------------------------------------ text models
@dataclass(frozen=True)
class TextModel:
    """A pre-trained language model's architecture: its hub id (documentation only: nothing is downloaded), its
    transformers ``model_type`` and the config sizes of the checkpoint; ``params_m`` the published parameter count
    in millions (the base model without a task head; the test checks the config against it)."""

    hub: str
    model_type: str
    sizes: dict = field(default_factory=dict)
    params_m: float | None = None


_DEBERTA_V3 = {"vocab_size": 128100, "max_position_embeddings": 512, "relative_attention": True,
               "position_buckets": 256, "norm_rel_ebd": "layer_norm", "share_att_key": True,
               "pos_att_type": ["p2c", "c2p"], "position_biased_input": False, "type_vocab_size": 0,
               "max_relative_positions": -1, "layer_norm_eps": 1e-7, "hidden_act": "gelu"}
_BERT = {"max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu"}
_ROBERTA = {"vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1,
            "bos_token_id": 0, "eos_token_id": 2, "layer_norm_eps": 1e-5}


def _layers(hidden: int, layers: int, heads: int, ffn: int) -> dict:
    """BERT-style size names."""
    return {"hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": ffn}


def _xlnet(d: int, layers: int, heads: int, ffn: int) -> dict:
    return {"vocab_size": 32000, "d_model": d, "n_layer": layers, "n_head": heads, "d_inner": ffn,
            "ff_activation": "gelu"}


def _bart(d: int, layers: int, heads: int, ffn: int) -> dict:
    return {"vocab_size": 50265, "d_model": d, "encoder_layers": layers, "decoder_layers": layers,
            "encoder_attention_heads": heads, "decoder_attention_heads": heads, "encoder_ffn_dim": ffn,
            "decoder_ffn_dim": ffn, "max_position_embeddings": 1024}


def _t5(d: int, layers: int, heads: int, ffn: int) -> dict:
    return {"vocab_size": 32128, "d_model": d, "d_kv": 64, "d_ff": ffn, "num_layers": layers,
            "num_decoder_layers": layers, "num_heads": heads, "pad_token_id": 0, "eos_token_id": 1,
            "decoder_start_token_id": 0}


TEXT_MODELS: dict[str, TextModel] = {
    # LNLFN (lnlfn/profiles.yaml: the paper's model survey and its DeBERTa-v3-base)
    "deberta-v3-xsmall": TextModel("microsoft/deberta-v3-xsmall", "deberta-v2",
                                   {**_DEBERTA_V3, **_layers(384, 12, 6, 1536)}, 70.7),
    "deberta-v3-small": TextModel("microsoft/deberta-v3-small", "deberta-v2",
                                  {**_DEBERTA_V3, **_layers(768, 6, 12, 3072)}, 141.0),
    "deberta-v3-base": TextModel("microsoft/deberta-v3-base", "deberta-v2",
                                 {**_DEBERTA_V3, **_layers(768, 12, 12, 3072)}, 184.0),
    "deberta-v3-large": TextModel("microsoft/deberta-v3-large", "deberta-v2",
                                  {**_DEBERTA_V3, **_layers(1024, 24, 16, 4096)}, 435.0),
    "bert-base-cased": TextModel("bert-base-cased", "bert",
                                 {**_BERT, "vocab_size": 28996, **_layers(768, 12, 12, 3072)}, 108.0),
    "bert-large-cased": TextModel("bert-large-cased", "bert",
                                  {**_BERT, "vocab_size": 28996, **_layers(1024, 24, 16, 4096)}, 334.0),
    "roberta-base": TextModel("roberta-base", "roberta", {**_ROBERTA, **_layers(768, 12, 12, 3072)}, 125.0),
    "roberta-large": TextModel("roberta-large", "roberta", {**_ROBERTA, **_layers(1024, 24, 16, 4096)}, 355.0),
    "xlnet-base-cased": TextModel("xlnet-base-cased", "xlnet", _xlnet(768, 12, 12, 3072), 117.0),
    "xlnet-large-cased": TextModel("xlnet-large-cased", "xlnet", _xlnet(1024, 24, 16, 4096), 360.0),
    # NoisywikiHow (noisywikihow/plm.py PLMS); the large BART and T5 for comparison
    "bert-base-uncased": TextModel("bert-base-uncased", "bert",
                                   {**_BERT, "vocab_size": 30522, **_layers(768, 12, 12, 3072)}, 110.0),
    "gpt2": TextModel("gpt2", "gpt2", {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
                                       "n_head": 12, "pad_token_id": 50256}, 124.0),
    "albert-base-v2": TextModel("albert-base-v2", "albert", {**_BERT, "vocab_size": 30000, "embedding_size": 128,
                                                             "hidden_act": "gelu_new", **_layers(768, 12, 12, 3072)},
                                11.7),
    "bart-base": TextModel("facebook/bart-base", "bart", _bart(768, 6, 12, 3072), 139.4),
    "bart-large": TextModel("facebook/bart-large", "bart", _bart(1024, 12, 16, 4096), 406.3),
    "t5-base": TextModel("t5-base", "t5", _t5(768, 12, 12, 3072), 222.9),
    "t5-large": TextModel("t5-large", "t5", _t5(1024, 24, 16, 4096), 737.7),
    # the frozen sentence encoder of the smoke profiles and of NoisywikiHow's noise injection
    "all-minilm-l6-v2": TextModel("sentence-transformers/all-MiniLM-L6-v2", "bert",
                                  {**_BERT, "vocab_size": 30522, **_layers(384, 6, 12, 1536)}, 22.7),
}

#: NoisywikiHow's T5 evaluation (noisywikihow.plm.GENERATION): 5 beams returned, at most 15 decoder tokens
T5_GENERATION = {"num_beams": 5, "num_return_sequences": 5, "max_length": 15, "length_penalty": 1.0,
                 "early_stopping": False, "do_sample": False}
_TEXT_TASKS = ("sequence", "token", "seq2seq", "embed")

#: ``text_encoder``'s size options (0, the default: the named architecture's own value) -> what each sets
TEXT_SIZE_OPTIONS = {
    "layers": "transformer layers (the encoder's for BART and T5)", "decoder_layers": "BART's and T5's decoder layers",
    "hidden": "hidden size (d_model, n_embd)", "heads": "attention heads (both stacks of BART)",
    "head_dim": "T5's d_kv (its attention width is heads x head_dim)",
    "intermediate": "feed-forward width (both stacks of BART; GPT-2's n_inner)",
    "embedding": "ALBERT's factorised embedding size", "vocab": "vocabulary size"}
_BERT_FIELDS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
                "intermediate": "intermediate_size", "vocab": "vocab_size"}
#: model type -> size option -> the config field(s) it sets (the first is read from a model folder's config.json)
_TEXT_SIZE_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "bert": {k: (v,) for k, v in _BERT_FIELDS.items()},
    "roberta": {k: (v,) for k, v in _BERT_FIELDS.items()},
    "deberta-v2": {k: (v,) for k, v in _BERT_FIELDS.items()},
    "albert": {**{k: (v,) for k, v in _BERT_FIELDS.items()}, "embedding": ("embedding_size",)},
    "xlnet": {"layers": ("n_layer",), "hidden": ("d_model",), "heads": ("n_head",), "intermediate": ("d_inner",),
              "vocab": ("vocab_size",)},
    "gpt2": {"layers": ("n_layer",), "hidden": ("n_embd",), "heads": ("n_head",), "intermediate": ("n_inner",),
             "vocab": ("vocab_size",)},
    "t5": {"layers": ("num_layers",), "decoder_layers": ("num_decoder_layers",), "hidden": ("d_model",),
           "heads": ("num_heads",), "head_dim": ("d_kv",), "intermediate": ("d_ff",), "vocab": ("vocab_size",)},
    "bart": {"layers": ("encoder_layers",), "decoder_layers": ("decoder_layers",), "hidden": ("d_model",),
             "heads": ("encoder_attention_heads", "decoder_attention_heads"),
             "intermediate": ("encoder_ffn_dim", "decoder_ffn_dim"), "vocab": ("vocab_size",)},
}


_SPECIAL_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


def _config_size(model_type: str, option: str, config: Mapping) -> int | None:
    """The value of size ``option`` in a config mapping (``TextModel.sizes`` or a folder's config.json), with the
    transformers defaults of the fields a config may leave out (GPT-2's n_inner: 4 x n_embd; T5's decoder: as many
    layers as the encoder; ALBERT's embedding: 128); None where the config does not say."""
    fields = _TEXT_SIZE_FIELDS[model_type].get(option)
    value = config.get(fields[0]) if fields else None
    if value is None:
        if model_type == "gpt2" and option == "intermediate" and config.get("n_embd"):
            value = 4 * int(config["n_embd"])
        elif model_type == "t5" and option == "decoder_layers":
            value = config.get("num_layers")
        elif model_type == "albert" and option == "embedding":
            value = 128
    return None if value is None or isinstance(value, bool) else int(value)


def text_sizes(arch: str, **overrides: int) -> dict[str, int]:
    """Every size option of ``arch``'s model type: its own (``TEXT_MODELS``) with ``overrides`` (nonzero) over them."""
    kind = TEXT_MODELS[arch].model_type
    out = {o: _config_size(kind, o, TEXT_MODELS[arch].sizes) for o in _TEXT_SIZE_FIELDS[kind]}
    return {**out, **{k: int(v) for k, v in overrides.items() if v}}


def text_size_options(arch: str, folder) -> dict[str, int]:
    """The ``text_encoder`` size options that describe the model in ``folder`` (its ``config.json``) as a variant of
    ``arch``: the sizes that differ from ``arch``'s own (none for the released checkpoint, so its workload keeps
    the key of the full profile). ``{}`` where the folder has no readable config.json or is another model type
    (a model the options cannot describe is priced as ``arch``, as without a folder)."""
    path = Path(folder) / "config.json"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return {}
    return dict(_folder_size_options(arch, str(path), stamp))


@functools.lru_cache(maxsize=64)
def _folder_size_options(arch: str, path: str, stamp: int) -> tuple[tuple[str, int], ...]:
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return ()
    kind = TEXT_MODELS[arch].model_type
    if not isinstance(config, dict) or config.get("model_type") != kind:
        logging.getLogger(__name__).info("%s: model type %r is not %s's %r; priced as %s", path,
                                         config.get("model_type") if isinstance(config, dict) else None, arch, kind,
                                         arch)
        return ()
    own = text_sizes(arch)
    found = {o: _config_size(kind, o, config) for o in _TEXT_SIZE_FIELDS[kind]}
    return tuple(sorted((o, v) for o, v in found.items() if v is not None and v >= 1 and v != own[o]))


def text_config(arch: str, num_labels: int | None = None, use_cache: bool = False, sizes: Mapping | None = None):
    """The transformers config of ``TEXT_MODELS[arch]`` (with ``num_labels`` outputs for a classification head),
    with the size options ``sizes`` (``TEXT_SIZE_OPTIONS``; 0 or absent: the architecture's own) over its sizes.
    Key/value caches serve generation only: off unless ``use_cache`` (T5's beam search keeps its checkpoint's
    default, on; its training passes ``use_cache=False``, as ``noisywikihow.plm.LabelGenerator.loss``)."""
    from transformers import AutoConfig

    spec = TEXT_MODELS[arch]
    extra = {"num_labels": num_labels} if num_labels is not None else {}
    fields = _TEXT_SIZE_FIELDS[spec.model_type]
    for option, value in (sizes or {}).items():
        if value:
            if option not in fields:
                raise ConfigError(f"{arch} ({spec.model_type}) has no size {option!r}; its sizes: {', '.join(fields)}")
            extra.update(dict.fromkeys(fields[option], int(value)))
    if extra.get("vocab_size"):  # special tokens past a smaller vocabulary (GPT-2's 50256): its last id instead
        own = AutoConfig.for_model(spec.model_type, **spec.sizes)
        extra.update({name: extra["vocab_size"] - 1 for name in _SPECIAL_IDS
                      if isinstance(getattr(own, name, None), int) and getattr(own, name) >= extra["vocab_size"]})
    config = AutoConfig.for_model(spec.model_type, **{**spec.sizes, **extra})
    if hasattr(config, "use_cache"):
        config.use_cache = use_cache
    if spec.model_type == "xlnet":
        config.use_mems_eval = False
    return config


def text_model(arch: str, task: str = "sequence", num_labels: int = 2, sizes: Mapping | None = None):
    """A randomly initialised transformers model of ``arch`` (with the size options ``sizes`` over its own) for
    ``task`` on the current default device: "sequence"/"token" classification heads of ``num_labels``, "seq2seq"
    (its language-model head: T5 writing labels) or "embed" (the bare encoder)."""
    import transformers
    from transformers.utils import logging

    auto = {"sequence": transformers.AutoModelForSequenceClassification,
            "token": transformers.AutoModelForTokenClassification,
            "seq2seq": transformers.AutoModelForSeq2SeqLM, "embed": transformers.AutoModel}[task]
    config = text_config(arch, num_labels if task in ("sequence", "token") else None, use_cache=task == "seq2seq",
                         sizes=sizes)
    level = logging.get_verbosity()
    logging.set_verbosity_error()  # no "some weights are newly initialised" reports
    try:
        return auto.from_config(config)
    finally:
        logging.set_verbosity(level)


@register
class TextEncoder(Family):
    """Fine-tuning steps and inference of the language models (inputs: (L,) token ids, every row L tokens long:
    the full-length worst case of the projects' dynamic padding).

    Train, as ``lnlfn.finetune._train`` (and NoisywikiHow's ``Method.step`` with ``TextClassifier``): token ids
    moved to the device, forward under bf16 autocast on CUDA when asked, cross-entropy on float logits (T5
    ``seq2seq``: its own loss on ``label_len``-token targets), backward, gradient clipping at 1.0, AdamW (weight
    decay on matrices only), zero_grad. Infer: eval mode, no grad, softmax on the CPU (``lnlfn.finetune._predict``);
    ``seq2seq``: the 5-beam search of NoisywikiHow's T5 evaluation; ``embed``: mean-pooled, L2-normalised states
    (sentence-transformers' MiniLM).

    Size options (``TEXT_SIZE_OPTIONS``: ``layers``, ``decoder_layers``, ``hidden``, ``heads``, ``head_dim``,
    ``intermediate``, ``embedding``, ``vocab``; 0, the default, is the named architecture's own value): the model
    that really runs when it is not the named checkpoint's size, e.g. the rehearsals' tiny random stand-ins written
    under ``<data_dir>/models/<name>`` (``shared.text.tiny_models``). The planners read them off the model folder
    (``text_size_options``); the model is built from ``arch``'s config with those fields replaced, so its FLOPs and
    its timing are the small model's. A size equal to the architecture's own is dropped (one key per workload), so
    the released checkpoint's workload keeps the full profile's key:

        text_encoder/deberta-v3-base/train/b16/128/fp32/num_labels=3                      (the checkpoint)
        text_encoder/deberta-v3-base/train/b16/128/fp32/heads=2,hidden=32,intermediate=64,layers=1,num_labels=3,vocab=3224
    """

    name = "text_encoder"
    archs = tuple(TEXT_MODELS)
    options: ClassVar[dict[str, tuple[type, Any]]] = {"num_labels": (int, 2), "task": (str, "sequence"),
                                                      "label_len": (int, 15), **dict.fromkeys(TEXT_SIZE_OPTIONS, (int, 0))}
    choices: ClassVar[dict[str, tuple]] = {"task": _TEXT_TASKS}
    flops_batch = 2

    def canonical_options(self, arch: str, options):
        own = text_sizes(arch) if arch in TEXT_MODELS else {}
        return tuple((k, v) for k, v in options if not (k in TEXT_SIZE_OPTIONS and own.get(k) == v))

    def check(self, w: Workload) -> None:
        _need_shape(w, 1, "token sequences (L,)")
        o, kind = w.opts, TEXT_MODELS[w.arch].model_type
        given = [k for k, _ in w.options if k in TEXT_SIZE_OPTIONS]
        if any(k not in _TEXT_SIZE_FIELDS[kind] for k in given):
            raise ConfigError(f"{w.key}: {w.arch} ({kind}) has the sizes {', '.join(_TEXT_SIZE_FIELDS[kind])}, not "
                              f"{', '.join(k for k in given if k not in _TEXT_SIZE_FIELDS[kind])}")
        sizes = text_sizes(w.arch, **{k: o[k] for k in given})
        if kind != "t5" and sizes["hidden"] % sizes["heads"]:
            raise ConfigError(f"{w.key}: the hidden size {sizes['hidden']} is not a multiple of the {sizes['heads']} "
                              "attention heads")
        if o["task"] == "seq2seq" and kind != "t5":
            raise ConfigError(f"{w.key}: task seq2seq (writing the label) is T5's, as NoisywikiHow trains it")
        if o["task"] == "embed" and w.phase != "infer":
            raise ConfigError(f"{w.key}: task embed is a frozen encoder's inference (phase infer)")
        if o["task"] != "seq2seq" and "label_len" in dict(w.options):
            raise ConfigError(f"{w.key}: label_len is the length of T5's written labels (task seq2seq)")
        if o["task"] in ("sequence", "token") and o["num_labels"] < 2:
            raise ConfigError(f"{w.key}: num_labels must be >= 2")
        limit = TEXT_MODELS[w.arch].sizes.get("max_position_embeddings", TEXT_MODELS[w.arch].sizes.get("n_positions"))
        if limit is not None and w.shape[0] > limit - 2:
            raise ConfigError(f"{w.key}: {w.arch} takes at most {limit - 2} tokens")

    def build(self, w: Workload, device) -> Step:
        torch = _torch()
        F = torch.nn.functional
        _seed()
        o = w.opts
        with torch.device(device):
            model = text_model(w.arch, o["task"], o["num_labels"], {k: o[k] for k in TEXT_SIZE_OPTIONS})
        # XLNet makes its attention weights with the legacy ``torch.FloatTensor(...)``, which ignores the device
        # context: they stayed on the CPU (an H200's "mat2 is on cpu" at the first step). The project loads models on
        # the CPU and moves them; so does this.
        model.to(device)
        config = model.config
        L, task, K = w.shape[0], o["task"], o["num_labels"]
        gen = torch.Generator().manual_seed(0)
        # ids above every special token, the eos (BART, T5, RoBERTa) last in each row: the sequence heads of BART and
        # T5 read the state at the single </s>
        eos = getattr(config, "eos_token_id", None)

        def token_ids(n: int, length: int, where):
            if where.type == "meta":
                return torch.zeros(n, length, dtype=torch.long, device=where)
            low = min(1000, config.vocab_size // 2)  # a stand-in's vocabulary may hold a few hundred tokens
            ids = torch.randint(low, config.vocab_size - 10, (n, length), generator=gen)
            if eos is not None:
                ids[:, -1] = eos
            return ids.to(where)

        def inputs(n: int, where) -> dict:
            ids = token_ids(n, L, where)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

        def labels(n: int, where):
            if task == "seq2seq":
                return token_ids(n, o["label_len"], where)
            size = (n, L) if task == "token" else (n,)
            return (torch.zeros(size, dtype=torch.long, device=where) if where.type == "meta"
                    else torch.randint(0, K, size, generator=gen).to(where))

        def loss_of(batch: dict, target):
            with _autocast(device, w.precision):
                if task == "seq2seq":
                    return model(**batch, labels=target, use_cache=False).loss.float()
                logits = model(**batch).logits
            return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1))

        def infer_on(batch: dict):
            with torch.no_grad(), _autocast(device, w.precision):
                if task == "seq2seq":
                    return model.generate(**batch, **T5_GENERATION)
                if task == "embed":
                    states = model(**batch).last_hidden_state
                    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
                    return F.normalize((states * mask).sum(1) / mask.sum(1), dim=-1).float().cpu()
                return torch.softmax(model(**batch).logits.double(), dim=-1).cpu()

        def compute():
            batch = inputs(w.batch, device)
            if w.phase == "infer":
                model.eval()
                return infer_on(batch)
            model.train()
            loss_of(batch, labels(w.batch, device)).backward()

        amp = device.type == "cuda" and w.precision != "fp32"
        if device.type == "meta":
            return Step(compute, w.batch, compute=compute, amp=amp, model=model)
        cpu = torch.device("cpu")
        batch_cpu = inputs(w.batch, cpu)  # collated on the CPU, moved per step (lnlfn.finetune._step_loss)
        if w.phase == "infer":
            model.eval()
            return Step(lambda: infer_on({k: v.to(device) for k, v in batch_cpu.items()}), w.batch,
                        compute=compute, amp=amp, model=model)
        target_cpu = labels(w.batch, cpu)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.01},
                                 {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=2e-5)
        scaler = _scaler(device, w.precision)

        def train():
            model.train()
            batch = {k: v.to(device) for k, v in batch_cpu.items()}
            loss = loss_of(batch, target_cpu.to(device))
            _optimizer_step(opt, loss, scaler, clip=1.0, params=params)
            return float(loss.detach())

        return Step(train, w.batch, compute=compute, amp=amp, model=model)


# ------------------------------------------------------------------------------------------------ ViTs (timm)
#: arch -> (timm model name, head outputs: None = the workload's num_classes, 0 = no head)
VIT_MODELS = {"deit3_small": ("deit3_small_patch16_224", None),
              "clip_vit_b32": ("vit_base_patch32_clip_224", 512),  # CLIP's image tower; its 512-d projection as head
              "clip_vit_b16": ("vit_base_patch16_clip_224", 512),
              "sam_vit_h": ("samvit_huge_patch16", 0)}  # SAM's image encoder: patch embedding, 32 blocks, neck
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


class _ViT(Family):
    """timm ViTs on (3, S, S) images, random weights (the same compute as the pre-trained ones).

    CILN builds DeiT3-Small with timm itself (``ciln.voters_pretrained._deit_model``; that module needs PIL
    pipelines and tqdm, so the same ``timm.create_model`` call is made here) and CLIP ViT-B/32 with open_clip (not on
    a bare box): timm's ``vit_base_patch32_clip_224`` is the same image tower. Option ``source``: the images arrive
    at ``source`` px and are resized on the device (bicubic) and normalised, as ``ciln.voters_pretrained.ClipZeroShot``
    does with CIFAR's 32 px images; 0: they arrive at S px (DeiT's PIL pipeline runs in DataLoader workers).
    """

    archs = tuple(VIT_MODELS)
    options: ClassVar[dict[str, tuple[type, Any]]] = {"num_classes": (int, 10), "source": (int, 0), "drop_path": (float, 0.0)}
    flops_batch = 1

    def check(self, w: Workload) -> None:
        _need_shape(w, 3, "images (3, S, S)")
        if w.shape[0] != 3 or w.shape[1] != w.shape[2]:
            raise ConfigError(f"{w.key}: ViTs take square RGB images (3, S, S)")
        head = VIT_MODELS[w.arch][1]
        if head is not None and "num_classes" in dict(w.options):
            raise ConfigError(f"{w.key}: {w.arch} has its own head ({head or 'none'}); num_classes is DeiT's")

    def build(self, w: Workload, device) -> Step:
        torch = _torch()
        F = torch.nn.functional
        import timm

        _seed()
        o = w.opts
        name, head = VIT_MODELS[w.arch]
        size = w.shape[1]
        kwargs = {"img_size": size, "num_classes": o["num_classes"] if head is None else head}
        if o["drop_path"]:
            kwargs["drop_path_rate"] = o["drop_path"]
        with torch.device(device):
            model = timm.create_model(name, pretrained=False, **kwargs)
        forward = model.forward_features if w.arch == "sam_vit_h" else model  # SAM's encoder ends at its neck
        amp = device.type == "cuda" and w.precision != "fp32"
        K = kwargs["num_classes"] or 1

        def prepare(x):
            if not o["source"]:
                return x
            x = F.interpolate(x.float() / 255.0, size=(size, size), mode="bicubic", align_corners=False)
            return (x - x.new_tensor(CLIP_MEAN).view(1, 3, 1, 1)) / x.new_tensor(CLIP_STD).view(1, 3, 1, 1)

        def compute():
            x = torch.randn(w.batch, 3, size, size, device=device)
            if w.phase == "infer":
                model.eval()
                with torch.no_grad(), _autocast(device, w.precision):
                    return forward(x)
            model.train()
            soft = torch.full((w.batch, K), 1.0 / K, device=device)
            with _autocast(device, w.precision):
                loss = torch.sum(-soft * F.log_softmax(model(x).float(), dim=-1), dim=-1).mean()
            loss.backward()

        if device.type == "meta":
            return Step(compute, w.batch, compute=compute, amp=amp, model=model)
        gen = torch.Generator().manual_seed(0)
        if o["source"]:
            X = torch.randint(0, 256, (w.batch, 3, o["source"], o["source"]), dtype=torch.uint8, generator=gen)
        else:
            X = torch.randn(w.batch, 3, size, size, generator=gen)
        if device.type == "cuda":
            X = X.pin_memory()  # the DataLoaders of ciln.voters_pretrained pin memory on CUDA
        if w.phase == "infer":
            model.eval()

            def infer():
                with torch.no_grad(), _autocast(device, w.precision):
                    out = forward(prepare(X.to(device, non_blocking=True)))
                    return (out if w.arch == "sam_vit_h" else torch.softmax(out.float(), dim=1)).cpu()

            return Step(infer, w.batch, compute=compute, amp=amp, model=model)

        # ciln.voters_pretrained._finetune_deit: timm Mixup (soft targets), SoftTargetCrossEntropy, AdamW, fp16 AMP
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1)
        scaler = _scaler(device, w.precision)
        labels = torch.randint(0, K, (w.batch,), generator=gen)

        def train():
            model.train()
            x = prepare(X.to(device, non_blocking=True))
            y = F.one_hot(labels.to(device), K).float() * 0.9 + 0.1 / K
            lam = 0.7
            x, y = lam * x + (1 - lam) * x.flip(0), lam * y + (1 - lam) * y.flip(0)  # mixup's batch pairing
            with _autocast(device, w.precision):
                loss = torch.sum(-y * F.log_softmax(model(x), dim=-1), dim=-1).mean()
            _optimizer_step(opt, loss, scaler)
            return float(loss.detach())

        return Step(train, w.batch, compute=compute, amp=amp, model=model)


@register
class ViTInfer(_ViT):
    __doc__ = _ViT.__doc__
    name = "vit_infer"
    phases = ("infer",)


@register
class ViTTrain(_ViT):
    __doc__ = _ViT.__doc__
    name = "vit_train"
    phases = ("train",)


# ------------------------------------------------------------------------------------------------ Mask R-CNN
#: torchvision's ``resnet_fpn_backbone`` names that ``benchmark_n.maskrcnn`` accepts (its ``BACKBONES``; repeated here
#: because that module imports pycocotools, which a bare GPU box lacks): arch ``maskrcnn_<name>_fpn``, ResNet-50's
#: ``maskrcnn_r50_fpn``
MASKRCNN_BACKBONES = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
                      "resnext101_32x8d", "wide_resnet50_2", "wide_resnet101_2")
MASKRCNN_ARCHS = {("maskrcnn_r50_fpn" if b == "resnet50" else f"maskrcnn_{b}_fpn"): b for b in MASKRCNN_BACKBONES}


@register
class MaskRCNNFamily(Family):
    """torchvision Mask R-CNN with a ResNet-FPN backbone (``MASKRCNN_ARCHS``: the paper's ResNet-50 is
    ``maskrcnn_r50_fpn``, the CI rehearsal's ResNet-18 ``maskrcnn_resnet18_fpn``) at (3, H, W): the network works at
    that size (``min_size`` = min(H, W), ``max_size`` = max(H, W)); COCO's 1x schedule resizes to (800, <=1333).

    Built as ``benchmark_n.maskrcnn.build_model`` builds it (``resnet_fpn_backbone``: FrozenBatchNorm2d, stem and
    stage 1 frozen (trainable_layers 3); 1000 RPN proposals per image in training; no pre-trained weights). That module
    imports pycocotools, which a bare box lacks, so the same calls are made here. Train, as
    ``benchmark_n.maskrcnn.fit_predict``: images and targets moved from the CPU, the loss dict summed, a finiteness
    check, SGD (momentum 0.9, weight decay 1e-4), in fp32 or bf16 (autocast on CUDA around the forward, no
    GradScaler; the project autocasts the networks alone and keeps the box geometry between them in fp32, a
    difference of a few cheap elementwise ops). Each image carries ``instances`` synthetic objects (COCO
    averages 7.3), a box and a filled mask each. On CUDA a step runs with deterministic mode off, as the project's
    (``shared.seeding.nondeterministic_kernels``: torchvision's roi_align kernel, not its pure-Python stand-in).
    Infer: eval mode, the class head biased towards 5 classes so that 100 detections per image pass the 0.05
    threshold and reach the mask head as a trained model's would (random weights score every class about 1/81),
    masks thresholded at 0.5 and copied to the CPU.
    """

    name = "maskrcnn"
    archs = tuple(MASKRCNN_ARCHS)
    options: ClassVar[dict[str, tuple[type, Any]]] = {"num_classes": (int, 80), "instances": (int, 7),
                                                       "detections": (int, 100), "own_boxes": (int, 0)}
    meta_flops = False  # RPN/NMS/sampling have data-dependent shapes: counted on a device at batch 1
    flops_batch = 1

    def check(self, w: Workload) -> None:
        _need_shape(w, 3, "images (3, H, W)")
        if w.shape[0] != 3:
            raise ConfigError(f"{w.key}: Mask R-CNN takes RGB images (3, H, W)")
        if w.opts["own_boxes"] not in (0, 1) or (w.opts["own_boxes"] and w.phase != "infer"):
            raise ConfigError(f"{w.key}: own_boxes is 1 for the per-instance losses' pass (an infer phase) or 0")
        if w.opts["detections"] < 1:
            raise ConfigError(f"{w.key}: detections (box_detections_per_img) must be >= 1")
        if w.precision not in ("fp32", "bf16"):
            raise ConfigError(f"{w.key}: Benchmark-N trains Mask R-CNN in fp32 (mmdet's config) or with bf16 autocast "
                              "(benchmark_n.maskrcnn's precision), never fp16")

    @staticmethod
    def model(num_classes: int, min_size: int, max_size: int, backbone: str = "resnet50", detections: int = 100):
        from torchvision.models.detection import MaskRCNN
        from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

        fpn = resnet_fpn_backbone(backbone_name=backbone, weights=None, trainable_layers=3)
        return MaskRCNN(fpn, num_classes=num_classes + 1, min_size=min_size, max_size=max_size,
                        rpn_post_nms_top_n_train=1000, box_score_thresh=0.05, box_detections_per_img=detections)

    @staticmethod
    def own_box_heads(model, images, targets):
        """``benchmark_n.maskrcnn.instance_losses``' pass: the backbone, then the box and mask heads on each image's
        annotated boxes (no RPN, no post-processing); the cheap loss arithmetic after it is left out."""
        images, targets = model.transform(images, targets)
        features = model.backbone(images.tensors)
        boxes, heads = [t["boxes"] for t in targets], model.roi_heads
        logits, _ = heads.box_predictor(heads.box_head(heads.box_roi_pool(features, boxes, images.image_sizes)))
        return logits, heads.mask_predictor(heads.mask_head(heads.mask_roi_pool(features, boxes, images.image_sizes)))

    def build(self, w: Workload, device) -> Step:
        from shared.seeding import nondeterministic_kernels

        torch = _torch()
        _seed()
        o = w.opts
        _, H, W = w.shape
        with torch.device(device):
            model = self.model(o["num_classes"], min(H, W), max(H, W), MASKRCNN_ARCHS[w.arch], o["detections"])
        gen = torch.Generator().manual_seed(0)

        def sample(n: int):
            images, targets = [], []
            for _ in range(n):
                images.append(torch.rand(3, H, W, generator=gen))
                k = o["instances"]
                wh = torch.rand(k, 2, generator=gen) * torch.tensor([W / 3, H / 3]) + 16
                xy = torch.rand(k, 2, generator=gen) * (torch.tensor([W, H]) - wh)
                boxes = torch.cat([xy, xy + wh], 1).floor()
                masks = torch.zeros(k, H, W, dtype=torch.uint8)
                for i, (x1, y1, x2, y2) in enumerate(boxes.long().tolist()):
                    masks[i, y1:y2, x1:x2] = 1
                targets.append({"boxes": boxes, "labels": torch.randint(1, o["num_classes"] + 1, (k,), generator=gen),
                                "masks": masks})
            return images, targets

        def to_device(images, targets):
            return ([im.to(device) for im in images], [{k: v.to(device) for k, v in t.items()} for t in targets])

        amp = device.type == "cuda" and w.precision != "fp32"

        def compute_on(images, targets):
            if w.phase == "infer":
                model.eval()
                with torch.no_grad(), _autocast(device, w.precision), nondeterministic_kernels(device):
                    return self.own_box_heads(model, images, targets) if o["own_boxes"] else model(images)
            model.train()
            with nondeterministic_kernels(device):  # roi_align's backward too
                with _autocast(device, w.precision):
                    parts = model(images, targets)
                sum(parts.values()).backward()

        if w.phase == "infer":
            # random weights score every class about 1/81, under the 0.05 threshold: nothing would reach the mask
            # head. Favour 5 classes (as a trained detector is confident in a few), so each proposal gives ~5 boxes
            # above it and 100 detections per image go through the mask head and the mask pasting. With more
            # classes than COCO's (LVIS: 1,203) the favour grows by log(K / 80), so the 5 still clear the threshold.
            with torch.no_grad():
                boost = 3.0 + max(0.0, math.log((o["num_classes"] + 1) / 81))
                model.roi_heads.box_predictor.cls_score.bias[1:6] += boost
        images, targets = sample(w.batch)
        if w.phase == "infer":
            model.eval()

            def infer():
                if o["own_boxes"]:  # the per-instance losses' pass, read back to the host as its .tolist() does
                    with torch.no_grad(), _autocast(device, w.precision), nondeterministic_kernels(device):
                        logits, masks = self.own_box_heads(model, *to_device(images, targets))
                    return logits.float().cpu(), masks.float().mean((2, 3)).cpu()
                with torch.no_grad():
                    with _autocast(device, w.precision), nondeterministic_kernels(device):
                        outs = model([im.to(device) for im in images])
                    return [(out["masks"][:, 0].float() > 0.5).cpu() for out in outs]

            return Step(infer, w.batch, compute=lambda: compute_on(*to_device(images, targets)), amp=amp, model=model)
        # the learning rate of the warm-up's first iteration (MMDetection's linear warm-up from 0.001 of the base
        # rate, as benchmark_n.maskrcnn.learning_rate): at the base rate a randomly initialised detector at COCO size
        # diverges within two steps (NaN on an H200, 2026-11-30), and a step's time does not depend on the rate
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.02 * w.batch / 16 * 0.001,
                              momentum=0.9, weight_decay=1e-4)

        def train():
            model.train()
            with nondeterministic_kernels(device):  # roi_align's backward too
                with _autocast(device, w.precision):
                    parts = model(*to_device(images, targets))
                loss = sum(parts.values())
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"Mask R-CNN loss is {loss.item()}")
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()

        return Step(train, w.batch, compute=lambda: compute_on(*to_device(images, targets)), amp=amp, model=model)


# ================================================================================================ FLOPs
def count_flops(w: Workload, device="meta", batch: int | None = None) -> float:
    """Forward (+ backward for train) FLOPs of one step of ``w`` at ``batch`` (default ``w.batch``) on ``device``,
    from ``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions, attention; element-wise ops and the
    optimizer step are not counted)."""
    from torch.utils.flop_counter import FlopCounterMode

    mode = FlopCounterMode(display=False)
    _compute_under(w, device, batch, mode)
    return float(mode.get_total_flops())


def count_ops(w: Workload, device="meta", batch: int | None = None) -> int:
    """The operators one step of ``w`` dispatches (forward + backward for train, as ``count_flops``; the optimizer
    step not counted): every ATen call, views and element-wise ops included. Each costs the host a roughly fixed
    time to dispatch and launch whatever its size, so a step of small kernels takes at least ``ops x`` that time
    (``shared.cost``'s floor under an estimate from FLOPs; ``shared.gpu_check`` measures the time per op)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Counter.calls += 1
            return func(*args, **(kwargs or {}))

    _compute_under(w, device, batch, Counter())
    return Counter.calls


def _compute_under(w: Workload, device, batch: int | None, mode) -> None:
    """Run ``compute()`` of ``w``'s step (at ``batch``, on ``device``) once inside the dispatch ``mode``."""
    torch = _torch()
    step = build(w if batch in (None, w.batch) else w.replace(batch=batch), device)
    try:
        with mode:
            step.compute()
    finally:
        step.close()
        del step
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()


def _count_anywhere(w: Workload, device=None) -> float:
    """Count on the meta device at the full batch where the family allows it, else (or if meta fails) on
    ``device`` (default CPU) at the family's small batch, scaled linearly to ``w.batch``."""
    fam = family(w.family)
    if fam.meta_flops:
        try:
            return count_flops(w, "meta")
        except (RuntimeError, NotImplementedError, ValueError, TypeError, IndexError) as exc:
            # a data-dependent op (unique_consecutive in BART's and T5's heads, generate's stopping checks) needs
            # real tensors: count on a device instead
            logging.getLogger(__name__).debug("%s: no FLOPs on the meta device (%s)", w.key, exc)
    small = min(w.batch, fam.flops_batch)
    return count_flops(w, device or "cpu", small) * w.batch / small


def _ops_anywhere(w: Workload, device=None) -> int:
    """As ``_count_anywhere``, but a step's operators do not grow with the batch: counted at the family's small
    batch off the meta device, and not scaled."""
    if family(w.family).meta_flops:
        try:
            return count_ops(w, "meta")
        except (RuntimeError, NotImplementedError, ValueError, TypeError, IndexError) as exc:
            logging.getLogger(__name__).debug("%s: no operator count on the meta device (%s)", w.key, exc)
    return count_ops(w, device or "cpu", min(w.batch, family(w.family).flops_batch))


def flops_cache_path() -> Path:
    from shared.paths import cache_dir

    return cache_dir() / FLOPS_CACHE_FILE


def ops_cache_path() -> Path:
    from shared.paths import cache_dir

    return cache_dir() / OPS_CACHE_FILE


def _read_json(path: Path, table: str = "flops") -> dict:
    """The ``table`` ("flops" or "ops") of a counts file; {} if absent, unreadable or of another FLOPS_VERSION."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != FLOPS_VERSION or not isinstance(data.get(table), dict):
        return {}
    return data[table]


def _write_json_atomic(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_COMMITTED: dict[str, float] | None = None


def _committed_flops() -> dict[str, float]:
    """``flops_per_step`` of the calibration files in ``shared/calibration/``, then the committed table of counts
    (``COMMITTED_FLOPS_FILE``) for the workloads no calibration measured (read once per process)."""
    global _COMMITTED
    if _COMMITTED is None:
        _COMMITTED = _calibration_flops(sorted(CALIBRATION_DIR.glob("*.yaml")))
        for key, value in _read_json(COMMITTED_FLOPS_FILE).items():
            if isinstance(value, (int, float)) and value > 0:
                _COMMITTED.setdefault(key, float(value))
    return _COMMITTED


def commit_flops(source: Path | None = None, target: Path | None = None) -> int:
    """Merge the FLOP counts of the cache (``flops_cache_path()``, or ``source``) into the committed table
    (``COMMITTED_FLOPS_FILE``): every workload a plan has counted here is then known to a fresh checkout, whose
    first ``python -m shared.cost --profile full`` (and the book's cost page) would otherwise count about a hundred
    transformer shapes on the CPU, minutes of work. Returns the entries added."""
    target = target or COMMITTED_FLOPS_FILE
    table = _read_json(target)
    new = {k: v for k, v in _read_json(source or flops_cache_path()).items() if k not in table}
    _write_json_atomic(target, {"version": FLOPS_VERSION, "flops": {**table, **new}})
    return len(new)


def _calibration_flops(paths: Iterable[Path]) -> dict[str, float]:
    out: dict[str, float] = {}
    for path in paths:
        try:
            cal = load_calibration(path)
        except (ConfigError, OSError):
            continue
        for key, entry in cal.workloads.items():
            value = entry.get("flops_per_step")
            if isinstance(value, (int, float)) and value > 0 and entry.get("flops_version") == FLOPS_VERSION:
                out.setdefault(key, float(value))
    return out


def known_flops(extra_calibrations: Iterable[Path] = ()) -> dict[str, float]:
    """FLOPs per step already known, by workload key: the FLOPs cache, then ``flops_per_step`` of the calibration
    files in ``shared/calibration/`` (FLOPs do not depend on the device, so a fresh box reuses them)."""
    out = _calibration_flops([*sorted(CALIBRATION_DIR.glob("*.yaml")), *extra_calibrations])
    out.update(_read_json(flops_cache_path()))
    return out


def unstacked(w: Workload) -> Workload:
    """``w`` as one run alone (without its ``stack`` option)."""
    return _replace(w, options=tuple((k, v) for k, v in w.options if k != "stack"))


def flops(w: Workload, *, device=None, cache: bool = True) -> float:
    """Forward + backward FLOPs of one step of ``w`` (forward only for infer), counted on the real architecture at
    the real input shape (``count_flops``: the meta device where it works, else ``device``/CPU at a small batch
    scaled linearly) and cached by workload key in ``<cache_dir>/workload-flops.json``; on a miss the committed
    calibration files' counts (device-independent) are used before counting. The count does not depend on the
    precision (a matmul is the same FLOPs in bf16) nor on the memory layout (``channels_last``), so one count serves
    every precision and layout of a shape."""
    if dict(w.options).get("stack", 1) > 1:  # a stack is its members' arithmetic, counted on one of them
        return dict(w.options)["stack"] * flops(unstacked(w), device=device, cache=cache)
    same = _replace(w, precision="fp32", options=tuple((k, v) for k, v in w.options if k != "channels_last"))
    if cache:
        table, committed = _read_json(flops_cache_path()), _committed_flops()
        for key in dict.fromkeys((w.key, same.key)):
            hit = table.get(key)
            if hit is None:  # a fresh checkout: the committed calibrations hold the full profile's counts
                hit = committed.get(key)
            if hit is not None:
                return float(hit)
    value = _count_anywhere(same, device)
    if cache:
        path = flops_cache_path()
        table = _read_json(path)  # re-read: another process may have added entries meanwhile
        table[same.key] = value
        _write_json_atomic(path, {"version": FLOPS_VERSION, "flops": table})
    return value


def ops(w: Workload, *, device=None, cache: bool = True) -> int:
    """The operators one step of ``w`` dispatches (``count_ops``), cached by workload key like ``flops`` in
    ``<cache_dir>/workload-ops.json``, the committed table (``COMMITTED_OPS_FILE``) read on a miss. Precision and
    memory layout are left out of the key as for FLOPs (autocast adds casts: a floor stays a floor)."""
    if dict(w.options).get("stack", 1) > 1:  # a stack dispatches each operator once for all its members
        return ops(unstacked(w), device=device, cache=cache)
    same = _replace(w, precision="fp32", options=tuple((k, v) for k, v in w.options if k != "channels_last"))
    if cache:
        committed = _read_json(COMMITTED_OPS_FILE, "ops")
        hit = _read_json(ops_cache_path(), "ops").get(same.key, committed.get(same.key))
        if hit is not None:
            return int(hit)
    value = _ops_anywhere(same, device)
    if cache:
        path = ops_cache_path()
        table = _read_json(path, "ops")
        table[same.key] = value
        _write_json_atomic(path, {"version": FLOPS_VERSION, "ops": table})
    return value


def commit_ops(source: Path | None = None, target: Path | None = None) -> int:
    """As ``commit_flops``, for the operator counts (``COMMITTED_OPS_FILE``)."""
    target = target or COMMITTED_OPS_FILE
    table = _read_json(target, "ops")
    new = {k: v for k, v in _read_json(source or ops_cache_path(), "ops").items() if k not in table}
    _write_json_atomic(target, {"version": FLOPS_VERSION, "ops": {**table, **new}})
    return len(new)


# ================================================================================================ calibration files
CALIBRATION_DIR = Path(__file__).resolve().parent / "calibration"


@dataclass
class Calibration:
    """A device's measurements (``shared/calibration/<device-slug>.yaml``, written by ``shared.gpu_check``).

    ``workloads`` maps workload keys to their entries: measured ones have ``samples_per_s``, ``step_s``,
    ``peak_mem_mb``, ``flops_per_step``, ``achieved_tflops``, ``steps_timed`` and ``measured_at``; the others
    ``skipped`` (the reason).
    """

    path: Path | None
    device: dict
    peak_tflops: dict
    measured_at: str
    versions: dict
    budget_s: float | None
    workloads: dict[str, dict]
    cuda_paths: dict = field(default_factory=dict)
    runs: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    load_average: dict = field(default_factory=dict)  # the last run's 1/5/15-min load at start and end
    startup: dict = field(default_factory=dict)  # seconds a notebook spends before its first step: kernel, per paper
    dispatch: dict = field(default_factory=dict)  # shared.gpu_check.measure_dispatch: seconds per operator

    def measured(self) -> dict[str, dict]:
        """The entries with a throughput (not skipped)."""
        return {k: e for k, e in self.workloads.items() if "samples_per_s" in e}

    def entry(self, w: Workload | str) -> dict | None:
        return self.workloads.get(w.key if isinstance(w, Workload) else str(w))

    def samples_per_s(self, w: Workload | str) -> float | None:
        e = self.entry(w)
        return None if e is None or "samples_per_s" not in e else float(e["samples_per_s"])

    def step_s(self, w: Workload | str) -> float | None:
        e = self.entry(w)
        return None if e is None or "step_s" not in e else float(e["step_s"])

    def to_dict(self) -> dict:
        return {"schema": 1, "device": self.device, "peak_tflops": self.peak_tflops, "measured_at": self.measured_at,
                "versions": self.versions, "budget_s": self.budget_s, "settings": self.settings,
                "load_average": self.load_average, "runs": self.runs,
                "workloads": list(self.workloads.values()), "cuda_paths": self.cuda_paths, "startup": self.startup,
                "dispatch": self.dispatch}


def load_calibration(path) -> Calibration:
    """Read a calibration YAML; ConfigError naming the file and the problem when it is not one."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("device"), dict) \
            or not isinstance(data.get("workloads", []), list):
        raise ConfigError(f"{path}: not a calibration file (needs a device mapping and a workloads list)")
    workloads = {}
    for i, entry in enumerate(data.get("workloads") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise ConfigError(f"{path}: workloads[{i}] has no key")
        if "samples_per_s" not in entry and "skipped" not in entry:
            raise ConfigError(f"{path}: workload {entry['key']} has neither samples_per_s nor skipped")
        workloads[entry["key"]] = entry
    return Calibration(path, data["device"], data.get("peak_tflops") or {}, str(data.get("measured_at", "")),
                       data.get("versions") or {}, data.get("budget_s"), workloads, data.get("cuda_paths") or {},
                       data.get("runs") or [], data.get("settings") or {}, data.get("load_average") or {},
                       data.get("startup") or {}, data.get("dispatch") or {})


# ================================================================================================ the full profile
#: The stack size ``shared.gpu_check`` measures (``sweep``'s ``max_group``); ``shared.cost`` interpolates other sizes
STACK_MEASURED = 16

#: Plench's image algorithms (plench/profiles.yaml 03_image, 04_validation_use) -> (views, nograd, augment) of one
#: step: forward-backward passes of the batch, extra no-grad forwards (confidence refreshes after the step, momentum
#: or teacher encoders) and the views built. Counted by hooking the featurizers during ``update`` in the steady
#: state (tests/test_gpu_check.py recounts them); VALEN's warm-up steps differ (one no-grad pass) from the rest.
PLENCH_IMAGE_PASSES: dict[str, tuple[int, int, str]] = {
    **{a: (1, 1, "weak") for a in ("PRODEN", "CAVL", "POP", "LWS", "FREDIS")},
    **{a: (1, 0, "weak") for a in ("ABS_MAE", "ABS_GCE", "EXP", "MCL_GCE", "MCL_MSE", "CC", "PC", "Forward", "NN",
                                   "GA", "SCL_EXP", "SCL_NL", "L_W", "OP_W")},
    "IDGP": (2, 0, "weak"),  # two networks, f and g
    "PiCO": (1, 1, "weak_strong"), "PiCO_plus": (1, 1, "weak_strong"),  # query (weak) + momentum key (strong)
    "ABLE": (2, 0, "weak_strong"),
    "CRDPLL": (2, 2, "weak_strong"),
    "ALIM": (2, 1, "weak_strong"),
    "DIRK": (2, 2, "weak_strong_distill"),  # student on distill + strong, teacher on weak + distill
}
#: The image algorithms ``plench.protocol.train_runs_batched`` stacks (``algorithm_stacks``; a test keeps them equal)
PLENCH_STACKED = frozenset(("PRODEN", "CAVL", "POP", "LWS", "ABS_MAE", "ABS_GCE", "EXP", "MCL_GCE", "MCL_MSE", "CC",
                            "PC", "Forward", "NN", "SCL_EXP", "SCL_NL", "L_W", "OP_W", "CRDPLL", "DIRK", "PiCO",
                            "ABLE", "IDGP"))

#: Plench's 9 tabular PALM datasets: (features, classes) from the paper's Table 5 (plench/reported/table5.csv)
PLENCH_TABULAR = {"Lost": (108, 16), "MSRCv2": (48, 23), "Mirflickr": (1536, 14), "Birdsong": (38, 13),
                  "Malagasy": (384, 44), "SoccerPlayer": (279, 171), "Italian": (519, 90), "YahooNews": (163, 219),
                  "English": (300, 45)}
_PALM_STEPS = {"Lost": 10_000, "MSRCv2": 10_000, "Mirflickr": 10_000, "Birdsong": 10_000, "Malagasy": 10_000,
               "SoccerPlayer": 20_000, "Italian": 20_000, "YahooNews": 20_000, "English": 20_000}

LNLFN_MODELS = ("deberta-v3-xsmall", "deberta-v3-small", "deberta-v3-base", "deberta-v3-large", "bert-base-cased",
                "bert-large-cased", "roberta-base", "roberta-large", "xlnet-base-cased", "xlnet-large-cased")
NOISYWIKIHOW_MODELS = {"BERT": "bert-base-uncased", "XLNet": "xlnet-base-cased", "RoBERTa": "roberta-base",
                       "GPT2": "gpt2", "ALBERT": "albert-base-v2", "T5": "t5-base", "BART": "bart-base"}
CIFAR, MNIST, COCO = (3, 32, 32), (1, 28, 28), (3, 800, 1333)


def _full_profile() -> list[tuple[Workload, float, str]]:
    """(workload, rough number of its steps in the full profile, where it runs). The step counts are orders of
    magnitude read off the profiles (epochs x rows / batch x runs) and only order ``shared.gpu_check``'s
    measurements; ``shared.cost`` enumerates the runs themselves."""
    W = Workload
    out: list[tuple[Workload, float, str]] = []

    def add(w: Workload, steps: float, where: str) -> None:
        out.append((w, float(steps), where))

    # -- CILN: voters (ciln/voters.py recipes; fp16 AMP through shared.training.train_epoch) and downstream training
    add(W("cifar_resnet", "resnet20", "train", 128, CIFAR, "fp16", {"optimizer": "sgd", "augment": "crop_flip"}),
        2.0e6, "ciln 01 voter resnet20 (200 epochs); 08/09 downstream ERM (shared.methods erm: train_epoch, fp16)")
    add(W("cifar_resnet", "resnet20", "train", 128, CIFAR, "fp32", {"optimizer": "sgd", "augment": "crop_flip"}),
        1.1e7, "ciln 08/09 downstream Co-Teaching and DivideMix with precision fp32 (Method.step; two networks each)")
    # the MixMatch steps ciln.cost plans for DivideMix in fp16 (ciln.cost._dividemix_work: labelled + unlabelled rows
    # x k views, 3k no-grad guessing passes; k = 2 for the official variant with augmentation, else 1, as the
    # compact variant's), CILN's largest step kinds (45 and 23 h on an H200, estimated until measured)
    add(W("cifar_resnet", "resnet20", "train", 128, CIFAR, "fp16",
          {"optimizer": "sgd", "augment": "crop_flip", "views": 4, "nograd": 6}),
        5.5e6, "ciln 08/09 downstream DivideMix MixMatch steps, official variant (k = 2)")
    add(W("cifar_resnet", "resnet20", "train", 128, CIFAR, "fp16",
          {"optimizer": "sgd", "augment": "crop_flip", "views": 2, "nograd": 3}),
        5.5e6, "ciln 08/09 downstream DivideMix MixMatch steps, k = 1 (the compact variant)")
    add(W("cifar_resnet", "wrn28_10", "train", 128, CIFAR, "fp16", {"optimizer": "sgd_nesterov", "augment": "crop_flip"}),
        7.0e4, "ciln 01 voter wrn28_10 (200 epochs)")
    add(W("cifar_resnet", "resnet20", "train", 128, MNIST, "fp16", {"optimizer": "adam"}),
        9.4e4, "ciln 01 voter resnet20_mnist")
    add(W("cifar_resnet", "lenet5", "train", 128, MNIST, "fp16", {"optimizer": "adam"}), 9.4e4, "ciln 01 voter lenet5")
    add(W("tabular_mlp", "mlp", "train", 128, (784,), "fp16", {"hidden": (1024, 1024, 2048), "dropout": 0.5}),
        9.4e4, "ciln 01 voter mlp (MNIST, 784-1024-1024-2048-10)")
    add(W("tabular_mlp", "mlp", "train", 256, (5 + 8 * 421,), "fp32",
          {"hidden": (42, 503, 503, 503, 111), "num_classes": 2, "optimizer": "adamw"}),
        2.5e4, "ciln 01 Adult voter rtdl_mlp (5 numeric + 8 x 421-d embeddings)")
    add(W("vit_train", "deit3_small", "train", 128, (3, 224, 224), "fp16", {"drop_path": 0.05}),
        1.6e4, "ciln 01 voter deit3_small fine-tuning (20 epochs, CIFAR-10 and MNIST)")
    add(W("cifar_resnet", "resnet20", "infer", 512, CIFAR), 1.0e4, "ciln 01 voters labelling every corrupted image")
    add(W("cifar_resnet", "wrn28_10", "infer", 512, CIFAR), 1.0e4, "ciln 01 voters labelling every corrupted image")
    add(W("cifar_resnet", "resnet20", "infer", 512, MNIST), 1.0e4, "ciln 01 MNIST voters labelling")
    add(W("cifar_resnet", "lenet5", "infer", 512, MNIST), 1.0e4, "ciln 01 MNIST voters labelling")
    add(W("tabular_mlp", "mlp", "infer", 512, (784,), "fp32", {"hidden": (1024, 1024, 2048)}),
        1.0e4, "ciln 01 MNIST voters labelling")
    add(W("vit_infer", "deit3_small", "infer", 64, (3, 224, 224)), 1.2e5,
        "ciln 01 deit3_small labelling corrupted CIFAR-10 and MNIST (fp32, batch 64)")
    add(W("vit_infer", "clip_vit_b32", "infer", 256, (3, 224, 224), "fp32", {"source": 32}), 1.4e4,
        "ciln 01 CLIP ViT-B/32 zero-shot on corrupted CIFAR-10 (resized on the device)")

    # -- Plench: the image tables (03_image: 2 datasets x 20 hparams x 3 trials x 60,000 steps per algorithm and
    # network; 04_validation_use the same again with ResNet-32), Adam, batch 256, views on the device; bf16 mixed
    # precision and channels_last on CUDA (plench.protocol's precision "auto"), as plench.cost prices them
    combos: dict[tuple[int, int, str], list[str]] = {}
    for algorithm, passes in PLENCH_IMAGE_PASSES.items():
        combos.setdefault(passes, []).append(algorithm)
    for arch, runs_per_algorithm in (("resnet32", 240), ("densenet_bc", 120)):
        for (views, nograd, augment), algorithms in combos.items():
            add(W("cifar_resnet", arch, "train", 256, CIFAR, "bf16",
                  {"optimizer": "adam", "augment": augment, "views": views, "nograd": nograd, "channels_last": True}),
                runs_per_algorithm * 60_000 * len(algorithms), f"plench 03/04 image algorithms {', '.join(algorithms)}")
            stacked = [a for a in algorithms if a in PLENCH_STACKED]
            if stacked:  # the loss-step algorithms train stacked (batched: true)
                add(W("cifar_resnet", arch, "train", 256, CIFAR, "bf16",
                      {"optimizer": "adam", "augment": augment, "views": views, "nograd": nograd,
                       "channels_last": True, "stack": STACK_MEASURED}),
                    runs_per_algorithm * 60_000 * len(stacked) / STACK_MEASURED,
                    f"plench 03/04 {STACK_MEASURED} configurations stacked ({', '.join(stacked)})")
        add(W("cifar_resnet", arch, "infer", 512, CIFAR, "bf16", {"channels_last": True}),
            runs_per_algorithm * 26 * 60 * 30, "plench 03/04 checkpoint evaluation (batch 512)")
    for dataset, (d, q) in PLENCH_TABULAR.items():  # 02_tabular: 20 algorithms x 20 hparams x 5 trials
        add(W("tabular_mlp", "mlp", "train", 128, (d,), "fp32", {"num_classes": q}), 2000 * _PALM_STEPS[dataset],
            f"plench 02 tabular {dataset} (Linear({d}, 500) -> ReLU -> Linear(500, {q}))")

    # -- LNLFN: DeBERTa-v3-base sweeps (batch 8..128 drawn; 01: batch 32), the model survey at batch 32; bf16
    # autocast on CUDA (lnlfn.finetune's bf16 "auto")
    for batch, steps in ((8, 3.8e6), (16, 1.9e6), (32, 1.7e6), (64, 4.7e5), (128, 2.3e5)):
        add(W("text_encoder", "deberta-v3-base", "train", batch, (128,), "bf16", {"num_labels": 3}), steps,
            "lnlfn 01/03/05 fine-tuning sweeps (SNLI, IMDB, Amazon, TweetNLP)")
    add(W("text_encoder", "deberta-v3-base", "train", 32, (128,), "bf16", {"num_labels": 12, "task": "token"}), 2.0e4,
        "lnlfn TweetNLP token classification")
    add(W("text_encoder", "deberta-v3-base", "infer", 64, (128,), "bf16", {"num_labels": 3}), 1.0e5,
        "lnlfn scoring the eval items of every run (batch 64)")
    for arch in LNLFN_MODELS:
        if arch != "deberta-v3-base":
            add(W("text_encoder", arch, "train", 32, (128,), "bf16", {"num_labels": 3}), 2.0e4,
                "lnlfn 02 model survey (25 runs on TweetNLP-5)")

    # -- NoisywikiHow: seven PLMs, batch 64, bf16 autocast, 158 classes; BART is the base of every method table
    for paper, arch in NOISYWIKIHOW_MODELS.items():
        opts = {"task": "seq2seq"} if paper == "T5" else {"num_labels": 158}
        add(W("text_encoder", arch, "train", 64, (128,), "bf16", opts), 1.5e6 if paper == "BART" else 5.7e4,
            f"noisywikihow {'01-05 (every method table)' if paper == 'BART' else '01 Table 4'} {paper}")
    add(W("text_encoder", "bart-base", "infer", 512, (128,), "bf16", {"num_labels": 158}), 4.0e4,
        "noisywikihow per-epoch evaluation (predict_logits, batch 512)")
    add(W("text_encoder", "t5-base", "infer", 100, (128,), "bf16", {"task": "seq2seq"}), 8.0e3,
        "noisywikihow T5 evaluation: 5-beam search, 15 tokens (batch 100)")
    add(W("text_encoder", "all-minilm-l6-v2", "infer", 64, (128,), "fp32", {"task": "embed"}), 5.0e3,
        "noisywikihow 00 noise injection: MiniLM sentence embeddings")

    # -- Benchmark-N: Mask R-CNN 1x schedule (batch 16 on one device) in ~40 runs, bf16 autocast of the networks on
    # CUDA (benchmark_n.maskrcnn's precision "auto", as benchmark_n.cost prices it); SAM ViT-H image encoder, bf16
    # autocast on CUDA for the COCO-WAN labels (benchmark_n.wan's precision "auto"), fp32 in Table 14's fine-tuning
    add(W("maskrcnn", "maskrcnn_r50_fpn", "train", 16, COCO, "bf16"), 3.5e6,
        "benchmark_n 03-08 Mask R-CNN R50-FPN, 1x (bf16)")
    add(W("maskrcnn", "maskrcnn_r50_fpn", "infer", 16, COCO, "bf16", {"own_boxes": 1}), 3.3e5,
        "benchmark_n per-instance losses of the logged epochs: the heads on the annotated boxes (bf16)")
    add(W("maskrcnn", "maskrcnn_r50_fpn", "infer", 16, COCO, "bf16"), 1.6e4,
        "benchmark_n val predictions (bf16)")
    add(W("maskrcnn", "maskrcnn_r50_fpn", "train", 16, COCO), 1.0e5,
        "benchmark_n with precision fp32 (MMDetection's config, the official behaviour)")
    add(W("maskrcnn", "maskrcnn_r50_fpn", "train", 2, COCO, "bf16"), 7.0e6,
        "benchmark_n: the same at mmdet's 2 images per GPU (an alternative to batch 16)")
    add(W("vit_infer", "sam_vit_h", "infer", 1, (3, 1024, 1024), "bf16"), 5.1e5,
        "benchmark_n 08 SAM ViT-H image embeddings of the COCO-WAN labels (bf16)")
    add(W("vit_infer", "sam_vit_h", "infer", 1, (3, 1024, 1024)), 2.0e4,
        "benchmark_n 08 SAM ViT-H image embeddings of Table 14's decoder fine-tuning (sam_finetune, fp32), and of "
        "COCO-WAN labels with precision fp32 (segment_anything's own, the official behaviour)")
    return out


_FULL = _full_profile()
#: every step kind of the full profile, with its batch sizes and precision
FULL_PROFILE_WORKLOADS: tuple[Workload, ...] = tuple(w for w, _, _ in _FULL)
#: workload key -> rough count of its steps in the full profile (orders the GPU check; see ``_full_profile``)
FULL_PROFILE_STEPS_HINT: dict[str, float] = {w.key: steps for w, steps, _ in _FULL}
#: workload key -> where the full profile runs it
FULL_PROFILE_USES: dict[str, str] = {w.key: where for w, _, where in _FULL}


def workloads_of(families: Iterable[str] | None = None) -> list[Workload]:
    """``FULL_PROFILE_WORKLOADS`` of the given families (all by default); an unknown name is a ConfigError."""
    if families is None:
        return list(FULL_PROFILE_WORKLOADS)
    wanted = list(families)
    for name in wanted:
        family(name)
    return [w for w in FULL_PROFILE_WORKLOADS if w.family in wanted]


__all__ = [
    "CALIBRATION_DIR",
    "FAMILIES",
    "FULL_PROFILE_STEPS_HINT",
    "FULL_PROFILE_USES",
    "FULL_PROFILE_WORKLOADS",
    "PHASES",
    "PLENCH_IMAGE_PASSES",
    "PLENCH_TABULAR",
    "PRECISIONS",
    "TEXT_MODELS",
    "TEXT_SIZE_OPTIONS",
    "VIT_MODELS",
    "Calibration",
    "Family",
    "ProposedWorkload",
    "Step",
    "TextModel",
    "Workload",
    "build",
    "count_flops",
    "family",
    "flops",
    "flops_cache_path",
    "known_flops",
    "load_calibration",
    "planned_workload",
    "register",
    "text_config",
    "text_model",
    "text_size_options",
    "text_sizes",
    "workloads_of",
]
