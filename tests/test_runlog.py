"""The run log (shared.runlog): what the cache and the sweeps record, and its summary."""
import json
import multiprocessing as mp
import os

import numpy as np

from shared import runlog, sweep
from shared.cache import ArtifactCache


def _append(path, kind, n):
    os.environ[runlog.ENV] = str(path)
    for i in range(n):
        runlog.log_run(kind, f"k{i}", built=i % 2 == 0, seconds=0.5)


def test_nothing_is_written_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(runlog.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    runlog.log_run("x", "k", built=True)
    assert list(tmp_path.iterdir()) == []


def test_cache_logs_a_build_then_loads(tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    cache = ArtifactCache(tmp_path / "cache")
    for seed in (1, 2, 1, 1):
        cache.get_or_build("toy", {"seed": seed}, lambda seed=seed: {"x": np.full(3, seed)})
    entries = runlog.read_log(log)
    assert [e["built"] for e in entries] == [True, True, False, False]
    assert entries[0]["key"] == entries[2]["key"] != entries[1]["key"]
    assert runlog.summarise(log) == {"toy": {"runs": 2, "built": 2, "loaded": 0,
                                             "build_s": round(entries[0]["seconds"] + entries[1]["seconds"], 2)}}


def test_a_key_found_in_the_cache_counts_as_loaded(tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path / "cache")
    cache.get_or_build("toy", {"seed": 1}, lambda: {"x": np.zeros(2)})  # before the log: an earlier notebook
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    cache.get_or_build("toy", {"seed": 1}, lambda: {"x": np.zeros(2)})
    cache.get_or_build("toy", {"seed": 3}, lambda: {"x": np.zeros(2)})
    assert runlog.summarise(log)["toy"] == {"runs": 2, "built": 1, "loaded": 1,
                                            "build_s": runlog.summarise(log)["toy"]["build_s"]}


def _noop(args, run_dir):
    (run_dir / "out.txt").write_text(json.dumps(args))


def test_sweep_logs_runs_and_done_ones_as_loaded(tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    args = [{"a": i} for i in range(3)]
    sweep.launch(args[:2], _noop, tmp_path / "sweep", kind="toy-run")
    sweep.launch(iter(args), _noop, tmp_path / "sweep", kind="toy-run")  # a generator is read once
    entries = runlog.read_log(log)
    assert [(e["built"]) for e in entries] == [True, True, False, False, True]
    assert runlog.summarise(log)["toy-run"]["runs"] == 3
    assert runlog.summarise(log)["toy-run"]["loaded"] == 0  # each of the three was built once, in this log


def test_concurrent_processes_do_not_interleave_lines(tmp_path):
    log = tmp_path / "runs.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append, args=(log, f"kind{p}", 200)) for p in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    lines = log.read_text().splitlines()
    assert len(lines) == 600 and all(json.loads(line)["kind"].startswith("kind") for line in lines)
    summary = runlog.summarise(log)
    assert {k: v["runs"] for k, v in summary.items()} == {"kind0": 200, "kind1": 200, "kind2": 200}
    assert all(v["built"] == 100 and v["loaded"] == 100 for v in summary.values())


def test_a_torn_last_line_is_skipped(tmp_path):
    log = tmp_path / "runs.jsonl"
    log.write_text(json.dumps({"kind": "a", "key": "1", "built": True, "seconds": 2}) + '\n{"kind": "a", "ke')
    assert runlog.summarise(log) == {"a": {"runs": 1, "built": 1, "loaded": 0, "build_s": 2.0}}
    assert runlog.summarise(tmp_path / "absent.jsonl") == {}
