"""Torch training pieces: tensors from arrays, augmentation, one epoch with CUDA mixed precision, prediction.

Data are numpy arrays: images ``(n, H, W)`` or ``(n, H, W, C)`` uint8, or features ``(n, d)`` float;
labels ``(n,)`` int. ``as_tensor`` turns them into float tensors (NCHW for images, scaled to [0, 1] and
normalised when ``mean``/``std`` are given). The epoch loop with evaluation, progress bars and model
selection is ``shared.methods`` (``make_method("erm", ...)`` is plain supervised training).

    X = as_tensor(images, mean, std)
    loss = train_epoch(model, X, targets, optimizer, batch_size=128, generator=gen, scaler=amp_scaler(device))
    probs = predict_proba(model, X_test)            # (n, K)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from shared.errors import ConfigError, unknown_choice


def as_tensor(X: np.ndarray, mean: Sequence[float] | None = None, std: Sequence[float] | None = None) -> torch.Tensor:
    """Float tensor of images (uint8 → [0, 1], NHWC → NCHW, optional normalisation) or features."""
    X = np.asarray(X)
    if X.ndim == 2:
        return torch.as_tensor(X, dtype=torch.float32)
    if X.ndim == 3:
        X = X[..., None]
    if X.ndim != 4:
        raise ConfigError(f"images must be (n, H, W) or (n, H, W, C), got shape {X.shape}")
    t = torch.as_tensor(X).permute(0, 3, 1, 2).float()
    if X.dtype == np.uint8:
        t = t / 255.0
    if mean is not None:
        m = torch.as_tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
        s = torch.as_tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
        t = (t - m) / s
    return t.contiguous()


def random_crop_flip(batch: torch.Tensor, generator: torch.Generator | None = None, pad: int = 4,
                     flip: bool = True) -> torch.Tensor:
    """RandomCrop(pad) + horizontal flip (if ``flip``) for a batch (N, C, H, W), vectorised (CPU and GPU)."""
    n, _, h, w = batch.shape
    padded = F.pad(batch, (pad, pad, pad, pad), mode="constant", value=0.0)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=generator).to(batch.device)
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=generator).to(batch.device)
    rows = (dy[:, None] + torch.arange(h, device=batch.device)[None, :])  # (n, h)
    cols = (dx[:, None] + torch.arange(w, device=batch.device)[None, :])  # (n, w)
    mirror = (torch.rand(n, generator=generator) < 0.5).to(batch.device) & flip
    cols = torch.where(mirror[:, None], cols.flip(1), cols)
    idx_n = torch.arange(n, device=batch.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[idx_n, rows[:, :, None], cols[:, None, :]]  # (n, h, w, C)
    return out.permute(0, 3, 1, 2).contiguous()


AMP_DTYPE = torch.float16  # the autocast dtype of mixed precision (fp16, with a GradScaler)


def amp_scaler(device: torch.device, enabled: bool = True) -> torch.amp.GradScaler:
    """A gradient scaler that turns mixed precision on for CUDA devices (when ``enabled``) and off elsewhere."""
    return torch.amp.GradScaler("cuda", enabled=enabled and torch.device(device).type == "cuda")


def amp_autocast(device: torch.device | str, enabled: bool):
    """``AMP_DTYPE`` autocast on ``device`` when ``enabled`` (callers enable it where their scaler is on, i.e. on
    CUDA only), a no-op context otherwise."""
    return torch.autocast(torch.device(device).type, dtype=AMP_DTYPE, enabled=enabled)


def as_float32(value):
    """``value`` with every floating tensor in it (nested in tuples, lists, dicts) cast to float32."""
    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, dict):
        return type(value)((k, as_float32(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(as_float32(v) for v in value)
    return value


@contextmanager
def autocast_forward(module: nn.Module, device_type: str, dtype: torch.dtype = torch.bfloat16):
    """Within the block, ``module``'s forward runs under ``torch.autocast(device_type, dtype)`` and hands back its
    floating tensors as float32 (``as_float32``), so the code around it (box geometry, losses, a decoder) stays in
    fp32: autocast for one network of a pipeline rather than the whole forward. The forward is an instance attribute
    shadowing the class's, restored on exit (an outer block's wrapper too); the state dict is unchanged. Not
    thread-safe."""
    forward = module.forward

    def run(*args, **kwargs):
        with torch.autocast(device_type, dtype=dtype):
            out = forward(*args, **kwargs)
        return as_float32(out)

    before = module.__dict__.get("forward")  # None: the class's
    module.forward = run
    try:
        yield
    finally:
        if before is None:
            del module.forward
        else:
            module.forward = before


def make_optimizer(model: nn.Module, name: str, lr: float, weight_decay: float = 0.0, momentum: float = 0.9):
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "sgd_nesterov":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=True)
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    raise unknown_choice("optimizer", name, ["sgd", "sgd_nesterov", "adam", "adamw"])


def train_epoch(
    model: nn.Module,
    X: torch.Tensor,
    targets: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    *,
    batch_size: int,
    generator: torch.Generator,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
    scaler: torch.amp.GradScaler | None = None,
    drop_last: bool = False,
) -> float:
    """One pass over (X, targets) in shuffled mini-batches; returns the mean training loss.

    ``X`` and ``targets`` may already live on the model's device (fastest for small data sets).
    """
    device = next(model.parameters()).device
    model.train()
    order = torch.randperm(len(X), generator=generator)
    stop = len(X) - len(X) % batch_size if drop_last and len(X) >= batch_size else len(X)
    total, count = 0.0, 0
    for start in range(0, stop, batch_size):
        idx = order[start : start + batch_size]
        xb, tb = X[idx].to(device, non_blocking=True), targets[idx].to(device, non_blocking=True)
        if augment is not None:
            xb = augment(xb, generator)
        with amp_autocast(device, enabled=scaler is not None and scaler.is_enabled()):
            loss = loss_fn(model(xb), tb)
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None and scaler.is_enabled():
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        total += float(loss.detach()) * len(idx)
        count += len(idx)
    return total / max(count, 1)


@torch.no_grad()
def predict_logits(model: nn.Module, X: torch.Tensor, *, batch_size: int = 512, amp: bool = False) -> torch.Tensor:
    """Logits (n, K) in eval mode, on the CPU, in float32; with ``amp`` the forward passes run under fp16 autocast
    (``amp_autocast``: pass it on for CUDA only, e.g. ``scaler.is_enabled()``)."""
    device = next(model.parameters()).device
    model.eval()
    out = []
    for i in range(0, len(X), batch_size):
        with amp_autocast(device, enabled=amp):
            logits = model(X[i : i + batch_size].to(device))
        out.append(logits.float().cpu())
    return torch.cat(out) if out else torch.empty(0)


def predict_proba(model: nn.Module, X: torch.Tensor, *, batch_size: int = 512) -> np.ndarray:
    """Softmax probabilities (n, K) as a numpy array."""
    return torch.softmax(predict_logits(model, X, batch_size=batch_size), dim=1).numpy()
