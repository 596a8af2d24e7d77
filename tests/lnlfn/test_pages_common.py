"""What the LNLFN pages share (lnlfn.pages): the comparison as shown, the benchmarks and sweep tables, item texts and
the claims collector."""
from __future__ import annotations

import pandas as pd

from lnlfn.pages import ClaimRecords, benchmark_table, comparison_table, item_text, sweep_frame
from lnlfn.scoring import HeadConfig


def comparison(source=("paper", "paper"), note=(None, None)) -> pd.DataFrame:
    """Two rows as ``report.compare`` returns them: keys, metric, paper, ours, diff, source, note, ours_on."""
    return pd.DataFrame({"item": ["Table 8", "Table 9"], "dataset": ["TweetNLP-M"] * 2, "method": ["CL", "FME"],
                         "metric": ["correctable"] * 2, "paper": [121.0, 0.59], "ours": [30.0, None],
                         "diff": [-91.0, None], "source": list(source), "note": list(note),
                         "ours_on": ["vaderM (smoke)", None]})


def test_comparison_table_puts_ours_on_after_diff_and_leaves_out_a_source_and_note_that_say_nothing():
    shown = comparison_table(comparison().assign(**{"within tolerance": "no"}))
    assert list(shown.data.columns) == ["item", "dataset", "method", "metric", "paper", "ours", "diff",
                                        "within tolerance", "ours_on"]
    html = shown.to_html()
    assert "121.00" in html and "-91.00" in html and "0.59" in html


def test_comparison_table_keeps_the_keys_of_every_table_before_the_numbers():
    fig3 = comparison().assign(level=["5", "10"], item="Fig. 3")  # a key the first table lacks comes last in a concat
    shown = comparison_table(pd.concat([comparison(), fig3], ignore_index=True))
    assert list(shown.data.columns) == ["item", "dataset", "method", "level", "metric", "paper", "ours", "diff",
                                        "ours_on"]


def test_comparison_table_shows_a_note_or_a_source_other_than_the_paper():
    shown = comparison_table(comparison(source=("paper", "blog figure (approx.)"), note=("k = 250", None)),
                             decimals=1)
    assert list(shown.data.columns)[-3:] == ["ours_on", "source", "note"]
    assert "121.0<" in shown.to_html() and "-91.0<" in shown.to_html()


def test_benchmark_table_says_which_run_and_why_others_are_skipped():
    class Toy:
        def split_counts(self):
            return {"train": 10, "test": 5, "val": 3}

    table = benchmark_table(["vader5", "snli5"], {"vader": Toy()}, {"snli5": "absent: SNLI not found.\n  /data/snli"})
    assert table.set_index("benchmark").loc["vader5", "status"] == "run"
    assert table.set_index("benchmark").loc["vader5", "items"] == "train 10, test 5, val 3"
    assert table.set_index("benchmark").loc["snli5", "status"].startswith("skipped: absent: SNLI not found.")
    assert table.set_index("benchmark").loc["snli5", "items"] == ""  # its dataset was not loaded


def test_sweep_frame_numbers_the_runs_of_each_sweep():
    frame = sweep_frame({"FM": [HeadConfig("logreg", C=2.0), HeadConfig("logreg", C=4.0)],
                         "baseline": [HeadConfig("logreg", C=1.0)]})
    assert list(frame["sweep"]) == ["FM", "FM", "baseline"] and list(frame["run"]) == [1, 2, 1]
    assert frame.loc[0, "configuration"] == "logreg(C=2, seed=0)"


def test_item_text_joins_a_pair():
    assert item_text("good") == "good"
    assert item_text(("A man sleeps.", "A person rests.")) == "A man sleeps. / A person rests."


def test_claim_records_collect_claim_records():
    records = ClaimRecords()
    records.claim("holds", True, "detail")
    records.claim("not run", None)
    assert [(r["claim"], r["verdict"], r["detail"]) for r in records] == [("holds", "yes", "detail"),
                                                                         ("not run", "not run", "")]
