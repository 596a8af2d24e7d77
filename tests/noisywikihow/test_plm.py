"""NoisywikiHow's PLM classifiers on tiny random stand-ins of the seven checkpoints (1 layer, width 32).

The stand-ins (``shared.text.tiny_models``) are written in the Hugging Face folder format under
``<tmp>/models/<hub id>``, where ``load_classifier`` looks for the real ones. Their default initialisation
(std 0.02) makes every text's logits almost the same, so the comparisons of two computations first redraw
the weights with std 0.3 (``loud``): the texts' logits then differ by far more than the tolerance.
"""
from __future__ import annotations

import shutil

import pytest
import torch

from noisywikihow.plm import PLMS, TextClassifier, encode_texts, load_classifier
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.text.tiny_models import architecture, write_tiny_model
from shared.training import predict_logits

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CORPUS = ["how to bake a cake", "preheat the oven to 350 degrees", "mix the flour and the sugar in a bowl",
          "paint the fence white", "sand the fence before you paint it", "water the plants every day"]
TEXTS = ["preheat the oven", "mix the flour and the sugar in a bowl", "paint", "water the plants every day twice"]
K = 5
NAMES = list(PLMS)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("nwh-data")
    for plm in PLMS.values():
        write_tiny_model(root / "models" / plm.hf_id, plm.architecture, CORPUS)
    return root


def load(name, data_dir, num_labels=K):
    torch.manual_seed(0)
    return load_classifier(name, num_labels=num_labels, data_dir=data_dir)


def loud(net: TextClassifier) -> TextClassifier:
    torch.manual_seed(1)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.3)
    return net.eval()


def official_inputs(tokenizer, arch: str) -> dict:
    """The official code's model inputs: padded to 128, with XLNet's segment ids (transformers 4.x returned them)."""
    types = {"return_token_type_ids": True} if arch == "xlnet" else {}
    return dict(tokenizer(TEXTS, padding="max_length", max_length=128, truncation=True, return_tensors="pt", **types))


def test_the_registry_names_the_papers_seven_checkpoints():
    assert {k: p.hf_id for k, p in PLMS.items()} == {
        "BERT": "bert-base-uncased", "XLNet": "xlnet-base-cased", "RoBERTa": "roberta-base", "GPT2": "gpt2",
        "ALBERT": "albert-base-v2", "T5": "t5-base", "BART": "facebook/bart-base"}
    assert all(architecture(p.hf_id) == p.architecture for p in PLMS.values())


@pytest.mark.parametrize("name", NAMES)
def test_loads_offline_and_maps_ids_to_logits(name, data_dir):
    net, tokenizer = load(name, data_dir)
    assert net.arch == PLMS[name].architecture and type(net.model).__name__.endswith("ForSequenceClassification")
    X = encode_texts(tokenizer, TEXTS)
    assert X.dtype == torch.int64 and X.shape[0] == len(TEXTS)
    assert net(X).shape == (len(TEXTS), K) and net.features(X).shape == (len(TEXTS), 32)
    assert predict_logits(net, X, batch_size=3).shape == (len(TEXTS), K)  # the training loop's evaluation
    if name == "GPT2":  # no pad token of its own: <|endoftext|>, as the official code
        assert tokenizer.pad_token == tokenizer.eos_token and net.model.config.pad_token_id == tokenizer.eos_token_id
    if name == "XLNet":  # pads on the left: every row ends with <sep> <cls>
        assert tokenizer.padding_side == "left" and (X[:, -1] == tokenizer.cls_token_id).all()


@pytest.mark.parametrize("name", NAMES)
def test_dynamic_padding_gives_the_logits_of_padding_to_128(name, data_dir):
    net, tokenizer = load(name, data_dir)
    net = loud(net)
    full = official_inputs(tokenizer, net.arch)
    X = encode_texts(tokenizer, TEXTS)
    with torch.no_grad():
        reference = net.model(**full).logits
        assert (reference - reference.mean(0)).abs().max() > 0.05  # the texts' logits do differ
        torch.testing.assert_close(net(X), reference, atol=1e-5, rtol=0)
        alone = torch.cat([net(encode_texts(tokenizer, [t])) for t in TEXTS])
        torch.testing.assert_close(alone, reference, atol=1e-5, rtol=0)
        net.dynamic_padding = False
        assert X.shape[1] < 128
        torch.testing.assert_close(net(full["input_ids"]), reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_features_feed_the_classifier_and_mixup_with_lam_1_is_forward(name, data_dir):
    net, tokenizer = load(name, data_dir)
    net = loud(net)
    X = encode_texts(tokenizer, TEXTS)
    with torch.no_grad():
        logits = net(X)
        torch.testing.assert_close(net.classifier(net.features(X)), logits, atol=1e-5, rtol=0)
        torch.testing.assert_close(net.mixup_forward(X, X.flip(0), 1.0), logits, atol=1e-5, rtol=0)
        assert (net.mixup_forward(X, X.flip(0), 0.5) - logits).abs().max() > 1e-3
    with pytest.raises(ConfigError, match="must have one shape"):
        net.mixup_forward(X, X[:, :-1], 0.5)


@pytest.mark.parametrize("name", NAMES)
def test_runs_under_bf16_autocast(name, data_dir):
    net, tokenizer = load(name, data_dir)
    X = encode_texts(tokenizer, TEXTS)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(net(X), torch.arange(len(TEXTS)) % K)
        loss = loss + net.mixup_forward(X, X.flip(0), 0.3).float().square().mean()
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)


@pytest.mark.parametrize("name", NAMES)
def test_a_few_adamw_steps_reduce_the_loss(name, data_dir):
    """Two toy classes (baking vs painting events), trained as the training loop does: net(X[idx]), CE, AdamW
    (at a from-scratch learning rate: the tiny models are random)."""
    net, tokenizer = load(name, data_dir, num_labels=2)
    texts = ["bake a cake", "preheat the oven", "mix the flour", "bake the cake for 30 minutes",
             "paint the fence", "sand the fence", "paint it white", "paint the fence before you sand it"]
    X, y = encode_texts(tokenizer, texts), torch.tensor([0] * 4 + [1] * 4)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)

    def loss() -> torch.Tensor:
        return torch.nn.functional.cross_entropy(predict_logits(net, X), y)

    before = loss()
    net.train()
    for step in range(20):
        idx = torch.randperm(len(X), generator=torch.Generator().manual_seed(step))[:4]
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(net(X[idx]), y[idx]).backward()
        optimizer.step()
    assert loss() < before / 2


def test_encode_texts_pads_to_the_longest_and_truncates_at_max_length(data_dir):
    _, bart = load("BART", data_dir)
    X = encode_texts(bart, ["paint", "paint the fence white"])
    assert X.shape == (2, len(bart("paint the fence white")["input_ids"]))
    assert (X[0, 3:] == bart.pad_token_id).all() and (X[1] != bart.pad_token_id).all()
    long = encode_texts(bart, [" ".join(["paint the fence"] * 60)], max_length=16)
    assert long.shape == (1, 16) and long[0, -1] == bart.eos_token_id  # the </s> survives truncation


def test_encode_texts_refuses_what_would_break_the_mask(data_dir):
    net, gpt2 = load("GPT2", data_dir)
    with pytest.raises(ConfigError, match="contain special tokens literally.*#1"):
        encode_texts(gpt2, ["paint", "paint <|endoftext|> the fence"])  # GPT-2's pad is its <|endoftext|>
    with pytest.raises(ConfigError, match="have no tokens"):
        encode_texts(gpt2, ["paint", ""])
    with pytest.raises(ConfigError, match="wrap it in a list"):
        encode_texts(gpt2, "paint")
    _, bart = load("BART", data_dir)
    with pytest.raises(ConfigError, match="contain special tokens literally"):
        encode_texts(bart, ["paint </s> the fence"])  # a second </s>: BART's representation token
    gpt2.pad_token = None
    with pytest.raises(ConfigError, match="load_classifier"):
        encode_texts(gpt2, ["paint"])


def test_a_missing_model_names_its_folder_and_never_downloads(tmp_path):
    with pytest.raises(DataNotFoundError) as error:
        load_classifier("BART", data_dir=tmp_path)
    folder = tmp_path / "models" / "facebook" / "bart-base"
    assert str(folder) in str(error.value) and "huggingface-cli download facebook/bart-base" in str(error.value)


def test_weights_left_as_git_lfs_pointers_say_git_lfs_pull(tmp_path, data_dir):
    clone = tmp_path / "models" / "roberta-base"
    shutil.copytree(data_dir / "models" / "roberta-base", clone)
    weights = clone / "model.safetensors"
    write_lfs_pointer(weights, weights.read_bytes())
    with pytest.raises(DataFormatError, match=r"model.safetensors is a git-LFS pointer[\s\S]*git lfs pull"):
        load_classifier("RoBERTa", data_dir=tmp_path)


def test_other_architectures_are_refused(tmp_path):
    write_tiny_model(tmp_path / "models" / "microsoft" / "deberta-v3-base", "deberta-v2", CORPUS)
    with pytest.raises(ConfigError, match="'deberta-v2' model.*BART \\(facebook/bart-base\\)"):
        load_classifier("microsoft/deberta-v3-base", data_dir=tmp_path)
