"""Writers of the real datasets' file formats that LNLFN's loaders read (``lnlfn.data``, ``lnlfn.mturk``).

One writer per format, used by the unit tests (tiny hand-written files) and by the rehearsal
(``lnlfn.rehearsal``: stand-in data at a small scale). Each mirrors the publisher's layout under ``root``:

=========================  ==========================================================================
``write_snli``             ``snli_1.0/snli_1.0_{train,dev,test}.jsonl`` (one JSON object per line)
``write_tweetnlp``         ``tweetnlp/oct27.{train,dev,test}`` (token<TAB>ARK tag, blank line per tweet)
                           and optionally ``tweetnlp/hovy2014_crowd.tsv``
``write_imdb``             ``aclImdb/{train,test}/{neg,pos}/{id}_{rating}.txt``
``write_imdb_cleanlab``    cleanlab/label-errors' IMDB arrays under ``label-errors/``
``write_cleanlab_mturk``   ``label-errors/mturk/{dataset}_mturk.json``
``write_amazon``           ``amazon5core/amazon5core.txt`` (``__label__{1,3,5} text`` per line)
``write_mturk``            ``lnlfm/mturk/{dataset}_mturk_{main,cl_rerun}.csv`` (dcx/lnlfm; the rerun file with
                           the UTF-8 byte-order mark the released files carry)
=========================  ==========================================================================
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from lnlfn.data import LABEL_ERRORS_FILES, SNLI_FILES, TWEETNLP_CROWD_FILE, TWEETNLP_FILES


def snli_line(pair_id, gold, labels, s1="A man plays.", s2="Someone plays.") -> str:
    """One SNLI jsonl line: ``gold`` a class name or "-", ``labels`` the annotator labels (1 or 5 names)."""
    return json.dumps({"annotator_labels": list(labels), "captionID": "c", "gold_label": gold, "pairID": pair_id,
                       "sentence1": s1, "sentence2": s2}) + "\n"


def write_snli(root, files: Mapping[str, str]) -> Path:
    """``files``: split ("train", "val", "test") -> the jsonl text of ``snli_1.0_<train|dev|test>.jsonl``."""
    folder = Path(root) / "snli_1.0"
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in files.items():
        (folder / SNLI_FILES[split]).write_text(text, encoding="utf-8")
    return folder


def conll_text(tweets: Iterable[Iterable[tuple[str, str]]]) -> str:
    """Tweets of (token, ARK tag) as a two-column CoNLL text, a blank line after each tweet."""
    return "".join("".join(f"{tok}\t{tag}\n" for tok, tag in tw) + "\n" for tw in tweets)


def crowd_text(tweets: Iterable[Iterable[tuple[str, Iterable[str]]]]) -> str:
    """Tweets of (token, crowd tags per worker slot, "" = no tag) in the ``hovy2014_crowd.tsv`` format."""
    return "".join("".join(f"{tok}\t{','.join(tags)}\n" for tok, tags in tw) + "\n" for tw in tweets)


def write_tweetnlp(root, splits: Mapping[str, str], crowd: str | None = None) -> Path:
    """``splits``: split ("train", "val", "test") -> CoNLL text (``conll_text``); ``crowd``: the crowd file's text."""
    folder = Path(root) / "tweetnlp"
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in splits.items():
        (folder / TWEETNLP_FILES[split]).write_text(text, encoding="utf-8")
    if crowd is not None:
        (folder / TWEETNLP_CROWD_FILE).write_text(crowd, encoding="utf-8")
    return folder


def write_imdb(root, reviews: Iterable[tuple[str, str, str, str]]) -> Path:
    """``reviews``: (split "train"/"test", polarity "neg"/"pos", file stem "{id}_{rating}", text)."""
    folder = Path(root) / "aclImdb"
    for split in ("train", "test"):
        for polarity in ("neg", "pos"):
            (folder / split / polarity).mkdir(parents=True, exist_ok=True)
    for split, polarity, stem, text in reviews:
        (folder / split / polarity / f"{stem}.txt").write_text(text, encoding="utf-8")
    return folder


def write_imdb_cleanlab(root, order: list[str], probs: np.ndarray, labels: np.ndarray) -> Path:
    """cleanlab/label-errors' IMDB test arrays: ``order`` (n,) "pos/{id}_{rating}.txt" names, ``probs`` (n, 2)
    cross-validated probabilities (saved float16, as released) and ``labels`` (n,) original labels (uint16).

    Row k of the arrays belongs to ``order[k]``. Names may repeat, as in the release (25,000 rows naming 24,799
    distinct files); the aclImdb test reviews that ``order`` never names then have no row."""
    folder = Path(root) / "label-errors"
    paths = {k: folder / LABEL_ERRORS_FILES[k] for k in ("imdb_index", "imdb_pred_probs", "imdb_original_labels")}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    paths["imdb_index"].write_text(json.dumps(list(order)), encoding="utf-8")
    np.save(paths["imdb_pred_probs"], np.asarray(probs, dtype=np.float16))
    np.save(paths["imdb_original_labels"], np.asarray(labels, dtype=np.uint16))
    return folder


def write_cleanlab_mturk(root, dataset: str, items: list[dict]) -> Path:
    """``label-errors/mturk/<dataset>_mturk.json``: items {id, url, given_original_label, our_guessed_label, mturk}."""
    path = Path(root) / "label-errors" / LABEL_ERRORS_FILES[f"{dataset}_mturk"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(items, indent=1), encoding="utf-8")
    return path


def write_amazon(root, lines: Iterable[tuple[int, str]]) -> Path:
    """``amazon5core/amazon5core.txt`` from (stars 1/3/5, text) pairs, one ``__label__<stars> text`` line each."""
    folder = Path(root) / "amazon5core"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "amazon5core.txt"
    path.write_text("".join(f"__label__{stars} {text}\n" for stars, text in lines), encoding="utf-8")
    return path


def write_mturk(root, dataset: str, main: str, rerun: str, *, bom: bool = True) -> Path:
    """The dcx/lnlfm CSV texts ``main`` and ``rerun`` as ``lnlfm/mturk/<dataset>_mturk_{main,cl_rerun}.csv``.

    The released ``*_cl_rerun.csv`` files start with a UTF-8 byte-order mark (``EF BB BF``, as spreadsheet exports
    do); ``bom`` (default) writes the rerun file so, ``bom=False`` writes plain UTF-8.
    """
    folder = Path(root) / "lnlfm" / "mturk"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dataset}_mturk_main.csv").write_text(main, encoding="utf-8")
    (folder / f"{dataset}_mturk_cl_rerun.csv").write_text(rerun, encoding="utf-8-sig" if bom else "utf-8")
    return folder


__all__ = ["snli_line", "write_snli", "conll_text", "crowd_text", "write_tweetnlp", "write_imdb",
           "write_imdb_cleanlab", "write_cleanlab_mturk", "write_amazon", "write_mturk"]
