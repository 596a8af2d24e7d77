"""The paper's T5: trained to write the category's name, scored on 5 beams by exact string match (official
``train_t5``, ``validate_t5`` and ``get_wiki_tokenizer_and_label``), on a tiny random T5 (``shared.text.tiny_models``)."""
from __future__ import annotations

import pytest
import torch

from noisywikihow.plm import GENERATION, LabelGenerator, encode_texts, load_generator
from shared.errors import ConfigError
from shared.methods import TrainSetup, make_method
from shared.text.tiny_models import write_tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAMES = ["Baking Cakes", "Painting Fences", "Watering Plants", "Cleaning Ovens"]
TEXTS = ["bake a cake", "preheat the oven", "paint the fence", "sand the fence before you paint it",
         "water the plants every day", "fill the watering can", "scrub the oven door", "wipe the oven racks"]
LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
CORPUS = [*TEXTS, *(name.lower() for name in NAMES)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("t5-data")
    write_tiny_model(root / "models" / "t5-base", "t5", CORPUS)
    write_tiny_model(root / "models" / "facebook" / "bart-base", "bart", CORPUS)
    return root


def load(data_dir, names=NAMES) -> tuple[LabelGenerator, object]:
    torch.manual_seed(0)
    return load_generator("T5", names, data_dir=data_dir)


def trained(data_dir, epochs=40):
    """ERM as the full profile runs the base model (AdamW, gradient clipping at 3), at a from-scratch learning rate."""
    setup = TrainSetup(epochs=epochs, batch_size=4, lr=1e-2, optimizer="adamw", weight_decay=0.01, cosine=False,
                       device="cpu", topk=(1, 5), grad_clip=3.0, log_losses_at=(epochs - 1,))
    method = make_method("erm", lambda: load(data_dir)[0], len(NAMES), setup)
    X = encode_texts(load(data_dir)[1], TEXTS)
    return method, method.fit(X, LABELS, {"train": (X, LABELS.numpy())})


@pytest.fixture(scope="module")
def part_trained(data_dir) -> LabelGenerator:
    """15 epochs: some beams name categories, some do not; the texts' losses differ."""
    method, _ = trained(data_dir, epochs=15)
    return method.nets[0].eval()


def official_inputs(tokenizer) -> dict:
    return dict(tokenizer(TEXTS, padding="max_length", max_length=128, truncation=True, return_tensors="pt"))


def official_targets(tokenizer) -> tuple[torch.Tensor, list[str]]:
    """``get_wiki_tokenizer_and_label``: lower-cased names padded to 15, their decoded texts, padding -> -100."""
    ids = tokenizer([n.lower() for n in NAMES], padding="max_length", max_length=15, truncation=True,
                    return_tensors="pt")["input_ids"]
    texts = tokenizer.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True)
    ids[ids == tokenizer.pad_token_id] = -100
    return ids, texts


def test_targets_are_the_lower_cased_names_ending_in_eos(data_dir):
    net, tokenizer = load(data_dir)
    reference, texts = official_targets(tokenizer)
    assert torch.equal(net.targets, reference) and net.label_texts == texts == [n.lower() for n in NAMES]
    for row in net.targets:
        real = row[row != -100]
        assert real[-1] == tokenizer.eos_token_id and (row[len(real):] == -100).all()


def test_the_loss_is_the_official_call_on_128_token_inputs(part_trained):
    net, tokenizer = part_trained, part_trained.tokenizer
    reference_targets, _ = official_targets(tokenizer)
    X = encode_texts(tokenizer, TEXTS)
    assert X.shape[1] < 128
    with torch.no_grad():
        official = net.model(**official_inputs(tokenizer), labels=reference_targets[LABELS]).loss
        torch.testing.assert_close(net.loss(X, LABELS), official, atol=1e-5, rtol=0)
        rows = net.loss(X, LABELS, reduction="none")
        tokens = (reference_targets[LABELS] != -100).sum(1)
        assert rows.shape == (len(TEXTS),) and rows.std() > 0.05
        torch.testing.assert_close((rows * tokens).sum() / tokens.sum(), official, atol=1e-5, rtol=0)
    with pytest.raises(ConfigError, match="reduction"):
        net.loss(X, LABELS, reduction="sum")


def test_erm_teaches_it_to_write_the_labels(data_dir):
    method, result = trained(data_dir)
    h = result.history
    assert h["train_acc"].iloc[0] < 1 and h["train_acc"].iloc[-1] == 1.0, h[["train_loss", "train_acc"]]
    assert (h["train_top5"] >= h["train_acc"]).all()
    assert h["train_loss"].iloc[-1] < h["train_loss"].iloc[0] / 3
    losses = result.losses[len(h) - 1]
    assert losses.shape == (len(TEXTS),) and (losses >= 0).all() and losses.mean() < h["train_loss"].iloc[0]
    with pytest.raises(ConfigError, match="no logits"):
        method.predict_proba(encode_texts(load(data_dir)[1], TEXTS))


def test_ranking_is_the_official_exact_match_of_five_beams(part_trained):
    net, tokenizer = part_trained, part_trained.tokenizer
    X = encode_texts(tokenizer, TEXTS)
    with torch.no_grad():
        guesses = net.ranked(X, 7)
        beams = net.model.generate(**official_inputs(tokenizer), num_beams=5, num_return_sequences=5, max_length=15)
    preds = tokenizer.batch_decode(beams, skip_special_tokens=True, clean_up_tokenization_spaces=True)
    preds = [preds[i : i + 5] for i in range(0, len(preds), 5)]
    _, names = official_targets(tokenizer)
    assert guesses.shape == (len(TEXTS), 7) and (guesses[:, 5:] == -1).all()
    assert (guesses[:, 0] >= 0).any() and (guesses == -1)[:, :5].any()  # neither all matched nor none
    for row, beams_of_row in enumerate(preds):
        for label, name in enumerate(names):  # compute_top5: t == p[0] and t in p[:5]
            assert (guesses[row, 0] == label) == (beams_of_row[0] == name)
            assert (label in guesses[row, :5]) == (name in beams_of_row)
    assert GENERATION == {"num_beams": 5, "num_return_sequences": 5, "max_length": 15, "length_penalty": 1.0,
                          "early_stopping": False, "do_sample": False}


def test_methods_that_need_logits_refuse_it(data_dir):
    net, tokenizer = load(data_dir)
    X = encode_texts(tokenizer, TEXTS)
    with pytest.raises(ConfigError, match="no logits"):
        net(X)
    method = make_method("coteaching", lambda: load(data_dir)[0], len(NAMES), TrainSetup(epochs=1, device="cpu"),
                         forget_rate=0.2)
    with pytest.raises(ConfigError, match="'coteaching' method needs a network's logits; train it with 'erm'"):
        method.fit(X, LABELS)


def test_ambiguous_names_and_other_models_are_refused(data_dir):
    with pytest.raises(ConfigError, match="both written 'baking cakes'"):
        load(data_dir, names=["Baking Cakes", "Painting Fences", "baking cakes"])
    with pytest.raises(ConfigError, match="'bart' model; the paper generates labels with T5 only"):
        load_generator("facebook/bart-base", NAMES, data_dir=data_dir)
