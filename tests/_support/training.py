"""The training loop's test helpers: a tiny BERT factory, a corpus root, a stand-in STS-B dev check, params."""

import csv
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.stats import spearmanr

from sentlab.config import Params, TrainParams
from sentlab.evaluate.sts.diagnostics import alignment_uniformity
from tiny import sentences, tiny_bert


def factory(tok):
    def make():
        return tiny_bert(tok, 0, initializer_range=0.2), tok
    return make





def make_root(tmp_path, n=48):
    corpus = tmp_path / "data" / "corpus"
    corpus.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(range(100, 100 + n), pa.int64()), "text": sentences(n)}),
                   corpus / "train.parquet")
    return tmp_path


def fake_dev_eval():
    """A tiny stand-in for STS-B dev: 24 pairs with fixed gold scores (deterministic in the weights)."""
    rng = random.Random(7)
    s1, s2 = sentences(24, seed=11), sentences(24, seed=12)
    gold = np.array([rng.uniform(0, 5) for _ in range(24)])

    def dev_eval(encoder):
        e1, e2 = encoder.encode(s1, batch_size=8), encoder.encode(s2, batch_size=8)
        cos = (e1 * e2).sum(1) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))
        return {"stsb_dev": 100 * spearmanr(cos, gold).statistic, **alignment_uniformity(e1, e2, gold, s1, s2)}
    return dev_eval


def params(**train):
    base = dict(batch_size=8, max_length=16, lr=3e-3, eval_every=2, max_steps=6, device="cpu")
    base.update(train)
    return Params(seed=3, train=TrainParams(**base),
                  methods={"moco_deletion": {"queue_size": 24}, "ptbert": {"queue_size": 24, "pseudo_len": 8}})


def read_curve(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


class Interrupt(Exception):
    pass
