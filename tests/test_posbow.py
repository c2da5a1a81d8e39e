"""SimCSE + POS/BOW auxiliaries with adversarial disentangling (methods/posbow_adv.py, SPEC §3.8).

Tiny random BERT (hidden 32 → BOW 27 / POS 5 channels) with the MiniLM tokenizer; seconds each.
"""

from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.methods._grad_reverse import grad_reverse
from sentlab.methods.base import Batch
from sentlab.methods.posbow_adv import POS_TAGS, PosBowAdv, build_bow_vocab, pos_histogram
from tiny import tiny_bert

SENTS = [
    ("the cat sat on the mat", ["DT", "NN", "VBD", "IN", "DT", "NN"]),
    ("dogs bark loudly at night", ["NNS", "VBP", "RB", "IN", "NN"]),
    ("she quickly ran to the old house", ["PRP", "RB", "VBD", "TO", "DT", "JJ", "NN"]),
    ("a small bird sings", ["DT", "JJ", "NN", "VBZ"]),
    ("they will arrive tomorrow morning", ["PRP", "MD", "VB", "NN", "NN"]),
    ("green ideas sleep furiously", ["JJ", "NNS", "VBP", "RB"]),
    ("i love reading books about history", ["PRP", "VBP", "VBG", "NNS", "IN", "NN"]),
    ("the river flows into the sea", ["DT", "NN", "VBZ", "IN", "DT", "NN"]),
]
BATCH = Batch([s for s, _ in SENTS], list(range(len(SENTS))), {"pos": [t for _, t in SENTS]})
TRAIN_CFG = TrainParams(max_length=32, temperature=0.05)
pytestmark = pytest.mark.usefixtures("one_thread")





@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"id": list(range(len(SENTS))), "text": [s for s, _ in SENTS]}), path)
    return str(path)


def tiny_encoder(tok, seed=0):
    return tiny_bert(tok, seed)


def make(tok, corpus, seed=0, **kw):
    params = PosBowAdv.Params(bow_vocab_size=kw.pop("bow_vocab_size", 20), bow_vocab_from=corpus, **kw)
    return PosBowAdv(tiny_encoder(tok), tok, params, TRAIN_CFG, seed=seed)


def train(method, steps, lr=1e-3, seed=0):
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(method.trainable_parameters(), lr=lr)
    hist = []
    for _ in range(steps):
        out = method(BATCH)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        method.after_optimizer_step()
        hist.append({k: float(v.detach()) for k, v in out.items()})
    return hist


# --- gradient reversal ---------------------------------------------------------------
@pytest.mark.parametrize("lambd", [0.0, 0.3, 2.0])
def test_grad_reverse_flips_and_scales(lambd):
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(4, 3)
    y = grad_reverse(x, lambd)
    assert torch.equal(y, x)
    (y * w).sum().backward()
    assert torch.allclose(x.grad, -lambd * w)


# --- channels ------------------------------------------------------------------------
def test_channel_sizes_and_slicing(tok, corpus):
    assert PosBowAdv._channel_sizes(768, None, None) == (640, 128)
    assert PosBowAdv._channel_sizes(384, None, None) == (320, 64)
    assert PosBowAdv._channel_sizes(384, 300, None) == (300, 84)
    with pytest.raises(SentlabError, match="bow_dim"):
        PosBowAdv._channel_sizes(384, 320, 100)

    m = make(tok, corpus)
    assert (m.bow_dim, m.pos_dim) == (27, 5)
    h = torch.arange(2 * 32, dtype=torch.float32).view(2, 32)
    bow, pos = m.split_channels(h)
    assert torch.equal(bow, h[:, :27]) and torch.equal(pos, h[:, 27:32])
    assert m.export_info()["channels"] == {"bow": [0, 27], "pos": [27, 32]}
    assert m.export_info()["pooling"] == "cls"

    # The channel encoders evaluated as rows are slices of the exported [CLS] embedding.
    full = m.sentence_encoder().encode(BATCH.sentences)
    extra = m.extra_eval_encoders()
    assert set(extra) == {"posbow_adv_bow", "posbow_adv_pos"}
    np.testing.assert_allclose(extra["posbow_adv_bow"].encode(BATCH.sentences), full[:, :27], atol=1e-6)
    np.testing.assert_allclose(extra["posbow_adv_pos"].encode(BATCH.sentences), full[:, 27:32], atol=1e-6)


# --- targets -------------------------------------------------------------------------
def test_bow_vocab_and_multi_hot_target(tok, corpus):
    vocab = build_bow_vocab(tok, [s for s, _ in SENTS], 20, 32, show_progress=False)
    the = tok.convert_tokens_to_ids("the")
    assert vocab[0] == the  # "the" occurs in the most sentences (3)
    assert not set(vocab.tolist()) & set(tok.all_special_ids)
    with pytest.raises(SentlabError, match="bow_vocab_size"):
        build_bow_vocab(tok, [s for s, _ in SENTS], 10_000, 32, show_progress=False)

    m = make(tok, corpus)
    assert m.bow_vocab.tolist() == vocab.tolist()
    enc = m.tokenize(["the cat sat on the mat", "zebra"])
    target = m.bow_targets(enc["input_ids"], enc["attention_mask"])
    assert target.shape == (2, 20)
    want = {tok.convert_tokens_to_ids(w) for w in "the cat sat on mat".split()} & set(vocab.tolist())
    got = {int(m.bow_vocab[i]) for i in torch.nonzero(target[0]).flatten()}
    assert got == want and len(want) >= 2  # multi-hot: repeated "the" counts once
    assert target[0].max() == 1.0
    assert target[1].sum() == 0  # "zebra" is not in the corpus vocabulary; padding never counts


def test_pos_histogram():
    h = pos_histogram(["DT", "NN", "VBD", "IN", "DT", "NN"])
    assert h.shape == (len(POS_TAGS),) and abs(h.sum() - 1) < 1e-6
    idx = {t: i for i, t in enumerate(POS_TAGS)}
    assert h[idx["DT"]] == pytest.approx(2 / 6) and h[idx["NN"]] == pytest.approx(2 / 6)
    assert h[idx["VBD"]] == pytest.approx(1 / 6) and h[idx["IN"]] == pytest.approx(1 / 6)
    h2 = pos_histogram(["(", "NN", ")", "HYPH"])  # NLTK brackets -> -LRB-/-RRB-, non-Penn -> OTHER
    assert h2[idx["-LRB-"]] == h2[idx["-RRB-"]] == h2[idx["OTHER"]] == pytest.approx(0.25)
    assert pos_histogram([]).sum() == 0


def test_missing_inputs_are_user_errors(tok, corpus, tmp_path):
    with pytest.raises(SentlabError, match="bow_vocab_from"):
        make(tok, str(tmp_path / "nope.parquet"))
    m = make(tok, corpus)
    with pytest.raises(SentlabError, match="pos"):
        m(Batch(BATCH.sentences))


# --- discriminators read the other channel ---------------------------------------------
def test_discriminators_read_the_other_channel(tok, corpus):
    m = make(tok, corpus, adversary="grl", aux_views="first")
    m.eval()  # no dropout: the channels are slices of the exported embedding
    seen = {}
    for name in ("bow", "pos"):
        m.discriminators[name].register_forward_hook(lambda mod, inp, out, name=name: seen.__setitem__(name, inp[0]))
    m(BATCH)
    full = torch.from_numpy(m.sentence_encoder().encode(BATCH.sentences, sort_by_length=False))
    torch.testing.assert_close(seen["bow"], full[:, 27:32], atol=1e-5, rtol=0)  # D_BOW <- POS channel
    torch.testing.assert_close(seen["pos"], full[:, :27], atol=1e-5, rtol=0)    # D_POS <- BOW channel

    # Gradients: D_BOW's loss reaches only the POS slice, D_POS's only the BOW slice,
    # and through the reversal layer they arrive as -lambda times the plain gradient.
    h = torch.randn(8, 32)
    bow_t = (torch.rand(8, 20) > 0.7).float()
    pos_t = torch.from_numpy(np.stack([pos_histogram(t) for _, t in SENTS]))
    grads = {}
    for reverse in (False, True):
        x = h.clone().requires_grad_(True)
        bow_ch, pos_ch = m.split_channels(x)
        if reverse:
            bow_ch, pos_ch = grad_reverse(bow_ch, 0.7), grad_reverse(pos_ch, 0.7)
        l_dbow, l_dpos = m._adversarial_losses(bow_ch, pos_ch, bow_t, pos_t)
        g_dbow, = torch.autograd.grad(l_dbow, x, retain_graph=True)
        g_dpos, = torch.autograd.grad(l_dpos, x)
        assert g_dbow[:, :27].abs().sum() == 0 and g_dbow[:, 27:].abs().sum() > 0
        assert g_dpos[:, 27:].abs().sum() == 0 and g_dpos[:, :27].abs().sum() > 0
        grads[reverse] = (g_dbow, g_dpos)
    torch.testing.assert_close(grads[True][0], -0.7 * grads[False][0])
    torch.testing.assert_close(grads[True][1], -0.7 * grads[False][1])


# --- training ------------------------------------------------------------------------------
def test_loss_falls_with_gradient_reversal(tok, corpus):
    m = make(tok, corpus, adversary="grl", adv_lambda=0.1)
    m.train()
    hist = train(m, 40, lr=3e-3)
    first, last = hist[:5], hist[-5:]

    def mean(rows, *keys):
        return float(np.mean([sum(h[k] for k in keys) for h in rows]))

    # the cooperative part L_con + L_cls falls clearly; each term falls
    assert mean(last, "loss_con", "loss_bow", "loss_pos") < 0.6 * mean(first, "loss_con", "loss_bow", "loss_pos")
    for key in ("loss_con", "loss_bow", "loss_pos"):
        assert mean(last, key) < 0.9 * mean(first, key), key
    o = hist[-1]
    assert o["objective"] == pytest.approx(o["loss_con"] + o["loss_bow"] + o["loss_pos"] - 0.1 * o["loss_adv"], rel=1e-5)


def test_grl_discriminators_minimise_encoder_maximises(tok, corpus):
    """One backward of the returned loss: a small step along it lowers L_adv for the discriminators
    and raises it for the encoder (only L_adv is on: contrastive and auxiliary weights 0)."""
    m = make(tok, corpus, adversary="grl", adv_lambda=1.0, con_weight=0.0, bow_weight=0.0, pos_weight=0.0)
    m.eval()  # no dropout: the same batch gives the same numbers
    base = m(BATCH)
    base["loss"].backward()
    d_ids = {id(q) for q in m.discriminators.parameters()}
    snapshot = copy.deepcopy(m.state_dict())
    for group, sign in (("discriminators", -1), ("encoder", +1)):
        m.load_state_dict(snapshot)
        with torch.no_grad():
            for q in (m.discriminators.parameters() if group == "discriminators" else m.encoder.parameters()):
                q -= 1e-2 * q.grad
            after = m(BATCH)["loss_adv"]
        assert sign * (after - base["loss_adv"]) > 0, group
    assert d_ids  # the discriminators exist under grl


def test_alternating_updates_and_resume(tok, corpus):
    m = make(tok, corpus, adversary="alternating", disc_lr=1e-2)
    d_ids = {id(p) for p in m.discriminators.parameters()}
    assert not d_ids & {id(p) for p in m.trainable_parameters()}
    m.train()
    before = copy.deepcopy(m.discriminators.state_dict())
    hist = train(m, 2)
    assert int(m.disc_adam.step_count) == 2 and m.last_disc_loss is not None
    assert any(not torch.equal(before[k], v) for k, v in m.discriminators.state_dict().items())
    assert hist[-1]["loss"] == pytest.approx(
        hist[-1]["loss_con"] + hist[-1]["loss_bow"] + hist[-1]["loss_pos"] - hist[-1]["loss_adv"], rel=1e-5)

    # Resume: a fresh method loaded from the state_dict continues the discriminators' AdamW exactly.
    state = copy.deepcopy(m.state_dict())
    assert any(k.startswith("disc_adam.exp_avg") for k in state)
    r = make(tok, corpus, adversary="alternating", disc_lr=1e-2, seed=123)
    r.load_state_dict(state)
    r.train()
    for method in (m, r):
        method.zero_grad(set_to_none=True)
        torch.manual_seed(7)
        method(BATCH)["loss"].backward()  # encoder grads unused here; D step only
        method.after_optimizer_step()
    for (k, a), b in zip(m.discriminators.state_dict().items(), r.discriminators.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)
    assert int(r.disc_adam.step_count) == 3


def test_alternating_discriminators_learn(tok, corpus):
    """With the encoder frozen (lambda 0 and no encoder step), the discriminators' own AdamW lowers L_adv."""
    m = make(tok, corpus, adversary="alternating", adv_lambda=0.0, disc_lr=1e-2)
    m.train()
    losses = []
    for _ in range(30):
        torch.manual_seed(0)
        m(BATCH)
        m.after_optimizer_step()
        losses.append(m.last_disc_loss)
    assert losses[-1] < 0.8 * losses[0]


def test_no_aux_no_adversary_is_simcse(tok, tmp_path):
    from sentlab.methods.simcse import SimCSE

    # No auxiliary tasks and no adversary: no vocabulary is needed (the corpus path is not read).
    m = make(tok, str(tmp_path / "absent.parquet"), aux_tasks=False, adversary="none")
    s = SimCSE(tiny_encoder(tok), tok, SimCSE.Params(), TRAIN_CFG, seed=0)
    torch.testing.assert_close(m.mlp.state_dict(), s.mlp.state_dict(), rtol=0, atol=0)  # same init as simcse
    m.train(), s.train()
    torch.manual_seed(3)
    a = m(BATCH)
    torch.manual_seed(3)
    b = s(BATCH)
    assert set(a) == {"loss", "loss_con", "objective"}
    torch.testing.assert_close(a["loss"], b["loss"], rtol=0, atol=0)

    # ... and with auxiliary weights 0 and no adversary the loss is SimCSE's as well.
    corpus = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": list(range(len(SENTS))), "text": [x for x, _ in SENTS]}), corpus)
    z = make(tok, str(corpus), bow_weight=0.0, pos_weight=0.0, adversary="none")
    z.train()
    torch.manual_seed(3)
    c = z(BATCH)
    torch.testing.assert_close(c["loss"], b["loss"], rtol=0, atol=0)
    assert c["loss_bow"] > 0  # the classifiers still run (and log) with weight 0


def test_deterministic_with_seed(tok, corpus):
    runs = []
    for _ in range(2):
        m = make(tok, corpus, seed=5)
        m.train()
        runs.append(train(m, 3, seed=11))
    assert runs[0] == runs[1]
    a, b = make(tok, corpus, seed=5), make(tok, corpus, seed=6)
    assert not torch.equal(a.classifiers["bow"].weight, b.classifiers["bow"].weight)


# --- through the method-agnostic loop ---------------------------------------------------------
def _root_with_data(root, n_copies=4):
    rows = [(i, f"{s} number {i}", tags + ["NN", "CD"]) for i, (s, tags) in enumerate(SENTS * n_copies)]
    (root / "data" / "corpus").mkdir(parents=True)
    (root / "data" / "annotations" / "train").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "text": [r[1] for r in rows]}),
                   root / "data" / "corpus" / "train.parquet")
    pq.write_table(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "text": [r[1] for r in rows],
                             "pos": [r[2] for r in rows]}),
                   root / "data" / "annotations" / "train" / "part-00000.parquet")


@pytest.mark.slow
def test_train_loop_export_and_resume_alternating(tok, tmp_path):
    """train_method: sentlab.json records the channels; an interrupted alternating run resumes to the same weights."""
    import json

    from safetensors.torch import load_file

    from sentlab.config import Params
    from sentlab.train.run import train_method

    params = Params(train=TrainParams(batch_size=8, max_steps=4, eval_every=2, lr=1e-3))

    def dev_eval(enc):
        e = enc.encode(["a cat", "a dog"])
        return {"stsb_dev": float(np.abs(e).sum()), "alignment": 0.0, "uniformity": 0.0}

    class Stop(Exception):
        pass

    def stop_at_3(step, record):
        if step == 3:
            raise Stop

    def run(root, callbacks=()):
        return train_method(params, "posbow_adv", root=root, dev_eval=dev_eval, tracking=False, callbacks=callbacks,
                            encoder_factory=lambda: (tiny_encoder(tok), tok), progress=False,
                            overrides={"bow_vocab_from": str(root / "data" / "corpus" / "train.parquet"),
                                       "bow_vocab_size": 30, "adversary": "alternating"})

    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        _root_with_data(root)
    final = run(a)
    with pytest.raises(Stop):
        run(b, [stop_at_3])  # the checkpoint of step 2 stays
    resumed = run(b)
    assert resumed["resumed_from_step"] == 2
    info = json.loads((a / "models" / "posbow_adv" / "sentlab.json").read_text())
    assert info["channels"] == {"bow": [0, 27], "pos": [27, 32]} and info["status"] == "trained"
    assert final["best_step"] == resumed["best_step"]
    wa = load_file(next((a / "models" / "posbow_adv").glob("*.safetensors")))
    wb = load_file(next((b / "models" / "posbow_adv").glob("*.safetensors")))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_bow_prior_bias_and_head_lr(tok, corpus):
    m = make(tok, corpus, adversary="grl", head_lr=1e-2)
    vocab, freq = build_bow_vocab(tok, [s for s, _ in SENTS], 20, 32, show_progress=False, return_frequencies=True)
    assert freq[0] == pytest.approx(3 / 8)  # "the": 3 of the 8 sentences
    for heads in (m.classifiers, m.discriminators):
        torch.testing.assert_close(heads["bow"].bias, torch.logit(torch.tensor(freq, dtype=torch.float32)))
    assert not torch.equal(make(tok, corpus, bow_prior_bias=False).classifiers["bow"].bias, m.classifiers["bow"].bias)

    # head_lr: the heads leave the loop's optimiser and step on the method's own AdamW (state in buffers).
    heads = {id(q) for q in list(m.classifiers.parameters()) + list(m.discriminators.parameters())}
    loop_params = {id(q) for q in m.trainable_parameters()}
    assert not heads & loop_params and {id(q) for q in m.encoder.parameters()} <= loop_params
    m.train()
    before = copy.deepcopy(m.classifiers.state_dict())
    train(m, 2)
    assert int(m.head_adam.step_count) == 2
    assert any(not torch.equal(before[k], v) for k, v in m.classifiers.state_dict().items())
    assert all(q.grad is None for q in m.classifiers.parameters())
