"""Issue 15: the CPU dropout kernel (`train.dropout_kernel`, sentlab.train.dropout) and the single-threaded
encode workers (`evaluate.workers`): same distribution / same bits, less time."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sentlab.config import EvaluateParams, TrainParams
from sentlab.nn.encoder import SentenceEncoder, resolve_workers
from sentlab.errors import SentlabError
from sentlab.train.dropout import dropout_kernel, fast_dropout, keep_mask, resolve_kernel
from tiny import sentences

pytestmark = pytest.mark.usefixtures("one_thread")


def test_keep_mask_is_the_low_48_bits_of_the_seeded_int64_draws():
    """The mask is a function of the default generator's int64 draws: three 16-bit lanes each, an element kept
    when its lane (as int16) is at least round(p * 65536) - 32768."""
    n, p = 1000, 0.1
    torch.manual_seed(5)
    bits = torch.empty(-(-n // 3), dtype=torch.int64).random_()
    expected = []
    for b in bits.tolist():
        for lane in range(3):
            v = (b >> (16 * lane)) & 0xFFFF
            expected.append((v - 65536 if v >= 32768 else v) >= round(p * 65536) - 32768)
    torch.manual_seed(5)
    mask = keep_mask(torch.Size([10, 100]), p, torch.device("cpu"))
    assert mask.shape == (10, 100) and mask.dtype == torch.bool
    assert mask.flatten().tolist() == expected[:n]


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_keep_mask_drops_with_probability_p(p):
    torch.manual_seed(0)
    n = 2_000_000
    rate = 1 - keep_mask(torch.Size([n]), p, torch.device("cpu")).float().mean().item()
    exact = round(p * 65536) / 65536
    assert abs(exact - p) < 8e-6
    assert abs(rate - exact) < 5 * np.sqrt(p * (1 - p) / n)          # 5 standard errors
    torch.manual_seed(0)
    again = keep_mask(torch.Size([n]), p, torch.device("cpu"))
    torch.manual_seed(1)
    other = keep_mask(torch.Size([n]), p, torch.device("cpu"))
    torch.manual_seed(0)
    assert torch.equal(again, keep_mask(torch.Size([n]), p, torch.device("cpu")))   # seeded
    assert not torch.equal(again, other)


def test_fast_dropout_is_inverted_dropout_with_a_constant_mask():
    torch.manual_seed(0)
    x = torch.full((400, 300), 2.0, requires_grad=True)
    y = fast_dropout(x, 0.25)
    kept = y != 0
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 2.0 / 0.75))
    assert 0.2 < 1 - kept.float().mean().item() < 0.3
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)              # d y / d x = mask / (1 - p)
    z = torch.ones(5)
    assert fast_dropout(z, 0.5, training=False) is z and fast_dropout(z, 0.0) is z
    w = torch.ones(3000)
    out = fast_dropout(w, 0.5, inplace=True)
    assert out.data_ptr() == w.data_ptr() and set(w.unique().tolist()) == {0.0, 2.0}


def test_dropout_kernel_swaps_the_functional_for_modules_and_restores_it():
    """nn.Dropout (and the Hugging Face eager attention) call torch.nn.functional.dropout: inside the block they
    get the fast mask; outside, PyTorch's; `torch` changes nothing."""
    original = F.dropout
    layer = torch.nn.Dropout(0.5)
    x = torch.ones(6000)
    torch.manual_seed(3)
    with dropout_kernel("fast"):
        assert F.dropout is not original
        inside = layer(x)
        assert torch.equal(layer.eval()(x), x)                          # eval: identity, as PyTorch
        layer.train()
        assert torch.equal(F.dropout(x, 0.0), x)
    assert F.dropout is original
    torch.manual_seed(3)
    assert torch.equal(inside, fast_dropout(x, 0.5))                    # the module went through fast_dropout
    torch.manual_seed(3)
    with dropout_kernel("torch"):
        assert F.dropout is original
        plain = layer(x)
    assert not torch.equal(plain, inside)
    with pytest.raises(RuntimeError, match="boom"):
        with dropout_kernel("fast"):
            raise RuntimeError("boom")
    assert F.dropout is original                                        # restored on an error too


def test_resolve_kernel_and_the_param():
    assert resolve_kernel("auto", torch.device("cpu")) == "fast"
    assert resolve_kernel("auto", torch.device("cuda")) == "torch"
    assert resolve_kernel("torch", torch.device("cpu")) == "torch"
    assert TrainParams().dropout_kernel == "auto"
    with pytest.raises(ValueError):
        TrainParams(dropout_kernel="philox")


def test_training_runs_through_the_chosen_kernel(tmp_path, tok):
    """The loop trains with the resolved kernel (recorded in sentlab.json): the fast one gives other (seeded,
    repeatable) numbers than PyTorch's, so it is really in the forward pass."""
    from _support.training import factory, fake_dev_eval, make_root, params, read_curve

    from sentlab.train.run import train_method

    curves = {}
    for name, kernel in (("fast", "auto"), ("fast2", "fast"), ("torch", "torch")):
        root = make_root(tmp_path / name)
        info = train_method(params(max_steps=2, eval_every=1, dropout_kernel=kernel), "simcse", root=root,
                            dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False, progress=False)
        assert info["dropout_kernel"] == ("torch" if name == "torch" else "fast")
        curves[name] = [(r["loss"], r["stsb_dev"]) for r in read_curve(root / "reports" / "curves" / "simcse.csv")]
        assert len(curves[name]) == 2
    assert curves["fast"] == curves["fast2"]
    assert curves["fast"] != curves["torch"]


# --- evaluate.workers -------------------------------------------------------------------------------------------

def test_workers_give_the_same_bits_and_restore_the_thread_count(tiny_bert):
    model, tok = tiny_bert
    texts = sentences(300, seed=4) + ["alpha"] * 3
    one = SentenceEncoder(model, tok, pooling="mean", token_budget=256).encode(texts, batch_size=16)
    threads = torch.get_num_threads()
    three = SentenceEncoder(model, tok, pooling="mean", token_budget=256, workers=3).encode(texts, batch_size=16)
    assert torch.get_num_threads() == threads
    np.testing.assert_array_equal(three, one)
    assert one.shape == (303, 32)


def test_the_fingerprint_records_the_threads_a_batch_ran_on_not_the_processs(tiny_bert):
    """A serial stage (2 intra-op threads: 2 single-threaded workers) and a ``--jobs 2`` task's (1 thread, 1 worker)
    encode each batch on one thread: the same bits, and the metrics' fingerprint says so (it recorded the process's
    2 against 1, so the two runs' metrics files differed in that one field)."""
    from sentlab.provenance.environment import environment_fingerprint

    model, tok = tiny_bert
    texts = sentences(120, seed=5)
    before = torch.get_num_threads()
    got = []
    try:
        for threads, workers in ((2, 2), (1, 1)):
            torch.set_num_threads(threads)
            enc = SentenceEncoder(model, tok, pooling="mean", token_budget=256, workers=workers)
            got.append((enc.encode(texts, batch_size=16), environment_fingerprint(threads=enc.batch_threads)))
    finally:
        torch.set_num_threads(before)
    np.testing.assert_array_equal(got[0][0], got[1][0])
    assert got[0][1]["threads"] == got[1][1]["threads"] == 1
    torch.set_num_threads(2)
    try:
        assert SentenceEncoder(model, tok, workers=1).batch_threads == 2      # one batch at a time, on every thread
    finally:
        torch.set_num_threads(before)


def test_a_worker_error_reaches_the_caller(tiny_bert):
    model, tok = tiny_bert
    texts = ["alpha bravo"] * 40 + [" ".join(["alpha"] * 30)]       # the long one loses its [MASK] at 16 tokens
    threads = torch.get_num_threads()
    with pytest.raises(SentlabError, match="evaluate.max_length"):
        SentenceEncoder(model, tok, pooling="mask", max_length=16, token_budget=64, workers=2).encode(texts)
    assert torch.get_num_threads() == threads


def test_resolve_workers_and_the_param(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    assert resolve_workers("auto", torch.device("cpu")) == 4
    assert resolve_workers("auto", torch.device("cuda")) == 1
    assert resolve_workers(2, torch.device("cpu")) == 2
    assert EvaluateParams().workers == "auto"
    with pytest.raises(ValueError):
        EvaluateParams(workers=0)
