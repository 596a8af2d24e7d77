"""Where a notebook's benchmark comes from: the official release (full profile) or TinyHow (smoke profile).

    bench = load_benchmark(cfg, data_dir)              # cfg: the notebook's settings (noisywikihow/profiles.yaml)
    data = encoded(bench, "minilm")                    # features of every split and noisy training set

``dataset: noisywikihow`` reads a clone of github.com/tangminji/NoisywikiHow-dataset (``noisywikihow.data``);
``dataset: tinyhow`` generates TinyHow (``noisywikihow.tinyhow``) and injects its noise the paper's way with the
events' ``noise_encoder`` embeddings (``noisywikihow.injection``).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from noisywikihow.benchmark import Benchmark
from noisywikihow.experiments import FeatureData, feature_data
from noisywikihow.features import TextFeatures, benchmark_texts, text_features
from noisywikihow.injection import add_noise
from noisywikihow.tinyhow import generate
from shared.errors import ConfigError, unknown_choice
from shared.text.encoders import model_dir

DATASETS = {"noisywikihow": "the official release (a clone of NoisywikiHow-dataset under data_dir)",
            "tinyhow": "TinyHow, generated here (24 classes, ~4,400 training events)"}


def load_benchmark(cfg, data_dir=None, device: str = "cpu") -> Benchmark:
    """The benchmark with its noisy training sets, as the settings ``dataset`` (and ``tinyhow_seed``,
    ``noise_encoder``) say."""
    if cfg.dataset == "noisywikihow":
        from noisywikihow.data import load_noisywikihow

        return load_noisywikihow(data_dir, official=cfg.get("official_counts", True))
    if cfg.dataset == "tinyhow":
        return _tinyhow(int(cfg.tinyhow_seed), cfg.noise_encoder, device)
    raise unknown_choice("dataset", cfg.dataset, DATASETS)


@lru_cache(maxsize=2)
def _tinyhow(seed: int, noise_encoder: str, device: str) -> Benchmark:
    bench, pool = generate(seed)
    texts = [*bench.train.texts, *pool.texts]
    noised = add_noise(bench, pool, text_features(texts, noise_encoder, device=device), seed=seed)
    noised.meta["pool_size"] = len(pool)
    return noised


def encoded(bench: Benchmark, encoder: str, device: str = "cpu", data_dir=None, model: str = "mlp") -> FeatureData:
    """What ``model`` reads of every split and training set of ``bench``: frozen ``encoder`` features, or token
    ids (a language model's, or MiniLM's for the BiLSTM)."""
    from noisywikihow.bilstm import token_ids
    from noisywikihow.plm import PLMS, model_folder

    texts, training = benchmark_texts(bench)
    if model == "bilstm":
        if encoder != "minilm":
            raise ConfigError(f"the BiLSTM reads MiniLM's tokens and word embeddings: use encoder minilm, not {encoder!r}")
        distinct = np.array(sorted(set(texts)), dtype=object)
        return feature_data(bench, TextFeatures("minilm-tokens", distinct, token_ids(distinct).numpy()),
                            str(model_dir()))  # the word embeddings' files enter the runs' key
    table = text_features(texts, encoder, fit_texts=training, device=device, data_dir=data_dir)
    return feature_data(bench, table, str(model_folder(encoder, data_dir)) if encoder in PLMS else None)


__all__ = ["DATASETS", "load_benchmark", "encoded"]
