"""``train.compile`` and ``train.pad_buckets`` (sentlab.train.compiled, issue #58).

A compiled step and fixed-length padding must compute what the eager, dynamically padded step computes: the loss
and every gradient of a tiny model equal within float round-off, with dropout off (with dropout on, both draw the
masks differently: the same distribution, another draw). The reference is always the eager step on the batch padded
to its longest sentence, as every run before issue #58.
"""

from __future__ import annotations

import copy
import shutil

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from sentlab.data.padding import bucket_length, pad_features
from sentlab.train.compiled import check_step_options, step_forward
from sentlab.train.data import Corpus
from sentlab.train.dropout import resolve_kernel
from sentlab.train.loop import train_loop
from tiny import sentences

# a C++ compiler is what TorchInductor's CPU backend needs (it compiles the generated kernels); nothing else
CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="TorchInductor on CPU needs a C++ compiler (g++/c++/clang++ on "
                                                    "PATH); none found")

SENTS = ["a cat sat on the mat", "dogs bark", "the quick brown fox jumps over the lazy dog today",
         "rain", "it is sunny in the park this afternoon", "birds sing"]
CASES = {"simcse": {}, "ptbert": {"queue_size": 12, "pseudo_len": 4}}


def no_dropout_bert(tok, seed: int = 0) -> BertModel:
    """tests/tiny.py's 2-layer, 32-wide BERT with every dropout at 0 (the compared steps draw no masks)."""
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, initializer_range=0.2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertModel(cfg, add_pooling_layer=False)


def build(method_id, tok, **train):
    cfg = TrainParams(batch_size=len(SENTS), max_length=32, lr=1e-3, **train)
    cls = get_method(method_id)
    params = cls.Params(**CASES.get(method_id, {})).resolved(cfg)
    if "dropout" in type(params).model_fields:   # PT-BERT's pseudo-token attention dropout
        params = params.model_copy(update={"dropout": 0.0})
    torch.manual_seed(0)
    return cls(no_dropout_bert(tok), tok, params, seed=0), cfg


def loss_and_grads(method, forward) -> tuple[float, dict[str, torch.Tensor]]:
    method.train()
    method.zero_grad(set_to_none=True)
    loss = forward(method.prepare(Batch(list(SENTS), index=list(range(len(SENTS))))))["loss"]
    loss.backward()
    return float(loss), {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}


def assert_same(a, b, rtol=1e-4, atol=1e-6):
    (loss_a, g_a), (loss_b, g_b) = a, b
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    assert g_a.keys() == g_b.keys() and len(g_a) > 10
    for n in g_a:
        torch.testing.assert_close(g_b[n], g_a[n], rtol=rtol, atol=atol, msg=lambda m: f"{n}: {m}")


# --- fixed-length padding ----------------------------------------------------------------------------------------
def test_bucket_length_and_padding():
    assert [bucket_length(n, [16, 24], 32) for n in (3, 16, 17, 24, 25, 32)] == [16, 16, 24, 24, 32, 32]
    assert bucket_length(9, [], 32) == 32
    enc = {"input_ids": torch.tensor([[101, 7, 102], [101, 102, 0]]),
           "attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]), "token_type_ids": torch.zeros(2, 3, dtype=int)}
    out = pad_features(enc, 5, pad_token_id=3)
    assert out["input_ids"].tolist() == [[101, 7, 102, 3, 3], [101, 102, 0, 3, 3]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]]
    assert out["token_type_ids"].tolist() == [[0] * 5] * 2


@pytest.mark.parametrize("method_id", sorted(CASES))
def test_fixed_length_padding_equals_dynamic(method_id, tok, one_thread):
    dynamic, cfg = build(method_id, tok)
    fixed, fixed_cfg = build(method_id, tok, pad_buckets=[8, 24])
    check_step_options(fixed, fixed_cfg)
    longest = dynamic.prepare(Batch(list(SENTS)))
    padded = fixed.prepare(Batch(list(SENTS)))
    for key, enc in longest.features.items():
        assert enc["input_ids"].shape[1] == 12 and padded.features[key]["input_ids"].shape[1] == 24
    assert_same(loss_and_grads(dynamic, dynamic), loss_and_grads(fixed, fixed))


@pytest.mark.parametrize("method_id", ["diffcse", "paser", "simcse_mlm"])
def test_pad_buckets_refused_where_padding_enters_the_loss(method_id, tok):
    cfg = TrainParams(batch_size=4, max_length=32, pad_buckets=[32])
    cls = get_method(method_id)
    method = cls.__new__(cls)   # the check reads the class and params only
    torch.nn.Module.__init__(method)
    method.params = cls.Params().resolved(cfg)
    with pytest.raises(SentlabError, match=rf"train.pad_buckets \[32\] cannot be used with method `{method_id}`"):
        check_step_options(method, cfg)


def test_step_options_refused(tok):
    method, _ = build("simcse", tok)
    with pytest.raises(SentlabError, match=r"length\(s\) \[48\] above method `simcse`'s max length 32"):
        check_step_options(method, TrainParams(max_length=32, pad_buckets=[16, 48]))
    with pytest.raises(SentlabError, match="train.dropout_kernel: fast"):
        check_step_options(method, TrainParams(compile="default", dropout_kernel="fast"))
    with pytest.raises(ValueError, match="strictly increasing"):
        TrainParams(pad_buckets=[32, 16])
    with pytest.raises(ValueError, match="compile"):
        TrainParams(compile="max-autotune")
    assert TrainParams(compile=False).compile == "off"   # YAML 1.1's bare `off`
    cpu = torch.device("cpu")
    assert [resolve_kernel("auto", cpu, c) for c in ("off", "default")] == ["fast", "torch"]


# --- the compiled step ----------------------------------------------------------------------------------------------
@needs_cxx
def test_compiled_step_equals_eager_simcse(tok, one_thread):
    torch._dynamo.reset()
    eager, _ = build("simcse", tok)
    compiled = copy.deepcopy(eager)
    reference = loss_and_grads(eager, eager)
    forward = step_forward(compiled, "default", torch.device("cpu"))
    assert forward is not compiled
    assert_same(reference, loss_and_grads(compiled, forward))


@needs_cxx
def test_compiled_loop_equals_eager_loop(tok, tmp_path, one_thread):
    """train.compile through the loop: the same losses over 3 optimiser steps, fixed-length batches."""
    torch._dynamo.reset()
    runs = {}
    for mode in ("off", "default"):
        method, cfg = build("simcse", tok, compile=mode, pad_buckets=[16], max_steps=3, eval_every=3, device="cpu",
                            dropout_kernel="torch")
        res = train_loop(method, Corpus(ids=np.arange(24), texts=sentences(24)), cfg, seed=0,
                         dev_eval=lambda enc: {"stsb_dev": 0.0}, ckpt_dir=tmp_path / mode, progress=False)
        runs[mode] = res.losses
    assert len(runs["off"]) == 3
    np.testing.assert_allclose(runs["default"], runs["off"], rtol=1e-5)
