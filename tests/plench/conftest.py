"""A small partial-label problem for algorithm tests: digits with FPS(0.3) candidate sets and image views."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from plench.algorithms import Batch


class DigitsPLL:
    """600 digits rows: tabular x (n, 64) z-scored, images (n, 1, 8, 8), candidates S (n, 10), true labels y."""

    def __init__(self, n: int = 600, p: float = 0.3, seed: int = 0):
        X, y = load_digits(return_X_y=True)
        X, y = X[:n].astype(np.float32), y[:n]
        rng = np.random.default_rng(seed)
        S = (rng.random((n, 10)) < p).astype(np.float32)
        S[np.arange(n), y] = 1.0
        self.x = torch.tensor((X - X.mean(0)) / (X.std(0) + 1e-6))
        self.images = torch.tensor(X / 16.0).reshape(n, 1, 8, 8)
        self.S, self.y = torch.tensor(S), torch.tensor(y)
        self.n, self.q = n, 10

    def batch(self, idx, *, image: bool = False, generator: torch.Generator | None = None) -> Batch:
        """A Batch of rows ``idx``; image views are the original plus light noise (tests only need distinct views)."""
        idx = torch.as_tensor(idx)
        x = (self.images if image else self.x)[idx]
        noisy = lambda: x + 0.05 * torch.randn(x.shape, generator=generator)  # noqa: E731
        return Batch(x, noisy(), noisy(), noisy(), self.S[idx], self.y[idx], idx)

    def batches(self, steps: int, batch_size: int = 64, *, image: bool = False, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            yield self.batch(torch.randperm(self.n, generator=g)[:batch_size], image=image, generator=g)


@pytest.fixture(scope="session")
def digits_pll() -> DigitsPLL:
    return DigitsPLL()


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Plench's pages keep their sweep runs in the artifact cache (``plench.store``): each test gets its own, so no
    test reads runs another one trained."""
    monkeypatch.setenv("NOISY_CACHE_DIR", str(tmp_path / "cache"))
