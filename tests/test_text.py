"""shared.text: TF-IDF + SVD features and the tiny offline stand-ins of pre-trained models.

(The MiniLM embeddings and n-gram features are tested with LNLFN's scoring, ``tests/lnlfn/test_scoring.py``;
the model-folder lookup with its fine-tuning, ``tests/lnlfn/test_finetune.py``.)
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from shared.errors import ConfigError
from shared.text.encoders import tfidf_svd_features
from shared.text.models import load_pretrained
from shared.text.tiny_models import ARCHITECTURES, architecture, write_tiny_model

TRAIN = [f"{verb} the {noun} {adverb}" for verb in ("bake", "paint", "water", "clean", "sand")
         for noun in ("cake", "fence", "plants", "kitchen") for adverb in ("slowly", "today", "again")]


def test_tfidf_svd_features_are_unit_rows_fitted_on_train_only():
    Z_train, Z_test, Z_empty = tfidf_svd_features(TRAIN, ["bake the fence", "unseen words only"], [], dim=8)
    assert Z_train.shape == (60, 8) and Z_test.shape == (2, 8) and Z_empty.shape == (0, 8)
    assert all(Z.dtype == np.float32 for Z in (Z_train, Z_test))
    np.testing.assert_allclose(np.linalg.norm(Z_train, axis=1), 1.0, atol=1e-5)
    assert np.linalg.norm(Z_test[0]) == pytest.approx(1.0, abs=1e-5)
    assert not Z_test[1].any()  # no training n-gram: a zero row
    again = tfidf_svd_features(TRAIN, ["bake the fence", "unseen words only"], dim=8)
    np.testing.assert_array_equal(again[1], Z_test)  # deterministic for a seed
    # the test texts do not change the fit
    np.testing.assert_array_equal(tfidf_svd_features(TRAIN, ["paint"], dim=8)[0], Z_train)


def test_tfidf_svd_features_check_their_arguments():
    with pytest.raises(ConfigError, match="use dim <= 3"):
        tfidf_svd_features(["bake a cake", "paint", "sand"], dim=4)
    with pytest.raises(ConfigError, match="train_texts is empty"):
        tfidf_svd_features([], ["a"])
    with pytest.raises(ConfigError, match="positive integer"):
        tfidf_svd_features(TRAIN, dim=0)
    with pytest.raises(ConfigError, match="wrap it in a list"):
        tfidf_svd_features("bake a cake")


@pytest.mark.parametrize("name, arch", [
    ("bert-base-uncased", "bert"), ("xlnet-base-cased", "xlnet"), ("roberta-base", "roberta"), ("gpt2", "gpt2"),
    ("albert-base-v2", "albert"), ("t5-base", "t5"), ("facebook/bart-base", "bart"),
    ("microsoft/deberta-v3-base", "deberta-v2"), ("xlnet-large-cased", "xlnet"), ("bert-base-cased", "bert")])
def test_architecture_of_hub_names(name, arch):
    assert architecture(name) == arch


def test_architecture_of_an_unknown_name_is_a_config_error():
    with pytest.raises(ConfigError, match="no tiny stand-in architecture for model 'llama'"):
        architecture("llama")
    with pytest.raises(ConfigError, match="valid tiny model architectures"):
        write_tiny_model("unused", "llama", TRAIN)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_tiny_models_load_offline_as_sequence_classifiers(arch, tmp_path):
    import transformers

    folder = write_tiny_model(tmp_path / arch, arch, TRAIN)
    assert json.loads((folder / "config.json").read_text())["model_type"] == arch
    tokenizer, model = load_pretrained(folder, task="sequence", num_labels=3)
    assert tokenizer.is_fast and model.config.model_type == arch
    assert type(model).__name__.endswith("ForSequenceClassification")
    assert tokenizer.unk_token_id not in tokenizer("bake the cake today")["input_ids"]
    assert isinstance(transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True), type(tokenizer))
    assert model.num_parameters() < 300_000  # one layer of width 32


def test_load_pretrained_names_its_tasks(tmp_path):
    with pytest.raises(ConfigError, match="valid tasks: seq2seq, sequence, token"):
        load_pretrained(tmp_path, task="generation", num_labels=2)
    with pytest.raises(ConfigError, match="'sequence' needs the num_labels"):
        load_pretrained(tmp_path, task="sequence")
    with pytest.raises(ConfigError, match="'seq2seq' takes no num_labels"):
        load_pretrained(tmp_path, task="seq2seq", num_labels=2)


def test_seq2seq_keeps_the_checkpoints_language_model_head(tmp_path):
    folder = write_tiny_model(tmp_path / "t5", "t5", TRAIN)
    _, model = load_pretrained(folder, task="seq2seq")
    assert type(model).__name__ == "T5ForConditionalGeneration"
    assert model.lm_head.weight.data_ptr() == model.shared.weight.data_ptr()  # tied, as t5-base: nothing new
