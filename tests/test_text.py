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


# --------------------------------------------------------------------------- padded widths (shared.text.widths)
def test_batches_in_order_are_as_wide_as_their_longest_text():
    from shared.text.widths import mean_batch_width

    assert mean_batch_width([1, 5, 2, 2, 9], 2, shuffled=False) == pytest.approx((5 + 2 + 9) / 3)
    assert mean_batch_width([3, 7], 8, shuffled=False) == mean_batch_width([3, 7], 8, shuffled=True) == 7


@pytest.mark.parametrize("batch", [1, 2, 4, 6])
def test_shuffled_batches_are_as_wide_as_the_mean_over_every_shuffle(batch):
    """The closed form equals the brute force over all 720 orders of six lengths (ties included), the last batch
    partial where the batch does not divide six."""
    import itertools

    from shared.text.widths import mean_batch_width

    lengths = [4, 9, 4, 1, 12, 6]
    every = [np.mean([max(order[i:i + batch]) for i in range(0, 6, batch)])
             for order in itertools.permutations(lengths)]
    assert mean_batch_width(lengths, batch, shuffled=True) == pytest.approx(np.mean(every))


def test_widths_check_their_arguments():
    from shared.text.widths import mean_batch_width, token_lengths

    with pytest.raises(ConfigError, match="batch must be >= 1"):
        mean_batch_width([3], 0, shuffled=True)
    with pytest.raises(ConfigError, match="at least one length"):
        mean_batch_width([], 4, shuffled=False)
    with pytest.raises(ConfigError, match="max_length must be >= 1"):
        token_lengths(None, ["a"], 0)


def test_token_lengths_count_special_tokens_and_stop_at_max_length(tmp_path):
    from shared.text.widths import token_lengths

    tokenizer, _ = load_pretrained(write_tiny_model(tmp_path / "bert", "bert", TRAIN), task="sequence", num_labels=2)
    texts = ["bake the cake", "paint the fence again " * 20]
    lengths = token_lengths(tokenizer, texts, 16)
    assert lengths[0] == len(tokenizer(texts[0])["input_ids"]) == 5  # [CLS] three words [SEP]
    assert lengths[1] == 16
    pairs = token_lengths(tokenizer, [("bake the cake", "today")], 128)
    assert pairs.tolist() == [len(tokenizer("bake the cake", "today")["input_ids"])]
    words = token_lengths(tokenizer, [["bake", "the", "cake"]], 128, split_into_words=True)
    assert words.tolist() == [5]
