"""A BiLSTM trained from scratch on a pre-trained model's word embeddings: the smoke profile's sequence model.

The official code (github.com/tangminji/NoisywikiHow, ``data/wiki_dataset.py``, the ``-lstm`` variant, not in the
paper) runs a 2-layer BiLSTM over a language model's input embedding matrix and classifies with a BART head. The
smoke profile's analogue reads all-MiniLM-L6-v2's tokens and its word-embedding matrix (30,522 x 384, frozen:
only the recurrent layer and the head train), with one bidirectional layer of 32 units per direction (about 4 s a
run on one CPU core), mean-pooled over the real tokens, and a linear head.

    ids = token_ids(texts)                        # (n, L) int64, MiniLM's tokenizer, padded with 0
    net = BiLSTMClassifier(word_embeddings(), num_classes=24)
    logits = net(ids[:64])                        # (64, 24)
"""
from __future__ import annotations

import torch
from torch import nn

from shared.errors import ConfigError
from shared.text.encoders import model_dir

EMBEDDINGS_KEY = "embeddings.word_embeddings.weight"


def word_embeddings(model: str = "all-minilm-l6-v2") -> torch.Tensor:
    """The input embedding matrix (V, d) of a local sentence-transformers/BERT model folder."""
    from safetensors import safe_open

    path = model_dir(model) / "model.safetensors"
    with safe_open(str(path), "pt") as weights:
        if EMBEDDINGS_KEY not in weights.keys():
            raise ConfigError(f"{path} has no {EMBEDDINGS_KEY}; the BiLSTM reads a BERT-style word-embedding matrix")
        return weights.get_tensor(EMBEDDINGS_KEY)


def token_ids(texts, model: str = "all-minilm-l6-v2", max_length: int = 128):
    """Token ids (n, L) int64 of ``texts`` with the model's tokenizer, padded to the longest (pad id 0)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir(model), local_files_only=True)
    if tokenizer.pad_token_id != 0:
        raise ConfigError(f"the BiLSTM expects pad id 0, {model}'s tokenizer pads with {tokenizer.pad_token_id}")
    return tokenizer(list(texts), padding="longest", truncation=True, max_length=max_length,
                     return_tensors="pt")["input_ids"].long()


class BiLSTMClassifier(nn.Module):
    """Frozen word embeddings -> one bidirectional LSTM layer -> mean over real tokens -> linear head.

    Args:
        embeddings: (V, d) the word-embedding matrix (``word_embeddings()``); row 0 is padding.
        num_classes: K.
        hidden: units per direction.
    """

    def __init__(self, embeddings: torch.Tensor, num_classes: int, hidden: int = 32):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(embeddings.float(), freeze=True, padding_idx=0)
        self.lstm = nn.LSTM(embeddings.shape[1], hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, num_classes)

    @property
    def classifier(self) -> nn.Linear:
        return self.head

    def features(self, ids: torch.Tensor) -> torch.Tensor:
        """(b, 2 * hidden): the LSTM states averaged over each text's real tokens (ids (b, L), pad 0)."""
        mask = ids.ne(0)
        width = int(mask.sum(1).max())
        ids, mask = ids[:, :width], mask[:, :width]  # right padding: drop the all-padding columns
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        states, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=width)
        return (states * mask[..., None]).sum(1) / lengths.to(states.device)[:, None]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(ids))


__all__ = ["word_embeddings", "token_ids", "BiLSTMClassifier"]
