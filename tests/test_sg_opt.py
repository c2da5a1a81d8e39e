"""SG-OPT (Kim et al. 2021, issue #40): its loss by hand, the frozen copy, a few training steps."""

import math
from pathlib import Path

import pytest
import torch

from sentlab.methods.blocks import method_params
from sentlab.errors import SentlabError
from sentlab.methods.base import Batch
from sentlab.methods.sg_opt import layer_vectors, sg_opt_loss
from functools import partial

from _support.methods import tiny_method
from tiny import sentences, tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")


build = partial(tiny_method, "sg_opt", torch_seed=None, head_dim=48)


def test_sg_opt_loss_by_hand():
    """B = 2 sentences, L = 2 layers, 2-d vectors chosen so every cosine is a round number."""
    c = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    h = torch.tensor([[[1.0, 0.0], [1.0, 1.0]],        # sentence 0: layer 0, layer 1
                      [[0.0, 3.0], [-1.0, 0.0]]])      # sentence 1
    tau = 0.5
    # cos(c_b, h_{j,l}):  c_0 = e1: h00 1, h01 1/√2, h10 0, h11 −1;  c_1 = e2: h00 0, h01 1/√2, h10 1, h11 0
    r = 1 / math.sqrt(2)
    cos = {(0, 0, 0): 1, (0, 1, 0): r, (0, 0, 1): 0, (0, 1, 1): -1,
           (1, 0, 0): 0, (1, 1, 0): r, (1, 0, 1): 1, (1, 1, 1): 0}   # (b, l, j)
    terms = []
    for b in range(2):
        negs = [cos[(b, l, j)] / tau for l in range(2) for j in range(2) if j != b]
        for layer in range(2):
            pos = cos[(b, layer, b)] / tau
            terms.append(math.log(math.exp(pos) + sum(math.exp(n) for n in negs)) - pos)
    want = sum(terms) / 4
    assert sg_opt_loss(c, h, tau).item() == pytest.approx(want, rel=1e-6)
    assert want == pytest.approx(0.6808, abs=1e-4)   # (0.1430 + 0.2437 + 0.5259 + 1.8105) / 4, by hand
    # a bf16 autocast around it changes nothing: logits and loss in fp32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert sg_opt_loss(c, h, tau).dtype == torch.float32


def test_layer_pooling_mean_and_max_ignore_padding():
    hs = (torch.tensor([[[1.0, 5.0], [3.0, -1.0], [100.0, 100.0]]]),)   # one sentence, 3 tokens, the last padding
    mask = torch.tensor([[1, 1, 0]])
    assert layer_vectors(hs, mask, "mean").tolist() == [[[2.0, 2.0]]]
    assert layer_vectors(hs, mask, "max").tolist() == [[[3.0, 5.0]]]


def test_fixed_copy_is_frozen_and_out_of_the_optimiser(tok):
    m = build(tok)
    fixed_ids = {id(p) for p in m.fixed.parameters()}
    emb_ids = {id(p) for p in m.encoder.embeddings.parameters()}
    opt_ids = {id(p) for g in m.configure_optimizers().param_groups for p in g["params"]}
    assert not fixed_ids & opt_ids and not emb_ids & opt_ids       # BERT_F and BERT_T's embeddings: not trained
    assert {id(p) for p in m.head.parameters()} <= opt_ids
    assert any(k.startswith("fixed.") for k in m.state_dict())     # BERT_F is state: checkpoints carry it
    assert m.init_sources()["fixed"] == "copy of encoder" and m.init_sources()["head"] == "random"
    assert m.configure_optimizers().param_groups[0]["betas"] == (0.9, 0.9)
    assert m.distance_to_fixed().item() == 0.0


def test_a_few_steps_move_the_loss_and_leave_the_fixed_copy(tok):
    m = build(tok, temperature=0.05)
    before = {k: v.clone() for k, v in m.fixed.state_dict().items()}
    emb_before = {k: v.clone() for k, v in m.encoder.embeddings.state_dict().items()}
    opt = m.configure_optimizers()
    pool = sentences(32, seed=3)
    batches = [Batch(pool[i: i + 8]) for i in range(0, 32, 8)]
    m.train()
    torch.manual_seed(0)
    losses, regs = [], []
    for step in range(16):
        out = m(batches[step % 4])
        out["loss"].backward()
        opt.step(); opt.zero_grad()
        losses.append(float(out["contrastive"]))
        regs.append(float(out["l2_to_fixed"]))
    assert sum(losses[-4:]) < 0.9 * sum(losses[:4]), losses
    assert regs[0] == 0.0 and regs[-1] > 0.0                    # BERT_T moved away from BERT_F ...
    for k, v in m.fixed.state_dict().items():                    # ... which did not move
        assert torch.equal(v, before[k]), k
    for k, v in m.encoder.embeddings.state_dict().items():
        assert torch.equal(v, emb_before[k]), k
    assert m.fixed.training                                       # fixed_dropout: the code's train mode, restored


def test_regulariser_is_the_squared_distance_times_lambda(tok):
    m = build(tok, reg_lambda=0.5, fixed_dropout=False).eval()
    with torch.no_grad():
        layer = m.encoder.encoder.layer[0].attention.self.query
        layer.weight.add_(0.1)                                    # 32 × 32 entries moved by 0.1
    assert m.distance_to_fixed().item() == pytest.approx(32 * 32 * 0.01, rel=1e-5)
    batch = Batch(sentences(4, seed=1))
    out = m(batch)
    assert out["loss"].item() == pytest.approx(out["contrastive"].item() + 0.5 * 10.24, rel=1e-5)


def test_uniform_sampler_draws_one_seeded_layer_per_sentence(tok):
    m = build(tok, layer_sampling="uniform", layer_min=1)
    a = m.prepare(Batch(sentences(8), seed=1, draw=3)).features["layer"]
    b = m.prepare(Batch(sentences(8), seed=1, draw=3)).features["layer"]
    assert torch.equal(a, b) and a.min() >= 1 and a.max() <= 2     # tiny BERT: 3 hidden states, layer_min 1
    out = m.eval()(Batch(sentences(8), seed=1, draw=3))
    assert torch.isfinite(out["loss"])


def test_bad_layer_range_is_one_paragraph(tok):
    with pytest.raises(SentlabError, match="layer_min"):
        build(tok, layer_min=2, layer_max=2)


def test_paper_profile_trains_sg_opt_with_the_codes_settings():
    from sentlab.config import load_params
    from sentlab.train.run import resolve_train

    p = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="paper")
    assert "sg_opt" in p.train.methods
    mp = method_params(p, "sg_opt")
    cfg = resolve_train(p, mp)
    assert (cfg.batch_size, cfg.lr, cfg.eval_every) == (16, 5e-5, 50)
    assert (mp.temperature, mp.reg_lambda, mp.head_dim) == (0.01, 0.1, 4096)


def test_sg_opt_runs_in_the_training_loop_on_the_sts_sentences(tmp_path, tok):
    """Two steps of the real loop (optimiser, clipping, dev evaluation, export) on data/corpus/sts_unlabeled.parquet;
    the exported model is BERT_T's encoder with [CLS] pooling (no head, no fixed copy)."""
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sentlab.config import Params
    from sentlab.train.run import train_method

    corpus = tmp_path / "data" / "corpus"
    corpus.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(range(32), pa.int64()), "text": sentences(32, seed=5)}),
                   corpus / "sts_unlabeled.parquet")
    s1, s2 = sentences(12, seed=11), sentences(12, seed=12)
    gold = np.linspace(0, 5, 12)

    def dev_eval(encoder):
        e1, e2 = encoder.encode(s1, batch_size=8), encoder.encode(s2, batch_size=8)
        cos = (e1 * e2).sum(1) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))
        return {"stsb_dev": float(np.corrcoef(cos, gold)[0, 1])}

    params = Params(seed=3, train={"batch_size": 8, "max_length": 16, "lr": 1e-3, "eval_every": 2, "max_steps": 2},
                    runtime={"device": "cpu"}, methods={"sg_opt": {"head_dim": 32}})
    info = train_method(params, "sg_opt", root=tmp_path, dev_eval=dev_eval, tracking=False, progress=False,
                        encoder_factory=lambda: (tiny_bert(tok, 0, initializer_range=0.2), tok))
    assert info["status"] == "trained"
    saved = json.loads((tmp_path / "models" / "sg_opt" / "sentlab.json").read_text())
    assert saved["pooling"] == "cls" and saved["init"]["fixed"] == "copy of encoder"


def test_optimiser_and_schedule_are_the_code_s_fit(tok):
    """SG-BERT's training.py → modules.SentenceTransformer.fit: transformers' AdamW (correct_bias=True, eps 1e-6,
    betas (0.9, 0.9)), groups with decay 0.01 but bias/LayerNorm (fit's weight_decay=0.01 sets the groups; the
    script's --weight_decay 0 only the optimiser default), one clip over all parameters, 10 % warm-up (ceil)."""
    from sentlab.nn.optim import AdamWLegacy

    m = build(tok)
    opt = m.configure_optimizers(weight_decay=0.0)
    assert isinstance(opt, AdamWLegacy) and m.grad_clip == "global"
    assert [(g["weight_decay"], g["eps"], g["betas"], g["correct_bias"], g["decay"]) for g in opt.param_groups] == [
        (0.01, 1e-6, (0.9, 0.9), True, "after"), (0.0, 1e-6, (0.9, 0.9), True, "after")]
    names = {id(p): n for n, p in m.named_parameters()}
    exempt = {names[id(p)] for p in opt.param_groups[1]["params"]}
    assert exempt and all(n.endswith("bias") or "LayerNorm" in n for n in exempt)
    plain = {names[id(p)] for p in opt.param_groups[0]["params"]}
    assert plain and not any(n.endswith("bias") or "LayerNorm" in n for n in plain)
    assert m.warmup_steps(863) == 87 and m.warmup_steps(10) == 1
