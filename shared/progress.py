"""Progress bars for long work (text tqdm on stderr: live in JupyterLab and terminals, hidden in the book).

Set ``NOISY_PROGRESS=0`` to silence them.
"""
from __future__ import annotations

import os

from tqdm.std import tqdm


def progress(iterable=None, *, desc: str | None = None, total: int | None = None, leave: bool = False, **kwargs):
    """``tqdm`` with this project's defaults (updates at most once a second)."""
    disable = os.environ.get("NOISY_PROGRESS", "1") == "0"
    return tqdm(iterable, desc=desc, total=total, leave=leave, mininterval=1.0, disable=disable, **kwargs)
