"""shared.cost's pricing: full steps by default, partial batches by the rows they hold (``Work.rows``)."""
from __future__ import annotations

import math

import pytest

from shared import cost
from shared.cost import Calibration, PlannedRun, Work, batched, price
from shared.workloads import Workload

STEP_S, FLOPS, OPS = 2.0, 1e9, 100  # seconds, FLOPs and operators of one full step of INFER


@pytest.fixture
def infer(monkeypatch):
    """A batch-512 inference workload with a known FLOP count (not counted: a test needs no torch graph)."""
    w = Workload("cifar_resnet", "resnet20", "infer", 512, (3, 32, 32))
    monkeypatch.setitem(cost._FLOPS, w.key, FLOPS)
    monkeypatch.setitem(cost._OPS, w.key, OPS)
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


def test_an_estimate_is_never_below_the_steps_operators_dispatch(infer):
    """Estimated from FLOPs (1 s a step here), unless dispatching the step's operators takes longer: 100 operators
    at 50 ms each is 5 s a step. A measured step is its measurement, whatever the floor."""
    slow = Calibration("test-device", {"fp32": 1e-3}, {}, dispatch_s=0.05)
    assert slow.step_seconds(infer, 1.0) == (pytest.approx(OPS * 0.05), "estimated")
    fast = Calibration("test-device", {"fp32": 1e-3}, {}, dispatch_s=1e-6)
    assert fast.step_seconds(infer, 1.0) == (pytest.approx(FLOPS / 1e9), "estimated")
    measured = Calibration("test-device", {"fp32": 1e-3}, {infer.key: {"step_s": STEP_S}}, dispatch_s=0.05)
    assert measured.step_seconds(infer, 1.0) == (STEP_S, "calibrated")


def test_a_stack_member_is_priced_between_its_measured_steps_alone_and_stacked():
    """Measured alone (6 ms) and as a stack of 16 (30 ms for all): a stack of G costs 6 + 24 (G - 1) / 15 ms, shared
    by its G members; without both measurements a member is priced as before."""
    from shared.workloads import STACK_MEASURED, Workload

    w = Workload("cifar_resnet", "resnet32", "train", 256, (3, 32, 32), "bf16",
                 {"optimizer": "adam", "augment": "weak", "nograd": 1, "channels_last": True})
    both = {w.key: {"step_s": 0.006}, w.replace(options={"stack": STACK_MEASURED}).key: {"step_s": 0.030}}
    cal = Calibration("test-device", {"bf16": 1.0}, both)
    assert cal.step_seconds(w, 0.35, 1) == (0.006, "calibrated")
    assert cal.step_seconds(w, 0.35, 16) == (pytest.approx(0.030 / 16), "calibrated")
    assert cal.step_seconds(w, 0.35, 4) == (pytest.approx((0.006 + 0.024 * 3 / 15) / 4), "calibrated")
    alone_only = Calibration("test-device", {"bf16": 1.0}, {w.key: {"step_s": 0.006}})
    assert alone_only.step_seconds(w, 0.35, 4) == (0.006, "calibrated")
    # another step of the same network measured alone only (CRDPLL: two views) borrows the measured share, as an
    # estimate: a member of 16 costs the share 0.030 / 16 / 0.006 of its step alone
    two = w.replace(options={"augment": "weak_strong", "views": 2, "nograd": 2})
    cal.measured[two.key] = {"step_s": 0.020}
    assert cal.step_seconds(two, 0.35, 16) == (pytest.approx(0.020 * 0.030 / 16 / 0.006), "estimated")
    assert cal.step_seconds(two, 0.35, 1) == (0.020, "calibrated")
    other_batch = w.replace(batch=64, options={"augment": "weak_strong", "views": 2, "nograd": 2})
    cal.measured[other_batch.key] = {"step_s": 0.010}
    assert cal.step_seconds(other_batch, 0.35, 16) == (0.010, "calibrated")  # no pair at batch 64: as before


def test_a_device_without_a_dispatch_measurement_uses_the_stated_assumption(tmp_path):
    (tmp_path / "mine.yaml").write_text("device: {type: cuda}\nworkloads: []\n")
    (tmp_path / "measured.yaml").write_text("device: {type: cuda}\nworkloads: []\ndispatch: {s_per_op: 4.0e-6}\n")
    assumed = Calibration.load("mine", tmp_path)
    assert (assumed.dispatch_s, assumed.dispatch_source) == (cost.ASSUMED_DISPATCH_S, "assumed")
    assert (Calibration.load("measured", tmp_path).dispatch_s, Calibration.load("measured", tmp_path).dispatch_source) \
        == (4.0e-6, "measured")
    assert Calibration.load("nvidia-h100", tmp_path).dispatch_source == "assumed"  # data-sheet peak only


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


def test_every_notebook_is_charged_its_kernel_and_its_papers_imports(infer):
    """Startup (gpu_check's kernel and per-paper import times) is charged to each notebook, shared runs once."""
    calibration = Calibration("test-device", {"fp32": 1e-3}, {infer.key: {"key": infer.key, "step_s": STEP_S}},
                              startup={"kernel": 1.5, "p": 4.0, "q": 0.5})
    run = PlannedRun("kind", "id", "run", (Work(infer, steps=1),))
    out = price({"p/a.ipynb": [run], "p/b.ipynb": [run], "q/c.ipynb": [], "r/d.ipynb": []}, calibration,
                utilization=1.0)
    assert out["p/a.ipynb"].seconds == pytest.approx(5.5 + STEP_S)  # the shared run is charged to its first planner
    assert out["p/b.ipynb"].seconds == pytest.approx(5.5) and out["q/c.ipynb"].seconds == pytest.approx(2.0)
    assert out["r/d.ipynb"].seconds == pytest.approx(1.5)  # a paper not measured: the kernel alone
    assert out["p/a.ipynb"].seconds_by_kind == {"startup": 5.5, "kind": STEP_S}


def test_against_records_compares_runs_with_their_build_time_and_the_whole_with_the_wall(infer, tmp_path):
    from shared.cost import against_records, print_against

    calibration = Calibration("test-device", {"fp32": 1e-3}, {infer.key: {"key": infer.key, "step_s": STEP_S}},
                              startup={"kernel": 1.0, "p": 3.0})
    run = PlannedRun("kind", "id", "run", (Work(infer, steps=3),))
    out = price({"p/a.ipynb": [run], "p/b.ipynb": []}, calibration, utilization=1.0)
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"notebooks": {"p/a.ipynb": {"status": "ok", "wall_s": 20.0, "runs": {"kind": '
                        '{"runs": 1, "build_s": 4.0}}}, "p/b.ipynb": {"status": "ok", "wall_s": 8.0}}}')
    a, b, paper = against_records(out, manifest)
    assert (a["planned_runs"], a["recorded_runs"]) == (1, 1)
    assert a["ratio_built"] == pytest.approx(3 * STEP_S / 4.0) and a["ratio_wall"] == pytest.approx((4 + 6) / 20)
    assert math.isnan(b["ratio_built"]) and b["ratio_wall"] == pytest.approx(4 / 8)
    assert paper["notebook"] == "all" and paper["ratio_wall"] == pytest.approx(14 / 28)
    import io

    text = io.StringIO()
    print_against([a, b, paper], out=text)
    assert "pred/wall" in text.getvalue() and "p (all)" in text.getvalue() and "nan" not in text.getvalue()


def test_a_data_dir_that_is_not_there_is_an_error_not_a_plan_of_the_full_datasets(tmp_path, capsys):
    """Planners price what a folder holds and the published sizes of what it lacks: a mistyped ``-p data_dir`` would
    quietly price CILN's CI rehearsal at ~100x its real cost (as a vanished pytest folder once did)."""
    missing = tmp_path / "no-such-folder"
    assert cost.main(["lnlfn", "--only", "01_noise_realism", "--profile", "smoke", "-p", "data_dir", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"data_dir {missing} is not a folder" in err and "leave data_dir out" in err


def test_a_step_measured_at_another_input_width_is_scaled_by_flops_above_its_dispatch(monkeypatch):
    """A text batch padded to 32 tokens, measured only at 128: the measured 2 s less its operators' dispatch
    (100 ops x 5 ms = 0.5 s) scales by the FLOPs of the two widths (1/4), the dispatch stays: 0.5 + 1.5/4 s.
    Another model, or a calibration without the sibling, is not scaled (estimated from its FLOPs)."""
    long = Workload("text_encoder", "bert-base-uncased", "train", 64, (128,), "fp32", {"num_labels": 2})
    short, other = long.replace(shape=(32,)), long.replace(arch="roberta-base", shape=(32,))
    for w, flops in ((long, 4e12), (short, 1e12), (other, 1e12)):
        monkeypatch.setitem(cost._FLOPS, w.key, flops)
        monkeypatch.setitem(cost._OPS, w.key, 100)
    entry = {"key": long.key, "family": long.family, "arch": long.arch, "shape": [128], "batch": 64, "step_s": 2.0}
    cal = Calibration("test-device", {"fp32": 1.0}, {long.key: entry}, dispatch_s=0.005)
    assert cal.step_seconds(short, 0.5) == (pytest.approx(0.5 + 1.5 / 4), "calibrated")
    assert cal.step_seconds(long, 0.5) == (2.0, "calibrated")
    assert cal.step_seconds(other, 0.5) == (pytest.approx(1e12 / 0.5e12), "estimated")
    # a member of a stack of 2 shares the dispatch, not the arithmetic (as an estimate's floor)
    assert cal.step_seconds(short, 0.5, stack=2) == (pytest.approx(0.5 / 2 + 1.5 / 4), "calibrated")
    # a smaller batch, measured only at 64 (Plench's runs at 32 priced from its 256 ones): the same rule
    small = long.replace(batch=16)
    monkeypatch.setitem(cost._FLOPS, small.key, 1e12)
    monkeypatch.setitem(cost._OPS, small.key, 100)
    assert cal.step_seconds(small, 0.5) == (pytest.approx(0.5 + 1.5 / 4), "calibrated")
    alone = Calibration("test-device", {"fp32": 1.0}, {long.key: entry}, dispatch_s=0.0)
    assert alone.step_seconds(short, 0.5)[0] == pytest.approx(2.0 / 4)
    # a count of another FLOPs version in the file is not compared with this version's: counted again
    stale = {**entry, "flops_per_step": 1.0, "flops_version": -1}
    assert Calibration("test-device", {"fp32": 1.0}, {long.key: stale}, dispatch_s=0.0).step_seconds(short, 0.5)[0] \
        == pytest.approx(2.0 / 4)


def test_the_full_profile_is_priced_on_a_measured_gpu_when_there_is_one(tmp_path):
    from shared.cost import DEFAULT_GPU, default_gpu_device

    assert default_gpu_device(tmp_path) == DEFAULT_GPU  # nothing measured: the H100's data sheet
    (tmp_path / "cpu-1core.yaml").write_text("schema: 1\n")
    assert default_gpu_device(tmp_path) == DEFAULT_GPU  # a CPU calibration does not price a GPU
    (tmp_path / "nvidia-h200.yaml").write_text("schema: 1\n")
    assert default_gpu_device(tmp_path) == "nvidia-h200"  # measurements beat a data sheet
    (tmp_path / f"{DEFAULT_GPU}.yaml").write_text("schema: 1\n")
    assert default_gpu_device(tmp_path) == DEFAULT_GPU  # the reader's default GPU, measured, first
