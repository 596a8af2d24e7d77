"""NoisywikiHow's rehearsal files: TinyHow in the official release's layout, and tiny models of the seven PLMs.

``python -m shared.rehearsal <root> noisywikihow`` writes, under ``<root>``:

``NoisywikiHow-dataset/``   ``cat158.csv`` and ``noisy/{train,val,test,mix_*,sym_*,neighbor,uncommon,tail_0.1}.csv``
                            of TinyHow (``noisywikihow.formats.write_release``), noised with TF-IDF vectors
``models/<hf id>``          the paper's seven language models as tiny random models of their architectures
                            (``shared.text.tiny_models``); a folder another paper's rehearsal wrote is kept

The full profile then reads these through the real loader (``official_counts: false``: TinyHow is not the
release's size) and fine-tunes the tiny models (``params/rehearsal.yaml``). Its numbers are not results.
"""
from __future__ import annotations

from pathlib import Path

from noisywikihow.features import text_features
from noisywikihow.formats import write_release
from noisywikihow.injection import add_noise
from noisywikihow.plm import PLMS
from noisywikihow.tinyhow import generate
from shared.text.tiny_models import write_tiny_model

DATASET = "NoisywikiHow-dataset"


def write_dataset(root: Path, seed: int = 0) -> Path:
    """TinyHow with all thirteen noisy training sets, in the release's files under ``root/NoisywikiHow-dataset``."""
    bench, pool = generate(seed)
    bench = add_noise(bench, pool, text_features([*bench.train.texts, *pool.texts], "tfidf"), seed=seed)
    return write_release(Path(root) / DATASET, bench)


def write_models(root: Path, corpus: list[str]) -> list[str]:
    """``models/<hf id>`` of every PLM (tiny, random, tokenizer built from ``corpus``) unless already there."""
    written = []
    for plm in PLMS.values():
        folder = Path(root) / "models" / plm.hf_id
        if not (folder / "config.json").exists():
            write_tiny_model(folder, plm.architecture, corpus)
        written.append(f"models/{plm.hf_id}")
    return written


def write_rehearsal_data(root: Path) -> list[str]:
    """Write NoisywikiHow's rehearsal files under ``root``; returns what was written (relative to ``root``)."""
    bench, _ = generate(0)
    write_dataset(root)
    return [DATASET, *write_models(root, list(bench.train.texts))]


__all__ = ["DATASET", "write_dataset", "write_models", "write_rehearsal_data"]
