"""The full profile's code path on the rehearsal data (shared/rehearsal.py): the quick notebooks of Plench, LNLFN,
NoisywikiHow (its 01 fine-tunes tiny random models of the seven language models) and Benchmark-N (COCO-shapes
written as a COCO 2017 folder) run with ``profile: full``
through the real loaders, so a change that breaks the full path fails here and
not on the GPU box. ``make rehearse`` runs every notebook; CILN's are left to it, since every CILN notebook
first trains the full voter pools (minutes even at the rehearsal's scale)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shared.paths import REPO_ROOT

pytestmark = pytest.mark.notebooks
QUICK = {"plench": "00_datasets", "lnlfn": "0[04]_*", "noisywikihow": "0[01]_*", "benchmark_n": "0[0129]_*"}


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    data, out = tmp_path_factory.mktemp("rehearsal-data"), tmp_path_factory.mktemp("rehearsal-runs")
    subprocess.run([sys.executable, "-m", "shared.rehearsal", str(data), *QUICK], cwd=REPO_ROOT, check=True, capture_output=True)
    logs = {}
    for paper, only in QUICK.items():
        logs[paper] = subprocess.run(
            [sys.executable, "-m", "shared.run", paper, "--profile", "full", "-f", f"{paper}/params/rehearsal.yaml",
             "-p", "data_dir", str(data), "-p", "device", "cpu", "--only", only, "--out", str(out), "--jobs", "2"],
            cwd=REPO_ROOT, capture_output=True, text=True)
    return json.loads((out / "manifest.json").read_text())["notebooks"], logs


@pytest.mark.parametrize("paper", list(QUICK))
def test_quick_notebooks_run_the_full_profile_on_rehearsal_data(rehearsal, paper):
    records, logs = rehearsal
    ours = {k: r for k, r in records.items() if k.startswith(f"{paper}/")}
    assert ours, f"no {paper} notebook ran:\n{logs[paper].stderr[-3000:]}"
    for key, record in ours.items():
        assert record["status"] == "ok", f"{key} failed: {record['error']}\n{logs[paper].stderr[-3000:]}"
        assert record["parameters"]["profile"] == "full" and "comparison.csv" in record["outputs"]


def test_lnlfn_mturk_page_without_acl_imdb_still_gives_its_verdict(rehearsal, tmp_path):
    """LNLFN 04 with the MTurk releases but no aclImdb: Tables 2-9 are compared and claimed, Fig. 5 (the only item
    needing the reviews) is skipped with the reason and its claim is "not run"."""
    records, _ = rehearsal
    complete = records["lnlfn/04_mturk_reanalysis.ipynb"]
    decided = json.loads((Path(complete["parameters"]["out_dir"]) / "claims.json").read_text())
    assert decided and all(c["holds"] is not None for c in decided), "with every input present nothing is skipped"
    source = complete["parameters"]["data_dir"]
    without = tmp_path / "data"
    without.mkdir()
    for entry in Path(source).iterdir():
        if entry.name != "aclImdb":
            (without / entry.name).symlink_to(entry)
    out = tmp_path / "runs"
    log = subprocess.run(
        [sys.executable, "-m", "shared.run", "lnlfn", "--profile", "full", "-f", "lnlfn/params/rehearsal.yaml",
         "-p", "data_dir", str(without), "-p", "device", "cpu", "--only", "04_mturk_reanalysis", "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True)
    record = json.loads((out / "manifest.json").read_text())["notebooks"]["lnlfn/04_mturk_reanalysis.ipynb"]
    assert record["status"] == "ok", f"{record['error']}\n{log.stderr[-3000:]}"
    claims = json.loads((out / "lnlfn" / "04_mturk_reanalysis" / "claims.json").read_text())
    not_run = [c for c in claims if c["holds"] is None]
    assert [c["claim"][:7] for c in not_run] == ["Fig. 5 "] and "aclImdb" in not_run[0]["detail"]
    assert len(claims) > 10  # every table claim of both datasets was decided
