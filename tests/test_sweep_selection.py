"""shared.sweep (run folders, JSONL records, resumable launches) and shared.selection (selection rules, aggregation)."""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pandas as pd
import pytest

from shared import selection, sweep
from shared.errors import ConfigError, DataFormatError


# -------------------------------------------------------------------------------------------- records
def test_run_dir_is_md5_of_sorted_args(tmp_path):
    args = {"dataset": "Lost", "algorithm": "PRODEN", "hparams_seed": 3}
    expected = hashlib.md5(json.dumps(args, sort_keys=True).encode()).hexdigest()
    assert sweep.run_dir_for(args, tmp_path) == tmp_path / expected
    assert sweep.run_dir_for(dict(reversed(list(args.items()))), tmp_path).name == expected
    assert sweep.run_dir_for({**args, "hparams_seed": 4}, tmp_path).name != expected


def test_records_round_trip_with_nan_and_numpy(tmp_path):
    with sweep.RecordWriter(tmp_path) as writer:
        writer.write({"step": np.int64(0), "loss": float("nan"), "acc": np.float32(0.5)})
        writer.write({"step": 1, "loss": 1.25, "hparams": {"lr": 1e-3}})
    records = sweep.read_records(tmp_path)
    assert records[0]["step"] == 0 and math.isnan(records[0]["loss"]) and records[0]["acc"] == 0.5
    assert records[1] == {"step": 1, "loss": 1.25, "hparams": {"lr": 1e-3}}


def test_truncated_last_line_is_skipped_but_a_corrupt_middle_line_is_an_error(tmp_path):
    path = tmp_path / sweep.RESULTS_FILE
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "lo')
    assert [r["step"] for r in sweep.read_records(tmp_path)] == [0, 1]
    path.write_text('{"step": 0}\n{"ste\n{"step": 2}\n')
    with pytest.raises(DataFormatError, match="line 2"):
        sweep.read_records(tmp_path)


def test_done_marker_and_load_records_skip_unfinished_runs(tmp_path):
    for name, finished in (("a", True), ("b", False)):
        with sweep.RecordWriter(tmp_path / name) as writer:
            writer.write({"step": 0})
        if finished:
            sweep.mark_done(tmp_path / name)
    assert sweep.is_done(tmp_path / "a") and not sweep.is_done(tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["done", "results.jsonl"]  # no temp file left
    assert [r["run"] for r in sweep.load_records(tmp_path)] == ["a"]
    assert [r["run"] for r in sweep.load_records(tmp_path, done_only=False)] == ["a", "b"]


# -------------------------------------------------------------------------------------------- launching
def write_square(args: dict, run_dir) -> None:
    """A launcher: one record with the square of args["x"] and the torch thread count it ran with."""
    import torch

    with sweep.RecordWriter(run_dir) as writer:
        writer.write({"x": args["x"], "square": args["x"] ** 2, "threads": torch.get_num_threads()})


class Interrupted(RuntimeError):
    pass


def test_an_interrupted_sweep_resumes_with_the_remaining_runs(tmp_path):
    args_list = [{"x": i} for i in range(5)]
    calls = []

    def crash_on_third(args, run_dir):
        calls.append(args["x"])
        with sweep.RecordWriter(run_dir) as writer:
            writer.write({"x": args["x"], "partial": True})
            if len(calls) == 3:
                raise Interrupted("killed mid-run")

    with pytest.raises(Interrupted):
        sweep.launch(args_list, crash_on_third, tmp_path)
    assert [sweep.is_done(sweep.run_dir_for(a, tmp_path)) for a in args_list] == [True, True, False, False, False]

    calls.clear()

    def finish(args, run_dir):
        calls.append(args["x"])
        write_square(args, run_dir)

    summary = sweep.launch(args_list, finish, tmp_path)
    assert calls == [2, 3, 4]  # only the runs not done, the interrupted one from scratch
    assert summary == {"total": 5, "skipped": 2, "restarted": 1, "ran": 3}
    rerun = sweep.read_records(sweep.run_dir_for(args_list[2], tmp_path))
    assert rerun == [{"x": 2, "square": 4, "threads": rerun[0]["threads"]}]  # the partial record is gone
    assert sweep.launch(args_list, finish, tmp_path)["ran"] == 0


def test_parallel_launch_matches_sequential_with_one_thread_per_worker(tmp_path):
    args_list = [{"x": i} for i in range(4)]
    summary = sweep.launch(args_list, write_square, tmp_path / "par", jobs=2)
    assert summary["ran"] == 4
    records = {r["x"]: r for r in sweep.load_records(tmp_path / "par")}
    assert {x: r["square"] for x, r in records.items()} == {0: 0, 1: 1, 2: 4, 3: 9}
    assert {r["threads"] for r in records.values()} == {1}


def test_map_jobs_rejects_zero_jobs():
    with pytest.raises(ConfigError, match="jobs"):
        sweep.map_jobs(abs, [1], jobs=0)


# -------------------------------------------------------------------------------------------- selection
def checkpoint_table() -> pd.DataFrame:
    """Two runs of three checkpoints; A peaks early, B ends highest."""
    rows = [("A", 1, 0.5, 0.10), ("A", 2, 0.9, 0.20), ("A", 3, 0.7, 0.30),
            ("B", 1, 0.6, 0.40), ("B", 2, 0.8, 0.50), ("B", 3, 0.85, 0.60)]
    return pd.DataFrame(rows, columns=["run", "step", "val", "test"])


def test_early_stopping_takes_the_best_checkpoint_and_last_the_final_one():
    records = checkpoint_table().sample(frac=1.0, random_state=0)  # file order must not matter
    es = selection.select_checkpoint(records, "val", "early_stopping")
    assert (es["run"], es["step"], es["test"]) == ("A", 2, 0.20)
    last = selection.select_checkpoint(records, "val", "last")
    assert (last["run"], last["step"], last["test"]) == ("B", 3, 0.60)


def test_pick_with_python_max_is_pythons_max_including_nan():
    rng = np.random.default_rng(0)
    for _ in range(300):
        values = rng.choice([0.1, 0.5, 0.9, np.nan], size=rng.integers(1, 7))
        expected = max(range(len(values)), key=lambda i: values[i])
        assert selection.pick(values, python_max=True) == expected


def test_nan_first_wins_a_run_under_plench_but_never_across_runs():
    records = pd.DataFrame([("C", 1, np.nan, 0.10), ("C", 2, 0.95, 0.90), ("D", 1, 0.7, 0.70), ("D", 2, np.nan, 0.05)],
                           columns=["run", "step", "val", "test"])
    plench = selection.best_per_run(records, "val", nan_policy="plench")
    assert plench["step"].tolist() == [1, 1]  # C keeps its leading NaN; D's later NaN never wins
    neg_inf = selection.best_per_run(records, "val", nan_policy="neg_inf")
    assert neg_inf["step"].tolist() == [2, 1]
    # Across runs NaN counts as -inf (DomainBed's Q.sorted): C's NaN pick loses to D.
    assert selection.select_checkpoint(records, "val", nan_policy="plench")["test"] == 0.70
    assert selection.select_checkpoint(records, "val", nan_policy="neg_inf")["test"] == 0.90
    # Every run NaN-first: the plench ties rule (sorted()[::-1]) takes the last run.
    only_nan = records.assign(val=[np.nan, 0.9, np.nan, 0.8])
    chosen = selection.select_checkpoint(only_nan, "val", nan_policy="plench", tie="plench")
    assert (chosen["run"], chosen["step"]) == ("D", 1)


def test_ties_first_last_and_plench():
    records = pd.DataFrame([("A", 1, 0.8, 0.1), ("A", 2, 0.8, 0.2), ("B", 1, 0.8, 0.3), ("B", 2, 0.5, 0.4)],
                           columns=["run", "step", "val", "test"])
    assert selection.select_checkpoint(records, "val", tie="first")["test"] == 0.1
    assert selection.select_checkpoint(records, "val", tie="last")["test"] == 0.3  # last maximal run, its last max
    # DomainBed: max() within a run (first), sorted(...)[::-1][0] across runs (last).
    per_run = [max(g.itertuples(), key=lambda r: r.val) for _, g in records.groupby("run", sort=False)]
    expected = sorted(per_run, key=lambda r: r.val)[::-1][0]
    assert selection.select_checkpoint(records, "val", tie="plench")["test"] == expected.test == 0.3


def test_selection_errors_name_the_problem():
    with pytest.raises(ConfigError, match="rule"):
        selection.select_checkpoint(checkpoint_table(), "val", "best")
    with pytest.raises(ConfigError, match="lack column"):
        selection.select_checkpoint(checkpoint_table(), "val_covering_rate")


def test_aggregate_standard_error_and_std():
    values = [0.80, 0.85, 0.90]
    std = math.sqrt(((0.05 ** 2) * 2) / 3)  # population std, ddof = 0
    mean, se = selection.aggregate(values, "se")
    assert mean == pytest.approx(0.85) and se == pytest.approx(std / math.sqrt(3))
    assert selection.aggregate(values, "std") == pytest.approx((0.85, std))
    # The published "±": 100 * np.std(list(data) / np.sqrt(n)) as PLENCH's format_mean computes it.
    assert 100 * se == pytest.approx(100 * np.std(np.array(values) / np.sqrt(3)))
    with pytest.raises(ConfigError, match="aggregation"):
        selection.aggregate(values, "sem")


@pytest.mark.parametrize("content", [b"", b"[]", b'{"jobs": [{"job_id": 1}]}', b"\xff"])
def test_a_damaged_ledger_of_submitted_jobs_is_reported_and_set_aside(tmp_path, capsys, content):
    from shared.sweep import SUBMITTED_FILE, _read_ledger

    (tmp_path / SUBMITTED_FILE).write_bytes(content)
    assert _read_ledger(tmp_path) == []
    assert str(tmp_path / SUBMITTED_FILE) in capsys.readouterr().err
    assert (tmp_path / f"{SUBMITTED_FILE}.damaged").read_bytes() == content
