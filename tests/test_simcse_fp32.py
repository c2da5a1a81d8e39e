"""Similarity logits and InfoNCE are fp32 under bf16 autocast (issue 20: a logit near 1/τ = 20 has a bf16
resolution of 0.125)."""

import pytest
import torch
import torch.nn.functional as F

from sentlab.methods._common import cosine_logits, info_nce


def qk():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(8, 32, generator=g)
    k = q + 0.05 * torch.randn(8, 32, generator=g)  # positives near cos 1: logits near 20
    return q, k


def test_cosine_logits_are_fp32_and_exact_under_autocast():
    q, k = qk()
    ref = cosine_logits(q, k, 0.05)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = cosine_logits(q.bfloat16().float(), k.bfloat16().float(), 0.05)
        old = F.normalize(q.float(), dim=-1) @ F.normalize(k.float(), dim=-1).T / 0.05  # the code before the fix
    ref_in = cosine_logits(q.bfloat16().float(), k.bfloat16().float(), 0.05)
    assert got.dtype == torch.float32 and torch.equal(got, ref_in)
    assert ref.diagonal().min() > 19.0
    assert old.dtype == torch.bfloat16 and not torch.equal(old.float(), ref_in)  # what the fix removes


def test_info_nce_under_autocast_equals_fp32_path():
    q, k = qk()
    ref = F.cross_entropy(cosine_logits(q, k, 0.05), torch.arange(8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = info_nce(q, k, 0.05)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(ref.item(), rel=0, abs=1e-7)


def test_simcse_method_loss_is_fp32_under_autocast(tiny_bert):
    from sentlab.methods.base import Batch
    from sentlab.methods.simcse import SimCSE

    bert, tok = tiny_bert
    m = SimCSE(bert, tok, SimCSE.Params(max_length=16, lr=1e-3))
    batch = Batch(["a cat sat on the mat", "dogs bark", "green ideas sleep"])
    assert set(m.prepare(batch).features) == {"enc"} and batch.features == {}
    m.eval()  # no dropout: the two views are equal, so the positives sit at cos 1 (logit 1/τ = 20)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = m(batch)["loss"]
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, m(batch)["loss"], rtol=0, atol=0.05)
