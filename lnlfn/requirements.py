"""What LNLFN's notebooks read in the full profile, checked by ``shared.preflight`` before a batch starts.

Notebooks 00 and 01 build their benchmarks from every dataset of their settings, and 01, 03 and 05 fine-tune
``cfg.model``: those are required. Notebooks 02-05 skip a benchmark, model or MTurk release whose files are
absent (their claims are then "not run", with the reason), so those needs are optional: a warning, unless
none of them is there.
"""
from __future__ import annotations

import inspect

from lnlfn.benchmarks import BENCHMARKS
from lnlfn.data import locate_amazon, locate_imdb, locate_label_errors_file, locate_lnlfm_mturk, locate_snli, locate_tweetnlp
from lnlfn.experiments import benchmark_source, is_frozen
from lnlfn.mturk import locate_cleanlab_mturk
from shared.noise.annotations import HUMAN_KINDS, canonical_kind
from shared.preflight import Need, any_of
from shared.text.models import resolve_model_dir

LOCATE = {"snli": locate_snli, "tweetnlp": locate_tweetnlp, "imdb": locate_imdb, "amazon": locate_amazon}
FINE_TUNES = ("01_noise_realism", "03_detection_main", "05_end_to_end")


def dataset_need(dataset: str, kwargs=None, *, optional: bool = False, what: str = "") -> list[Need]:
    """The files a real dataset's loader reads with ``kwargs`` (offline stand-ins need none)."""
    if dataset not in LOCATE:
        return []
    locate = LOCATE[dataset]
    accepted = inspect.signature(locate).parameters
    kwargs = {k: v for k, v in (kwargs or {}).items() if k in accepted}
    label = what or dataset + (" with crowd tags" if kwargs.get("crowd") else "")
    return [Need(label, lambda root: locate(root, **kwargs), optional)]


def model_need(model: str, *, optional: bool = False) -> list[Need]:
    """A model folder under ``<data_dir>/models`` (none for the frozen offline encoder)."""
    if is_frozen(model):
        return []
    return [Need(f"model {model}", lambda root: resolve_model_dir(model, root), optional)]


def full_profile_needs(notebook: str, cfg) -> list[Need]:
    """The datasets, MTurk files and model folders ``notebook`` reads under ``cfg`` (its merged settings)."""
    needs = []
    if notebook == "00_data_and_noising":
        needs += [n for name in cfg.datasets for n in dataset_need(name)]
        needs += [n for b in cfg.benchmarks for n in dataset_need(*benchmark_source(b))]
    elif notebook == "01_noise_realism":
        for name, methods in cfg.datasets.items():
            crowd = name == "tweetnlp" and any(canonical_kind(m) in HUMAN_KINDS for m in methods)
            needs += dataset_need(name, {"crowd": crowd})
    elif notebook == "02_model_survey":
        needs += dataset_need(*benchmark_source(cfg.benchmark))
        models = [n for model in cfg.models for n in model_need(model, optional=True)]
        needs += models + ([any_of("the survey's models", models)] if models else [])
    elif notebook in ("03_detection_main", "05_end_to_end"):
        options = cfg.get("dataset_options")
        data = [n for b in cfg.benchmarks for n in dataset_need(*benchmark_source(b, options), optional=True,
                                                                 what=f"{b} ({BENCHMARKS[b].dataset})")]
        needs += data + ([any_of("the benchmarks' data", data)] if data else [])
    elif notebook == "04_mturk_reanalysis" and cfg.mturk == "release":
        for name in cfg.datasets:
            needs.append(Need(f"MTurk CSVs ({name})", lambda root, n=name: locate_lnlfm_mturk(n, root), True))
            needs.append(Need(f"cleanlab MTurk JSON ({name})", lambda root, n=name: locate_cleanlab_mturk(n, root), True))
        if "imdb" in cfg.datasets:
            needs += dataset_need("imdb", {"splits": ("test",)}, optional=True, what="aclImdb test (Fig. 5)")
            needs.append(Need("cleanlab IMDB probabilities (Fig. 5)",
                              lambda root: locate_label_errors_file("imdb_pred_probs", root), True))
    if notebook in FINE_TUNES:
        needs += model_need(cfg.model)
    return needs
