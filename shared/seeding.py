"""Seeding: one call for python, numpy and torch, and SHA-256 per-item seeds.

Per-item seeds never depend on Python's ``hash()`` (salted per process) or on global random state, so
an item's randomness is the same whatever order or subset of items is processed.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import random
from collections.abc import Iterator

import numpy as np


def seed_everything(seed: int, *, deterministic: bool = True) -> None:
    """Seed ``random``, numpy's global state and torch (CPU and CUDA).

    With ``deterministic`` torch uses deterministic algorithms where they exist (warning, not failing,
    where they do not) and cuDNN autotuning is off.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:  # torch is optional for purely numpy code
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        _deterministic_algorithms()
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def _deterministic_algorithms(enabled: bool = True, warn_only: bool = True) -> None:
    """``torch.use_deterministic_algorithms(enabled, warn_only=warn_only)`` without importing ``torch._inductor``
    (2-4 s in every process, for torch.compile's kernels, which this project does not use): the flag the eager kernels
    read is set as that function sets it, and inductor's own flag too where inductor is loaded already."""
    import sys

    import torch

    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # a torch without the private setter: the public call, import and all
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        return
    setter(enabled, warn_only=warn_only)
    if "torch._inductor.config" in sys.modules:
        sys.modules["torch._inductor.config"].deterministic = enabled


@contextlib.contextmanager
def nondeterministic_kernels(device) -> Iterator[None]:
    """Within the block, on an accelerator (CUDA, MPS, XPU), PyTorch's deterministic mode is off (restored on
    exit, warn-only flag included); on the CPU nothing changes.

    Why: under deterministic mode torchvision's ``roi_align`` on an accelerator falls back to its pure-Python
    implementation, whose eager form materialises every sampling point: Mask R-CNN's mask targets for one COCO image
    (800 x 1333) asked for a single 44 GiB tensor on an H200 (``shared.gpu_check``, 2026-11-30), and inference ran 3 s
    a batch of 16. Its CUDA kernel is the one MMDetection and torchvision train with; its backward adds with atomics,
    so accelerator runs of a detector are reproducible up to float rounding, not bit for bit. CPU runs stay exact.
    """
    import torch

    kind = torch.device(device).type
    if kind not in ("cuda", "mps", "xpu") or not torch.are_deterministic_algorithms_enabled():
        yield
        return
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    _deterministic_algorithms(False)
    try:
        yield
    finally:
        _deterministic_algorithms(True, warn_only=warn_only)


def item_seed(*parts) -> int:
    """A 64-bit seed from the parts, joined by ``|``: ``uint64_le(SHA256(key)[:8])``.

    ``item_seed(0, "cifar10", "fog", 3, "test", 17)`` hashes ``"0|cifar10|fog|3|test|17"``.
    """
    key = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def as_generator(seed) -> np.random.Generator:
    """``seed`` (an int or a ``numpy.random.Generator``) as a Generator; other types raise ConfigError."""
    from shared.errors import ConfigError

    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return np.random.default_rng(int(seed))
    raise ConfigError(f"seed must be an int or a numpy.random.Generator, got {type(seed).__name__}")


def item_rng(*parts) -> np.random.Generator:
    """``np.random.default_rng(item_seed(*parts))``."""
    return np.random.default_rng(item_seed(*parts))


def seed_hash(*args) -> int:
    """DomainBed's seed: ``int(md5(str(args)).hexdigest(), 16) % 2**31`` (PLENCH's random search uses it).

    ``seed_hash(0, 1)`` hashes the text ``"(0, 1)"``, so seeds match the official sweep's exactly.
    """
    return int(hashlib.md5(str(args).encode()).hexdigest(), 16) % 2**31
