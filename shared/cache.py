"""Artifact cache: expensive results (trained models, generated benchmarks) keyed by their parameters.

An entry lives in ``<cache>/<kind>/<key>/`` with ``artifact.<ext>`` and ``meta.json``. The key is a hash of
the kind, the parameters and a fingerprint of the code that builds it, so changing either rebuilds.
Entries are written to a temporary folder and renamed into place (atomic: a killed run leaves no half
entry), concurrent builders of the same entry are serialised with a file lock, and loading never
unpickles arbitrary objects (``np.load(allow_pickle=False)``, ``torch.load(weights_only=True)``,
skops for scikit-learn models with only scikit-learn/numpy/scipy types trusted).

    cache = ArtifactCache()
    votes = cache.get_or_build("votes", params, lambda: {"votes": compute()}, code=[my_module])
"""
from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import tempfile
import time
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.paths import cache_dir

FORMATS = {"npz": "npz", "json": "json", "torch": "pt", "skops": "skops", "dir": None}
_TRUSTED_SKOPS_PREFIXES = ("sklearn.", "numpy.", "scipy.", "builtins.", "collections.")


def code_fingerprint(*objects: Any) -> str:
    """A hash of the source files behind modules, functions, classes or paths (folders: all ``.py``)."""
    files: set[Path] = set()
    for obj in objects:
        if isinstance(obj, (str, os.PathLike)):
            path = Path(obj)
            files.update(path.rglob("*.py") if path.is_dir() else [path])
        elif isinstance(obj, types.ModuleType) or inspect.isfunction(obj) or inspect.isclass(obj):
            files.add(Path(inspect.getsourcefile(obj)))
        else:
            raise TypeError(f"code_fingerprint takes modules, functions, classes or paths, not {type(obj)}")
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def params_key(kind: str, params: dict, code: str = "") -> str:
    """The entry key: 16 hex digits of SHA-256 over the canonical JSON of kind, params and code."""
    try:
        blob = json.dumps({"kind": kind, "params": params, "code": code}, sort_keys=True, default=_jsonable)
    except TypeError as e:
        raise ConfigError(f"cache parameters of {kind!r} must be JSON-serialisable: {e}") from e
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, (np.ndarray, tuple, set)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def save_artifact(obj: Any, path: Path, fmt: str) -> None:
    """Write ``obj`` to ``path`` in ``fmt`` (see FORMATS)."""
    if fmt == "npz":
        if not isinstance(obj, dict):
            raise TypeError("the npz format stores a dict of arrays")
        np.savez(path, **{k: np.asarray(v) for k, v in obj.items()})
    elif fmt == "json":
        path.write_text(json.dumps(obj, indent=1, default=_jsonable))
    elif fmt == "torch":
        import torch

        torch.save(obj, path)
    elif fmt == "skops":
        import skops.io

        skops.io.dump(obj, path)
    else:
        raise unknown_choice("artifact format", fmt, [f for f in FORMATS if f != "dir"])


def load_artifact(path: Path, fmt: str) -> Any:
    """Read an artifact written by ``save_artifact`` without executing stored code."""
    if fmt == "npz":
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    if fmt == "json":
        return json.loads(path.read_text())
    if fmt == "torch":
        import torch

        return torch.load(path, map_location="cpu", weights_only=True)
    if fmt == "skops":
        import skops.io

        untrusted = skops.io.get_untrusted_types(file=path)
        refused = [t for t in untrusted if not t.startswith(_TRUSTED_SKOPS_PREFIXES)]
        if refused:
            raise DataFormatError(f"{path} holds types outside scikit-learn/numpy/scipy: {refused}; refusing to load")
        return skops.io.load(path, trusted=untrusted)
    raise unknown_choice("artifact format", fmt, [f for f in FORMATS if f != "dir"])


class ArtifactCache:
    """A folder of cached artifacts. ``root`` defaults to ``$NOISY_CACHE_DIR`` or ``<repo>/.cache/artifacts``."""

    def __init__(self, root: str | os.PathLike | None = None, *, verbose: bool = False):
        self.root = Path(root) if root is not None else cache_dir()
        self.verbose = verbose

    def entry_dir(self, kind: str, key: str) -> Path:
        return self.root / kind / key

    def get_or_build(
        self,
        kind: str,
        params: dict,
        build: Callable[..., Any],
        *,
        code: Iterable[Any] = (),
        fmt: str = "npz",
    ) -> Any:
        """The cached artifact for (kind, params, code), building and storing it first if absent.

        ``build()`` returns the object to store; with ``fmt="dir"`` it is called as ``build(folder)`` to fill
        a folder, and the entry's folder path is returned.
        """
        if fmt not in FORMATS:
            raise unknown_choice("artifact format", fmt, FORMATS)
        code = list(code)
        key = params_key(kind, params, code_fingerprint(*code) if code else "")
        final = self.entry_dir(kind, key)
        found = self._load(final, fmt)
        if found is not None:
            return found
        final.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(final.parent / f"{key}.lock"):
            found = self._load(final, fmt)  # built by a concurrent process while we waited
            if found is not None:
                return found
            start = time.perf_counter()
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=final.parent))
            try:
                if fmt == "dir":
                    build(tmp / "artifact")
                else:
                    save_artifact(build(), tmp / f"artifact.{FORMATS[fmt]}", fmt)
                meta = {"kind": kind, "key": key, "format": fmt, "params": params, "created": time.time()}
                (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=_jsonable))
                if final.exists():  # a stale or unreadable entry: replace it
                    shutil.rmtree(final)
                os.replace(tmp, final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            if self.verbose:
                print(f"[cache] built {kind}/{key} in {time.perf_counter() - start:.1f} s")
        return self._load(final, fmt)

    def _load(self, entry: Path, fmt: str) -> Any:
        meta_path = entry / "meta.json"
        if not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("format") != fmt:
                return None
            if fmt == "dir":
                return entry / "artifact"
            return load_artifact(entry / f"artifact.{FORMATS[fmt]}", fmt)
        except (OSError, ValueError, json.JSONDecodeError) as e:  # unreadable entry: rebuild it
            print(f"[cache] ignoring unreadable entry {entry} ({e}); rebuilding")
            return None


@contextmanager
def _file_lock(path: Path):
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
