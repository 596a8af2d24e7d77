import hashlib

import numpy as np
import pytest
import torch

from shared.device import device_type, select_device
from shared.errors import ConfigError
from shared.seeding import item_rng, item_seed, nondeterministic_kernels, seed_everything


def test_item_seed_is_sha256_of_the_joined_key():
    expected = int.from_bytes(hashlib.sha256(b"0|cifar10|fog|3|test|17").digest()[:8], "little")
    assert item_seed(0, "cifar10", "fog", 3, "test", 17) == expected
    assert item_seed(0, "cifar10", "fog", 3, 17) != expected


def test_item_rng_is_reproducible_and_distinct_per_item():
    a, b = item_rng("x", 1).random(5), item_rng("x", 1).random(5)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, item_rng("x", 2).random(5))


def test_seed_everything_reproduces_python_numpy_and_torch():
    import random

    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    seed_everything(3)
    first = draw()
    seed_everything(3)
    assert draw() == first
    seed_everything(4)
    assert draw() != first


def test_seed_everything_turns_deterministic_algorithms_on_without_loading_inductor():
    import subprocess
    import sys

    code = ("import sys, torch; from shared.seeding import seed_everything; seed_everything(0); "
            "print(torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(), "
            "'torch._inductor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "False"]
    import torch._inductor.config as inductor_config  # loaded (here, by the test): its flag is set as well

    inductor_config.deterministic = False
    seed_everything(0)
    assert inductor_config.deterministic is True


def test_nondeterministic_kernels_lift_the_mode_on_accelerators_only_and_restore_it():
    """torchvision's roi_align takes a pure-Python path needing tens of GiB per COCO image when deterministic mode
    is on for an accelerator; the block lifts the mode there and puts it back as it was (warn-only included)."""
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        seed_everything(0)  # deterministic, warn-only
        with nondeterministic_kernels("cpu"):
            assert torch.are_deterministic_algorithms_enabled()  # the CPU stays exact
        with nondeterministic_kernels(torch.device("cuda", 0)):  # needs no GPU: only the flag changes
            assert not torch.are_deterministic_algorithms_enabled()
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        torch.use_deterministic_algorithms(True)  # strict mode comes back strict, even after an error inside
        with pytest.raises(RuntimeError, match="inside"), nondeterministic_kernels("cuda"):
            raise RuntimeError("inside")
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        torch.use_deterministic_algorithms(False)
        with nondeterministic_kernels("cuda"):  # off stays off
            assert not torch.are_deterministic_algorithms_enabled()
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def test_device_selection():
    assert select_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert select_device("cpu").type == "cpu"
    with pytest.raises(ConfigError, match="unknown device 'gpu'"):
        select_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available here; use device='cpu'"):
            select_device("cuda")


def test_device_type_names_cuda_without_needing_it_and_refuses_unknown_names(monkeypatch):
    """A planner asks about "cuda" on a CPU machine (select_device would refuse); "auto" follows this machine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [device_type(d) for d in ("cuda", "cuda:1", "cpu", "auto", None, torch.device("cpu"))] == \
        ["cuda", "cuda", "cpu", "cpu", "cpu", "cpu"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert device_type("auto") == "cuda"
    with pytest.raises(ConfigError, match="unknown device 'tpu'"):
        device_type("tpu")


def test_autocast_forward_runs_one_module_in_bf16_hands_back_float32_and_restores_it():
    from shared.training import autocast_forward

    seen = []

    class Net(torch.nn.Linear):
        def forward(self, x):
            out = super().forward(x)
            seen.append((torch.is_autocast_enabled("cpu"), out.dtype))
            return out

    net, x = Net(4, 3), torch.randn(2, 4)
    with autocast_forward(net, "cpu"):
        out = net(x)
    assert seen == [(True, torch.bfloat16)] and out.dtype == torch.float32
    assert "forward" not in net.__dict__ and net(x).dtype == torch.float32 and seen[-1] == (False, torch.float32)
