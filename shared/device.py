"""Device selection for torch code."""
from __future__ import annotations

from shared.errors import ConfigError


def select_device(device: str = "auto"):
    """A ``torch.device`` for ``"auto"`` (cuda if available, else cpu), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Asking for CUDA on a machine without it raises a ConfigError instead of failing later in a kernel.
    """
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if str(device).startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(
                f"device={device!r} but CUDA is not available here; use device='cpu' or 'auto' "
                "(the smoke profile runs on CPU)"
            )
        return torch.device(device)
    if device == "cpu":
        return torch.device("cpu")
    raise ConfigError(f"unknown device {device!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'")


def device_type(device) -> str:
    """"cuda" or "cpu" for a device setting ("auto" or None, "cpu", "cuda", "cuda:N") or a torch.device. Unlike
    ``select_device`` it does not need CUDA here: a cost planner names the runs of a GPU it is not on, and a run
    keyed on a CPU login node may train on a GPU node. "auto" is this machine's: CUDA if available."""
    import torch

    if isinstance(device, torch.device):
        return device.type
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" or str(device).startswith("cuda"):
        return "cpu" if device == "cpu" else "cuda"
    raise ConfigError(f"unknown device {device!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'")
