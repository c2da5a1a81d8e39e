"""SentEval transfer evaluator: loaders on fixture files, the batched classifier against a one-model-at-a-time
torch reference (written here, the way SentEval's PyTorchClassifier trains), pinned folds, features and accuracies."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import mirror_with

from sentlab.errors import SentlabError
from sentlab.evaluate.suites import transfer as T
from sentlab.evaluate.suites.transfer_data import load_task

# small grids and budgets keep the tests at seconds; the semantics are SentEval's
# (SentEval's lr 1e-3 and batch 64 need thousands of rows to move a logistic regression off its initial weights)
FAST = T.ClassifierConfig(kfold=3, max_epoch=24, batch_size=16, lr=1e-2, regs=(1e-5, 1e-2))


def _reference_fit(X, y, nclasses, fit: T.Fit, cfg: T.ClassifierConfig):
    """One model, trained as SentEval's MLP(nhid=0).fit does: torch.optim.Adam, nn.CrossEntropyLoss, deepcopy."""
    rng = np.random.RandomState(cfg.seed)
    torch.manual_seed(cfg.seed)
    model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], nclasses))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=fit.reg)
    if fit.dev is None:
        perm, k = rng.permutation(len(fit.train)), int(cfg.validation_split * len(fit.train))
        tr, dev = fit.train[perm[k:]], fit.train[perm[:k]]
    else:
        tr, dev = fit.train, fit.dev
    Xt, yt = torch.tensor(X[tr]), torch.tensor(y[tr])
    Xd, yd = torch.tensor(X[dev]), torch.tensor(y[dev])
    nepoch, best, fails, stop, best_model = 0, -1.0, 0, False, None
    while not stop and nepoch <= cfg.max_epoch:
        for _ in range(cfg.epoch_size):
            perm = rng.permutation(len(Xt))
            for i in range(0, len(Xt), cfg.batch_size):
                idx = torch.from_numpy(perm[i:i + cfg.batch_size])
                loss = torch.nn.functional.cross_entropy(model(Xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += cfg.epoch_size
        with torch.no_grad():
            acc = float(model(Xd).argmax(1).eq(yd).sum()) / len(Xd)
        if acc > best:
            best, best_model = acc, copy.deepcopy(model)
        else:
            if fails >= cfg.tenacity:
                stop = True
            fails += 1
    return best, best_model


def _blobs(n=200, d=8, sep=1.0, nclasses=2, seed=0, scale=4.0):
    rng = np.random.RandomState(seed)
    y = np.arange(n) % nclasses
    centers = rng.randn(nclasses, d) * sep
    return (scale * (centers[y] + rng.randn(n, d))).astype(np.float32), y.astype(np.int64)


@pytest.mark.parametrize("sep,nclasses", [(2.0, 2), (0.4, 2), (0.8, 3)])
def test_batched_equals_one_at_a_time_reference(sep, nclasses):
    X, y = _blobs(sep=sep, nclasses=nclasses, scale=0.5)
    folds = T.stratified_folds(y, 2, 1111)  # 100 training rows: 7 batches of 16; the last fit: 171 rows, 11
    fits = [T.Fit(tr, reg, te) for reg in (1e-5, 1e-2) for tr, te in folds] + [T.Fit(np.arange(180), 1e-3)]
    cfg = T.ClassifierConfig(max_epoch=12, tenacity=1, batch_size=16, lr=1e-2)
    res = T.fit_logreg(X, y, nclasses, fits, cfg)
    for m, f in enumerate(fits):
        acc, model = _reference_fit(X, y, nclasses, f, cfg)
        assert res.dev_acc[m] == acc
        np.testing.assert_allclose(res.W[m].numpy(), model[0].weight.detach().t().numpy(), atol=2e-5)
        np.testing.assert_allclose(res.b[m].numpy(), model[0].bias.detach().numpy(), atol=2e-5)
    assert len(set(res.epochs.tolist())) > 1  # models stop at different epochs
    one = T.fit_logreg(X, y, nclasses, fits,
                       T.ClassifierConfig(max_epoch=12, tenacity=1, batch_size=16, lr=1e-2, chunk=1))
    assert np.array_equal(one.dev_acc, res.dev_acc) and np.array_equal(one.epochs, res.epochs)
    torch.testing.assert_close(one.W, res.W, atol=1e-6, rtol=0)


def test_pinned_accuracies_and_sklearn_agreement():
    from sklearn.linear_model import LogisticRegression

    X, y = _blobs(n=240, sep=1.0, seed=1, scale=0.5)
    easy = T.inner_kfold(X, y, 2, FAST)
    Xn, yn = _blobs(n=240, sep=0.3, seed=2, scale=0.5)
    hard = T.inner_kfold(Xn, yn, 2, FAST)
    assert (easy["devacc"], easy["acc"], hard["devacc"], hard["acc"]) == (95.0, 90.0, 70.22, 67.92)
    # an independent reference: sklearn's L2 logistic regression under the same outer folds (95.0 and 72.5)
    for (X_, y_), ours in (((X, y), easy), ((Xn, yn), hard)):
        sk = [LogisticRegression(C=1.0).fit(X_[tr], y_[tr]).score(X_[te], y_[te])
              for tr, te in T.stratified_folds(y_, 3, 1111)]
        assert abs(ours["acc"] - 100 * np.mean(sk)) < 6.0


def test_folds_and_initial_weights_pinned():
    y = np.array([0, 1] * 10)
    folds = T.stratified_folds(y, 10, 1111)
    assert folds[0][1].tolist() == [6, 9]
    assert sorted(np.concatenate([te for _, te in folds]).tolist()) == list(range(20))
    W, b = T.initial_weights(4, 2, 1111)
    assert W.shape == (4, 2)
    np.testing.assert_allclose(b.numpy(), [0.0145, 0.3125], atol=1e-4)


def test_mrpc_features_order():
    a = np.array([[1.0, -2.0]], np.float32)
    b = np.array([[3.0, 4.0]], np.float32)
    assert T.mrpc_features(a, b).tolist() == [[2.0, 6.0, 3.0, -8.0]]


def _layout(root):
    (root / "CR").mkdir()
    (root / "CR" / "custrev.pos").write_bytes("tr\xe8s  bon\ngood one here\n".encode("latin-1"))
    (root / "CR" / "custrev.neg").write_bytes(b"bad\n")
    (root / "MR").mkdir()
    (root / "MR" / "rt-polarity.pos").write_bytes(b"a \x85 b\nc\n")  # SentEval's splitlines breaks at NEL
    (root / "MR" / "rt-polarity.neg").write_bytes(b"d\n")
    (root / "TREC").mkdir()
    trec = "NUM:date When was it ?\nHUM:ind Who is Jos\xe9 ?\n"
    (root / "TREC" / "train_5500.label").write_bytes(trec.encode("latin-1"))
    (root / "TREC" / "TREC_10.label").write_bytes(b"LOC:city Where ?\n")
    (root / "SST" / "binary").mkdir(parents=True)
    for split, body in (("train", "good film\t1\nbad  film\t0\n"), ("dev", "ok\t1\n"), ("test", "meh\t0\n")):
        (root / "SST" / "binary" / f"sentiment-{split}").write_text(body, encoding="utf-8")
    (root / "MRPC").mkdir()
    head = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
    (root / "MRPC" / "msr_paraphrase_train.txt").write_text(head + "1\t1\t2\tA long one .\tB\r\n0\t3\t4\tC\tD d\n",
                                                            encoding="utf-8")
    (root / "MRPC" / "msr_paraphrase_test.txt").write_text(head + "1\t5\t6\tE\tF\n", encoding="utf-8")


def test_loaders_on_fixture_layout(tmp_path):
    _layout(tmp_path)
    cr = load_task("CR", tmp_path, expected={"custrev.pos": 2, "custrev.neg": 1})
    assert cr.splits["all"].a == ["bad", "tr\xe8s bon", "good one here"] and cr.splits["all"].y.tolist() == [0, 1, 1]
    mr = load_task("MR", tmp_path, expected={"rt-polarity.pos": 2})
    assert mr.splits["all"].a == ["d", "a", "b", "c"] and mr.splits["all"].y.tolist() == [0, 1, 1, 1]
    trec = load_task("TREC", tmp_path, expected=None)
    assert trec.splits["train"].a == ["Who is Jos\xe9 ?", "When was it ?"] and trec.splits["train"].y.tolist() == [3, 5]
    sst = load_task("SST2", tmp_path, expected=None)
    assert sst.splits["train"].a == ["bad film", "good film"] and sst.splits["test"].y.tolist() == [0]
    mrpc = load_task("MRPC", tmp_path, expected={"msr_paraphrase_train.txt": 2, "msr_paraphrase_test.txt": 1})
    tr = mrpc.splits["train"]
    assert (tr.a, tr.b, tr.y.tolist()) == (["C", "A long one ."], ["D d", "B"], [0, 1])


def test_line_count_mismatch_is_one_paragraph(tmp_path):
    _layout(tmp_path)
    with pytest.raises(SentlabError) as e:
        load_task("CR", tmp_path)  # SentEval's release: 2,407 positive reviews
    msg = str(e.value)
    assert "custrev.pos" in msg and "2 lines" in msg and "2407" in msg and "\n" not in msg and "mirror" in msg


def test_mirror_counts_match_release(monkeypatch):
    mirror_with(monkeypatch, "CR", "MRPC")
    assert len(load_task("CR").splits["all"].a) == 3775
    assert len(load_task("MRPC").splits["test"].a) == 1725


def test_run_task_every_protocol_pinned():
    from sentlab.evaluate.suites.transfer_data import Split, TransferTask

    rng = np.random.RandomState(0)
    words = [f"w{i}" for i in range(60)]
    y = np.arange(60) % 2
    vec = {w: (rng.randn(6) + 2 * y[i]).astype(np.float32) for i, w in enumerate(words)}

    def embed(sentences):
        return np.stack([vec[s] for s in sentences])

    def split(lo, hi, b=None):
        return Split(words[lo:hi], y[lo:hi], b)

    cfg = T.ClassifierConfig(kfold=2, max_epoch=8, batch_size=8, lr=1e-2, regs=(1e-5, 1e-2))
    sst = T.run_task(TransferTask("SST2", 2, {"train": split(0, 40), "dev": split(40, 50), "test": split(50, 60)}),
                     embed, cfg)
    trec = T.run_task(TransferTask("TREC", 2, {"train": split(0, 40), "test": split(40, 60)}), embed, cfg)
    mrpc = T.run_task(TransferTask("MRPC", 2, {"train": split(0, 40, words[20:60]), "test": split(40, 60, words[:20])}),
                      embed, cfg)
    cr = T.run_task(TransferTask("CR", 2, {"all": split(0, 60)}), embed, cfg)
    got = [(r["devacc"], r["acc"]) for r in (sst, trec, mrpc, cr)] + [mrpc["f1"]]
    assert got == PINNED_PROTOCOLS, got
# (devacc, acc) of SST2, TREC, MRPC, CR on the synthetic tasks above, then MRPC's F1
PINNED_PROTOCOLS = [(80.0, 70.0), (85.0, 75.0), (85.0, 100.0), (81.66, 83.33), 100.0]
