"""Where things live: the repository, run outputs, the artifact cache and user data.

Environment variables override the defaults:
``NOISY_RUNS_DIR`` (executed notebooks and their outputs), ``NOISY_CACHE_DIR`` (artifact cache),
``NOISY_DATA_DIR`` (real datasets for the full profile) and ``NOISY_PAPERS_ROOT`` (the folder holding the
paper folders; the repository by default, another folder in the runner's tests).
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PAPERS = ("ciln", "benchmark_n", "lnlfn", "plench", "noisywikihow")


def paper_dir(paper: str) -> Path:
    from shared.errors import unknown_choice

    if paper not in PAPERS:
        raise unknown_choice("paper", paper, PAPERS)
    return Path(os.environ.get("NOISY_PAPERS_ROOT", REPO_ROOT)) / paper


def runs_root() -> Path:
    return Path(os.environ.get("NOISY_RUNS_DIR", REPO_ROOT / "runs"))


def runs_dir(profile: str) -> Path:
    """Executed notebooks, their output folders and the manifest of one profile."""
    return runs_root() / profile


def cache_dir() -> Path:
    return Path(os.environ.get("NOISY_CACHE_DIR", REPO_ROOT / ".cache" / "artifacts"))


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The root of the real datasets: ``explicit``, else ``$NOISY_DATA_DIR``, else ``<repo>/data``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    return Path(os.environ.get("NOISY_DATA_DIR", REPO_ROOT / "data")).expanduser()


def notebook_out_dir(paper: str, notebook: str, out_dir: str | os.PathLike | None = None) -> Path:
    """Folder for a notebook's figures and tables.

    The batch runner passes ``out_dir``; an interactive run writes to ``runs/interactive/<paper>/<notebook>``.
    """
    path = Path(out_dir) if out_dir is not None else runs_root() / "interactive" / paper / Path(notebook).stem
    path.mkdir(parents=True, exist_ok=True)
    return path
