"""SimCSE++: off-dropout negatives are the eval-mode embeddings, both loss terms against hand computations,
the switches, training on the tiny model."""

import math

import pytest
import torch

from sentlab.methods import get_method
from sentlab.methods import simcse_pp as S
from sentlab.methods.base import Batch
from _support.methods import tiny_method
from tiny import sentences

pytestmark = pytest.mark.usefixtures("one_thread")


def build(tok, method="simcse_pp", **params):
    return tiny_method(method, tok, **params)


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


# --- the two terms by hand ---------------------------------------------------------------------------
Z1 = [[1.0, 0.0, 2.0], [0.5, -1.0, 0.0], [0.0, 1.0, 1.0]]
Z2 = [[0.9, 0.2, 1.8], [0.4, -1.2, 0.3], [-0.1, 0.8, 1.1]]
Z0 = [[1.0, 0.1, 2.1], [0.6, -1.0, 0.1], [0.1, 0.9, 1.0]]


@pytest.mark.parametrize("m", [1.0, 0.9])
def test_off_dropout_loss_by_hand(m):
    tau = 0.05
    total = 0.0
    for i in range(3):
        pos = m * cos(Z1[i], Z2[i]) / tau
        negs = [cos(Z0[i], Z0[j]) / tau for j in range(3) if j != i]     # dropout-off pairs, i itself left out
        total += -pos + math.log(math.exp(pos) + sum(math.exp(x) for x in negs))
    got = S.off_dropout_info_nce(torch.tensor(Z1), torch.tensor(Z2), torch.tensor(Z0), tau, m)
    assert got.item() == pytest.approx(total / 3, rel=1e-5)


def test_dcl_by_hand():
    tau, eps, B, d = 5.0, 1e-5, 3, 3

    def standardise(z):
        cols = []
        for k in range(d):
            col = [z[b][k] for b in range(B)]
            mu = sum(col) / B
            var = sum((x - mu) ** 2 for x in col) / B                      # biased, as BatchNorm in train mode
            cols.append([(x - mu) / math.sqrt(var + eps) for x in col])
        return cols                                                        # cols[k][b]

    a, b = standardise(Z1), standardise(Z2)
    total = 0.0
    for k in range(d):
        row = [sum(a[k][n] * b[j][n] for n in range(B)) / (B * tau) for j in range(d)]
        total += -row[k] + math.log(sum(math.exp(x) for x in row))
    got = S.dimension_wise_contrastive(torch.tensor(Z1), torch.tensor(Z2), tau)
    assert got.item() == pytest.approx(total / d, rel=1e-5)
    assert got.item() == pytest.approx(1.00196, abs=1e-5)                  # pinned (log 3 = 1.0986 untrained)


# --- the method ----------------------------------------------------------------------------------------
def test_off_dropout_negatives_are_the_eval_mode_embeddings(tok, monkeypatch):
    m = build(tok)
    seen = {}
    real = S.off_dropout_info_nce

    def spy(z1, z2, z0, *args):
        seen.update(z1=z1, z2=z2, z0=z0)
        return real(z1, z2, z0, *args)

    monkeypatch.setattr(S, "off_dropout_info_nce", spy)
    batch = Batch(sentences(8))
    m(batch)["loss"].backward()
    assert m.training and all(mod.training for mod in m.modules())      # the train mode is back after the pass
    assert seen["z0"].requires_grad                                        # the negatives' pass has a gradient
    enc = m.prepared(batch)["enc"]
    m.eval()
    with torch.no_grad():
        ref = m._embed(enc)
    assert torch.allclose(seen["z0"].detach(), ref, atol=1e-6)
    assert not torch.allclose(seen["z1"].detach(), ref, atol=1e-3)       # the positives keep their dropout


def test_forward_is_the_off_dropout_loss_plus_lambda_dcl(tok):
    m = build(tok).eval()                                     # no dropout: z1 = z2 = z0, every term reproducible
    batch = Batch(sentences(8))
    with torch.no_grad():
        out = m(batch)
        z = m._embed(m.prepared(batch)["enc"])
    inst = S.off_dropout_info_nce(z, z, z, 0.05, 1.0)
    dcl = S.dimension_wise_contrastive(z, z, 5.0)
    assert out["loss"].item() == pytest.approx(inst.item() + 0.1 * dcl.item(), rel=1e-5)
    assert out["instance"].item() == pytest.approx(inst.item(), rel=1e-5)
    assert out["dcl"].item() == pytest.approx(dcl.item(), rel=1e-5)


def test_both_switches_off_is_simcse(tok):
    pp, base = build(tok, off_dropout=False, dcl_weight=0.0), build(tok, "simcse")
    base.load_state_dict(pp.state_dict())
    batch = Batch(sentences(8))
    torch.manual_seed(5)
    a = pp(batch)
    torch.manual_seed(5)
    b = base(batch)
    assert torch.equal(a["loss"], b["loss"]) and "dcl" not in a


def test_trains_on_the_tiny_model_and_the_loss_moves(tok):
    m = build(tok)
    opt = m.configure_optimizers()
    losses, dcl = [], []
    for t in range(12):
        out = m(Batch(sentences(8, seed=t % 2), draw=t))
        out["loss"].backward()
        opt.step()
        opt.zero_grad()
        losses.append(out["loss"].item())
        dcl.append(out["dcl"].item())
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3, losses
    assert len(set(dcl)) > 1


def test_params_and_export_info(tok):
    from pydantic import ValidationError

    P = get_method("simcse_pp").Params
    p = P()
    assert (p.off_dropout, p.pos_ratio, p.dcl_weight, p.dcl_temperature, p.temperature) == (True, 1.0, 0.1, 5.0, 0.05)
    for bad in ({"dcl_weight": -0.1}, {"dcl_temperature": 0}, {"pos_ratio": 0}):
        with pytest.raises(ValidationError):
            P(**bad)
    assert build(tok).export_info() == {"method": "simcse_pp", "pooling": "cls", "off_dropout": True,
                                        "pos_ratio": 1.0, "dcl_weight": 0.1, "dcl_temperature": 5.0}


def test_docstring_cites_the_released_commit_behind_the_number():
    """Issue #53 §3.9: the code behind SimCSE++'s number is its first release, 899e49b (at HEAD the DCL term is
    commented out); the method and its equivalence case name that commit."""
    from pathlib import Path

    from sentlab.methods.simcse_pp import SimCSEPP

    assert "899e49b7be62b1b841a06ef4100ed84736795c34" in SimCSEPP.__doc__
    case = Path(__file__).resolve().parents[1] / "benchmarks" / "released" / "simcse_pp.py"
    assert 'COMMIT = "899e49b7be62b1b841a06ef4100ed84736795c34"' in case.read_text()
