"""Jenga-style tabular corruptions on Adult's 13 features (CILN's ``adult_funcs``; paper Sec. III-B).

Severity sets the fraction of affected rows, r = {1: 0.05, 3: 0.25, 5: 0.50} (only levels 1, 3, 5 are
defined). Each row draws from its own Generator:

- ``missing_mcar``: with probability r the whole row becomes NaN;
- ``missing_mar``: probability min(1, 1.5 r) for women, 0.75 r for men; every cell but ``sex`` becomes NaN;
- ``missing_mnar``: each cell independently, numeric p = r (0.5 + q) with q the value's quantile rank in
  the clean training column, categorical p = r (1.5 - f) with f the category's training frequency;
- ``scaling``: with probability r every numeric cell is multiplied by {1: 10, 3: 100, 5: 1000};
- ``gaussian_noise``: with probability r every numeric cell gets N(0, sigma) noise, sigma = {1: 2, 3: 3.5,
  5: 5} in raw units.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.datasets.real import ADULT_CATEGORICAL, ADULT_NUMERIC

ROW_FRACTION = {1: 0.05, 3: 0.25, 5: 0.50}
SCALE_FACTOR = {1: 10, 3: 100, 5: 1000}
NOISE_SIGMA = {1: 2.0, 3: 3.5, 5: 5.0}
PARAMS = {
    "missing_mcar": ROW_FRACTION, "missing_mar": ROW_FRACTION, "missing_mnar": ROW_FRACTION,
    "scaling": {s: (ROW_FRACTION[s], SCALE_FACTOR[s]) for s in ROW_FRACTION},
    "gaussian_noise": {s: (ROW_FRACTION[s], NOISE_SIGMA[s]) for s in ROW_FRACTION},
}
FAMILIES = {"Missing": ("missing_mcar", "missing_mar", "missing_mnar"), "Value": ("gaussian_noise", "scaling")}
SEVERITIES = tuple(ROW_FRACTION)


class MnarStatistics:
    """Per-column statistics of the clean training table that MNAR missingness depends on."""

    def __init__(self, reference: pd.DataFrame):
        self.sorted = {c: np.sort(reference[c].dropna().to_numpy(float)) for c in ADULT_NUMERIC}
        self.freq = {c: reference[c].value_counts(normalize=True).to_dict() for c in ADULT_CATEGORICAL}

    def quantile(self, column: str, value) -> float:
        values = self.sorted[column]
        if pd.isna(value) or len(values) == 0:
            return 0.5
        return float(np.searchsorted(values, value) / len(values))

    def frequency(self, column: str, value) -> float:
        return float(self.freq[column].get(value, 0.5)) if not pd.isna(value) else 0.5


def corrupt_table(table: pd.DataFrame, corruption: str, severity: int, rngs, reference: pd.DataFrame) -> pd.DataFrame:
    """A corrupted copy of ``table`` (rows aligned with ``rngs``); ``reference`` is the clean training table."""
    out = table.copy()
    numeric = [c for c in ADULT_NUMERIC if c in out.columns]
    categorical = [c for c in ADULT_CATEGORICAL if c in out.columns]
    for c in numeric:
        out[c] = out[c].astype(float)
    for c in categorical:
        out[c] = out[c].astype(object)
    rate = ROW_FRACTION[severity]
    values = out.to_dict("records")
    stats = MnarStatistics(reference) if corruption == "missing_mnar" else None
    for row, rng in zip(values, rngs):
        if corruption == "missing_mcar":
            if rng.random() < rate:
                row.update({c: np.nan for c in row})
        elif corruption == "missing_mar":
            p = min(1.0, 1.5 * rate) if row.get("sex") == "Female" else 0.75 * rate
            if rng.random() < p:
                row.update({c: np.nan for c in row if c != "sex"})
        elif corruption == "missing_mnar":
            for c in numeric:
                if rng.random() < rate * (0.5 + stats.quantile(c, row[c])):
                    row[c] = np.nan
            for c in categorical:
                if rng.random() < rate * (1.5 - stats.frequency(c, row[c])):
                    row[c] = np.nan
        elif corruption == "scaling":
            if rng.random() < rate:
                row.update({c: row[c] * SCALE_FACTOR[severity] for c in numeric if not pd.isna(row[c])})
        elif corruption == "gaussian_noise":
            if rng.random() < rate:
                noise = rng.normal(0.0, NOISE_SIGMA[severity], len(numeric))
                row.update({c: row[c] + e for c, e in zip(numeric, noise)})
    result = pd.DataFrame(values, columns=out.columns, index=out.index)
    for c in numeric:
        result[c] = result[c].astype(float)
    return result
