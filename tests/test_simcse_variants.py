"""SimCSE + crop / + word deletion (PT-BERT Table 4) and SimCSE + MLM (PaSeR Table 1), issue #40, on a tiny BERT."""

import pickle
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sentlab.methods.blocks import method_params
from sentlab.augment import crop, delete, make_augmenter
from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.methods.base import Batch
from _support.methods import tiny_method
from tiny import WORDS, sentences

pytestmark = pytest.mark.usefixtures("one_thread")
SENT20 = " ".join(WORDS[:20])


def build(method_id, tok, model=None, **params):
    return tiny_method(method_id, tok, model=model, **params)


# --- the augmentations -----------------------------------------------------------------------------------------
def test_crop_keeps_a_contiguous_90_percent_run_of_the_words():
    words = SENT20.split()
    starts = set()
    for seed in range(200):
        out = crop(SENT20, random.Random(seed), 0.1).split()
        assert len(out) == 18
        start = words.index(out[0])
        assert out == words[start:start + 18]     # contiguous, in order
        starts.add(start)
    assert starts == {0, 1, 2}                    # every start of an 18-word run is drawn
    assert crop("one two three four five", random.Random(0), 0.1).count(" ") == 3   # max(1, round(0.5)) cut
    assert crop("alone", random.Random(0), 0.1) == "alone" and crop("", random.Random(0), 0.1) == ""
    assert crop(SENT20, random.Random(0), 0.0) == SENT20


def test_deletion_removes_exactly_the_specified_words():
    words = SENT20.split()
    for seed in range(50):
        for kw, gone in (({"rate": 0.1}, 2), ({"rate": 0.3}, 6), ({"count": 1}, 1), ({"count": 3}, 3)):
            out = delete(SENT20, random.Random(seed), **kw).split()
            assert len(out) == 20 - gone
            it = iter(words)
            assert all(w in it for w in out)       # a subsequence: the others in their order, nothing added
    assert delete("alone", random.Random(0), count=1) == "alone"       # a word is always kept
    assert delete("a b", random.Random(0), count=5).count(" ") == 0
    assert make_augmenter("deletion", 0.1, 1)(SENT20, random.Random(0)).count(" ") == 18
    with pytest.raises(ValueError, match="unknown augmentation"):
        make_augmenter("cropping")


# --- SimCSE + crop / deletion ----------------------------------------------------------------------------------
@pytest.mark.parametrize("method_id,aug", [("simcse_crop", crop), ("simcse_deletion", delete)])
def test_second_view_is_the_augmented_sentence_drawn_from_batch_rng(tok, method_id, aug):
    m = build(method_id, tok, max_length=64)
    sents = sentences(6, seed=3)
    batch = Batch(sents, draw=7, seed=11)
    ids = m.prepare(batch).features["pair"]["input_ids"]
    assert ids.shape[0] == 12
    rng = random.Random(f"11:7:{m.augmentation}")
    want = [aug(s, rng, 0.1) for s in sents]
    got = [tok.decode(r, skip_special_tokens=True) for r in ids]
    assert got[:6] == [s.lower() for s in sents] and got[6:] == want
    assert all(len(w.split()) < len(s.split()) for w, s in zip(want, sents))
    again = m.prepare(Batch(sents, draw=7, seed=11)).features["pair"]["input_ids"]
    other = m.prepare(Batch(sents, draw=8, seed=11)).features["pair"]["input_ids"]
    assert torch.equal(ids, again) and not torch.equal(ids, other)
    clone = pickle.loads(pickle.dumps(m))            # prepare runs in DataLoader workers (spawn pickles it)
    assert torch.equal(clone.prepare(Batch(sents, draw=7, seed=11)).features["pair"]["input_ids"], ids)


def test_both_views_augmented_and_one_word_deletion(tok):
    sents = sentences(4, seed=5)
    m = build("simcse_deletion", tok, augment_views="both", words=1, max_length=64)
    ids = m.prepare(Batch(sents, draw=1, seed=0)).features["pair"]["input_ids"]
    lengths = [len(tok.decode(r, skip_special_tokens=True).split()) for r in ids]
    assert lengths == [len(s.split()) - 1 for s in sents] * 2
    assert m.export_info() == {"method": "simcse_deletion", "pooling": "cls", "augmentation": "deletion",
                               "augmentation_rate": 0.1, "augment_views": "both", "augmentation_words": 1}


def test_crop_loss_is_infonce_of_the_sentence_and_its_crop(tok):
    m = build("simcse_crop", tok, max_length=64).eval()
    sents = sentences(6, seed=2)
    batch = Batch(sents, draw=3, seed=0)
    loss = m(batch)["loss"]
    rng = random.Random("0:3:crop")
    crops = [crop(s, rng, 0.1) for s in sents]

    def z(texts):  # each view tokenised and encoded on its own (its own padding)
        enc = tok(texts, padding=True, return_tensors="pt")
        return m.mlp(m.encoder(**enc).last_hidden_state[:, 0])

    with torch.no_grad():
        z1, z2 = F.normalize(z(sents), dim=-1), F.normalize(z(crops), dim=-1)
    logits = z1 @ z2.T / 0.05
    want = float(np.mean([-torch.log_softmax(logits[i], 0)[i].item() for i in range(6)]))
    assert loss.item() == pytest.approx(want, abs=1e-5)


# --- SimCSE + MLM ----------------------------------------------------------------------------------------------
def test_mlm_corruption_is_per_copy_and_avoids_special_and_padding_tokens(tok):
    m = build("simcse_mlm", tok, lm_head="fresh", max_length=64)
    sents = sentences(32, seed=4)
    f = m.prepare(Batch(sents, draw=2, seed=9)).features
    enc, mlm = f["enc"], f["mlm"]
    n, length = enc["input_ids"].shape
    ids2 = torch.cat([enc["input_ids"]] * 2)
    att2 = torch.cat([enc["attention_mask"]] * 2)
    assert mlm["input_ids"].shape == (2 * n, length) and torch.equal(mlm["attention_mask"], att2)
    targets = torch.zeros(2 * n * length, dtype=torch.bool)
    targets[f["mlm_index"]] = True
    targets = targets.view(2 * n, length)
    special = (ids2 == tok.cls_token_id) | (ids2 == tok.sep_token_id) | (att2 == 0)
    assert not targets[special].any()
    assert torch.equal(f["mlm_targets"], ids2.flatten()[f["mlm_index"]])          # the original tokens
    assert torch.equal(mlm["input_ids"][~targets], ids2[~targets])                  # the rest untouched
    share = targets.sum().item() / (~special).sum().item()
    assert 0.10 < share < 0.20                                                      # 15% of ~400 tokens
    assert not torch.equal(targets[:n], targets[n:])                                # each copy its own draw
    g = m.prepare(Batch(sents, draw=2, seed=9)).features
    assert torch.equal(g["mlm_index"], f["mlm_index"]) and torch.equal(g["mlm"]["input_ids"], mlm["input_ids"])
    h = m.prepare(Batch(sents, draw=3, seed=9)).features
    assert not torch.equal(h["mlm_index"], f["mlm_index"])


@pytest.mark.parametrize("decoder", ["copy", "tied"])
def test_mlm_loss_is_infonce_plus_lambda_times_masked_cross_entropy(tok, decoder):
    m = build("simcse_mlm", tok, lm_head="fresh", decoder=decoder, max_length=64).eval()
    sents = sentences(6, seed=6)
    batch = Batch(sents, draw=0, seed=1)
    out = m(batch)
    f = m.prepare(Batch(sents, draw=0, seed=1)).features
    with torch.no_grad():
        h = m.encoder(**f["enc"]).last_hidden_state[:, 0]
        z = F.normalize(m.mlp(h), dim=-1)
        logits = z @ z.T / 0.05                     # eval: both views equal
        info = torch.nn.functional.cross_entropy(logits, torch.arange(6))
        hidden = m.encoder(**f["mlm"]).last_hidden_state
        x = m.lm_head.norm(F.gelu(m.lm_head.dense(hidden)))
        w = m.lm_decoder.weight if decoder == "copy" else m.encoder.get_input_embeddings().weight
        vocab = x @ w.T + m.lm_head.bias
        labels = torch.full(hidden.shape[:2], -100).flatten()
        labels[f["mlm_index"]] = f["mlm_targets"]
        ce = F.cross_entropy(vocab.flatten(0, 1), labels, ignore_index=-100)   # mean over the masked positions
    assert out["loss_cl"].item() == pytest.approx(info.item(), abs=1e-5)
    assert out["loss_mlm"].item() == pytest.approx(ce.item(), abs=1e-4)
    assert out["loss"].item() == pytest.approx(info.item() + 0.1 * ce.item(), abs=1e-4)
    assert (m.lm_decoder is None) == (decoder == "tied")


def test_mlm_head_is_berts_pretrained_head_and_a_checkpoint_without_one_fails(tok, tmp_path):
    from transformers import AutoModel, BertConfig, BertForPreTraining, BertModel

    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(3)
    full = BertForPreTraining(cfg)
    with torch.no_grad():
        full.cls.predictions.bias.normal_()
        full.cls.predictions.transform.LayerNorm.weight.normal_()
    full.save_pretrained(tmp_path / "with_head")                      # safetensors
    m = build("simcse_mlm", tok, AutoModel.from_pretrained(tmp_path / "with_head"))   # lm_head: pretrained (default)
    pred = full.cls.predictions
    assert torch.equal(m.lm_head.dense.weight, pred.transform.dense.weight)
    assert torch.equal(m.lm_head.norm.weight, pred.transform.LayerNorm.weight)
    assert torch.equal(m.lm_head.bias, pred.bias)
    assert torch.equal(m.lm_decoder.weight, m.encoder.get_input_embeddings().weight)
    assert m.lm_decoder.weight.data_ptr() != m.encoder.get_input_embeddings().weight.data_ptr()   # a copy (SimCSE)
    assert m.init_sources()["lm_head"] == "checkpoint" and m.export_info()["lm_head"] == "pretrained"
    BertModel(cfg, add_pooling_layer=False).save_pretrained(tmp_path / "no_head")
    with pytest.raises(SentlabError, match="simcse_mlm.lm_head = pretrained.*no MLM head"):
        build("simcse_mlm", tok, AutoModel.from_pretrained(tmp_path / "no_head"))
    assert build("simcse_mlm", tok, AutoModel.from_pretrained(tmp_path / "no_head"), lm_head="auto").lm_head_source \
        == "fresh"


def test_paper_profile_settings():
    from sentlab.config import load_params
    from sentlab.train.run import resolve_train

    p = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="paper")
    for mid in ("simcse_crop", "simcse_deletion", "simcse_mlm"):
        cfg = resolve_train(p, method_params(p, mid))
        assert (cfg.eval_every, cfg.batch_size, cfg.lr, cfg.max_length) == (250, 64, 3e-5, 32), mid
        assert mid in p.train.methods
    mp = method_params(p, "simcse_mlm")
    assert (mp.mlm_weight, mp.mlm_prob, mp.lm_head, mp.decoder, mp.temperature) == (0.1, 0.15, "pretrained", "copy",
                                                                                     0.05)
    assert (method_params(p, "simcse_crop").rate, method_params(p, "simcse_deletion").words) == (0.1, None)


# --- each learns -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method_id,params", [("simcse_crop", {}), ("simcse_deletion", {}),
                                              ("simcse_mlm", {"lm_head": "fresh"})])
def test_loss_falls(tok, method_id, params):
    m = build(method_id, tok, **params)
    opt = torch.optim.AdamW(m.trainable_parameters(), lr=3e-3)
    pool = sentences(64, seed=1)
    torch.manual_seed(0)
    losses = []
    for step in range(30):
        out = m(Batch(pool[(step % 8) * 8:(step % 8) * 8 + 8], draw=step, seed=0))
        out["loss"].backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(out["loss"].detach()))
    first, last = np.mean(losses[:6]), np.mean(losses[-6:])
    assert last < 0.85 * first, (method_id, first, last)


@pytest.mark.parametrize("method_id,block", [("simcse_crop", {}), ("simcse_mlm", {"lm_head": "fresh"})])
def test_resume_equals_uninterrupted(tmp_path, tok, method_id, block):
    """The augmentation / MLM corruption is drawn from Batch.rng in prepare: a run killed after step 3 and resumed
    ends with the uninterrupted run's weights."""
    from safetensors.torch import load_file

    from sentlab.config import Params
    from sentlab.train.run import train_method
    from _support.training import Interrupt, factory, fake_dev_eval, make_root

    p = Params(seed=3, train=TrainParams(batch_size=8, max_length=16, lr=3e-3, eval_every=2, max_steps=5,
                                         device="cpu"), methods={method_id: block})
    a, b = make_root(tmp_path / "a"), make_root(tmp_path / "b")
    run = dict(dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False, progress=False)
    train_method(p, method_id, root=a, **run)

    def kill_at_3(step, record):
        if step == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        train_method(p, method_id, root=b, callbacks=[kill_at_3], **run)
    assert train_method(p, method_id, root=b, **run)["resumed_from_step"] == 2
    wa, wb = (load_file(r / "models" / method_id / "model.safetensors") for r in (a, b))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_mlm_losses_are_fp32_under_bf16_autocast(tok):
    m = build("simcse_mlm", tok, lm_head="fresh").eval()
    batch = Batch(sentences(6, seed=8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(batch)
    assert out["loss"].dtype == out["loss_mlm"].dtype == out["loss_cl"].dtype == torch.float32
    torch.testing.assert_close(out["loss"], m(batch)["loss"], rtol=0.05, atol=0.05)
