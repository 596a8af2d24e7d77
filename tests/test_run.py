"""The batch runner on tiny notebooks in a temporary papers folder: statuses, skipping, resuming."""
import json
import os
import signal
import subprocess
import sys
import time

import nbformat
import pytest

from shared.run import main

PARAMS = 'profile = "smoke"\ndata_dir = None\ndevice = "auto"\nsettings = {}\nout_dir = None\ngreeting = "hi"'


def write_notebook(path, body):
    cells = [nbformat.v4.new_code_cell(PARAMS), nbformat.v4.new_code_cell(body)]
    cells[0].metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.write_text(nbformat.writes(nb))


OK = 'import pathlib\npathlib.Path(out_dir, "hello.txt").write_text(f"{greeting} {profile}")'
FAIL = 'raise ValueError("deliberate failure")'


@pytest.fixture
def papers(tmp_path, monkeypatch):
    root = tmp_path / "papers" / "ciln"
    root.mkdir(parents=True)
    write_notebook(root / "01_ok.ipynb", OK)
    write_notebook(root / "02_fail.ipynb", FAIL)
    write_notebook(root / "03_ok.ipynb", OK)
    monkeypatch.setenv("NOISY_PAPERS_ROOT", str(tmp_path / "papers"))
    monkeypatch.setenv("NOISY_RUNS_DIR", str(tmp_path / "runs"))
    return root


def manifest(tmp_path):
    return json.loads((tmp_path / "runs" / "smoke" / "manifest.json").read_text())["notebooks"]


def test_batch_keeps_going_records_and_skips(papers, tmp_path, capsys):
    assert main(["ciln", "--jobs", "2", "-p", "greeting", "hello"]) == 1
    records = manifest(tmp_path)
    assert {k: r["status"] for k, r in records.items()} == {
        "ciln/01_ok.ipynb": "ok", "ciln/02_fail.ipynb": "failed", "ciln/03_ok.ipynb": "ok"}
    assert "ValueError: deliberate failure" in records["ciln/02_fail.ipynb"]["error"]
    ok = records["ciln/01_ok.ipynb"]
    assert ok["parameters"]["greeting"] == "hello" and ok["outputs"] == ["hello.txt"]
    assert ok["wall_s"] > 0 and ok["peak_rss_mb"] > 10
    assert (tmp_path / "runs/smoke/ciln/01_ok/hello.txt").read_text() == "hello smoke"
    assert (tmp_path / "runs/smoke/ciln/02_fail.ipynb").exists()  # the executed copy shows the error
    err = capsys.readouterr().err
    assert "1 notebook(s) failed: ciln/02_fail.ipynb" in err

    # unchanged notebooks are skipped; the failed one runs again
    assert main(["ciln", "-p", "greeting", "hello"]) == 1
    again = manifest(tmp_path)
    assert again["ciln/01_ok.ipynb"]["started"] == ok["started"]
    assert again["ciln/02_fail.ipynb"]["started"] >= records["ciln/02_fail.ipynb"]["started"]

    # a changed parameter or source re-runs only what it touches
    write_notebook(papers / "02_fail.ipynb", OK)
    assert main(["ciln", "-p", "greeting", "hello"]) == 0
    assert manifest(tmp_path)["ciln/01_ok.ipynb"]["started"] == ok["started"]
    capsys.readouterr()
    assert main(["ciln", "--list", "-p", "greeting", "bye"]) == 0
    assert capsys.readouterr().out.count("to run") == 3


def test_parameter_files_and_profile_conflicts(papers, tmp_path, capsys):
    params = tmp_path / "p.yaml"
    params.write_text("greeting: yaml\nnotebooks:\n  03_ok: {greeting: special}\n")
    assert main(["ciln", "--only", "0[13]_*", "-f", str(params)]) == 0
    assert (tmp_path / "runs/smoke/ciln/01_ok/hello.txt").read_text() == "yaml smoke"
    assert (tmp_path / "runs/smoke/ciln/03_ok/hello.txt").read_text() == "special smoke"
    params.write_text("profile: full\n")
    assert main(["ciln", "-f", str(params)]) == 2
    assert "conflicts with profile=full" in capsys.readouterr().err
    assert main(["ciln", "--profile", "huge"]) == 2
    assert main(["ciln", "-p", "settings", "{bad"]) == 2
    assert "the value is not valid YAML" in capsys.readouterr().err


def test_unknown_paper_is_rejected(papers):
    with pytest.raises(SystemExit):
        main(["cifar"])


def test_killed_batch_resumes_without_redoing_finished_notebooks(papers, tmp_path):
    (papers / "02_fail.ipynb").unlink()
    write_notebook(papers / "03_ok.ipynb", "import time\ntime.sleep(30)")
    env = dict(os.environ)
    command = [sys.executable, "-m", "shared.run", "ciln"]
    proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = tmp_path / "runs" / "smoke" / "manifest.json"
    deadline = time.time() + 120
    while time.time() < deadline and not (path.exists() and "ciln/01_ok.ipynb" in path.read_text()):
        time.sleep(0.2)
    time.sleep(2)  # the slow notebook is running now
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = manifest(tmp_path)
    assert list(first) == ["ciln/01_ok.ipynb"] and first["ciln/01_ok.ipynb"]["status"] == "ok"

    write_notebook(papers / "03_ok.ipynb", OK)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 up to date, 1 to run" in done.stdout
    second = manifest(tmp_path)
    assert second["ciln/01_ok.ipynb"] == first["ciln/01_ok.ipynb"]
    assert second["ciln/03_ok.ipynb"]["status"] == "ok"


def test_full_profile_without_data_stops_before_any_notebook_with_the_clear_message(tmp_path, monkeypatch, capsys):
    """The real CILN notebooks in the full profile, with an empty data folder: the preflight names every missing
    file; with --no-preflight the notebook itself fails with the same message."""
    monkeypatch.setenv("NOISY_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("NOISY_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.delenv("NOISY_PAPERS_ROOT", raising=False)
    monkeypatch.setattr("shared.preflight.cuda_available", lambda: False)
    assert main(["ciln", "--profile", "full", "--only", "0[16]_*", "-p", "device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "nothing was run" in err and "no CUDA GPU is visible" in err
    for missing in ("CIFAR-10 not found", "no-data/cifar-10-batches-py", "CIFAR-10H not found", "PL-IDN tier L",
                    "pretrained weights of voter 'deit3_small'", "TabPFN v1 checkpoint"):
        assert missing in err
    assert "needed by ciln/06_tv.ipynb)" in err and not (tmp_path / "runs" / "full" / "manifest.json").exists()

    assert main(["ciln", "--check-env", "--profile", "full", "--only", "01_*"]) == 1
    assert "CIFAR-10 not found" in capsys.readouterr().out

    assert main(["ciln", "--profile", "full", "--only", "01_benchmark", "--no-preflight"]) == 1
    record = manifest_of(tmp_path / "runs" / "full")["ciln/01_benchmark.ipynb"]
    assert record["status"] == "failed"
    assert "DataNotFoundError: CIFAR-10 not found" in record["error"] and "no-data/cifar-10-batches-py" in record["error"]


def test_relative_data_dir_is_resolved_against_the_working_folder(papers, tmp_path, monkeypatch):
    write_notebook(papers / "01_ok.ipynb", 'import pathlib\npathlib.Path(out_dir, "where.txt").write_text(str(data_dir))')
    (papers / "02_fail.ipynb").unlink()
    (papers / "03_ok.ipynb").unlink()
    monkeypatch.chdir(tmp_path)
    assert main(["ciln", "-p", "data_dir", "my-data"]) == 0
    assert (tmp_path / "runs/smoke/ciln/01_ok/where.txt").read_text() == str(tmp_path / "my-data")


def manifest_of(folder):
    return json.loads((folder / "manifest.json").read_text())["notebooks"]
