"""L2P-CSR, PromptBERT and PromptBERT + L2P (SPEC §3.7) on a tiny random BERT."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from sentlab.config import TrainParams
from sentlab.encoder import SentenceEncoder, apply_template
from sentlab.errors import SentlabError
from sentlab.methods import get_method
from sentlab.methods._perturb import ascend, perturbable_modules, threshold, transform_outputs, weakening_mask
from sentlab.methods.base import Batch
from sentlab.methods.l2p import ABLATIONS, L2PCSR, L2PParams, PromptBERT, PromptL2P, ablation_params

SENTS = ["a cat sat on the mat", "dogs bark loudly at night", "the stock market fell sharply today",
         "i like green tea", "rain is expected tomorrow in the north", "she plays the violin"]


def make(tiny_bert, method_id="l2p", seed=3, **params):
    bert, tok = tiny_bert
    cls = get_method(method_id)
    return cls(copy.deepcopy(bert), tok, cls.Params(**params), TrainParams(max_length=32), seed=seed)


def loss_under(m, enc, state):
    with torch.no_grad(), m._perturbed(m._transforms(state)):
        return float(m.contrastive_loss(enc))


# --------------------------------------------------------------------------- mask arithmetic
def test_threshold_and_weakening_mask_on_hand_made_tensor():
    p_tok = torch.tensor([[0.9, 0.04, 0.05]])          # token 1 weakened (p < phi); 0.05 >= phi kept
    p_fea = torch.tensor([[0.01, 0.7, 1.0, 0.3]])       # feature 0 weakened
    a_tok, a_fea = threshold(p_tok, 0.05), threshold(p_fea, 0.05)
    assert a_tok.tolist() == [[1.0, 0.0, 1.0]] and a_fea.tolist() == [[0.0, 1.0, 1.0, 1.0]]
    m = weakening_mask(a_tok, a_fea)
    assert m.shape == (1, 3, 4)
    out = torch.full((1, 3, 4), 8.0) * m
    assert out[0, 0, 1:].tolist() == [8.0, 8.0, 8.0]    # nothing weakened: unchanged
    assert out[0, 0, 0] == 4.0                          # weakened feature: halved
    assert out[0, 1, 1:].tolist() == [4.0, 4.0, 4.0]    # weakened token: halved
    assert out[0, 1, 0] == 0.0                          # weakened token and feature: zeroed


def test_ascend_stays_in_unit_interval_and_handles_zero_gradients():
    p = torch.tensor([[0.1, 0.5, 0.99], [0.3, 0.3, 0.3]])
    g = torch.tensor([[-5.0, 1.0, 3.0], [0.0, 0.0, 0.0]])
    new = ascend(p, g, beta=10.0)
    assert new.min() >= 0 and new.max() <= 1
    assert new[0].tolist() == [0.0, 1.0, 1.0]
    assert torch.equal(new[1], p[1])                    # zero gradient: kept
    assert ascend(p, g, 10.0, zero_grad="reset")[1].tolist() == [1.0, 1.0, 1.0]   # the code's NaN -> 1
    small = ascend(p, g, beta=0.1, norm="vector")
    assert torch.allclose((small[0] - p[0])[:2], (0.1 * g[0] / g[0].norm())[:2]) and small[0, 2] == 1.0  # clipped
    sign = ascend(p, g, beta=0.1, norm="element")      # code's token update: sign ascent
    assert torch.allclose(sign[0] - p[0], torch.tensor([-0.1, 0.1, 0.01]))


def test_hooks_multiply_layer_outputs_and_are_removed_even_on_error(tiny_bert):
    bert, _ = tiny_bert
    mods = perturbable_modules(bert, 2)
    assert len(mods) == 3 and mods[0] is bert.embeddings
    with pytest.raises(SentlabError, match="at most 2"):
        perturbable_modules(bert, 3)
    ids = torch.tensor([[101, 2000, 102]])
    bert.eval()
    with torch.no_grad():
        base = bert.embeddings(input_ids=ids)
        with transform_outputs(mods[:1], [lambda o: o * 0.5]):
            halved = bert.embeddings(input_ids=ids)
        assert torch.allclose(halved, base * 0.5)
        with pytest.raises(RuntimeError):
            with transform_outputs(mods, [lambda o: o] * 3):
                raise RuntimeError("boom")
    assert all(len(m._forward_hooks) == 0 for m in mods)


# --------------------------------------------------------------------------- learning to perturb
def test_one_ascent_step_increases_the_contrastive_loss(tiny_bert):
    # exact gradient (continuous masks), small step, dropout off: first-order ascent must raise the loss
    m = make(tiny_bert, continuous=True, beta=0.05, steps=1)
    m.eval()
    enc = m.tokenize_views(SENTS)
    state = m._init_perturbation(enc, m._batch_generator())
    before = loss_under(m, enc, state)
    state, stats = m._learn_to_perturb(enc, state, torch.Generator().manual_seed(0), None)
    after = loss_under(m, enc, state)
    assert stats["ascent_loss_start"].item() == pytest.approx(before, rel=1e-5)
    assert after > before


def test_binary_ascent_and_gradient_noise_raise_the_loss_of_a_fixed_batch(tiny_bert):
    for params in ({"phi": 0.3}, {"perturbation": "gradient_noise", "noise_step": 0.5}):
        m = make(tiny_bert, steps=4, **params)
        m.eval()
        enc = m.tokenize_views(SENTS)
        state = m._init_perturbation(enc, m._batch_generator())
        before = loss_under(m, enc, state)
        state, _ = m._learn_to_perturb(enc, state, torch.Generator().manual_seed(0), None)
        assert loss_under(m, enc, state) > before, params


def test_ascent_leaves_no_gradient_on_the_encoder_and_keeps_the_global_rng(tiny_bert):
    m = make(tiny_bert)
    m.train()
    enc = m.tokenize_views(SENTS)
    state = m._init_perturbation(enc, m._batch_generator())
    torch.manual_seed(7)
    rng = torch.get_rng_state()
    m._learn_to_perturb(enc, state, torch.Generator().manual_seed(0), None)
    assert all(p.grad is None for p in m.parameters())
    assert torch.equal(torch.get_rng_state(), rng)     # ascent dropout ran under its own seeds


def test_forward_p_in_unit_interval_padding_untouched_views_differ(tiny_bert):
    m = make(tiny_bert, beta=5.0, phi=0.3)
    out = m(Batch(SENTS))
    st = m.last_perturbation
    for p in (st.p_tok, st.p_fea):
        assert p.min() >= 0 and p.max() <= 1
    assert torch.all(st.p_tok[:, ~st.real] == 1)       # padding never weakened
    n = len(SENTS)
    a_tok = threshold(st.p_tok, 0.3)
    assert not torch.equal(a_tok[:, :n], a_tok[:, n:])  # the two views' token masks differ
    assert st.p_fea.shape[1] == 2 and not torch.equal(st.p_fea[:, 0], st.p_fea[:, 1])
    assert 0 < out["weakened_tokens"] < 1 and 0 < out["weakened_features"] < 1
    for key in ("ascent_loss_start", "ascent_loss_end", "ascent_gain", "zeroed_entries"):
        assert torch.isfinite(out[key])


def test_same_seed_same_numbers_and_resume_state(tiny_bert):
    torch.manual_seed(11)
    a = make(tiny_bert)(Batch(SENTS))["loss"].item()
    torch.manual_seed(11)
    m = make(tiny_bert)
    assert m(Batch(SENTS))["loss"].item() == a
    assert m.extra_state() == {"l2p_draws": 1}
    other = make(tiny_bert)
    other.load_extra_state(m.extra_state())
    assert other._draws == 1


# --------------------------------------------------------------------------- inference
def test_no_perturbation_at_inference(tiny_bert):
    bert, tok = tiny_bert
    m = make(tiny_bert, phi=0.5)
    m(Batch(SENTS))["loss"].backward()
    assert all(len(mod._forward_hooks) == 0 for mod in perturbable_modules(m.encoder, 2))
    got = m.sentence_encoder().encode(SENTS)
    bare = SentenceEncoder(m.encoder, tok, pooling="cls").encode(SENTS)
    assert (got == bare).all()
    assert m.export_info() == {"method": "l2p", "pooling": "cls"}


# --------------------------------------------------------------------------- prompt
def test_template_wraps_sentences_and_pools_the_mask_position(tiny_bert):
    _, tok = tiny_bert
    m = make(tiny_bert, "prompt", mlp_train=False)
    ids = m.templated_ids(SENTS[:2], m.params.template)
    ref = tok(apply_template(SENTS[:2], tok.mask_token, m.params.template))["input_ids"]
    assert ids == ref
    long = " ".join(["word"] * 80)
    (lid,) = m.templated_ids([long], m.params.template)
    assert tok.mask_token_id in lid and lid[-1] == tok.sep_token_id
    m.eval()
    enc = m.tokenize_views(SENTS)
    with torch.no_grad():
        rep = m.represent(enc)
        last = m.encoder(**enc).last_hidden_state
    pos = (enc["input_ids"] == tok.mask_token_id).nonzero()
    assert pos.shape[0] == enc["input_ids"].shape[0]    # exactly one [MASK] per row
    assert torch.allclose(rep, last[pos[:, 0], pos[:, 1]])
    info = m.export_info()
    assert info["pooling"] == "mask" and info["template"] == m.params.template
    test_emb = m.sentence_encoder().encode(SENTS, sort_by_length=False)
    assert torch.allclose(torch.from_numpy(test_emb), rep[: len(SENTS)], atol=1e-5)


def test_prompt_l2p_masks_the_templated_input_and_second_template(tiny_bert):
    m = make(tiny_bert, "prompt_l2p", template2='This sentence of "{sentence}" means {mask} .')
    out = m(Batch(SENTS))
    assert torch.isfinite(out["loss"]) and "weakened_tokens" in out
    enc = m.tokenize_views(SENTS)
    n = len(SENTS)
    assert not torch.equal(enc["input_ids"][:n], enc["input_ids"][n:])
    assert m.export_info()["pooling"] == "mask"
    with pytest.raises(ValueError, match="exactly one"):
        PromptL2P.Params(template="no placeholders")


def _train(m, steps, lr):
    opt = torch.optim.AdamW(m.trainable_parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = m(Batch(SENTS))["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _clean_loss(m):
    """Contrastive loss of the fixed batch, dropout off, under one fixed random perturbation (if any)."""
    m.eval()
    enc = m.tokenize_views(SENTS)
    with torch.no_grad():
        if isinstance(m, L2PCSR):
            loss = loss_under(m, enc, m._init_perturbation(enc, torch.Generator().manual_seed(123)))
        else:
            loss = float(m.contrastive_loss(enc))
    m.train()
    return loss


@pytest.mark.parametrize("method_id", ["l2p", "prompt_l2p"])
def test_l2p_training_loss_falls_on_a_tiny_model(tiny_bert, method_id):
    # The learned masks start the encoder far from invariance (loss ~4); AdamW on a fixed batch brings it down.
    torch.manual_seed(0)
    losses = _train(make(tiny_bert, method_id), 20, 1e-3)
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5, losses


def test_l2p_masked_views_become_separable(tiny_bert):
    # Below log(N) = chance: the encoder really tells the sentences apart under the weakening masks
    # (dropout off so the masks are the only augmentation; random masks keep the test short).
    bert, tok = tiny_bert
    bert = copy.deepcopy(bert)
    for mod in bert.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    torch.manual_seed(0)
    m = L2PCSR(bert, tok, L2PParams(learn=False), TrainParams(max_length=32), seed=3)
    before = _clean_loss(m)
    _train(m, 20, 1e-3)
    assert _clean_loss(m) < min(before, math.log(len(SENTS))) - 0.3


def test_prompt_loss_falls_on_a_tiny_model(tiny_bert):
    torch.manual_seed(0)
    m = make(tiny_bert, "prompt")
    before = _clean_loss(m)
    _train(m, 15, 1e-2)
    assert _clean_loss(m) < 0.5 * before


# --------------------------------------------------------------------------- ablations
def _final_masks(m):
    """The (N, L, D) multipliers the final pass applies, per masked output."""
    st = m.last_perturbation
    ones = torch.ones(st.real.shape + (m.encoder.config.hidden_size,))
    return [fn(ones) for fn in m._transforms(st)]


def test_ablation_switches_change_what_is_perturbed(tiny_bert):
    no_tok = make(tiny_bert, token_mask=False, phi=0.4)
    no_tok(Batch(SENTS))
    assert no_tok.last_perturbation.p_tok is None
    for mask in _final_masks(no_tok):                  # alpha_tok == 1: constant along positions
        assert torch.equal(mask, mask[:, :1].expand_as(mask)) and set(mask.unique().tolist()) <= {0.5, 1.0}

    no_fea = make(tiny_bert, feature_mask=False, phi=0.4)
    no_fea(Batch(SENTS))
    assert no_fea.last_perturbation.p_fea is None
    for mask in _final_masks(no_fea):                  # alpha_fea == 1: constant along features
        assert torch.equal(mask, mask[..., :1].expand_as(mask))

    random = make(tiny_bert, learn=False)
    out = random(Batch(SENTS))
    assert "ascent_loss_start" not in out
    fresh = make(tiny_bert, learn=False)
    enc = fresh.tokenize_views(SENTS)
    init = fresh._init_perturbation(enc, fresh._batch_generator())
    assert torch.equal(init.p_tok, random.last_perturbation.p_tok)   # masks stay the random draw

    cont = make(tiny_bert, continuous=True)
    cont(Batch(SENTS))
    values = torch.cat([m.flatten() for m in _final_masks(cont)]).unique()
    assert len(values) > 3                             # p used directly, not {0, 0.5, 1}

    noise = make(tiny_bert, perturbation="gradient_noise")
    out = noise(Batch(SENTS))
    st = noise.last_perturbation
    assert st.p_tok is None and st.delta is not None and out["noise_norm"] > 0
    assert torch.all(st.delta[~st.real] == 0)          # padding gets no noise
    assert len(noise._transforms(st)) == 1             # embedding output only


def test_params_and_ablation_table():
    with pytest.raises(ValueError, match="nothing is perturbed"):
        L2PParams(token_mask=False, feature_mask=False)
    base = {"beta": 0.1}
    for name, spec in ABLATIONS.items():
        p = ablation_params(base, name)
        assert p.beta == 0.1 and all(getattr(p, k) == v for k, v in spec["overrides"].items())
    assert ablation_params(base, "no_learning").learn is False
    with pytest.raises(SentlabError, match="allowed"):
        ablation_params(base, "nope")
    assert {"full", "no_feature_mask", "no_token_mask", "no_learning", "gradient_noise", "continuous"} <= set(ABLATIONS)
    assert isinstance(PromptBERT.Params(), PromptBERT.Params) and L2PCSR.Params().beta == 0.5
