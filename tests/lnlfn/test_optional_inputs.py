"""LNLFN's notebooks with optional inputs (full profile): a benchmark or model whose data the user lacks is skipped
with the reason, and claims about what was not run are "not run", never "does not hold"."""
import json

import numpy as np
import pytest

from lnlfn.experiments import (available_models, brief, claim_each, load_benchmark_data, prefer, skip_reason,
                               skipped_frame)
from lnlfn.formats import conll_text, snli_line, write_snli, write_tweetnlp
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.report import NotebookReport, verdict

SNLI = {split: "".join(snli_line(f"{split}{i}", "neutral", ["neutral"] * 5) for i in range(3))
        for split in ("train", "val", "test")}
TWEETS = {split: conll_text([[("so", "R"), ("good", "A")]]) for split in ("train", "val", "test")}


def test_benchmarks_whose_data_is_absent_are_skipped_with_the_reason(tmp_path):
    write_snli(tmp_path, SNLI)
    write_tweetnlp(tmp_path, TWEETS)  # no hovy2014_crowd.tsv: TweetNLP-5/M cannot be noised
    datasets, skipped = load_benchmark_data(["tweetnlp5", "tweetnlpM", "snli5", "vader5"], tmp_path)
    assert set(datasets) == {"snli", "vader"} and list(skipped) == ["tweetnlp5", "tweetnlpM"]
    assert all(r.startswith("absent: ") and "hovy2014_crowd.tsv" in r for r in skipped.values())
    assert brief(skipped["tweetnlp5"]).endswith("tweetnlp/hovy2014_crowd.tsv")
    assert skipped_frame(skipped)["benchmark"].tolist() == ["tweetnlp5", "tweetnlpM"]
    assert skipped_frame({}).empty
    (tmp_path / "snli_1.0" / "snli_1.0_dev.jsonl").write_bytes(b"\x80\x81 not utf-8\n")
    _, skipped = load_benchmark_data(["snli5", "vader5"], tmp_path)
    assert skipped["snli5"].startswith("unreadable: ") and "snli_1.0_dev.jsonl is not UTF-8 text" in skipped["snli5"]
    with pytest.raises(DataNotFoundError, match=r"imdb5: absent[\s\S]*amazon5: absent"):
        load_benchmark_data(["imdb5", "amazon5"], tmp_path / "nowhere")


def test_models_that_are_missing_or_lfs_pointers_are_skipped(tmp_path):
    models = tmp_path / "models"
    (models / "org" / "ok").mkdir(parents=True)
    (models / "org" / "ok" / "config.json").write_text("{}")
    (models / "org" / "cloned").mkdir(parents=True)
    (models / "org" / "cloned" / "config.json").write_text("{}")
    write_lfs_pointer(models / "org" / "cloned" / "model.safetensors", b"\0" * 4096)
    usable, skipped = available_models({"org/ok": {"label": "ok"}, "org/cloned": {"label": "c"},
                                        "org/absent": {"label": "a"}}, tmp_path)
    assert list(usable) == ["org/ok"] and usable["org/ok"] == {"label": "ok"}
    assert skipped["org/cloned"].startswith("unreadable: ") and "git lfs pull" in skipped["org/cloned"]
    assert skipped["org/absent"].startswith("absent: ")
    with pytest.raises(DataNotFoundError, match="org/absent"):
        available_models({"org/absent": {}}, tmp_path)


def test_claims_of_skipped_benchmarks_and_undefined_numbers_are_not_run(tmp_path):
    report = NotebookReport("lnlfn", "03_detection_main", tmp_path, "full")
    skipped = {"snli5": "absent: SNLI 1.0 not found. Looked for:\n  /d/snli_1.0/snli_1.0_train.jsonl\nDownload ..."}
    results = {"tweetnlp5": (verdict(0.5 >= 0.4, 0.5, 0.4), "FME 0.5, FML 0.4"),
               "tweetnlpM": (verdict(np.nan >= 0.4, np.nan, 0.4), "FME nan, FML 0.4")}
    claim_each(report, "FME beats FML on {bench} ({paper} analogue)", ["tweetnlp5", "tweetnlpM", "snli5", "vader5"],
               results, skipped)
    got = {c["claim"]: c for c in report.claims}
    assert got["FME beats FML on tweetnlp5 (TweetNLP-5 analogue)"]["verdict"] == "yes"
    assert got["FME beats FML on tweetnlpM (TweetNLP-M analogue)"]["verdict"] == "not run"  # NaN: not "no"
    snli = got["FME beats FML on snli5 (SNLI-5 analogue)"]
    assert snli["verdict"] == "not run" and snli["detail"].endswith("/d/snli_1.0/snli_1.0_train.jsonl")
    assert got["FME beats FML on vader5 (TweetNLP-5 analogue)"]["detail"].startswith("not run")
    report.finish()
    assert json.loads((tmp_path / "report.json").read_text())["claims_not_run"] == 3


def test_prefer_and_skip_reason():
    assert prefer("tweetnlpM", ["tweetnlp5", "tweetnlpM"]) == "tweetnlpM"
    assert prefer("tweetnlpM", ["snli5"]) == "snli5"
    with pytest.raises(ConfigError):
        prefer("tweetnlpM", [])
    assert skip_reason(DataNotFoundError("x")) == "absent: x" and skip_reason(DataFormatError("y")) == "unreadable: y"
