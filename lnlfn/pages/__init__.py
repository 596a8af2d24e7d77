"""LNLFN's notebook pages: one module per notebook (``lnlfn/pages/<topic>.py``), each a ``Page`` subclass that loads
what its settings name, runs or reads from the cache exactly what they define, and returns the tables, figures,
paper comparison and claims the notebook shows.

    from lnlfn.pages.end_to_end import EndToEnd
    page = EndToEnd("smoke", settings={"seeds": [0, 1]})
    page.run()
    page.compare_with_paper()     # paper | ours | diff, with what ours was run on
    page.claims()                 # a DataFrame: claim | verdict (yes / no / not run) | detail

What more than one page shows or needs lives here: the settings table, the device the sweeps run on, the
comparison as shown, the table of the benchmarks a page runs, a sweep's runs, and the claims collector that
``lnlfn.experiments.claim_each`` writes into.
"""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from lnlfn.benchmarks import BENCHMARKS
from lnlfn.experiments import brief
from shared.pages import NotebookPage
from shared.report import claim_record
from shared.tables import show_table

#: a comparison column shown only where some row says more than its default
SAYS_NOTHING = {"source": "paper", "note": ""}


class Page(NotebookPage):
    paper = "lnlfn"

    def __init__(self, profile: str = "smoke", *, data_dir=None, device="auto", settings=None, out_dir=None):
        super().__init__(profile, settings=settings, out_dir=out_dir)
        self.data_dir, self.device = data_dir, device

    def settings_table(self):
        return show_table(super().settings_table())

    @cached_property
    def compute_device(self) -> str:
        """``device`` resolved ("auto": CUDA when available, else the CPU): where the sweeps run."""
        from shared.device import select_device

        return str(select_device(self.device))


def comparison_table(comparison: pd.DataFrame, *, decimals: int = 2):
    """``report.compare``'s rows (of one or more reported tables) as a page shows them: item and the keys, metric,
    paper, ours, diff, within tolerance, what ours was run on, then the paper's source and note where some row has one (a source other
    than "paper", a non-empty note)."""
    numbers = ["metric", "paper", "ours", "diff", "within tolerance"]
    said = [c for c, default in SAYS_NOTHING.items()
            if c in comparison.columns and comparison[c].dropna().astype(str).ne(default).any()]
    keys = [c for c in comparison.columns if c not in (*numbers, "ours_on", *SAYS_NOTHING)]
    columns = keys + [c for c in numbers if c in comparison.columns] + [c for c in ("ours_on", *said)
                                                                          if c in comparison.columns]
    number = f"{{:.{decimals}f}}"
    return show_table(comparison[columns], {"paper": number, "ours": number, "diff": f"{{:+.{decimals}f}}"})


def item_text(item) -> str:
    """An item's text: a string, or a pair (premise / hypothesis) joined."""
    return item if isinstance(item, str) else " / ".join(item)


def benchmark_table(benchmarks, datasets: dict, skipped: dict) -> pd.DataFrame:
    """One row per benchmark: what it stands in for, its noise, its dataset's split sizes, and whether it runs."""
    rows = []
    for bench in benchmarks:
        spec = BENCHMARKS[bench]
        ds = datasets.get(spec.dataset)
        items = "" if ds is None else ", ".join(f"{k} {v:,}" for k, v in ds.split_counts().items())
        rows.append({"benchmark": bench, "stands in for": spec.stands_in_for, "noise": spec.description,
                     "items": items, "status": f"skipped: {brief(skipped[bench])}" if bench in skipped else "run"})
    return pd.DataFrame(rows, columns=["benchmark", "stands in for", "noise", "items", "status"])


def sweep_frame(sweeps: dict) -> pd.DataFrame:
    """``{role: configs}`` as one row per run: role, run number, run."""
    return pd.DataFrame([{"sweep": role, "run": i + 1, "configuration": c.name}
                         for role, configs in sweeps.items() for i, c in enumerate(configs)])


class ClaimRecords(list):
    """Collects what ``claim_each`` records, as claim records."""

    def claim(self, statement: str, holds, detail: str = "") -> dict:
        record = claim_record(statement, holds, detail)
        self.append(record)
        return record


__all__ = ["Page", "comparison_table", "item_text", "benchmark_table", "sweep_frame", "ClaimRecords"]
