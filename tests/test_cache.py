import json
import multiprocessing
import time

import numpy as np
import pytest
import torch

from shared.cache import ArtifactCache, code_fingerprint, load_artifact, params_key, save_artifact
from shared.errors import ConfigError, DataFormatError


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
