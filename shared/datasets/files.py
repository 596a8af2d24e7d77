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
* **Pickles.** Unpickling calls whatever globals the file names, so a crafted file runs code. Pickled data
  files (CIFAR-10's batches, PLCIFAR10's annotations) are read by ``load_pickle``, which builds plain
  containers and numpy arrays only and refuses any other global before looking it up.

    from shared.datasets.files import open_text, read_csv, read_json, load_npy
    with open_text(path, newline="") as f:       # BOM-tolerant; clear errors for LFS pointers and binary data
        rows = list(csv.reader(f))
    frame = read_csv(path, sep="\\t")             # pandas, same checks
    counts = load_npy(path, "CIFAR-10H counts")   # refuses pickles, LFS pointers and non-.npy bytes
    batch = load_pickle(path, "CIFAR-10 batch", encoding="bytes")   # dicts, lists, numbers, numpy arrays only
"""
from __future__ import annotations

import json
import pickle
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
#: The globals a pickle of numpy data names: arrays, dtypes and scalars, as numpy 1.x and 2.x pickle them
#: (``_frombuffer``: arrays under pickle protocol 5).
NUMPY_PICKLE_GLOBALS = frozenset(
    {(f"numpy.{core}.multiarray", name) for core in ("core", "_core") for name in ("_reconstruct", "scalar")}
    | {(f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")}
    | {("numpy", "ndarray"), ("numpy", "dtype")}
)


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


class _RefusedGlobal(Exception):
    """A pickle names a global outside the allowed ones (message: ``module.name``)."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds what a pickle holds, looking up only the globals in ``allowed``."""

    def __init__(self, file, allowed, **kwargs):
        super().__init__(file, **kwargs)
        self.allowed = allowed

    def find_class(self, module, name):
        if (module, name) in self.allowed:
            return super().find_class(module, name)
        raise _RefusedGlobal(f"{module}.{name}")


def load_pickle(path, what: str = "pickle", *, allowed=NUMPY_PICKLE_GLOBALS, encoding: str = "ASCII",
                fix: str = "replace it with the released file"):
    """The data in a pickle file, unpickled without running code from the file.

    Builtin containers and scalars (dicts, lists, tuples, sets, strings, bytes, numbers) are built as usual;
    of the globals a pickle may name (classes, functions), only those in ``allowed`` (pairs ``(module, name)``;
    by default numpy arrays, dtypes and scalars) are looked up. A file naming any other global, such as a
    crafted ``os.system`` call or just an unexpected class, raises DataFormatError naming the path and the
    global, before that global is imported. A git-LFS pointer and a truncated or damaged file raise
    DataFormatError naming the path; ``fix`` ends those messages. ``encoding`` is ``pickle``'s (``"bytes"`` for
    pickles written by Python 2, such as CIFAR-10's batches).
    """
    path = check_not_lfs_pointer(path)
    try:
        with open(path, "rb") as f:
            return _PlainUnpickler(f, allowed, encoding=encoding).load()
    except _RefusedGlobal as e:
        raise DataFormatError(f"{path}: the {what} refers to {e}, which is not among the plain types it should hold; "
                              f"refusing to load it (unpickling it could run code): {fix}") from None
    except (FileNotFoundError, PermissionError):
        raise
    except Exception as e:  # noqa: BLE001  damaged pickles fail in many ways (UnpicklingError, EOFError, KeyError...)
        raise DataFormatError(f"{path} is not a readable pickle ({type(e).__name__}: {e}); it may be truncated or "
                              f"damaged: {fix}") from None
