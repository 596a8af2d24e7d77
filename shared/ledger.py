"""The run ledger: one JSON record per notebook, each written atomically, and a lock per notebook.

    runs/<profile>/records/<paper>/<notebook stem>.json    the notebook's last record (status, parameters, ...)
    runs/<profile>/records/<paper>/<notebook stem>.lock    held while the notebook executes, by any runner
    runs/<profile>/manifest.json                           a summary of every record, rebuilt from records/

A record is replaced only by a complete new one (a temporary file, flushed to disk, renamed over it), and each
notebook has its own file, so two runners on the same folder, a runner killed mid-write or a Slurm job
finishing on another node can never lose another notebook's record (DomainBed's sweeps keep one folder per
run for the same reason). One file per record was chosen over SQLite in WAL mode because WAL needs shared
memory between the writers, which network filesystems (where a cluster's jobs write) do not provide.

``manifest.json`` is derived: it is rewritten from the records after each notebook and may be deleted or
damaged without loss. A damaged record (not JSON, not UTF-8, not a record of this notebook) is reported with its
path, kept beside as ``<stem>.json.damaged`` for reading, and its notebook runs again.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from shared.locks import file_lock

RECORDS = "records"
REQUIRED_FIELDS = ("key", "status", "fingerprint", "parameters")


def write_json_atomic(path: Path, data) -> None:
    """Write ``data`` as JSON to ``path`` through a flushed temporary file renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Ledger:
    """The records of one output root (``runs/<profile>`` or ``--out``), keyed ``<paper>/<notebook>.ipynb``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def record_path(self, key: str) -> Path:
        paper, notebook = key.split("/")
        return self.root / RECORDS / paper / f"{Path(notebook).stem}.json"

    def write(self, key: str, record: dict) -> None:
        """Store ``record`` as the notebook's record (atomically), with ``key`` in it."""
        write_json_atomic(self.record_path(key), {**record, "key": key})

    def read(self, key: str) -> dict | None:
        """The notebook's record, or None if it has none or it is damaged (then reported and set aside)."""
        path = self.record_path(key)
        if not path.exists():
            return None
        problem = None
        try:
            record = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            problem = f"not a JSON record ({e})"
        else:
            if not isinstance(record, dict):
                problem = f"holds a JSON {type(record).__name__}, not a record"
            elif missing := [f for f in REQUIRED_FIELDS if f not in record]:
                problem = f"lacks {', '.join(missing)}"
            elif record["key"] != key:
                problem = f"is the record of {record['key']!r}, not of {key!r}"
        if problem is None:
            return record
        aside = path.with_name(path.name + ".damaged")
        try:
            os.replace(path, aside)
        except FileNotFoundError:  # another runner set it aside first
            return None
        print(f"warning: the run record {path} {problem}; moved to {aside.name} and {key} will run again",
              file=sys.stderr)
        return None

    def keys(self) -> list[str]:
        """The keys of every record file present (damaged ones included), sorted."""
        folder = self.root / RECORDS
        return sorted(f"{p.parent.name}/{p.stem}.ipynb" for p in folder.glob("*/*.json")) if folder.is_dir() else []

    def records(self) -> dict[str, dict]:
        """Every readable record, keyed by notebook; damaged ones are reported and left out."""
        return {key: record for key in self.keys() if (record := self.read(key)) is not None}

    def write_manifest(self) -> Path:
        """Rebuild ``manifest.json`` (a summary for people and tools; the records are the truth)."""
        path = self.root / "manifest.json"
        write_json_atomic(path, {"notebooks": self.records(), "note": f"rebuilt from {RECORDS}/ after each notebook"})
        return path

    @contextmanager
    def lock(self, key: str, *, wait: bool = True) -> Iterator[bool]:
        """Hold the notebook's lock while the block runs; yields False if ``wait=False`` and another process holds it.

        The lock is an ``flock`` on ``<stem>.lock``, released by the kernel if its holder dies, so a killed
        runner never leaves a notebook locked. The file names the holder (host, pid, start) for messages.
        """
        path = self.record_path(key).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(path, wait=wait) as held:
            if held:  # the lock is on the file, not on this content: rewriting it keeps the lock
                path.write_text(f"{platform.node()} pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
            yield held

    def holder(self, key: str) -> str:
        """Who holds (or last held) the notebook's lock, as written in the lock file."""
        path = self.record_path(key).with_suffix(".lock")
        return path.read_text().strip() if path.exists() else "unknown"
