"""DiffCSE (sentlab.methods.diffcse): masking, the generator's corruption, the conditional RTD loss against a hand
computation, the conditioning, training with the frozen parts unchanged, loud failures."""

from __future__ import annotations

import math
import pickle

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from tiny import sentences, tiny_bert


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _tiny_generator(tok, folder, head: bool = True, seed: int = 5):
    """A tiny BERT MLM (the generator's stand-in: 1 layer, 32 wide, the MiniLM vocabulary) saved with its tokenizer."""
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, initializer_range=0.2)
    model = BertForMaskedLM(cfg) if head else BertModel(cfg, add_pooling_layer=False)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def generator_dir(tok, tmp_path_factory):
    return _tiny_generator(tok, tmp_path_factory.mktemp("gen"))


def _make(tok, generator_dir, seed=0, **kw):
    cls = get_method("diffcse")
    params = cls.Params(generator=str(generator_dir), **kw).resolved(TrainParams(max_length=16))
    return cls(tiny_bert(tok, seed=seed, initializer_range=0.2, max_position_embeddings=128), tok, params, seed=seed)


def test_registered_with_the_papers_settings():
    cls = get_method("diffcse")
    p = cls.Params()
    assert (p.generator, p.mask_ratio, p.rtd_weight, p.temperature, p.projector) == (
        "distilbert-base-uncased", 0.30, 0.005, 0.05, "batchnorm")
    assert cls.inference_pooling == "cls" and "NAACL 2022" in cls.paper and "chuang2022diffcse" in cls.citation
    assert p.hub_models() == ["distilbert-base-uncased"]


def test_the_defaults_are_the_code_behind_the_number_and_the_papers_text_is_an_ablation():
    """The 78.49 came from voidism/DiffCSE's cl_forward: the generator's argmax at every non-pad position
    (g_pred = logits.argmax(-1)) and L_RTD averaged over the padded grid (CrossEntropyLoss over view(-1, 2)). Those
    are the defaults and the paper profile's; the text's reading (sampling at the masked positions, the mean over
    the real tokens) is the paper profile's ablation variant diffcse_paper_text (issue #53 §3.2)."""
    from conftest import REPO
    from sentlab.config import validate
    from sentlab.config.profile_files import profile_values
    from _support.ablations import trained_settings
    from sentlab.stages.stage_list import stage_list_for

    p = get_method("diffcse").Params()
    assert (p.generator_decoding, p.generator_positions, p.rtd_positions) == ("argmax", "all", "all")
    paper = validate(profile_values("paper", REPO / "profiles"))
    main = trained_settings(paper, "diffcse")
    assert (main["generator_decoding"], main["generator_positions"], main["rtd_positions"]) == ("argmax", "all", "all")
    text = trained_settings(paper, "diffcse_paper_text")
    assert (text["generator_decoding"], text["generator_positions"], text["rtd_positions"]) == (
        "sample", "masked", "tokens")
    assert {k: v for k, v in text.items() if k not in ("generator_decoding", "generator_positions",
                                                        "rtd_positions")} == {
        k: v for k, v in main.items() if k not in ("generator_decoding", "generator_positions", "rtd_positions")}
    assert "diffcse_paper_text" in stage_list_for(paper)["models"]


def test_masking_is_seeded_and_spares_special_tokens_and_padding(tok, generator_dir):
    m = _make(tok, generator_dir)
    batch = Batch(sentences(64, seed=3), draw=7, seed=42)
    f1 = m.prepare(Batch(batch.sentences, draw=7, seed=42)).features
    f2 = m.prepare(Batch(batch.sentences, draw=7, seed=42)).features
    f3 = m.prepare(Batch(batch.sentences, draw=8, seed=42)).features
    assert torch.equal(f1["masked_ids"], f2["masked_ids"]) and f1["sample_seed"] == f2["sample_seed"]
    assert not torch.equal(f1["chosen"], f3["chosen"])
    ids = torch.cat([f1["enc"]["input_ids"]] * 2)
    att = torch.cat([f1["enc"]["attention_mask"]] * 2).bool()
    special = torch.isin(ids, torch.tensor(tok.all_special_ids))
    assert not f1["chosen"][special | ~att].any()
    eligible = att & ~special
    share = f1["chosen"][eligible].float().mean().item()
    assert 0.25 < share < 0.35, share           # mask_ratio 0.30 of ~900 tokens
    masked = f1["chosen"]
    to_mask = (f1["masked_ids"] == tok.mask_token_id) & masked
    assert 0.7 < to_mask.sum().item() / masked.sum().item() < 0.9   # 80 % [MASK]
    assert torch.equal(f1["masked_ids"][~masked], ids[~masked])      # nothing else touched
    # the two views of a sentence are masked independently
    n = len(batch)
    assert not torch.equal(f1["chosen"][:n], f1["chosen"][n:])


class _Stub(torch.nn.Module):
    """A generator whose logits are fixed per (row, position): it proposes ``proposal``."""

    def __init__(self, proposal, vocab):
        super().__init__()
        self.proposal, self.vocab = proposal, vocab

    def forward(self, input_ids, attention_mask):
        logits = torch.full((*input_ids.shape, self.vocab), -1e4)
        logits.scatter_(-1, self.proposal.unsqueeze(-1), 1e4)
        return type("Out", (), {"logits": logits})()


@pytest.mark.parametrize("decoding", ["argmax", "sample"])
def test_a_generator_token_equal_to_the_original_is_not_replaced(tok, generator_dir, decoding):
    """At masked positions the generator's token replaces the original; where it proposes the original token the
    label is 0 (the code's replaced = g_pred != input_ids). [CLS] and padding are never replaced; unmasked
    positions keep their token (generator_positions: masked) or take the generator's (all, the code)."""
    m = _make(tok, generator_dir, generator_decoding=decoding, generator_positions="masked")
    original = torch.tensor([[101, 2000, 2001, 2002, 102, 0], [101, 3000, 3001, 102, 0, 0]])
    att = (original != 0).long()
    chosen = torch.tensor([[0, 1, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0]], dtype=torch.bool)
    masked = torch.where(chosen, torch.full_like(original, tok.mask_token_id), original)
    proposal = torch.tensor([[7, 2000, 5555, 6666, 102, 9], [7, 4444, 3001, 102, 9, 9]])
    m.generator = _Stub(proposal, tok.vocab_size)
    x2, replaced = m.corrupt(original, masked, chosen, att, seed=3)
    assert x2.tolist() == [[101, 2000, 5555, 2002, 102, 0], [101, 4444, 3001, 102, 0, 0]]
    assert replaced.long().tolist() == [[0, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0]]
    m.params = m.params.model_copy(update={"generator_positions": "all"})
    x2, replaced = m.corrupt(original, masked, chosen, att, seed=3)
    assert x2.tolist() == [[101, 2000, 5555, 6666, 102, 0], [101, 4444, 3001, 102, 0, 0]]
    assert replaced.long().tolist() == [[0, 0, 1, 1, 0, 0], [0, 1, 0, 0, 0, 0]]


def test_sampling_is_a_function_of_the_seed(tok, generator_dir):
    m = _make(tok, generator_dir, generator_decoding="sample", generator_positions="masked", generator_temperature=5.0)
    f = m.prepare(Batch(sentences(8, seed=1), draw=0, seed=1)).features
    both = {k: torch.cat([v, v]) for k, v in f["enc"].items()}
    args = (both["input_ids"], f["masked_ids"], f["chosen"], both["attention_mask"])
    a, b, c = m.corrupt(*args, seed=11)[0], m.corrupt(*args, seed=11)[0], m.corrupt(*args, seed=12)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_rtd_loss_is_the_bce_of_the_logit_difference_over_the_grid_or_the_tokens(tok, generator_dir):
    """Fixed logits: 2 rows × 4 positions, the last position of row 2 padding. The default (the code's
    CrossEntropyLoss over the padded grid) is the mean over all 8 positions of BCE(σ(l_replaced − l_kept),
    replaced), padding included as 'kept'; rtd_positions: tokens (the paper's text) the mean over the 7 tokens."""
    m = _make(tok, generator_dir)
    logits = torch.tensor([[[0.0, 1.0], [2.0, -1.0], [0.5, 0.5], [-1.0, 3.0]],
                           [[1.0, 0.0], [0.0, -2.0], [0.3, 1.3], [5.0, -5.0]]])
    replaced = torch.tensor([[0, 1, 0, 1], [0, 0, 1, 0]], dtype=torch.bool)
    att = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])

    def bce(d, y):
        p = 1 / (1 + math.exp(-d))
        return -math.log(p) if y else -math.log(1 - p)

    terms = [bce(logits[i, t, 1].item() - logits[i, t, 0].item(), bool(replaced[i, t]))
             for i in range(2) for t in range(4)]
    tokens = [x for x, a in zip(terms, att.flatten().tolist()) if a]
    assert m.rtd_loss(logits, replaced, att).item() == pytest.approx(sum(terms) / 8, rel=1e-6)
    assert m.rtd_loss(logits, replaced, att).item() == pytest.approx(0.728330, abs=1e-6)   # pinned: 5.82664 / 8
    m.params = m.params.model_copy(update={"rtd_positions": "tokens"})
    assert m.rtd_loss(logits, replaced, att).item() == pytest.approx(sum(tokens) / 7, rel=1e-6)
    assert m.rtd_loss(logits, replaced, att).item() == pytest.approx(0.832371, abs=1e-6)   # pinned: 5.82660 / 7


def test_by_default_the_generators_argmax_fills_every_position_but_cls_and_padding(tok, generator_dir):
    """The code: g_pred = generator(...).argmax(-1) everywhere, g_pred[:, 0] = [CLS], e_inputs = g_pred *
    attention_mask (padding back to id 0), replaced = g_pred != input_ids on real tokens. With a stub generator
    whose logits favour a fixed proposal per position, the default corruption is that proposal on every real
    position after [CLS], whatever was masked."""
    m = _make(tok, generator_dir)
    original = torch.tensor([[101, 2000, 2001, 2002, 102, 0], [101, 3000, 3001, 102, 0, 0]])
    att = (original != 0).long()
    chosen = torch.zeros_like(original, dtype=torch.bool)          # nothing masked: the code replaces anyway
    proposal = torch.tensor([[7, 2000, 5555, 6666, 8888, 9], [7, 4444, 3001, 102, 9, 9]])
    m.generator = _Stub(proposal, tok.vocab_size)
    x2, replaced = m.corrupt(original, original, chosen, att, seed=3)
    assert x2.tolist() == [[101, 2000, 5555, 6666, 8888, 0], [101, 4444, 3001, 102, 0, 0]]
    assert replaced.long().tolist() == [[0, 0, 1, 1, 1, 0], [0, 1, 0, 0, 0, 0]]


@pytest.mark.parametrize("condition", ["embedding_output", "inputs_embeds"])
def test_the_discriminator_reads_the_sentence_vector_at_position_0(tok, generator_dir, condition):
    """embedding_output: h replaces the embedding layer's output at position 0 (the code's cls_input); the other
    positions' embeddings are the discriminator's own. inputs_embeds: h is the [CLS] word embedding."""
    m = _make(tok, generator_dir, condition=condition).eval()
    ids = tok(["alpha bravo charlie"], return_tensors="pt")
    d = m.discriminator
    cond = torch.randn(1, 32)
    if condition == "embedding_output":
        emb = d.embeddings(input_ids=ids["input_ids"])
        emb = torch.cat([cond.unsqueeze(1), emb[:, 1:]], dim=1)
        want = m.rtd_head(d.encoder(emb).last_hidden_state)   # one sentence, no padding: no mask needed
    else:
        w = d.get_input_embeddings()(ids["input_ids"])
        w = torch.cat([cond.unsqueeze(1), w[:, 1:]], dim=1)
        want = m.rtd_head(d(inputs_embeds=w, attention_mask=ids["attention_mask"]).last_hidden_state)
    got = m.discriminate(ids["input_ids"], ids["attention_mask"], cond)
    torch.testing.assert_close(got, want)
    other = m.discriminate(ids["input_ids"], ids["attention_mask"], torch.randn(1, 32))
    assert not torch.allclose(got, other)
    assert not d.embeddings._forward_hooks   # the hook is gone after the call


def test_trains_with_the_frozen_generator_unchanged(tok, generator_dir):
    """A few steps on the tiny model: the loss moves, both terms are finite, the RTD gradient reaches the encoder
    through h; the generator is out of the optimiser and the checkpoint and does not change; the exported encoder
    is the bare encoder with [CLS]."""
    torch.manual_seed(0)
    m = _make(tok, generator_dir, rtd_weight=1.0).train()
    assert m.generator.training and not any(p.requires_grad for p in m.generator.parameters())
    gen_before = {k: v.clone() for k, v in m.generator.state_dict().items()}
    disc_before = {k: v.clone() for k, v in m.discriminator.state_dict().items()}
    trainable = {id(p) for p in m.trainable_parameters()}
    assert not trainable & {id(p) for p in m.generator.parameters()}
    assert not any(k.startswith("generator.") for k in m.state_dict())
    init = m.init_sources()
    assert init["discriminator"] == "copy of encoder" and init["generator"].startswith("checkpoint")
    assert init["projector"] == "random" and init["rtd_head"] == "random"
    opt = m.configure_optimizers()
    pool = sentences(48, seed=2)
    losses = []
    for step in range(10):
        out = m(Batch(pool[(step % 6) * 8:(step % 6 + 1) * 8], draw=step, seed=1))
        # the code's corruption (argmax at every position) with a random tiny generator replaces most tokens,
        # never [CLS]
        assert math.isfinite(out["loss_rtd"].item()) and 0 < out["replaced_frac"].item() < 1
        out["loss"].backward()
        opt.step()
        opt.zero_grad()
        losses.append(out["loss"].item())
    assert abs(losses[-1] - losses[0]) > 1e-3 and sum(losses[-3:]) < sum(losses[:3])
    for k, v in m.generator.state_dict().items():
        assert torch.equal(v, gen_before[k]), k
    assert any(not torch.equal(v, disc_before[k]) for k, v in m.discriminator.state_dict().items())
    m.load_state_dict(m.state_dict())   # a resume: the generator comes from its checkpoint
    enc = m.sentence_encoder()
    assert enc.pooling == "cls" and enc.model is m.encoder
    pickle.loads(pickle.dumps(m))        # DataLoader workers


def test_rtd_gradient_reaches_the_encoder_through_the_sentence_vector(tok, generator_dir):
    m = _make(tok, generator_dir).train()
    f = m.prepare(Batch(sentences(8, seed=4), draw=0, seed=0)).features
    h, z = m.embed(f["enc"])
    both = {k: torch.cat([v, v]) for k, v in f["enc"].items()}
    x2, replaced = m.corrupt(both["input_ids"], f["masked_ids"], f["chosen"], both["attention_mask"], 1)
    m.rtd_loss(m.discriminate(x2, both["attention_mask"], z), replaced, both["attention_mask"]).backward()
    assert m.encoder.encoder.layer[-1].output.dense.weight.grad.abs().sum() > 0
    assert m.projector.net[0].weight.grad.abs().sum() > 0


def test_a_generator_without_an_mlm_head_fails_loudly(tok, tmp_path):
    folder = _tiny_generator(tok, tmp_path / "nohead", head=False)
    with pytest.raises(SentlabError, match="no MLM head weights"):
        _make(tok, folder)


def test_a_generator_of_another_vocabulary_fails_loudly(tok, tmp_path):
    cfg = BertConfig(vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64)
    BertForMaskedLM(cfg).save_pretrained(tmp_path / "small")
    with pytest.raises(SentlabError, match="another vocabulary"):
        _make(tok, tmp_path / "small")


def test_the_preflight_has_a_generator_standin(tok, tmp_path, monkeypatch, mirror):
    """The paper profile's generator (distilbert-base-uncased) is a hub model the preflight cannot fetch: it gets the
    hub-shaped stand-in (DistilBertForMaskedLM's original keys, random values, the uncased vocabulary) in the scratch
    mirror, which load_generator reads as a download, MLM head included (here scaled down)."""
    from sentlab.assets import resolve as assets
    from sentlab import backbones
    from sentlab.config import validate
    from sentlab.preflight.standins import hub_standins, method_hub_models
    from sentlab.config.profile_files import profile_values

    from conftest import REPO

    assert "distilbert-base-uncased" in method_hub_models(validate(profile_values("paper", REPO / "profiles")))
    spec = backbones.spec
    small = dict(spec("distilbert-base-uncased"))
    small["config"] = {**small["config"], "dim": 32, "n_layers": 1, "n_heads": 2, "hidden_dim": 37}
    monkeypatch.setattr(backbones, "spec",
                        lambda hub_id: small if hub_id == "distilbert-base-uncased" else spec(hub_id))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dest, notes = hub_standins(["distilbert-base-uncased"], tmp_path, None)
    assert dest == tmp_path / ".preflight" / "mirror" and notes[0].startswith("stand-in of distilbert-base-uncased")
    assert (dest / "STS").resolve() == (mirror / "STS").resolve()
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(dest))
    from sentlab.methods.diffcse import load_generator

    gen, path = load_generator("distilbert-base-uncased", tok)
    assert type(gen).__name__ == "DistilBertForMaskedLM" and gen.config.dim == 32
    assert path == str(dest / "models" / "distilbert-base-uncased")
    assert hub_standins(["distilbert-base-uncased"], tmp_path, dest) == (dest, [])   # here now: nothing to do
    assert assets.resolve_data("sick").source == "mirror"


class _Interrupt(Exception):
    pass


def test_a_resumed_run_equals_the_uninterrupted_one(tok, generator_dir, tmp_path):
    """Through the real loop: the masks (Batch.rng), the sampling (a seeded generator) and the generator's dropout
    (torch's RNG, restored from the checkpoint) replay after a resume, and the checkpoint without the generator
    loads: the exported weights and the curve are the same as without the interruption."""
    import json as _json

    from safetensors.torch import load_file

    from sentlab.config import Params
    from sentlab.train.run import train_method
    from _support.training import factory, fake_dev_eval, make_root

    p = Params(seed=3, train=TrainParams(batch_size=8, max_length=16, lr=3e-3, eval_every=2, max_steps=5,
                                         device="cpu"), methods={"diffcse": {"generator": str(generator_dir)}})
    a = make_root(tmp_path / "a")
    info = train_method(p, "diffcse", root=a, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                        progress=False)
    assert info["init"]["discriminator"] == "copy of encoder" and info["generator"] == str(generator_dir)
    b = make_root(tmp_path / "b")

    def kill_at_3(step, record):
        if step == 3:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        train_method(p, "diffcse", root=b, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                     callbacks=[kill_at_3], progress=False)
    info = train_method(p, "diffcse", root=b, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                        progress=False)
    assert info["resumed_from_step"] == 2
    wa, wb = load_file(a / "models/diffcse/model.safetensors"), load_file(b / "models/diffcse/model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not any("discriminator" in k or "generator" in k for k in wa)   # the bare encoder is exported
    assert (a / "reports/curves/diffcse.csv").read_text() == (b / "reports/curves/diffcse.csv").read_text()
    assert _json.loads((b / "models/diffcse/sentlab.json").read_text())["pooling"] == "cls"
