"""Shared fixtures: every test gets its own artifact cache and run folder unless it asks otherwise."""
import os

import numpy as np
import pytest

os.environ.setdefault("NOISY_PROGRESS", "0")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("NOISY_CACHE_DIR", str(path))
    return path


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch intra-op thread for a module: tiny models gain nothing from more, and on a busy 2-core machine
    OpenMP threads of tiny ops spin-wait on each other (several times slower). Use with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------- Slurm
@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A single-node Slurm cluster with accounting for the whole session (``tests/slurm_cluster.py``), stopped by
    PID at the end; tests using it skip, with the reason and the daemons' logs, where it cannot start. Its
    ``.env`` (os.environ + SLURM_CONF) and ``.conf_path`` are for subprocesses, e.g. ``python -m shared.run``."""
    from slurm_cluster import ClusterUnavailable, start_cluster

    try:
        cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    except ClusterUnavailable as error:
        pytest.skip(f"no Slurm cluster here: {error}")
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm(slurm_cluster, monkeypatch):
    """The session's Slurm cluster, with SLURM_CONF set for this test (submitit calls sbatch, sacct, scancel)."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf_path))
    return slurm_cluster


# ---------------------------------------------------------------------------------------------- signals
def pytest_configure(config):
    """A shell without job control starts a background command (``make test > log &``) with SIGINT ignored, and an
    ignored signal stays ignored across exec: every subprocess the tests start would then ignore Ctrl-C, and the
    Ctrl-C tests of the runner and the executor would hang. Give this process (and so its children) Python's
    default handler before anything starts."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# ---------------------------------------------------------------------------------------------- rehearsal
def pytest_addoption(parser):
    parser.addoption("--rehearsal", action="store_true",
                     help="run every notebook of every paper in the full profile on rehearsal data (tests marked "
                          "rehearsal; make rehearse-ci, to join CI once timed)")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``rehearsal`` run only with ``--rehearsal``: they take about ten minutes, so ``make test`` and
    ``make unit`` leave them to ``make rehearse-ci``."""
    if config.getoption("--rehearsal"):
        return
    skip = pytest.mark.skip(reason="the full-profile rehearsal runs with --rehearsal (make rehearse-ci)")
    for item in items:
        if "rehearsal" in item.keywords:
            item.add_marker(skip)
