"""shared.cost's pricing: full steps by default, partial batches by the rows they hold (``Work.rows``)."""
from __future__ import annotations

import math

import pytest

from shared import cost
from shared.cost import Calibration, PlannedRun, Work, batched, price
from shared.workloads import Workload

STEP_S, FLOPS = 2.0, 1e9  # seconds and FLOPs of one full step of INFER


@pytest.fixture
def infer(monkeypatch):
    """A batch-512 inference workload with a known FLOP count (not counted: a test needs no torch graph)."""
    w = Workload("cifar_resnet", "resnet20", "infer", 512, (3, 32, 32))
    monkeypatch.setitem(cost._FLOPS, w.key, FLOPS)
    return w


def priced(*work: Work, measured: bool = True):
    """One notebook of one run of ``work`` priced on a device that measured the workload at STEP_S (or, with
    ``measured`` false, estimates it from its FLOPs at 1 TFLOP/s fp32 and utilization 1)."""
    w = next(x.workload for x in work if x.workload is not None)
    calibration = Calibration("test-device", {"fp32": 1e-3, "bf16": 1e-3},
                              {w.key: {"key": w.key, "step_s": STEP_S}} if measured else {})
    return price({"p/nb.ipynb": [PlannedRun("kind", "id", "run", tuple(work))]}, calibration, utilization=1.0)["p/nb.ipynb"]


def test_a_split_smaller_than_the_batch_costs_its_share_of_a_full_step(infer):
    """140 rows in batches of 512 (one step): 140/512 of a full step in seconds and FLOPs, one step counted."""
    p = priced(batched(infer, 140))
    assert p.steps == 1 and p.examples == 140
    assert p.seconds == pytest.approx(STEP_S * 140 / 512)
    assert p.flops == pytest.approx(FLOPS * 140 / 512)


def test_work_without_rows_is_priced_as_full_steps(infer):
    p = priced(Work(infer, 3, 140))
    assert (p.steps, p.seconds, p.flops) == (3, pytest.approx(3 * STEP_S), pytest.approx(3 * FLOPS))
    assert Work(infer, 3, 140).full_steps == 3


def test_estimated_work_and_its_flop_bound_use_the_same_partial_steps(infer):
    """Without a calibration the step is estimated from its FLOPs: a partial batch is its share there too, so the
    projection and the FLOP bound agree."""
    p = priced(batched(infer, (40, 100), times=2), measured=False)
    assert p.flops == pytest.approx(FLOPS * 280 / 512)
    assert p.seconds == p.estimated_s == pytest.approx(FLOPS * 280 / 512 / 1e9)


def test_batched_walks_each_split_in_its_own_batches(infer):
    """Two checkpoints over a 40-row and a 100-row split: 2 x 2 partial batches holding 280 rows; full splits
    cost exactly their full steps."""
    w = batched(infer, (40, 100), times=2, what="eval")
    assert (w.steps, w.examples, w.rows, w.what) == (4, 280, 280, "eval")
    assert w.full_steps == pytest.approx(280 / 512)
    assert batched(infer, 1024).full_steps == 2 == batched(infer, 1024).steps
    big = batched(infer, 10_000, times=3)
    assert big.steps == 3 * math.ceil(10_000 / 512) and big.full_steps == pytest.approx(3 * 10_000 / 512)
    assert batched(infer, 0).steps == batched(infer, 0).full_steps == 0


def test_rows_the_steps_cannot_hold_are_refused(infer):
    with pytest.raises(ValueError, match="cannot fill"):
        Work(infer, 1, 600, rows=600)  # more than one batch of 512
    with pytest.raises(ValueError, match="cannot fill"):
        Work(infer, 3, 2, rows=2)  # a step holds at least one row
    with pytest.raises(ValueError, match="needs a workload"):
        Work(None, 0, 10, rows=10)
    with pytest.raises(ValueError):
        batched(infer, -1)


def test_a_fresh_checkout_reads_committed_flop_counts_instead_of_counting(tmp_path, monkeypatch):
    """commit_flops merges the cache's counts into the committed table; a process with an empty cache then prices
    from the table and never counts (counting a transformer shape on the CPU takes seconds to minutes)."""
    from shared import workloads as W

    w = Workload("cifar_resnet", "resnet20", "infer", 64, (3, 32, 32))
    counted = tmp_path / "counted.json"
    W._write_json_atomic(counted, {"version": W.FLOPS_VERSION, "flops": {w.key: 123.0}})
    table = tmp_path / "flops.json"
    assert W.commit_flops(counted, table) == 1 and W.commit_flops(counted, table) == 0  # merged once
    monkeypatch.setattr(W, "COMMITTED_FLOPS_FILE", table)
    monkeypatch.setattr(W, "_COMMITTED", None)
    monkeypatch.setenv("NOISY_CACHE_DIR", str(tmp_path / "empty-cache"))

    def refuse(*args, **kwargs):
        raise AssertionError("counted although the committed table has the workload")

    monkeypatch.setattr(W, "_count_anywhere", refuse)
    assert W.flops(w) == 123.0
    stale = tmp_path / "stale.json"
    W._write_json_atomic(stale, {"version": W.FLOPS_VERSION + 1, "flops": {w.key: 5.0}})  # another FLOPs version
    monkeypatch.setattr(W, "COMMITTED_FLOPS_FILE", stale)
    monkeypatch.setattr(W, "_COMMITTED", None)
    with pytest.raises(AssertionError, match="counted"):
        W.flops(w)
