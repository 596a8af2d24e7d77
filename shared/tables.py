"""Tables as a page shows them: numbers formatted, short tables inline, long ones interactive.

    show_table(comparison, {"paper": "{:.1%}", "ours": "{:.1%}", "diff": "{:+.1%}"})

A table of at most ``max_rows`` rows (30) is a pandas ``Styler`` without the index. A longer one is an
interactive DataTable (itables: sortable, searchable, paginated) that works offline: the first long table a
kernel shows carries the DataTables bundle that ships with itables, so neither JupyterLab nor the built book
loads anything from the network.
"""
from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

MAX_INLINE_ROWS = 30
_bundle_shown = False

Formats = Mapping[str, "str | Callable"]


def _formatted(df: pd.DataFrame, formats: Formats | None, na_rep: str) -> pd.DataFrame:
    """The table with each formatted column as strings; missing values shown as ``na_rep``."""
    out = df.copy()
    for column, fmt in (formats or {}).items():
        if column not in out.columns:
            raise KeyError(f"show_table: no column {column!r} to format; the table has {list(out.columns)}")
        to_text = fmt if callable(fmt) else fmt.format
        out[column] = [na_rep if _missing(v) else to_text(v) for v in out[column]]
    return out.astype(object).where(out.notna(), na_rep)


def _missing(value) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array in a cell
        return False


def _offline_bundle() -> str:
    """itables' own offline initialisation (as ``init_notebook_mode(connected=False)`` displays it)."""
    from itables.javascript import _itables_underscore_version, generate_init_offline_itables_html
    from itables.options import dt_bundle
    from itables.utils import UNPKG_DT_BUNDLE_URL_NO_VERSION, read_package_file

    init = read_package_file("html/init_datatables.html").replace(
        f"import {{ set_or_remove_dark_class }} from '{UNPKG_DT_BUNDLE_URL_NO_VERSION}';",
        f"const {{ set_or_remove_dark_class }} = await window.{_itables_underscore_version()};")
    if "unpkg" in init:
        raise RuntimeError("itables' initialisation still loads from unpkg.com: pin the itables version of "
                           "constraints.txt, or update shared/tables.py to the new itables")
    return init + generate_init_offline_itables_html(dt_bundle)


class InteractiveTable:
    """A long table rendered by DataTables (itables), offline; ``data`` holds the formatted frame."""

    def __init__(self, data: pd.DataFrame, caption: str | None = None):
        self.data = data
        self.caption = caption

    def _repr_html_(self) -> str:
        global _bundle_shown
        from itables import to_html_datatable

        html = to_html_datatable(self.data, caption=self.caption, connected=False, showIndex=False,
                                 pageLength=15, lengthMenu=[15, 30, 100, -1], classes="display compact",
                                 maxBytes=0, autoWidth=False)
        if not _bundle_shown:
            html = _offline_bundle() + html
            _bundle_shown = True
        return html

    def __len__(self) -> int:
        return len(self.data)


LIFTED = {"ours_on": "ours computed on"}  # a column that holds one value in every row is said once, in the caption


def show_table(df: pd.DataFrame, formats: Formats | None = None, *, max_rows: int = MAX_INLINE_ROWS,
               caption: str | None = None, na_rep: str = "—"):
    """``df`` (n rows) as a page shows it: a ``Styler`` without the index if n <= max_rows, else an
    ``InteractiveTable``. ``formats`` maps a column to a format string (``"{:.1%}"``) or a function. A comparison's
    ``ours_on`` column with the same value in every row moves into the caption."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"show_table expects a pandas DataFrame, got {type(df).__name__}")
    for column, said in LIFTED.items():
        if column in df.columns and len(df) and df[column].nunique(dropna=False) == 1:
            caption = "; ".join(filter(None, [caption, f"{said}: {df[column].iloc[0]}"]))
            df = df.drop(columns=column)
    if len(df) > max_rows:
        return InteractiveTable(_formatted(df, formats, na_rep), caption)
    styler = df.style.format(escape="html", na_rep=na_rep).format(dict(formats or {}), na_rep=na_rep, escape="html")
    styler = styler.hide(axis="index")
    return styler.set_caption(caption) if caption else styler


class ClaimsTable(pd.DataFrame):
    """A page's claims (claim, verdict, detail): a DataFrame for code and tests, shown without the index and with
    "no" in bold. Operations on it return plain DataFrames."""

    @property
    def _constructor(self):
        return pd.DataFrame

    def _repr_html_(self) -> str:
        frame = pd.DataFrame(self)
        styler = frame.style.format(escape="html").hide(axis="index").set_properties(
            **{"text-align": "left", "white-space": "pre-wrap"})
        if "verdict" in frame:
            styler = styler.map(lambda v: "font-weight: bold" if v == "no" else "", subset=["verdict"])
        return styler.to_html()


__all__ = ["show_table", "InteractiveTable", "ClaimsTable", "MAX_INLINE_ROWS"]
