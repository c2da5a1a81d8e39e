"""SimCSE, CT-BERT, MoCo-BERT (+ augmentations) and PT-BERT on a tiny random BERT."""

import numpy as np
import pytest
import torch
from torch import nn

from sentlab.config import TrainParams
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from sentlab.methods.moco import momentum_update
from tiny import sentences
from tiny import tiny_bert as _tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_bert(tok, seed=0):
    return _tiny(tok, seed, initializer_range=0.2)




def frames_for(s):
    w = s.split()
    if len(w) < 6:
        return []
    def sp(i, j):
        text = " ".join(w[i:j])
        return {"text": text, "start": 0, "end": len(text)}
    return [{"predicate": sp(1, 2), "arg0": sp(0, 1), "arg1": sp(2, 4), "argm_neg": None},
            {"predicate": sp(4, 5), "arg0": None, "arg1": sp(5, 6), "argm_neg": None}]


def build(method_id, tok, batch_size=8, **params):
    cfg = TrainParams(batch_size=batch_size, max_length=16, lr=1e-3)
    cls = get_method(method_id)
    torch.manual_seed(0)
    return cls(tiny_bert(tok), tok, cls.Params(**params).resolved(cfg), seed=0)


# --- momentum and queue ----------------------------------------------------------
def test_momentum_update_matches_formula():
    torch.manual_seed(0)
    q, k = nn.Linear(5, 3), nn.Linear(5, 3)
    tq = [p.detach().clone().double() for p in q.parameters()]
    tk = [p.detach().clone().double() for p in k.parameters()]
    momentum_update(q, k, 0.885)
    for p_k, a_k, a_q in zip(k.parameters(), tk, tq):
        expected = 0.885 * a_k + (1 - 0.885) * a_q
        assert torch.allclose(p_k.double(), expected, rtol=0, atol=1e-7)
    for p_q, a_q in zip(q.parameters(), tq):  # the query side is untouched
        assert torch.equal(p_q.double(), a_q)


def test_moco_momentum_copies_follow_after_step(tok):
    m = build("moco", tok, queue_size=32)
    assert all(not p.requires_grad for p in m.key_encoder.parameters())
    assert {id(p) for p in m.trainable_parameters()}.isdisjoint({id(p) for p in m.key_encoder.parameters()})
    for p in m.encoder.parameters():
        p.data.add_(1.0)
    before = [p.clone() for p in m.key_encoder.parameters()]
    m.after_optimizer_step()
    for p_k, b, p_q in zip(m.key_encoder.parameters(), before, m.encoder.parameters()):
        assert torch.allclose(p_k, 0.885 * b + 0.115 * p_q, atol=1e-6)


def test_queue_is_fifo_and_candidates_are_256(tok):
    # paper geometry on a tiny model: batch 64, M = 256 -> queue holds the previous 3 batches
    m = build("moco", tok, batch_size=64, queue_size=256)
    assert m.queue.shape[0] == 192
    seen_keys, captured = [], {}
    orig_candidates = m._candidates

    def spy(keys):
        c = orig_candidates(keys)
        captured["c"], captured["k"] = c, keys.clone()
        return c

    m._candidates = spy
    for t in range(5):
        m(Batch(sentences(64, seed=t)))
        c, k = captured["c"], captured["k"]
        assert c.shape[0] == min(256, 64 * (t + 1))
        assert torch.equal(c[:64], k)  # positives: the current batch's keys on the diagonal
        for j, prev in enumerate(reversed(seen_keys[-3:])):  # then the previous batches, newest first
            assert torch.equal(c[64 * (j + 1): 64 * (j + 2)], prev)
        seen_keys.append(k)
    # after 5 batches the queue holds batches 5, 4, 3 (FIFO: 1 and 2 left)
    assert int(m.queue_len) == 192
    assert torch.equal(m.queue, torch.cat([seen_keys[4], seen_keys[3], seen_keys[2]]))


def test_moco_loss_uses_diagonal_positives(tok):
    m = build("moco", tok, queue_size=16).eval()
    batch = Batch(sentences(8))
    with torch.no_grad():
        enc = m.encode_text(batch.sentences)
        q, k = m._query(enc), m._key(enc)
    from sentlab.methods._common import cosine_logits
    expected = torch.nn.functional.cross_entropy(cosine_logits(q, k, 0.05), torch.arange(8))
    with torch.no_grad():
        out = m(batch)
    assert torch.allclose(out["loss"], expected, atol=1e-5)
    assert out["candidates"] == 8.0


def test_queue_size_smaller_than_batch_is_an_error(tok):
    from sentlab.errors import SentlabError
    with pytest.raises(SentlabError, match="queue_size"):
        build("moco", tok, batch_size=8, queue_size=4)


def test_augmented_keys_are_seeded(tok):
    m = build("moco_deletion", tok, queue_size=16)
    b = Batch(sentences(8))
    a1 = m._augment(b)
    assert m._augment(b) == a1                                   # a function of (seed, draw): resumable, worker-safe
    assert m._augment(Batch(b.sentences, draw=1)) != a1          # the next micro-batch draws anew
    assert m._augment(Batch(b.sentences, seed=1)) != a1
    assert any(x != y for x, y in zip(a1, b.sentences))
    keys = m.prepare(Batch(b.sentences)).features["key"]["input_ids"]
    assert torch.equal(keys, m.encode_text(a1)["input_ids"])     # prepare() tokenises the augmented keys
    srl = build("moco_srl", tok, queue_size=16)
    sents = ["alpha bravo charlie delta echo foxtrot golf", "alpha bravo"]
    out = srl._augment(Batch(sents, extras={"frames": [frames_for(s) for s in sents]}))
    assert out == ["alpha bravo charlie delta echo foxtrot", "alpha bravo"]


# --- PT-BERT -------------------------------------------------------------------
def test_ptbert_shapes_and_shared_attention(tok):
    m = build("ptbert", tok, queue_size=16, pseudo_len=10, num_heads=1, attn_dropout=0.0, attend_to="tokens").eval()
    assert m.pseudo.weight.shape == (10, 32)
    enc = m.tokenize(["alpha bravo charlie", "delta echo"])
    hidden = m.encoder(**enc).last_hidden_state
    mask = enc["attention_mask"]
    calls = []
    hook = m.attn.register_forward_hook(lambda mod, inp, out: calls.append(out.shape))
    with torch.no_grad():
        h = m._pseudo_token_map(hidden, mask, m.pseudo, m.attn, m.attn)
    hook.remove()
    assert h.shape == (2, 32)
    assert calls == [torch.Size([2, 10, 32]), torch.Size([2, 1, 32])]  # Z' (B, m, d), then h's [CLS] row
    # the same W_Q, W_K, W_V in both mappings, single head: Eqs. (1)-(3) by hand
    WQ, WK, WV = m.attn.query, m.attn.key, m.attn.value
    d = 32
    with torch.no_grad():
        for b in range(2):
            y = hidden[b][mask[b].bool()]  # padding masked
            p = m.pseudo.weight
            z = torch.softmax(WQ(p) @ WK(y).T / d ** 0.5, -1) @ WV(y)
            hb = torch.softmax(WQ(hidden[b, :1]) @ WK(z).T / d ** 0.5, -1) @ WV(z)
            assert torch.allclose(h[b], hb[0], atol=1e-5)
    # attend_to=cls: Y is the single [CLS] vector, every row of Z' is the same value vector
    m.params.attend_to = "cls"
    with torch.no_grad():
        z_rows = m.attn(m.pseudo.weight.unsqueeze(0).expand(2, -1, -1), hidden[:, :1])
    assert torch.allclose(z_rows, WV(hidden[:, :1]).expand(-1, 10, -1), atol=1e-5)


def test_ptbert_key_branch_momentum_copies(tok):
    m = build("ptbert", tok, queue_size=16, pseudo_len=6)
    pairs = [(a is not b) for a, b in m._momentum_pairs()]
    assert len(pairs) == 4 and all(pairs)
    assert not any(p.requires_grad for p in m.key_pseudo.parameters())
    trainable = {id(p) for p in m.trainable_parameters()}
    assert id(m.pseudo.weight) in trainable and id(m.key_pseudo.weight) not in trainable
    with torch.no_grad():
        m.pseudo.weight.add_(1.0)
    before = m.key_pseudo.weight.clone()
    m.after_optimizer_step()
    assert torch.allclose(m.key_pseudo.weight, 0.885 * before + 0.115 * m.pseudo.weight, atol=1e-6)
    # released-code variant: the key branch's second mapping uses the online attention
    m2 = build("ptbert", tok, queue_size=16, pseudo_len=6, key_second_attention="online")
    used = []
    h1 = m2.attn.register_forward_hook(lambda *a: used.append("online"))
    h2 = m2.key_attn.register_forward_hook(lambda *a: used.append("momentum"))
    m2._key(m2.encode_text(["alpha bravo"]))
    h1.remove(); h2.remove()
    assert used == ["momentum", "online"]


def test_ptbert_inference_is_bare_cls(tok):
    m = build("ptbert", tok, queue_size=16, pseudo_len=6)
    sents = ["alpha bravo charlie", "delta"]
    emb = m.sentence_encoder().encode(sents, batch_size=2)
    m.encoder.eval()
    with torch.no_grad():
        enc = tok(sents, padding=True, return_tensors="pt")
        ref = m.encoder(**enc).last_hidden_state[:, 0].numpy()
    np.testing.assert_allclose(emb, ref, atol=1e-5)


def test_ct_exports_second_copy_and_bce(tok, monkeypatch):
    import math

    m = build("ct", tok, negatives=2)
    assert m.model2 is m.encoder and m.model1 is m.other
    assert m.export_info()["pooling"] == "mean"
    # hand-built case: f1, f2 and the negatives fixed; D[i, j] = f1(s_i)·f2(s_j)
    e1 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    e2 = torch.tensor([[2.0, 0.0], [0.0, -1.0], [1.0, 0.0]])  # D = [[2, 0, 1], [0, -1, 0], [2, -1, 1]]
    monkeypatch.setattr(m, "_embed", lambda model, enc: e1 if model is m.model1 else e2)
    monkeypatch.setattr(m, "_sample_negatives", lambda n, device: torch.tensor([[1, 2], [0, 2], [0, 1]]))
    out = m(Batch(sentences(3)))
    # logits (positive first): [2 | 0, 1], [-1 | 0, 0], [1 | 2, -1]; BCE = log(1 + e^-x) for the positive,
    # log(1 + e^x) for a negative, averaged over the 3·(1+2) pairs
    sp = lambda x: math.log1p(math.exp(x))  # noqa: E731
    want = (sp(-2) + sp(0) + sp(1) + sp(1) + sp(0) + sp(0) + sp(-1) + sp(2) + sp(-1)) / 9
    assert out["loss"].item() == pytest.approx(want, rel=1e-6)
    assert out["pos_dot"].item() == pytest.approx(2 / 3) and out["neg_dot"].item() == pytest.approx(1 / 3)
    monkeypatch.undo()
    # the real sampler: K distinct other sentences, never the sentence itself
    torch.manual_seed(0)
    neg = build("ct", tok, negatives=7)._sample_negatives(8, "cpu")
    assert [sorted(r) for r in neg.tolist()] == [[j for j in range(8) if j != i] for i in range(8)]
    from sentlab.errors import SentlabError
    with pytest.raises(SentlabError, match="negatives"):
        build("ct", tok, negatives=8)(Batch(sentences(8)))


def test_simcse_views_differ_by_dropout_in_training_only(tok, monkeypatch):
    """SimCSE's only augmentation is dropout: in train mode the two copies of a sentence in the doubled
    batch get different [CLS]+MLP outputs; in eval mode (no dropout) they are equal."""
    import sentlab.methods.simcse as simcse_mod

    m = build("simcse", tok)
    assert m.encoder.config.hidden_dropout_prob == 0.1
    seen = []
    real = simcse_mod.in_batch_info_nce
    monkeypatch.setattr(simcse_mod, "in_batch_info_nce", lambda z1, z2, t: seen.append((z1, z2)) or real(z1, z2, t))
    batch = Batch(sentences(4))
    m.train()
    torch.manual_seed(0)
    m(batch)
    z1, z2 = seen[-1]
    assert z1.shape == z2.shape == (4, 32)
    assert ((z1 - z2).abs().amax(dim=1) > 1e-3).all()  # every sentence: two different views
    m.eval()
    with torch.no_grad():
        m(batch)
    z1, z2 = seen[-1]
    torch.testing.assert_close(z1, z2, atol=1e-6, rtol=1e-6)


# --- every method learns ----------------------------------------------------------
CASES = [("simcse", {}), ("ct", {"negatives": 3}), ("moco", {"queue_size": 32}), ("moco_reorder", {"queue_size": 32}),
         ("moco_duplication", {"queue_size": 32}), ("moco_deletion", {"queue_size": 32}),
         ("moco_srl", {"queue_size": 32}), ("ptbert", {"queue_size": 32, "pseudo_len": 16}),
         ("ptbert", {"queue_size": 32, "pseudo_len": 16, "attend_to": "tokens"})]


@pytest.mark.parametrize("method_id,params", CASES, ids=[f"{m}-{p.get('attend_to', '')}" for m, p in CASES])
def test_loss_falls(tok, method_id, params):
    m = build(method_id, tok, **params)
    opt = torch.optim.AdamW(m.trainable_parameters(), lr=3e-3)
    pool = sentences(64, seed=1)
    batches = [Batch(pool[i: i + 8], extras={"frames": [frames_for(s) for s in pool[i: i + 8]]})
               for i in range(0, 64, 8)]
    torch.manual_seed(0)
    losses = []
    for step in range(44):
        out = m(batches[step % len(batches)])
        out["loss"].backward()
        opt.step(); opt.zero_grad()
        m.after_optimizer_step()
        losses.append(float(out["loss"].detach()))
    # MoCo's queue (32 = 4 batches) is full from step 4: compare like with like
    first, last = np.mean(losses[4:12]), np.mean(losses[-8:])
    assert last < 0.9 * first, (method_id, first, last)


@pytest.mark.parametrize("method_id", ["simcse", "moco", "ptbert", "l2p", "posbow_adv"])
def test_projection_mlp_is_initialised_as_simcses(tok, method_id, tmp_path):
    """SimCSE's MLPLayer is initialised by BERT's _init_weights (cl_init calls init_weights): weight N(0, the config's
    initializer_range: 0.02 in bert-base/roberta-base), bias zero; nn.Linear's default is Kaiming-uniform (std
    1/sqrt(3·d) ≈ 0.10 at d = 32) with a uniform bias (issue #34)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kw = {}
    if method_id == "posbow_adv":
        pq.write_table(pa.table({"id": [0, 1], "text": sentences(2)}), tmp_path / "c.parquet")
        kw = {"bow_vocab_from": str(tmp_path / "c.parquet"), "bow_vocab_size": 5}
    cls = get_method(method_id)
    for init in (0.02, 0.05):
        m = cls(_tiny(tok, 0, initializer_range=init), tok, cls.Params(**kw).resolved(TrainParams(max_length=16)))
        dense = m.mlp.dense
        assert torch.count_nonzero(dense.bias) == 0
        w = dense.weight.detach()
        assert float(w.std()) == pytest.approx(init, rel=0.1) and abs(float(w.mean())) < 0.1 * init
