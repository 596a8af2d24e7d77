"""Tiny randomly initialised language models in the Hugging Face folder format, built offline.

A full profile fine-tunes base-size checkpoints that are never downloaded here; the rehearsals and tests run
the same code path on stand-ins: one layer, width 32, random weights (torch seed 0), with a tokenizer of the
checkpoint's kind built from a small corpus with the ``tokenizers`` backend of transformers, all saved with
``save_pretrained`` so that ``AutoTokenizer.from_pretrained(folder, local_files_only=True)`` and
``AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True)`` load them.

    arch = architecture("facebook/bart-base")                           # "bart"
    write_tiny_model(root / "models" / "facebook/bart-base", arch, corpus)

Architectures (transformers model types) and their tokenizers:

==============  =========================================  ========================================================
``deberta-v2``  microsoft/deberta-v3-*                     Unigram over "▁"-prefixed words ([PAD] [CLS] [SEP] ...)
``xlnet``       xlnet-*                                    Unigram (<unk> <s> </s> <cls> <sep> <pad> ...), pads left
``albert``      albert-*                                   Unigram (<pad> <unk> [CLS] [SEP] [MASK])
``t5``          t5-*                                       Unigram (<pad> </s> <unk>), no sentinel tokens
``bert``        bert-*                                     WordPiece over the corpus' words and characters
``roberta``     roberta-*                                  byte-level BPE trained on the corpus
``bart``        facebook/bart-*                            byte-level BPE trained on the corpus (RoBERTa's kind)
``gpt2``        gpt2*                                      byte-level BPE trained on the corpus, no pad token
==============  =========================================  ========================================================
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from shared.errors import ConfigError, unknown_choice

#: name fragment -> architecture, tried in this order ("albert" and "roberta" contain "bert")
_NAME_FRAGMENTS = (("deberta", "deberta-v2"), ("roberta", "roberta"), ("albert", "albert"), ("xlnet", "xlnet"),
                   ("bert", "bert"), ("bart", "bart"), ("gpt2", "gpt2"), ("t5", "t5"))
ARCHITECTURES = tuple(arch for _, arch in _NAME_FRAGMENTS)
_WIDTH = 32  # hidden size; 2 attention heads of 16, feed-forward 64, one layer (one per stack for seq2seq)
_SIZES = {
    "xlnet": dict(d_model=_WIDTH, n_layer=1, n_head=2, d_inner=2 * _WIDTH),
    "gpt2": dict(n_embd=_WIDTH, n_layer=1, n_head=2, n_inner=2 * _WIDTH, n_positions=512),
    "t5": dict(d_model=_WIDTH, d_kv=_WIDTH // 2, d_ff=2 * _WIDTH, num_layers=1, num_decoder_layers=1, num_heads=2),
    "bart": dict(d_model=_WIDTH, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                 decoder_attention_heads=2, encoder_ffn_dim=2 * _WIDTH, decoder_ffn_dim=2 * _WIDTH,
                 max_position_embeddings=512),
}
_BERT_SIZE = dict(hidden_size=_WIDTH, num_hidden_layers=1, num_attention_heads=2, intermediate_size=2 * _WIDTH)
_EXTRA = {"deberta-v2": dict(relative_attention=True, position_biased_input=False, pos_att_type=["p2c", "c2p"],
                             position_buckets=256, max_relative_positions=-1, norm_rel_ebd="layer_norm",
                             share_att_key=True, max_position_embeddings=512),
          "roberta": dict(max_position_embeddings=514, type_vocab_size=1),
          "bert": dict(max_position_embeddings=512),
          "albert": dict(embedding_size=_WIDTH, max_position_embeddings=512)}


def _vocabulary(corpus: list[str], n_words: int = 3000) -> tuple[list[tuple[str, int]], list[str]]:
    """The ``n_words`` most frequent whitespace words with counts (ties alphabetical) and every character."""
    words = Counter(w for t in corpus for w in t.split())
    chars = sorted({c for t in corpus for c in t if not c.isspace()})
    return sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:n_words], chars


def _unigram_vocab(specials: list[str], words, chars) -> list[tuple[str, float]]:
    """A SentencePiece-style Unigram vocabulary: specials (score 0), "▁word" pieces (log frequency), characters."""
    total = sum(c for _, c in words)
    pieces = [(s, 0.0) for s in specials] + [("▁" + w, float(np.log(c / total))) for w, c in words]
    seen = {p for p, _ in pieces}
    pieces += [(p, -20.0) for c in ["▁", *chars] for p in (c, "▁" + c) if p not in seen and not seen.add(p)]
    return pieces


def tiny_tokenizer(arch: str, corpus: list[str]):
    """An offline fast tokenizer of the architecture's kind (table in the module docstring) over the corpus'
    words and characters."""
    import transformers as T

    words, chars = _vocabulary(corpus)
    if arch == "deberta-v2":
        return T.DebertaV2Tokenizer(vocab=_unigram_vocab(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], words, chars))
    if arch == "xlnet":
        specials = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]
        return T.XLNetTokenizer(vocab=_unigram_vocab(specials, words, chars), unk_id=0)
    if arch == "albert":
        return T.AlbertTokenizer(vocab=_unigram_vocab(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], words, chars))
    if arch == "t5":
        return T.T5Tokenizer(vocab=_unigram_vocab(["<pad>", "</s>", "<unk>"], words, chars), extra_ids=0)
    if arch == "bert":
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars)]
        tokens += [w for w, _ in words if w not in set(tokens)]
        return T.BertTokenizer(vocab={t: i for i, t in enumerate(dict.fromkeys(tokens))}, do_lower_case=False)
    byte_level = {"roberta": T.RobertaTokenizer, "bart": T.BartTokenizer, "gpt2": T.GPT2Tokenizer}
    if arch in byte_level:
        return byte_level[arch]().train_new_from_iterator(corpus, vocab_size=len(words) + 300)
    raise unknown_choice("tiny tokenizer architecture", arch, ARCHITECTURES)


def architecture(name: str) -> str:
    """The transformers model type of a hub name (``microsoft/deberta-v3-base`` -> ``deberta-v2``,
    ``albert-base-v2`` -> ``albert``, ``facebook/bart-base`` -> ``bart``, ``t5-base`` -> ``t5``, ...)."""
    lower = name.lower()
    for key, arch in _NAME_FRAGMENTS:
        if key in lower:
            return arch
    raise ConfigError(f"no tiny stand-in architecture for model {name!r} (known: deberta-v3, roberta, albert, "
                      "xlnet, bert, bart, gpt2, t5)")


def _special_ids(arch: str, tokenizer) -> dict:
    """The config's special-token ids, taken from the tokenizer (the seq2seq decoders start with BART's </s>
    and T5's <pad>, as the released checkpoints do)."""
    ids = {"pad_token_id": tokenizer.pad_token_id}
    if arch == "gpt2":  # no pad token: the bos and eos are <|endoftext|>
        ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    elif arch == "bart":
        ids |= {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                "decoder_start_token_id": tokenizer.eos_token_id, "forced_eos_token_id": tokenizer.eos_token_id}
    elif arch == "t5":
        ids |= {"eos_token_id": tokenizer.eos_token_id, "decoder_start_token_id": tokenizer.pad_token_id}
    elif arch == "albert":
        ids |= {"bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id}
    return ids


def write_tiny_model(folder: Path, arch: str, corpus: list[str]) -> Path:
    """A randomly initialised 1-layer, width-32 base model of ``arch`` (torch seed 0) with its tiny tokenizer.

    Args:
        folder: where ``config.json``, the weights and the tokenizer files are written (created).
        arch: one of ``ARCHITECTURES`` (``architecture(hub name)``).
        corpus: texts the tokenizer's vocabulary is built from.

    Returns: ``folder``. The weights are the base model's (``AutoModel``); a ``*ForSequenceClassification``
    loaded from the folder adds a new head, as it does on a released checkpoint.
    """
    import torch
    from transformers import AutoConfig, AutoModel
    from transformers.utils import logging

    logging.disable_progress_bar()
    if arch not in ARCHITECTURES:
        raise unknown_choice("tiny model architecture", arch, ARCHITECTURES)
    tokenizer = tiny_tokenizer(arch, corpus)
    config = AutoConfig.for_model(arch, vocab_size=len(tokenizer), **_special_ids(arch, tokenizer),
                                  **_SIZES.get(arch, _BERT_SIZE), **_EXTRA.get(arch, {}))
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)


__all__ = ["ARCHITECTURES", "tiny_tokenizer", "architecture", "write_tiny_model"]
