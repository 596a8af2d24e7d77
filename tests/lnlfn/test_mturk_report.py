"""lnlfn.mturk_report (notebook 04's page): skipping what the user lacks, "not run" claims, Fig. 5's data, on tiny
files written in the release formats."""
import csv
import io
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from lnlfn import mturk
from lnlfn import mturk_report as page_module
from lnlfn.formats import write_cleanlab_mturk, write_imdb, write_imdb_cleanlab, write_mturk
from lnlfn.mturk_report import MTurkPage
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataNotFoundError
from shared.metrics.agreement import CORRECTABLE as C, NON_ERROR as NE
from shared.report import compare_with_paper, reported

# ------------------------------------------------------------------------------------------ a tiny IMDB release
#: aclImdb test reviews (polarity, "{id}_{rating}") and their dcx/lnlfm idx (200000 + 12500 [pos] + id)
REVIEWS = [("neg", "1_2"), ("neg", "2_3"), ("neg", "3_1"), ("pos", "1_8"), ("pos", "2_10")]
IDX = [200001, 200002, 200003, 212501, 212502]
CL_ITEMS = {200002: "test/neg/2_3", 212501: "test/pos/1_8"}  # CL's hypothesized items
SENT = {"FML_3": {200002: "Correctable", 200003: "Non-Error"}, "FME": {200002: "Correctable", 212502: "Correctable"},
        "FME_CL": {212502: "Correctable"}, "BL_CL": {200002: "Correctable", 212501: "NA: Neutral"}}


def main_csv() -> str:
    header = ["idx", "label", "votes_negative", "votes_neither", "votes_neutral", "votes_positive"]
    for m in SENT:
        header += ([f"{m}_pred"] if m != "FME_CL" else []) + [f"{m}_flagged", f"{m}_sent", f"{m}_result_mt"]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    for i, label in zip(IDX, [0, 0, 0, 1, 1]):
        sent = any(i in s for s in SENT.values())
        row = [i, label] + ([1, 0, 0, 4] if sent else [""] * 4)
        for m, items in SENT.items():
            flag = "TRUE" if i in items else "FALSE"
            row += ([1 - label] if m != "FME_CL" else []) + [flag, flag, items.get(i, "")]
        w.writerow(row)
    return out.getvalue()


RERUN = ("id,id_cl,label,given_original_label,mturk_given,mturk_guessed,mturk_neutral,mturk_off_topic\n"
         "200002,test/neg/2_3,0,Negative,1,4,0,0\n212501,test/pos/1_8,1,Positive,1,1,3,0\n")
CLEANLAB = [{"id": "test/pos/1_8", "url": "u", "given_original_label": "Positive", "our_guessed_label": "Negative",
             "mturk": {"given": 2, "guessed": 2, "neutral": 1, "off-topic": 0}},
            {"id": "test/neg/2_3", "url": "u", "given_original_label": "Negative", "our_guessed_label": "Positive",
             "mturk": {"given": 0, "guessed": 3, "neutral": 2, "off-topic": 0}}]


def write_imdb_release(root):
    write_mturk(root, "imdb", main_csv(), RERUN)  # the rerun CSV with the release's byte-order mark
    write_cleanlab_mturk(root, "imdb", CLEANLAB)
    return root


def write_acl_imdb(root, order=("neg/2_3.txt", "neg/1_2.txt", "pos/1_8.txt", "neg/2_3.txt", "pos/2_10.txt")):
    """aclImdb test reviews and cleanlab's arrays; the default index repeats neg/2_3 and never names neg/3_1."""
    write_imdb(root, [("test", p, n, f"review {p} {n}") for p, n in REVIEWS])
    probs = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8], [0.4, 0.6]])[:len(order)]
    write_imdb_cleanlab(root, list(order), probs, np.array([n.startswith("pos") for n in order], dtype=int))
    return root


# ------------------------------------------------------------------------------------------ item 3: skip, not lose
def test_full_page_without_acl_imdb_or_amazon_still_compares_and_claims(tmp_path):
    """A missing aclImdb (Fig. 5 only) and a missing Amazon release are skipped with the reason; IMDB's Tables 2-9
    are still compared with the paper and claimed, and the skipped items' claims are "not run"."""
    write_imdb_release(tmp_path / "data")
    page = MTurkPage("full", data_dir=tmp_path / "data", out_dir=tmp_path / "out", settings={"kappa_boot": 20})
    page.run()
    status = page.status().set_index("item")
    assert status.loc["Tables 2, 6, 8, 9 (imdb)", "status"] == "read"
    assert status.loc["Tables 2, 6, 8, 9 (amazon)", "status"] == "skipped"
    assert "lnlfm/mturk/amazon_mturk_main.csv" in status.loc["Tables 2, 6, 8, 9 (amazon)", "detail"]
    assert status.loc["Fig. 5", "status"] == "skipped" and "aclImdb" in status.loc["Fig. 5", "detail"]
    assert int(page.table2().loc[("imdb", "Total"), "Total"]) == 2
    page.table6(), page.table8(), page.table9()
    shown = page.compare_with_paper().data
    assert set(shown["dataset"]) == {"imdb"} and len(shown) > 0
    claims = page.claims().set_index("claim")
    imdb = claims[claims.index.str.contains("IMDB") & ~claims.index.str.startswith("Fig. 5")]
    amazon = claims[claims.index.str.contains("Amazon")]
    assert len(imdb) == len(amazon) == 7
    assert set(imdb["verdict"]) <= {"yes", "no"}  # compared (tiny numbers: they differ from the paper's)
    assert set(amazon["verdict"]) == {"not run"} and amazon["detail"].str.contains("amazon_mturk_main.csv").all()
    fig5 = claims.loc[claims.index.str.startswith("Fig. 5")]
    assert fig5["verdict"].tolist() == ["not run"] and "aclImdb" in fig5["detail"].iloc[0]
    written = json.loads((tmp_path / "out" / "claims.json").read_text())
    assert len(written) == 15 and sum(c["holds"] is None for c in written) == 8
    assert (tmp_path / "out" / "comparison.csv").exists()
    assert "Fig. 5 skipped" in page.figure5().data.columns


def test_full_page_fig5_leaves_out_reviews_cleanlab_never_names(tmp_path):
    root = write_acl_imdb(write_imdb_release(tmp_path / "data"))
    page = MTurkPage("full", data_dir=root, out_dir=tmp_path / "out",
                     settings={"kappa_boot": 10, "datasets": ["imdb"]})
    page.run()
    assert page.fig5 is not None and "1 of 5 aclImdb test reviews have no cleanlab probabilities" in page.fig5.note
    assert "1 of the 4 items with an MTurk verdict are among the reviews left out" in page.fig5.note  # 200003
    groups = page.fig5.losses.groupby("group", sort=False)["item"].apply(list).to_dict()
    # items = rows of the 4 reviews with probabilities (idx 200001, 200002, 212501, 212502); 200001 was never sent
    assert groups["clean (never hypothesized)"] == [0] and groups["Correctable (verified)"] == [1, 3]
    page.figure5()
    assert (tmp_path / "out" / "fig5_losses.png").exists()
    claims = page.claims().set_index("claim")
    assert not claims.index.str.contains("Amazon").any() or \
        set(claims[claims.index.str.contains("Amazon")]["verdict"]) == {"not run"}
    assert "not among settings['datasets']" in claims[claims.index.str.contains("Amazon")]["detail"].iloc[0]


def test_full_page_with_no_inputs_at_all_raises_with_every_reason(tmp_path):
    page = MTurkPage("full", data_dir=tmp_path, out_dir=tmp_path / "out")
    with pytest.raises(DataNotFoundError, match=r"imdb_mturk_main\.csv[\s\S]*amazon_mturk_main\.csv"):
        page.run()
    with pytest.raises(ConfigError, match="run"):
        MTurkPage("full", data_dir=tmp_path, out_dir=tmp_path / "out2").table2()


def test_load_releases_skips_absent_and_unreadable_files(tmp_path):
    write_imdb_release(tmp_path)
    folder = write_mturk(tmp_path, "amazon", "x", "y")
    write_lfs_pointer(folder / "amazon_mturk_main.csv", b"idx,label\n")
    releases, skipped = page_module.load_releases(["imdb", "amazon"], tmp_path)
    assert list(releases) == ["imdb"] and releases["imdb"].cl_rerun["id"].tolist() == [200002, 212501]
    assert skipped["amazon"].startswith("unreadable: ") and "git lfs pull" in skipped["amazon"]
    releases, skipped = page_module.load_releases(["amazon"], tmp_path / "nowhere")
    assert not releases and skipped["amazon"].startswith("absent: ")
    assert page_module.brief(skipped["amazon"]).endswith("nowhere/lnlfm/mturk/amazon_mturk_main.csv")


# ------------------------------------------------------------------------------------------ item 7: not run
def test_release_claims_of_a_dataset_not_read_are_not_run(tmp_path):
    releases, _ = page_module.load_releases(["imdb"], write_imdb_release(tmp_path))
    r = releases["imdb"]
    results = {"imdb": mturk.reanalyse(r.main, r.cl_rerun, r.cleanlab, "imdb")}
    comparison = compare_with_paper(page_module.ours_long(results), reported("lnlfn", "mturk"),
                                    page_module.COMPARISON_KEYS)
    claims = page_module.release_claims(comparison, results, {"amazon": "absent: Amazon not found. Looked for:\n  /x"})
    by_dataset = {d: [c for c in claims if page_module.PAPER_FACTS[d]["label"] in c.statement] for d in ("imdb",
                                                                                                       "amazon")}
    assert all(c.holds is None and "not run" in c.detail and "/x" in c.detail for c in by_dataset["amazon"])
    assert all(isinstance(c.holds, bool) for c in by_dataset["imdb"]) and len(by_dataset["imdb"]) == 7
    # an empty comparison (nothing of ours to set beside the paper) is "not run", never "does not hold"
    assert page_module._matches(comparison.iloc[:0], 0) is None


def test_fig5_losses_groups_and_claim():
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.7, 0.3], [0.5, 0.5]])
    labels = np.array([0, 0, 1, 1, 0])
    verdicts = pd.Series({11: C, 12: NE, 13: C})  # items 10 and 14 were never hypothesized
    losses = page_module.fig5_losses(probs, labels, [10, 11, 12, 13, 14], verdicts, seed=0)
    counts = losses.groupby("group", sort=False).size()
    assert counts.to_dict() == {page_module.FIG5_GROUPS[0]: 2, page_module.FIG5_GROUPS[1]: 2,
                                page_module.FIG5_GROUPS[2]: 1, page_module.FIG5_GROUPS[3]: 2}
    correctable = losses[losses["group"] == page_module.FIG5_GROUPS[1]]
    assert correctable["item"].tolist() == [1, 3] and correctable["loss"].tolist() == pytest.approx(
        [-np.log(0.6), -np.log(0.3)])
    summary = page_module.fig5_summary(losses)
    assert summary.loc[page_module.FIG5_GROUPS[3], "Wasserstein to clean"] == 0
    fig5 = page_module.Fig5Data(losses, summary, "toy")
    claim = page_module.fig5_claim(fig5)
    w = summary["Wasserstein to clean"]
    assert claim.holds == bool(w[page_module.FIG5_GROUPS[1]] < w[page_module.FIG5_GROUPS[0]])
    assert page_module.fig5_claim(None, "absent: IMDB (aclImdb) not found.").holds is None
    no_errors = page_module.fig5_losses(probs, labels, [10, 11, 12, 13, 14], pd.Series({12: NE}))
    assert page_module.fig5_claim(page_module.Fig5Data(no_errors, page_module.fig5_summary(no_errors), "toy")
                                  ).holds is None


def tiny_analogue(tmp_path):
    """A VaderAnalogue from hand-made rater panels (as test_mturk's round trip), written and read back."""
    rng = np.random.default_rng(0)
    n = 30
    annotations = rng.integers(0, 3, size=(n, 10))
    labels = annotations[:, :5].sum(1) % 3
    idx = np.arange(100, 100 + n)
    cl_mask, fme_mask, top = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    cl_mask[:12], fme_mask[3:15], top[3:9] = True, True, True
    guessed = (labels + 1) % 3
    flagged = {"BL_CL": cl_mask, "FML_1": fme_mask, "FME": fme_mask, "FME_TOP": top, "FME_CL": top}
    pred = {"BL_CL": guessed, **{m: labels for m in ("FML_1", "FME", "FME_TOP", "FME_CL")}}
    paths = mturk.vader_panel_release(tmp_path, idx=idx, ids=[f"vader:{i}" for i in idx], labels=labels,
                                      annotations=annotations, flagged=flagged, pred=pred)
    analogue = page_module.VaderAnalogue(labels, idx, annotations, flagged, guessed, np.full((n, 3), 1 / 3),
                                         mturk.PANELS, 12, 6, pd.DataFrame(), "toy", paths)
    r = page_module.read_written_release(paths)
    return analogue, mturk.reanalyse(r.main, r.cl_rerun, r.cleanlab, "amazon")


def test_analogue_claims_read_back_and_jaccard_not_run(tmp_path):
    analogue, result = tiny_analogue(tmp_path)
    assert (tmp_path / "vader_mturk_cl_rerun.csv").read_bytes().startswith(b"\xef\xbb\xbf")  # as released
    claims = page_module.analogue_claims(analogue, result)
    assert claims[0].holds is True and "DIFFERENT" not in claims[0].detail
    assert claims[-1].holds is True  # the FME top-6 and FME+CL sets are the same here
    nan = page_module.analogue_claims(analogue, replace(result, jaccard9=float("nan")))
    assert nan[-1].holds is None and nan[-1].detail.startswith("not run")


def test_kappa_interval_keeps_each_items_votes_together():
    """cleanlab's JSON and the rerun CSV list CL's items in different orders: pair them by id, not by row."""
    old = pd.DataFrame({"id": list("abcdef"), "votes_x": [5, 0, 3, 2, 4, 1], "votes_y": [0, 5, 2, 3, 1, 4]})
    new = pd.DataFrame({"id": list("abcdef"), "votes_x": [5, 5, 0, 0, 4, 1], "votes_y": [0, 0, 5, 5, 1, 4]})
    aligned = mturk.kappa_difference_interval(old, new, 200, seed=1)
    shuffled = new.iloc[[3, 0, 5, 1, 4, 2]].reset_index(drop=True)
    assert np.allclose(mturk.kappa_difference_interval(old, shuffled, 200, seed=1), aligned)
    with pytest.raises(ConfigError, match="same items"):
        mturk.kappa_difference_interval(old, new.assign(id=list("abcdeg")), 10)
