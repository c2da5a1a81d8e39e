"""ConSERT (unsupervised; PaSeR Table 1's ConSERT-base), issue #40: its views, NT-Xent and settings on a tiny BERT."""

import math
import pickle
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from sentlab.methods.blocks import method_params
from sentlab.config import TrainParams
from sentlab.nn.encoder import pool
from sentlab.errors import SentlabError
from sentlab.methods import get_method
from sentlab.methods._common import nt_xent
from sentlab.methods.base import Batch
from _support.methods import tiny_method
from tiny import sentences, tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")


def build(tok, model=None, **params):
    return tiny_method("consert", tok, model=model, max_length=32, **params)


def test_nt_xent_matches_a_hand_computation():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g)
    tau = 0.1

    def cos(a, b):
        return float(a @ b / (a.norm() * b.norm()))

    want = 0.0
    for a, b in ((z1, z2), (z2, z1)):       # loss_a + loss_b, each a mean over the rows
        terms = []
        for i in range(5):
            cands = [cos(a[i], b[j]) / tau for j in range(5)] + [cos(a[i], a[k]) / tau for k in range(5) if k != i]
            terms.append(-(cands[i] - math.log(sum(math.exp(c) for c in cands))))
        want += sum(terms) / 5
    assert nt_xent(z1, z2, tau).item() == pytest.approx(want, rel=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert nt_xent(z1, z2, tau).dtype == torch.float32


def test_shuffle_permutes_the_position_ids_only(tok):
    m = build(tok, view1="none", view2="shuffle")
    sents = sentences(8, seed=2)
    f = m.prepare(Batch(sents, draw=4, seed=1)).features
    ids, att, pos = f["enc"]["input_ids"], f["enc"]["attention_mask"], f["position_ids"]
    n, length = att.shape[0] // 2, att.shape[1]
    assert torch.equal(ids[:n], ids[n:]) and torch.equal(att[:n], att[n:])      # the tokens stay where they are
    assert torch.equal(pos[:n], torch.arange(length).repeat(n, 1))               # view 1: the positions as they are
    moved = 0
    for i in range(n):
        k = int(att[i].sum())
        row = pos[n + i].tolist()
        assert sorted(row[:k]) == list(range(k)) and row[k:] == list(range(k, length))  # real tokens only
        moved += row[:k] != list(range(k))
    assert moved == n
    assert torch.all(f["keep_tokens"] == 1) and torch.all(f["keep_features"] == 1)
    again = m.prepare(Batch(sents, draw=4, seed=1)).features["position_ids"]
    assert torch.equal(again, pos) and not torch.equal(m.prepare(Batch(sents, draw=5, seed=1)).features[
        "position_ids"], pos)
    rng = random.Random("1:4:consert")
    first = list(range(int(att[0].sum())))
    rng.shuffle(first)
    assert pos[n, :len(first)].tolist() == first                                 # drawn from Batch.rng("consert")


def _layer_input(m, features):
    """What the transformer layers receive: the embedding output after the method's cutoff."""
    seen = {}
    handle = m.encoder.encoder.register_forward_pre_hook(lambda mod, args, kw: seen.update(x=args[0] if args else
                                                                                          kw["hidden_states"]),
                                                         with_kwargs=True)
    try:
        with torch.no_grad():
            m._embed(features)
    finally:
        handle.remove()
    return seen["x"]


def test_feature_cutoff_zeroes_the_chosen_columns_of_the_embedding_output(tok):
    m = build(tok).eval()      # view1 feature_cutoff 0.2, view2 shuffle (the paper's pair)
    sents = sentences(6, seed=3)
    f = m.prepare(Batch(sents, draw=0, seed=0)).features
    x = _layer_input(m, f)
    n = 6
    with torch.no_grad():
        plain = m.encoder.embeddings(input_ids=f["enc"]["input_ids"][:n], token_type_ids=f["enc"]["token_type_ids"][:n])
    for i in range(n):
        cut = (f["keep_features"][i] == 0).nonzero().flatten()
        assert len(cut) == int(32 * 0.2) == 6
        assert torch.all(x[i][:, cut] == 0)                                   # every position, padding included
        kept = f["keep_features"][i] == 1
        torch.testing.assert_close(x[i][:, kept], plain[i][:, kept], rtol=0, atol=1e-6)
    assert len({tuple((f["keep_features"][i] == 0).nonzero().flatten().tolist()) for i in range(n)}) > 1  # per row
    assert torch.all(f["keep_features"][n:] == 1)                               # the shuffled view is not cut


def test_token_cutoff_zeroes_the_chosen_tokens(tok):
    m = build(tok, view1="token_cutoff", view2="none", cutoff_rate=0.3).eval()
    f = m.prepare(Batch(sentences(4, seed=5), draw=0, seed=0)).features
    x = _layer_input(m, f)
    for i in range(4):
        k = int(f["enc"]["attention_mask"][i].sum())
        cut = (f["keep_tokens"][i] == 0).nonzero().flatten()
        assert len(cut) == int(k * 0.3) and cut.max() < k
        assert torch.all(x[i][cut] == 0) and torch.all(x[i][:k].abs().sum(-1)[f["keep_tokens"][i][:k] == 1] > 0)


def test_loss_is_weighted_nt_xent_of_the_two_views_without_dropout(tok):
    m = build(tok)
    m.train()                                                      # training mode: dropout must still be off
    sents = sentences(6, seed=7)
    batch = Batch(sents, draw=2, seed=3)
    out = m(batch)
    f = m.prepare(Batch(sents, draw=2, seed=3)).features
    n = 6
    enc = {k: v[:n] for k, v in f["enc"].items()}
    m.encoder.eval()
    with torch.no_grad():
        keep = f["keep_features"][:n]
        h = m.encoder.embeddings.register_forward_hook(lambda mod, i, o: o * keep[:, None, :])
        z1 = pool(m.encoder(**enc), enc["attention_mask"], "mean")      # view 1 alone: feature cutoff
        h.remove()
        z2 = pool(m.encoder(**enc, position_ids=f["position_ids"][n:]), enc["attention_mask"], "mean")  # shuffle
    m.encoder.train()
    assert out["loss"].item() == pytest.approx(0.15 * nt_xent(z1, z2, 0.1).item(), abs=1e-5)
    assert m(batch)["loss"].item() == out["loss"].item()                 # no dropout noise between two calls
    assert m.encoder.training
    d = build(tok, dropout=True).train()
    assert d(batch)["loss"].item() != d(batch)["loss"].item()


def test_defaults_inference_pooling_and_bad_input(tok):
    m = build(tok)
    p = m.params
    assert (p.temperature, p.view1, p.view2, p.cutoff_rate, p.loss_weight, p.dropout, p.train_pooling, p.pooling,
            p.corpus) == (0.1, "feature_cutoff", "shuffle", 0.2, 0.15, False, "mean", "top2_mean", "sts_all_sides")
    assert m.corpus_name() == "sts_all_sides" and m.export_info()["pooling"] == "top2_mean"
    assert m.sentence_encoder().pooling == "top2_mean"
    clone = pickle.loads(pickle.dumps(m))
    b = Batch(sentences(4), draw=1, seed=2)
    assert torch.equal(clone.prepare(b).features["position_ids"], m.prepare(Batch(sentences(4), draw=1, seed=2))
                       .features["position_ids"])
    with pytest.raises(Exception, match="view1"):
        get_method("consert").Params(view1="crop")
    rel = tiny_bert(tok, 0)
    rel.config.position_embedding_type = "relative_key"
    with pytest.raises(SentlabError, match="token shuffle permutes absolute position ids"):
        build(tok, rel)
    assert build(tok, tiny_bert(tok, 0), view1="feature_cutoff", view2="token_cutoff") is not None


def test_paper_profile_settings():
    from sentlab.config import load_params
    from sentlab.train.run import resolve_train

    p = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="paper")
    cfg = resolve_train(p, method_params(p, "consert"))
    assert (cfg.batch_size, cfg.max_length, cfg.lr, cfg.epochs, cfg.eval_every) == (96, 64, 5e-7, 10, 200)
    assert "consert" in p.train.methods and "consert" in p.transfer.models


def test_loss_falls(tok):
    m = build(tok, loss_weight=1.0)
    opt = torch.optim.AdamW(m.trainable_parameters(), lr=3e-3)
    pool_ = sentences(64, seed=1)
    losses = []
    for step in range(30):
        out = m(Batch(pool_[(step % 8) * 8:(step % 8) * 8 + 8], draw=step, seed=0))
        out["loss"].backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(out["loss"].detach()))
    first, last = np.mean(losses[:6]), np.mean(losses[-6:])
    assert last < 0.85 * first, (first, last)


def test_train_method_end_to_end_resumes_exactly_and_exports_top2_mean(tmp_path, tok):
    """Through the real loop (prepare in its DataLoader): killed after step 3 and resumed, the weights and the curve
    equal an uninterrupted run's (the views are drawn from Batch.rng); the export pools the last two layers."""
    import json

    from safetensors.torch import load_file

    from sentlab.config import Params
    from sentlab.train.run import train_method
    from _support.training import Interrupt, factory, fake_dev_eval, make_root

    p = Params(seed=3, train=TrainParams(batch_size=8, max_length=16, lr=3e-3, eval_every=2, max_steps=5,
                                         device="cpu"),
               methods={"consert": {"corpus": "train", "loss_weight": 1.0}})
    a, b = make_root(tmp_path / "a"), make_root(tmp_path / "b")
    train_method(p, "consert", root=a, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                 progress=False)

    def kill_at_3(step, record):
        if step == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        train_method(p, "consert", root=b, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                     callbacks=[kill_at_3], progress=False)
    info = train_method(p, "consert", root=b, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                        progress=False)
    assert info["resumed_from_step"] == 2
    wa, wb = (load_file(r / "models" / "consert" / "model.safetensors") for r in (a, b))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    meta = json.loads((a / "models" / "consert" / "sentlab.json").read_text())
    assert meta["pooling"] == "top2_mean" and meta["views"] == ["feature_cutoff", "shuffle"]


def test_loss_is_fp32_under_bf16_autocast(tok):
    m = build(tok).eval()
    batch = Batch(sentences(6, seed=8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = m(batch)["loss"]
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, m(batch)["loss"], rtol=0.05, atol=0.05)


def test_roberta_positions_count_from_padding_idx_plus_one(tok):
    """RoBERTa numbers positions from pad + 1: the unshuffled view must give the model's own positions."""
    from transformers import RobertaConfig, RobertaModel

    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=80, pad_token_id=tok.pad_token_id,
                        type_vocab_size=2)
    m = build(tok, RobertaModel(cfg, add_pooling_layer=False), view1="none", view2="shuffle").eval()
    assert m.position_offset == tok.pad_token_id + 1
    f = m.prepare(Batch(sentences(4), draw=0, seed=0)).features
    enc = {k: v[:4] for k, v in f["enc"].items()}
    with torch.no_grad():
        z = m._embed(f)
        ref = pool(m.encoder(**enc), enc["attention_mask"], "mean")
    torch.testing.assert_close(z[:4], ref, rtol=0, atol=1e-6)
    assert f["position_ids"][4:].min() == m.position_offset


def test_the_code_s_optimiser_schedule_and_corpus_are_the_defaults(tok):
    """ConSERT's main.py: fit(optimizer_params={'lr', 'eps': 1e-6, 'correct_bias': False}, weight_decay 0.01 but
    on bias/LayerNorm, warmup_steps = ceil(10 % of the steps), clip_grad_norm_ over every parameter at once);
    --train_data stssick --no_pair: every side of every pair (issue #53 §3.7)."""
    from sentlab.train.loop import linear_schedule
    from sentlab.nn.optim import AdamWLegacy

    m = build(tok)
    assert m.corpus_name() == "sts_all_sides" and m.grad_clip == "global"
    opt = m.configure_optimizers(weight_decay=0.0)
    assert isinstance(opt, AdamWLegacy)
    assert [(g["weight_decay"], g["eps"], g["correct_bias"], g["decay"]) for g in opt.param_groups] == [
        (0.01, 1e-6, False, "after"), (0.0, 1e-6, False, "after")]
    names = {id(p): n for n, p in m.named_parameters()}
    exempt = {names[id(p)] for p in opt.param_groups[1]["params"]}
    assert exempt == {n for n in names.values() if n.endswith("bias") or "LayerNorm" in n}
    assert len(opt.param_groups[0]["params"]) + len(exempt) == len(names)
    assert m.warmup_steps(9310) == 931 and m.warmup_steps(95) == 10      # ceil(0.1 · steps)
    sched = linear_schedule(opt, 20, m.warmup_steps(20))
    lrs = []
    for _ in range(20):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[:3] == pytest.approx([0.0, 5e-4, 1e-3]) and lrs[2] == max(lrs)   # lr 1e-3: 2 warm-up steps
    assert lrs[11] == pytest.approx(1e-3 * 9 / 18)
    torch_opt = build(tok, optimizer="adamw").configure_optimizers()
    assert isinstance(torch_opt, torch.optim.AdamW) and torch_opt.param_groups[0]["eps"] == 1e-6
    assert build(tok, warmup=0.0).warmup_steps(100) == 0
