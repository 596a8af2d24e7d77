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
    executed = (tmp_path / "runs/smoke/ciln/01_ok.ipynb").read_text()  # executed through a staging folder
    assert ".staging" not in executed and str(tmp_path / "runs/smoke/ciln/01_ok") in executed
    assert (tmp_path / "runs/smoke/ciln/02_fail.failed.ipynb").exists()  # the executed copy shows the error
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


# ---------------------------------------------------------------------------------------------- faults
SLOW = ('import os, pathlib, time\npathlib.Path(out_dir, "pid").write_text(str(os.getpid()))\n'
        'pathlib.Path(out_dir).parents[4].joinpath("started.log").open("a").write(pathlib.Path(out_dir).name + "\\n")\n'
        'time.sleep(float(greeting) if greeting.replace(".", "").isdigit() else 60)')


def runner(args, **kw):
    """The runner as a user starts it: its own process, in a session of its own (a terminal's process group)."""
    return subprocess.Popen([sys.executable, "-m", "shared.run", *args], start_new_session=True, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def wait_for(condition, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def staged_pid(tmp_path, stem):
    path = tmp_path / "runs/smoke/ciln/.staging" / stem / "pid"
    return int(path.read_text()) if path.exists() and path.read_text() else None


def alive(pid):
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ctrl_c_stops_at_once_keeps_good_results_and_exits_130(papers, tmp_path):
    (papers / "02_fail.ipynb").unlink()
    assert main(["ciln"]) == 0
    good = (tmp_path / "runs/smoke/ciln/03_ok.ipynb").read_bytes()
    write_notebook(papers / "01_ok.ipynb", OK + "\n" + SLOW)
    write_notebook(papers / "03_ok.ipynb", OK + "\n" + SLOW)
    proc = runner(["ciln", "--jobs", "1"])
    wait_for(lambda: staged_pid(tmp_path, "01_ok"))
    kernel = staged_pid(tmp_path, "01_ok")
    start = time.time()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.time() - start < 15 and "interrupted" in err
    wait_for(lambda: not alive(kernel), timeout=10)
    records = manifest(tmp_path)
    # nothing new started after Ctrl-C; the good results and their records are in place
    assert (tmp_path / "started.log").read_text().split() == ["01_ok"]
    assert (tmp_path / "runs/smoke/ciln/03_ok.ipynb").read_bytes() == good
    assert {k: r["status"] for k, r in records.items()} == {"ciln/01_ok.ipynb": "ok", "ciln/03_ok.ipynb": "ok"}


def test_sigkill_of_the_runner_leaves_no_worker_or_kernel_and_a_rerun_resumes(papers, tmp_path):
    import psutil

    (papers / "02_fail.ipynb").unlink()
    write_notebook(papers / "03_ok.ipynb", SLOW)
    proc = runner(["ciln", "--jobs", "2"])
    wait_for(lambda: staged_pid(tmp_path, "03_ok") and (tmp_path / "runs/smoke/records/ciln/01_ok.json").exists())
    kernel = staged_pid(tmp_path, "03_ok")
    workers = psutil.Process(proc.pid).children()
    os.kill(proc.pid, signal.SIGKILL)  # the runner only: its workers and their kernels must follow
    proc.wait()
    wait_for(lambda: not alive(kernel) and not any(alive(w.pid) for w in workers), timeout=15)
    write_notebook(papers / "03_ok.ipynb", OK)
    done = subprocess.run([sys.executable, "-m", "shared.run", "ciln"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 up to date, 1 to run" in done.stdout and manifest(tmp_path)["ciln/03_ok.ipynb"]["status"] == "ok"


@pytest.mark.parametrize("damage", [b"", b'{"key": "ciln/01_ok.ipynb", "stat', b"[]", b"null", b"\xff\xfe{}",
                                    b'{"key": "ciln/03_ok.ipynb", "status": "ok", "fingerprint": "x", "parameters": {}}'])
def test_a_damaged_record_is_reported_with_its_path_and_rerun_and_no_other_record_is_lost(papers, tmp_path, capsys,
                                                                                          damage):
    assert main(["ciln"]) == 1
    before = manifest(tmp_path)
    record = tmp_path / "runs/smoke/records/ciln/01_ok.json"
    record.write_bytes(damage)
    (tmp_path / "runs/smoke/manifest.json").write_bytes(b"\xff garbage")  # the summary is rebuilt, never trusted
    capsys.readouterr()
    assert main(["ciln"]) == 1
    err = capsys.readouterr().err
    assert str(record) in err and "will run again" in err
    after = manifest(tmp_path)
    assert after["ciln/01_ok.ipynb"]["status"] == "ok" and after["ciln/01_ok.ipynb"]["started"] > before["ciln/01_ok.ipynb"]["started"]
    assert after["ciln/03_ok.ipynb"] == before["ciln/03_ok.ipynb"]  # untouched, not re-run
    assert (record.parent / "01_ok.json.damaged").read_bytes() == damage


def test_two_runners_on_one_folder_lose_no_record_and_run_each_notebook_once(papers, tmp_path):
    (papers / "02_fail.ipynb").unlink()
    for stem in ("01_ok", "03_ok", "04_ok", "05_ok"):
        write_notebook(papers / f"{stem}.ipynb", OK + "\n" + SLOW.replace("else 60", "else 2"))
    first, second = runner(["ciln"]), runner(["ciln", "--jobs", "2"])
    for proc in (first, second):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert sorted((tmp_path / "started.log").read_text().split()) == ["01_ok", "03_ok", "04_ok", "05_ok"]  # once each
    records = manifest(tmp_path)
    assert sorted(records) == [f"ciln/0{i}_ok.ipynb" for i in (1, 3, 4, 5)]
    assert {r["status"] for r in records.values()} == {"ok"}


def test_a_failed_rerun_never_replaces_a_good_result(papers, tmp_path, capsys):
    (papers / "02_fail.ipynb").unlink()
    write_notebook(papers / "01_ok.ipynb", OK + '\nassert greeting != "boom", "boom"')
    assert main(["ciln", "--only", "01_ok"]) == 0
    good_nb = (tmp_path / "runs/smoke/ciln/01_ok.ipynb").read_bytes()
    good = manifest(tmp_path)["ciln/01_ok.ipynb"]
    assert main(["ciln", "--only", "01_ok", "-p", "greeting", "boom"]) == 1
    record = manifest(tmp_path)["ciln/01_ok.ipynb"]
    assert (tmp_path / "runs/smoke/ciln/01_ok.ipynb").read_bytes() == good_nb
    assert (tmp_path / "runs/smoke/ciln/01_ok/hello.txt").read_text() == "hi smoke"
    assert {k: v for k, v in record.items() if k != "last_failure"} == good
    assert "AssertionError: boom" in record["last_failure"]["error"]
    failed = tmp_path / "runs/smoke" / record["last_failure"]["failed_notebook"]
    assert failed.name == "01_ok.failed.ipynb" and "boom" in failed.read_text()
    assert (tmp_path / "runs/smoke/ciln/01_ok.failed/hello.txt").read_text() == "boom smoke"
    assert "a good result from an earlier run is kept" in capsys.readouterr().err
    # a later success clears the failed copy
    assert main(["ciln", "--only", "01_ok", "-p", "greeting", "again"]) == 0
    assert not failed.exists() and "last_failure" not in manifest(tmp_path)["ciln/01_ok.ipynb"]


@pytest.mark.parametrize("args, message", [
    (["-p", "sead", "1"], "unknown parameter 'sead' given with -p"),
    (["-p", "greting", "x"], "did you mean 'greeting'?"),
    (["-p", "out_dir", "x"], "use --out"),
    (["--only", "9*"], "--only '9*' matches no notebook of ciln; the notebooks are: ciln/01_ok, ciln/02_fail"),
    (["-f", "{file}", "notebooks: 5"], "'notebooks:' must map notebook stems"),
    (["-f", "{file}", "notebooks: {01_ok: [1, 2]}"], "notebooks: 01_ok: must map parameter names"),
    (["-f", "{file}", "notebooks: {01_okk: {greeting: x}}"], "'notebooks: 01_okk' in a -f file names no notebook (did you mean '01_ok'?)"),
    (["-f", "{file}", "notebooks: {01_ok: {sead: 1}}"], "unknown parameter 'sead' under 'notebooks: 01_ok'"),
    (["-f", "{file}", "seed: 1"], "unknown parameter 'seed' in a -f file"),
    (["-f", "{file}", "[1, 2]"], "expected a mapping of parameter names to values, got list"),
    (["-p", "settings", "{not_a_setting: 1}"], "unknown setting(s) not_a_setting for ciln/01_ok; valid settings: n"),
    (["-p", "settings", "5"], "settings must be a mapping"),
    (["--threads", "0"], "--threads must be at least 1, got 0"),
    (["--jobs", "0"], "jobs must be a whole number >= 1, got 0"),
])
def test_unknown_names_are_errors_before_any_kernel_starts(papers, tmp_path, capsys, args, message):
    (papers.parent.parent / "papers/ciln/profiles.yaml").write_text(
        "".join(f"{s}: {{smoke: {{n: 1}}}}\n" for s in ("01_ok", "02_fail", "03_ok")))
    if "{file}" in args:
        path = tmp_path / "p.yaml"
        path.write_text(args[2])
        args = [args[0], str(path)]
    assert main(["ciln", *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_paths_in_parameters_are_resolved_against_the_working_folder(tmp_path):
    from shared.parameters import absolute_paths

    params = absolute_paths({"data_dir": "data", "device": "cuda", "settings": {
        "release_dirs": {"CIFAR10": "rel/cifar", "MNIST": "/abs/mnist"}, "pools": {"CIFAR10": ["resnet20"]}}}, tmp_path)
    assert params == {"data_dir": str(tmp_path / "data"), "device": "cuda", "settings": {
        "release_dirs": {"CIFAR10": str(tmp_path / "rel/cifar"), "MNIST": "/abs/mnist"},
        "pools": {"CIFAR10": ["resnet20"]}}}


THREADS_PROBE = ('import json, pathlib, numpy as np, torch\nfrom threadpoolctl import threadpool_info\n'
                 'x = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)\n'
                 'pathlib.Path(out_dir, "probe.json").write_text(json.dumps({"torch": torch.get_num_threads(), '
                 '"blas": sorted({i["num_threads"] for i in threadpool_info()}), '
                 '"sum": float(torch.from_numpy(x @ x).sum())}))')


def test_results_do_not_depend_on_jobs(papers, tmp_path):
    (papers / "02_fail.ipynb").unlink()
    write_notebook(papers / "01_ok.ipynb", THREADS_PROBE)
    write_notebook(papers / "03_ok.ipynb", THREADS_PROBE)
    outputs = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        assert main(["ciln", "--jobs", str(jobs), "--out", str(out)]) == 0
        outputs[jobs] = [(out / f"ciln/{s}/probe.json").read_bytes() for s in ("01_ok", "03_ok")]
        assert {r["threads"] for r in manifest_of(out).values()} == {1}
    assert outputs[1] == outputs[2]
    assert json.loads(outputs[1][0]) | {"sum": 0} == {"torch": 1, "blas": [1], "sum": 0}


def test_fingerprint_follows_the_code_a_notebook_imports_and_the_data_it_names():
    from shared.paths import REPO_ROOT
    from shared.run import dependencies

    deps = {str(p.relative_to(REPO_ROOT)) for p in dependencies(REPO_ROOT / "lnlfn/04_mturk_reanalysis.ipynb")}
    assert {"lnlfn/mturk_report.py", "shared/report.py", "shared/__init__.py", "constraints.txt"} <= deps
    assert "lnlfn/reported/mturk.csv" in deps and "lnlfn/profiles.yaml" in deps
    assert not {"shared/book.py", "shared/run.py", "lnlfn/reported/table10.csv"} & deps
    assert not any(d.startswith(("ciln/", "plench/")) for d in deps)


def test_a_notebook_that_left_a_slurm_sweep_running_is_pending_and_runs_again(papers, tmp_path, capsys):
    (papers / "02_fail.ipynb").unlink()
    write_notebook(papers / "03_ok.ipynb", 'import pathlib\nfrom shared.sweep import SweepPending\n'
                   'raise SweepPending(2, ["7", "8"], pathlib.Path("/sweeps/.submitit"))')
    assert main(["ciln"]) == 3
    err = capsys.readouterr().err
    assert "1 notebook(s) submitted Slurm sweeps and did not wait" in err and "ciln/03_ok.ipynb" in err
    assert manifest(tmp_path)["ciln/03_ok.ipynb"]["status"] == "pending"
    capsys.readouterr()
    assert main(["ciln", "--list"]) == 0
    assert "to run      ciln/03_ok.ipynb" in capsys.readouterr().out  # the next run collects it


def test_papers_take_turns_in_the_submission_order():
    from shared.run import interleaved

    jobs = [{"paper": p, "key": f"{p}/{n}"} for p, n in
            [("ciln", "01"), ("ciln", "02"), ("ciln", "03"), ("lnlfn", "00"), ("plench", "00"), ("plench", "01")]]
    order = [j["key"] for j in interleaved(jobs)]
    assert order == ["ciln/01", "lnlfn/00", "plench/00", "ciln/02", "plench/01", "ciln/03"]
    assert sorted(order) == sorted(j["key"] for j in jobs) and interleaved([]) == []


def test_later_parameter_files_change_only_the_settings_they_name(tmp_path):
    from shared.parameters import load_parameter_files

    base, small = tmp_path / "base.yaml", tmp_path / "small.yaml"
    base.write_text("device: auto\nsettings: {a: 1, b: 2}\nnotebooks:\n  01_x: {settings: {epochs: 5, pools: [p, q]}, "
                    "device: cpu}\n  02_y: {settings: {epochs: 3}}\n")
    small.write_text("settings: {b: 20}\nnotebooks:\n  01_x: {settings: {epochs: 1}}\n")
    common, per_notebook = load_parameter_files([str(base), str(small)])
    assert common == {"device": "auto", "settings": {"a": 1, "b": 20}}
    assert per_notebook == {"01_x": {"settings": {"epochs": 1, "pools": ["p", "q"]}, "device": "cpu"},
                            "02_y": {"settings": {"epochs": 3}}}
    assert load_parameter_files([str(small), str(base)])[1]["01_x"]["settings"] == {"epochs": 5, "pools": ["p", "q"]}


def test_the_runners_kernels_are_shut_down_without_a_sigint():
    """jupyter_client sends SIGINT before every shutdown; a kernel busy with a message when it lands logs
    "KeyboardInterrupt caught in kernel." as an ERROR line in a clean run. The runner's kernel manager shuts down
    with the shutdown request alone, and still interrupts a kernel when asked outside a shutdown (cell timeouts)."""
    import asyncio

    from shared.notebook_job import ipc_kernel_manager

    async def signals_sent() -> tuple[list, list]:
        manager = ipc_kernel_manager()(kernel_name="python3")
        sent = []
        original = manager._async_signal_kernel

        async def record(signum):
            sent.append(signum)
            await original(signum)

        manager._async_signal_kernel = record
        await manager.start_kernel()
        try:
            await manager._async_interrupt_kernel()
            asked = list(sent)
        finally:
            await manager.shutdown_kernel()
        return asked, sent[len(asked):]

    asked, at_shutdown = asyncio.run(signals_sent())
    assert asked == [signal.SIGINT] and signal.SIGINT not in at_shutdown
