"""The paper's protocol, shared by LNLFN's notebooks: train on the noisy train split, select on the noisy
validation split, score out-of-sample items, and measure detection and task accuracy.

A *model sweep* is a ``SweepResult`` over the validation and test items of a dataset (``ds.split != "train"``):

* the smoke profile (``model`` a name in ``shared.text.encoders.MODELS``): small heads (``lnlfn.scoring``) on the
  frozen sentence embeddings of the texts (the "linear-probe FM" stand-in for fine-tuning);
* the full profile (``model`` a Hugging Face model directory or name): fine-tuning runs
  (``lnlfn.finetune``), sequence classification, or token classification when the items are tweet tokens.

The non-pretrained baseline (the H&G analogue) is the same protocol with TF-IDF n-gram features fitted on the
training split (character n-grams for word-level items, word n-grams for sentences).

    ds = load_text_dataset("vader"); noised = make_benchmark("vader5", ds)
    sweep = model_sweep(ds, noised.noisy, model="all-minilm-l6-v2", configs=smoke_heads())
    test = sweep.restrict(test_items(ds, sweep))
    detection_row(fme(test), noised.noised[ds.split == "test"])    # {"aupr": ..., "p_at_err": ..., ...}
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from lnlfn.scoring import Detection, HeadConfig, SweepResult, random_heads, run_sweep, smoke_heads
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.text.encoders import MODELS, embed, ngram_features
from shared.text.models import resolve_model_dir

BASELINE_HEADS = (HeadConfig("logreg", C=1.0), HeadConfig("logreg", C=10.0))


def with_validation(ds, fraction: float = 0.1, seed: int = 0):
    """``ds`` itself if it has a "val" split; otherwise a random ``fraction`` of its training rows becomes
    "val" (IMDB and Amazon ship only train/test; the paper does not say how it validated)."""
    split = np.asarray(ds.split).copy()
    if (split == "val").any():
        return ds
    train = np.flatnonzero(split == "train")
    rng = np.random.default_rng(seed)
    split[rng.choice(train, size=carved_validation(ds.name, len(train), fraction), replace=False)] = "val"
    return replace(ds, split=split, meta=dict(ds.meta, validation_carved_from_train=fraction))


def carved_validation(name: str, n_train: int, fraction: float = 0.1) -> int:
    """How many of ``n_train`` training rows ``with_validation`` turns into "val" (``lnlfn.cost`` sizes runs
    with it)."""
    if n_train < 2:
        raise ConfigError(f"{name} has no validation split and too few training rows to carve one out")
    return max(1, int(round(fraction * n_train)))


def benchmark_labels(bench: str, ds, cfg, seed: int):
    """The noisy labels of benchmark ``bench`` on ``ds`` for one seed of the settings: noise seed
    ``cfg.noise_seed + seed`` (notebooks 02, 03 and 05; ``lnlfn.cost`` plans from the same labels)."""
    from lnlfn.benchmarks import make_benchmark

    return make_benchmark(bench, ds, seed=cfg.noise_seed + seed)


def benchmark_cases(benchmarks, seeds) -> list[tuple[str, int]]:
    """(benchmark, seed) in the order notebooks 03 and 05 run them: every seed of each benchmark in turn."""
    return [(bench, seed) for bench in benchmarks for seed in seeds]


def is_frozen(model: str) -> bool:
    """True for the offline frozen-encoder stand-in, False for a model to fine-tune."""
    return model in MODELS


def scored_items(ds) -> np.ndarray:
    """Row indices of the items a sweep scores: every row outside the training split, in dataset order."""
    return np.flatnonzero(np.asarray(ds.split) != "train")


def test_items(ds) -> np.ndarray:
    """Positions of the test rows among ``scored_items(ds)`` (what ``SweepResult.restrict`` takes)."""
    return np.flatnonzero(np.asarray(ds.split)[scored_items(ds)] == "test")


def val_items(ds) -> np.ndarray:
    """Positions of the validation rows among ``scored_items(ds)``."""
    return np.flatnonzero(np.asarray(ds.split)[scored_items(ds)] == "val")


def sweep_configs(model: str, n_sweep: int | None, *, seed: int = 0) -> list:
    """The sweep's runs: the smoke heads (``n_sweep`` None), ``n_sweep`` random heads, or fine-tuning configs."""
    if is_frozen(model):
        return smoke_heads() if n_sweep is None else random_heads(int(n_sweep), seed=seed)
    from lnlfn.finetune import random_finetune_configs

    return random_finetune_configs(int(n_sweep or 25), seed=seed)


def make_configs(model: str, specs) -> list:
    """Sweep runs from plain dicts (profiles.yaml): HeadConfig fields for a frozen model, FinetuneConfig
    fields for a model to fine-tune."""
    if is_frozen(model):
        return [HeadConfig(**dict(s)) for s in specs]
    from lnlfn.finetune import FinetuneConfig

    return [FinetuneConfig(**dict(s)) for s in specs]


def _check_labels(ds, labels) -> np.ndarray:
    y = np.asarray(labels, dtype=np.int64)
    if y.shape != (len(ds),):
        raise ConfigError(f"labels must have one entry per item of {ds.name} ({len(ds)}), got shape {y.shape}")
    return y


def features(ds, model: str = "all-minilm-l6-v2", *, device="cpu") -> np.ndarray:
    """Frozen embeddings (n, d) of every item of ``ds`` (cached by model and texts)."""
    return embed(ds.texts, model=model, device=device)


def _heads_sweep(X, ds, labels, configs, desc: str) -> SweepResult:
    train = np.asarray(ds.split) == "train"
    scored = scored_items(ds)
    return run_sweep(X[scored], labels[scored], configs, n_classes=ds.num_classes, train=(X[train], labels[train]),
                     val=val_items(ds), desc=desc)


def model_sweep(ds, labels, *, model: str = "all-minilm-l6-v2", configs=None, device="cpu", data_dir=None,
                desc: str = "model sweep", executor=None) -> SweepResult:
    """The foundation-model sweep: every run trains on the train rows' ``labels`` (n,), is selected on the
    validation rows and scores all validation and test rows (``scored_items``).

    ``configs``: HeadConfigs (frozen model) or FinetuneConfigs (fine-tuning); default ``sweep_configs(model, None)``.
    ``executor``: where fine-tuning runs train (the notebooks' setting ``executor``; ``finetune_sweep``), e.g.
    ``{kind: slurm, gpus_per_node: 1, wait: false}``; None: in this process. Frozen-model heads (the smoke
    profile) always train in this process.
    """
    y = _check_labels(ds, labels)
    configs = list(configs) if configs is not None else sweep_configs(model, None)
    if is_frozen(model):
        return _heads_sweep(features(ds, model, device=device), ds, y, configs, desc)
    from lnlfn.finetune import TokenItems, finetune_sweep

    train = np.flatnonzero(np.asarray(ds.split) == "train")
    scored = scored_items(ds)
    if task_of(ds) == "token":
        items = lambda rows: TokenItems.from_dataset(ds.subset(rows))  # noqa: E731
    else:
        items = lambda rows: [ds.texts[i] for i in rows]  # noqa: E731
    return finetune_sweep(model, items(scored), y[scored], configs, train=(items(train), y[train]),
                          val=val_items(ds), num_labels=ds.num_classes, task=task_of(ds), device=device,
                          data_dir=data_dir, executor=executor)


def task_of(ds) -> str:
    """"token" when the items are the tokens of tweets (TweetNLP), else "sequence"."""
    return "token" if "tweet" in ds.columns and "position" in ds.columns else "sequence"


def baseline_sweep(ds, labels, *, configs=BASELINE_HEADS, kind: str | None = None,
                   desc: str = "n-gram baseline") -> SweepResult:
    """The non-pretrained baseline (H&G analogue): TF-IDF n-grams fitted on the train rows, same protocol.

    ``kind``: "char" (1-4-grams within words, for word-level items) or "word" (uni- and bigrams, for
    sentences); default by the mean item length.
    """
    y = _check_labels(ds, labels)
    texts = list(ds.texts)
    if kind is None:
        kind = baseline_kind(texts)
    train = np.asarray(ds.split) == "train"
    X_train, X_all = ngram_features([t for t, k in zip(texts, train) if k], texts, kind=kind)
    scored = scored_items(ds)
    return run_sweep(X_all[scored], y[scored], configs, n_classes=ds.num_classes, train=(X_train, y[train]),
                     val=val_items(ds), desc=desc)


def baseline_kind(texts) -> str:
    """The baseline's n-grams for these items: "char" for word-level items (fewer than 3 words on average over the
    first 2,000), else "word"."""
    words = np.mean([len(str(t).split()) for t in list(texts)[:2000]])
    return "char" if words < 3 else "word"


def selected_accuracy(sweep: SweepResult, ds, *, eval_labels, select_labels=None, split: str = "test") -> dict:
    """Accuracy on ``split`` of the run selected on the validation rows.

    ``select_labels`` (n,) are the validation labels selection uses (default: the sweep's own given labels);
    ``eval_labels`` (n,) the labels accuracy is measured against (noisy: "measurable"; clean: "true").
    Returns ``{"run": index, "accuracy": float, "accuracies": (m,) per run}``.
    """
    scored = scored_items(ds)
    names = np.asarray(ds.split)[scored]
    pred = sweep.probs.argmax(axis=2)  # (m, n_scored)
    val = names == "val"
    if select_labels is None:
        val_acc = sweep.val_accuracy
    else:
        sel = _check_labels(ds, select_labels)[scored]
        val_acc = (pred[:, val] == sel[val]).mean(axis=1)
    ev = _check_labels(ds, eval_labels)[scored]
    part = names == split
    accs = (pred[:, part] == ev[part]).mean(axis=1)
    run = int(np.lexsort((np.arange(len(val_acc)), sweep.val_loss, -val_acc))[0])
    return {"run": run, "accuracy": float(accs[run]), "accuracies": accs}


def corrected_labels(ds, noisy, clean, scores, rate) -> np.ndarray:
    """Table 4's "corrected" labels (n,): in the validation and the test split, the top ``round(rate x n_split)``
    scored items (``scores`` (n_scored,) over ``scored_items(ds)``, higher = checked first) are checked by a
    perfect verifier: flagged items whose noisy label is wrong get their clean label back, the rest stay.
    ``rate="all"`` (a benchmark that noises every disagreement, TweetNLP-M) checks as many items as the split
    has noisy labels (its realized Err%)."""
    noisy, clean = _check_labels(ds, noisy), _check_labels(ds, clean)
    scored = scored_items(ds)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != scored.shape:
        raise ConfigError(f"scores must have one entry per scored item ({len(scored)}), got shape {scores.shape}")
    names = np.asarray(ds.split)[scored]
    out = noisy.copy()
    for s in ("val", "test"):
        rows = np.flatnonzero(names == s)
        k = int((noisy[scored[rows]] != clean[scored[rows]]).sum()) if rate == "all" else int(round(rate * len(rows)))
        top = scored[rows[np.argsort(-scores[rows], kind="stable")[:k]]]
        fix = top[noisy[top] != clean[top]]
        out[fix] = clean[fix]
    return out


def true_rank(run: int, true_accuracies) -> int:
    """Table 4's rank of ``run`` among the sweep by true (clean-test) accuracy: 1 = best; ties share the better rank."""
    acc = np.asarray(true_accuracies, dtype=np.float64)
    return int(1 + (acc > acc[run] + 1e-12).sum())


def precision_recall_f1(hypothesized, is_error) -> tuple[float, float, float]:
    """Precision, recall and F1 of a set of hypothesized item positions (Tables 8-10 at a threshold)."""
    err = np.asarray(is_error, dtype=bool)
    top = np.asarray(hypothesized, dtype=np.int64)
    if err.sum() == 0:
        raise ConfigError("no label errors among the scored items: recall is undefined")
    tp = int(err[top].sum())
    p, r = tp / max(len(top), 1), tp / int(err.sum())
    return p, r, 0.0 if p + r == 0 else 2 * p * r / (p + r)


def detection_row(det: Detection, is_error, *, n_errors: int | None = None) -> dict:
    """Table 3's metrics of one detection: trapezoid AUPR (over the method's own hypothesized items),
    P = R at Err% (k = number of errors), recall at 2 x Err%, and how many items the method hypothesizes.

    A method that flags fewer than k items (CL, the overlays) is scored on its flagged items only: TP among
    them over k, i.e. the slots it leaves empty count as misses (precision and recall at k stay equal)."""
    err = np.asarray(is_error, dtype=bool)
    n_err = int(err.sum()) if n_errors is None else int(n_errors)
    if n_err == 0:
        raise ConfigError("no label errors among the scored items: detection metrics are undefined")
    order = det.ranked()  # a flagged-set method hypothesizes only its flagged items
    return {"aupr": det.aupr(err, n_errors=n_err), "p_at_err": float(err[order[:n_err]].sum() / n_err),
            "r_at_2err": float(err[order[:2 * n_err]].sum() / n_err),
            "n_flagged": len(order)}


# ---------------------------------------------------------------------------------------------- optional inputs
def skip_reason(error: Exception) -> str:
    """Why an item is skipped: "absent: ..." (DataNotFoundError) or "unreadable: ..." (a DataFormatError, e.g. a
    git-LFS pointer), followed by the loader's message (the paths looked at and the fix)."""
    return f"{'absent' if isinstance(error, DataNotFoundError) else 'unreadable'}: {error}"


def brief(reason: str) -> str:
    """The first line of a skip reason, joined with the first path it names ("... not found. Looked for: <path>")."""
    lines = [line for line in str(reason).splitlines() if line.strip()]
    if len(lines) > 1 and lines[1].startswith(" "):
        return f"{lines[0]} {lines[1].strip()}"
    return lines[0] if lines else str(reason)


def benchmark_source(bench: str, options=None) -> tuple[str, dict]:
    """The dataset a benchmark is built on and its loader's keyword arguments: ``options[dataset]`` (profiles.yaml
    ``dataset_options``), plus ``crowd=True`` for human-originated noise on TweetNLP (drawn from the crowd tags)."""
    from lnlfn.benchmarks import benchmark
    from shared.noise.annotations import HUMAN_KINDS, canonical_kind

    spec = benchmark(bench)
    kwargs = dict((options or {}).get(spec.dataset, {}))
    if spec.dataset == "tweetnlp" and any(canonical_kind(k) in HUMAN_KINDS for k in spec.mix):
        kwargs.setdefault("crowd", True)
    return spec.dataset, kwargs


def load_benchmark_data(benchmarks, data_dir=None, *, options=None) -> tuple[dict, dict]:
    """The datasets of ``benchmarks`` that can be read, and the benchmarks skipped for want of data.

    Returns ``({dataset name: TextDataset}, {benchmark: reason})``. ``options`` maps a dataset to its loader's
    keyword arguments (profiles.yaml ``dataset_options``). A benchmark with human-originated noise on TweetNLP
    needs the crowd file too. A dataset that is absent (DataNotFoundError) or unreadable (DataFormatError) skips
    its benchmarks with the reason (``skip_reason``); when no benchmark is left, a DataNotFoundError lists why.
    """
    from lnlfn.data import load_text_dataset

    datasets, skipped, failed = {}, {}, {}
    for bench in benchmarks:
        dataset, kwargs = benchmark_source(bench, options)
        key = (dataset, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        if key in failed:
            skipped[bench] = failed[key]
            continue
        if dataset not in datasets:
            try:
                datasets[dataset] = load_text_dataset(dataset, data_dir=data_dir, **kwargs)
            except (DataNotFoundError, DataFormatError) as e:
                failed[key] = skipped[bench] = skip_reason(e)
    if not datasets:
        raise DataNotFoundError("none of the benchmarks' data was found:\n\n"
                                + "\n\n".join(f"{b}: {r}" for b, r in skipped.items()))
    return datasets, skipped


def available_models(models, data_dir=None) -> tuple[dict, dict]:
    """The models of ``models`` ({name: info}, as profiles.yaml lists them) whose folders can be used, and the
    skipped ones ({name: reason}: absent, or a clone without git-lfs). None usable raises a DataNotFoundError."""
    usable, skipped = {}, {}
    for name, info in dict(models).items():
        try:
            resolve_model_dir(name, data_dir=data_dir)
        except (DataNotFoundError, DataFormatError) as e:
            skipped[name] = skip_reason(e)
            continue
        usable[name] = info
    if not usable:
        raise DataNotFoundError("none of the models was found:\n\n" + "\n\n".join(f"{m}: {r}" for m, r in
                                                                                  skipped.items()))
    return usable, skipped


def skipped_frame(skipped: dict, what: str = "benchmark"):
    """The items skipped and why, as a table (empty when nothing was skipped)."""
    import pandas as pd

    return pd.DataFrame([{what: k, "skipped because": brief(r)} for k, r in skipped.items()],
                        columns=[what, "skipped because"])


def prefer(preferred: str, available) -> str:
    """``preferred`` if it is among ``available`` (the benchmarks run), else the first of them."""
    available = list(available)
    if not available:
        raise ConfigError("no benchmark was run")
    return preferred if preferred in available else available[0]


def claim_each(report, template: str, benchmarks, results: dict, skipped: dict) -> None:
    """One claim per benchmark: ``template`` formatted with ``bench`` and ``paper`` (the dataset it stands in for).

    ``results[bench]`` is ``(holds, detail)`` for the benchmarks run; a benchmark skipped for want of data is
    recorded as "not run" with the reason, as is one that was neither run nor skipped.
    """
    from lnlfn.benchmarks import BENCHMARKS

    for bench in benchmarks:
        statement = template.format(bench=bench, paper=BENCHMARKS[bench].stands_in_for)
        if bench in results:
            holds, detail = results[bench]
            report.claim(statement, holds=holds, detail=detail)
        elif bench in skipped:
            report.claim(statement, holds=None, detail=f"not run, data {brief(skipped[bench])}")
        else:
            report.claim(statement, holds=None, detail=f"not run: {bench} is not among the benchmarks run")


__all__ = ["BASELINE_HEADS", "with_validation", "carved_validation", "benchmark_labels", "benchmark_cases", "is_frozen",
           "scored_items", "test_items", "val_items", "sweep_configs", "make_configs", "features",
           "model_sweep", "task_of", "baseline_sweep", "baseline_kind", "selected_accuracy", "corrected_labels",
           "true_rank", "precision_recall_f1", "detection_row", "skip_reason", "brief", "load_benchmark_data",
           "available_models", "skipped_frame", "prefer", "claim_each", "benchmark_source"]
