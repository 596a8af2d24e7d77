"""How close each replication is, from ``<paper>/items.yaml`` and the notebooks' reports.

Per item (a table or figure of a paper): its state (not started / smoke / rehearsal / full), how many of the
paper's numbers ours were compared with, the share of those within the item's stated tolerance, the median
absolute difference, and the claims of the notebook that replicates it (held / not held / not run). An item
counts only the comparison rows its notebook wrote for it (``compares``), so a reported table that several
notebooks print is counted once.

The status rows of the README and of the book's landing page come from the same catalogues
(``status_frame``), so the three cannot disagree: ``python -m shared.scorecard --readme`` rewrites the README's
block and ``tests/test_scorecard.py`` fails when it is stale.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Callable

import numpy as np
import pandas as pd

from shared.catalog import PaperCatalog, all_catalogs
from shared.paths import REPO_ROOT

#: results_of(paper, notebook) -> (comparison frame, claim records), or None when the notebook did not run
Results = Callable[[str, str], "tuple[pd.DataFrame, list[dict]] | None"]


def closeness(rows: pd.DataFrame, tolerance) -> dict:
    """Of the comparison ``rows`` (columns paper, ours): the paper's numbers, how many ours was compared with,
    the share of those within ``tolerance`` (None when none was compared or no tolerance is stated) and the
    median |ours - paper|."""
    paper = pd.to_numeric(rows.get("paper", pd.Series(dtype=float)), errors="coerce")
    ours = pd.to_numeric(rows.get("ours", pd.Series(dtype=float)), errors="coerce")
    numbers = paper.notna()
    compared = numbers & ours.notna()
    diff = (ours[compared] - paper[compared]).abs()
    within = None
    if compared.any() and tolerance is not None:
        within = float(np.mean(tolerance.within(paper[compared], ours[compared])))
    return {"paper numbers": int(numbers.sum()), "compared": int(compared.sum()), "within tolerance": within,
            "median |diff|": float(diff.median()) if len(diff) else None}


def claim_counts(claims: list[dict]) -> dict:
    return {"held": sum(c["holds"] is True for c in claims), "not held": sum(c["holds"] is False for c in claims),
            "not run": sum(c["holds"] is None for c in claims)}


def item_frame(catalog: PaperCatalog, results_of: Results, run_status: Callable[[str, str], str]) -> pd.DataFrame:
    """One row per item of ``catalog``: label, title, notebook, state, run, closeness and its notebook's claims."""
    rows = []
    for item in catalog.items:
        state = catalog.item_state(item)
        run = run_status(catalog.paper, item.notebook) if state != "not started" else "—"
        results = results_of(catalog.paper, item.notebook) if run == "ok" else None
        comparison, claims = results if results else (pd.DataFrame(), [])
        mine = comparison[comparison["item"].astype(str).isin(item.compares)] if "item" in comparison else comparison
        rows.append({"item": item.label, "title": item.title, "notebook": item.notebook or "", "state": state,
                     "run": run, **closeness(mine, item.tolerance),
                     "tolerance": item.tolerance.text if item.tolerance else "", **claim_counts(claims)})
    return pd.DataFrame(rows)


def paper_summary(catalog: PaperCatalog, items: pd.DataFrame) -> dict:
    """A paper's row of the overview: items by state, numbers compared and within tolerance (each item's own
    rows, pooled), and claims counted once per notebook."""
    compared = int(items["compared"].sum())
    close = sum(w * n for w, n in zip(items["within tolerance"], items["compared"]) if w is not None and not pd.isna(w))
    judged = sum(n for w, n in zip(items["within tolerance"], items["compared"]) if w is not None and not pd.isna(w))
    per_notebook = items[items["run"] == "ok"].drop_duplicates("notebook")
    return {"paper": catalog.short, "items": len(items),
            "with a notebook": int((items["state"] != "not started").sum()),
            "ran": int((items["run"] == "ok").sum()), "failed": int((items["run"] == "failed").sum()),
            "paper numbers compared": f"{compared} of {int(items['paper numbers'].sum())}" if compared else "—",
            "within tolerance": f"{close / judged:.0%}" if judged else "—",
            "claims held": int(per_notebook["held"].sum()), "not held": int(per_notebook["not held"].sum()),
            "not run": int(per_notebook["not run"].sum())}


def status_frame(catalogs: list[PaperCatalog] | None = None) -> pd.DataFrame:
    """The README's and the landing page's status rows, from the catalogues alone (no run needed)."""
    rows = []
    for catalog in catalogs or all_catalogs():
        states = [catalog.item_state(i) for i in catalog.items]
        missing = [i.label for i, s in zip(catalog.items, states) if s == "not started"]
        rows.append({"folder": f"`{catalog.paper}/`", "paper": catalog.short, "replicates": catalog.replicates,
                     "items": f"{len(states) - len(missing)} of {len(states)}"
                              + (f" (not: {', '.join(missing)})" if missing else ""),
                     "state": STATE_TEXT[catalog.state], "smoke profile runs on": catalog.smoke})
    return pd.DataFrame(rows)


STATE_TEXT = {"smoke": "smoke profile only",
              "rehearsal": "smoke profile; full profile rehearsed on CPU (`make rehearse`), not yet run at the paper's "
                           "scale",
              "full": "smoke and full profiles"}


def markdown(frame: pd.DataFrame) -> str:
    """A plain pipe table (cells as given; None and NaN as —)."""
    def cell(v):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return "—"
        return str(v).replace("|", "\\|")
    head = "| " + " | ".join(frame.columns) + " |\n|" + "|".join("---" for _ in frame.columns) + "|\n"
    return head + "".join("| " + " | ".join(cell(v) for v in row) + " |\n" for row in frame.itertuples(index=False))


README_BEGIN, README_END = "<!-- status: generated by python -m shared.scorecard --readme -->", "<!-- /status -->"


def readme_block(catalogs: list[PaperCatalog] | None = None) -> str:
    return f"{README_BEGIN}\n{markdown(status_frame(catalogs))}{README_END}"


def update_readme(text: str, catalogs: list[PaperCatalog] | None = None) -> str:
    """``text`` (the README) with its status block replaced by the catalogues' rows."""
    pattern = re.compile(re.escape(README_BEGIN) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"the README has no status block ({README_BEGIN} ... {README_END}) to update")
    return pattern.sub(lambda _: readme_block(catalogs), text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's status block from items.yaml")
    args = parser.parse_args(argv)
    if args.readme:
        path = REPO_ROOT / "README.md"
        path.write_text(update_readme(path.read_text()))
        print(f"updated {path}")
    else:
        print(markdown(status_frame()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
