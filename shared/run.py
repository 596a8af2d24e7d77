"""Batch runner: execute paper notebooks with papermill, resumably, locally or on a Slurm cluster.

    python -m shared.run                          # every paper, smoke profile
    python -m shared.run ciln plench --jobs 2     # two papers, two notebooks at a time
    python -m shared.run ciln --profile full -f ciln/params/full.yaml
    python -m shared.run ciln --only 01_benchmark -p settings '{severities: [5]}'
    python -m shared.run plench --profile full -f plench/params/full.yaml --executor slurm --slurm-profile cluster.yaml
    python -m shared.run --list                   # what would run, what is up to date

Each notebook is executed into ``runs/<profile>/<paper>/<notebook>.ipynb`` with ``out_dir`` set to
``runs/<profile>/<paper>/<notebook>/`` for its figures and tables, through a staging folder, so a failed or
interrupted run never replaces a good result (``shared.notebook_job``). Each notebook's record (status,
parameters, threads, wall time, peak memory, outputs) is written atomically to its own file in the ledger
``runs/<profile>/records/`` (``shared.ledger``) by the job itself, wherever it ran; ``manifest.json`` beside it
is a summary rebuilt from the records. Re-running a batch skips every notebook whose cells, parameters, thread
count and code are unchanged since it last succeeded: the code is the project modules the notebook imports,
followed through their imports (``shared.codedeps``), the paper's data files they name, and
``constraints.txt``. A failing notebook does not stop the batch; the runner exits non-zero with a summary.
Ctrl-C stops the batch at once (running notebooks are stopped, finished ones kept) and exits 130; two runners on
the same folder share the work through per-notebook locks.

Parameters (``-p NAME VALUE``, ``-f file.yaml``; see ``shared.parameters``) are checked against each notebook's
parameters cell and profile settings before any kernel starts; relative paths are resolved against the folder
the command runs in. Each notebook gets a fixed number of math-library threads (``--threads``, by default
``THREADS[profile]``), written in its record, so results do not depend on ``--jobs``.

Before any notebook starts, ``shared.preflight`` checks that this machine has what the planned notebooks need
(a GPU where ``device`` asks for one; in the full profile every data and weight file their settings read) and
stops with the list of what is missing; ``--no-preflight`` skips the check. ``--check-env`` prints the same
report (with the package versions) and exits.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import re
import sys
import time
from pathlib import Path

from shared.catalog import NOTEBOOK_PATTERN
from shared.errors import ConfigError
from shared.ledger import Ledger
from shared.notebook_job import execute_job, is_up_to_date
from shared.parameters import (absolute_paths, check_names, check_settings, load_parameter_files, parameter_names,
                               parse_cli_values)
from shared.paths import PAPERS, REPO_ROOT, paper_dir, runs_dir
from shared.preflight import preflight
from shared.profiles import PROFILES, check_profile

KERNEL_NAME = "noisy-label-replications"
THREADS = {"smoke": 1, "full": 4}
PENDING_EXIT = 3  # the exit status when notebooks left Slurm sweeps running (executor wait: false), none failed  # math-library threads per notebook, unless --threads says otherwise
DATA_SUFFIXES = (".yaml", ".yml", ".csv", ".json", ".txt", ".tsv")


# ---------------------------------------------------------------------------------------------- discovery
def discover(papers: list[str], only: list[str] | None = None) -> list[Path]:
    """Numbered notebooks of the papers (``NN_name.ipynb``), filtered by stem patterns in ``only``.

    A pattern that matches no notebook is a ConfigError listing the notebooks there are."""
    found = [path for paper in papers for path in sorted(paper_dir(paper).glob("*.ipynb"))
             if NOTEBOOK_PATTERN.match(path.name)]
    if not only:
        return found
    for pattern in only:
        if not any(fnmatch.fnmatch(path.stem, pattern) for path in found):
            raise ConfigError(f"--only {pattern!r} matches no notebook of {', '.join(papers)}; the notebooks are: "
                              + ", ".join(f"{p.parent.name}/{p.stem}" for p in found))
    return [path for path in found if any(fnmatch.fnmatch(path.stem, p) for p in only)]


def data_files(paper: str) -> list[Path]:
    """The paper's data files a notebook may read (reported numbers, profiles, catalog), not its parameter files."""
    folder = paper_dir(paper)
    return sorted(p for p in folder.rglob("*") if p.suffix in DATA_SUFFIXES and p.is_file()
                  and not {"params", ".ipynb_checkpoints", "__pycache__"} & set(p.relative_to(folder).parts))


def dependencies(notebook: Path) -> list[Path]:
    """The files a notebook's results depend on besides its cells: the project modules it imports, followed
    through their imports, the paper's data files that the notebook or those modules name (by file name or by
    stem in quotes, as ``reported(paper, "table1")`` does), and ``constraints.txt``."""
    from shared.codedeps import module_closure, notebook_imports

    modules = module_closure(notebook_imports(notebook))
    text = notebook.read_text() + "".join(path.read_text() for path in modules)
    named = [path for path in data_files(notebook.parent.name)
             if path.name in text or re.search(rf"[\"'/]{re.escape(path.stem)}[\"']", text)]
    return modules + named + [REPO_ROOT / "constraints.txt"]


def notebook_fingerprint(path: Path, parameters: dict, threads: int) -> str:
    """Hash of the notebook's cells (type, tags, source), its parameters, its thread count and ``dependencies``."""
    cells = json.loads(path.read_text())["cells"]
    content = [(c["cell_type"], c.get("metadata", {}).get("tags", []), "".join(c["source"])) for c in cells]
    digest = hashlib.sha256(json.dumps({"cells": content, "parameters": parameters, "threads": threads},
                                       sort_keys=True, default=str).encode())
    for dep in dependencies(path):
        if dep.exists():
            name = dep.relative_to(REPO_ROOT) if dep.is_relative_to(REPO_ROOT) else dep.relative_to(path.parent.parent)
            digest.update(str(name).encode())
            digest.update(dep.read_bytes())
    return digest.hexdigest()[:16]


def kernel_name() -> str:
    """The project's registered kernel if present (``make setup`` registers it), else ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL_NAME if KERNEL_NAME in KernelSpecManager().find_kernel_specs() else "python3"


# ---------------------------------------------------------------------------------------------- batch
def plan_jobs(args, profile: str, out_root: Path) -> list[dict]:
    """One job per chosen notebook: its parameters (checked), fingerprint, threads and output paths."""
    papers = args.papers or list(PAPERS)
    common, per_notebook = load_parameter_files(args.file)
    cli = parse_cli_values(args.param)
    common.update(cli)
    if common.setdefault("profile", profile) != profile:
        raise ConfigError(f"--profile {profile} conflicts with profile={common['profile']} in the parameter file")
    all_notebooks = discover(papers)
    notebooks = discover(papers, args.only)
    check_names(notebooks, {k: v for k, v in common.items() if k not in cli}, cli, per_notebook,
                sorted({p.stem for p in all_notebooks}))
    cwd = Path.cwd()
    threads = THREADS[profile] if args.threads is None else args.threads
    if threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {threads}")
    kernel = kernel_name()
    jobs = []
    for path in notebooks:
        paper = path.parent.name
        takes = set(parameter_names(path))
        params = absolute_paths({k: v for k, v in {**common, **per_notebook.get(path.stem, {})}.items() if k in takes},
                                cwd)
        check_settings(paper, path.stem, profile, params)
        jobs.append({
            "key": f"{paper}/{path.name}", "paper": paper, "notebook": path.name, "input": str(path),
            "out_root": str(out_root), "output_notebook": str(out_root / paper / path.name),
            "parameters": {**params, "out_dir": str(out_root / paper / path.stem)}, "kernel": kernel,
            "fingerprint": notebook_fingerprint(path, params, threads), "threads": threads,
            "cell_timeout": args.cell_timeout, "force": args.force, "executor": args.executor,
        })
    return jobs


def interleaved(jobs: list[dict]) -> list[dict]:
    """The jobs in submission order: one notebook of each paper in turn, each paper's in its own order.

    A paper's notebooks share cached artifacts (CILN's voters, a paper's training runs): two of them started together
    would have one wait on the other's lock while a slot idles. Taking papers in turn lets another paper's notebook
    use that slot, and ``run_batch`` names each job's paper as its group, so the local executor also holds a paper's
    next notebook back while one of it runs and another paper's is queued (CILN 02-10 wait for 01's voters, one
    slot, while the other papers' notebooks take the second); results do not depend on the order."""
    by_paper: dict[str, list[dict]] = {}
    for job in jobs:
        by_paper.setdefault(job["paper"], []).append(job)
    queues = list(by_paper.values())
    return [queue[i] for i in range(max(map(len, queues), default=0)) for queue in queues if i < len(queue)]


def executor_spec(args):
    """The executor the options ask for (``shared.executor``): local processes, Slurm jobs or in-process."""
    from shared.executor import ExecutorSpec

    overrides = {name: value for name, value in (
        ("partition", args.partition), ("gpus_per_node", args.gpus), ("timeout_min", args.timeout_min),
        ("mem_gb", args.mem_gb), ("array_parallelism", args.array_parallelism), ("account", args.account),
    ) if value is not None}
    return ExecutorSpec.from_options(args.executor, yaml_file=args.slurm_profile, jobs=args.jobs, threads=1,
                                     **overrides)


def run_batch(args) -> int:
    from shared.progress import progress

    profile = check_profile(args.profile)
    out_root = Path(args.out).absolute() if args.out else runs_dir(profile)
    ledger = Ledger(out_root)
    jobs = plan_jobs(args, profile, out_root)
    spec = executor_spec(args)
    records = {job["key"]: ledger.read(job["key"]) for job in jobs}
    todo = [j for j in jobs if args.force or not is_up_to_date(records[j["key"]], j["fingerprint"], out_root)]
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
    where = f"{args.jobs} at a time" if spec.kind == "local" else f"{spec.kind} executor"
    print(f"{len(jobs)} notebooks, {len(jobs) - len(todo)} up to date, {len(todo)} to run "
          f"({profile} profile, {where}, {jobs[0]['threads'] if jobs else '-'} thread(s) each) -> {out_root}",
          flush=True)
    from shared.executor import JobFailed, as_completed, make_executor

    outcomes: dict[str, str] = {}
    bar = progress(total=len(todo), desc="notebooks", leave=True)
    executor = make_executor(spec, out_root / ".submitit")
    try:
        ordered = interleaved(todo)
        submitted = executor.submit_array(execute_job, [(job,) for job in ordered],
                                          groups=[job["paper"] for job in ordered]) if todo else []
        planned = dict(zip(map(id, submitted), ordered))
        for handle in as_completed(submitted):
            job = planned[id(handle)]
            try:
                result = handle.result()
            except JobFailed as e:  # the job itself died (killed, out of memory, cancelled on the cluster)
                result = {"outcome": "failed", "error": f"job {e}", "record": _crashed(ledger, job, str(e))}
            outcomes[job["key"]] = result["outcome"]
            record = result["record"]
            bar.write(f"{result['outcome']:>7}  {job['key']}  {record.get('wall_s')} s  {record.get('peak_rss_mb')} MB"
                      + (f"\n         {result.get('error')}" if result.get("error") else ""))
            bar.update()
    except KeyboardInterrupt:
        executor.shutdown(cancel=True)
        ledger.write_manifest()
        print(f"\ninterrupted: {len(outcomes)} finished notebook(s) are in {ledger.root / 'records'}; the running ones "
              "were stopped and their last good results kept. Re-run the same command to resume.", file=sys.stderr)
        return 130
    finally:
        executor.shutdown(cancel=True)
        bar.close()
    ledger.write_manifest()
    print_summary(ledger, [j["key"] for j in jobs])
    failed = [key for key, outcome in outcomes.items() if outcome == "failed"]
    pending = [key for key, outcome in outcomes.items() if outcome == "pending"]
    if pending:
        print(f"\n{len(pending)} notebook(s) submitted Slurm sweeps and did not wait for them (executor wait: false): "
              f"{', '.join(pending)}\nWatch them with `squeue --me`; run the same command again to collect them.",
              file=sys.stderr)
    if failed:
        print(f"\n{len(failed)} notebook(s) failed: {', '.join(failed)}\nThe failed copies (<notebook>.failed.ipynb) "
              f"are in {out_root}; a good result from an earlier run is kept in place.", file=sys.stderr)
        return 1
    return PENDING_EXIT if pending else 0


def _crashed(ledger: Ledger, job: dict, error: str) -> dict:
    """Record a job that died before writing its record, keeping an earlier good record."""
    failure = {"error": error, "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "parameters": job["parameters"],
               "fingerprint": job["fingerprint"]}
    previous = ledger.read(job["key"])
    if previous and previous.get("status") == "ok":
        record = {**previous, "last_failure": failure}
    else:
        record = {k: job[k] for k in ("paper", "notebook", "fingerprint", "parameters", "threads", "executor")}
        record.update(status="failed", error=error, wall_s=None, peak_rss_mb=None, outputs=[],
                      output_notebook=str(Path(job["output_notebook"]).relative_to(ledger.root)))
    ledger.write(job["key"], record)
    return record


def print_summary(ledger: Ledger, keys: list[str]) -> None:
    records = ledger.records()
    print(f"\n{'status':<8}{'wall s':>8}{'peak MB':>9}  notebook")
    total = 0.0
    for key in keys:
        r = records.get(key, {})
        total += r.get("wall_s") or 0.0
        status = r.get("status", "-") + (" (last rerun failed)" if r.get("last_failure") else "")
        print(f"{status:<8}{r.get('wall_s') or 0:>8.1f}{r.get('peak_rss_mb') or 0:>9.0f}  {key}")
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
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks executed at the same time by the local executor (default 1)")
    parser.add_argument("--threads", type=int, default=None,
                        help="math-library threads per notebook (default: smoke 1, full 4); recorded, and part of the "
                             "fingerprint, because results can depend on it")
    parser.add_argument("--force", action="store_true", help="re-run notebooks that are up to date")
    parser.add_argument("--out", help="output root (default runs/<profile>)")
    parser.add_argument("--cell-timeout", type=int, default=None, help="seconds a cell may run (default: no limit)")
    parser.add_argument("--list", action="store_true", help="list notebooks and whether they are up to date")
    parser.add_argument("--check-env", action="store_true",
                        help="check the environment and what the chosen notebooks need (data, GPU), then exit")
    parser.add_argument("--no-preflight", action="store_true",
                        help="start even if the check of data, GPU and packages finds something missing")
    cluster = parser.add_argument_group("executor", "where notebooks run (shared.executor): local processes "
                                        "(default), Slurm jobs (one per notebook), or in this process (debug)")
    cluster.add_argument("--executor", default="local", choices=("local", "slurm", "debug"))
    cluster.add_argument("--slurm-profile", metavar="FILE",
                         help="YAML of Slurm options, e.g. {partition: gpu, gpus_per_node: 1, timeout_min: 240}")
    cluster.add_argument("--partition")
    cluster.add_argument("--gpus", type=int, help="GPUs per job")
    cluster.add_argument("--timeout-min", type=int, help="time limit per job, minutes")
    cluster.add_argument("--mem-gb", type=int, help="memory per job, GB")
    cluster.add_argument("--array-parallelism", type=int, help="jobs of the array running at once")
    cluster.add_argument("--account")
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
