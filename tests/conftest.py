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
