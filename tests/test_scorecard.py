"""The closeness scorecard and the status rows shared by the README, the landing page and the scorecard."""
import pandas as pd
import pytest

from shared.catalog import Item, PaperCatalog, Tolerance, all_catalogs, load_catalog
from shared.errors import ConfigError
from shared.paths import REPO_ROOT
from shared.scorecard import closeness, item_frame, paper_summary, readme_block, status_frame, update_readme


def test_tolerance_bounds_absolute_and_relative_differences():
    assert Tolerance(abs=2).within([50, 50, 50], [52, 52.5, 47.9]).tolist() == [True, False, False]
    assert Tolerance(rel=0.1).within([10, 200], [11, 221]).tolist() == [True, False]
    assert (Tolerance(abs=2).text, Tolerance(rel=0.05).text) == ("±2", "±5 %")
    for bad in ({}, {"abs": 1, "rel": 0.1}, {"abs": -1}):
        with pytest.raises(ConfigError):
            Tolerance(**bad)


def test_closeness_counts_only_numbers_ours_was_compared_with():
    rows = pd.DataFrame({"paper": [80.0, 70.0, 60.0, None], "ours": [81.0, 75.0, None, 3.0]})
    got = closeness(rows, Tolerance(abs=2))
    assert got == {"paper numbers": 3, "compared": 2, "within tolerance": 0.5, "median |diff|": 3.0}
    assert closeness(rows, None)["within tolerance"] is None  # no tolerance stated: no share
    assert closeness(rows.iloc[2:3], Tolerance(abs=2)) == {"paper numbers": 1, "compared": 0,
                                                          "within tolerance": None, "median |diff|": None}


def _catalog(items, state="smoke"):
    return PaperCatalog("ciln", "T", "C", tuple(items), short="CILN", state=state)


def test_a_table_printed_by_several_notebooks_counts_once_per_item():
    # both notebooks compare Table 1 (one writes every row of the reported file); each item counts its own
    # notebook's rows of its own tables, so Table 1's 2 numbers are counted once, not twice
    both = pd.DataFrame({"item": ["Table 1", "Table 1", "Table 7"], "paper": [1.0, 2.0, 3.0], "ours": [1.0, 9.0, None]})
    results = {"01_benchmark.ipynb": (both, [{"holds": True}, {"holds": None}]),
               "02_examples.ipynb": (both, [{"holds": False}])}
    items = [Item("t1", "Table 1", "a", "01_benchmark.ipynb", "r.csv", ("Table 1",), Tolerance(abs=0.5)),
             Item("t7", "Table 7", "b", "02_examples.ipynb", "r.csv", ("Table 7",), Tolerance(abs=0.5)),
             Item("f1", "Fig. 1", "c", "01_benchmark.ipynb", None, ("Fig. 1",)),
             Item("x", "Fig. 9", "d", None, None, ("Fig. 9",))]
    frame = item_frame(_catalog(items), lambda paper, nb: results[nb], lambda paper, nb: "ok")
    assert frame["paper numbers"].tolist() == [2, 1, 0, 0] and frame["compared"].tolist() == [2, 0, 0, 0]
    assert frame.loc[0, "within tolerance"] == 0.5 and pd.isna(frame.loc[1, "within tolerance"])
    assert frame["state"].tolist() == ["smoke", "smoke", "smoke", "not started"]
    assert frame["run"].tolist()[-1] == "—"
    summary = paper_summary(_catalog(items), frame)
    assert summary["paper numbers compared"] == "2 of 3" and summary["within tolerance"] == "50%"
    # claims: 01's two and 02's one, each notebook once although 01 replicates two items
    assert (summary["claims held"], summary["not held"], summary["not run"]) == (1, 1, 1)
    assert (summary["with a notebook"], summary["ran"]) == (3, 3)


def test_a_failed_notebook_contributes_no_numbers_and_no_claims():
    items = [Item("t1", "Table 1", "a", "01_benchmark.ipynb", "r.csv", ("Table 1",), Tolerance(abs=1))]
    frame = item_frame(_catalog(items), lambda *_: pytest.fail("a failed run's results are not read"),
                       lambda paper, nb: "failed")
    assert frame.loc[0, "run"] == "failed" and frame.loc[0, "compared"] == 0
    assert paper_summary(_catalog(items), frame)["failed"] == 1


def test_every_item_with_reported_numbers_states_a_tolerance():
    from shared.report import reported

    for catalog in all_catalogs():
        for item in catalog.items:
            if item.reported and item.notebook:
                values = pd.to_numeric(reported(catalog.paper, item.reported)["value"], errors="coerce")
                if values.notna().any():  # a table of text (examples of events) has nothing to be close to
                    assert item.tolerance is not None, f"{catalog.paper}/items.yaml: {item.id} needs a tolerance"
        assert catalog.short and catalog.links and catalog.bib and catalog.replicates and catalog.smoke, catalog.paper


def test_every_catalogue_cites_an_entry_of_the_bibliography():
    bib = (REPO_ROOT / "book" / "references.bib").read_text()
    for catalog in all_catalogs():
        assert f"{{{catalog.bib}," in bib, catalog.bib


def test_status_rows_list_what_has_no_notebook_and_the_state():
    catalog = load_catalog("lnlfn")
    row = status_frame([catalog]).iloc[0]
    missing = [i.label for i in catalog.items if not i.notebook]
    assert row["items"].startswith(f"{len(catalog.items) - len(missing)} of {len(catalog.items)}")
    for label in missing:
        assert label in row["items"]
    assert "rehearsed" in row["state"] if catalog.state == "rehearsal" else True


def test_the_readme_status_block_is_generated_from_the_catalogues():
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme_block() in readme, "README.md's status rows are stale: run python -m shared.scorecard --readme"
    assert update_readme(readme) == readme
    with pytest.raises(ValueError, match="no status block"):
        update_readme("# a README without the block")
