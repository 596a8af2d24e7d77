"""Report helpers: the paper's numbers beside ours, and the paper's qualitative claims checked.

A paper's reported numbers live in ``<paper>/reported/<name>.csv`` in long form: an ``item`` column
(e.g. "Table II"), one or more key columns (e.g. ``setting``), ``metric``, ``value`` and optionally
``source`` (paper / repo) and ``note``.

    report = NotebookReport("ciln", "01_benchmark", out_dir, profile)
    report.figure(fig, "noise_rates")                          # PNG + SVG in out_dir
    table = report.compare(ours, "table1", on=["dataset"])      # paper | ours | diff
    report.claim("CILN-C noise is below CILN-S noise", holds=bool(...), detail="35/35 settings")
    report.claim("AA selects worse than CR for PRODEN", holds=None, detail="PRODEN was not run")  # "not run"
    report.finish()                                             # writes comparison.csv, claims.json, report.json

The book's scorecard collects every notebook's ``comparison.csv`` and ``claims.json``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from shared.datasets.files import read_csv
from shared.errors import ConfigError, DataFormatError
from shared.paths import notebook_out_dir, paper_dir
from shared.plotting import save_figure

REQUIRED_COLUMNS = ("item", "metric", "value")
EXTRA_COLUMNS = ("source", "note")


def reported(paper: str, name: str) -> pd.DataFrame:
    """The paper's numbers from ``<paper>/reported/<name>.csv``."""
    path = paper_dir(paper) / "reported" / f"{Path(name).stem}.csv"
    if not path.exists():
        raise ConfigError(f"no reported numbers at {path}")
    table = read_csv(path, comment="#")
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise DataFormatError(f"{path}: missing column(s) {missing}; reported CSVs need {list(REQUIRED_COLUMNS)}")
    return table


def key_columns(table: pd.DataFrame) -> list[str]:
    """The columns that identify a number: everything but item, metric, value, source and note."""
    return [c for c in table.columns if c not in REQUIRED_COLUMNS + EXTRA_COLUMNS]


def compare_with_paper(ours: pd.DataFrame, paper: pd.DataFrame, on: list[str] | None = None) -> pd.DataFrame:
    """Every paper number of the metrics we computed, beside ours: keys, metric, paper, ours, diff (ours - paper).

    ``ours`` has the key columns, ``metric`` and ``value`` (plus an optional ``ours_on`` naming the data
    it was computed on, e.g. a stand-in). Paper numbers of those metrics that we did not compute (a
    setting we did not run) show ours as NaN.
    """
    on = list(on) if on is not None else key_columns(paper)
    for col in on + ["metric", "value"]:
        if col not in ours.columns:
            raise ConfigError(f"our results need a {col!r} column to compare with the paper")
    keys = on + ["metric"]
    left = paper[paper["metric"].isin(set(ours["metric"]))].rename(columns={"value": "paper"})
    right = ours[keys + ["value"] + (["ours_on"] if "ours_on" in ours.columns else [])].rename(columns={"value": "ours"})
    for frame in (left, right):
        for col in keys:
            frame[col] = frame[col].map(_key_text).astype(str)  # an empty column would stay float and not merge
    merged = left.merge(right, on=keys, how="left")
    merged["diff"] = pd.to_numeric(merged["ours"], errors="coerce") - pd.to_numeric(merged["paper"], errors="coerce")
    front = ["item"] + [k for k in keys if k != "item"] + ["paper", "ours", "diff"]  # "item" may be a key too
    return merged[front + [c for c in merged.columns if c not in front]]


def tolerance_verdicts(table: pd.DataFrame, paper: str, notebook: str) -> list[str]:
    """Per comparison row: "yes" or "no" (|ours - paper| within the tolerance that ``<paper>/items.yaml`` states for
    the item of ``notebook`` comparing that row's ``item``), or "—" when ours is missing, the paper's value is not a
    number, or no item of this notebook states a tolerance for it."""
    from shared.catalog import load_catalog

    tolerances = {label: item.tolerance for item in load_catalog(paper).items
                  if item.notebook and Path(item.notebook).stem == notebook and item.tolerance for label in item.compares}
    paper_values = pd.to_numeric(table["paper"], errors="coerce")
    ours = pd.to_numeric(table["ours"], errors="coerce")
    verdicts = []
    for label, p, o in zip(table["item"].astype(str), paper_values, ours):
        tolerance = tolerances.get(label)
        ok = tolerance is not None and not (np.isnan(p) or np.isnan(o))
        verdicts.append(("yes" if tolerance.within([p], [o])[0] else "no") if ok else "—")
    return verdicts


def _key_text(value) -> str:
    """A key value as text that matches across CSV and code: 3, 3.0 and "3" all become "3"; NaN becomes ""."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


VERDICTS = {True: "yes", False: "no", None: "not run"}


def verdict(holds, *inputs) -> bool | None:
    """``holds`` as a claim's verdict, or None ("not run") when any number it rests on is missing (None or NaN):
    a comparison with NaN is False, which would otherwise read "does not hold"."""
    if any(v is None or (np.ndim(v) == 0 and bool(pd.isna(v))) for v in inputs):
        return None
    return bool(holds)


def claim_record(statement: str, holds: bool | None, detail: str = "") -> dict:
    """One claim as stored in ``claims.json``: ``holds`` is True, False or None (not run)."""
    if holds is not None and not isinstance(holds, (bool, np.bool_)):
        raise ConfigError(f"a claim's holds must be True, False or None (not run), got {holds!r} for {statement!r}")
    holds = None if holds is None else bool(holds)
    return {"claim": statement, "holds": holds, "verdict": VERDICTS[holds], "detail": detail}


def claims_frame(claims: list[dict]) -> pd.DataFrame:
    """Claims as a table: claim, verdict (yes / no / not run), detail."""
    rows = [{"claim": c["claim"], "verdict": VERDICTS[c["holds"]], "detail": c.get("detail", "")} for c in claims]
    return pd.DataFrame(rows, columns=["claim", "verdict", "detail"])


class NotebookReport:
    """Collects a notebook's figures, tables, paper-vs-ours comparisons and claims in its output folder."""

    def __init__(self, paper: str, notebook: str, out_dir=None, profile: str = "smoke"):
        self.paper, self.notebook, self.profile = paper, Path(notebook).stem, profile
        self.out_dir = notebook_out_dir(paper, self.notebook, out_dir)
        self.comparisons: list[pd.DataFrame] = []
        self.claims: list[dict] = []

    def figure(self, fig, name: str) -> list[Path]:
        return save_figure(fig, self.out_dir / name)

    def table(self, frame: pd.DataFrame, name: str) -> Path:
        path = self.out_dir / f"{name}.csv"
        frame.to_csv(path, index=False)
        return path

    def compare(self, ours: pd.DataFrame, reported_name: str, on: list[str] | None = None) -> pd.DataFrame:
        """``compare_with_paper`` against ``<paper>/reported/<reported_name>.csv`` with a ``within tolerance``
        verdict per row (``tolerance_verdicts``); kept for the scorecard."""
        table = compare_with_paper(ours, reported(self.paper, reported_name), on)
        table["within tolerance"] = tolerance_verdicts(table, self.paper, self.notebook)
        self.comparisons.append(table)
        return table

    def claim(self, statement: str, holds: bool | None, detail: str = "") -> dict:
        """Record whether one of the paper's qualitative claims holds in this run.

        ``holds=None`` records the claim as "not run": its inputs were not computed in this run (an
        algorithm or dataset left out, optional data absent); ``detail`` should say which. ``verdict(holds,
        *inputs)`` gives None when a number the verdict rests on is missing.
        """
        record = claim_record(statement, holds, detail)
        self.claims.append(record)
        return record

    def claims_table(self) -> pd.DataFrame:
        """The claims as a page shows them (``shared.tables.ClaimsTable``: no index, "no" in bold)."""
        from shared.tables import ClaimsTable

        return ClaimsTable(claims_frame(self.claims))

    def finish(self) -> pd.DataFrame:
        """Write comparison.csv, claims.json and report.json; return the claims table for display."""
        comparison = pd.concat(self.comparisons, ignore_index=True) if self.comparisons else pd.DataFrame()
        comparison.to_csv(self.out_dir / "comparison.csv", index=False)
        (self.out_dir / "claims.json").write_text(json.dumps(self.claims, indent=1))
        numeric = pd.to_numeric(comparison.get("ours", pd.Series(dtype=float)), errors="coerce")
        summary = {
            "paper": self.paper,
            "notebook": self.notebook,
            "profile": self.profile,
            "paper_numbers": int(len(comparison)),
            "paper_numbers_with_ours": int(numeric.notna().sum()),
            "claims": len(self.claims),
            "claims_holding": sum(c["holds"] is True for c in self.claims),
            "claims_not_run": sum(c["holds"] is None for c in self.claims),
        }
        (self.out_dir / "report.json").write_text(json.dumps(summary, indent=1))
        return self.claims_table()

