"""ESimCSE: sub-word repetition, InfoNCE with the momentum queue's negatives, the momentum update, resume."""

import math
import random

import pytest
import torch

from sentlab.config import TrainParams
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from functools import partial

from _support.methods import tiny_method
from tiny import sentences, tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")


build = partial(tiny_method, "esimcse")


def cos(a, b):
    return float(a @ b / (a.norm() * b.norm()))


# --- word repetition -----------------------------------------------------------------------------------
def test_repetition_duplicates_exactly_the_chosen_sub_words(tok):
    m = build(tok)
    enc = tok(["red cat saw a green dog near the blue house"], return_special_tokens_mask=True)
    ids, special = enc["input_ids"][0], enc["special_tokens_mask"][0]
    assert len(ids) == 12                                     # [CLS] + 10 words + [SEP]
    positions = m._dup_positions(special, random.Random(0))
    assert positions == [1, 5, 7]         # pinned: seed 0 draws 3, the most max(2, int(.32·12)) allows
    row = {"input_ids": ids, "token_type_ids": [0] * 12, "attention_mask": [1] * 12}
    out = m._repeat(row, positions)
    expected = []
    for i, t in enumerate(ids):
        expected += [t, t] if i in positions else [t]
    assert out["input_ids"] == expected
    assert len(out["input_ids"]) == len(ids) + len(positions)
    assert out["attention_mask"] == [1] * 15 and out["token_type_ids"] == [0] * 15
    assert tok.convert_ids_to_tokens(out["input_ids"]) == [
        "[CLS]", "red", "red", "cat", "saw", "a", "green", "green", "dog", "near", "near", "the", "blue", "house",
        "[SEP]"]


@pytest.mark.parametrize("rule, counts", [("paper", {0, 1, 2, 3}), ("code", {0, 1, 2})])
def test_repetition_counts_follow_the_rule(tok, rule, counts):
    """N = 12 sub-words, dup_rate 0.32: the paper's uniform [0, max(2, int(3.84))] = [0, 3]; the code's
    randrange(min(10, 3)) = [0, 2]. Never [CLS]/[SEP]; a 1-word sentence repeats at most its word."""
    m = build(tok, dup_len_rule=rule)
    special = [1] + [0] * 10 + [1]
    rng = random.Random(0)
    draws = [m._dup_positions(special, rng) for _ in range(4000)]
    assert {len(d) for d in draws} == counts
    for n in counts:  # uniform: each count within 4 % of its share
        assert abs(sum(len(d) == n for d in draws) / 4000 - 1 / len(counts)) < 0.04
    assert all(0 not in d and 11 not in d and d == sorted(set(d)) for d in draws)
    one_word = {len(m._dup_positions([1, 0, 1], rng)) for _ in range(200)}
    assert one_word == ({0, 1} if rule == "paper" else {0})   # code: int(.32·3) = 0, nothing repeated


def test_code_rule_draws_the_released_positions_from_the_same_random_state(tok):
    """The release (ESimCSE/train.py, dup_type bpe): ``add_len = randrange(min(10, int(dup_rate·N)))`` when
    ``int(dup_rate·N) > 0``, then ``sorted(sample(range(1, N−1), add_len))``; the code rule draws the same."""
    m = build(tok, dup_len_rule="code", max_length=64)
    for n in (3, 4, 7, 12, 31, 40):
        for seed in range(20):
            ours = m._dup_positions([1] + [0] * (n - 2) + [1], random.Random(seed))
            r = random.Random(seed)
            theirs = sorted(r.sample(range(1, n - 1), r.randrange(min(10, int(0.32 * n))))) if int(0.32 * n) else []
            assert ours == theirs, (n, seed)


def test_prepare_builds_the_repeated_views_from_the_batch_rng(tok):
    m = build(tok)
    b = Batch(sentences(8), draw=5, seed=7)
    views = m.prepare(Batch(b.sentences, draw=5, seed=7)).features["views"]
    assert views["input_ids"].shape[0] == 16
    rng = b.rng("repetition")
    enc = tok(b.sentences, truncation=True, max_length=16, return_special_tokens_mask=True)
    grew = 0
    for i, (ids, special) in enumerate(zip(enc["input_ids"], enc["special_tokens_mask"])):
        pos = m._dup_positions(special, rng)
        rep = m._repeat({"input_ids": ids}, pos)["input_ids"]
        n0, n1 = int(views["attention_mask"][i].sum()), int(views["attention_mask"][8 + i].sum())
        assert views["input_ids"][i, :n0].tolist() == ids                 # the sentence as it is
        assert views["input_ids"][8 + i, :n1].tolist() == rep             # its repetition
        assert n1 == n0 + len(pos)
        grew += len(pos)
    assert grew > 0
    again = m.prepare(Batch(b.sentences, draw=5, seed=7)).features["views"]["input_ids"]
    assert torch.equal(again, views["input_ids"])                         # a function of (seed, draw)
    other = m.prepare(Batch(b.sentences, draw=6, seed=7)).features["views"]["input_ids"]
    assert not torch.equal(other, views["input_ids"])


def test_repetition_never_exceeds_the_position_table(tok):
    m = build(tok)
    m._max_positions = 13
    special = [1] + [0] * 10 + [1]
    assert max(len(m._dup_positions(special, random.Random(s))) for s in range(300)) == 1


# --- the loss and the queue ---------------------------------------------------------------------------
def test_loss_is_info_nce_over_in_batch_positives_and_queued_negatives_by_hand(tok):
    m = build(tok, batch_size=4, queue_size=12).eval()       # eval: no dropout, so the views are reproducible
    torch.manual_seed(1)
    old = torch.randn(5, 32)
    m.queue[:5] = old
    m.queue_len.fill_(5)
    m._filled = None
    batch = Batch(sentences(4, seed=3))
    views = m.prepare(Batch(batch.sentences)).features["views"]
    with torch.no_grad():
        z, z_pos = m._views(views)
        keys = m._key(m._sentences(views))
        out = m(batch)
    total = 0.0
    for i in range(4):
        logits = [cos(z[i], z_pos[j]) / 0.05 for j in range(4)] + [cos(z[i], old[q]) / 0.05 for q in range(5)]
        total += -logits[i] + math.log(sum(math.exp(x) for x in logits))
    assert out["loss"].item() == pytest.approx(total / 4, abs=1e-4)
    assert out["candidates"] == 9.0
    # the batch's momentum keys (of the sentences, not their repetitions) now lead the queue
    assert int(m.queue_len) == 9
    assert torch.allclose(m.queue[:4], keys, atol=1e-6) and torch.equal(m.queue[4:9], old)


def _rows(t: torch.Tensor) -> list[tuple[float, ...]]:
    """A queue as a sorted list of its rows: the set of keys, whatever their order."""
    return sorted(tuple(r) for r in t.tolist())


@pytest.mark.parametrize("batch, queue", [(8, 20), (4, 10), (4, 6)])
def test_queue_keeps_the_newest_keys_as_the_release_does(tok, batch, queue):
    """A queue that is not a whole number of batches (run.sh: 160 at batch 64) keeps, at every step, the set the
    release keeps: ``torch.cat((pre_z1, eval_z))[-neg_size:]`` (caskcsg/sentemb ESimCSE/esimcse/trainers.py:636),
    i.e. the newest ``queue`` keys in the order they were made — written here by hand from every batch's keys
    (issue #66: sentlab kept the oldest batch's first rows instead of its last). A queue smaller than the batch
    differs at step 1 only: the release stores the whole first batch (``pre_z1 = eval_z.clone()``) and cuts from
    step 2; sentlab keeps ``queue_size`` from the start (docs/methods.md#esimcse)."""
    m = build(tok, batch_size=batch, queue_size=queue)
    assert m.queue.shape == (queue, 32)                      # queued keys only: the batch is not counted in
    made, release = [], None                                 # every key in the order made; the release's pre_z1
    key = m._key

    def spy(enc):
        k = key(enc)
        made.append(k.clone())
        return k

    m._key = spy
    for t in range(5):
        out = m(Batch(sentences(batch, seed=t), draw=t))
        assert out["candidates"] == batch + min(queue, batch * t)
        release = made[-1] if release is None else torch.cat((release, made[-1]), 0)[-queue:]
        newest = torch.cat(made)[-queue:]                    # the newest `queue` keys, oldest first
        assert torch.equal(newest, release)
        assert int(m.queue_len) == min(queue, batch * (t + 1))
        assert _rows(m.queue[: int(m.queue_len)]) == _rows(newest), t
    assert torch.equal(m.queue[:batch], made[-1])            # the newest batch leads, in its row order
    resumed = build(tok, batch_size=batch, queue_size=queue)  # a resume: the queue's batches read back from its keys
    resumed.load_state_dict(m.state_dict())
    nxt = Batch(sentences(batch, seed=9), draw=9)
    m(nxt), resumed(nxt)
    assert torch.equal(resumed.queue, m.queue) and _rows(m.queue) == _rows(torch.cat(made)[-queue:])


def test_keys_come_from_the_dropout_off_momentum_encoder_and_the_online_mlp(tok):
    m = build(tok)
    assert not hasattr(m, "key_mlp") and m.training
    enc = m.tokenize(sentences(4))
    k1, k2 = m._key(enc), m._key(enc)
    assert torch.equal(k1, k2) and m.key_encoder.training    # dropout off for the pass, the mode kept
    with torch.no_grad():
        m.key_encoder.eval()
        ref = m.mlp(m.key_encoder(**enc).last_hidden_state[:, 0])
    assert torch.allclose(k1, ref, atol=1e-6)
    assert build(tok, key_dropout=True)._key(enc).shape == (4, 32)


@pytest.mark.parametrize("key_mlp", ["online", "momentum"])
def test_momentum_update_is_exact(tok, key_mlp):
    m = build(tok, key_mlp=key_mlp)
    with torch.no_grad():
        for p in m.encoder.parameters():
            p.add_(torch.randn_like(p))
        for p in m.mlp.parameters():
            p.add_(1.0)
    before = [p.detach().clone().double() for p in m.key_encoder.parameters()]
    mlp_before = [p.detach().clone().double() for p in m.key_mlp.parameters()] if key_mlp == "momentum" else []
    m.after_optimizer_step()
    for p_k, b, p_q in zip(m.key_encoder.parameters(), before, m.encoder.parameters()):
        assert torch.allclose(p_k.double(), 0.995 * b + 0.005 * p_q.double(), rtol=0, atol=1e-6)
    assert {id(p) for p in m.trainable_parameters()}.isdisjoint({id(p) for p in m.key_encoder.parameters()})
    if key_mlp == "momentum":
        for p_k, b, p_q in zip(m.key_mlp.parameters(), mlp_before, m.mlp.parameters()):
            assert torch.allclose(p_k.double(), 0.995 * b + 0.005 * p_q.double(), rtol=0, atol=1e-6)


def test_momentum_init_copy_starts_the_key_encoder_as_the_encoder(tok):
    m = build(tok)
    assert m.params.momentum_init == "copy" and m.init_sources()["key_encoder"] == "copy of encoder"
    for p_k, p_q in zip(m.key_encoder.parameters(), m.encoder.parameters()):
        assert torch.equal(p_k, p_q)


def test_momentum_init_random_is_the_released_runs_fresh_bert_after_one_update(tok):
    """The release's momentum_model is a fresh BertModel (BERT's init: Linear/Embedding N(0, initializer_range),
    biases 0, LayerNorm 1/0) that its first forward updates once, θm ← λθm + (1−λ)θe, before the first keys. So
    (θm − (1−λ)θe)/λ must be BERT's init: here initializer_range 0.2 (tiny_bert)."""
    m = build(tok, momentum_init="random")
    assert m.init_sources()["key_encoder"].startswith("random")
    lam = 0.995
    fresh = {n: ((p_k.double() - (1 - lam) * p_q.detach().double()) / lam)
             for (n, p_k), p_q in zip(m.key_encoder.named_parameters(), m.encoder.parameters())}
    weights = torch.cat([v.flatten() for n, v in fresh.items() if n.endswith("weight") and "LayerNorm" not in n])
    assert abs(float(weights.std()) - 0.2) < 0.01 and abs(float(weights.mean())) < 0.01
    for n, v in fresh.items():
        if n.endswith("bias"):
            assert torch.allclose(v, torch.zeros_like(v), atol=1e-6), n
        elif "LayerNorm" in n:
            assert torch.allclose(v, torch.ones_like(v), atol=1e-6), n
    # drawn from the method's seed: the same seed, the same encoder; another seed, another one
    again = build(tok, momentum_init="random")
    assert all(torch.equal(a, b) for a, b in zip(m.key_encoder.parameters(), again.key_encoder.parameters()))
    cls = get_method("esimcse")
    torch.manual_seed(0)
    other = cls(tiny_bert(tok, 0, initializer_range=0.2), tok, cls.Params(momentum_init="random").resolved(
        TrainParams(batch_size=8, max_length=16, lr=1e-3)), seed=1)
    assert not torch.equal(other.key_encoder.embeddings.word_embeddings.weight,
                           m.key_encoder.embeddings.word_embeddings.weight)
    # its keys are not the encoder's: a different encoder encodes them
    enc = m.tokenize(sentences(4))
    with torch.no_grad():
        m.encoder.eval()
        online = m.mlp(m.encoder(**enc).last_hidden_state[:, 0])
        m.encoder.train()
    assert not torch.allclose(m._key(enc), online, atol=1e-3)


def test_paper_profile_starts_the_momentum_encoder_as_the_released_run(tok):
    from pathlib import Path

    from sentlab.config.profile_files import profile_values

    profiles = Path(__file__).resolve().parents[1] / "profiles"
    paper = profile_values("paper", profiles)["methods"]["esimcse"]
    assert paper["momentum_init"] == "random" and paper["dup_len_rule"] == "code"
    assert profile_values("quick", profiles)["methods"]["esimcse"].get("momentum_init", "copy") == "copy"


# --- training, resume, params ---------------------------------------------------------------------------
def train(m, steps, start=0, opt=None):
    opt = opt or m.configure_optimizers()
    losses = []
    for t in range(start, start + steps):
        out = m(Batch(sentences(8, seed=t % 2), draw=t, seed=0))
        out["loss"].backward()
        opt.step()
        opt.zero_grad()
        m.after_optimizer_step()
        losses.append(out["loss"].item())
    return losses, opt


def test_trains_on_the_tiny_model_and_the_loss_moves(tok):
    losses, _ = train(build(tok, queue_size=16), 12)
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3, losses


def test_resume_carries_the_queue_and_the_momentum_encoder(tok, tmp_path):
    from sentlab.train.checkpoint import load_resume, save_resume

    def scheduler(opt):
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)

    m = build(tok, queue_size=16)
    _, opt = train(m, 3)
    sched = scheduler(opt)
    save_resume(tmp_path / "last", m, opt, sched, {"step": 3})
    expected, _ = train(m, 2, start=3, opt=opt)

    m2 = build(tok, queue_size=16)
    opt2 = m2.configure_optimizers()
    assert load_resume(tmp_path / "last", m2, opt2, scheduler(opt2))["step"] == 3
    assert int(m2.queue_len) == 16 and torch.count_nonzero(m2.queue) > 0
    got, _ = train(m2, 2, start=3, opt=opt2)
    assert got == expected                                   # the same queue, key encoder and RNG: the same steps
    assert torch.equal(m2.queue, m.queue)


def test_params_caps_and_errors(tok):
    from pydantic import ValidationError

    P = get_method("esimcse").Params
    p = P()
    assert (p.momentum, p.queue_size, p.dup_rate, p.temperature, p.key_dropout) == (0.995, 160, 0.32, 0.05, False)
    assert P().slice_caps(steps=3, batch_size=8, sentences=600) == {"max_steps": 3, "eval_every": 3,
                                                                     "queue_size": 16}
    assert "queue_size" not in P().slice_caps(steps=3, batch_size=0, sentences=600)
    for bad in ({"dup_rate": 1.5}, {"queue_size": -1}, {"dup_len_rule": "words"}, {"key_mlp": "none"},
                {"momentum_init": "pretrained"}, {"momentum_update": "before"}, {"queue_reset": "step"}):
        with pytest.raises(ValidationError):
            P(**bad)
    m = build(tok, queue_size=0)
    assert m(Batch(sentences(8)))["candidates"] == 8.0       # no queue: repetition SimCSE
    assert m.export_info() == {"method": "esimcse", "pooling": "cls", "dup_rate": 0.32, "dup_len_rule": "paper",
                               "queue_size": 0, "momentum": 0.995, "momentum_init": "copy",
                               "momentum_update": "optimizer_step", "queue_reset": "never"}


# --- the release's momentum timing and its per-epoch queue (issue #66) -------------------------------------
def test_momentum_update_forward_moves_once_per_micro_batch_as_the_release(tok):
    """``momentum_update: forward`` (the release's cl_forward): every training forward moves θm before its keys,
    so two micro-batches of one optimiser step give θm ← λ²θm + (1 − λ²)θe; the step itself moves nothing."""
    m = build(tok, momentum_update="forward")
    with torch.no_grad():
        for p in m.encoder.parameters():
            p.add_(torch.randn_like(p))
    before = [p.detach().clone().double() for p in m.key_encoder.parameters()]
    m.train()
    for t in range(2):
        m(Batch(sentences(8, seed=t), draw=t))
    m.after_optimizer_step()
    lam2 = 0.995 ** 2
    for p_k, b, p_q in zip(m.key_encoder.parameters(), before, m.encoder.parameters()):
        assert torch.allclose(p_k.double(), lam2 * b + (1 - lam2) * p_q.double(), rtol=0, atol=1e-6)
    with torch.no_grad():                                    # an eval-mode forward (no training) moves nothing
        m.eval()(Batch(sentences(8, seed=5), draw=5))
    assert all(torch.allclose(p.double(), lam2 * b + (1 - lam2) * q.double(), rtol=0, atol=1e-6)
               for p, b, q in zip(m.key_encoder.parameters(), before, m.encoder.parameters()))


@pytest.mark.parametrize("init", ["random", "copy"])
def test_both_momentum_timings_give_the_same_steps_at_one_micro_batch(tok, init):
    """At grad_accum 1 the release's timing (before the keys) and MoCo's (after the step; ``random`` then applies
    the first update at construction) encode every key with the same θm: the same losses and queues."""
    runs = []
    for when in ("optimizer_step", "forward"):
        torch.manual_seed(0)
        m = build(tok, momentum_init=init, momentum_update=when, queue_size=12).train()
        for mod in m.modules():                              # dropout off, training mode
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        losses, _ = train(m, 3)
        runs.append((losses, m.queue.clone(), [p.clone() for p in m.key_encoder.parameters()]))
    (l1, q1, k1), (l2, q2, k2) = runs
    assert l1 == pytest.approx(l2, rel=1e-6) and torch.allclose(q1, q2, atol=1e-6)
    # the key encoders differ by exactly the update the forward timing has not yet applied
    assert not all(torch.equal(a, b) for a, b in zip(k1, k2))


def test_queue_reset_epoch_empties_the_queue_at_a_new_pass(tok):
    """``queue_reset: epoch`` (the release's ``self.pre_z1 = None`` at each epoch): the first micro-batch of a
    new pass sees only its own batch; ``never`` keeps the keys; a resume keeps the pass the keys came from."""
    for reset, expected in (("epoch", [8.0, 16.0, 8.0, 16.0]), ("never", [8.0, 16.0, 24.0, 24.0])):
        m = build(tok, queue_size=16, queue_reset=reset).train()
        got = []
        for t, epoch in enumerate([0, 0, 1, 1]):
            got.append(m(Batch(sentences(8, seed=t), draw=t, epoch=epoch))["candidates"])
            if reset == "epoch" and t == 2:
                resumed = build(tok, queue_size=16, queue_reset=reset).train()
                resumed.load_state_dict(m.state_dict())
                assert int(resumed.queue_epoch) == 1
                assert resumed(Batch(sentences(8, seed=3), draw=3, epoch=1))["candidates"] == 16.0
        assert got == expected, reset


def test_micro_batches_know_their_pass():
    from sentlab.train.batches import MicroBatches

    mb = MicroBatches(n=24, batch_size=4, grad_accum=2, steps_per_epoch=3, seed=0, rank=0, world=1)
    assert [mb.epoch(t) for t in range(14)] == [0] * 6 + [1] * 6 + [2] * 2


@pytest.mark.parametrize("method_id", ["esimcse", "ptbert", "moco"])
def test_optimizer_adamw_transformers_takes_the_releases_first_step(tok, method_id):
    """``optimizer: adamw_transformers``: the HF Trainer's AdamW of the releases (transformers 4.2), whose first
    step is lr · √(1−β₂)/(1−β₁) · m / (√v + ε) with m = (1−β₁)g, v = (1−β₂)g² — ε added before the bias correction,
    unlike torch's AdamW (written out here by hand; a gradient near ε shows the difference)."""
    extra = {"pseudo_len": 4} if method_id == "ptbert" else {}
    m = tiny_method(method_id, tok, optimizer="adamw_transformers", lr=1e-3, queue_size=16, **extra)
    opt = m.configure_optimizers()
    p = next(iter(m.trainable_parameters()))
    g = torch.full_like(p, 3e-8)
    g.view(-1)[0] = 0.5
    before = p.detach().clone().double()
    for q in m.trainable_parameters():
        q.grad = torch.zeros_like(q)
    p.grad = g.clone()
    opt.step()
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3
    gd = g.double()
    want = before - lr * math.sqrt(1 - b2) / (1 - b1) * ((1 - b1) * gd) / (((1 - b2) * gd * gd).sqrt() + eps)
    assert torch.allclose(p.detach().double(), want, rtol=0, atol=1e-7)   # fp32 weights
    torch_step = lr * float(g.view(-1)[1]) / (abs(float(g.view(-1)[1])) + eps)   # torch's AdamW: ≈ lr·sign(g)
    assert abs(float(before.view(-1)[1] - p.detach().double().view(-1)[1]) - torch_step) > 1e-4
    assert type(tiny_method(method_id, tok, queue_size=16, **extra).configure_optimizers()) is torch.optim.AdamW
