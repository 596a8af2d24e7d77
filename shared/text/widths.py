"""The width of dynamically padded batches, for the cost plans of the papers that fine-tune language models.

Both text papers pad a batch to its longest sequence, not to ``max_length``: NoisywikiHow's ``TextClassifier``
drops the columns that are padding in every row of a batch, LNLFN's ``_collate`` pads to the batch's longest. A
transformer step's cost follows that width, so a plan that prices every batch at ``max_length`` (the worst case)
overstates short texts several times over (a wikiHow event is one short sentence). Where the texts and the
tokenizer are at hand, a plan prices the mean width these functions give; without them it keeps ``max_length``.

- ``token_lengths``: tokens per text as the tokenizer makes them (special tokens included), capped at
  ``max_length`` as truncation caps them.
- ``mean_batch_width``: the mean, over an epoch's batches, of the longest length in each batch: exact for
  batches taken in order (inference), and the expectation over the shuffle for training batches.

A plan prices a step at the mean width. A step's cost grows a little faster than its width (attention is
quadratic in it), so for widths that vary a lot between batches this slightly understates; for short texts the
linear layers dominate and the difference is small.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from shared.errors import ConfigError


def token_lengths(tokenizer, texts: Sequence, max_length: int, *, split_into_words: bool = False) -> np.ndarray:
    """Token counts (n,) int64 of ``texts`` (strings, (text, pair) tuples, or word lists with
    ``split_into_words``) under ``tokenizer``, special tokens included, each at most ``max_length``."""
    if max_length < 1:
        raise ConfigError(f"max_length must be >= 1, not {max_length}")
    texts = list(texts)
    if not texts:
        return np.zeros(0, dtype=np.int64)
    if split_into_words:
        enc = tokenizer(texts, is_split_into_words=True, truncation=True, max_length=max_length)
    elif isinstance(texts[0], tuple):
        enc = tokenizer([t[0] for t in texts], text_pair=[t[1] for t in texts], truncation=True,
                        max_length=max_length)
    else:
        enc = tokenizer(texts, truncation=True, max_length=max_length)
    return np.minimum(np.array([len(ids) for ids in enc["input_ids"]], dtype=np.int64), max_length)


def mean_batch_width(lengths, batch: int, *, shuffled: bool) -> float:
    """Mean over one epoch's batches of ``batch`` rows (the last one partial, no drop_last) of the longest of
    ``lengths`` (n,) in each batch.

    In order (``shuffled=False``): the exact mean of each consecutive chunk's maximum. Shuffled: each batch of a
    uniform random permutation is a uniform random subset of its size, whose maximum is the k-th smallest length
    l_(k) with probability C(k-1, b-1) / C(n, b); the mean weighs the full batches' expectation and the last
    batch's."""
    lengths = np.asarray(lengths, dtype=np.float64).ravel()
    n = lengths.size
    if batch < 1:
        raise ConfigError(f"batch must be >= 1, not {batch}")
    if n == 0:
        raise ConfigError("mean_batch_width needs at least one length")
    if not shuffled:
        return float(np.mean([lengths[i:i + batch].max() for i in range(0, n, batch)]))
    ordered = np.sort(lengths)
    full, rest = divmod(n, batch)
    sizes = [batch] * full + ([rest] if rest else [])
    expected = {b: _expected_max(ordered, b) for b in set(sizes)}
    return float(np.mean([expected[b] for b in sizes]))


def _expected_max(ordered: np.ndarray, b: int) -> float:
    """E[max] of a uniform random b-subset of the ascending ``ordered`` (n,) values."""
    n = ordered.size
    if b >= n:
        return float(ordered[-1])
    k = np.arange(b, n + 1)  # the maximum is the k-th smallest (1-based) for k >= b
    log_p = np.array([math.lgamma(i) - math.lgamma(b) - math.lgamma(i - b + 1) for i in k])  # log C(k-1, b-1)
    log_p -= math.lgamma(n + 1) - math.lgamma(b + 1) - math.lgamma(n - b + 1)  # / C(n, b)
    return float(np.sum(np.exp(log_p) * ordered[b - 1:]))
