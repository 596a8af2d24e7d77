"""Tables as pages show them: formatted, short ones inline, long ones interactive and offline."""
import numpy as np
import pandas as pd
import pytest

import shared.tables as tables
from shared.tables import InteractiveTable, show_table


def _frame(n):
    return pd.DataFrame({"setting": [f"s{i}" for i in range(n)], "paper": np.linspace(0, 1, n),
                         "ours": [np.nan] + list(np.linspace(0, 1, n - 1))})


def test_a_short_table_is_a_formatted_styler_without_the_index():
    html = show_table(_frame(30).assign(setting="a <b>"), {"paper": "{:.1%}", "ours": "{:.1%}"}).to_html()
    assert "a &lt;b&gt;" in html  # text is escaped, not read as HTML
    assert "100.0%" in html and "—" in html  # formatted; the missing value shown as a dash
    assert 'class="row_heading' not in html  # no index column


def test_a_long_table_is_interactive_with_its_numbers_formatted():
    table = show_table(_frame(31), {"paper": "{:.1%}", "ours": lambda v: f"{100 * v:.0f} pts"})
    assert isinstance(table, InteractiveTable) and len(table) == 31
    assert table.data.loc[0, "ours"] == "—" and table.data.loc[30, "paper"] == "100.0%"
    assert table.data.loc[30, "ours"] == "100 pts"


def test_the_first_interactive_table_carries_the_offline_bundle_and_nothing_loads_from_a_cdn(monkeypatch):
    monkeypatch.setattr(tables, "_bundle_shown", False)
    first, second = show_table(_frame(40))._repr_html_(), show_table(_frame(40))._repr_html_()
    assert len(first) > 500_000 > len(second)  # DataTables (about 600 kB) is inlined once per kernel
    for html in (first, second):
        assert "unpkg" not in html and "cdn." not in html
        assert "s39" in html  # every row is in the table's data, the pages are client-side


def test_bad_input_is_named():
    with pytest.raises(KeyError, match="no column 'acc'"):
        show_table(_frame(40), {"acc": "{:.1f}"})
    with pytest.raises(TypeError, match="expects a pandas DataFrame"):
        show_table([1, 2, 3])


def test_a_comparison_run_on_one_stand_in_names_it_once_in_the_caption():
    frame = _frame(3).assign(ours_on="digits (smoke)")
    html = show_table(frame, caption="Table 1").to_html()
    assert "Table 1; ours computed on: digits (smoke)" in html and "<th" in html and "ours_on" not in html
    mixed = _frame(40).assign(ours_on=["a"] * 39 + ["b"])
    assert "ours_on" in show_table(mixed).data.columns  # two stand-ins: the column stays


def test_a_claims_table_is_a_dataframe_shown_without_its_index_and_with_no_in_bold():
    from shared.report import claim_record, claims_frame
    from shared.tables import ClaimsTable

    table = ClaimsTable(claims_frame([claim_record("holds", True), claim_record("fails", False, "3 < 4")]))
    assert list(table["verdict"]) == ["yes", "no"] and type(table.set_index("claim")) is pd.DataFrame
    html = table._repr_html_()
    assert "row_heading" not in html and "font-weight: bold" in html and "3 &lt; 4" in html
