"""lnlfn.mturk: Tables 2, 6, 8, 9 from hand-made vote tables with known answers, and the VADER fixture's round trip."""
import json

import numpy as np
import pandas as pd
import pytest

from lnlfn import mturk
from lnlfn.data import read_cleanlab_mturk, read_lnlfm_cl_rerun, read_lnlfm_main
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.metrics.agreement import CORRECTABLE as C, NON_AGREEMENT as NA, NON_ERROR as NE
from shared.report import reported


# ------------------------------------------------------------------------------------------ IMDB (binary)
def imdb_cleanlab():
    """Old protocol, 4 items: given/guessed/neutral/off-topic votes (5 each)."""
    return pd.DataFrame({
        "id": ["test/pos/1_9", "test/neg/2_1", "test/pos/3_7", "test/neg/4_2"],
        "given_original_label": ["Positive", "Negative", "Positive", "Negative"],
        "our_guessed_label": ["Negative", "Positive", "Negative", "Positive"],
        "mturk_given": [0, 3, 1, 2], "mturk_guessed": [4, 1, 1, 0],
        "mturk_neutral": [1, 1, 3, 0], "mturk_off_topic": [0, 0, 0, 3]})


def imdb_rerun():
    """New protocol on the same items, in another order (joined on id_cl)."""
    return pd.DataFrame({
        "id": [200002, 212501, 212503, 200004],
        "id_cl": ["test/neg/2_1", "test/pos/1_9", "test/pos/3_7", "test/neg/4_2"],
        "label": [0, 1, 1, 0], "given_original_label": ["Negative", "Positive", "Positive", "Negative"],
        "mturk_given": [1, 0, 4, 1], "mturk_guessed": [4, 5, 0, 2], "mturk_neutral": [0, 0, 1, 2],
        "mturk_off_topic": [0, 0, 0, 0]})


def test_imdb_protocols_and_table2():
    old = mturk.old_protocol(imdb_cleanlab(), "imdb")
    # item 1: 4 for the guessed label -> C; item 2: 3 for given -> NE; item 3: neutral majority -> NA (not a
    # task label on IMDB); item 4: off-topic majority -> NA
    assert old["category"].tolist() == [C, NE, NA, NA]
    # votes re-keyed by label: item 1 is Positive with 0 given / 4 guessed -> 4 negative, 0 positive
    assert old.loc[0, ["votes_negative", "votes_positive"]].tolist() == [4, 0]
    assert old.loc[1, ["votes_negative", "votes_positive"]].tolist() == [3, 1]
    new = mturk.new_protocol(imdb_rerun(), "imdb")
    assert new["id"].tolist() == ["test/neg/2_1", "test/pos/1_9", "test/pos/3_7", "test/neg/4_2"]
    assert new["category"].tolist() == [C, C, NE, NA] and new["lnlfm_id"].tolist()[0] == 200002
    grid = mturk.table2(old, new)
    assert grid.loc[C, C] == 1 and grid.loc[NE, C] == 1 and grid.loc[NA, NE] == 1 and grid.loc[NA, NA] == 1
    assert grid.loc[mturk.TOTAL].tolist() == [2, 1, 1, 4] and grid[mturk.TOTAL].tolist() == [1, 2, 1, 4]
    assert int(grid.loc[[C, NA, NE], [C, NA, NE]].to_numpy().sum()) == 4


def hand_kappa(counts):
    """Fleiss (1971) written out for the test."""
    counts = np.asarray(counts, dtype=float)
    n = counts[0].sum()
    p_i = ((counts ** 2).sum(1) - n) / (n * (n - 1))
    p_j = counts.sum(0) / counts.sum()
    return (p_i.mean() - (p_j ** 2).sum()) / (1 - (p_j ** 2).sum())


def test_table6_kappa_by_label_not_by_given_guessed():
    old = mturk.old_protocol(imdb_cleanlab(), "imdb")
    by_label = [[4, 0, 1, 0], [3, 1, 1, 0], [1, 1, 3, 0], [2, 0, 0, 3]]  # negative, positive, neutral, off-topic
    kappa = mturk.protocol_kappa(old, mturk.new_protocol(imdb_rerun(), "imdb"))
    assert kappa["old"] == pytest.approx(hand_kappa(by_label), abs=1e-12)
    # the worked numbers: P_i = (0.6, 0.3, 0.3, 0.4), p_j = (0.5, 0.1, 0.25, 0.15)
    assert kappa["old"] == pytest.approx((0.4 - 0.345) / (1 - 0.345), abs=1e-12)
    raw = [[0, 4, 1, 0], [3, 1, 1, 0], [1, 1, 3, 0], [2, 0, 0, 3]]  # given, guessed, ... unmapped: another value
    assert hand_kappa(raw) != pytest.approx(kappa["old"])


def test_released_categories_counts_at_k_and_precision():
    main = pd.DataFrame({
        "idx": [1, 2, 3, 4, 5],
        "A_sent": [True, True, True, False, True], "A_result_mt": ["Correctable", "NA: Neutral", "Non-Error", "",
                                                                    "NA: Non-Agreement"],
        "B_sent": [False, True, False, True, True], "B_result_mt": ["", "NA: General", "", "Non-Error", "Correctable"]})
    cats = mturk.released_categories(main, "A")
    assert cats.to_dict() == {1: C, 2: NA, 3: NE, 5: NA}
    table = mturk.counts_at_k(main, {"first": "A", "second": "B", "missing": None}, extra={})
    first = table.iloc[0]
    assert (first["k"], first[C], first[NA], first[NE], first["errors"]) == (4, 1, 2, 1, 3)
    assert first["precision"] == pytest.approx(1 - 1 / 4)
    assert table.iloc[1][[C, NA, NE]].tolist() == [1, 1, 1]
    assert pd.isna(table.iloc[2]["k"]) and table.iloc[2]["column"] == "(not released)"
    with_extra = mturk.counts_at_k(main, {"CL": None}, extra={"CL": [NE, NE, C]})
    assert with_extra.iloc[0]["precision"] == pytest.approx(1 / 3)
    assert mturk.sent_jaccard(main, "A", "B") == pytest.approx(2 / 5)  # {2, 5} of {1, 2, 3, 4, 5}
    assert mturk.verdicts_by_item(main, ["B", "A"]).to_dict() == {2: NA, 4: NE, 5: C, 1: C, 3: NE}


def test_paper_numbers_are_consistent():
    """The reported CSV: precision = 1 - NE / k (Table 3 vs Table 8), and Table 2's grids add up."""
    paper = reported("lnlfn", "mturk")
    for ds, k in (("imdb", 1310), ("amazon", 1000)):
        t8 = paper[(paper["item"] == "Table 8") & (paper["dataset"] == ds) & (paper["metric"] == "count")]
        for method in ("CL", "FML", "FME"):
            counts = t8[t8["method"] == method].set_index("category")["value"]
            assert counts.sum() == k
            p3 = paper[(paper["item"] == "Table 3") & (paper["dataset"] == ds) & (paper["method"] == method)]
            assert abs(1 - counts[NE] / k - float(p3["value"].iloc[0])) <= 0.005 + 1e-9  # printed to 2 decimals
        for source, grid in paper[(paper["item"] == "Table 2") & (paper["dataset"] == ds)].groupby("source"):
            g = grid.pivot(index="category", columns="new_category", values="value")
            inner = g.loc[[C, NA, NE], [C, NA, NE]]
            assert (inner.sum(axis=1) == g.loc[[C, NA, NE], "Total"]).all()
            assert inner.to_numpy().sum() == g.loc["Total", "Total"] == k


# ------------------------------------------------------------------------------------------ Amazon (3 classes)
def amazon_cleanlab():
    return pd.DataFrame({
        "id": [10, 20, 30], "given_original_label": ["Neutral", "Positive", "Negative"],
        "our_guessed_label": ["Positive", "Negative", "Neutral"],
        "mturk_positive": [3, 0, 0], "mturk_negative": [1, 2, 1], "mturk_neutral": [1, 0, 3],
        "mturk_off_topic": [0, 3, 1]})


def amazon_rerun():
    return pd.DataFrame({
        "id": ["A-1", "B-2", "C-3"], "id_cl": [10, 20, 30], "given_original_label": ["Neutral", "Positive", "Negative"],
        # item 10: 3 negative votes = a replacement label, but not CL's guessed (positive) -> NA, not C
        "mturk_positive": [1, 1, 0], "mturk_negative": [3, 4, 0], "mturk_neutral": [1, 0, 5],
        "mturk_off_topic": [0, 0, 0]})


def test_amazon_correctable_needs_the_guessed_label():
    old = mturk.old_protocol(amazon_cleanlab(), "amazon")
    assert old["category"].tolist() == [C, NA, C]
    new = mturk.new_protocol(amazon_rerun(), "amazon", amazon_cleanlab())
    assert new["category"].tolist() == [NA, C, C]
    with pytest.raises(ConfigError, match="guessed label"):
        mturk.new_protocol(amazon_rerun(), "amazon")
    r = mturk.reanalyse(pd.DataFrame({"idx": [10], "FML_1_sent": [True], "FML_1_result_mt": ["NA: General"],
                                      "FME_sent": [True], "FME_result_mt": ["Non-Error"],
                                      "FME_TOP_sent": [True], "FME_TOP_result_mt": ["Non-Error"],
                                      "FME_CL_sent": [True], "FME_CL_result_mt": ["Non-Error"]}),
                        amazon_rerun(), amazon_cleanlab(), "amazon")
    assert r.table8.set_index("method").loc["CL", [C, NA, NE]].tolist() == [2, 1, 0]
    assert r.jaccard9 == 1.0
    long = r.long(ours_on="test")
    assert set(long["item"]) == {"Table 2", "Table 3", "Table 6", "Table 8", "Table 9"}
    assert long.query("item == 'Table 8' and metric == 'n_hypothesized'")["value"].tolist() == [3]
    assert (long["ours_on"] == "test").all()


def test_bad_inputs_fail_clearly():
    with pytest.raises(ConfigError, match="unknown MTurk layout"):
        mturk.old_protocol(imdb_cleanlab(), "snli")
    with pytest.raises(ConfigError, match="lacks column"):
        mturk.old_protocol(imdb_cleanlab().drop(columns=["mturk_neutral"]), "imdb")
    with pytest.raises(DataFormatError, match="'Mixed'"):
        mturk.old_protocol(imdb_cleanlab().assign(given_original_label="Mixed"), "imdb")
    with pytest.raises(ConfigError, match="guessed equals given"):
        mturk.old_protocol(amazon_cleanlab().assign(our_guessed_label="Neutral"), "amazon")
    with pytest.raises(DataFormatError, match="not in the cleanlab table"):
        mturk.new_protocol(amazon_rerun().assign(id_cl=[10, 20, 99]), "amazon", amazon_cleanlab())
    with pytest.raises(DataFormatError, match="disagrees"):
        mturk.new_protocol(imdb_rerun().assign(label=[1, 1, 1, 0]), "imdb")
    old = mturk.old_protocol(imdb_cleanlab(), "imdb")
    with pytest.raises(ConfigError, match="same items"):
        mturk.table2(old, old.iloc[:3])
    main = pd.DataFrame({"idx": [1], "A_sent": [True], "A_result_mt": [""]})
    with pytest.raises(DataFormatError, match="no MTurk result"):
        mturk.released_categories(main, "A")
    with pytest.raises(ConfigError, match="methods: A"):
        mturk.released_categories(main, "B")
    with pytest.raises(DataFormatError, match="unknown MTurk results"):
        mturk.released_categories(main.assign(A_result_mt="Fixable"), "A")
    with pytest.raises(DataNotFoundError, match=r"label-errors[\s\S]*cleanlab/label-errors"):
        mturk.load_cleanlab_mturk("imdb", data_dir="/nonexistent-data")


def test_load_cleanlab_mturk_reads_the_release_layout(tmp_path):
    folder = tmp_path / "label-errors" / "mturk"
    folder.mkdir(parents=True)
    (folder / "amazon_mturk.json").write_text(json.dumps([
        {"id": 10, "url": "u", "given_original_label": "Neutral", "our_guessed_label": "Positive",
         "mturk": {"positive": 3, "negative": 1, "neutral": 1, "off-topic": 0}}]))
    table = mturk.load_cleanlab_mturk("amazon", data_dir=tmp_path)
    assert mturk.old_protocol(table, "amazon")["category"].tolist() == [C]


# ------------------------------------------------------------------------------------------ Fig. 5
def test_loss_groups_and_flips():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    labels = np.array([0, 0, 1])
    flipped = mturk.flipped_labels(labels, 2, seed=3)
    assert (flipped != labels).all()
    three = mturk.flipped_labels(np.zeros(200, dtype=int), 3, seed=0)
    assert set(three) == {1, 2}
    data = mturk.loss_groups(probs, labels, {"errors": np.array([False, True, False]),
                                             "flipped": (np.array([True, False, True]), flipped)})
    assert data["group"].tolist() == ["errors", "flipped", "flipped"] and data["item"].tolist() == [1, 0, 2]
    assert data["loss"].tolist() == pytest.approx([-np.log(0.2), -np.log(0.1), -np.log(0.5)])
    with pytest.raises(ConfigError):
        mturk.loss_groups(probs, labels[:2], {"x": np.ones(3, dtype=bool)})


# ------------------------------------------------------------------------------------------ the VADER fixture
def test_vader_panel_release_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    n = 30
    annotations = rng.integers(0, 3, size=(n, 10))
    annotations[:5] = 2                     # unanimous positive
    labels = np.where(np.arange(n) < 5, 0, annotations[:, :5].sum(1) % 3)   # first 5: given negative -> C
    idx = np.arange(100, 100 + n)
    cl_mask = np.zeros(n, dtype=bool)
    cl_mask[:12] = True
    guessed = (labels + 1) % 3
    guessed[:5] = 2
    fme_mask = np.zeros(n, dtype=bool)
    fme_mask[3:15] = True
    top = np.zeros(n, dtype=bool)
    top[3:9] = True
    flagged = {"BL_CL": cl_mask, "FML_1": fme_mask, "FME": fme_mask, "FME_TOP": top, "FME_CL": top}
    pred = {"BL_CL": guessed, "FML_1": labels, "FME": labels, "FME_TOP": labels, "FME_CL": labels}
    paths = mturk.vader_panel_release(tmp_path, idx=idx, ids=[f"vader:{i}" for i in idx], labels=labels,
                                      annotations=annotations, flagged=flagged, pred=pred)
    main, methods = read_lnlfm_main(paths["main"], "amazon")
    assert methods == ("FML_1", "FME", "FME_TOP", "FME_CL") and len(main) == n
    assert main["has_votes"].tolist() == fme_mask.tolist()
    rerun = read_lnlfm_cl_rerun(paths["cl_rerun"], "amazon")
    cleanlab = read_cleanlab_mturk(paths["cleanlab"])
    assert len(rerun) == len(cleanlab) == cl_mask.sum()
    old = mturk.old_protocol(cleanlab, "amazon")
    new = mturk.new_protocol(rerun, "amazon", cleanlab)
    first, second = mturk.PANELS
    assert old["category"].tolist() == list(mturk.panel_verdicts(annotations[cl_mask], labels[cl_mask], first,
                                                                 guessed=guessed[cl_mask]))
    assert new["category"].tolist() == list(mturk.panel_verdicts(annotations[cl_mask], labels[cl_mask], second,
                                                                 guessed=guessed[cl_mask]))
    assert old["category"].tolist()[:5] == [C] * 5
    in_memory = mturk.panel_verdicts(annotations, labels, second)
    assert mturk.released_categories(main, "FME").tolist() == list(in_memory[fme_mask])
    r = mturk.reanalyse(main, rerun, cleanlab, "amazon")
    assert r.table8.set_index("method").loc["FME", "k"] == fme_mask.sum()
    assert r.kappa["old"] == pytest.approx(mturk.protocol_kappa(old, new)["old"])
    with pytest.raises(ConfigError, match="guessed label"):
        mturk.vader_panel_release(tmp_path, idx=idx, ids=idx, labels=labels, annotations=annotations,
                                  flagged=flagged, pred={**pred, "BL_CL": labels})
    with pytest.raises(ConfigError, match="5 workers"):
        mturk.panel_verdicts(annotations, labels, (0, 1, 2))
    with pytest.raises(ConfigError, match="rater columns"):
        mturk.panel_counts(annotations, (8, 9, 10, 11, 12))
