"""Writer of the NoisywikiHow release's layout (github.com/tangminji/NoisywikiHow-dataset), the inverse of
``noisywikihow.data.load_noisywikihow``; the unit tests write tiny files with it, the rehearsal TinyHow.

    root = write_release(tmp / "NoisywikiHow-dataset", bench)   # root/cat158.csv, root/noisy/{train,val,test}.csv
    again = load_noisywikihow(root, official=False)              # + one CSV per set in bench.noise ("mix_0.4.csv", ...)

The release's ids cannot be recovered from a Benchmark, so: ``choosen_id`` and ``step_id`` are the splits' ``ids``
(unique over the three splits, in the splits' row order); a replaced row of a real-noise file gets the
``noisy_id`` ``base + row`` (base = the larger of ``NOISY_ID_BASE`` and the largest id + 1), different from every
step_id and the same in every file; ``noisy_label`` is the class id of ``noisy_cat``, -1 outside the classes
(the open-set events of real noise); ``cat158.csv``'s ``level`` is ``cat_levels`` or ``DEFAULT_LEVEL``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from noisywikihow.benchmark import Benchmark
from noisywikihow.data import CAT_COLUMNS, CAT_FILE, MIX_COLUMNS, SPLIT_COLUMNS, SPLITS, SYM_COLUMNS, noise_file_format
from shared.errors import ConfigError

NOISY_ID_BASE = 10_000_000
DEFAULT_LEVEL = 3  # the most common depth of the release's classes in the wikiHow hierarchy
KIND_FORMAT = {"real": "mix", "symmetric": "sym"}


def _write(path: Path, columns, **values) -> None:
    pd.DataFrame({c: values[c] for c in columns}).to_csv(path, index=False, lineterminator="\n")


def write_release(folder, bench: Benchmark, *, cat_levels=None) -> Path:
    """Writes ``bench`` as the release does under ``folder`` (created) and returns ``folder``.

    ``cat_levels`` (K,) are the classes' depths for cat158.csv. Every set of ``bench.noise`` becomes
    ``noisy/<name>.csv`` in the format of its kind ("real": mix format, "symmetric": sym format); a name that is
    not a release file name for that kind, a real set whose labels are not the clean ones, or a symmetric set
    whose texts are not the clean ones (the format cannot hold them) raises ConfigError.
    """
    root, K = Path(folder), bench.num_classes
    levels = np.full(K, DEFAULT_LEVEL) if cat_levels is None else np.asarray(cat_levels)
    if levels.shape != (K,):
        raise ConfigError(f"cat_levels must hold one depth per class: expected shape ({K},), got {levels.shape}")
    (root / "noisy").mkdir(parents=True, exist_ok=True)
    splits = {s: getattr(bench, s) for s in SPLITS}
    totals = sum(np.bincount(split.labels, minlength=K) for split in splits.values())
    _write(root / CAT_FILE, CAT_COLUMNS, category=bench.classes, level=levels, steps=totals)
    for s, split in splits.items():
        _write(root / "noisy" / f"{s}.csv", SPLIT_COLUMNS, choosen_id=split.ids, step_id=split.ids,
               cat_id=split.labels, step=split.texts, cat=bench.classes[split.labels])
    train = bench.train
    base = max(NOISY_ID_BASE, max(int(split.ids.max()) for split in splits.values() if len(split)) + 1)
    class_id = {c: i for i, c in enumerate(bench.classes)}
    for name, nt in bench.noise.items():
        fmt = noise_file_format(name)[0]
        if KIND_FORMAT.get(nt.kind) != fmt:
            raise ConfigError(f"noisy set {name!r} is of kind {nt.kind!r}; the release's {fmt} files hold "
                              f"{'symmetric' if fmt == 'sym' else 'real'} noise: rename it or fix its kind")
        common = {"choosen_id": train.ids, "step_id": train.ids, "cat_id": train.labels, "step": train.texts,
                  "cat": bench.classes[train.labels]}
        if fmt == "sym":
            if not np.array_equal(nt.texts, train.texts) or not np.array_equal(nt.is_noisy, nt.labels != train.labels):
                raise ConfigError(f"symmetric set {name!r} must keep the training texts and be noisy exactly where its "
                                  "labels differ from the clean ones: the sym format holds only the flipped labels")
            _write(root / "noisy" / f"{name}.csv", SYM_COLUMNS, **common, noisy_label=nt.labels,
                   noisy_cat=bench.classes[nt.labels])
            continue
        if not np.array_equal(nt.labels, train.labels):
            raise ConfigError(f"real-noise set {name!r} must keep the clean labels (mix files replace texts only)")
        _write(root / "noisy" / f"{name}.csv", MIX_COLUMNS, **common,
               noisy_id=np.where(nt.is_noisy, base + np.arange(len(train)), train.ids), noisy_step=nt.texts,
               noisy_cat=nt.true_category, noisy_label=[class_id.get(c, -1) for c in nt.true_category])
    return root


__all__ = ["NOISY_ID_BASE", "DEFAULT_LEVEL", "write_release"]
