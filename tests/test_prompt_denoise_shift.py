"""PromptBERT's template denoising with two templates whose prefixes differ (issue #66 §4): the release's
``get_delta`` shifts the empty template's positions from ``len(cls.bs) + 1`` — template 1's prefix — for both
templates (kongds/Prompt-BERT prompt_bert/models.py:98, ``cls.bs`` = template 1's prefix ids, train.py:783);
``denoise_shift: template1`` does that, ``own`` shifts each template from its own sentence slot."""

from __future__ import annotations

import copy

import pytest
import torch

from sentlab.config import TrainParams
from sentlab.methods.l2p import PromptBERT

T1 = 'Here "{sentence}" is {mask} .'
T2 = 'This long sentence of "{sentence}" means {mask} .'


def _positions(tiny_bert, shift: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    bert, tok = tiny_bert
    params = PromptBERT.Params(template=T1, template2=T2, denoise_shift=shift).resolved(TrainParams(max_length=32))
    m = PromptBERT(copy.deepcopy(bert), tok, params, seed=0)
    views = m.encode_views(["a cat sat on the mat", "dogs bark"])
    seen = []
    hook = m.encoder.register_forward_pre_hook(lambda mod, args, kw: seen.append(kw["position_ids"].clone()),
                                               with_kwargs=True)
    try:
        with torch.no_grad():
            m.template_bias(views)
    finally:
        hook.remove()
    return seen[0], seen[1], views["attention_mask"].size(1)


def _release_rule(tok, prefix_of_template1: str, template: str, rows: int) -> torch.Tensor:
    """The release's ``d_position_ids``: 0 … len−1, plus k from index len(bs) + 1 on, row k (bs = template 1's
    prefix ids without specials, train.py:783)."""
    bs = tok.encode(prefix_of_template1, add_special_tokens=False)
    before, after = template.split("{sentence}")
    ids = tok.encode(before.strip() + " " + after.replace("{mask}", tok.mask_token).strip())
    pos = torch.arange(len(ids)).unsqueeze(0).repeat(rows, 1)
    pos[:, len(bs) + 1:] += torch.arange(rows).unsqueeze(-1)
    return pos


@pytest.mark.parametrize("shift", ["template1", "own"])
def test_denoising_positions_of_template2(tiny_bert, shift):
    _, tok = tiny_bert
    pos1, pos2, _ = _positions(tiny_bert, shift)
    assert len(tok.encode('Here "', add_special_tokens=False)) != len(
        tok.encode('This long sentence of "', add_special_tokens=False))      # the prefixes differ
    # template 1: its own slot either way
    assert torch.equal(pos1, _release_rule(tok, 'Here "', T1, pos1.size(0)))
    # template 2: the release shifts from template 1's slot; own: from its own
    want = _release_rule(tok, 'Here "' if shift == "template1" else 'This long sentence of "', T2, pos2.size(0))
    assert torch.equal(pos2, want)


def test_run_sh_templates_give_the_same_positions_either_way(tiny_bert):
    """run.sh's templates have 4-token prefixes each: both rules agree (the paper's run is unchanged)."""
    bert, tok = tiny_bert
    got = []
    for shift in ("own", "template1"):
        params = PromptBERT.Params(denoise_shift=shift).resolved(TrainParams(max_length=32))
        m = PromptBERT(copy.deepcopy(bert), tok, params, seed=0).eval()
        with torch.no_grad():
            got.append(m.template_bias(m.encode_views(["a cat sat on the mat", "dogs bark"])))
    assert torch.equal(got[0], got[1])
