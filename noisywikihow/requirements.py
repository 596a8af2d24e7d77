"""What NoisywikiHow's notebooks read in the full profile, checked by ``shared.preflight`` before a batch starts.

Every notebook reads the official release under ``data_dir`` (``noisywikihow.data.locate_noisywikihow``); the
notebooks that train fine-tune their language models from ``<data_dir>/models/<Hugging Face id>``.
"""
from __future__ import annotations

from noisywikihow.data import locate_noisywikihow
from noisywikihow.plm import PLMS, model_folder
from shared.preflight import Need


def model_need(name: str) -> Need:
    return Need(f"model {name} ({PLMS[name].hf_id if name in PLMS else name})", lambda root: model_folder(name, root))


def full_profile_needs(notebook: str, cfg) -> list[Need]:
    """The release (every notebook) and the language models ``notebook`` fine-tunes under ``cfg``."""
    needs = [Need("the NoisywikiHow release", locate_noisywikihow)] if cfg.dataset == "noisywikihow" else []
    encoders = [enc for enc, model in cfg.get("architectures", [[cfg.encoder, cfg.model]]) if model == "plm"]
    if notebook != "00_dataset_and_noise":
        needs += [model_need(enc) for enc in dict.fromkeys(encoders)]
    return needs
