"""Issue #35: numbers that do not depend on the machine. Training precision is stated by each profile (never
detected from the CPU), and evaluation is exact unless a profile opts into bf16."""

from __future__ import annotations

import pytest
import torch

from sentlab.config import PROFILES
from sentlab.stages.profiles import load_all_profiles
from sentlab.train import loop


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_states_its_training_precision(profile):
    """A CPU profile states fp32 (issue #69: bf16 is emulated on most CPUs, ~30x a step; it is never the default);
    a GPU profile (runtime.device: cuda) says auto: bf16 on a GPU that has it, fp16 with a scaler on one without,
    the resolved value recorded."""
    p = load_all_profiles("profiles")[profile]
    wanted = "auto" if p.runtime.device == "cuda" else "fp32"
    assert p.train.precision == wanted, f"profile {profile}: train.precision {p.train.precision!r}"
    assert p.evaluate.precision in ("auto", "fp32")                      # exact evaluation


@pytest.mark.parametrize("profile, device", [("quick", "auto"), ("smoke", "auto"), ("paper", "cuda"),
                                             ("paper-lite", "cuda")])
def test_a_gpu_profile_says_so(profile, device):
    """Issue #65 §1: paper and paper-lite state `runtime.device: cuda` (a node where torch sees no GPU stops
    instead of training on its CPU); the CPU profiles leave it to the machine."""
    assert load_all_profiles("profiles")[profile].runtime.device == device


@pytest.mark.parametrize("native", [True, False])
def test_the_stated_precision_is_what_trains_whatever_the_cpu(monkeypatch, native):
    monkeypatch.setattr(loop, "cpu_has_native_bf16", lambda *a: native)
    stated = load_all_profiles("profiles")["quick"].train.precision
    assert loop.resolve_precision(stated, torch.device("cpu")) == stated
