"""Contrastive Tension: fp32 dot products under autocast, its own max_length / eval_every (issue 20)."""

import pytest
import torch
import torch.nn.functional as F

from sentlab.methods.blocks import method_params
from sentlab.config import Params, TrainParams
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from sentlab.train.run import resolve_train
from functools import partial

from _support.methods import tiny_method
from tiny import sentences

pytestmark = pytest.mark.usefixtures("one_thread")


build = partial(tiny_method, "ct")


def test_ct_pair_logits_fp32_under_autocast(tok):
    m = build(tok, negatives=3)
    g = torch.Generator().manual_seed(1)
    e1 = torch.randn(8, 32, generator=g)
    e2 = e1 + 0.1 * torch.randn(8, 32, generator=g)  # dot products near 30
    torch.manual_seed(5)
    ref = m._pair_logits(e1, e2)
    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = m._pair_logits(e1, e2)
        old = e1.float() @ e2.float().T  # the code before the fix
    assert got.dtype == torch.float32 and torch.equal(got, ref)
    assert old.dtype == torch.bfloat16 and not torch.equal(old.float().diagonal(), ref[:, 0])


def test_ct_loss_is_bce_in_fp32_under_autocast(tok):
    m = build(tok, negatives=3).eval()
    batch = Batch(sentences(8))
    torch.manual_seed(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(batch)
    assert out["loss"].dtype == torch.float32
    enc = m.tokenize(batch.sentences)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        e1, e2 = m._embed(m.model1, enc), m._embed(m.model2, enc)
    torch.manual_seed(2)
    logits = m._pair_logits(e1, e2)
    labels = torch.zeros_like(logits)
    labels[:, 0] = 1
    assert out["loss"].item() == F.binary_cross_entropy_with_logits(logits, labels).item()


def test_ct_max_length_and_eval_every(tok):
    m = build(tok, negatives=3, max_length=4).eval()
    assert m.params.max_length == 4
    assert m.prepare(Batch(sentences(8))).features["enc"]["input_ids"].shape == (8, 4)
    assert build(tok, negatives=3).prepare(Batch(sentences(8))).features["enc"]["input_ids"].shape[1] > 4
    p = Params(train=TrainParams(eval_every=20), methods={"ct": {"eval_every": 7}})
    cls = get_method("ct")
    assert resolve_train(p, cls.Params(**p.methods["ct"])).eval_every == 7
    assert resolve_train(p, cls.Params()).eval_every == 20


def test_paper_profile_evaluates_ct_every_250_steps():
    """CT's paper number (72.05) is SimCSE's run of CT (docs/methods.md, "SimCSE settings"): dev every 250 steps, as
    SimCSE's, not the paper profile's default 125 (issue #34)."""
    from pathlib import Path

    from sentlab.config import load_params

    p = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="paper")
    assert resolve_train(p, method_params(p, "ct")).eval_every == 250
    assert resolve_train(p, method_params(p, "ptbert")).eval_every == 125
