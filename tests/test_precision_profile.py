"""Issue #35: numbers that do not depend on the machine. Training precision is stated by each profile (never
detected from the CPU), and evaluation is exact unless a profile opts into bf16."""

from __future__ import annotations

import pytest
import torch

from sentlab.config import PROFILES
from sentlab.pipeline.profiles import load_all_profiles
from sentlab.train import loop


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_states_its_training_precision(profile):
    p = load_all_profiles("profiles")[profile]
    assert p.train.precision in ("fp32", "bf16"), f"profile {profile}: train.precision {p.train.precision!r}"
    assert p.evaluate.precision in ("auto", "fp32")                      # exact evaluation


@pytest.mark.parametrize("native", [True, False])
def test_the_stated_precision_is_what_trains_whatever_the_cpu(monkeypatch, native):
    monkeypatch.setattr(loop, "cpu_has_native_bf16", lambda *a: native)
    stated = load_all_profiles("profiles")["quick"].train.precision
    assert loop.resolve_precision(stated, torch.device("cpu")) == stated
