"""Artifact cache: expensive results (trained models, generated benchmarks) keyed by their parameters.

An entry lives in ``<cache>/<kind>/<key>/`` with ``artifact.<ext>`` (or the folder ``artifact/``) and
``meta.json``, which records the SHA-256 of every artifact file. The key is a hash of the kind, the parameters
and a fingerprint of the code that builds it: the project modules behind the given functions, followed through
their imports (``shared.codedeps``), so editing any module a build can reach rebuilds it.

* **Atomic writes.** An entry is written to a temporary folder ``.tmp-<key>-*`` and renamed into place (a
  killed run leaves no half entry); concurrent builders of the same entry are serialised by the file lock
  ``<kind>/<key>.lock``, and a damaged entry is replaced under that lock.
* **Checked reads.** Every read verifies the checksums before loading. A damaged entry (truncated, emptied, a
  flipped byte, a missing or extra file, or any error while loading it) is reported on stderr with its path and
  the reason, and rebuilt. Entries written before checksums were recorded cannot be verified and are rebuilt
  the same way.
* **Stale temporaries.** A temporary exists only while its builder holds the key's lock, so when an entry of a
  kind is built, the kind's temporaries whose lock can be taken (their builder died) are deleted; those of
  live builders, on this machine or another one sharing the folder, are left alone.
* **Safe loading.** Loading never unpickles arbitrary objects (``np.load(allow_pickle=False)``,
  ``torch.load(weights_only=True)``, skops for scikit-learn models with only scikit-learn/numpy/scipy types
  trusted).

    cache = ArtifactCache()
    votes = cache.get_or_build("votes", params, lambda: {"votes": compute()}, code=[compute])
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import time
import types
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from shared.codedeps import PROJECT_PACKAGES, fingerprint_files, module_closure, module_file
from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.locks import file_lock
from shared.paths import cache_dir
from shared.runlog import log_run

FORMATS = {"npz": "npz", "json": "json", "torch": "pt", "skops": "skops", "dir": None}
_TRUSTED_SKOPS_PREFIXES = ("sklearn.", "numpy.", "scipy.", "builtins.", "collections.")
_TEMPORARY = re.compile(r"\.tmp-(?P<key>[0-9a-f]{16})-")
_ABSENT = object()  # no usable entry


def code_fingerprint(*objects: Any, root: str | os.PathLike | None = None) -> str:
    """A hash of the code behind modules, functions, classes or paths (a folder: all its ``.py`` files).

    A module, function or class of the project's packages (``shared.codedeps.PROJECT_PACKAGES``) stands for its
    module and every project module that one imports, transitively (``shared.codedeps.module_closure``), so
    passing the function that builds an artifact covers the helpers it calls in other modules. One defined
    elsewhere (a test, a script) stands for its own source file, and a path for itself, without its imports.
    ``root`` is where the project's packages are looked up (default: the repository).
    """
    modules, files = set(), set()
    for obj in objects:
        if isinstance(obj, (str, os.PathLike)):
            path = Path(obj)
            files.update(path.rglob("*.py") if path.is_dir() else [path])
        elif isinstance(obj, types.ModuleType) or inspect.isfunction(obj) or inspect.isclass(obj):
            name = obj.__name__ if isinstance(obj, types.ModuleType) else obj.__module__
            if name.partition(".")[0] in PROJECT_PACKAGES:
                if module_file(name, root=root) is None:
                    raise ConfigError(f"code_fingerprint: {obj!r} belongs to {name}, which has no source file under "
                                      f"{root or 'the repository'}; pass the path of its source instead")
                modules.add(name)
            else:
                files.add(Path(inspect.getsourcefile(obj)))
        else:
            raise TypeError(f"code_fingerprint takes modules, functions, classes or paths, not {type(obj)}")
    return fingerprint_files([*module_closure(modules, root=root), *files], root=root)


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


def remove_stale_temporaries(kind_dir: str | os.PathLike, *, held: str | None = None) -> list[Path]:
    """Delete the temporary folders in ``kind_dir`` (one kind's folder) left by builders that died; return them.

    A temporary ``.tmp-<key>-*`` exists only while its builder holds the lock ``<key>.lock``, and the lock is
    released when the builder ends, however it ends. So a temporary whose lock can be taken at once is stale: it
    is deleted while that lock is held (no builder can start on it meanwhile). A temporary whose lock is held
    belongs to a live builder and is kept. ``held`` is a key whose lock the caller holds: its temporaries are
    stale too.
    """
    removed = []
    for path in sorted(Path(kind_dir).glob(".tmp-*")):
        match = _TEMPORARY.match(path.name)
        if match is None:
            continue
        key = match["key"]
        with (nullcontext(True) if key == held else file_lock(Path(kind_dir) / f"{key}.lock", wait=False)) as free:
            if free:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


class ArtifactCache:
    """A folder of cached artifacts. ``root`` defaults to ``$NOISY_CACHE_DIR`` or ``<repo>/.cache/artifacts``."""

    def __init__(self, root: str | os.PathLike | None = None, *, verbose: bool = False):
        self.root = Path(root) if root is not None else cache_dir()
        self.verbose = verbose

    def entry_dir(self, kind: str, key: str) -> Path:
        return self.root / kind / key

    def lookup(self, kind: str, params: dict, *, code: Iterable[Any] = (), fmt: str = "npz") -> Any | None:
        """The cached artifact for (kind, params, code) if a sound entry exists, else None (nothing is built; a
        damaged entry reads as absent and is rebuilt by the next ``get_or_build``)."""
        code = list(code)
        found, _ = self._read(self.entry_dir(kind, params_key(kind, params, code_fingerprint(*code) if code else "")),
                              fmt)
        return None if found is _ABSENT else found

    def get_or_build(
        self,
        kind: str,
        params: dict,
        build: Callable[..., Any],
        *,
        code: Iterable[Any] = (),
        fmt: str = "npz",
    ) -> Any:
        """The cached artifact for (kind, params, code), building and storing it first if absent or damaged.

        ``build()`` returns the object to store; with ``fmt="dir"`` it is called as ``build(folder)`` to fill
        a folder, and the entry's folder path is returned. ``code`` lists what the artifact is computed by (see
        ``code_fingerprint``): the function that builds it is usually enough.
        """
        if fmt not in FORMATS:
            raise unknown_choice("artifact format", fmt, FORMATS)
        code = list(code)
        key = params_key(kind, params, code_fingerprint(*code) if code else "")
        final = self.entry_dir(kind, key)
        found, _ = self._read(final, fmt)
        if found is not _ABSENT:
            log_run(kind, key, built=False)
            return found
        final.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(final.parent / f"{key}.lock"):
            found, problem = self._read(final, fmt)  # built (or repaired) by a concurrent process while we waited
            if found is not _ABSENT:
                log_run(kind, key, built=False)
                return found
            if problem is not None:
                print(f"[cache] rebuilding {final}: {problem}", file=sys.stderr)
            remove_stale_temporaries(final.parent, held=key)
            start = time.perf_counter()
            self._build(final, {"kind": kind, "key": key, "format": fmt, "params": params}, build)
            seconds = time.perf_counter() - start
            log_run(kind, key, built=True, seconds=seconds)
            if self.verbose:
                print(f"[cache] built {kind}/{key} in {seconds:.1f} s")
            return _open(final, fmt)

    def _build(self, final: Path, meta: dict, build: Callable[..., Any]) -> None:
        fmt = meta["format"]
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{meta['key']}-", dir=final.parent))
        try:
            if fmt == "dir":
                build(tmp / "artifact")
            else:
                save_artifact(build(), tmp / f"artifact.{FORMATS[fmt]}", fmt)
            meta = dict(meta, created=time.time(), files=_checksums(tmp))
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=_jsonable))
            if final.exists():  # a damaged entry: moved aside first, so the entry is swapped in one rename
                aside = tempfile.mkdtemp(prefix=f".tmp-{meta['key']}-", dir=final.parent)
                os.replace(final, aside)
                os.replace(tmp, final)
                shutil.rmtree(aside, ignore_errors=True)
            else:
                os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @staticmethod
    def _read(entry: Path, fmt: str) -> tuple[Any, str | None]:
        """(artifact, None) from a sound entry; (_ABSENT, None) without an entry; (_ABSENT, why) if it is unusable."""
        if not entry.exists():
            return _ABSENT, None
        try:
            return _open(entry, fmt), None
        except Exception as e:  # noqa: BLE001  damage shows in many ways: BadZipFile, EOFError, UnpicklingError...
            return _ABSENT, str(e) if isinstance(e, _Unusable) else f"{type(e).__name__}: {e}"


class _Unusable(DataFormatError):
    """An entry that fails its checks before loading (message: why)."""


def _open(entry: Path, fmt: str) -> Any:
    """The artifact of an entry whose files match the checksums in its ``meta.json``."""
    meta_path = entry / "meta.json"
    if not meta_path.is_file():
        raise _Unusable("it has no meta.json")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != fmt:
        raise _Unusable(f"it holds format {meta.get('format')!r}, not {fmt!r}")
    if "files" not in meta:
        raise _Unusable("it was written without checksums (by an older version of shared.cache) and cannot be verified")
    found = _checksums(entry)
    for name, digest in meta["files"].items():
        if name not in found:
            raise _Unusable(f"{name} is missing")
        if found[name] != digest:
            raise _Unusable(f"{name} does not match its checksum (truncated, damaged or modified)")
    extra = sorted(set(found) - set(meta["files"]))
    if extra:
        raise _Unusable(f"it holds files it was not built with: {extra}")
    if fmt == "dir":
        return entry / "artifact"
    return load_artifact(entry / f"artifact.{FORMATS[fmt]}", fmt)


def _checksums(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but ``meta.json``, by path relative to ``folder``."""
    sums = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.relative_to(folder).as_posix() != "meta.json":
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            sums[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return sums
