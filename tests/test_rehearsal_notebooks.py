"""The full profile's code path, on every change: every notebook of all five papers in the full profile on rehearsal
data (shared/rehearsal.py: stand-ins written in the real datasets' formats), through the real loaders and the
paper's models, at the CI scale of ``<paper>/params/ci.yaml`` layered over ``<paper>/params/rehearsal.yaml`` (the
smallest voter pools, one epoch, a few steps), so a change that breaks the full path fails here and not on the GPU
box. Run with ``--rehearsal`` (``make rehearse-ci``, which ``.ci/run`` calls after ``make test``): 18 minutes on 2
cores from a clean clone, beside ``make test``'s 45 (29 Nov 2026); the runner's 16.5 of them are ~1,900 notebook
seconds on two slots, CILN's voter predictions on ~10,000 corrupted images per voter the largest part.
``make rehearse`` keeps the larger rehearsal scale for a user's own check.

Each notebook's record also carries the runs it touched (``shared.runlog``); the cost model's plan of the same
notebooks (``shared.cost``) must predict exactly those runs.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shared.paths import PAPERS, REPO_ROOT
from shared.run import discover

pytestmark = [pytest.mark.notebooks, pytest.mark.rehearsal]
NOTEBOOKS = [f"{p.parent.name}/{p.name}" for p in discover(list(PAPERS))]
# the rehearsal data at the CI scale: a few hundred rows of each shared dataset (make rehearse writes 1,000 + 250)
DATA_ROWS = ["--n-train", "400", "--n-test", "100"]


def runner_args(papers, data: Path) -> list[str]:
    """The runner's arguments for the CI rehearsal of ``papers`` (the same for the run and for its cost plan): one
    batch, so the runner interleaves the papers' notebooks on its two slots."""
    files = [arg for paper in papers for arg in ("-f", f"{paper}/params/rehearsal.yaml", "-f", f"{paper}/params/ci.yaml")]
    return [*papers, *files, "-p", "data_dir", str(data), "-p", "device", "cpu"]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    data, out = tmp_path_factory.mktemp("rehearsal-data"), tmp_path_factory.mktemp("rehearsal-runs")
    subprocess.run([sys.executable, "-m", "shared.rehearsal", str(data), *DATA_ROWS], cwd=REPO_ROOT, check=True,
                   capture_output=True)
    log = subprocess.run([sys.executable, "-m", "shared.run", *runner_args(PAPERS, data), "--profile", "full",
                          "--out", str(out), "--jobs", "2", "--threads", "1"], cwd=REPO_ROOT, capture_output=True,
                         text=True)
    return json.loads((out / "manifest.json").read_text())["notebooks"], log, data


@pytest.mark.parametrize("key", NOTEBOOKS)
def test_notebook_runs_the_full_profile_on_rehearsal_data(rehearsal, key):
    records, log, _ = rehearsal
    assert key in records, f"{key} did not run:\n{log.stderr[-3000:]}"
    record = records[key]
    assert record["status"] == "ok", f"{key} failed: {record['error']}\n{log.stderr[-3000:]}"
    assert record["parameters"]["profile"] == "full" and "comparison.csv" in record["outputs"]


@pytest.mark.parametrize("paper", list(PAPERS))
def test_the_cost_model_plans_the_runs_each_notebook_made(rehearsal, paper):
    """Per notebook and kind, the distinct runs the cost model plans equal those the notebook's run log shows."""
    from shared.cost import batch_jobs, plan_batch

    records, _, data = rehearsal
    plans = plan_batch(batch_jobs(runner_args([paper], data), "full"), "full")
    for key, runs in plans.items():
        if records.get(key, {}).get("status") != "ok":
            continue  # its own test reports the failure
        planned = {}
        for run in {(r.kind, r.identity) for r in runs}:
            planned[run[0]] = planned.get(run[0], 0) + 1
        recorded = {kind: v["runs"] for kind, v in records[key].get("runs", {}).items()}
        assert planned == recorded, f"{key}: planned {planned}, the run log shows {recorded}"


def test_lnlfn_mturk_page_without_acl_imdb_still_gives_its_verdict(rehearsal, tmp_path):
    """LNLFN 04 with the MTurk releases but no aclImdb: Tables 2-9 are compared and claimed, Fig. 5 (the only item
    needing the reviews) is skipped with the reason and its claim is "not run"."""
    records, _, source = rehearsal
    complete = records["lnlfn/04_mturk_reanalysis.ipynb"]
    decided = json.loads((Path(complete["parameters"]["out_dir"]) / "claims.json").read_text())
    assert decided and all(c["holds"] is not None for c in decided), "with every input present nothing is skipped"
    without = tmp_path / "data"
    without.mkdir()
    for entry in Path(source).iterdir():
        if entry.name != "aclImdb":
            (without / entry.name).symlink_to(entry)
    out = tmp_path / "runs"
    log = subprocess.run(
        [sys.executable, "-m", "shared.run", *runner_args(["lnlfn"], without), "--profile", "full",
         "--only", "04_mturk_reanalysis", "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True)
    record = json.loads((out / "manifest.json").read_text())["notebooks"]["lnlfn/04_mturk_reanalysis.ipynb"]
    assert record["status"] == "ok", f"{record['error']}\n{log.stderr[-3000:]}"
    claims = json.loads((out / "lnlfn" / "04_mturk_reanalysis" / "claims.json").read_text())
    not_run = [c for c in claims if c["holds"] is None]
    assert [c["claim"][:7] for c in not_run] == ["Fig. 5 "] and "aclImdb" in not_run[0]["detail"]
    assert len(claims) > 10  # every table claim of both datasets was decided
