"""Poolings pinned on hand-built hidden states, padding invariance, and [MASK] pooling's truncation error."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sentlab.nn.encoder import SentenceEncoder, mask_positions, pool
from sentlab.errors import SentlabError

MASK_ID = 103


def _outputs():
    """2 rows × 4 positions × 2 dims; row 1 has 2 padding positions. hidden_states = (emb, layer1, last)."""
    emb = torch.tensor([[[1., 0.], [3., 0.], [5., 0.], [100., 100.]],
                        [[0., 2.], [0., 4.], [100., 100.], [100., 100.]]])
    mid = emb * 10
    last = torch.tensor([[[1., 1.], [2., 2.], [6., 3.], [-50., -50.]],
                         [[4., 0.], [8., 2.], [-50., -50.], [-50., -50.]]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    return SimpleNamespace(last_hidden_state=last, hidden_states=(emb, mid, last)), mask


def test_each_pooling_reads_the_positions_it_names():
    out, mask = _outputs()
    torch.testing.assert_close(pool(out, mask, "cls"), torch.tensor([[1., 1.], [4., 0.]]))
    torch.testing.assert_close(pool(out, mask, "mean"), torch.tensor([[3., 2.], [6., 1.]]))
    # first_last: (mean of embedding output + mean of last layer) / 2, padding excluded
    torch.testing.assert_close(pool(out, mask, "first_last"), torch.tensor([[3., 1.], [3., 2.]]))
    # top2_mean: (mean of last + mean of the layer before it) / 2
    torch.testing.assert_close(pool(out, mask, "top2_mean"), torch.tensor([[16.5, 1.], [3., 15.5]]))
    ids = torch.tensor([[101, 7, MASK_ID, 0], [101, MASK_ID, 0, 0]])
    torch.testing.assert_close(pool(out, mask, "mask", ids, MASK_ID), torch.tensor([[6., 3.], [8., 2.]]))
    with pytest.raises(ValueError, match="unknown pooling"):
        pool(out, mask, "max")


def test_truncated_mask_raises_instead_of_pooling_cls():
    ids = torch.tensor([[101, 7, MASK_ID, 102], [101, 7, 8, 102]])        # row 1: [MASK] cut off
    mask = torch.ones_like(ids)
    with pytest.raises(SentlabError, match=r"max_length") as e:
        mask_positions(ids, mask, MASK_ID, ["fine", "a long sentence"])
    assert "1 input(s)" in str(e.value) and "'a long sentence'" in str(e.value) and "4 tokens" in str(e.value)
    assert mask_positions(ids[:1], mask[:1], MASK_ID).tolist() == [2]


@pytest.mark.parametrize("pooling", ["cls", "mean", "first_last", "top2_mean", "mask"])
def test_padding_does_not_change_an_embedding(tiny_bert, pooling):
    model, tok = tiny_bert
    enc = SentenceEncoder(model, tok, pooling=pooling)
    short, long = "alpha bravo", "charlie delta echo foxtrot golf hotel india juliet kilo lima"
    alone = enc.encode([short], sort_by_length=False)
    padded = enc.encode([short, long], batch_size=2, sort_by_length=False)   # short is padded to long's length
    np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)


def test_mask_encoder_raises_when_max_length_cuts_the_template(tiny_bert):
    model, tok = tiny_bert
    long = " ".join(["alpha"] * 30)
    with pytest.raises(SentlabError, match="evaluate.max_length"):
        SentenceEncoder(model, tok, pooling="mask", max_length=16).encode([long])
    assert SentenceEncoder(model, tok, pooling="mask", max_length=64).encode([long]).shape == (1, 32)
