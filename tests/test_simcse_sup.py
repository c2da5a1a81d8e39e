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
