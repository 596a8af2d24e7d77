"""LNLFN's rehearsal files read back through the real loaders (no notebooks are run here)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from lnlfn import mturk, rehearsal
from lnlfn.benchmarks import make_benchmark
from lnlfn.data import UNIVERSAL_TAGS, load_lnlfm_mturk, load_text_dataset
from shared.paths import REPO_ROOT
from shared.preflight import preflight
from shared.run import parse_args, plan_jobs
from shared.text.models import resolve_model_dir
from shared.text.tiny_models import architecture, write_tiny_model


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The rehearsal's data files (the models are checked separately: the MiniLM copy is 90 MB)."""
    path = tmp_path_factory.mktemp("rehearsal")
    splits, crowd = rehearsal.tweetnlp_files()
    rehearsal.formats.write_tweetnlp(path, splits, crowd)
    rehearsal.formats.write_snli(path, rehearsal.snli_files())
    reviews = rehearsal.imdb_reviews()
    rehearsal.formats.write_imdb(path, reviews)
    rehearsal.write_imdb_release(path, reviews)
    lines = rehearsal.amazon_lines()
    rehearsal.formats.write_amazon(path, lines)
    rehearsal.write_amazon_release(path, lines)
    return path


def test_tweetnlp_tokens_crowd_and_benchmarks(root):
    ds = load_text_dataset("tweetnlp", data_dir=root, crowd=True)
    assert ds.meta["n_tweets"] == sum(rehearsal.TWEETS.values()) and ds.annotations.shape == (len(ds), 5)
    assert set(ds.labels) == set(range(len(UNIVERSAL_TAGS)))  # every universal tag occurs
    assert ((ds.annotations >= 0).sum(1) >= 3).all() and (ds.annotations == -1).any()
    assert (ds.annotations != ds.labels[:, None]).any(axis=1).mean() > 0.2  # the VADER raters dissent
    for bench in ("tweetnlp5", "tweetnlpM"):
        noised = make_benchmark(bench, ds)
        assert noised.noised.any() and set(noised.kind[noised.noised]) <= {"dissenting_worker", "dissenting_label",
                                                                           "crowd_majority"}


def test_snli_pairs_five_labels_and_skipped_pairs(root):
    ds = load_text_dataset("snli", data_dir=root)
    assert ds.annotations.shape == (len(ds), 5) and (ds.annotations >= 0).all()
    assert ds.meta["skipped"]["train"] >= rehearsal.SNLI_ONE_LABEL  # one-label pairs (and "-" gold) are skipped
    assert {len(ds.indices(s)) for s in ("val", "test")} <= set(range(130, 151))
    votes = np.stack([(ds.annotations == k).sum(1) for k in range(3)], 1)
    assert (votes[np.arange(len(ds)), ds.labels] >= 3).all()  # gold is a 3-of-5 majority
    assert all(isinstance(t, tuple) and len(t) == 2 for t in ds.texts)
    assert make_benchmark("snli5", ds).noised.any()


def test_imdb_with_cleanlab_arrays_and_amazon(root):
    ds = load_text_dataset("imdb", data_dir=root)
    assert ds.split_counts() == rehearsal.IMDB_SIZES
    test = ds.split == "test"
    named = ds.columns["cl_index"][test] >= 0  # as in the release, the index repeats names and misses reviews
    assert (~named).sum() == rehearsal.IMDB_REPEATED_NAMES == ds.meta["cl_reviews_without_probs"]
    assert ds.meta["cl_repeated_names"] == rehearsal.IMDB_REPEATED_NAMES
    assert np.isnan(ds.columns["cl_pred_probs"][test][~named]).all()
    assert not np.isnan(ds.columns["cl_pred_probs"][test][named]).any()
    cl = mturk.imdb_cl_probs(root)
    assert cl.probs.shape == (250 - rehearsal.IMDB_REPEATED_NAMES, 2) and np.allclose(cl.probs.sum(1), 1, atol=2e-3)
    assert cl.n_left_out == rehearsal.IMDB_REPEATED_NAMES and "no cleanlab probabilities" in cl.note
    assert (cl.probs.argmax(1) == cl.labels).mean() > 0.53  # the n-gram model learned something (0.55 on 247)
    assert len(ds.meta["cl_mturk"]) > 0 and (ds.meta["cl_mturk"]["row"] >= 0).all()
    amazon = load_text_dataset("amazon", data_dir=root, limit=250000)
    assert len(amazon) == rehearsal.AMAZON_LINES and set(amazon.labels) == {0, 1, 2}
    assert not any("\n" in t for t in amazon.texts) and any("__newline__" in t for t in amazon.texts)


@pytest.mark.parametrize("dataset", ["imdb", "amazon"])
def test_mturk_release_reanalyses(root, dataset):
    rerun = root / "lnlfm" / "mturk" / f"{dataset}_mturk_cl_rerun.csv"
    assert rerun.read_bytes().startswith(b"\xef\xbb\xbf")  # the released rerun CSVs carry a byte-order mark
    release = load_lnlfm_mturk(dataset, data_dir=root)
    cleanlab = mturk.load_cleanlab_mturk(dataset, data_dir=root)
    result = mturk.reanalyse(release.main, release.cl_rerun, cleanlab, dataset)
    assert int(result.grid.loc["Total", "Total"]) == len(release.cl_rerun) == len(cleanlab) > 0
    t8 = result.table8.set_index("method")
    assert (t8["k"] == len(cleanlab)).all()  # FML and FME are taken at CL's count
    assert -1 <= result.kappa["old"] < result.kappa["new"] <= 1  # the new protocol's workers agree more


def test_files_are_deterministic(root, tmp_path):
    splits, crowd = rehearsal.tweetnlp_files()
    assert crowd == (root / "tweetnlp" / "hovy2014_crowd.tsv").read_text()
    rehearsal.write_imdb_release(tmp_path, rehearsal.imdb_reviews())
    for name in ("lnlfm/mturk/imdb_mturk_main.csv", "label-errors/mturk/imdb_mturk.json"):
        assert (tmp_path / name).read_text() == (root / name).read_text()


def test_tiny_models_load_offline_with_their_architecture(tmp_path):
    import transformers

    corpus = ["the film was great", "a dull , boring movie", "@user lol http://t.co/x"]
    for name, model_type in (("microsoft/deberta-v3-base", "deberta-v2"), ("roberta-base", "roberta"),
                             ("xlnet-base-cased", "xlnet"), ("bert-base-cased", "bert")):
        write_tiny_model(tmp_path / "models" / name, architecture(name), corpus)
        path = resolve_model_dir(name, data_dir=tmp_path)
        assert json.loads((path / "config.json").read_text())["model_type"] == model_type
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        assert tokenizer.is_fast and tokenizer.unk_token_id not in tokenizer("the film was great")["input_ids"]
    assert set(rehearsal.full_profile_models()) >= {"microsoft/deberta-v3-base", "xlnet-large-cased"}


def test_preflight_finds_the_full_profiles_data_in_the_rehearsal_folder(root):
    """Every dataset and MTurk file the full profile reads is located where the rehearsal wrote it; only the
    model folders (not written by this fixture) are reported, as errors where a notebook fine-tunes one."""
    args = parse_args(["lnlfn", "--profile", "full", "-f", str(REPO_ROOT / "lnlfn/params/rehearsal.yaml"),
                       "-p", "data_dir", str(root)])
    report = preflight(plan_jobs(args, "full", root / "runs"), "full", has_cuda=True)
    messages = list(report.problems) + list(report.warnings)
    assert messages and all("pre-trained model" in m for m in messages), report.text()
    assert {"MTurk CSVs (imdb)", "aclImdb test (Fig. 5)", "cleanlab IMDB probabilities (Fig. 5)"} <= set(
        report.checked["lnlfn/04_mturk_reanalysis.ipynb"])
    assert "tweetnlp with crowd tags" in report.checked["lnlfn/01_noise_realism.ipynb"]
    empty = preflight(plan_jobs(parse_args(["lnlfn", "--profile", "full", "--only", "04_*", "-p", "data_dir",
                                            str(root / "nothing")]), "full", root / "runs"), "full", has_cuda=True)
    assert empty.ok and len(empty.warnings) == 6  # 04 skips what is absent: warned, not stopped
