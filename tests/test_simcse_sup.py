"""Supervised SimCSE (methods/simcse_sup.py): the loss, the NLI corpus, the paper profile's settings (issue #34)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import torch
import torch.nn.functional as F

from sentlab.config import TrainParams, load_params
from sentlab.data.nli import write_nli
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from sentlab.methods.simcse_sup import supervised_info_nce
from sentlab.train.data import load_corpus
from sentlab.train.run import method_params, resolve_train
from tiny import tiny_bert

REPO = Path(__file__).resolve().parents[1]
TRIPLES = [("a man plays a flute", "a man plays music", "nobody plays an instrument"),
           ("two dogs run in a field", "animals are running", "the dogs are asleep"),
           ("a woman cuts an onion", "an onion is cut", "the woman cuts nothing"),
           ("kids swim in the lake", "children are in water", "the kids are dry")]
pytestmark = pytest.mark.usefixtures("one_thread")


def batch():
    a, p, n = (list(c) for c in zip(*TRIPLES))
    return Batch(a, list(range(len(a))), {"positive": p, "hard_negative": n})


def test_loss_is_simcse_sup_with_hard_negatives():
    torch.manual_seed(0)
    z1, z2, z3 = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    cos = lambda a, b: F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T  # noqa: E731
    logits = torch.cat([cos(z1, z2), cos(z1, z3)], 1) / 0.05
    want = F.cross_entropy(logits, torch.arange(4))
    assert float(supervised_info_nce(z1, z2, z3, 0.05)) == pytest.approx(float(want))
    logits[:, 4:] += torch.eye(4) * 0.5
    assert float(supervised_info_nce(z1, z2, z3, 0.05, 0.5)) == pytest.approx(
        float(F.cross_entropy(logits, torch.arange(4))))


def test_forward_is_the_loss_of_mlp_cls_of_anchor_positive_hard_negative(tok):
    cls = get_method("simcse_sup")
    m = cls(tiny_bert(tok, initializer_range=0.2), tok, cls.Params().resolved(TrainParams(max_length=16)), seed=0)
    b = batch()
    assert m.corpus_name() == "nli" and m.inference_pooling == "cls"
    m.eval()
    a, p, n = (list(c) for c in zip(*TRIPLES))
    z = [m.mlp(m.encoder(**m.encode_text(x), return_dict=True).last_hidden_state[:, 0]) for x in (a, p, n)]
    assert float(m(b)["loss"]) == pytest.approx(float(supervised_info_nce(*z, 0.05)), rel=1e-5)
    m.train()
    m(b)["loss"].backward()
    assert m.encoder.embeddings.word_embeddings.weight.grad is not None and m.mlp.dense.weight.grad is not None


def test_reads_the_nli_corpus_and_records_its_source(tmp_path):
    path = tmp_path / "nli.parquet"
    a, p, n = (list(c) for c in zip(*TRIPLES))
    write_nli(pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "text": a, "positive": p, "hard_negative": n}),
              path, "sick_standin")
    cls = get_method("simcse_sup")
    corpus = load_corpus(path, cls.corpus_columns)
    assert corpus.extras["hard_negative"] == n


def test_paper_profile_trains_it_at_simcses_supervised_settings():
    paper, quick = load_params(REPO / "params.yaml", profile="paper"), load_params(REPO / "params.yaml")
    assert "simcse_sup" in paper.train.methods and "simcse_sup" not in quick.train.methods
    cfg = resolve_train(paper, method_params(paper, "simcse_sup"))
    assert (cfg.batch_size, cfg.lr, cfg.epochs, cfg.max_length, cfg.eval_every, cfg.max_steps) == (
        512, 5e-5, 3, 32, 125, None)


def test_it_tests_with_its_mlp_as_simcse_evaluates_its_supervised_model(tok, tmp_path):
    """Issue #53 §3.4: SimCSE evaluates its supervised model with the trained MLP (run_sup_example.sh has no
    --mlp_only_train; evaluation.py --pooler cls is BERT's pooler = the MLP): the paper profile's default
    ``test_mlp`` embeds tanh(W·[CLS] + b) with the trained W, b in training's dev evaluation, in the exported
    folder (sentlab.json ``head``) that the evaluate stage loads, and in its sentence-transformers copy; ``test_mlp:
    false`` keeps the bare [CLS]."""
    from sentlab.evaluate.sts.runner import build_encoders
    from sentlab.export.st import load_sentence_transformer
    from sentlab.train.checkpoint import export_model, publish

    paper = load_params(REPO / "params.yaml", profile="paper")
    assert method_params(paper, "simcse_sup").test_mlp is True
    cls = get_method("simcse_sup")
    torch.manual_seed(0)
    m = cls(tiny_bert(tok, initializer_range=0.2), tok, cls.Params().resolved(TrainParams(max_length=16)), seed=0)
    with torch.no_grad():   # a trained-looking MLP (its N(0, 0.02) start is near the identity's scale)
        m.mlp.dense.weight.normal_(0, 0.3)
        m.mlp.dense.bias.uniform_(-0.5, 0.5)
    a = [t[0] for t in TRIPLES]
    m.eval()
    with torch.no_grad():
        h = m.encoder(**m.encode_text(a), return_dict=True).last_hidden_state[:, 0]
        want = torch.tanh(h @ m.mlp.dense.weight.T + m.mlp.dense.bias).numpy()
    got = m.sentence_encoder().encode(a)
    assert got == pytest.approx(want, abs=1e-5) and not got == pytest.approx(h.numpy(), abs=1e-2)
    info = dict(m.export_info(), status="trained")
    assert info["head"] == "head" and info["pooling"] == "cls"
    export_model(tmp_path / "best", m, info)
    assert (tmp_path / "best/head/model.safetensors").is_file()
    enc = build_encoders(str(tmp_path / "best"), device="cpu", workers=1)["best"]
    assert enc.encode(a) == pytest.approx(want, abs=1e-5)
    bare = build_encoders(str(tmp_path / "best"), pooling="cls", device="cpu", workers=1)["best"]
    assert bare.encode(a) == pytest.approx(h.numpy(), abs=1e-5)        # --pooling: the bare encoder
    publish(tmp_path / "best", tmp_path / "pub", {})
    assert load_sentence_transformer(tmp_path / "pub").encode(a) == pytest.approx(want, abs=1e-5)
    st = build_encoders(str(tmp_path / "pub"), device="cpu", workers=1)["pub"]
    assert st.encode(a) == pytest.approx(want, abs=1e-5)
    # test_mlp false: [CLS] without the MLP, nothing exported beside the encoder
    off = cls(m.encoder, tok, cls.Params(test_mlp=False).resolved(TrainParams(max_length=16)), seed=0)
    assert "head" not in off.export_info() and off.inference_head() is None
    assert off.sentence_encoder().encode(a) == pytest.approx(h.numpy(), abs=1e-5)
    with pytest.raises(ValueError, match="test_mlp"):
        cls.Params(mlp_train=False)
    assert cls.Params(mlp_train=False, test_mlp=False).test_mlp is False
