import ast
import fcntl
import hashlib
import json
import multiprocessing
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from shared.cache import (
    ArtifactCache, code_fingerprint, load_artifact, params_key, remove_stale_temporaries, save_artifact,
)
from shared.codedeps import PROJECT_PACKAGES
from shared.errors import ConfigError, DataFormatError
from shared.paths import REPO_ROOT


def test_builds_once_then_reuses(tmp_path):
    cache, calls = ArtifactCache(tmp_path), []

    def build():
        calls.append(1)
        return {"x": np.arange(3)}

    for _ in range(3):
        out = cache.get_or_build("kind", {"a": 1}, build)
    assert len(calls) == 1 and np.array_equal(out["x"], np.arange(3))
    cache.get_or_build("kind", {"a": 2}, build)
    assert len(calls) == 2  # new parameters, new entry


def test_key_depends_on_code(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text("x = 1\n")
    before = code_fingerprint(module)
    module.write_text("x = 2\n")
    assert code_fingerprint(module) != before
    assert params_key("k", {"a": 1}, "c1") != params_key("k", {"a": 1}, "c2")
    assert params_key("k", {"a": 1, "b": 2}) == params_key("k", {"b": 2, "a": 1})


def test_unserialisable_params_are_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="JSON-serialisable"):
        ArtifactCache(tmp_path).get_or_build("k", {"f": object()}, lambda: {})


def test_failed_build_leaves_no_entry(tmp_path):
    cache = ArtifactCache(tmp_path)

    def broken():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        cache.get_or_build("k", {"a": 1}, broken)
    assert not any(p.name == "meta.json" for p in tmp_path.rglob("*"))
    assert cache.get_or_build("k", {"a": 1}, lambda: {"v": np.ones(1)})["v"][0] == 1


def test_corrupt_entry_is_rebuilt(tmp_path):
    cache = ArtifactCache(tmp_path)
    cache.get_or_build("k", {"a": 1}, lambda: {"v": np.zeros(2)})
    (artifact,) = tmp_path.rglob("artifact.npz")
    artifact.write_bytes(b"not a zip")
    assert cache.get_or_build("k", {"a": 1}, lambda: {"v": np.ones(2)})["v"].sum() == 2


@pytest.mark.parametrize("fmt,obj", [("json", {"a": [1, 2]}), ("npz", {"a": np.eye(2)})])
def test_round_trip_simple_formats(tmp_path, fmt, obj):
    path = tmp_path / f"x.{fmt}"
    save_artifact(obj, path, fmt)
    back = load_artifact(path, fmt)
    assert json.dumps(back, default=lambda a: a.tolist()) == json.dumps(obj, default=lambda a: a.tolist())


def test_torch_round_trip_loads_weights_only(tmp_path):
    state = torch.nn.Linear(2, 2).state_dict()
    save_artifact(state, tmp_path / "m.pt", "torch")
    back = load_artifact(tmp_path / "m.pt", "torch")
    assert all(torch.equal(state[k], back[k]) for k in state)
    torch.save({"f": ArtifactCache}, tmp_path / "evil.pt")  # an arbitrary object is refused
    with pytest.raises(Exception, match="Weights only load failed"):
        load_artifact(tmp_path / "evil.pt", "torch")


def test_skops_round_trip_and_refusal_of_foreign_types(tmp_path):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression().fit(np.array([[0.0], [1.0], [2.0], [3.0]]), [0, 0, 1, 1])
    save_artifact(model, tmp_path / "m.skops", "skops")
    back = load_artifact(tmp_path / "m.skops", "skops")
    assert np.allclose(back.predict_proba([[1.5]]), model.predict_proba([[1.5]]))
    from sklearn.preprocessing import FunctionTransformer

    save_artifact(FunctionTransformer(_build_slowly), tmp_path / "f.skops", "skops")  # holds a test function
    with pytest.raises(DataFormatError, match="refusing to load"):
        load_artifact(tmp_path / "f.skops", "skops")


def _build_slowly(root, out):
    def build():
        time.sleep(1.0)
        return {"pid": np.array([multiprocessing.current_process().pid])}

    out.put(int(ArtifactCache(root).get_or_build("k", {"a": 1}, build)["pid"][0]))


def test_concurrent_builders_build_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_build_slowly, args=(tmp_path, out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    results = [out.get(timeout=5) for _ in procs]
    assert results[0] == results[1]  # the second process loaded the first one's artifact


# ---------------------------------------------------------------------------------------------- damaged entries
def _scaler(offset):
    from sklearn.preprocessing import StandardScaler

    return StandardScaler().fit(np.arange(40.0).reshape(20, 2) + offset)


def _fill_folder(value):
    def build(folder):
        (folder / "sub").mkdir(parents=True)
        (folder / "weights.bin").write_bytes(bytes([value]) * 4000)
        (folder / "sub" / "note.txt").write_text(f"value {value}\n")

    return build


# fmt -> (build of version v (0 or 1), the file to damage, what a read shows as v)
FORMAT_CASES = {
    "npz": (lambda v: lambda: {"x": np.arange(1000.0) + v}, "artifact.npz", lambda a: a["x"][0]),
    "json": (lambda v: lambda: {"x": list(range(v, v + 500))}, "artifact.json", lambda a: a["x"][0]),
    "torch": (lambda v: lambda: {"w": torch.arange(1000.0) + v}, "artifact.pt", lambda a: float(a["w"][0])),
    "skops": (lambda v: lambda: _scaler(100 * v), "artifact.skops", lambda a: int(a.mean_[0] // 100)),
    "dir": (lambda v: _fill_folder(v + 1), "artifact/weights.bin", lambda a: (a / "weights.bin").read_bytes()[0] - 1),
}


def _damage(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "byte-flipped":
        path.write_bytes(data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0x01]) + data[len(data) // 2 + 1:])
    else:
        path.unlink()


def _must_not_build(*_):
    raise AssertionError("the entry should have been read, not built")


@pytest.mark.parametrize("how", ["truncated", "empty", "byte-flipped", "missing"])
@pytest.mark.parametrize("fmt", FORMAT_CASES)
def test_a_damaged_entry_is_rebuilt_with_a_warning_naming_it(tmp_path, capsys, fmt, how):
    version, file, shown = FORMAT_CASES[fmt]
    cache = ArtifactCache(tmp_path)
    assert shown(cache.get_or_build("k", {"a": 1}, version(0), fmt=fmt)) == 0
    (entry,) = tmp_path.glob("k/*/")
    _damage(entry / file, how)
    capsys.readouterr()
    assert shown(cache.get_or_build("k", {"a": 1}, version(1), fmt=fmt)) == 1  # rebuilt, not the damaged bytes
    warning = capsys.readouterr().err
    assert f"rebuilding {entry}" in warning and file in warning
    assert shown(cache.get_or_build("k", {"a": 1}, _must_not_build, fmt=fmt)) == 1  # the rebuilt entry is sound
    assert capsys.readouterr().err == "" and [p.name for p in (tmp_path / "k").iterdir() if p.is_dir()] == [entry.name]


def test_an_entry_that_fails_to_load_despite_its_checksums_is_rebuilt(tmp_path, capsys):
    cache = ArtifactCache(tmp_path)
    cache.get_or_build("k", {"a": 1}, lambda: {"x": np.zeros(3)})
    (entry,) = tmp_path.glob("k/*/")
    artifact, meta = entry / "artifact.npz", json.loads((entry / "meta.json").read_text())
    artifact.write_bytes(b"PK\x03\x04 not a zip archive")  # checksummed anew: only the loader can tell
    meta["files"]["artifact.npz"] = hashlib.sha256(artifact.read_bytes()).hexdigest()
    (entry / "meta.json").write_text(json.dumps(meta))
    assert cache.get_or_build("k", {"a": 1}, lambda: {"x": np.ones(3)})["x"].sum() == 3
    assert f"rebuilding {entry}: BadZipFile" in capsys.readouterr().err


def test_an_entry_without_checksums_is_unverifiable_and_rebuilt(tmp_path, capsys):
    cache = ArtifactCache(tmp_path)
    cache.get_or_build("k", {"a": 1}, lambda: {"x": np.zeros(3)})
    (entry,) = tmp_path.glob("k/*/")
    meta = json.loads((entry / "meta.json").read_text())
    del meta["files"]  # as written by the cache before checksums
    (entry / "meta.json").write_text(json.dumps(meta))
    assert cache.get_or_build("k", {"a": 1}, lambda: {"x": np.ones(3)})["x"].sum() == 3
    assert "without checksums" in capsys.readouterr().err
    assert "files" in json.loads((entry / "meta.json").read_text())


def test_a_file_added_to_a_folder_entry_is_detected(tmp_path, capsys):
    cache = ArtifactCache(tmp_path)
    folder = cache.get_or_build("k", {"a": 1}, _fill_folder(1), fmt="dir")
    (folder / "stray.bin").write_bytes(b"x")
    folder = cache.get_or_build("k", {"a": 1}, _fill_folder(2), fmt="dir")
    assert (folder / "weights.bin").read_bytes()[0] == 2 and not (folder / "stray.bin").exists()
    assert "artifact/stray.bin" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- stale temporaries
def _hold_the_lock_while_building(root, started):
    def build():
        Path(started).touch()
        time.sleep(120)

    ArtifactCache(root).get_or_build("k", {"a": "slow"}, build)


def test_a_killed_builders_temporary_is_removed_and_a_live_ones_kept(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    started = tmp_path / "started"
    builder = ctx.Process(target=_hold_the_lock_while_building, args=(tmp_path / "cache", str(started)))
    builder.start()
    try:
        deadline = time.time() + 60
        while not started.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the builder did not start"
        (live,) = (tmp_path / "cache" / "k").glob(".tmp-*")
        cache = ArtifactCache(tmp_path / "cache")
        cache.get_or_build("k", {"a": 1}, lambda: {"x": np.ones(1)})  # builds beside the live builder
        assert live.is_dir()
        builder.kill()  # SIGKILL: no cleanup runs, the temporary stays
        builder.join(30)
        assert live.is_dir()
        cache.get_or_build("k", {"a": 2}, lambda: {"x": np.ones(1)})  # any build of the kind cleans up
        assert not live.exists()
    finally:
        builder.kill()


def test_cleanup_keeps_temporaries_whose_lock_is_held_and_skips_other_names(tmp_path):
    kind = tmp_path / "k"
    live, dead, own = (kind / f".tmp-{key}-x1y2" for key in ("a" * 16, "b" * 16, "c" * 16))
    for folder in (live, dead, own):
        (folder / "artifact").mkdir(parents=True)
    (kind / ".tmp-notakey").mkdir()
    with open(kind / f"{'a' * 16}.lock", "w") as handle:  # a concurrent builder of key aaaa...
        fcntl.flock(handle, fcntl.LOCK_EX)
        assert remove_stale_temporaries(kind, held="c" * 16) == [dead, own]
    assert live.is_dir() and (kind / ".tmp-notakey").is_dir()
    assert remove_stale_temporaries(kind) == [live]  # its builder is gone


# ---------------------------------------------------------------------------------------------- code keys
PACKAGES = {
    "shared/__init__.py": "",
    "shared/models.py": "from shared.training import loop\n",
    "shared/training.py": "loop = 1\n",
    "shared/book.py": "book = 1\n",
    "ciln/__init__.py": "",
    "ciln/fake.py": "from shared.models import loop\n",
}


def test_the_code_key_covers_the_imports_of_the_functions_module(tmp_path):
    for name, text in PACKAGES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    namespace = {"__name__": "ciln.fake"}
    exec("def fit():\n    return 1\n", namespace)  # a function of the module ciln.fake in that tree
    fit = namespace["fit"]
    before = code_fingerprint(fit, root=tmp_path)
    assert code_fingerprint(types.ModuleType("ciln.fake"), root=tmp_path) == before
    (tmp_path / "shared/book.py").write_text("book = 2\n")  # imported by nobody
    assert code_fingerprint(fit, root=tmp_path) == before
    (tmp_path / "shared/training.py").write_text("loop = 2\n")  # two imports away
    assert code_fingerprint(fit, root=tmp_path) != before
    with pytest.raises(ConfigError, match="ciln.absent, which has no source file"):  # never a silent empty key
        code_fingerprint(types.ModuleType("ciln.absent"), root=tmp_path)


def test_every_cached_artifact_in_the_project_is_keyed_on_its_code():
    for path in sorted(p for package in PROJECT_PACKAGES for p in (REPO_ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get_or_build":
                code = next((k.value for k in node.keywords if k.arg == "code"), None)
                where = f"{path.relative_to(REPO_ROOT)}:{node.lineno}"
                assert code is not None, f"{where} caches an artifact without code=..."
                # a path stands for one file; a function or module brings the modules it imports
                assert "__file__" not in ast.unparse(code), f"{where} keys on its own file only"


def test_lookup_finds_sound_entries_only(tmp_path):
    cache = ArtifactCache(tmp_path)
    assert cache.lookup("k", {"a": 1}) is None
    cache.get_or_build("k", {"a": 1}, lambda: {"x": np.arange(3)})
    assert np.array_equal(cache.lookup("k", {"a": 1})["x"], np.arange(3))
    assert cache.lookup("k", {"a": 2}) is None
    (artifact,) = tmp_path.glob("k/*/artifact.npz")
    artifact.write_bytes(b"damaged")
    assert cache.lookup("k", {"a": 1}) is None
