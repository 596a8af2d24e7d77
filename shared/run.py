"""Batch runner: execute paper notebooks with papermill, resumably, and keep a run manifest.

    python -m shared.run                          # every paper, smoke profile
    python -m shared.run ciln plench --jobs 2     # two papers, two notebooks at a time
    python -m shared.run ciln --profile full -f ciln/params/full.yaml
    python -m shared.run ciln -p seed 1 --only 01_benchmark
    python -m shared.run --list                   # what would run, what is up to date

Each notebook is executed into ``runs/<profile>/<paper>/<notebook>.ipynb`` with ``out_dir`` set to
``runs/<profile>/<paper>/<notebook>/`` for its figures and tables. After each notebook the manifest
``runs/<profile>/manifest.json`` is rewritten atomically with its status, parameters, wall time, peak
memory and output files, so a killed batch loses only the notebooks that were running: re-running it
skips every notebook whose source, parameters and code (``shared/``, the paper's modules and data
files, ``constraints.txt``) are unchanged since it last succeeded. A failing notebook does not stop the
batch; the runner exits non-zero with a summary at the end.

Parameter files (``-f``) are YAML: top-level keys are parameters for every notebook, and an optional
``notebooks:`` mapping gives extra parameters per notebook stem. A relative ``data_dir`` is resolved against
the folder the command runs in (the kernels run in the notebooks' folders).

Before any notebook starts, ``shared.preflight`` checks that this machine has what the planned notebooks
need (a GPU where ``device`` asks for one; in the full profile every data and weight file their settings
read) and stops with the list of what is missing; ``--no-preflight`` skips the check. ``--check-env``
prints the same report (with the package versions) and exits.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import fnmatch
import hashlib
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from shared.catalog import NOTEBOOK_PATTERN
from shared.errors import ConfigError
from shared.paths import PAPERS, REPO_ROOT, paper_dir, runs_dir
from shared.preflight import preflight
from shared.profiles import PROFILES, check_profile

KERNEL_NAME = "noisy-label-replications"
CODE_SUFFIXES = (".py", ".yaml", ".yml", ".csv")


# ---------------------------------------------------------------------------------------------- discovery
def discover(papers: list[str], only: list[str] | None = None) -> list[Path]:
    """Numbered notebooks of the papers (``NN_name.ipynb``), filtered by stem patterns in ``only``."""
    found = []
    for paper in papers:
        for path in sorted(paper_dir(paper).glob("*.ipynb")):
            if NOTEBOOK_PATTERN.match(path.name) and (not only or any(fnmatch.fnmatch(path.stem, p) for p in only)):
                found.append(path)
    return found


def code_hash(paper: str) -> str:
    """Hash of the code and data files a paper's notebooks depend on (notebooks themselves excluded)."""
    files = [p for p in (REPO_ROOT / "shared").rglob("*.py")]
    files += [p for p in paper_dir(paper).rglob("*") if p.suffix in CODE_SUFFIXES and ".ipynb_checkpoints" not in p.parts]
    files += [REPO_ROOT / "constraints.txt"]
    digest = hashlib.sha256()
    for path in sorted(f for f in files if f.exists() and "__pycache__" not in f.parts):
        digest.update(str(path.relative_to(REPO_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def notebook_fingerprint(path: Path, parameters: dict, code: str) -> str:
    """Hash of the notebook's cells (type, tags, source), its parameters and the code hash."""
    cells = json.loads(path.read_text())["cells"]
    content = [(c["cell_type"], c.get("metadata", {}).get("tags", []), "".join(c["source"])) for c in cells]
    blob = json.dumps({"cells": content, "parameters": parameters, "code": code}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- manifest
class Manifest:
    """``runs/<profile>/manifest.json``: one record per notebook, rewritten atomically."""

    def __init__(self, path: Path, profile: str):
        self.path = path
        self.data = {"profile": profile, "notebooks": {}}
        if path.exists():
            try:
                self.data = json.loads(path.read_text())
            except json.JSONDecodeError:
                print(f"warning: {path} is unreadable; starting a new manifest", file=sys.stderr)

    @property
    def records(self) -> dict:
        return self.data.setdefault("notebooks", {})

    def up_to_date(self, key: str, fingerprint: str) -> bool:
        record = self.records.get(key)
        return bool(
            record and record.get("status") == "ok" and record.get("fingerprint") == fingerprint
            and (self.path.parent / record["output_notebook"]).exists()
        )

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=self.path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


# ---------------------------------------------------------------------------------------------- execution
class PeakMemory(threading.Thread):
    """Polls the resident memory of this process's children (the kernel and its workers)."""

    def __init__(self, interval: float = 0.25):
        super().__init__(daemon=True)
        self.interval, self.peak, self._stop_event = interval, 0, threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop_event.is_set():
            total = 0
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop_event.wait(self.interval)

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return self.peak / 2**20


def execute_job(job: dict) -> dict:
    """Run one notebook (in a worker process) and return its manifest record."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(job["threads"])
    out_nb = Path(job["output_notebook"])
    out_nb.parent.mkdir(parents=True, exist_ok=True)
    Path(job["parameters"]["out_dir"]).mkdir(parents=True, exist_ok=True)
    record = {k: job[k] for k in ("paper", "notebook", "fingerprint", "parameters", "kernel")}
    record.update(started=time.strftime("%Y-%m-%dT%H:%M:%S"), python=platform.python_version(), host=platform.node())
    monitor = PeakMemory()
    monitor.start()
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            job["input"], str(out_nb), parameters=job["parameters"], kernel_name=job["kernel"],
            cwd=str(Path(job["input"]).parent), progress_bar=False, log_output=False,
            request_save_on_cell_execute=True, execution_timeout=job["cell_timeout"],
        )
        record.update(status="ok", error=None)
    except PapermillExecutionError as e:
        record.update(status="failed", error=f"cell {e.exec_count}: {e.ename}: {e.evalue}"[:2000])
    except Exception as e:  # kernel died, timeout, bad parameters ...
        record.update(status="failed", error=f"{type(e).__name__}: {e}"[:2000])
    record["wall_s"] = round(time.perf_counter() - start, 2)
    record["peak_rss_mb"] = round(monitor.stop(), 1)
    record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    record["outputs"] = list_outputs(Path(job["parameters"]["out_dir"]))
    return record


def list_outputs(out_dir: Path) -> list[str]:
    """The notebook's output files; a sub-folder counts as one entry, ``name/ (N files)``."""
    entries = []
    for path in sorted(out_dir.iterdir()) if out_dir.exists() else []:
        if path.is_file():
            entries.append(path.name)
        elif path.is_dir():
            entries.append(f"{path.name}/ ({sum(1 for p in path.rglob('*') if p.is_file())} files)")
    return entries


def kernel_name() -> str:
    """The project's registered kernel if present (``make setup`` registers it), else ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL_NAME if KERNEL_NAME in KernelSpecManager().find_kernel_specs() else "python3"


# ---------------------------------------------------------------------------------------------- batch
def load_parameter_files(files: list[str]) -> tuple[dict, dict]:
    """Global and per-notebook parameters from YAML files (later files win)."""
    common, per_notebook = {}, {}
    for name in files or []:
        path = Path(name)
        if not path.exists():
            raise ConfigError(f"parameter file {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"parameter file {path} is not valid YAML: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of parameter names to values")
        for stem, params in (data.pop("notebooks", None) or {}).items():
            per_notebook.setdefault(stem, {}).update(params or {})
        common.update(data)
    return common, per_notebook


def plan_jobs(args, profile: str, out_root: Path) -> list[dict]:
    papers = args.papers or list(PAPERS)
    common, per_notebook = load_parameter_files(args.file)
    for key, value in args.param or []:
        try:
            common[key] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise ConfigError(f"-p {key} {value!r}: the value is not valid YAML ({e.problem}); "
                              "quote dicts and lists, e.g. -p settings '{severities: [5]}'") from e
    if common.setdefault("profile", profile) != profile:
        raise ConfigError(f"--profile {profile} conflicts with profile={common['profile']} in the parameter file")
    for params in (common, *per_notebook.values()):
        if isinstance(params.get("data_dir"), str):
            params["data_dir"] = str(Path(params["data_dir"]).expanduser().absolute())
    kernel = kernel_name()
    threads = max(1, (os.cpu_count() or 1) // max(1, args.jobs))
    codes = {paper: code_hash(paper) for paper in papers}
    jobs = []
    for path in discover(papers, args.only):
        paper = path.parent.name
        params = dict(common, **per_notebook.get(path.stem, {}))
        params["out_dir"] = str(out_root / paper / path.stem)
        fingerprint_params = {k: v for k, v in params.items() if k != "out_dir"}
        jobs.append({
            "key": f"{paper}/{path.name}", "paper": paper, "notebook": path.name, "input": str(path),
            "output_notebook": str(out_root / paper / path.name), "parameters": params, "kernel": kernel,
            "fingerprint": notebook_fingerprint(path, fingerprint_params, codes[paper]),
            "threads": threads, "cell_timeout": args.cell_timeout,
        })
    return jobs


def run_batch(args) -> int:
    from shared.progress import progress

    profile = check_profile(args.profile)
    out_root = Path(args.out) if args.out else runs_dir(profile)
    manifest = Manifest(out_root / "manifest.json", profile)
    jobs = plan_jobs(args, profile, out_root)
    if not jobs:
        print("no notebooks matched", file=sys.stderr)
        return 1
    todo = [j for j in jobs if args.force or not manifest.up_to_date(j["key"], j["fingerprint"])]
    if args.list:
        for j in jobs:
            print(f"{'to run    ' if j in todo else 'up to date'}  {j['key']}")
        return 0
    if todo and not args.no_preflight:
        checks = preflight(todo, profile)
        if not checks.ok:
            print(f"error: this machine lacks what the {profile} profile needs; nothing was run.\n{checks.text()}\n"
                  "Fix the above (or pass --no-preflight to start anyway).", file=sys.stderr)
            return 2
        if checks.warnings:
            print(checks.text(), file=sys.stderr)
    print(f"{len(jobs)} notebooks, {len(jobs) - len(todo)} up to date, {len(todo)} to run "
          f"({profile} profile, {args.jobs} at a time) -> {out_root}")
    batch_start = time.perf_counter()
    failed = []
    bar = progress(total=len(todo), desc="notebooks", leave=True)
    ctx = multiprocessing.get_context("spawn")
    pool = cf.ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx)
    try:
        futures = {pool.submit(execute_job, j): j for j in todo}
        for future in cf.as_completed(futures):
            job = futures[future]
            try:
                record = future.result()
            except Exception as e:  # the worker itself died
                record = {"paper": job["paper"], "notebook": job["notebook"], "status": "failed",
                          "fingerprint": job["fingerprint"], "parameters": job["parameters"],
                          "error": f"worker crashed: {e!r}", "wall_s": None, "peak_rss_mb": None, "outputs": []}
            record["output_notebook"] = str(Path(job["output_notebook"]).relative_to(out_root))
            record["out_dir"] = str(Path(job["parameters"]["out_dir"]).relative_to(out_root))
            manifest.records[job["key"]] = record
            manifest.save()
            if record["status"] != "ok":
                failed.append(job["key"])
            bar.write(f"{record['status']:>6}  {job['key']}  {record['wall_s']} s  {record['peak_rss_mb']} MB"
                      + (f"\n        {record['error']}" if record["error"] else ""))
            bar.update()
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        print("\ninterrupted: finished notebooks are in the manifest; re-run the same command to resume",
              file=sys.stderr)
        return 130
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    manifest.data["last_batch"] = {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "wall_s": round(time.perf_counter() - batch_start, 1),
        "executed": len(todo), "skipped": len(jobs) - len(todo), "failed": failed, "jobs": args.jobs,
    }
    manifest.save()
    print_summary(manifest, [j["key"] for j in jobs])
    if failed:
        print(f"\n{len(failed)} notebook(s) failed: {', '.join(failed)}\nExecuted copies with the error are in {out_root}",
              file=sys.stderr)
        return 1
    return 0


def print_summary(manifest: Manifest, keys: list[str]) -> None:
    print(f"\n{'status':<8}{'wall s':>8}{'peak MB':>9}  notebook")
    total = 0.0
    for key in keys:
        r = manifest.records.get(key, {})
        total += r.get("wall_s") or 0.0
        print(f"{r.get('status', '-'):<8}{r.get('wall_s') or 0:>8.1f}{r.get('peak_rss_mb') or 0:>9.0f}  {key}")
    print(f"{'':<8}{total:>8.1f}  (sum of notebook times)")


# ---------------------------------------------------------------------------------------------- CLI
def check_environment(args) -> int:
    """Import the key packages, report versions and the kernel (``make setup`` calls this), then check what the
    notebooks chosen by ``args`` (papers, profile, parameter files) need on this machine."""
    import importlib

    problems = []
    for name in ("torch", "torchvision", "numpy", "pandas", "sklearn", "papermill", "jupyter_book", "shared.datasets"):
        try:
            module = importlib.import_module(name)
            print(f"  {name:<16} {getattr(module, '__version__', 'ok')}")
        except Exception as e:  # report every broken import, not only the first
            problems.append(f"{name}: {e}")
    print(f"  kernel           {kernel_name()}")
    for p in problems:
        print(f"error: cannot import {p}", file=sys.stderr)
    profile = check_profile(args.profile)
    checks = preflight(plan_jobs(args, profile, Path(args.out) if args.out else runs_dir(profile)), profile)
    print(f"  {profile} profile:\n{checks.text()}")
    return 1 if problems or not checks.ok else 0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m shared.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("papers", nargs="*", metavar="PAPER",
                        help=f"papers to run (default: all of {', '.join(PAPERS)})")
    parser.add_argument("--profile", default="smoke", help=f"one of {', '.join(PROFILES)} (default smoke)")
    parser.add_argument("-f", "--file", action="append", help="YAML parameter file (repeatable)")
    parser.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                        help="a parameter for every notebook, YAML-typed (repeatable)")
    parser.add_argument("--only", action="append", help="notebook stem pattern, e.g. '01_*' (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks executed at the same time (default 1)")
    parser.add_argument("--force", action="store_true", help="re-run notebooks that are up to date")
    parser.add_argument("--out", help="output root (default runs/<profile>)")
    parser.add_argument("--cell-timeout", type=int, default=None, help="seconds a cell may run (default: no limit)")
    parser.add_argument("--list", action="store_true", help="list notebooks and whether they are up to date")
    parser.add_argument("--check-env", action="store_true",
                        help="check the environment and what the chosen notebooks need (data, GPU), then exit")
    parser.add_argument("--no-preflight", action="store_true",
                        help="start even if the check of data, GPU and packages finds something missing")
    args = parser.parse_args(argv)
    unknown = [p for p in args.papers if p not in PAPERS]
    if unknown:
        parser.error(f"unknown paper(s) {', '.join(unknown)}; choose from {', '.join(PAPERS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return check_environment(args) if args.check_env else run_batch(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
