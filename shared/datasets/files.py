"""Reading data files as users really have them.

Released files come with quirks that a plain ``open`` or ``np.load`` turns into confusing errors or, worse,
into wrong answers. Every loader in this project reads its files through these helpers:

* **UTF-8 byte-order mark.** Spreadsheet exports often start with ``EF BB BF``; read as plain UTF-8 the first
  column name becomes ``"\\ufeffid"`` and "missing columns ['id']" follows. Text is decoded as ``utf-8-sig``,
  which drops the mark where present and reads files without one unchanged.
* **git-LFS pointer files.** A repository cloned without git-lfs holds ~130-byte text files beginning
  ``version https://git-lfs.github.com/spec/v1`` where the ``.mat``, ``.npy``, ``.pkl`` or ``.csv`` data
  should be. They are recognised and reported as such, with the fix (``git lfs pull``).
* **Binary bytes where text is expected** (a wrong file, a truncated download) give a DataFormatError naming
  the path instead of a ``UnicodeDecodeError`` from deep inside a parser.

    from shared.datasets.files import open_text, read_csv, read_json, load_npy
    with open_text(path, newline="") as f:       # BOM-tolerant; clear errors for LFS pointers and binary data
        rows = list(csv.reader(f))
    frame = read_csv(path, sep="\\t")             # pandas, same checks
    counts = load_npy(path, "CIFAR-10H counts")   # refuses pickles, LFS pointers and non-.npy bytes
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

import numpy as np
import pandas as pd

from shared.errors import DataFormatError

LFS_SIGNATURE = b"version https://git-lfs.github.com/spec/"
#: git-LFS pointers are at most a few hundred bytes (spec: "pointer files must be < 1024 bytes").
LFS_POINTER_MAX_BYTES = 1024
NPY_MAGIC = b"\x93NUMPY"


def is_lfs_pointer(path) -> bool:
    """True if ``path`` is a git-LFS pointer file (the placeholder git leaves when git-lfs did not fetch)."""
    path = Path(path)
    try:
        if path.stat().st_size > LFS_POINTER_MAX_BYTES:
            return False
        with open(path, "rb") as f:
            head = f.read(len(LFS_SIGNATURE) + 3)
    except OSError:
        return False
    return head.removeprefix(b"\xef\xbb\xbf").startswith(LFS_SIGNATURE)


def lfs_pointer_error(path) -> DataFormatError:
    """The error for a git-LFS pointer found where data was expected."""
    return DataFormatError(
        f"{path} is a git-LFS pointer, not the data: the repository it came from was cloned without git-lfs. "
        "Run `git lfs install && git lfs pull` in that repository (or download the file itself), then retry."
    )


def check_not_lfs_pointer(path) -> Path:
    """``path`` as a Path; raises DataFormatError if it is a git-LFS pointer."""
    path = Path(path)
    if is_lfs_pointer(path):
        raise lfs_pointer_error(path)
    return path


def _not_text_error(path, error: UnicodeDecodeError) -> DataFormatError:
    return DataFormatError(
        f"{path} is not UTF-8 text (undecodable byte at offset {error.start}): is it the right file, "
        "or a truncated or binary download? Replace it with the released text file."
    )


@contextmanager
def open_text(path, *, newline: str | None = None) -> Iterator[TextIO]:
    """Open a text file for reading as UTF-8, dropping a leading byte-order mark.

    A git-LFS pointer raises DataFormatError before anything is read; bytes that are not UTF-8, met while
    the caller reads, raise DataFormatError naming the path. ``newline`` is passed to ``open`` (``""`` for
    the csv module).
    """
    path = check_not_lfs_pointer(path)
    try:
        with open(path, encoding="utf-8-sig", newline=newline) as f:
            yield f
    except UnicodeDecodeError as e:
        raise _not_text_error(path, e) from None


def read_text(path) -> str:
    """The whole file as text (see ``open_text``)."""
    with open_text(path) as f:
        return f.read()


def read_json(path):
    """A JSON document (BOM-tolerant); invalid JSON raises DataFormatError with the line."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{path}, line {e.lineno}: not valid JSON ({e.msg})") from None


def read_csv(path, **kwargs) -> pd.DataFrame:
    """``pandas.read_csv`` with BOM-tolerant UTF-8 and clear errors (LFS pointer, binary bytes, bad rows)."""
    path = check_not_lfs_pointer(path)
    try:
        return pd.read_csv(path, encoding="utf-8-sig", **kwargs)
    except UnicodeDecodeError as e:
        raise _not_text_error(path, e) from None
    except pd.errors.EmptyDataError:
        raise DataFormatError(f"{path} is empty; expected a table with a header row") from None
    except pd.errors.ParserError as e:
        raise DataFormatError(f"{path} is not a well-formed table: {e}") from None
    except (FileNotFoundError, PermissionError):
        raise
    except (OSError, EOFError) as e:  # a damaged .gz / .bz2 / .zip
        raise DataFormatError(f"{path} cannot be decompressed ({e}): a damaged or truncated download?") from None


def load_npy(path, what: str = "array") -> np.ndarray:
    """A ``.npy`` file without pickles; an LFS pointer, a pickle or other bytes raise DataFormatError."""
    path = check_not_lfs_pointer(path)
    with open(path, "rb") as f:
        magic = f.read(len(NPY_MAGIC))
    if magic != NPY_MAGIC:
        kind = "an .npz archive" if magic.startswith(b"PK") else "not a .npy file (no NUMPY header)"
        raise DataFormatError(f"{path} is {kind}; expected the {what} as one .npy array")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise DataFormatError(f"{path} is not a readable .npy file of the {what} ({e}); it may be truncated, "
                              "or hold Python objects (pickles are refused)") from None
