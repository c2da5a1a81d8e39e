"""AdamWLegacy (sentlab.nn.optim): Adam without bias correction, decoupled decay after (transformers' old AdamW,
ConSERT) or before (BERT's AdamWeightDecayOptimizer, BERT-flow) the step, against the rule written out by hand."""

import math

import numpy as np
import pytest
import torch

from sentlab.nn.optim import AdamWLegacy

GRADS = [np.array([0.5, -2.0, 1e-3]), np.array([0.1, 0.3, -0.2]), np.array([-1.0, 0.0, 4.0])]


def by_hand(p0, lr, wd, eps, decay, correct_bias=False, b1=0.9, b2=0.999):
    p, m, v = np.array(p0, dtype=np.float64), np.zeros(3), np.zeros(3)
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        size = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) if correct_bias else lr
        if decay == "before":
            p = p - lr * (m * size / lr / (np.sqrt(v) + eps) + wd * p)
        else:
            p = p - size * m / (np.sqrt(v) + eps)
            p = p - lr * wd * p
    return p


def run(p0, **kw):
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    opt = AdamWLegacy([p], **kw)
    for g in GRADS:
        p.grad = torch.tensor(g)
        opt.step()
    return p.detach().numpy()


@pytest.mark.parametrize("decay", ["after", "before"])
@pytest.mark.parametrize("correct_bias", [False, True])
def test_update_rule_by_hand(decay, correct_bias):
    p0 = [1.0, -0.5, 2.0]
    got = run(p0, lr=0.01, weight_decay=0.1, eps=1e-6, decay=decay, correct_bias=correct_bias)
    want = by_hand(p0, 0.01, 0.1, 1e-6, decay, correct_bias)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_first_step_without_bias_correction_is_not_torch_adamw():
    """One step from m = v = 0: no correction moves p by lr·0.1·g/(√0.001·|g| + ε) ≈ 3.16·lr; torch's AdamW
    (corrected) by lr·g/(|g| + ε) ≈ lr."""
    p0 = [1.0, -0.5, 2.0]
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    p.grad = torch.tensor(GRADS[0])
    AdamWLegacy([p], lr=0.01, eps=1e-6).step()
    step = np.abs(p.detach().numpy() - p0)
    np.testing.assert_allclose(step[:2], 0.01 * 0.1 / math.sqrt(0.001), rtol=1e-4)
    q = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    q.grad = torch.tensor(GRADS[0])
    torch.optim.AdamW([q], lr=0.01, eps=1e-6, weight_decay=0.0).step()
    np.testing.assert_allclose(np.abs(q.detach().numpy() - p0)[:2], 0.01, rtol=1e-4)


def test_bad_settings_name_themselves():
    p = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match="decay"):
        AdamWLegacy([p], decay="middle")
    with pytest.raises(ValueError, match="beta"):
        AdamWLegacy([p], betas=(1.0, 0.999))
