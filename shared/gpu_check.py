"""Time the full profile's step kinds on this machine and write its calibration file.

    python -m shared.gpu_check [--budget SECONDS] [--device auto|cpu|cuda] [--out PATH] [--only FAMILY ...]
    python3 -m shared.gpu_check --budget 420        # on a bare GPU box, from the repository root (no .venv there)

For every ``shared.workloads.FULL_PROFILE_WORKLOADS`` step kind (CIFAR ResNets at CILN's and Plench's batch sizes
and views, alone and as Plench's stacks of ``STACK_MEASURED`` configurations, tabular MLPs, each LNLFN and
NoisywikiHow language model at 128 tokens, ViT inference at 224 px, Mask R-CNN at COCO size) it measures throughput
(samples/s: the median step time over timed steps after warm-up, CUDA synchronised), step time and peak memory
(``torch.cuda.max_memory_allocated`` on CUDA; the process's peak resident memory increase on the CPU), and writes
``shared/calibration/<device-slug>.yaml``, which ``shared.cost`` prices the full profile from. Why measure instead
of dividing FLOPs by a data-sheet peak: small CNNs with per-image augmentations, fp32 transformers and Mask R-CNN's
data-dependent heads run at very different shares of peak.

**Budget.** Everything (imports, building the models, FLOP counting, warm-up, timing) fits in ``--budget`` seconds,
exceeded by at most one step. Workloads are measured most important first (FLOPs per step x the rough count of its
steps in the full profile, ``shared.workloads.FULL_PROFILE_STEPS_HINT``); each gets a time slice of the budget left
(larger for the more important ones); one whose single step would not fit its slice is recorded as
``skipped: over budget`` and its time goes to the rest. A partial run still writes what it measured, after every
workload; a rerun merges into the file by workload key (a new measurement replaces the old one; a skip never
replaces a measurement), so a small budget refines a file without losing the rest.

**CUDA code paths** (``--cuda-paths`` alone, and by default after the measurements on CUDA when budget remains):
each project code path that can run on a bare box is exercised once (fp16 AMP with ``shared.training.amp_scaler``
and ``train_epoch``, bf16 autocast fine-tuning, channels-last, pinned-memory DataLoader workers, Plench's views on
the device, Mask R-CNN train + eval, a transformers fine-tuning step, the project's deterministic mode) and reported
``ok`` or ``failed`` with the error's last line under ``cuda_paths``.

**The file** (``shared.workloads.load_calibration`` reads it)::

    schema: 1
    device: {type, name, slug, threads, cpu, cpu_count, memory_gb[, count, capability]}
    peak_tflops: {bf16, fp16, tf32, fp32, source}     # GPU: data sheet; CPU: measured matmul rates
    measured_at: <date of the last run>
    versions: {python, torch, torchvision, transformers, timm, numpy, pandas, yaml, cuda, cudnn}
    budget_s: <the last run's>
    settings: {deterministic, cudnn_benchmark, threads, tf32_matmul, flops_version}
    load_average: {start: [1, 5, 15 min], end: [...]}  # the last run's (CPU timings are disturbed by other jobs)
    runs: [{started, finished, budget_s, argv, elapsed_s, measured, skipped, load_average_start, load_average_end}]
    workloads:
      - {key, family, arch, phase, batch, shape, precision, options, measured_at, samples_per_s, step_s, step_s_min,
         step_s_max, steps_timed, warmup_steps, build_s, peak_mem_mb, amp, flops_per_step, flops_version,
         achieved_tflops, load_1m[, cold: true when the only timed step was the first]}
      - {key, family, ..., measured_at, skipped: <reason>[, flops_per_step]}
    cuda_paths: {<name>: {status: ok | failed | skipped, what, detail | error | reason, seconds}}
    startup: {kernel: <s>, <paper>: <s> | skipped: {<paper>: reason}, threads, measured_at}
    dispatch: {s_per_op, ops, step_s, workload, measured_at}  # measure_dispatch: the floor under estimated steps

**Dispatch** (every run): the time per operator when operators are tiny (``measure_dispatch``: a one-row MLP's
forward and backward, timed and divided by its operator count), the floor ``shared.cost`` puts under every step it
estimates from FLOPs. On a GPU it is the host's cost of PyTorch's eager dispatch and the kernel launch, which bounds
small networks (a CIFAR ResNet-32 step dispatches ~470 operators).

**Startup** (``--startup``; by default on the CPU unless ``--only`` or ``--workload`` picks workloads): what a
notebook costs before its first step, which ``shared.cost`` adds to every notebook's price. At the rehearsal's and
smoke profile's scale it is a large share of a notebook's wall time (a CILN page that reads its voters from the cache
runs ~25 s on one thread, ~11 s of it this): a Jupyter kernel started and shut down (``jupyter_client``, as the runner
does) and, per paper, a fresh interpreter importing what that paper's notebooks import (their ``import`` lines, read
from the notebooks), each the best of two tries (one under a 300 s budget). On a bare GPU box the project's own
dependencies are absent: what cannot be imported is recorded as skipped.

Runs with only Python, torch, torchvision, transformers, timm, numpy, pandas and pyyaml (no tqdm: progress is plain
lines on stderr; the final table goes to stdout).
"""
from __future__ import annotations

import contextlib

import argparse
import ctypes
import datetime as dt
import gc
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

from shared.errors import ConfigError
from shared.executor import THREAD_VARIABLES
from shared.paths import PAPERS, REPO_ROOT
from shared.workloads import (
    CALIBRATION_DIR,
    FLOPS_VERSION,
    FULL_PROFILE_STEPS_HINT,
    FULL_PROFILE_WORKLOADS,
    Workload,
    build,
    count_ops,
    family,
    flops,
    known_flops,
    load_calibration,
    workloads_of,
)

DEFAULT_BUDGET_S = 420.0
MAX_TIMED_STEPS = 30
SLICE_EXPONENT = 0.2  # slices grow as importance ** 0.2: the costliest kinds get ~25x the slice of the cheapest
FIRST_STEP_STRETCH = 3.0  # a workload's first step may take up to 3 slices
CUDA_PATHS_RESERVE_S = 60.0  # kept for the CUDA path checks (at most 15 % of the budget)

#: Dense peak throughput (TFLOP/s, no sparsity) from the vendors' data sheets: (pattern on the lower-cased device
#: name, slug, bf16, fp16, tf32, fp32). The fp32 rate is the CUDA cores' (PyTorch does not use TF32 for fp32
#: matmuls unless asked; the project does not ask). V100 and T4 have no bf16: their fp16 tensor-core rate is given.
GPU_PEAKS = (
    (r"gh200", "nvidia-gh200", 989.4, 989.4, 494.7, 66.9),
    (r"h200", "nvidia-h200", 989.4, 989.4, 494.7, 66.9),
    (r"h100.*pcie", "nvidia-h100-pcie", 756.0, 756.0, 378.0, 51.2),
    (r"h100", "nvidia-h100", 989.4, 989.4, 494.7, 66.9),
    (r"a100", "nvidia-a100", 312.0, 312.0, 156.0, 19.5),
    (r"l40s", "nvidia-l40s", 362.1, 362.1, 183.0, 91.6),
    (r"\bl40\b", "nvidia-l40", 181.0, 181.0, 90.5, 90.5),
    (r"\bl4\b", "nvidia-l4", 121.0, 121.0, 60.0, 30.3),
    (r"\ba10\b", "nvidia-a10", 125.0, 125.0, 62.5, 31.2),
    (r"v100", "nvidia-v100", 125.0, 125.0, None, 15.7),
    (r"\bt4\b", "nvidia-t4", 65.0, 65.0, None, 8.1),
    (r"4090", "nvidia-rtx-4090", 165.2, 165.2, 82.6, 82.6),
    (r"3090", "nvidia-rtx-3090", 71.0, 71.0, 35.6, 35.6),
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def now_iso(seconds: bool = True) -> str:
    stamp = dt.datetime.now(dt.UTC).astimezone()
    return stamp.isoformat(timespec="seconds") if seconds else stamp.date().isoformat()


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ------------------------------------------------------------------------------------------------ the device
def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_info(device) -> dict:
    """name, slug (the calibration file's name), type, threads, CPU model and memory of ``device``."""
    import torch

    info = {"type": device.type, "threads": torch.get_num_threads(), "cpu": cpu_model(), "cpu_count": os.cpu_count()}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        name = torch.cuda.get_device_name(index)
        match = gpu_peak(name)
        info.update(name=name, slug=match[1] if match else slugify(name), count=torch.cuda.device_count(),
                    memory_gb=round(props.total_memory / 2**30, 1), capability=f"{props.major}.{props.minor}")
    else:
        info.update(name=f"{info['cpu']} ({info['threads']} threads)", slug=f"cpu-{info['threads']}core")
        try:
            pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
            info["memory_gb"] = round(pages * size / 2**30, 1)
        except (ValueError, OSError):
            pass
    return info


def gpu_peak(name: str):
    lower = name.lower()
    for row in GPU_PEAKS:
        if re.search(row[0], lower):
            return row
    return None


def measure_matmul_tflops(dtype_name: str, seconds: float = 1.0, n: int = 1024) -> float:
    """This CPU's (n x n) @ (n x n) rate in TFLOP/s with torch's threads, over about ``seconds``."""
    import torch

    dtype = getattr(torch, {"fp32": "float32", "bf16": "bfloat16"}[dtype_name])
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.mm(a, b)
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.mm(a, b)
        reps += 1
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e12


def peak_tflops(device, info: dict) -> dict:
    """Published dense peaks for known GPUs; on the CPU a measured fp32 (and bf16) matmul rate."""
    if device.type == "cuda":
        row = gpu_peak(info["name"])
        if row is None:
            return {"source": f"unknown GPU {info['name']!r}: no published peak in shared.gpu_check.GPU_PEAKS"}
        _, _, bf16, fp16, tf32, fp32 = row
        return {"bf16": bf16, "fp16": fp16, "tf32": tf32, "fp32": fp32,
                "source": "vendor data sheet, dense (no sparsity); fp32 = CUDA cores"}
    return {"fp32": round(measure_matmul_tflops("fp32"), 4), "bf16": round(measure_matmul_tflops("bf16", 0.5), 4),
            "source": f"measured: torch.mm 1024x1024 with {info['threads']} threads"}


def versions() -> dict:
    from importlib import metadata

    import numpy
    import torch

    out = {"python": platform.python_version(), "torch": str(torch.__version__), "numpy": numpy.__version__}
    for name, dist in (("torchvision", "torchvision"), ("transformers", "transformers"), ("timm", "timm"),
                       ("pandas", "pandas"), ("yaml", "PyYAML")):
        try:  # from the installed metadata: importing transformers and timm here would cost seconds of the budget
            out[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["cuda"] = torch.version.cuda
    out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return out


# ------------------------------------------------------------------------------------------------ memory
def _rss_bytes() -> int | None:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class PeakMemory:
    """Peak memory over a block, in MB above its start: CUDA max allocated, or the resident set sampled every 5 ms
    on the CPU (ru_maxrss, the process's lifetime peak, where /proc is absent)."""

    def __init__(self, device):
        self.device, self.peak_mb = device, None
        self._stop = threading.Event()

    def __enter__(self):
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return self
        self._base = _rss_bytes()
        self._max = self._base or 0
        if self._base is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        else:
            import resource

            self._base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return self

    def _sample(self):
        while not self._stop.wait(0.005):
            value = _rss_bytes()
            if value is not None and value > self._max:
                self._max = value

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            import torch

            self.peak_mb = (torch.cuda.max_memory_allocated(self.device) - self._base) / 2**20
            return False
        if hasattr(self, "_thread"):
            self._stop.set()
            self._thread.join()
            self._max = max(self._max, _rss_bytes() or 0)
        else:
            import resource

            self._max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.peak_mb = max(self._max - self._base, 0) / 2**20
        return False


# ------------------------------------------------------------------------------------------------ measuring
def _sync(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def _free(device) -> None:
    """Release the last workload's memory: CUDA's cache, and on Linux the C heap's free pages (glibc keeps them,
    which would hide the next workload's growth of the resident set)."""
    gc.collect()
    if device.type == "cuda":
        import torch

        torch.cuda.empty_cache()
    elif sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass  # not glibc: the resident set is measured as it is


def _time_subprocess(code: str, threads: int | None, tries: int = 2, timeout_s: float = 120.0) -> tuple[float | None,
                                                                                                     str]:
    """(best wall seconds of ``tries`` fresh interpreters running ``code``, "") or (None, why it failed)."""
    import subprocess

    env = dict(os.environ)
    if threads:
        env.update({v: str(threads) for v in THREAD_VARIABLES})
    best = None
    for _ in range(tries):
        t0 = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True,
                                  text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"over {timeout_s:g} s"
        if done.returncode:
            return None, (done.stderr.strip().splitlines() or ["exit code %d" % done.returncode])[-1][:200]
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best, ""


def notebook_imports(paper: str) -> list[str]:
    """The ``import`` / ``from ... import`` lines of ``paper``'s notebooks' code cells, in order, each once."""
    import json

    lines: list[str] = []
    for path in sorted((REPO_ROOT / paper).glob("*.ipynb")):
        for cell in json.loads(path.read_text()).get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith(("import ", "from ")) and line not in lines:
                    lines.append(line)
    return lines


KERNEL_START = """
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
kc.execute_interactive("1", timeout=60)
kc.stop_channels()
km.shutdown_kernel(now=False)
"""


#: the step whose time per operator ``measure_dispatch`` takes: a one-row MLP, whose operators do next to no work
DISPATCH_WORKLOAD = Workload("tabular_mlp", "mlp", "train", 1, (8,), "fp32", {"num_classes": 2})


def measure_dispatch(device, repeats: int = 300) -> dict:
    """Seconds the device takes per dispatched operator when the operators themselves are tiny: ``compute()`` of a
    one-row MLP's training step (forward, loss, backward), timed ``repeats`` times after a warm-up, divided by its
    operator count (``shared.workloads.count_ops``, on the same device). ``shared.cost`` floors the estimate of a step
    it has not measured at its operator count times this: below that, a small network's step is bound by dispatch
    and kernel launches, not arithmetic."""
    import torch

    device, w = torch.device(device), DISPATCH_WORKLOAD
    n_ops = count_ops(w, device)
    step = build(w, device)
    try:
        for _ in range(20):
            step.compute()
        _sync(device)
        started = time.perf_counter()
        for _ in range(repeats):
            step.compute()
        _sync(device)
        seconds = (time.perf_counter() - started) / repeats
    finally:
        step.close()
    return {"s_per_op": float(f"{seconds / n_ops:.3g}"), "ops": n_ops, "step_s": round(seconds, 7),
            "workload": w.key, "measured_at": now_iso()}


def _dispatch_or_why(device) -> dict:
    """``measure_dispatch``, or ``{"skipped": reason}`` if it fails (the workloads are still measured)."""
    try:
        dispatch = measure_dispatch(device)
    except Exception as exc:  # noqa: BLE001  a calibration run never dies of its smallest measurement
        log(f"dispatch: skipped ({_last_line(exc)})")
        return {"skipped": _last_line(exc)}
    log(f"dispatch: {dispatch['s_per_op'] * 1e6:.1f} us per operator")
    return dispatch


def measure_startup(papers: list[str], threads: int | None, deadline: float = math.inf, tries: int = 2) -> dict:
    """``{"kernel": s, <paper>: s, ...}``: a kernel's start and shutdown, and per paper a fresh interpreter's import
    of its notebooks' imports (module docstring, Startup); ``skipped`` names what could not be timed and why (nothing
    starts after ``deadline``, a ``time.perf_counter`` value)."""
    out, skipped = {}, {}
    kernel, why = (_time_subprocess(KERNEL_START, threads, tries) if time.perf_counter() < deadline
                   else (None, "over budget"))
    if kernel is None:
        skipped["kernel"] = why
    else:
        out["kernel"] = round(kernel, 2)
    for paper in papers:
        lines = notebook_imports(paper)
        if not lines:
            continue
        if time.perf_counter() >= deadline:
            seconds, why = None, "over budget"
        else:
            seconds, why = _time_subprocess("\n".join(lines), threads, tries)
        if seconds is None:
            skipped[paper] = why
        else:
            out[paper] = round(seconds, 2)
        log(f"startup {paper}: {f'{seconds:.1f} s' if seconds is not None else 'skipped: ' + why}")
    return {**out, **({"skipped": skipped} if skipped else {}), "threads": threads, "measured_at": now_iso()}


def _last_line(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


def _where(exc: BaseException, frames: int = 6) -> str:
    """The innermost ``frames`` frames of ``exc``'s traceback, one ``file:line in function`` each: a device run is
    short and rare, so a failure carries where it happened into the log (the file keeps only the last line)."""
    stack = traceback.extract_tb(exc.__traceback__)[-frames:]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in reversed(stack))


def measure(w: Workload, device, *, slice_end: float, deadline: float, first_step_s: float | None,
            max_steps: int = MAX_TIMED_STEPS, first_end: float | None = None) -> dict:
    """Build ``w``'s step and time it until ``slice_end`` (or ``max_steps`` timed steps): warm-up steps first (one,
    or two when five or more steps fit), then timed ones. A step starts only if its expected duration fits before
    ``slice_end`` (the first one: before ``first_end``, default ``slice_end``) and ``deadline``; the first one is
    expected to take ``first_step_s`` (None: unknown, it runs). Returns the measurement fields, or
    ``{"skipped": reason}``."""
    durations: list[float] = []
    started = time.perf_counter()
    _free(device)
    with PeakMemory(device) as memory:
        step = build(w, device)
        try:
            build_s = time.perf_counter() - started
            expected = first_step_s
            while len(durations) < max_steps + 2:
                stop = min(first_end if not durations and first_end is not None else slice_end, deadline)
                if expected is not None and time.perf_counter() + expected > stop:
                    break
                _sync(device)
                t0 = time.perf_counter()
                step()
                _sync(device)
                durations.append(time.perf_counter() - t0)
                if len(durations) == 1:
                    # the first step carries one-off costs (allocator, cuDNN/cuBLAS set-up, lazy init): expect the
                    # next one to take the guess when that is shorter
                    expected = min(durations[0], first_step_s) if first_step_s else durations[0]
                else:
                    expected = statistics.median(durations[1:][-5:])
            samples = step.samples
            amp = step.amp
        finally:
            step.close()
            del step
            _free(device)
    if not durations:
        return {"skipped": f"over budget: a step (~{first_step_s:.1f} s) does not fit the time left"}
    warmup = 0 if len(durations) == 1 else 1 if len(durations) < 5 else 2
    timed = durations[warmup:]
    step_s = statistics.median(timed)
    out = {"samples_per_s": samples / step_s, "step_s": step_s, "step_s_min": min(timed), "step_s_max": max(timed),
           "steps_timed": len(timed), "warmup_steps": warmup, "build_s": build_s,
           "peak_mem_mb": memory.peak_mb, "amp": amp}
    if warmup == 0:
        out["cold"] = True  # the only step was the first: it includes one-off costs (allocation, lazy init)
    return out


def _round(value, digits: int = 4):
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return value
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: _round(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v, digits) for v in value]
    return value


def order_workloads(workloads: list[Workload], known: dict[str, float]) -> list[tuple[Workload, float]]:
    """(workload, importance) most important first: FLOPs per step (known ones; else the family's median known, else
    1 GFLOP) x the rough count of its steps in the full profile."""
    by_family: dict[str, list[float]] = {}
    for w in workloads:
        if w.key in known:
            by_family.setdefault(w.family, []).append(known[w.key])
    ranked = []
    for w in workloads:
        fl = known.get(w.key) or (statistics.median(by_family[w.family]) if w.family in by_family else 1e9)
        ranked.append((w, fl * FULL_PROFILE_STEPS_HINT.get(w.key, 1.0)))
    return sorted(ranked, key=lambda pair: -pair[1])


class RateBook:
    """Achieved FLOP/s seen so far in this run (by family and overall), to guess a workload's first step."""

    def __init__(self, default_rate: float):
        self.default_rate, self.rates = default_rate, {}

    def add(self, fam: str, rate: float) -> None:
        self.rates.setdefault(fam, []).append(rate)

    def guess(self, fam: str) -> float:
        """The family's best rate so far, else the best of any family or the default: optimistic, because a guess
        too short costs at most one step over the slice, and one too long loses the measurement (small networks
        reach a fraction of the rate of large ones)."""
        if fam in self.rates:
            return max(self.rates[fam])
        every = [r for rates in self.rates.values() for r in rates]
        return max([self.default_rate, *every])


# ------------------------------------------------------------------------------------------------ the file
def default_out(slug: str) -> Path:
    return CALIBRATION_DIR / f"{slug}.yaml"


def _plain(value):
    """Plain YAML types: str subclasses (torch's version) as str, tuples as lists, numpy scalars as Python's."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return _plain(value.item())
    return str(value)


def write_yaml_atomic(path: Path, data: dict) -> None:
    import yaml

    data = _plain(data)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"# written by python -m shared.gpu_check ({now_iso()}); see shared/gpu_check.py for the fields\n")
            yaml.safe_dump(data, f, sort_keys=False, default_flow_style=None, width=120)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600: give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def merge_workloads(old: list[dict], new: list[dict]) -> list[dict]:
    """Entries by key: a new measurement replaces the old entry; a new skip replaces only a skip (a measurement
    is kept, with ``last_failed`` when the new attempt failed); the rest stay. Full-profile order, then by key."""
    by_key = {e["key"]: dict(e) for e in old}
    for entry in new:
        previous = by_key.get(entry["key"])
        if "skipped" in entry and previous is not None and "samples_per_s" in previous:
            if entry["skipped"].startswith("failed"):
                previous["last_failed"] = {"reason": entry["skipped"], "at": entry.get("measured_at")}
            if not previous.get("flops_per_step") and entry.get("flops_per_step"):
                previous["flops_per_step"] = entry["flops_per_step"]
            continue
        by_key[entry["key"]] = dict(entry)
    rank = {w.key: i for i, w in enumerate(FULL_PROFILE_WORKLOADS)}
    return sorted(by_key.values(), key=lambda e: (rank.get(e["key"], len(rank)), e["key"]))


def merge_file(path: Path, header: dict, entries: list[dict], run: dict, cuda_paths: dict | None,
               startup: dict | None = None, refine: bool = False) -> dict:
    """The calibration at ``path`` (if any) with this run merged in: header fields replaced, workloads merged by key,
    the run appended to ``runs``, CUDA path results replaced name by name, the startup times replaced if measured.
    ``refine`` (a run of chosen workloads, ``--only``/``--workload``): the file's peak rates and budget stay those of
    the full calibration run that measured them."""
    old = {}
    if path.exists():
        try:
            old = load_calibration(path).to_dict()
        except ConfigError as exc:
            log(f"warning: {exc}; starting a new file")
    runs = [r for r in old.get("runs", []) if r.get("started") != run.get("started")] + [run]
    if refine and old.get("peak_tflops"):
        header = {**header, "peak_tflops": old["peak_tflops"], "budget_s": old.get("budget_s")}
    paths = dict(old.get("cuda_paths") or {})
    paths.update(cuda_paths or {})
    return {"schema": 1, **header, "load_average": {"start": run.get("load_average_start"),
                                                   "end": run.get("load_average_end")},
            "runs": runs[-20:], "workloads": merge_workloads(old.get("workloads") or [], entries),
            "cuda_paths": paths, "startup": startup or old.get("startup") or {}}


# ------------------------------------------------------------------------------------------------ CUDA code paths
class _ArrayDataset:
    """A picklable map-style dataset for the DataLoader check: item i -> (image (3, 32, 32) float, label)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        g = torch.Generator().manual_seed(i)
        return torch.rand(3, 32, 32, generator=g), i % 10


def _path_amp_fp16(device) -> str:
    import torch

    from shared.models import build_model
    from shared.seeding import seed_everything
    from shared.training import (
        amp_scaler,
        make_optimizer,
        random_crop_flip,
        train_epoch,
    )

    seed_everything(0)
    model = build_model("resnet20", (3, 32, 32), 10).to(device)
    scaler = amp_scaler(device)
    X, y = torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,))
    loss = train_epoch(model, X, y, make_optimizer(model, "sgd", 0.1), batch_size=128,
                       generator=torch.Generator().manual_seed(0), augment=random_crop_flip, scaler=scaler)
    if not math.isfinite(loss):
        raise FloatingPointError(f"loss {loss}")
    return f"loss {loss:.3f}, GradScaler {'on' if scaler.is_enabled() else 'off'} (scale {scaler.get_scale():g})"


def _path_workload(key: str):
    def check(device) -> str:
        w = Workload.from_key(key)
        step = build(w, device)
        try:
            for _ in range(2):
                out = step()
            _sync(device)
        finally:
            step.close()
            _free(device)
        return f"{w.key}: ok" + (f" (loss {out:.3f})" if isinstance(out, float) else "")

    check.key = key
    return check


def _path_pinned_loader(device) -> str:
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(_ArrayDataset(256), batch_size=64, shuffle=True, num_workers=2,
                        pin_memory=device.type == "cuda", generator=torch.Generator().manual_seed(0))
    pinned = []
    for x, y in loader:
        pinned.append(x.is_pinned())
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    _sync(device)
    if device.type == "cuda" and not all(pinned):
        raise RuntimeError("batches were not pinned")
    return f"{len(pinned)} batches through 2 workers, pinned: {all(pinned)}"


def _path_plench_views(device) -> str:
    """Plench's weak, strong and distill views built on the device against the same views built on the CPU from the
    same seed: the device's kernels (grid sampling, gathers, histograms) must give the CPU's images, up to a grey
    level on a few pixels (float rounding)."""
    import torch

    from plench.augment import views_for

    views = views_for("image", 32)
    raw = torch.randint(0, 256, (64, 32, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    report = {}
    for name in ("weak", "strong", "distill"):
        here = getattr(views, name)(raw.to(device), generator=torch.Generator().manual_seed(0)).cpu()
        cpu = getattr(views, name)(raw, generator=torch.Generator().manual_seed(0))
        off = (here - cpu).abs() > 1.5 / 255 / min(views.std)  # more than one grey level after normalising
        if here.shape != cpu.shape or off.float().mean() > 1e-3:
            raise AssertionError(f"the {name} view on {device.type} differs from the CPU's on "
                                 f"{off.float().mean():.2%} of its values")
        report[name] = f"{tuple(here.shape)}, {off.float().mean():.1e} off"
    return f"views on {device.type} vs the CPU: {report}"


def _path_plench_stacked(device) -> str:
    """Plench's stacked training (``plench.stacked``, ``batched: true``) against the same networks alone, in train
    mode (BatchNorm on batch statistics) under the full profile's precision on the device (bf16 autocast on CUDA,
    fp32 on the CPU, whose autocast does not reach convolutions inside vmap): the members' logits and running
    statistics must agree, and a backward and a batched Adam step must run."""
    import torch

    from plench.stacked import StackedAdam, StackedNetwork

    precision = "bf16" if device.type == "cuda" else "fp32"
    w = Workload("cifar_resnet", "resnet32", "train", 32, (3, 32, 32), precision,
                 {"optimizer": "adam", "augment": "weak", "stack": 3})
    torch.manual_seed(0)
    with torch.device(device):
        models = [family("cifar_resnet").model(w).train() for _ in range(3)]  # as protocol trains them
    stack = StackedNetwork(models)
    x = torch.randn(3, 32, 3, 32, 32, device=device)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    with amp:
        together = stack.forward(x).float()
        alone = torch.stack([m(x[g]).float() for g, m in enumerate(models)])
    scale = alone.abs().max().item()
    worst = (together - alone).abs().max().item() / scale
    name = next(n for n in stack.buffers if n.endswith("running_mean"))
    stats = max((stack.buffers[name][g] - dict(m.named_buffers())[name]).abs().max().item()
                for g, m in enumerate(models))
    adam = StackedAdam(stack.params, [torch.optim.Adam(m.parameters(), lr=1e-3) for m in models])
    adam.step(torch.autograd.grad(together.square().mean(), stack.params))
    _sync(device)
    tolerance = 5e-2 if precision == "bf16" else 1e-4
    if not (worst <= tolerance and stats <= tolerance):
        raise AssertionError(f"stacked vs alone ({precision}): logits differ by {worst:.2e} of their scale, running "
                             f"means by {stats:.2e} (tolerance {tolerance:g})")
    return f"{precision}: logits within {worst:.1e} of their scale, running means within {stats:.1e}; Adam step ok"


def _path_deterministic(device) -> str:
    import torch

    from shared.seeding import seed_everything

    seed_everything(0)  # deterministic algorithms (warn only), cuDNN autotuning off: what every notebook runs under
    src = torch.randn(1000, 16, device=device, requires_grad=True)
    index = torch.randint(0, 10, (1000,), device=device)
    out = torch.zeros(10, 16, device=device).index_add(0, index, src)
    out.sum().backward()
    _sync(device)
    return (f"deterministic={torch.are_deterministic_algorithms_enabled()}, "
            f"cudnn.benchmark={torch.backends.cudnn.benchmark}, CUBLAS_WORKSPACE_CONFIG="
            f"{os.environ.get('CUBLAS_WORKSPACE_CONFIG')}")


def _path_select_device(device) -> str:
    from shared.device import select_device

    chosen = select_device(str(device))
    return f"select_device({str(device)!r}) -> {chosen}"


#: name -> (what it exercises, check(device) -> detail)
CUDA_PATHS = {
    "select_device": ("shared.device.select_device", _path_select_device),
    "deterministic_mode": ("shared.seeding.seed_everything on the device (deterministic algorithms, CUBLAS workspace)",
                           _path_deterministic),
    "amp_fp16_train_epoch": ("shared.training.train_epoch with amp_scaler (fp16 autocast + GradScaler), ResNet-20",
                             _path_amp_fp16),
    "channels_last_fp16": ("ResNet-20 in channels-last with fp16 AMP",
                           _path_workload("cifar_resnet/resnet20/train/b64/3x32x32/fp16/channels_last=true")),
    "plench_views_device": ("plench.augment's weak/strong/distill views on device tensors", _path_plench_views),
    "plench_step": ("a Plench DIRK-like step: three views on the device, 2 + 2 passes, Adam",
                    _path_workload("cifar_resnet/resnet32/train/b64/3x32x32/fp32/augment=weak_strong_distill,"
                                   "nograd=2,optimizer=adam,views=2")),
    "plench_stacked": ("Plench's stacked training (torch.func vmap, stacked BatchNorm statistics, batched Adam) "
                       "against the networks alone, ResNet-32 x 3", _path_plench_stacked),
    "plench_stacked_step": ("a stack of 16 Plench configurations, weak views, Adam (03's batched: true)",
                            _path_workload("cifar_resnet/resnet32/train/b64/3x32x32/bf16/augment=weak,nograd=1,"
                                           "optimizer=adam,stack=16")),
    "pinned_dataloader_workers": ("DataLoader with 2 workers and pin_memory, non-blocking copies (ciln's DeiT loaders)",
                                  _path_pinned_loader),
    "deit_fp16_finetune": ("timm DeiT3-Small fine-tuning step, fp16 AMP + GradScaler",
                           _path_workload("vit_train/deit3_small/train/b8/3x224x224/fp16/drop_path=0.05")),
    "clip_resize_infer": ("CLIP ViT-B/32 tower with on-device bicubic resizing (ciln ClipZeroShot)",
                          _path_workload("vit_infer/clip_vit_b32/infer/b16/3x224x224/fp32/source=32")),
    "transformers_bf16_finetune": ("transformers DeBERTa-v3-xsmall fine-tuning step with bf16 autocast (lnlfn)",
                                   _path_workload("text_encoder/deberta-v3-xsmall/train/b8/128/bf16/num_labels=3")),
    "t5_generate": ("T5-base label generation (5-beam search, NoisywikiHow's evaluation) under bf16",
                    _path_workload("text_encoder/t5-base/infer/b4/128/bf16/task=seq2seq")),
    "maskrcnn_train": ("torchvision Mask R-CNN R50-FPN training step (benchmark_n.maskrcnn's build)",
                       _path_workload("maskrcnn/maskrcnn_r50_fpn/train/b2/3x320x480/fp32")),
    "maskrcnn_bf16_train": ("torchvision Mask R-CNN R50-FPN training step under bf16 autocast (benchmark_n's "
                            "precision auto on CUDA)",
                            _path_workload("maskrcnn/maskrcnn_r50_fpn/train/b2/3x320x480/bf16")),
    "maskrcnn_eval": ("torchvision Mask R-CNN R50-FPN inference with masks",
                      _path_workload("maskrcnn/maskrcnn_r50_fpn/infer/b2/3x320x480/fp32")),
}


def run_cuda_paths(device, deadline: float | None = None, *, allow_cpu: bool = False) -> dict:
    """Each of ``CUDA_PATHS`` once on ``device``: {name: {status: ok|failed|skipped, what, detail|error, seconds}}.
    On a CPU device every path is skipped unless ``allow_cpu`` (the tests run the same code on the CPU)."""
    results = {}
    for name, (what, check) in CUDA_PATHS.items():
        if device.type != "cuda" and not allow_cpu:
            results[name] = {"status": "skipped", "what": what, "reason": f"no CUDA device (measured on {device})"}
            continue
        if deadline is not None and time.perf_counter() > deadline:
            results[name] = {"status": "skipped", "what": what, "reason": "over budget"}
            continue
        start = time.perf_counter()
        try:
            detail = check(device)
            results[name] = {"status": "ok", "what": what, "detail": detail}
        except Exception as exc:  # noqa: BLE001  every failure is the result being reported, with its last line
            results[name] = {"status": "failed", "what": what, "error": _last_line(exc)}
            log(f"  cuda path {name}: failed at {_where(exc)}")
            _free(device)
        results[name]["seconds"] = round(time.perf_counter() - start, 2)
        log(f"  cuda path {name}: {results[name]['status']} "
            f"{results[name].get('detail') or results[name].get('error') or results[name].get('reason', '')}")
    return results


def _attempt(w: Workload, device, fl: float | None, previous: dict | None, rates: RateBook, slice_end: float,
             deadline: float, max_steps: int, known: dict[str, float]) -> dict:
    """Measure ``w`` within its slice, or say why not: count its FLOPs first where that is cheap (meta device; on
    CUDA at batch 1), guess its first step (this device's earlier measurement, else FLOPs / the rate seen so far)
    and skip it when that step does not fit."""
    fam = family(w.family)
    if time.perf_counter() >= min(slice_end, deadline):
        return {"skipped": "over budget: no time left"}
    if fl is None and min(slice_end, deadline) - time.perf_counter() < 5:
        return {"skipped": "over budget: FLOPs unknown and no time to count them"}
    if fl is None and (fam.meta_flops or device.type == "cuda"):
        fl = known[w.key] = flops(w, device=device)
    elif fl is None and slice_end - time.perf_counter() < 60:
        # Mask R-CNN on a CPU: counting needs a forward and backward at batch 1 (tens of seconds)
        return {"skipped": "over budget: FLOPs unknown and counting them on this CPU needs about a minute"}
    elif fl is None:
        fl = known[w.key] = flops(w, device=device)
    if previous is not None and "step_s" in previous:
        guess = float(previous["step_s"])
    else:
        guess = fl / rates.guess(w.family)
    now = time.perf_counter()
    # the first step may overrun the slice up to FIRST_STEP_STRETCH times (taken from the less important workloads
    # after it): one cold step says more than none
    first_end = min(now + FIRST_STEP_STRETCH * max(slice_end - now, 0), deadline)
    if now + guess > first_end:
        return {"skipped": f"over budget: a step (~{guess:.3g} s) does not fit its "
                           f"{max(slice_end - now, 0):.3g} s slice"}
    return measure(w, device, slice_end=slice_end, deadline=deadline, first_step_s=guess, max_steps=max_steps,
                   first_end=first_end)



# ------------------------------------------------------------------------------------------------ main
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m shared.gpu_check", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds in all (default %(default)s)")
    p.add_argument("--device", default="auto", help="auto (CUDA if present), cpu, cuda or cuda:N")
    p.add_argument("--out", default=None, help="the calibration YAML (a folder: <folder>/<device-slug>.yaml; "
                   "default shared/calibration/<device-slug>.yaml)")
    p.add_argument("--only", nargs="+", metavar="FAMILY", help="measure these workload families only")
    p.add_argument("--workload", nargs="+", metavar="KEY", help="measure these workloads (keys, e.g. of the smoke "
                   "profile's networks) instead of the full profile's")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--max-steps", type=int, default=MAX_TIMED_STEPS, help="timed steps per workload at most")
    paths = p.add_mutually_exclusive_group()
    paths.add_argument("--cuda-paths", action="store_true", help="only exercise the project's CUDA code paths")
    paths.add_argument("--no-cuda-paths", action="store_true", help="do not exercise them after the measurements")
    p.add_argument("--startup", action=argparse.BooleanOptionalAction, default=None,
                   help="time a kernel's start and each paper's imports (default: on the CPU only)")
    p.add_argument("--list", action="store_true", help="list the workloads (most important first) and exit")
    args = p.parse_args(argv)
    if args.budget <= 0:
        p.error("--budget must be positive")
    if args.max_steps < 1:
        p.error("--max-steps must be >= 1")
    return args


def resolve_out(out: str | None, slug: str) -> Path:
    if out is None:
        return default_out(slug)
    path = Path(out).expanduser()
    if path.is_dir() or out.endswith(os.sep):
        return path / f"{slug}.yaml"
    return path


def print_table(entries: list[dict], out=sys.stdout) -> None:
    print(f"{'workload':<92} {'samples/s':>11} {'step s':>9} {'peak MB':>9} {'TFLOP/s':>8}", file=out)
    for e in entries:
        if "skipped" in e:
            print(f"{e['key']:<92} skipped: {e['skipped']}", file=out)
            continue
        tf = e.get("achieved_tflops")
        print(f"{e['key']:<92} {e['samples_per_s']:>11.4g} {e['step_s']:>9.4g} {e['peak_mem_mb']:>9.0f} "
              f"{tf if tf is not None else float('nan'):>8.3g}", file=out)


def main(argv=None) -> int:
    started_wall, start = now_iso(), time.perf_counter()
    args = parse_args(argv)
    deadline = start + args.budget
    try:
        selected = [Workload.from_key(k) for k in args.workload] if args.workload else workloads_of(args.only)
        if args.workload and args.only:
            selected = [w for w in selected if w.family in args.only]
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for w, importance in order_workloads(selected, known_flops()):
            print(f"{importance:10.3g}  {w.key}")
        return 0

    # the project's deterministic mode (shared.seeding) needs cuBLAS's workspace fixed before cuBLAS starts
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    from shared.device import select_device

    warnings.filterwarnings("ignore", message=".*deterministic.*")  # seed_everything's warn-only mode, per op
    warnings.filterwarnings("ignore", category=FutureWarning)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        device = select_device(args.device)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = device_info(device)
    out = resolve_out(args.out, info["slug"])
    log(f"gpu_check: {info['name']} -> {out}; budget {args.budget:g} s, {len(selected)} workloads")
    run = {"started": started_wall, "budget_s": args.budget, "argv": list(sys.argv[1:] if argv is None else argv),
           "load_average_start": load_average()}
    header = {"device": info, "peak_tflops": _round(peak_tflops(device, info)), "measured_at": now_iso(False),
              "versions": versions(), "budget_s": args.budget,
              "settings": {"deterministic": True, "cudnn_benchmark": False, "threads": torch.get_num_threads(),
                           "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                           "flops_version": FLOPS_VERSION},
              "dispatch": _dispatch_or_why(device)}
    entries: list[dict] = []
    cuda_paths = None
    startup = None

    last_save = [0.0]

    def save(final: bool = False) -> None:
        """Merge this run into the file: at the end, and after a measurement at most every 10 s (each save reads
        and rewrites the file)."""
        if not final and time.perf_counter() - last_save[0] < 10:
            return
        last_save[0] = time.perf_counter()
        run.update(finished=now_iso() if final else None, elapsed_s=round(time.perf_counter() - start, 1),
                   load_average_end=load_average(), measured=sum("samples_per_s" in e for e in entries),
                   skipped=sum("skipped" in e for e in entries))
        write_yaml_atomic(out, merge_file(out, header, entries, run, cuda_paths, startup,
                                          refine=bool(args.only or args.workload)))

    paths_wanted = device.type == "cuda" and not args.no_cuda_paths
    if args.cuda_paths:
        cuda_paths = run_cuda_paths(device, deadline)
        save(final=True)
        return 0 if all(r["status"] != "failed" for r in cuda_paths.values()) else 1

    if args.startup if args.startup is not None else (device.type == "cpu" and not (args.only or args.workload)):
        # started within the first quarter of the budget (the workloads are what the full profile's price rests
        # on), the best of two tries where the budget is a calibration's, not a quick check's
        startup = measure_startup(list(PAPERS), args.threads or torch.get_num_threads(), start + 0.25 * args.budget,
                                  tries=2 if args.budget >= 300 else 1)
    reserve = min(CUDA_PATHS_RESERVE_S, 0.15 * args.budget) if paths_wanted else 0.0
    measure_deadline = deadline - reserve
    old = {}
    if out.exists():
        try:
            old = load_calibration(out).workloads
        except ConfigError:
            old = {}
    known = known_flops([out] if out.exists() else [])
    ranked = order_workloads(selected, known)
    peak = header["peak_tflops"]
    base_rate = (peak.get("fp32") or 1.0) * 1e12 * (0.25 if device.type == "cuda" else 0.5)
    rates = RateBook(base_rate)
    weights = [max(imp, 1.0) ** SLICE_EXPONENT for _, imp in ranked]
    try:
        for i, (w, _) in enumerate(ranked):
            t_start = time.perf_counter()
            left = measure_deadline - t_start
            slice_end = t_start + max(left * weights[i] / sum(weights[i:]), 0.0)
            entry = {"key": w.key, **w.to_dict(), "measured_at": now_iso()}
            prefix = f"[{t_start - start:6.1f}s/{args.budget:g}s] {i + 1}/{len(ranked)} {w.key}"
            fl = known.get(w.key)
            try:
                entry.update(_attempt(w, device, fl, old.get(w.key), rates, slice_end, measure_deadline,
                                      args.max_steps, known))
                fl = known.get(w.key, fl)
            except Exception as exc:  # noqa: BLE001  a failing workload is recorded and the others still run
                kind = "out of memory: " if type(exc).__name__ == "OutOfMemoryError" else ""
                entry["skipped"] = f"failed: {kind}{_last_line(exc)}"
                log(f"{prefix}: failed at {_where(exc)}")
                _free(device)
            if fl is not None:
                entry["flops_per_step"] = fl
                entry["flops_version"] = FLOPS_VERSION
                if "step_s" in entry:
                    entry["achieved_tflops"] = fl / entry["step_s"] / 1e12
                    rates.add(w.family, fl / entry["step_s"])
            entry["load_1m"] = (load_average() or [None])[0]
            entries.append(_round(entry))
            if "skipped" in entry:
                log(f"{prefix}: skipped: {entry['skipped']}")
            else:
                log(f"{prefix}: {entry['steps_timed']} steps, {entry['step_s']:.4g} s/step, "
                    f"{entry['samples_per_s']:.4g} samples/s, {entry['peak_mem_mb']:.0f} MB")
                save()
        if paths_wanted and time.perf_counter() < deadline:
            log("CUDA code paths:")
            cuda_paths = run_cuda_paths(device, deadline)
        elif device.type != "cuda":
            cuda_paths = run_cuda_paths(device)  # all skipped, with the reason
    except KeyboardInterrupt:
        save(final=True)
        log(f"interrupted; what was measured is in {out}")
        return 130
    save(final=True)
    print_table(entries)
    print(f"wrote {out} ({sum('samples_per_s' in e for e in entries)} measured, "
          f"{sum('skipped' in e for e in entries)} skipped, {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
