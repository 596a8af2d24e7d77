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
