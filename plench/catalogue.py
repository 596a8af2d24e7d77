"""Tables 6 and 8 of the paper set beside the project's registries: the algorithms (``plench.algorithms``) and their
hyperparameters (``plench.hparams``).

    side = table6_side_by_side(reported("plench", "table6"), table6_registry())     # one row per algorithm
    side = table8_side_by_side(reported("plench", "table8"), table8_registry())     # one row per hyperparameter
    compare_with_paper(table8_numbers(table8_registry()), table8_paper_numbers(reported("plench", "table8")),
                       on=["condition", "hparam"])                    # defaults and ranges: paper | ours | diff

Textual entries (an algorithm's group, reference, whether it runs on tabular data; a hyperparameter's
distribution) are set side by side with ``agrees`` and, where they differ, ``differences``; numbers (how many
algorithms per group, each hyperparameter's default and the smallest and largest value its search draws) go
through ``shared.report.compare_with_paper``, which sets ours beside each of the paper's numbers. In the
side-by-side tables an entry on one side only is a row too, never dropped: a registered algorithm or hyperparameter
the paper does not list, or one of the paper's the registry lacks. A search the code replaces on PLCIFAR10 (ALIM's
noise rate, PiCO+'s clean ratio: fixed from the dataset's noise rate) is named as a difference.
"""
from __future__ import annotations

import re
from numbers import Number

import numpy as np
import pandas as pd

from plench.algorithms import ALGORITHMS, display_name
from plench.hparams import KNOWN_NOISE_RATES, Choice, Fixed, LogUniform, PowChoice, global_space, specific_space
from shared.errors import DataFormatError

# The registry's groups under Table 6's headings.
GROUP_HEADINGS = {"vanilla PLL": "Vanilla Deep PLL Algorithms", "vanilla CLL": "Vanilla Deep CLL Algorithms",
                  "holistic PLL": "Holistic Deep PLL Algorithms", "noisy PLL": "Deep Noisy PLL Algorithms"}
# Table 8's global conditions and the network each stands for (every ``plench.hparams.IMAGE_ARCHS`` follows "ResNet").
GLOBAL_CONDITIONS = {"ResNet": "resnet32", "MLP": "mlp"}
MISSING = "—"
_CITATION = re.compile(r"^[^(\n]*\(([^()]*\d{4}[a-z]?)\)")


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def _same_text(a, b) -> bool:
    return not _absent(a) and not _absent(b) and str(a) == str(b)


def _absent(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _wide(long: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """A reported table's long rows, one row per ``keys`` with a column per metric, in the file's order."""
    rows: dict[tuple, dict] = {}
    for r in long.to_dict("records"):
        key = tuple(r[k] for k in keys)
        rows.setdefault(key, dict(zip(keys, key)))[r["metric"]] = r["value"]
    return pd.DataFrame(list(rows.values()))


# ------------------------------------------------------------------------------------------------ Table 6
def registry_citation(cls) -> str | None:
    """The reference an algorithm class's docstring opens with ("PRODEN (Lv et al., 2020): ..."), looked up along
    its bases (MCL-GCE's is its base MCL's); None if none has one."""
    for klass in cls.__mro__:
        match = _CITATION.match((klass.__dict__.get("__doc__") or "").strip())
        if match:
            return match.group(1)
    return None


def table6_registry(algorithms=None) -> pd.DataFrame:
    """One row per registered algorithm (``ALGORITHMS``, Table 6 order): algorithm (display name), name (the
    registry's), group (Table 6's heading), reference (``registry_citation``) and tabular ("yes" when the class
    runs without image augmentations)."""
    algorithms = ALGORITHMS if algorithms is None else algorithms
    rows = [{"algorithm": cls.display, "name": name, "group": GROUP_HEADINGS.get(cls.group, cls.group),
             "reference": registry_citation(cls), "tabular": _yes_no(cls.tabular)} for name, cls in algorithms.items()]
    return pd.DataFrame(rows, columns=["algorithm", "name", "group", "reference", "tabular"])


def table6_paper(paper: pd.DataFrame) -> pd.DataFrame:
    """``reported("plench", "table6")``'s per-algorithm rows, one row per algorithm: algorithm, group, reference,
    tabular (the paper's order)."""
    rows = paper[paper["algorithm"].notna() & (paper["algorithm"].astype(str) != "")]
    wide = _wide(rows, ["algorithm", "group"])
    for column in ("reference", "tabular"):
        if column not in wide.columns:
            wide[column] = np.nan
    return wide[["algorithm", "group", "reference", "tabular"]]


TABLE6_PROPERTIES = ("group", "reference", "tabular")


def table6_side_by_side(paper: pd.DataFrame, registry: pd.DataFrame) -> pd.DataFrame:
    """Table 6 (``reported("plench", "table6")``) beside ``table6_registry``: one row per algorithm of either, the
    paper's order first; for each of ``TABLE6_PROPERTIES`` the paper's and ours, then ``agrees`` (every property
    the same on both sides) and ``differences`` (what differs, or which side lacks the algorithm)."""
    theirs = table6_paper(paper).set_index("algorithm")
    ours = registry.set_index("algorithm")
    names = list(theirs.index) + [a for a in ours.index if a not in theirs.index]
    rows = []
    for name in names:
        row = {"algorithm": name, "registry name": ours["name"].get(name, MISSING)}
        differences = []
        if name not in ours.index:
            differences.append("not in the registry")
        if name not in theirs.index:
            differences.append("not in the paper's Table 6")
        for prop in TABLE6_PROPERTIES:
            p, o = theirs[prop].get(name), ours[prop].get(name)
            row[f"{prop} (paper)"] = MISSING if _absent(p) else p
            row[f"{prop} (ours)"] = MISSING if _absent(o) else o
            if name in theirs.index and name in ours.index and not _same_text(p, o):
                differences.append(f"{prop}: {row[prop + ' (ours)']} (paper: {row[prop + ' (paper)']})")
        rows.append(row | {"agrees": not differences, "differences": "; ".join(differences)})
    columns = ["algorithm", "registry name"] + [f"{p} ({s})" for p in TABLE6_PROPERTIES for s in ("paper", "ours")]
    return pd.DataFrame(rows, columns=columns + ["agrees", "differences"])


def table6_numbers(registry: pd.DataFrame) -> pd.DataFrame:
    """Table 6's counts from ``table6_registry``: per group heading, the algorithms and those that run on tabular
    data, in ``reported("plench", "table6")``'s keys (group, algorithm empty), for ``compare_with_paper``."""
    rows = []
    for group, part in registry.groupby("group", sort=False):
        rows.append({"group": group, "algorithm": "", "metric": "algorithms", "value": float(len(part))})
        rows.append({"group": group, "algorithm": "", "metric": "tabular_algorithms",
                     "value": float((part["tabular"] == "yes").sum())})
    return pd.DataFrame(rows, columns=["group", "algorithm", "metric", "value"]).assign(
        ours_on="the algorithm registry (plench.algorithms)")


# ------------------------------------------------------------------------------------------------ Table 8
_NUMBER = r"\s*(-?[0-9.eE+-]+)\s*"


def parse_distribution(text: str):
    """A distribution as Table 8 writes it, as a ``plench.hparams`` distribution: ``10^Uniform(-4.5,-2.5)`` and
    ``2^Uniform(6,9)`` (``LogUniform`` with base 10 or 2; the paper's batch size is continuous, the code's is not),
    ``RandomChoice([3,4,5])`` (``Choice``), ``0.1^RandomChoice[6,5]`` (``PowChoice``) or a number (``Fixed``)."""
    text = str(text).replace(" ", "")
    uniform = re.fullmatch(rf"{_NUMBER}\^Uniform\({_NUMBER},{_NUMBER}\)", text)
    if uniform:
        base, low, high = (float(g) for g in uniform.groups())
        return LogUniform(low, high, int(base) if base.is_integer() else base)
    choice = re.fullmatch(r"(?:(-?[0-9.eE+-]+)\^)?RandomChoice\(?\[([^\]]*)\]\)?", text)
    if choice:
        values = tuple(float(v) for v in choice.group(2).split(","))
        if choice.group(1) is None:
            return Choice(values)
        return PowChoice(float(choice.group(1)), tuple(int(v) for v in values))
    try:
        return Fixed(float(text))
    except ValueError:
        raise DataFormatError(f"Table 8: cannot read the distribution {text!r}") from None


def _numbers(values) -> np.ndarray | None:
    if all(isinstance(v, Number) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=float)
    return None


def same_distribution(a, b) -> bool:
    """Whether two distributions draw the same values the same way: the same kind (a ``Pow2Int`` is not the
    continuous ``LogUniform`` of base 2 the paper writes) and the same numbers (a choice as a set; 1 and 1.0 alike)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, LogUniform):
        return bool(np.isclose(a.base, b.base) and np.isclose(a.low, b.low) and np.isclose(a.high, b.high))
    if isinstance(a, PowChoice):
        return bool(np.isclose(a.base, b.base)) and sorted(a.exponents) == sorted(b.exponents)
    x, y = _numbers(a.values), _numbers(b.values)
    if x is None or y is None:
        return a.values == b.values
    return len(x) == len(y) and bool(np.allclose(np.sort(x), np.sort(y)))


def _same_number(a, b) -> bool:
    x, y = _numbers([a]), _numbers([b])
    if x is None or y is None:
        return a == b
    return bool(np.isclose(x[0], y[0]))


def table8_registry(algorithms=None, *, compat: bool = True, dataset: str | None = None) -> pd.DataFrame:
    """Every hyperparameter of the registry, one row each: condition ("ResNet" and "MLP" for the global ones, else
    the algorithm's display name), hparam (the registry's name), default, distribution (its text), low and high
    (the smallest and largest value a search draws; NaN when not numbers) and the distribution object (``dist``).
    ``compat`` and ``dataset`` as in ``plench.hparams.hparams_for`` (VALEN's default, PLCIFAR10's noise rates)."""
    algorithms = ALGORITHMS if algorithms is None else algorithms
    spaces = [(condition, global_space(arch)) for condition, arch in GLOBAL_CONDITIONS.items()]
    spaces += [(display_name(name), specific_space(name, dataset, compat)) for name in algorithms]
    on_plcifar10 = [((display_name(name), hparam), f"{hp.distribution.text} on {data}")  # noise-rate settings
                    for name in algorithms if dataset is None for data in KNOWN_NOISE_RATES
                    for hparam, hp in specific_space(name, data, compat).items()
                    if hp.distribution.text != specific_space(name, None, compat)[hparam].distribution.text]
    rows = []
    for condition, space in spaces:
        for hparam, hp in space.items():
            values = _numbers(hp.distribution.values)
            where = [text for key, text in on_plcifar10 if key == (condition, hparam)]
            rows.append({"condition": condition, "hparam": hparam, "default": hp.default,
                         "distribution": hp.distribution.text,
                         "low": float(values.min()) if values is not None else np.nan,
                         "high": float(values.max()) if values is not None else np.nan, "dist": hp.distribution,
                         "on PLCIFAR10": "; ".join(where)})
    return pd.DataFrame(rows, columns=["condition", "hparam", "default", "distribution", "low", "high", "dist",
                                       "on PLCIFAR10"])


def table8_paper(paper: pd.DataFrame) -> pd.DataFrame:
    """``reported("plench", "table8")`` one row per hyperparameter: condition, parameter (the paper's wording),
    hparam, default (a number), distribution (the paper's text), low, high and ``dist`` (``parse_distribution``)."""
    wide = _wide(paper, ["condition", "parameter", "hparam"])
    wide["default"] = pd.to_numeric(wide["default"])
    wide["dist"] = [parse_distribution(t) for t in wide["distribution"]]
    ends = [_numbers(d.values) for d in wide["dist"]]
    wide["low"] = [float(v.min()) if v is not None else np.nan for v in ends]
    wide["high"] = [float(v.max()) if v is not None else np.nan for v in ends]
    return wide[["condition", "parameter", "hparam", "default", "distribution", "low", "high", "dist"]]


def table8_side_by_side(paper: pd.DataFrame, registry: pd.DataFrame) -> pd.DataFrame:
    """Table 8 (``reported("plench", "table8")``) beside ``table8_registry``: one row per (condition, hparam) of
    either side, condition by condition (the registry's order), the paper's rows before the registry's extras.
    Columns: condition, parameter (the paper's wording), hparam, default and distribution of both, ``agrees`` (same
    default, same distribution: ``same_distribution``) and ``differences``."""
    theirs = table8_paper(paper).set_index(["condition", "hparam"])
    ours = registry.set_index(["condition", "hparam"])
    conditions = list(dict.fromkeys([c for c, _ in ours.index] + [c for c, _ in theirs.index]))
    keys = [k for c in conditions for k in [k for k in theirs.index if k[0] == c]
            + [k for k in ours.index if k[0] == c and k not in theirs.index]]
    rows = []
    for key in keys:
        p = theirs.loc[key] if key in theirs.index else None
        o = ours.loc[key] if key in ours.index else None
        differences = []
        if o is None:
            differences.append("not in the registry")
        elif p is None:
            differences.append("only in the registry")
        else:
            if not _same_number(p["default"], o["default"]):
                differences.append(f"default {_text(o['default'])} (paper: {_text(p['default'])})")
            if not same_distribution(p["dist"], o["dist"]):
                differences.append(f"distribution {o['distribution']} (paper: {p['distribution']})")
        if o is not None and o.get("on PLCIFAR10"):  # the search the table states is not what runs there
            differences.append(f"fixed on PLCIFAR10 from its noise rate: {o['on PLCIFAR10']}")
        rows.append({"condition": key[0], "parameter": MISSING if p is None else p["parameter"], "hparam": key[1],
                     "default (paper)": MISSING if p is None else _text(p["default"]),
                     "default (ours)": MISSING if o is None else _text(o["default"]),
                     "distribution (paper)": MISSING if p is None else p["distribution"],
                     "distribution (ours)": MISSING if o is None else o["distribution"],
                     "agrees": not differences, "differences": "; ".join(differences)})
    return pd.DataFrame(rows)


def _text(value) -> str:
    return f"{value:g}" if isinstance(value, Number) and not isinstance(value, bool) else str(value)


def table8_numbers(registry: pd.DataFrame) -> pd.DataFrame:
    """``table8_registry``'s numbers in long form (condition, hparam, metric default / low / high, value) for
    ``compare_with_paper``; a value that is not a number (PiCO's ``conf_ema_range``) is left out."""
    rows = []
    for r in registry.to_dict("records"):
        for metric in ("default", "low", "high"):
            value = _numbers([r[metric]])
            if value is not None and not np.isnan(value[0]):
                rows.append({"condition": r["condition"], "hparam": r["hparam"], "metric": metric, "value": value[0]})
    return pd.DataFrame(rows, columns=["condition", "hparam", "metric", "value"]).assign(
        ours_on="the hyperparameter registry (plench.hparams)")


def table8_paper_numbers(paper: pd.DataFrame) -> pd.DataFrame:
    """Table 8's numbers in ``table8_numbers``'s form with the paper's columns (item, parameter, source): each
    default, and the smallest and largest value of each distribution (``parse_distribution``)."""
    wide = table8_paper(paper)
    long = wide.melt(id_vars=["condition", "parameter", "hparam"], value_vars=["default", "low", "high"],
                     var_name="metric", value_name="value")
    order = {key: i for i, key in enumerate(zip(wide["condition"], wide["hparam"]))}
    long["_order"] = [order[k] for k in zip(long["condition"], long["hparam"])]
    long = long.sort_values(["_order"], kind="stable").drop(columns="_order").reset_index(drop=True)
    return long.assign(item="Table 8", source="paper")[["item", "condition", "parameter", "hparam", "metric",
                                                         "value", "source"]]


__all__ = ["GROUP_HEADINGS", "parse_distribution", "registry_citation", "same_distribution", "table6_numbers",
           "table6_paper", "table6_registry", "table6_side_by_side", "table8_numbers", "table8_paper",
           "table8_paper_numbers", "table8_registry", "table8_side_by_side"]
