"""The batch runner on a real single-node Slurm cluster (the ``slurm`` fixture): a notebook submitted with
``--executor slurm`` lands in the same ledger as one run locally, and is then up to date for both."""
import json
import subprocess
import sys

import pytest

from test_run import OK, write_notebook

pytestmark = pytest.mark.slurm


def test_a_notebook_run_on_slurm_lands_in_the_same_ledger_as_a_local_one(slurm, tmp_path):
    papers = tmp_path / "papers" / "ciln"
    papers.mkdir(parents=True)
    write_notebook(papers / "01_ok.ipynb", OK)
    write_notebook(papers / "02_ok.ipynb", OK)
    env = dict(slurm.env, NOISY_PAPERS_ROOT=str(tmp_path / "papers"), NOISY_RUNS_DIR=str(tmp_path / "runs"))

    def run(*args):
        done = subprocess.run([sys.executable, "-m", "shared.run", "ciln", *args], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("--only", "01_ok")
    assert "1 to run (smoke profile, slurm executor" in run("--executor", "slurm", "--timeout-min", "5")
    records = json.loads((tmp_path / "runs/smoke/manifest.json").read_text())["notebooks"]
    assert {k: (r["status"], r["executor"]) for k, r in records.items()} == {
        "ciln/01_ok.ipynb": ("ok", "local"), "ciln/02_ok.ipynb": ("ok", "slurm")}
    assert (tmp_path / "runs/smoke/ciln/02_ok/hello.txt").read_text() == "hi smoke"
    assert list((tmp_path / "runs/smoke/.submitit").rglob("*_log.out"))  # the job's own log, for squeue users
    assert run("--list").count("up to date") == 2
    assert "2 notebooks, 2 up to date, 0 to run" in run()
