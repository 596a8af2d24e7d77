"""NoisywikiHow's pre-trained language models (PLMs) as plain networks for the project's training loop.

The paper (Section 4.2, Table 4) fine-tunes seven base-size PLMs on the 158-way event-intention task: max
length 128, AdamW, lr 3e-5, 10 epochs, batch 64. The official code (github.com/tangminji/NoisywikiHow,
``data/wiki_dataset.py`` and ``cmd_args.py``) loads them with transformers' ``*ForSequenceClassification``
classes. Here each one is a ``TextClassifier``: an ``nn.Module`` whose input is one LongTensor of token ids,
so ``shared.methods`` trains it like any other network (``net(X[idx])``, ``F.cross_entropy(logits, y)``).

    net, tokenizer = load_classifier("BART", num_labels=158)           # <data_dir>/models/facebook/bart-base
    X = encode_texts(tokenizer, texts)                                  # (n, L) int64, L <= 128
    logits = net(X[:64])                                                # (64, 158)

**Inputs.** ``X`` holds the tokenizer's ids (its special tokens included), padded with its pad id on its
padding side to the longest text (at most ``max_length``, longer texts truncated). The attention mask is
``X != pad id``; ``encode_texts`` guarantees that this is exact by refusing texts whose own tokens include a
special token (e.g. a literal ``<|endoftext|>``, GPT-2's pad, or ``</s>``, which BART and T5 read as the
sentence's end). No lengths are stored: every row is contiguous real tokens followed (or, for XLNet, preceded)
by padding.

**Dynamic padding.** The official code pads every text to 128 tokens. ``TextClassifier`` drops the columns
that are padding in every row of a batch first; wikiHow events are one short sentence, so this saves most
of the compute. The logits are the same up to float rounding for all seven architectures: padded keys are masked
out of attention; the positions of real tokens do not change (right padding, and XLNet's relative positions
under left padding); BART's and T5's decoders read their inputs causally, so the padding after the
``</s>`` whose state is classified never reaches it; GPT-2 is read at its last real token.

**Architecture notes** (``PLMS``):

* GPT-2 has no pad token: the tokenizer's ``pad_token`` and ``config.pad_token_id`` are set to its
  ``<|endoftext|>``, as the official code does; its logits are read at the last real token.
* XLNet pads on the left (its head reads the last position, the ``<cls>`` token) and gets the segment ids
  its tokenizer returned in transformers 4.x (the official code's version; 5.x returns none): 2 for
  ``<cls>``, 0 for the text (and for the masked padding, where the tokenizer has 3).
* T5 is, as in the paper, a ``LabelGenerator`` (``load_generator``): ``T5ForConditionalGeneration`` trained to
  write the lower-cased category name and scored on the 5 beams of a beam search by exact string match (the
  official ``train_t5`` and ``validate_t5``). Only the base method trains it (the official code has no other
  T5 training). ``load_classifier("T5")`` gives ``T5ForSequenceClassification`` instead (a classification head
  on the decoder state at the ``</s>``, like BART), which trains with every method.
* The key/value caches (GPT-2, BART, T5) and XLNet's memories serve generation only and are switched off.

bf16: ``load_classifier(..., bf16=True)`` runs the forward passes under bfloat16 autocast on a GPU (weights and
optimizer state stay float32), for any method of the training loop.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from shared.device import select_device
from shared.errors import ConfigError
from shared.methods.base import GenerativeNetwork
from shared.text.models import load_pretrained, resolve_model_dir

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class PLM(NamedTuple):
    """A PLM of the paper: its Hugging Face id (``<data_dir>/models/<hf_id>``) and transformers model type."""

    hf_id: str
    architecture: str


#: the paper's name -> checkpoint (Hugging Face ids from the official ``cmd_args.py``)
PLMS = {"BERT": PLM("bert-base-uncased", "bert"), "XLNet": PLM("xlnet-base-cased", "xlnet"),
        "RoBERTa": PLM("roberta-base", "roberta"), "GPT2": PLM("gpt2", "gpt2"),
        "ALBERT": PLM("albert-base-v2", "albert"), "T5": PLM("t5-base", "t5"),
        "BART": PLM("facebook/bart-base", "bart")}
ARCHITECTURES = tuple(p.architecture for p in PLMS.values())
MAX_LENGTH = 128  # the official tokenizer call: truncation=True, max_length=128
NUM_LABELS = 158
#: the final linear layer of each architecture's classification head
_CLASSIFIER = {"bert": "classifier", "albert": "classifier", "roberta": "classifier.out_proj",
               "xlnet": "logits_proj", "gpt2": "score", "bart": "classification_head.out_proj",
               "t5": "classification_head.out_proj"}
_XLNET_CLS_SEGMENT = 2
IGNORE = -100  # a target token the loss skips (transformers' convention)
#: the official T5 evaluation (``validate_t5``): beam search, 5 beams returned, at most 15 decoder tokens (the start
#: token included), length penalty 1.0 and no early stopping (the transformers 4.12 defaults the paper ran with)
GENERATION = {"num_beams": 5, "num_return_sequences": 5, "max_length": 15, "length_penalty": 1.0,
              "early_stopping": False, "do_sample": False}
LABEL_MAX_LENGTH = 15  # the official targets: the category's name tokenized with max_length 15


def encode_texts(tokenizer: PreTrainedTokenizerBase, texts, max_length: int = MAX_LENGTH) -> torch.Tensor:
    """Token ids (n, L) int64 of ``texts``, padded with the tokenizer's pad id to the longest, L <= max_length.

    The tokenizer adds its special tokens and pads on its own side (XLNet: left); texts longer than
    ``max_length`` tokens are truncated (the special tokens kept). Raises ConfigError for a tokenizer
    without a pad token (load it with ``load_classifier``), for texts with no token at all, and for texts
    whose own tokens include a special token (the mask ``ids != pad`` and BART's/T5's ``</s>`` lookup rely on
    the special tokens being exactly those the tokenizer adds). Texts are used as given: the official code
    loads its tokenizers with ``do_lower_case=True``, which the byte-level BPE ones ignore; lower-case the
    texts first to lower-case them for every model.
    """
    if isinstance(texts, str):
        raise ConfigError("texts must be a sequence of strings, not one string; wrap it in a list")
    texts = list(texts)
    if tokenizer.pad_token_id is None:
        raise ConfigError(f"{type(tokenizer).__name__} has no pad token; load the tokenizer with "
                          "noisywikihow.plm.load_classifier, which sets GPT-2's pad token to <|endoftext|>")
    if max_length <= tokenizer.num_special_tokens_to_add():
        raise ConfigError(f"max_length={max_length} leaves no room for text beside the tokenizer's "
                          f"{tokenizer.num_special_tokens_to_add()} special tokens; use the paper's {MAX_LENGTH}")
    enc = tokenizer(texts, padding="longest", truncation=True, max_length=max_length, return_tensors="pt")
    ids, real = enc["input_ids"].long(), enc["attention_mask"].bool()
    # unknown pieces may occur in any text; GPT-2's <|endoftext|> is its unk, eos and (here) pad token at once
    special = torch.tensor(sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
                                  | {tokenizer.pad_token_id}))
    extra = (torch.isin(ids, special) & real).sum(1) != tokenizer.num_special_tokens_to_add()
    for bad, problem in ((~real.any(1), "have no tokens"), (extra, "contain special tokens literally")):
        if bad.any():
            rows = bad.nonzero().flatten().tolist()
            raise ConfigError(f"{len(rows)} texts {problem}, e.g. #{rows[0]}: {texts[rows[0]]!r}; "
                              f"remove them or the tokens {tokenizer.all_special_tokens}")
    return ids


class _TokenInput:
    """What both wrappers do with token ids: the attention mask, dynamic padding and bf16 autocast. Needs the
    attributes ``pad_id``, ``padding_side``, ``dynamic_padding`` and ``bf16``."""

    def _autocast(self, ids: torch.Tensor):
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16 and ids.is_cuda)

    def _trim(self, ids: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
        """``ids`` (b, L) without the columns that are padding in every row of ``like`` (default ``ids``)."""
        if not self.dynamic_padding:
            return ids
        width = int((like if like is not None else ids).ne(self.pad_id).sum(1).max())
        return ids[:, :width] if self.padding_side == "right" else ids[:, ids.shape[1] - width:]

    def _mask(self, ids: torch.Tensor) -> torch.Tensor:
        """The attention mask (b, L) int64: 1 for real tokens, 0 for padding (as tokenizers return it)."""
        return ids.ne(self.pad_id).long()


class TextClassifier(_TokenInput, nn.Module):
    """A ``*ForSequenceClassification`` model that reads a LongTensor of token ids (``encode_texts``).

    Args:
        model: the transformers model (``load_classifier``); its ``config.model_type`` is one of
            ``ARCHITECTURES``.
        pad_id: the tokenizer's pad id (``ids != pad_id`` is the attention mask).
        padding_side: the tokenizer's, "right" or "left" (XLNet).
        dynamic_padding: drop the columns that are padding in every row of a batch before the model sees it
            (module docstring); False feeds the batch as stored (the official code pads to 128).
        bf16: on a GPU, run the forward passes under bfloat16 autocast (weights, gradients and optimizer state stay
            float32; logits are returned as float32); ignored on the CPU. The official code trains in float32.
    """

    def __init__(self, model: nn.Module, *, pad_id: int, padding_side: str, dynamic_padding: bool = True,
                 bf16: bool = False):
        super().__init__()
        arch = model.config.model_type
        if arch not in _CLASSIFIER:
            raise ConfigError(f"no TextClassifier for the {arch!r} architecture; supported: {ARCHITECTURES}")
        if padding_side not in ("right", "left"):
            raise ConfigError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
        self.model, self.arch = model, arch
        self.pad_id, self.padding_side, self.dynamic_padding = int(pad_id), padding_side, dynamic_padding
        self.bf16 = bf16

    @property
    def classifier(self) -> nn.Linear:
        """The head's final linear layer: ``forward(ids) == classifier(features(ids))``."""
        return self.model.get_submodule(_CLASSIFIER[self.arch])

    def _extras(self, ids: torch.Tensor) -> dict:
        """Inputs besides the ids and the mask: XLNet's segment ids (the last column is every row's <cls>)."""
        if self.arch != "xlnet":
            return {}
        segments = torch.zeros_like(ids)
        segments[:, -1] = _XLNET_CLS_SEGMENT
        return {"token_type_ids": segments}

    def _last_token(self, ids: torch.Tensor) -> torch.Tensor:
        """(b,) index of each row's last real token (right padding: its length - 1)."""
        return ids.ne(self.pad_id).sum(1) - 1

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (b, K) of token ids (b, L)."""
        ids = self._trim(ids)
        with self._autocast(ids):
            return self.model(input_ids=ids, attention_mask=self._mask(ids), **self._extras(ids)).logits.float()

    def features(self, ids: torch.Tensor) -> torch.Tensor:
        """(b, d): what the final linear layer ``classifier`` receives for ids (b, L): BERT/ALBERT the pooled
        [CLS] state, RoBERTa/BART/T5 the dense+tanh of the <s>/</s> state, XLNet the projected <cls> state,
        GPT-2 the last real token's state (in train mode with the head's dropout, as ``forward`` applies it)."""
        captured = []
        hook = self.classifier.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
        try:
            self.forward(ids)
        finally:
            hook.remove()
        (rep,) = captured
        if rep.dim() == 3:  # GPT-2 scores every position and keeps the last real token's
            rep = rep[torch.arange(len(rep), device=rep.device), self._last_token(self._trim(ids))]
        return rep

    def mixup_forward(self, ids_a: torch.Tensor, ids_b: torch.Tensor, lam: float) -> torch.Tensor:
        """Logits (b, K) of Mixup on input embeddings: ``lam * E(ids_a) + (1 - lam) * E(ids_b)``, position-wise.

        As the official ``BartCLSWithEmbeds`` (``data/wiki_dataset.py``): the attention mask is ``ids_a``'s,
        and BART's decoder input is the same mix of the embedded right-shifted ids, its representation taken
        at ``ids_a``'s ``</s>``. T5 is mixed the same way. The encoder-only models mix the embeddings of their
        single stack, read where ``forward`` reads ``ids_a`` (GPT-2: its last real token). ``lam=1`` gives
        ``forward(ids_a)``. Both id tensors are (b, L) rows of the same ``encode_texts`` tensor.
        """
        if ids_a.shape != ids_b.shape:
            raise ConfigError(f"ids_a {tuple(ids_a.shape)} and ids_b {tuple(ids_b.shape)} must have one shape: "
                              "rows of one encode_texts tensor (ids_b is usually ids_a[permutation])")
        with self._autocast(ids_a):
            return self._mixup_logits(ids_a, ids_b, lam).float()

    def _mixup_logits(self, ids_a: torch.Tensor, ids_b: torch.Tensor, lam: float) -> torch.Tensor:
        ids_a, ids_b = self._trim(ids_a), self._trim(ids_b, like=ids_a)
        embed = self.model.get_input_embeddings()
        mixed = lam * embed(ids_a) + (1 - lam) * embed(ids_b)
        mask = self._mask(ids_a)
        if self.arch in ("bart", "t5"):
            decoder = lam * embed(self._shift_right(ids_a)) + (1 - lam) * embed(self._shift_right(ids_b))
            stack = self.model.model if self.arch == "bart" else self.model.transformer
            hidden = stack(inputs_embeds=mixed, attention_mask=mask, decoder_inputs_embeds=decoder).last_hidden_state
            eos = ids_a.eq(self.model.config.eos_token_id)
            last_eos = (torch.arange(eos.shape[1], device=eos.device) * eos).argmax(1)
            return self.model.classification_head(hidden[torch.arange(len(hidden), device=hidden.device), last_eos])
        if self.arch == "gpt2":
            hidden = self.model.transformer(inputs_embeds=mixed, attention_mask=mask).last_hidden_state
            return self.model.score(hidden[torch.arange(len(hidden), device=hidden.device), self._last_token(ids_a)])
        return self.model(inputs_embeds=mixed, attention_mask=mask, **self._extras(ids_a)).logits

    def _shift_right(self, ids: torch.Tensor) -> torch.Tensor:
        """The decoder's input ids: ``ids`` shifted right behind the decoder start token (BART: </s>, T5: <pad>)."""
        config = self.model.config
        shifted = torch.full_like(ids, config.decoder_start_token_id)
        shifted[:, 1:] = ids[:, :-1]
        return shifted


class LabelGenerator(_TokenInput, GenerativeNetwork):
    """T5 writing the category's name, trained and scored as the paper's T5 (official ``train_t5``, ``validate_t5``).

    Args:
        model: a ``T5ForConditionalGeneration`` (``load_generator``).
        tokenizer: its tokenizer (pads on the right).
        class_names: (K,) the categories' names, index = label; they are lower-cased, as the official code does.
        dynamic_padding, bf16: see ``TextClassifier``.

    **Training** (``loss``): the target of a text with label y is the name of category y, lower-cased and tokenized
    to at most ``LABEL_MAX_LENGTH`` tokens with its ``</s>``; T5's cross-entropy averaged over the batch's target
    tokens (padding ignored), as ``model(**inputs, labels=...).loss``. ``reduction="none"`` gives each row's mean over
    its own tokens. **Evaluation** (``ranked``): a beam search with ``GENERATION``; each returned beam is decoded
    (special tokens skipped, tokenization spaces cleaned up) and matched exactly against the names decoded the same
    way. A beam naming no category counts as a wrong guess (-1), so Top-1 is "the first beam is the label's name"
    and Top-5 "one of the 5 beams is", the official ``compute_top5``.
    """

    def __init__(self, model: nn.Module, tokenizer: PreTrainedTokenizerBase, class_names, *,
                 dynamic_padding: bool = True, bf16: bool = False):
        super().__init__()
        if model.config.model_type != "t5":
            raise ConfigError(f"LabelGenerator writes labels with T5, as the paper; got a {model.config.model_type!r} model")
        if tokenizer.padding_side != "right":
            raise ConfigError("LabelGenerator needs a tokenizer that pads on the right (T5's)")
        names = [str(name).lower() for name in class_names]
        targets = tokenizer(names, padding="max_length", max_length=LABEL_MAX_LENGTH, truncation=True,
                            return_tensors="pt")["input_ids"]
        self.label_texts = tokenizer.batch_decode(targets, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        self._label_of = {}
        for label, text in enumerate(self.label_texts):
            if self._label_of.setdefault(text, label) != label:
                raise ConfigError(f"categories {self._label_of[text]} and {label} are both written {text!r} (lower-cased, "
                                  f"at most {LABEL_MAX_LENGTH} tokens): exact matching cannot tell them apart")
        targets[targets == tokenizer.pad_token_id] = IGNORE
        self.register_buffer("targets", targets, persistent=False)  # (K, 15)
        self.model, self.tokenizer, self.arch = model, tokenizer, "t5"
        self.pad_id, self.padding_side, self.dynamic_padding, self.bf16 = tokenizer.pad_token_id, "right", dynamic_padding, bf16

    def loss(self, ids: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        """T5's loss of writing the names of categories ``y`` (b,) for token ids ``ids`` (b, L): a scalar ("mean"
        over the batch's target tokens) or (b,) ("none": each row's mean over its target tokens)."""
        if reduction not in ("mean", "none"):
            raise ConfigError(f"reduction must be 'mean' or 'none', got {reduction!r}")
        ids = self._trim(ids)
        labels = self.targets[y.to(self.targets.device)]
        labels = labels[:, : int(labels.ne(IGNORE).sum(1).max())].contiguous()  # causal decoder: ignored tails can go
        with self._autocast(ids):
            out = self.model(input_ids=ids, attention_mask=self._mask(ids), labels=labels, use_cache=False)
        if reduction == "mean":
            return out.loss.float()
        tokens = nn.functional.cross_entropy(out.logits.float().transpose(1, 2), labels, ignore_index=IGNORE,
                                             reduction="none")
        return tokens.sum(1) / labels.ne(IGNORE).sum(1)

    def ranked(self, ids: torch.Tensor, k: int) -> torch.Tensor:
        """(b, k) int64: the categories the beams of ``ids`` (b, L) name, best beam first; -1 for a beam that names
        none (or one a better beam named already) and beyond the 5 beams."""
        ids = self._trim(ids)
        with self._autocast(ids):
            beams = self.model.generate(input_ids=ids, attention_mask=self._mask(ids), **GENERATION)
        texts = self.tokenizer.batch_decode(beams, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        width = GENERATION["num_return_sequences"]
        guesses = torch.full((len(ids), max(k, width)), -1, dtype=torch.long)
        for row in range(len(ids)):
            named = set()
            for rank, text in enumerate(texts[row * width : (row + 1) * width]):
                label = self._label_of.get(text, -1)
                if label >= 0 and label not in named:
                    guesses[row, rank] = label
                    named.add(label)
        return guesses[:, :k]


def model_folder(name: str | os.PathLike, data_dir: str | os.PathLike | None = None):
    """The local folder of a PLM (``PLMS`` name, Hugging Face id or folder); a clear error when it is absent."""
    return resolve_model_dir(PLMS[name].hf_id if name in PLMS else name, data_dir)


def load_tokenizer(name: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer of a PLM (``PLMS`` name, Hugging Face id or folder), offline, with GPT-2's pad token set."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_folder(name, data_dir), local_files_only=True)
    if tokenizer.pad_token is None:  # GPT-2, as the official code: pad with <|endoftext|>
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_classifier(name: str | os.PathLike, num_labels: int = NUM_LABELS, data_dir: str | os.PathLike | None = None,
                    device="cpu", dynamic_padding: bool = True, bf16: bool = False
                    ) -> tuple[TextClassifier, PreTrainedTokenizerBase]:
    """(TextClassifier, tokenizer) of a PLM, loaded offline with a new, randomly initialised head.

    Args:
        name: a key of ``PLMS`` ("BART"), a Hugging Face id ("facebook/bart-base") looked up as
            ``<data_dir>/models/<id>``, or a model folder.
        num_labels: K (158 categories).
        data_dir: the folder holding ``models/`` (``shared.paths.data_dir``: ``$NOISY_DATA_DIR`` or ``data/``).
        device: where the network goes ("cpu", "cuda", "auto"; ``shared.device.select_device``).
        dynamic_padding, bf16: see ``TextClassifier``.

    The head is initialised from torch's global RNG (seed it first). A missing model is a DataNotFoundError
    naming ``<data_dir>/models/<id>`` and how to fetch it; weights left as git-LFS pointers a DataFormatError.
    """
    tokenizer, model = load_pretrained(model_folder(name, data_dir), task="sequence", num_labels=num_labels)
    hf_id = PLMS[name].hf_id if name in PLMS else str(name)
    if model.config.model_type not in _CLASSIFIER:
        raise ConfigError(f"{hf_id} is a {model.config.model_type!r} model; NoisywikiHow's PLMs are "
                          f"{', '.join(f'{k} ({p.hf_id})' for k, p in PLMS.items())}")
    if tokenizer.pad_token is None:  # GPT-2, as the official code: pad with <|endoftext|>
        tokenizer.pad_token = tokenizer.eos_token
        model.config.pad_token_id = tokenizer.pad_token_id
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False
    if model.config.model_type == "xlnet":
        model.config.use_mems_eval = False
    net = TextClassifier(model, pad_id=tokenizer.pad_token_id, padding_side=tokenizer.padding_side,
                         dynamic_padding=dynamic_padding, bf16=bf16)
    return net.to(select_device(device)), tokenizer


def load_generator(name: str | os.PathLike, class_names, data_dir: str | os.PathLike | None = None, device="cpu",
                   dynamic_padding: bool = True, bf16: bool = False) -> tuple[LabelGenerator, PreTrainedTokenizerBase]:
    """(LabelGenerator, tokenizer) of T5 ("T5", "t5-base" or a folder), loaded offline with its language-model head.

    ``class_names`` (K,) are the categories it learns to write; the other arguments as ``load_classifier``. A model
    that is not T5 is a ConfigError.
    """
    tokenizer, model = load_pretrained(model_folder(name, data_dir), task="seq2seq")
    if model.config.model_type != "t5":
        hf_id = PLMS[name].hf_id if name in PLMS else str(name)
        raise ConfigError(f"{hf_id} is a {model.config.model_type!r} model; the paper generates labels with T5 only "
                          f"({PLMS['T5'].hf_id})")
    net = LabelGenerator(model, tokenizer, class_names, dynamic_padding=dynamic_padding, bf16=bf16)
    return net.to(select_device(device)), tokenizer


__all__ = ["PLM", "PLMS", "ARCHITECTURES", "MAX_LENGTH", "NUM_LABELS", "GENERATION", "encode_texts", "TextClassifier",
           "LabelGenerator", "load_tokenizer", "load_classifier", "load_generator", "model_folder"]
