"""What a batch of notebooks costs, before it runs: runs, steps, examples, FLOPs and hours per notebook and paper.

    python -m shared.cost [PAPER ...] --profile full|rehearsal|smoke [-f params.yaml] [-p NAME VALUE] [--only STEM]
                          [--device SLUG] [--utilization 0.35] [--json PATH] [--against MANIFEST]

**Plans come from the notebooks' own code.** Each paper declares ``plan(notebook, cfg, params)`` in
``<paper>/cost.py`` (like ``<paper>/requirements.py`` for the preflight): it returns the ``PlannedRun`` of every
run the notebook would execute under its merged settings ``cfg``, enumerated through the same grid, sweep and
run-spec functions the notebook's page calls, so the plan and the notebook cannot disagree. A run is what
``shared.runlog`` records when the notebook really executes (a cached artifact or a sweep's run folder) under the
same ``kind``; the tests compare the planned and the recorded counts on the smoke and rehearsal profiles.

**A run is priced from its steps.** ``Work`` is one kind of step repeated: a ``shared.workloads.Workload`` (model,
phase, batch, input shape, precision) and how many steps of it the run takes. Every step is a full batch unless the
work says how many rows its steps process in all (``Work.rows``: inference over a split in batches of at most the
workload's batch, whose last batch is partial); then it costs as ``rows / batch`` full steps. FLOPs per step are
counted by ``shared.workloads`` on the real architecture (``torch.utils.flop_counter``); seconds per step come from
the device's calibration file (``shared/calibration/<device>.yaml``, written by ``python -m shared.gpu_check`` on
that machine). A step measured there is *calibrated*, and so is one measured only at another input shape (a text
batch padded to its longest sequence, measured at ``max_length``): its measured time above its operators' dispatch
scales with the two shapes' FLOPs. A workload the file lacks is *estimated* from its FLOPs at the
device's stated peak times ``--utilization`` and labelled so, but never below its operators' dispatch: a step that
dispatches ``n`` operators (``shared.workloads.ops``: every ATen call of its forward and backward) takes at least
``n`` times the device's time per operator (``dispatch.s_per_op`` of the calibration, ``shared.gpu_check``'s
``measure_dispatch``; ``ASSUMED_DISPATCH_S`` where the device has not measured it). Small networks (CIFAR ResNets,
Plench's MLPs, the rehearsal's one-layer transformers) are bound by that, not by arithmetic: a ResNet-32 step at
batch 256 is ~0.1 TFLOP and ~470 operators, 0.3 ms of an H100's bf16 peak at 35 % but ~5 ms of dispatch. Work
without a torch step (scikit-learn fits,
corruption generation, COCO evaluation) has no FLOPs and is counted, not priced, unless its planner gives its
seconds on the reference machine (``cpu_s``). Each notebook is also charged its startup where the calibration
measured one (``startup``: a Jupyter kernel, and a fresh interpreter importing the paper's pages; the CPU's): seconds
on a GPU box's full run, but most of a cache-reading page's time at the rehearsal's and smoke profile's scale.

**The FLOP bound** is a paper's FLOPs at the device's bf16 dense peak: no implementation can be faster, and the
projection over the bound says how far ours is from the hardware.

**Runs shared between notebooks are paid once.** Notebooks of a paper reuse each other's cached runs (CILN's voter
pools, a paper's training runs); the paper's total counts each run identity once, charged to the first notebook
(in the runner's order) that plans it, as a cold batch would build it.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from shared.errors import ConfigError
from shared.paths import REPO_ROOT
from shared.progress import progress

CALIBRATION_DIR = REPO_ROOT / "shared" / "calibration"
DEFAULT_UTILIZATION = 0.35  # of bf16 dense peak, for workloads a device has not measured: typical of small CNNs
# Host time per dispatched operator where a device has not measured it (shared.gpu_check.measure_dispatch): PyTorch
# eager on a GPU spends microseconds per operator in Python, the dispatcher and the kernel launch. An assumption,
# labelled so wherever it prices a step; the first gpu_check on the device replaces it.
ASSUMED_DISPATCH_S = 10e-6
BOUND_UTILIZATION = 0.5     # the yardstick: a paper within 3x of its FLOPs at 50 % of peak

# Dense peak throughput (TFLOP/s) of devices a user may price for without a calibration file: vendors' data
# sheets (SXM parts; bf16/fp16 tensor-core rates without sparsity, fp32 non-tensor).
PEAK_TFLOPS = {
    "nvidia-h200": {"bf16": 989.0, "fp32": 67.0},
    "nvidia-h100": {"bf16": 989.0, "fp32": 67.0},
    "nvidia-a100": {"bf16": 312.0, "fp32": 19.5},
    "nvidia-v100": {"bf16": 125.0, "fp32": 15.7},  # fp16 tensor cores (V100 has no bf16)
    "nvidia-l4": {"bf16": 121.0, "fp32": 30.3},
    "nvidia-rtx-3090": {"bf16": 71.0, "fp32": 35.6},
}


@dataclass(frozen=True)
class Work:
    """``steps`` steps of ``workload`` (a ``shared.workloads.Workload``; None: CPU work without a torch step),
    processing ``examples`` examples with ``views`` augmented views each (views are built on the CPU unless the
    notebook builds them on the device).

    ``rows``: the rows these steps process in all where their batches are partial, as inference over a split is
    (``ceil(rows / batch)`` batches per pass, the last one short; a split smaller than the batch is one short
    batch); None: every step is a full batch of the workload's ``batch``. Such work is priced (seconds and FLOPs)
    as ``rows / batch`` full steps (``full_steps``): a step's compute scales with the rows in its batch, so 140
    rows in batches of 512 cost 140/512 of a full step, not one. That leaves out the fixed per-step overhead
    (Python, kernel launches, the host-device copy), so it slightly underprices tiny batches. It is never
    inferred from ``examples``, which planners count differently (an example per training row of a step with
    several passes, or per row of a no-grad pass priced as its own steps): a planner sets it where it knows its
    steps walk a split in batches of at most ``batch`` (``batched``)."""

    workload: object | None
    steps: int
    examples: int = 0
    views: int = 1
    cpu_s: float | None = None  # seconds on the reference CPU, for work without a workload (None: not priced)
    what: str = ""
    rows: int | None = None
    stack: int = 1  # runs trained as one model that share each of these steps: each pays 1/stack of its dispatch

    def __post_init__(self):
        if self.rows is None:
            return
        if self.workload is None:
            raise ValueError(f"work {self.what!r}: rows={self.rows} needs a workload (its batch) to be priced by")
        if not self.steps <= self.rows <= self.steps * self.workload.batch:
            raise ValueError(f"work {self.what!r}: {self.rows} rows cannot fill {self.steps} step(s) of batch "
                             f"{self.workload.batch} (each step holds 1 to {self.workload.batch} rows)")

    @property
    def full_steps(self) -> float:
        """The steps this work costs as full batches: ``steps``, or ``rows / batch`` where ``rows`` is given."""
        return self.steps if self.rows is None else self.rows / self.workload.batch


def batched(workload, splits: int | Iterable[int], *, times: int = 1, views: int = 1, what: str = "") -> Work:
    """``times`` passes of ``workload`` over each split of ``splits`` rows (one int or several) in batches of at most
    ``workload.batch`` (``ceil(rows / batch)`` per split), the last batch of each split partial: ``Work.rows``."""
    sizes = [splits] if isinstance(splits, int) else list(splits)
    if any(n < 0 for n in sizes):
        raise ValueError(f"split sizes must be >= 0, got {sizes}")
    steps = times * sum(math.ceil(n / workload.batch) for n in sizes)
    rows = times * sum(sizes)
    return Work(workload, steps, rows, views, what=what, rows=rows)


@dataclass(frozen=True)
class PlannedRun:
    """One run a notebook executes: ``kind`` and ``identity`` as ``shared.runlog`` records it (the identity of
    the same run planned by two notebooks is equal), a label for people, and its ``work``."""

    kind: str
    identity: str
    label: str
    work: tuple[Work, ...] = ()

    @property
    def steps(self) -> int:
        return sum(w.steps for w in self.work if w.workload is not None)

    @property
    def examples(self) -> int:
        return sum(w.examples for w in self.work)

    @property
    def views(self) -> int:
        return sum(w.examples * w.views for w in self.work)


Planner = Callable[[str, dict, dict], list[PlannedRun]]


def paper_planner(paper: str) -> Planner | None:
    """``<paper>.cost.plan``, or None for a paper that has not declared its plans."""
    if importlib.util.find_spec(f"{paper}.cost") is None:
        return None
    return importlib.import_module(f"{paper}.cost").plan


# -- calibration ------------------------------------------------------------------------------------------------
@dataclass
class Calibration:
    """A device's measured steps (``shared/calibration/<slug>.yaml``) or, without a file, its peak alone."""

    slug: str
    peak_tflops: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)  # workload key -> {"step_s", "samples_per_s", ...}
    source: str = ""
    startup: dict = field(default_factory=dict)  # {"kernel": s, <paper>: s}: gpu_check's startup times
    dispatch_s: float = ASSUMED_DISPATCH_S  # seconds per dispatched operator: the floor under an estimated step
    dispatch_source: str = "assumed"
    _reshaped: dict = field(default_factory=dict, repr=False, compare=False)  # workload key -> _reshaped_seconds

    @classmethod
    def load(cls, slug: str, directory: Path = CALIBRATION_DIR) -> Calibration:
        path = directory / f"{slug}.yaml"
        if not path.exists():
            if slug not in PEAK_TFLOPS:
                known = sorted({p.stem for p in directory.glob("*.yaml")} | set(PEAK_TFLOPS))
                raise ConfigError(f"no calibration for device {slug!r} ({path} is absent) and no known peak; choose "
                                  f"from {', '.join(known)}, or measure it there with python -m shared.gpu_check")
            return cls(slug, dict(PEAK_TFLOPS[slug]), {}, "data-sheet peak only")
        data = yaml.safe_load(path.read_text()) or {}
        measured = {w["key"]: w for w in data.get("workloads", []) if w.get("step_s")}
        peak = dict(data.get("peak_tflops") or PEAK_TFLOPS.get(slug, {}))
        startup = {k: float(v) for k, v in (data.get("startup") or {}).items() if isinstance(v, (int, float))
                   and k != "threads"}
        dispatch = (data.get("dispatch") or {}).get("s_per_op")
        measured_dispatch = isinstance(dispatch, (int, float)) and dispatch > 0
        return cls(slug, peak, measured, f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}",
                   startup, float(dispatch) if measured_dispatch else ASSUMED_DISPATCH_S,
                   "measured" if measured_dispatch else "assumed")

    def startup_seconds(self, paper: str) -> float:
        """What a notebook of ``paper`` costs before its first step (a kernel, the paper's imports); 0 unmeasured."""
        return self.startup.get("kernel", 0.0) + self.startup.get(paper, 0.0)

    def step_seconds(self, workload, utilization: float, stack: int = 1) -> tuple[float | None, str]:
        """(seconds per step, "calibrated" | "estimated" | "unpriced") for ``workload``; an estimate is at least the
        step's operators' dispatch, shared by the ``stack`` runs trained as one model (``Work.stack``).

        A member of a stack of G, where the device measured the step alone (T1) and as a stack of
        ``STACK_MEASURED`` (TS, all members), costs T(G) / G with T(G) = T1 + (TS - T1) (G - 1) / (S - 1): the
        stack's time grows linearly from one member's. A step measured alone only is priced at T1 times the share
        ``T(G) / (G T1)`` the device measured for another step of the same network (``_stack_share``), as an
        estimate."""
        stacked = self._stacked_seconds(workload, stack) if stack > 1 else None
        if stacked is not None:
            return stacked, "calibrated"
        hit = self.measured.get(workload.key)
        if hit is not None and stack > 1:  # measured alone only: the share the device measured for this network
            share = self._stack_share(workload, stack)
            if share is not None:
                return float(hit["step_s"]) * share, "estimated"
        if hit is not None:
            return float(hit["step_s"]), "calibrated"
        flops = workload_flops(workload)
        if workload.key not in self._reshaped:  # a plan asks for one workload thousands of times
            self._reshaped[workload.key] = self._reshaped_seconds(workload, flops)
        reshaped = self._reshaped[workload.key]
        if reshaped is not None:  # a stack's members share the dispatch, as an estimate's floor (Work.stack)
            dispatch, arithmetic = reshaped
            return dispatch / stack + arithmetic, "calibrated"
        rate = self.peak_tflops.get("fp32" if workload.precision == "fp32" else "bf16")
        if flops is None or not rate:
            return None, "unpriced"
        floor = (workload_ops(workload) or 0) * self.dispatch_s / stack
        return max(flops / (rate * 1e12 * utilization), floor), "estimated"

    def _reshaped_seconds(self, workload, flops: float | None) -> tuple[float, float] | None:
        """A step measured at another input shape or batch size only (a text batch padded to its longest sequence,
        measured at ``max_length``; a Plench run at batch 64, measured at 256): the measured time less its
        operators' dispatch (``dispatch_s`` each, the same operators at either shape), scaled by the FLOPs of the two
        shapes, plus the dispatch again. So the device's measured rate at this model prices the arithmetic, and a
        small model's fixed per-operator cost does not shrink with its input. (dispatch, arithmetic) seconds, from
        the measured shape nearest in FLOPs; None where none was measured. The dispatch is the one PyTorch reports
        for the step's operators; work the counter does not see (a batch's augmentations on the device) scales with
        the arithmetic, a small under-estimate at smaller batches."""
        from shared.workloads import FLOPS_VERSION

        if flops is None or not flops:
            return None
        best = None
        for entry in self.measured.values():
            shape, batch = entry.get("shape"), int(entry.get("batch", workload.batch))
            if (entry.get("family") != workload.family or entry.get("arch") != workload.arch or shape is None
                    or (tuple(shape), batch) == (tuple(workload.shape), workload.batch)):
                continue
            try:
                sibling = workload.replace(shape=tuple(shape), batch=batch)
            except Exception:  # noqa: BLE001  a shape this workload cannot take is no sibling
                continue
            if sibling.key != entry["key"]:
                continue
            counted = entry.get("flops_per_step") if entry.get("flops_version") == FLOPS_VERSION else None
            other = counted or workload_flops(sibling)
            if not other:
                continue
            if best is None or abs(math.log(other / flops)) < abs(math.log(best[0] / flops)):
                best = (float(other), float(entry["step_s"]))
        if best is None:
            return None
        fixed = min((workload_ops(workload) or 0) * self.dispatch_s, best[1])
        return fixed, (best[1] - fixed) * flops / best[0]


    def _stack_share(self, workload, stack: int) -> float | None:
        """A stack member's share of its step's time alone, for a stack of ``stack``, from another step of the same
        network, batch, shape and precision that the device measured both alone and stacked (Plench's weak-view
        loss step): how a step this device measured alone only (CRDPLL's two views) is priced in a stack, as an
        estimate. None where no such pair was measured."""
        from shared.workloads import STACK_MEASURED, Workload, unstacked

        best = None
        for key, entry in self.measured.items():
            if f"stack={STACK_MEASURED}" not in key:
                continue
            try:
                together = Workload.from_key(key)
            except Exception:  # noqa: BLE001  an entry this version cannot read is no reference
                continue
            same = (together.family, together.arch, together.phase, together.batch, together.shape, together.precision)
            if same != (workload.family, workload.arch, workload.phase, workload.batch, workload.shape,
                        workload.precision):
                continue
            alone = self.measured.get(unstacked(together).key)
            if alone is None:
                continue
            t1, ts = float(alone["step_s"]), float(entry["step_s"])
            share = (t1 + (ts - t1) * (stack - 1) / (STACK_MEASURED - 1)) / stack / t1
            best = share if best is None else max(best, share)  # of two references, the smaller saving (cautious)
        return best

    def _stacked_seconds(self, workload, stack: int) -> float | None:
        from shared.workloads import STACK_MEASURED, family

        if "stack" not in family(workload.family).options:
            return None
        alone = self.measured.get(workload.key)
        together = self.measured.get(workload.replace(options={"stack": STACK_MEASURED}).key)
        if alone is None or together is None:
            return None
        t1, ts = float(alone["step_s"]), float(together["step_s"])
        return (t1 + (ts - t1) * (stack - 1) / (STACK_MEASURED - 1)) / stack


def workload_flops(workload) -> float | None:
    """Forward+backward FLOPs of one step (``shared.workloads``, cached); None where it cannot be counted."""
    key = workload.key
    if key not in _FLOPS:  # once per workload: a plan repeats one thousands of times (and says once why it is unpriced)
        from shared import workloads

        try:
            _FLOPS[key] = float(workloads.flops(workload))
        except Exception as e:  # noqa: BLE001  a workload whose FLOPs cannot be counted is shown unpriced, with why
            print(f"note: {key} is not priced: its FLOPs could not be counted ({type(e).__name__}: {e})",
                  file=sys.stderr)
            _FLOPS[key] = None
    return _FLOPS[key]


_FLOPS: dict[str, float | None] = {}


def workload_ops(workload) -> int | None:
    """Operators one step dispatches (``shared.workloads.ops``, cached); None where they cannot be counted (the
    step is then estimated from its FLOPs alone)."""
    key = workload.key
    if key not in _OPS:
        from shared import workloads

        try:
            _OPS[key] = int(workloads.ops(workload))
        except Exception as e:  # noqa: BLE001  priced from its FLOPs alone, and said so once
            print(f"note: {key}'s operators could not be counted ({type(e).__name__}: {e}); its estimate has no "
                  "dispatch floor", file=sys.stderr)
            _OPS[key] = None
    return _OPS[key]


_OPS: dict[str, int | None] = {}


# -- pricing -----------------------------------------------------------------------------------------------------
@dataclass
class Priced:
    """A notebook's plan, priced: totals over the runs it is charged for (first planned in the batch)."""

    key: str
    runs: int = 0          # runs it plans (shared ones included): what its record's run log should show
    charged: int = 0       # runs charged to it (planned first here)
    steps: int = 0
    examples: int = 0
    views: int = 0
    flops: float = 0.0
    seconds: float = 0.0
    estimated_s: float = 0.0   # part of ``seconds`` estimated from FLOPs, not calibrated
    unpriced: int = 0          # work items with neither a calibration nor FLOPs nor cpu_s
    by_kind: dict = field(default_factory=dict)  # kind -> planned runs
    seconds_by_kind: dict = field(default_factory=dict)  # kind -> seconds of the runs charged here

    @property
    def hours(self) -> float:
        return self.seconds / 3600


def price(plans: dict[str, list[PlannedRun]], calibration: Calibration, *,
          utilization: float = DEFAULT_UTILIZATION) -> dict[str, Priced]:
    """Price ``{notebook key: planned runs}`` (in batch order) on ``calibration``; shared runs are charged once."""
    seen: set[tuple[str, str]] = set()
    out = {}
    for key, runs in progress(plans.items(), desc="pricing (FLOPs counted once per workload)", total=len(plans)):
        p = Priced(key)
        # every notebook starts its own kernel and imports its page: charged to each, measured or 0
        p.seconds = calibration.startup_seconds(key.split("/")[0])
        if p.seconds:
            p.seconds_by_kind["startup"] = p.seconds
        distinct = {}
        for run in runs:
            distinct.setdefault((run.kind, run.identity), run)
        p.runs = len(distinct)
        for (kind, _), run in distinct.items():
            p.by_kind[kind] = p.by_kind.get(kind, 0) + 1
        for ident, run in distinct.items():
            if ident in seen:
                continue
            seen.add(ident)
            p.charged += 1
            before = p.seconds
            for w in run.work:
                p.examples += w.examples
                p.views += w.examples * w.views
                if w.workload is None:
                    if w.cpu_s is None:
                        p.unpriced += 1
                    else:
                        p.seconds += w.cpu_s
                    continue
                p.steps += w.steps
                full = w.full_steps  # a partial batch costs its share of a full one (Work.rows)
                flops = workload_flops(w.workload)
                if flops is not None:
                    p.flops += flops * full
                step_s, how = calibration.step_seconds(w.workload, utilization, w.stack)
                if step_s is None:
                    p.unpriced += 1
                    continue
                p.seconds += step_s * full
                if how == "estimated":
                    p.estimated_s += step_s * full
            p.seconds_by_kind[run.kind] = p.seconds_by_kind.get(run.kind, 0.0) + p.seconds - before
        out[key] = p
    return out


def is_gpu(slug: str) -> bool:
    """Whether a calibration slug names a GPU (the data-sheet ones and measured ``nvidia-*`` / ``amd-*`` files)."""
    return not slug.startswith("cpu")


def on_device(argv: list[str], slug: str) -> list[str]:
    """The runner's arguments ``argv`` as the notebooks would run on the priced device ``slug``: on a GPU, with
    ``-p device cuda`` unless ``argv`` sets a device. Planning happens on this machine, where "auto" may be the CPU,
    but the papers' code picks its precision by device (mixed precision on CUDA), and so must the plan."""
    sets_device = any(a == "-p" and b == "device" for a, b in zip(argv, argv[1:]))
    return [*argv, "-p", "device", "cuda"] if is_gpu(slug) and not sets_device else list(argv)


def flop_bound_hours(flops: float, peak_tflops: float, utilization: float = 1.0) -> float:
    """Hours to do ``flops`` at ``utilization`` of ``peak_tflops``."""
    return flops / (peak_tflops * 1e12 * utilization) / 3600 if peak_tflops else math.nan


# -- plans of a batch ----------------------------------------------------------------------------------------------
def plan_batch(jobs: Iterable[dict], profile: str) -> dict[str, list[PlannedRun]]:
    """``{notebook key: planned runs}`` for the runner's planned jobs (``shared.run.plan_jobs``), in batch order.
    A notebook of a paper without ``<paper>/cost.py`` plans nothing (and is listed as such)."""
    from shared.profiles import notebook_settings

    plans = {}
    jobs = list(jobs)
    for job in progress(jobs, desc="planning notebooks"):
        planner = paper_planner(job["paper"])
        params = dict(job["parameters"])
        settings = params.get("settings") or {}
        if not isinstance(settings, dict):
            raise ConfigError(f"{job['key']}: the settings parameter must be a mapping, got {settings!r}")
        named = params.get("data_dir")
        if named is not None and not Path(named).is_dir():
            # a planner reads the sizes of what is there and plans the published datasets' sizes for what is not,
            # so a mistyped or vanished folder would be priced as the full data, silently
            raise ConfigError(f"{job['key']}: data_dir {named} is not a folder; give the folder the notebooks would "
                              "read, or leave data_dir out to price the published datasets' sizes")
        cfg = notebook_settings(job["paper"], job["notebook"], profile, settings)
        plans[job["key"]] = [] if planner is None else list(planner(Path(job["notebook"]).stem, cfg, params))
    return plans


def batch_jobs(argv: list[str] | None, profile: str) -> list[dict]:
    """The runner's jobs for the same papers, files and parameters as ``python -m shared.run`` would take."""
    from shared.run import parse_args, plan_jobs

    args = parse_args([*(argv or []), "--profile", profile])
    return plan_jobs(args, profile, REPO_ROOT / "runs" / profile)


# -- command line -------------------------------------------------------------------------------------------------
def _fmt_count(x: float) -> str:
    for unit, size in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.1f}{unit}"
    return f"{x:.0f}"


def _fmt_hours(h: float) -> str:
    if math.isnan(h):
        return "—"
    return f"{h * 60:.1f} min" if h < 1 else f"{h:,.1f} h"


def report_rows(priced: dict[str, Priced], calibration: Calibration, utilization: float) -> list[dict]:
    """One row per notebook, then one per paper (``notebook`` = "all"), as plain values."""
    rows = []
    bf16 = calibration.peak_tflops.get("bf16", math.nan)
    papers: dict[str, list[Priced]] = {}
    for key, p in priced.items():
        papers.setdefault(key.split("/")[0], []).append(p)
        rows.append({"paper": key.split("/")[0], "notebook": key.split("/")[1].removesuffix(".ipynb"),
                     "runs": p.runs, "charged": p.charged, "steps": p.steps, "examples": p.examples,
                     "views": p.views, "flops": p.flops, "hours": p.hours, "estimated_hours": p.estimated_s / 3600,
                     "unpriced": p.unpriced, "flop_bound_hours": flop_bound_hours(p.flops, bf16)})
    for paper, ps in papers.items():
        flops = sum(p.flops for p in ps)
        rows.append({"paper": paper, "notebook": "all", "runs": sum(p.charged for p in ps),
                     "charged": sum(p.charged for p in ps), "steps": sum(p.steps for p in ps),
                     "examples": sum(p.examples for p in ps), "views": sum(p.views for p in ps), "flops": flops,
                     "hours": sum(p.hours for p in ps), "estimated_hours": sum(p.estimated_s for p in ps) / 3600,
                     "unpriced": sum(p.unpriced for p in ps), "flop_bound_hours": flop_bound_hours(flops, bf16),
                     "bound_at_half_peak_hours": flop_bound_hours(flops, bf16, BOUND_UTILIZATION)})
    return rows


def print_report(rows: list[dict], calibration: Calibration, utilization: float, out=sys.stdout) -> None:
    print(f"device {calibration.slug} ({calibration.source}); workloads it has not measured are estimated at "
          f"{utilization:.0%} of its peak ({calibration.peak_tflops}), and at least {calibration.dispatch_s * 1e6:.3g} "
          f"us per operator they dispatch ({calibration.dispatch_source})", file=out)
    header = f"{'notebook':<34}{'runs':>7}{'steps':>9}{'examples':>10}{'views':>9}{'FLOPs':>10}{'hours':>12}" \
             f"{'of which est.':>14}{'unpriced':>9}{'FLOP bound':>12}"
    print(header, file=out)
    for r in rows:
        name = f"{r['paper']}/{r['notebook']}" if r["notebook"] != "all" else f"{r['paper']} (all, shared once)"
        print(f"{name:<34}{r['runs']:>7}{_fmt_count(r['steps']):>9}{_fmt_count(r['examples']):>10}"
              f"{_fmt_count(r['views']):>9}{_fmt_count(r['flops']):>10}{_fmt_hours(r['hours']):>12}"
              f"{_fmt_hours(r['estimated_hours']):>14}{r['unpriced']:>9}{_fmt_hours(r['flop_bound_hours']):>12}",
              file=out)


# -- the model against what ran -------------------------------------------------------------------------------------
def against_records(priced: dict[str, Priced], manifest: str | Path) -> list[dict]:
    """The plan beside a batch's records (the runner's ``manifest.json``): per notebook its planned and recorded
    runs (``record["runs"]``, ``shared.runlog``), the predicted seconds of the runs charged to it beside the seconds
    its runs took to build (``ratio_built``), and the whole prediction (the runs and the notebook's startup) beside its
    wall time (``ratio_wall``); then per paper, where shared runs built by whichever notebook got there first even
    out. What neither covers is the page's own work (reading cached runs, tables, figures)."""
    try:
        records = json.loads(Path(manifest).read_text())["notebooks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"cannot read the runner's records from {manifest} ({e}); give the manifest.json of a "
                          "batch run with python -m shared.run ... --out DIR") from None
    names = ("planned_runs", "recorded_runs", "predicted_s", "startup_s", "built_s", "wall_s")
    rows, papers = [], {}
    for key, p in priced.items():
        record = records.get(key)
        if record is None:
            continue
        logged = record.get("runs") or {}
        row = {"paper": key.split("/")[0], "notebook": key.split("/")[1].removesuffix(".ipynb"),
               "status": record.get("status"), "planned_runs": p.runs,
               "recorded_runs": sum(v["runs"] for v in logged.values()), "predicted_s": p.seconds,
               "startup_s": p.seconds_by_kind.get("startup", 0.0),
               "built_s": sum(v.get("build_s", 0.0) for v in logged.values()), "wall_s": record.get("wall_s") or 0.0}
        rows.append(row)
        totals = papers.setdefault(row["paper"], {"paper": row["paper"], "notebook": "all", "status": "",
                                                  **{name: 0 for name in names}})
        for name in names:
            totals[name] += row[name]
    for row in [*rows, *papers.values()]:
        runs_s = row["predicted_s"] - row["startup_s"]
        row["ratio_built"] = runs_s / row["built_s"] if row["built_s"] > 0 else math.nan
        row["ratio_wall"] = row["predicted_s"] / row["wall_s"] if row["wall_s"] > 0 else math.nan
    return rows + list(papers.values())


def print_against(rows: list[dict], out=sys.stdout) -> None:
    """The table of ``against_records``: runs, then the runs' time, then the notebook's."""
    print(f"{'notebook':<34}{'runs plan/rec':>14}{'runs pred':>10}{'built':>9}{'pred/built':>11}"
          f"{'+startup':>10}{'wall':>9}{'pred/wall':>10}", file=out)
    for r in rows:
        name = f"{r['paper']}/{r['notebook']}" if r["notebook"] != "all" else f"{r['paper']} (all)"
        ratios = ["—" if math.isnan(r[k]) else f"{r[k]:.2f}" for k in ("ratio_built", "ratio_wall")]
        print(f"{name:<34}{r['planned_runs']:>7}/{r['recorded_runs']:<6}{r['predicted_s'] - r['startup_s']:>9.1f}s"
              f"{r['built_s']:>8.1f}s{ratios[0]:>11}{r['predicted_s']:>9.1f}s{r['wall_s']:>8.1f}s{ratios[1]:>10}",
              file=out)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m shared.cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("papers", nargs="*", metavar="PAPER")
    parser.add_argument("--profile", default="full", help="smoke, full or rehearsal (the full profile with each "
                        "paper's params/rehearsal.yaml)")
    parser.add_argument("-f", "--file", action="append", default=[], help="YAML parameter file (repeatable)")
    parser.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    parser.add_argument("--only", action="append", default=[], help="notebook stem pattern (repeatable)")
    parser.add_argument("--device", default=None, help="calibration to price on (default for the full profile: a "
                        "measured GPU calibration, nvidia-h100's first, else nvidia-h100's data sheet; the committed "
                        "CPU calibration otherwise; cpu names that one)")
    parser.add_argument("--utilization", type=float, default=DEFAULT_UTILIZATION,
                        help="share of peak assumed for workloads the device has not measured")
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--against", metavar="MANIFEST", help="compare the plan with a batch's records (the "
                        "runner's manifest.json for the same papers, files and parameters)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        profile = "full" if args.profile == "rehearsal" else args.profile
        passthrough = [*args.papers]
        for f in args.file:
            passthrough += ["-f", f]
        for name, value in args.param:
            passthrough += ["-p", name, value]
        for pattern in args.only:
            passthrough += ["--only", pattern]
        device = args.device or (default_gpu_device() if args.profile == "full" else default_cpu_device())
        if device == "cpu":  # the committed CPU calibration, whatever its slug says of the machine
            device = default_cpu_device()
        passthrough = on_device(passthrough, device)
        if args.profile == "rehearsal":
            jobs = []
            for paper in args.papers or _papers():
                jobs += batch_jobs([*passthrough_for(paper, passthrough), "-f", f"{paper}/params/rehearsal.yaml"],
                                   profile)
        else:
            jobs = batch_jobs(passthrough, profile)
        plans = plan_batch(jobs, profile)
        calibration = Calibration.load(device)
        priced = price(plans, calibration, utilization=args.utilization)
        rows = report_rows(priced, calibration, args.utilization)
        checked = against_records(priced, args.against) if args.against else None
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_report(rows, calibration, args.utilization)
    if checked is not None:
        print(f"\nagainst {args.against} (times on {calibration.slug}):")
        print_against(checked)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _papers() -> list[str]:
    from shared.run import PAPERS

    return list(PAPERS)


def passthrough_for(paper: str, passthrough: list[str]) -> list[str]:
    """The command-line arguments for one paper: ``passthrough`` without the other papers' names."""
    papers = set(_papers())
    return [paper, *(a for a in passthrough if a not in papers)]


#: the GPU a reader would rent, priced from its data sheet where no calibration was measured on it
DEFAULT_GPU = "nvidia-h100"


def default_gpu_device(directory: Path = CALIBRATION_DIR) -> str:
    """The GPU the full profile is priced on: ``DEFAULT_GPU`` if it has a measured calibration, else the first GPU
    that has one (an H200's measurements beat an H100's data sheet: same tensor cores, and what the project really
    does on them), else ``DEFAULT_GPU`` from its data sheet (labelled an estimate)."""
    measured = sorted(p.stem for p in directory.glob("*.yaml") if is_gpu(p.stem))
    return DEFAULT_GPU if DEFAULT_GPU in measured or not measured else measured[0]


def default_cpu_device() -> str:
    """The committed CPU calibration (the first ``cpu-*.yaml``), for pricing the smoke and rehearsal profiles."""
    found = sorted(CALIBRATION_DIR.glob("cpu-*.yaml"))
    if not found:
        raise ConfigError(f"no CPU calibration in {CALIBRATION_DIR}; write one with python -m shared.gpu_check "
                          "--device cpu")
    return found[0].stem


if __name__ == "__main__":
    sys.exit(main())
