"""The official NoisywikiHow release, read from a user's clone and checked against the paper.

NoisywikiHow (Wu et al., Findings of ACL 2023) is distributed as CSV files in github.com/tangminji/NoisywikiHow-dataset
(HEAD 730575e; the code repository github.com/tangminji/NoisywikiHow mounts it as ``data/wikihow``). Nothing of it
ships with this project (wikiHow content, no licence file): clone it and point ``data_dir`` at the clone, its
``noisy/`` folder or a folder holding ``NoisywikiHow-dataset/``.

    bench = load_noisywikihow("~/data")                      # Benchmark: 158 classes, 73,343 / 7,900 / 7,900
    bench.noise["mix_0.4"].is_noisy.mean()                   # ~0.4
    check_release("~/data/NoisywikiHow-dataset/noisy")       # DataFrame: one row per file, status "ok" or the problem

Layout (``<clone>/noisy/`` unless noted; text lower-cased and tokenised as released, "put a nappy on ."):

=============================================  ===========================================================
``train.csv``, ``val.csv``, ``test.csv``       ``choosen_id, step_id, cat_id, step, cat``
``mix_{0.1,0.2,0.4,0.6}.csv`` and              ``choosen_id, step_id, noisy_id, cat_id, step, cat, noisy_step,
``{neighbor,uncommon,tail}_0.1.csv``           noisy_cat, noisy_label``: a model trains on (noisy_step, cat_id);
                                               a row is noisy iff step_id != noisy_id; noisy_cat is the true
                                               category of noisy_step, noisy_label its id or -1 (not a class)
``sym_{0.1,0.2,0.4,0.6}.csv``                  ``choosen_id, step_id, cat_id, noisy_label, step, cat, noisy_cat``:
                                               trains on (step, noisy_label); noisy iff cat_id != noisy_label
``<clone>/cat158.csv`` (or ``noisy/``)         ``category, level, steps``: row i is class i, steps its total events
=============================================  ===========================================================

``choosen_id`` is the event's id over all 89,143 events (``Split.ids``); the rows of a noisy file are matched to
``train.csv``'s by it. Files are read BOM-tolerantly; git-LFS pointers (a clone without ``git lfs pull``), missing
columns, duplicated ids and labels outside the classes raise errors naming the file and the fix.

Noise sources. The release does not list each class's source (Appendix A.3 gives only the rules), so they are
inferred: TC = the classes with at most ``TC_MAX_TOTAL`` = 400 events in train + val + test (the paper's rule;
with ``official=False``, for files of another benchmark such as TinyHow whose sizes follow no such threshold, the
classes ``tail_0.1.csv`` puts noise in); BCC = the other classes ``uncommon_0.1.csv`` puts noise in (all its noise
comes from BCC, Table 5); SC = the rest. ``uncommon_0.1.csv`` (and ``tail_0.1.csv`` when ``official=False``) is
therefore read even when not among ``noise_files``. A class the file leaves untouched is taken for SC; with
``official=True`` Table 3's per-source counts catch that. The release names no parent categories: ``parent`` is "".

Checks. Always: val and test have the same number of events per class, train + val + test per class equals
cat158.csv's ``steps``, no id in two splits, noisy fractions within ``TOLERANCE`` of the level (mix_t: overall and
per source, 0.02; sym_t: 0.01; single-source files: every noisy row in the source's classes, round(0.1 n_train)
noisy rows +- 0.02 n_train, our reading of Table 5). With ``official=True`` also the paper's counts (Table 3):
158 classes, 73,343 / 7,900 / 7,900 events, 50 per class in val and test, SC / BCC / TC 68 / 36 / 54 classes with
39,674 / 20,413 / 13,256 training events.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from noisywikihow.benchmark import LEVELS, SINGLE_SOURCE_FILES, SOURCES, Benchmark, NoisyTrain, Split, noise_name
from noisywikihow.injection import SINGLE_SOURCE_LEVEL
from shared.datasets.files import read_csv
from shared.datasets.real import missing_data_error
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.noise.open_set import round_half_up
from shared.paths import data_dir as resolve_data_dir

REPO_URL = "https://github.com/tangminji/NoisywikiHow-dataset"
GET_DATA = (f"Clone the release: `git clone {REPO_URL}` (then `git lfs install && git lfs pull` inside it if the "
            "CSV files are ~130-byte git-LFS pointers).")
SPLITS = ("train", "val", "test")
SPLIT_COLUMNS = ("choosen_id", "step_id", "cat_id", "step", "cat")
MIX_COLUMNS = ("choosen_id", "step_id", "noisy_id", "cat_id", "step", "cat", "noisy_step", "noisy_cat", "noisy_label")
SYM_COLUMNS = ("choosen_id", "step_id", "cat_id", "noisy_label", "step", "cat", "noisy_cat")
CAT_FILE, CAT_COLUMNS = "cat158.csv", ("category", "level", "steps")
CAT_ABSENT = "absent: classes named by the splits' (cat_id, cat) pairs"
TEXT_COLUMNS = frozenset({"step", "cat", "noisy_step", "noisy_cat", "category"})
#: the release's noisy training sets (file stems)
NOISE_FILES = (*(noise_name("real", t) for t in LEVELS), *(noise_name("symmetric", t) for t in LEVELS),
               *(f"{prefix}_{SINGLE_SOURCE_LEVEL:g}" for prefix in SINGLE_SOURCE_FILES))
NOISE_FILE = re.compile(r"^(mix|sym|neighbor|uncommon|tail)_(\d*\.?\d+)$")
BCC_FILE, TC_FILE = (f"{p}_{SINGLE_SOURCE_LEVEL:g}" for p in ("uncommon", "tail"))

OFFICIAL_SIZES = {"train": 73_343, "val": 7_900, "test": 7_900}  # Table 3
OFFICIAL_CLASSES, OFFICIAL_EVAL_PER_CLASS = 158, 50
TABLE3 = {"SC": (68, 39_674), "BCC": (36, 20_413), "TC": (54, 13_256)}  # classes, training events
OFFICIAL_LARGEST_CLASS = 2_585  # training events of the largest class (Fig. 1: Growing Flowers; cat158.csv steps - 100)
TC_MAX_TOTAL = 400  # Appendix A.3: tail categories have at most 400 events
TOLERANCE = {"mix": 0.02, "sym": 0.01, "single": 0.02}  # allowed |noisy fraction - level|
REPORT_COLUMNS = ("file", "rows", "classes", "noisy", *(f"noisy_{s}" for s in SOURCES), "expected", "status")


# ---------------------------------------------------------------------------------------------- locating
def locate_noisywikihow(data_dir=None) -> Path:
    """The folder holding ``train.csv``, ``val.csv`` and ``test.csv`` of the release.

    Looks at ``data_dir`` itself, ``data_dir/noisy`` (a clone's root), ``data_dir/NoisywikiHow-dataset/noisy`` and
    ``data_dir/wikihow/noisy`` (the code repository's ``data/``); ``data_dir`` defaults to ``$NOISY_DATA_DIR`` or
    ``<repo>/data``. Raises DataNotFoundError listing those paths, or naming the split files a folder lacks.
    """
    root = resolve_data_dir(data_dir)
    candidates = [root, root / "noisy", root / "NoisywikiHow-dataset" / "noisy", root / "wikihow" / "noisy"]
    present = {c: [s for s in SPLITS if (c / f"{s}.csv").exists()] for c in candidates}
    for folder, files in present.items():
        if len(files) == len(SPLITS):
            return folder
    for folder, files in present.items():
        if files:
            lacking = ", ".join(f"{s}.csv" for s in SPLITS if s not in files)
            raise DataNotFoundError(f"{folder} holds {', '.join(f'{s}.csv' for s in files)} but not {lacking}: "
                                    f"an incomplete copy of the NoisywikiHow release. {GET_DATA}")
    raise missing_data_error("NoisywikiHow", [c / "train.csv" for c in candidates], GET_DATA, stand_ins="tinyhow")


# ---------------------------------------------------------------------------------------------- reading
def _read_table(path: Path, columns) -> pd.DataFrame:
    """The ``columns`` of a CSV file, id columns as int64, texts as str (no NaN); ``choosen_id`` must be unique."""
    if not path.exists():
        raise DataNotFoundError(f"{path.name} is missing from {path.parent}. {GET_DATA}")
    frame = read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataFormatError(f"{path} lacks column(s) {missing}: it has {list(frame.columns)}, the release's format "
                              f"is {list(columns)}. Is it the right file, from the release at HEAD 730575e?")
    frame = frame[list(columns)].copy()
    for col in columns:
        if col in TEXT_COLUMNS:
            continue
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = np.flatnonzero(values.isna().to_numpy() | (values.to_numpy() % 1 != 0))
        if bad.size:
            raise DataFormatError(f"{path}: column {col!r} must hold integers; data row {bad[0] + 1} holds "
                                  f"{frame[col].iloc[bad[0]]!r} ({bad.size} such rows)")
        frame[col] = values.astype(np.int64)
    if "choosen_id" in frame:
        dup = frame["choosen_id"][frame["choosen_id"].duplicated()].unique()
        if dup.size:
            raise DataFormatError(f"{path}: choosen_id {dup[:5].tolist()} occur(s) more than once ({dup.size} "
                                  "duplicated ids); each event has one row. Restore the file from the release.")
    return frame


def _check_range(path: Path, frame: pd.DataFrame, col: str, low: int, K: int) -> None:
    values = frame[col].to_numpy()
    bad = (values < low) | (values >= K)
    if bad.any():
        raise DataFormatError(f"{path}: {col} must lie in [{low}, {K}) for {K} classes; found "
                              f"{sorted(set(values[bad].tolist()))[:5]} in {int(bad.sum())} rows")


def _classes(folder: Path, splits: dict) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, Path | None]:
    """(classes (K,), levels (K,) or None, totals (K,) or None, cat158.csv's path or None).

    From ``cat158.csv`` (the clone's root or ``noisy/``), else from the splits' (cat_id, cat) pairs."""
    path = next((p for p in (folder.parent / CAT_FILE, folder / CAT_FILE) if p.exists()), None)
    if path is not None:
        cat = _read_table(path, CAT_COLUMNS)
        dup = cat["category"][cat["category"].duplicated()].unique()
        if dup.size:
            raise DataFormatError(f"{path}: categories {dup[:5].tolist()} are listed more than once")
        return (cat["category"].to_numpy(dtype=object), cat["level"].to_numpy(), cat["steps"].to_numpy(), path)
    pairs = pd.concat([f[["cat_id", "cat"]] for f in splits.values()]).drop_duplicates()
    clash = pairs["cat_id"][pairs["cat_id"].duplicated()].unique()
    if clash.size:
        names = pairs[pairs["cat_id"] == clash[0]]["cat"].tolist()
        raise DataFormatError(f"{folder}: cat_id {clash[0]} is named {names} in the splits; one name per class "
                              f"({clash.size} such ids). Restore the files from the release.")
    K = int(pairs["cat_id"].max()) + 1
    absent = sorted(set(range(K)) - set(pairs["cat_id"].tolist()))
    if absent:
        raise DataFormatError(f"{folder}: no {CAT_FILE}, and cat_id {absent[:5]} appear in no split, so their names "
                              f"are unknown; put the release's {CAT_FILE} next to the noisy/ folder")
    return pairs.sort_values("cat_id")["cat"].to_numpy(dtype=object), None, None, None


def noise_file_format(name: str) -> tuple[str, float, str | None]:
    """(format "mix" or "sym", level, single source or None) of a noisy file's stem ("tail_0.1": "mix", 0.1, "TC")."""
    match = NOISE_FILE.match(name)
    if match is None:
        raise ConfigError(f"{name!r} is not a noisy training set of the release; its names are "
                          f"{', '.join(NOISE_FILES)} (mix_t, sym_t, neighbor/uncommon/tail_t)")
    prefix, level = match.group(1), float(match.group(2))
    return ("sym" if prefix == "sym" else "mix"), level, SINGLE_SOURCE_FILES.get(prefix)


def _read_noise(folder: Path, name: str, train: pd.DataFrame, K: int) -> pd.DataFrame:
    """A noisy file's rows in ``train.csv``'s order; its ids must be train's and its cat_id train's."""
    path = folder / f"{name}.csv"
    fmt = noise_file_format(name)[0]
    frame = _read_table(path, SYM_COLUMNS if fmt == "sym" else MIX_COLUMNS)
    ids, train_ids = set(frame["choosen_id"].tolist()), train["choosen_id"].tolist()
    if ids != set(train_ids):
        lost = [i for i in train_ids if i not in ids]
        extra = sorted(ids - set(train_ids))
        raise DataFormatError(f"{path}: its choosen_id must be train.csv's ({len(train_ids):,} ids); {len(lost):,} of "
                              f"train's are missing (first: {lost[:5]}), {len(extra):,} are not in train.csv (first: "
                              f"{extra[:5]}). Are both files from the same version of the release?")
    frame = frame.set_index("choosen_id").loc[train_ids].reset_index()
    differ = np.flatnonzero(frame["cat_id"].to_numpy() != train["cat_id"].to_numpy())
    if differ.size:
        raise DataFormatError(f"{path}: cat_id differs from train.csv's for {differ.size:,} events (first: choosen_id "
                              f"{frame['choosen_id'].iloc[differ[0]]}); are both files from the same release?")
    if fmt == "sym":
        _check_range(path, frame, "noisy_label", 0, K)
    return frame


def _noisy_train(name: str, frame: pd.DataFrame, classes: np.ndarray) -> NoisyTrain:
    if noise_file_format(name)[0] == "sym":
        labels = frame["noisy_label"].to_numpy()
        return NoisyTrain(name, "symmetric", frame["step"].to_numpy(dtype=object), labels,
                          labels != frame["cat_id"].to_numpy(), classes[frame["cat_id"].to_numpy()])
    return NoisyTrain(name, "real", frame["noisy_step"].to_numpy(dtype=object), frame["cat_id"].to_numpy(),
                      frame["step_id"].to_numpy() != frame["noisy_id"].to_numpy(),
                      frame["noisy_cat"].to_numpy(dtype=object))


# ---------------------------------------------------------------------------------------------- sources
def tail_classes(totals, max_total: int = TC_MAX_TOTAL) -> np.ndarray:
    """Indices of the tail categories (TC): at most ``max_total`` events in train + val + test (Appendix A.3).
    ``totals`` (K,) are the classes' event counts (cat158.csv's ``steps``)."""
    return np.flatnonzero(np.asarray(totals) <= max_total)


def infer_sources(n_classes: int, *, tc, bcc) -> np.ndarray:
    """(K,) noise sources: "TC" for the class indices ``tc``, "BCC" for those of ``bcc`` not in ``tc`` (the paper
    counts a class both beyond common sense and a tail category as TC, Appendix A.3), "SC" for the rest."""
    source = np.full(n_classes, "SC", dtype=object)
    source[np.asarray(bcc, dtype=np.int64)] = "BCC"
    source[np.asarray(tc, dtype=np.int64)] = "TC"
    return source


def _noised_classes(frame: pd.DataFrame) -> np.ndarray:
    return np.unique(frame["cat_id"].to_numpy()[frame["step_id"].to_numpy() != frame["noisy_id"].to_numpy()])


# ---------------------------------------------------------------------------------------------- checks
def _split_problems(splits: dict, K: int, totals, official: bool) -> dict[str, list[str]]:
    """Per split file, what disagrees with the release (sizes with ``official``; balance; overlap)."""
    problems = {f"{s}.csv": [] for s in SPLITS}
    counts = {s: np.bincount(f["cat_id"].to_numpy(), minlength=K) for s, f in splits.items()}
    if official and K != OFFICIAL_CLASSES:
        problems["train.csv"].append(f"{K} classes; the release has {OFFICIAL_CLASSES} (Table 3)")
    for s, frame in splits.items():
        if official and len(frame) != OFFICIAL_SIZES[s]:
            problems[f"{s}.csv"].append(f"{len(frame):,} rows; the release has {OFFICIAL_SIZES[s]:,} (Table 3)")
        if s != "train" and len(set(counts[s].tolist())) > 1:
            problems[f"{s}.csv"].append(f"unbalanced: {counts[s].min()} to {counts[s].max()} events per class; the "
                                        "release has the same number for every class")
        elif s != "train" and official and counts[s][0] != OFFICIAL_EVAL_PER_CLASS:
            problems[f"{s}.csv"].append(f"{counts[s][0]} events per class; the release has {OFFICIAL_EVAL_PER_CLASS}")
    seen = set(splits["train"]["choosen_id"].tolist())
    for s in SPLITS[1:]:
        shared = sorted(seen & set(splits[s]["choosen_id"].tolist()))
        if shared:
            problems[f"{s}.csv"].append(f"{len(shared)} choosen_id also in an earlier split (first: {shared[:5]})")
        seen |= set(splits[s]["choosen_id"].tolist())
    if totals is not None:
        found = sum(counts.values())
        bad = np.flatnonzero(found != totals)
        if bad.size:
            problems[CAT_FILE] = [f"steps differs from the events in train + val + test for {bad.size} classes "
                                  f"(first: cat_id {bad[0]}, steps {totals[bad[0]]}, found {found[bad[0]]})"]
    return problems


def _source_problems(source: np.ndarray, train_labels: np.ndarray) -> list[str]:
    """Table 3's classes and training events per source against the inferred sources."""
    found = {s: (int((source == s).sum()), int(np.isin(train_labels, np.flatnonzero(source == s)).sum()))
             for s in SOURCES}
    if found == TABLE3:
        return []
    text = ", ".join(f"{s} {c} / {n:,}" for s, (c, n) in found.items())
    paper = ", ".join(f"{s} {c} / {n:,}" for s, (c, n) in TABLE3.items())
    return [f"the inferred sources give classes / training events {text}; Table 3 has {paper} (TC: at most "
            f"{TC_MAX_TOTAL} events in total; BCC: the other classes {BCC_FILE}.csv puts noise in)"]


def _fraction_problem(what: str, noisy: int, n: int, expected: int, level: float, tol: float) -> list[str]:
    if abs(noisy - expected) <= tol * n:
        return []
    return [f"{what}: {noisy / n:.1%} noisy ({noisy:,} of {n:,}), expected {level:g} +- {tol:g} ({expected:,} events)"]


def _noise_problems(name: str, nt: NoisyTrain, row_source) -> tuple[dict, list[str]]:
    """({"noisy": overall fraction, "noisy_SC": ..., "expected": level}, problems) of one noisy training set;
    ``row_source`` (n,) is each row's source, or None when the sources are unknown (per-source checks skipped)."""
    fmt, level, single = noise_file_format(name)
    n, noisy = len(nt.is_noisy), int(nt.is_noisy.sum())
    stats = {"noisy": nt.noise_rate, "expected": level}
    if row_source is not None:
        stats |= {f"noisy_{s}": float(nt.is_noisy[row_source == s].mean()) for s in SOURCES if (row_source == s).any()}
    if fmt == "sym":
        return stats, _fraction_problem("overall", noisy, n, round_half_up(level, n), level, TOLERANCE["sym"])
    if row_source is None:
        return stats, []
    if single is None:
        sizes = {s: int((row_source == s).sum()) for s in SOURCES}
        problems = _fraction_problem("overall", noisy, n, sum(round_half_up(level, k) for k in sizes.values()), level,
                                     TOLERANCE["mix"])
        for s, n_s in sizes.items():
            problems += _fraction_problem(f"{s} classes' events", int(nt.is_noisy[row_source == s].sum()), n_s,
                                          round_half_up(level, n_s), level, TOLERANCE["mix"])
        return stats, problems
    problems = []
    outside = int((nt.is_noisy & (row_source != single)).sum())
    if outside:
        problems.append(f"{outside:,} noisy events are outside the {single} classes; all of this file's noise comes "
                        f"from {single} (Table 5)")
    expected = round_half_up(level, n)
    if abs(noisy - expected) > TOLERANCE["single"] * n:
        problems.append(f"{noisy / n:.1%} noisy ({noisy:,} of {n:,}), expected {level:g} +- {TOLERANCE['single']:g} "
                        f"({expected:,} events) all from {single} (our reading of Table 5: as many noisy events as "
                        f"mix_{level:g}, from one source)")
    return stats, problems


# ---------------------------------------------------------------------------------------------- audit
def _noise_names(folder: Path, noise_files) -> list[str]:
    if noise_files is None:
        return [n for n in NOISE_FILES if (folder / f"{n}.csv").exists()]
    names = [str(n).removesuffix(".csv") for n in ([noise_files] if isinstance(noise_files, str) else noise_files)]
    for name in names:
        noise_file_format(name)
        if not (folder / f"{name}.csv").exists():
            raise DataNotFoundError(f"{name}.csv is not in {folder} (asked for in noise_files). {GET_DATA}")
    return names


def _audit(folder: Path, names: list[str], official: bool, strict: bool) -> tuple[pd.DataFrame, dict]:
    """Reads and checks the splits, cat158.csv and the noisy files ``names``: (report, parts of the Benchmark).

    ``strict``: a file that cannot be read raises at once (loading); otherwise its report row holds the error and
    the checks that need it are skipped (``check_release``)."""
    report: dict[str, dict] = {}

    def add(file: str, **stats) -> list[str]:
        """The problem list of ``file``'s row, made with ``stats`` if new."""
        return report.setdefault(file, {"file": file, "problems": []} | stats)["problems"]

    def unreadable(file: str, error: Exception) -> None:
        if strict:
            raise error
        if isinstance(error, DataNotFoundError):
            add(file, status="missing")
        else:
            add(file).append(str(error))

    splits = {}
    for s in SPLITS:
        try:
            splits[s] = _read_table(folder / f"{s}.csv", SPLIT_COLUMNS)
            add(f"{s}.csv", rows=len(splits[s]), classes=splits[s]["cat_id"].nunique())
        except (DataFormatError, DataNotFoundError) as error:
            unreadable(f"{s}.csv", error)
    if len(splits) < len(SPLITS):
        return _report(report), {}
    try:
        classes, levels, totals, cat_path = _classes(folder, splits)
    except DataFormatError as error:
        unreadable(CAT_FILE, error)
        return _report(report), {}
    K = len(classes)
    add(CAT_FILE, rows=K, classes=K, status=None if cat_path else CAT_ABSENT)
    for s, frame in splits.items():
        try:
            _check_range(folder / f"{s}.csv", frame, "cat_id", 0, K)
        except DataFormatError as error:
            unreadable(f"{s}.csv", error)
            return _report(report), {}
        wrong = np.flatnonzero(frame["cat"].to_numpy(dtype=object) != classes[frame["cat_id"].to_numpy()])
        if wrong.size:
            i = wrong[0]
            add(f"{s}.csv").append(f"cat {frame['cat'].iloc[i]!r} of cat_id {frame['cat_id'].iloc[i]} is named "
                                   f"{classes[frame['cat_id'].iloc[i]]!r} in {CAT_FILE} ({wrong.size:,} such rows)")
    for file, problems in _split_problems(splits, K, totals, official).items():
        add(file).extend(problems)

    frames = {}
    needed = [BCC_FILE] + ([] if official else [TC_FILE])
    for name in dict.fromkeys(names + needed):
        try:
            frames[name] = _read_noise(folder, name, splits["train"], K)
        except (DataFormatError, DataNotFoundError) as error:
            if name in names or not isinstance(error, DataNotFoundError):
                unreadable(f"{name}.csv", error)
    train_labels = splits["train"]["cat_id"].to_numpy()
    source, lacking = None, [f"{n}.csv" for n in needed if n not in frames]
    if lacking:
        why = (f"{' and '.join(lacking)} missing or unreadable: the release does not list which classes are BCC"
               f"{'' if official else ' and TC'}, the classes this noise falls in")
        if strict:
            raise DataNotFoundError(f"{folder}: {why}. {GET_DATA}")
        add("train.csv").append(f"sources unknown ({why})")
    else:
        totals = totals if totals is not None else sum(np.bincount(f["cat_id"].to_numpy(), minlength=K)
                                                       for f in splits.values())
        tc = tail_classes(totals) if official else _noised_classes(frames[TC_FILE])
        source = infer_sources(K, tc=tc, bcc=_noised_classes(frames[BCC_FILE]))
        if official:
            add("train.csv").extend(_source_problems(source, train_labels))
    noise = {}
    for name in (n for n in names if n in frames):
        noise[name] = _noisy_train(name, frames[name], classes)
        stats, problems = _noise_problems(name, noise[name], None if source is None else source[train_labels])
        add(f"{name}.csv", rows=len(frames[name]), classes=len(np.unique(noise[name].labels)),
            **stats).extend(problems)
    return _report(report), {"classes": classes, "levels": levels, "source": source, "splits": splits,
                             "noise": noise, "cat158": cat_path}


def _report(report: dict) -> pd.DataFrame:
    order = [f"{s}.csv" for s in SPLITS] + [CAT_FILE] + [f"{n}.csv" for n in NOISE_FILES]
    files = sorted(report, key=lambda f: order.index(f) if f in order else len(order))
    rows = [{c: report[f].get(c, np.nan) for c in REPORT_COLUMNS}
            | {"status": "; ".join(report[f]["problems"]) or report[f].get("status") or "ok"} for f in files]
    return pd.DataFrame(rows, columns=list(REPORT_COLUMNS))


def check_release(folder, official: bool = True) -> pd.DataFrame:
    """One row per file of the release in ``folder`` (the folder holding train.csv, as ``locate_noisywikihow``
    returns): ``file``, ``rows``, ``classes`` (distinct labels), ``noisy`` (fraction of noisy rows),
    ``noisy_SC`` / ``noisy_BCC`` / ``noisy_TC`` (per source), ``expected`` (the file's level) and ``status``
    ("ok", "missing", or the problems found). Never raises for a bad file; see the module docstring for the checks.
    """
    return _audit(Path(folder).expanduser(), list(NOISE_FILES), official, strict=False)[0]


# ---------------------------------------------------------------------------------------------- loading
def load_noisywikihow(data_dir=None, *, noise_files=None, official: bool = True) -> Benchmark:
    """The NoisywikiHow release as a Benchmark (``noisywikihow.benchmark``), checked on loading.

    Args:
        data_dir: the clone, its ``noisy/`` folder or a folder holding ``NoisywikiHow-dataset/`` (see
            ``locate_noisywikihow``).
        noise_files: the noisy training sets to read, by file stem ("mix_0.4", "sym_0.2", "tail_0.1"); None: every
            one of ``NOISE_FILES`` present. A named file that is absent raises DataNotFoundError.
        official: also check the paper's counts (Table 3); False for files made with ``write_release``.

    Returns a Benchmark with ``classes`` (158,), ``source`` (158,) inferred as the module docstring says, ``parent``
    all "" (not released), splits with ``ids`` = choosen_id, ``noise`` by file stem and ``meta`` (``path``,
    ``cat158``, ``levels`` (K,) hierarchy depths or None, ``official``). Raises DataFormatError listing every
    failed check.
    """
    folder = locate_noisywikihow(data_dir)
    report, parts = _audit(folder, _noise_names(folder, noise_files), official, strict=True)
    bad = report[~report["status"].isin(["ok", CAT_ABSENT])]
    if len(bad):
        lines = "\n".join(f"  {f}: {s}" for f, s in zip(bad["file"], bad["status"]))
        hint = ("\nFiles not from the release (e.g. written by noisywikihow.formats.write_release) load with "
                "official=False." if official else "")
        raise DataFormatError(f"the NoisywikiHow files in {folder} fail {len(bad)} check(s):\n{lines}{hint}")
    splits = {s: Split(f["step"].to_numpy(dtype=object), f["cat_id"].to_numpy(), f["choosen_id"].to_numpy())
              for s, f in parts["splits"].items()}
    K = len(parts["classes"])
    meta = {"path": str(folder), "cat158": str(parts["cat158"]) if parts["cat158"] else None,
            "levels": parts["levels"], "official": official}
    return Benchmark("NoisywikiHow", parts["classes"], parts["source"], np.full(K, "", dtype=object),
                     splits["train"], splits["val"], splits["test"], parts["noise"], meta)


__all__ = ["NOISE_FILES", "SPLIT_COLUMNS", "MIX_COLUMNS", "SYM_COLUMNS", "CAT_COLUMNS", "TC_MAX_TOTAL", "TOLERANCE",
           "TABLE3", "locate_noisywikihow", "load_noisywikihow", "check_release", "noise_file_format", "tail_classes",
           "infer_sources"]
