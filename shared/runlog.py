"""The runs a notebook touched: one line per run, so the cost model can be checked against what really ran.

A *run* is one unit of expensive work with an identity: a cached artifact (``shared.cache.ArtifactCache``: a
trained model, a set of votes, a fine-tuning sweep's probabilities) or a sweep's run folder. Every time code asks
for one, it is logged here as built (the work was done now, taking ``seconds``) or loaded (found finished: in the
cache, or a run folder marked done). The batch runner (``shared.notebook_job``) points ``$NOISY_RUN_LOG`` at a file
in the notebook's output folder before its kernel starts; the kernel and every worker process it spawns inherit
the variable and append to the same file (one ``write`` of one short line with ``O_APPEND``: lines from
concurrent processes do not interleave). Without the variable nothing is written.

    log_run("ciln-voter", key, built=True, seconds=12.5)
    summarise("runs.jsonl")   # {"ciln-voter": {"runs": 4, "built": 1, "loaded": 3, "build_s": 12.5}}

``shared.cost`` predicts, per notebook and kind, the number of distinct runs (``runs`` above); the tests compare
the two on the smoke and rehearsal profiles.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "NOISY_RUN_LOG"
FILENAME = "runs.jsonl"


def log_run(kind: str, key: str, *, built: bool, seconds: float = 0.0) -> None:
    """Append ``{"kind", "key", "built", "seconds", "pid"}`` to ``$NOISY_RUN_LOG`` (nothing if it is unset)."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"kind": kind, "key": key, "built": bool(built), "seconds": round(float(seconds), 3),
                       "pid": os.getpid()}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:  # the log is a measurement: a missing folder must not fail the run it measures
        return
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_log(path: str | os.PathLike) -> list[dict]:
    """The log's entries in order; a torn last line (a process killed mid-write) is skipped."""
    entries = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and {"kind", "key", "built"} <= entry.keys():
            entries.append(entry)
    return entries


def summarise(path: str | os.PathLike) -> dict[str, dict]:
    """Per kind: ``runs`` (distinct keys), ``built`` (distinct keys built at least once), ``loaded`` (the rest)
    and ``build_s`` (seconds spent building), sorted by kind."""
    keys: dict[str, set] = {}
    built: dict[str, set] = {}
    seconds: dict[str, float] = {}
    for entry in read_log(path):
        kind = entry["kind"]
        keys.setdefault(kind, set()).add(entry["key"])
        if entry["built"]:
            built.setdefault(kind, set()).add(entry["key"])
            seconds[kind] = seconds.get(kind, 0.0) + float(entry.get("seconds", 0.0))
    return {kind: {"runs": len(keys[kind]), "built": len(built.get(kind, ())),
                   "loaded": len(keys[kind] - built.get(kind, set())), "build_s": round(seconds.get(kind, 0.0), 2)}
            for kind in sorted(keys)}
