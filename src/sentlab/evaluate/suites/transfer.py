"""SentEval's transfer evaluation (Conneau & Kiela 2018) of frozen sentence embeddings, with batched classifiers.

The protocol is SentEval's with SimCSE's settings (``usepytorch``, ``classifier = {nhid: 0, optim: adam,
batch_size: 64, tenacity: 5, epoch_size: 4}``, ``kfold: 10``, seed 1111), so the numbers are comparable with
SimCSE's Table / the L2P-CSR report's transfer table:

* the classifier is a logistic regression (one linear layer, SentEval's ``MLP`` with ``nhid 0``) on the frozen
  embeddings, trained with Adam (lr 1e-3, betas (0.9, 0.999), eps 1e-8: SentEval's ``"adam"`` is torch's
  default) on the mean cross-entropy of mini-batches of 64, L2 regularisation as Adam's ``weight_decay`` on
  weight and bias. With ``usepytorch`` SentEval's grid is ``[10**t for t in range(-5, -1)]`` (1e-5 … 1e-2); the
  ``[2**t for t in range(-2, 4)]`` grid is its sklearn-only ``C`` grid and is not used;
* training: ``epoch_size`` (4) passes over the training rows per "epoch", each pass in a fresh permutation;
  after each epoch the accuracy on the held-out rows is measured; the best model so far is kept; training stops
  at the first epoch that fails to improve once ``tenacity`` (5) earlier epochs have failed to improve (SentEval
  never resets that count), or when the epoch counter passes ``max_epoch`` (200);
* every model is seeded as SentEval seeds it: torch's seed 1111 before ``nn.Linear`` (every model starts from
  the same weights) and numpy's seed 1111 before its permutations (each model draws from its own
  ``RandomState(1111)``, which replays SentEval's global stream for that model);
* MR/CR/SUBJ/MPQA: ``InnerKFoldClassifier``: outer stratified 10-fold (shuffled, random_state 1111); in each
  outer training set an inner stratified 10-fold picks the reg with the best mean held-out accuracy (rounded to
  2 decimals in %, first best on ties); the chosen reg is refit on the outer training set with 5% of it held out
  (``validation_split 0.05``, drawn after the seed) for early stopping; the reported accuracy is the mean of the
  10 outer test accuracies (each rounded to 2 decimals in %);
* SST2: ``SplitClassifier``: each reg trained on train with dev as held-out set, best dev accuracy picks the
  reg, test accuracy reported. SentEval refits the chosen reg with the same seed and data, which replays the same
  fit; the batched run reuses that fit instead (identical by construction on a deterministic device);
* TREC and MRPC: ``KFoldClassifier``: stratified 10-fold on train (random_state 1111) picks the reg, which is
  refit on all of train (5% held out for early stopping) and scored on test; MRPC's features are SentEval's
  ``[|u - v|, u * v]`` (in that order) and its F1 is that of the positive class.

Sentence order, files and parsing are SentEval's (:mod:`sentlab.evaluate.suites.transfer_data`), so the folds are the
same rows. What SentEval leaves implicit, stated here: ``CrossEntropyLoss.size_average = False`` set after
construction has no effect in PyTorch >= 0.4.1, so the loss is the batch mean; ties in the arg-max prediction go
to the first class; everything runs in float32 on the CPU unless a device is given.

Speed: SentEval trains its ~400 (MR: 10 outer x 4 regs x 10 inner + 10) models one after another. Here all
models of a phase are trained together (:func:`fit_logreg`): their weights are one ``[M, D, C]`` tensor, each
step gathers every model's own mini-batch (``[M, 64, D]``), computes the softmax gradient in closed form with a
per-model mask (a model whose pass has fewer batches takes no step), and applies Adam per model; a model leaves
the batch when its own early stopping fires. The results equal training the models one at a time
(``tests/test_transfer.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from .transfer_data import TASKS, TransferTask, load_task, subsample


@dataclass(frozen=True)
class ClassifierConfig:
    """SentEval's classifier settings as SimCSE runs them (see the module docstring)."""

    kfold: int = 10
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    regs: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2)
    validation_split: float = 0.05
    seed: int = 1111
    chunk: int = 256  # models trained together; any value gives the same numbers


@dataclass
class Fit:
    """One logistic regression: ``train`` rows of X, L2 ``reg``, held-out ``dev`` rows (None: a
    ``validation_split`` share of ``train`` drawn as SentEval draws it)."""

    train: np.ndarray
    reg: float
    dev: np.ndarray | None = None


@dataclass
class FitResult:
    W: torch.Tensor  # [M, D, C], the best epoch's weights of each model
    b: torch.Tensor  # [M, C]
    dev_acc: np.ndarray  # [M], best held-out accuracy (a fraction)
    epochs: np.ndarray  # [M], epochs trained

    def predict(self, m: int, X: torch.Tensor) -> np.ndarray:
        return (X @ self.W[m] + self.b[m]).argmax(1).numpy()


def initial_weights(dim: int, nclasses: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.Linear(dim, nclasses)`` after ``torch.manual_seed(seed)``, as ``[D, C]`` and ``[C]``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lin = torch.nn.Linear(dim, nclasses)
    return lin.weight.detach().t().contiguous(), lin.bias.detach().clone()


def fit_logreg(X, y, nclasses: int, fits: Sequence[Fit], cfg: ClassifierConfig = ClassifierConfig()) -> FitResult:
    """Train every logistic regression of ``fits`` on rows of ``X`` (``[N, D]``) / ``y``, batched."""
    X = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    y = torch.as_tensor(np.asarray(y), dtype=torch.long)
    W0, b0 = initial_weights(X.shape[1], nclasses, cfg.seed)
    parts = [_train_chunk(X, y, W0, b0, list(fits[i:i + cfg.chunk]), cfg) for i in range(0, len(fits), cfg.chunk)]
    return FitResult(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]),
                     np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts]))


def _train_chunk(X, y, W0, b0, fits: list[Fit], cfg: ClassifierConfig):
    m, bs = len(fits), cfg.batch_size
    rngs = [np.random.RandomState(cfg.seed) for _ in fits]
    trains, devs = [], []
    for f, rng in zip(fits, rngs):
        if f.dev is None:  # SentEval's prepare_split: the permutation is the first draw after the seed
            perm, k = rng.permutation(len(f.train)), int(cfg.validation_split * len(f.train))
            trains.append(np.asarray(f.train)[perm[k:]])
            devs.append(np.asarray(f.train)[perm[:k]])
        else:
            trains.append(np.asarray(f.train))
            devs.append(np.asarray(f.dev))
    W, b = W0.expand(m, -1, -1).clone(), b0.expand(m, -1).clone()
    state = [torch.zeros_like(W), torch.zeros_like(W), torch.zeros_like(b), torch.zeros_like(b), torch.zeros(m)]
    wd = torch.tensor([f.reg for f in fits], dtype=torch.float32)
    best_W, best_b = W.clone(), b.clone()
    best, fails, epochs = np.full(m, -1.0), np.zeros(m, int), np.zeros(m, int)
    active, nepoch = np.ones(m, bool), 0
    while active.any() and nepoch <= cfg.max_epoch:
        act = np.flatnonzero(active)
        ia = torch.from_numpy(act)
        p = [W[ia], b[ia]] + [s[ia] for s in state]
        for _ in range(cfg.epoch_size):
            perms = [trains[i][rngs[i].permutation(len(trains[i]))] for i in act]
            width = math.ceil(max(len(q) for q in perms) / bs) * bs
            idx, mask = np.zeros((len(act), width), np.int64), np.zeros((len(act), width), np.float32)
            for j, q in enumerate(perms):
                idx[j, :len(q)], mask[j, :len(q)] = q, 1.0
            idx_t, mask_t = torch.from_numpy(idx), torch.from_numpy(mask)
            for s in range(0, width, bs):
                _adam_step(p, X[idx_t[:, s:s + bs]], y[idx_t[:, s:s + bs]], mask_t[:, s:s + bs], wd[ia], cfg)
        W[ia], b[ia] = p[0], p[1]
        for s, v in zip(state, p[2:]):
            s[ia] = v
        nepoch += cfg.epoch_size
        for j, i in enumerate(act):
            epochs[i] = nepoch
            acc = float((X[devs[i]] @ p[0][j] + p[1][j]).argmax(1).eq(y[devs[i]]).sum()) / len(devs[i])
            if acc > best[i]:
                best[i], best_W[i], best_b[i] = acc, p[0][j], p[1][j]
            else:
                if fails[i] >= cfg.tenacity:
                    active[i] = False
                fails[i] += 1
    return best_W, best_b, best, epochs


def _adam_step(p: list, Xb, yb, mask, wd, cfg: ClassifierConfig) -> None:
    """One Adam step (torch.optim.Adam's update, weight decay added to the gradient) of every model on its own
    batch ``Xb [A, B, D]``; rows with mask 0 are padding; a model with no row in this batch is left unchanged."""
    W, b, mW, vW, mb, vb, t = p
    cnt = mask.sum(1)
    g = torch.softmax(torch.baddbmm(b.unsqueeze(1), Xb, W), -1)
    g.scatter_add_(2, yb.unsqueeze(-1), -torch.ones_like(yb, dtype=g.dtype).unsqueeze(-1))
    g.mul_((mask / cnt.clamp(min=1).unsqueeze(1)).unsqueeze(-1))  # d(mean CE)/d logits
    gW, gb = torch.bmm(Xb.transpose(1, 2), g), g.sum(1)
    has = cnt > 0
    t_new = t + has.float()
    b1, b2 = cfg.betas
    bc1, bc2 = 1 - b1 ** t_new.clamp(min=1), (1 - b2 ** t_new.clamp(min=1)).sqrt()
    new = []
    for param, grad, m_, v_, e in ((W, gW, mW, vW, (-1, 1, 1)), (b, gb, mb, vb, (-1, 1))):
        grad = grad + wd.view(e) * param
        m2 = m_ + (grad - m_) * (1 - b1)
        v2 = v_ * b2 + grad * grad * (1 - b2)
        p2 = param - (cfg.lr / bc1).view(e) * m2 / (v2.sqrt() / bc2.view(e) + cfg.eps)
        if not bool(has.all()):
            keep = has.view(e)
            p2, m2, v2 = torch.where(keep, p2, param), torch.where(keep, m2, m_), torch.where(keep, v2, v_)
        new += [p2, m2, v2]
    p[0], p[2], p[3], p[1], p[4], p[5], p[6] = new[0], new[1], new[2], new[3], new[4], new[5], t_new


def stratified_folds(y: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """sklearn's ``StratifiedKFold(k, shuffle=True, random_state=seed)`` splits, as SentEval draws them."""
    from sklearn.model_selection import StratifiedKFold

    return list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def _pct(x: float) -> float:
    return round(100 * x, 2)


def inner_kfold(X, y, nclasses: int, cfg: ClassifierConfig = ClassifierConfig()) -> dict:
    """SentEval's ``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA); random_state 1111 is SentEval's constant."""
    y = np.asarray(y)
    k, regs = cfg.kfold, cfg.regs
    outer = stratified_folds(y, k, 1111)
    fits = [Fit(tr[itr], reg, tr[ite])
            for tr, _ in outer for reg in regs for itr, ite in stratified_folds(y[tr], k, 1111)]
    inner = fit_logreg(X, y, nclasses, fits, cfg).dev_acc.reshape(k, len(regs), k)
    scores = [[round(100 * float(np.mean(inner[o, r])), 2) for r in range(len(regs))] for o in range(k)]
    opt = [int(np.argmax(s)) for s in scores]
    final = fit_logreg(X, y, nclasses, [Fit(tr, regs[o]) for (tr, _), o in zip(outer, opt)], cfg)
    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    tests = [_pct(float(np.mean(final.predict(i, Xt[te]) == y[te]))) for i, (_, te) in enumerate(outer)]
    return {"devacc": round(float(np.mean([max(s) for s in scores])), 2), "acc": round(float(np.mean(tests)), 2),
            "regs": [regs[o] for o in opt], "ndev": len(y), "ntest": len(y)}


def kfold_test(Xtr, ytr, Xte, yte, nclasses: int, cfg: ClassifierConfig = ClassifierConfig()) -> dict:
    """SentEval's ``KFoldClassifier`` (TREC, MRPC): k-fold on train picks the reg, refit on train, test on test."""
    ytr, yte = np.asarray(ytr), np.asarray(yte)
    folds = stratified_folds(ytr, cfg.kfold, cfg.seed)
    res = fit_logreg(Xtr, ytr, nclasses, [Fit(tr, reg, te) for reg in cfg.regs for tr, te in folds], cfg)
    scores = [round(100 * float(np.mean(a)), 2) for a in res.dev_acc.reshape(len(cfg.regs), cfg.kfold)]
    opt = int(np.argmax(scores))
    final = fit_logreg(Xtr, ytr, nclasses, [Fit(np.arange(len(ytr)), cfg.regs[opt])], cfg)
    yhat = final.predict(0, torch.as_tensor(np.asarray(Xte), dtype=torch.float32))
    return {"devacc": max(scores), "acc": _pct(float(np.mean(yhat == yte))), "reg": cfg.regs[opt], "yhat": yhat,
            "ndev": len(ytr), "ntest": len(yte)}


def split_classifier(X: dict, y: dict, nclasses: int, cfg: ClassifierConfig = ClassifierConfig()) -> dict:
    """SentEval's ``SplitClassifier`` (SST2): dev accuracy picks the reg, test accuracy of that fit."""
    n_tr, n_dev = len(y["train"]), len(y["valid"])
    Xa = np.concatenate([X["train"], X["valid"]])
    ya = np.concatenate([y["train"], y["valid"]])
    res = fit_logreg(Xa, ya, nclasses, [Fit(np.arange(n_tr), r, np.arange(n_tr, n_tr + n_dev)) for r in cfg.regs], cfg)
    scores = [_pct(float(a)) for a in res.dev_acc]
    opt = int(np.argmax(scores))
    yhat = res.predict(opt, torch.as_tensor(np.asarray(X["test"]), dtype=torch.float32))
    return {"devacc": max(scores), "acc": _pct(float(np.mean(yhat == np.asarray(y["test"])))), "reg": cfg.regs[opt],
            "ndev": n_dev, "ntest": len(y["test"])}


def mrpc_features(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SentEval's MRPC pair features: ``np.c_[|u - v|, u * v]``."""
    return np.concatenate([np.abs(a - b), a * b], axis=1).astype(np.float32)


def run_task(task: TransferTask, embed: Callable[[list[str]], np.ndarray],
             cfg: ClassifierConfig = ClassifierConfig()) -> dict:
    """One task's SentEval result; ``embed(sentences) -> [n, D]`` float array."""
    sents = task.sentences()
    E = np.asarray(embed(sents), dtype=np.float32)
    row = {s: i for i, s in enumerate(sents)}

    def emb(texts):
        return E[[row[t] for t in texts]]

    sp = task.splits
    if task.name == "SST2":
        return split_classifier({"train": emb(sp["train"].a), "valid": emb(sp["dev"].a), "test": emb(sp["test"].a)},
                                {"train": sp["train"].y, "valid": sp["dev"].y, "test": sp["test"].y}, 2, cfg)
    if task.name == "TREC":
        out = kfold_test(emb(sp["train"].a), sp["train"].y, emb(sp["test"].a), sp["test"].y, task.nclasses, cfg)
        out.pop("yhat")
        return out
    if task.name == "MRPC":
        from sklearn.metrics import f1_score

        tr, te = sp["train"], sp["test"]
        out = kfold_test(mrpc_features(emb(tr.a), emb(tr.b)), tr.y, mrpc_features(emb(te.a), emb(te.b)), te.y, 2, cfg)
        out["f1"] = _pct(float(f1_score(te.y, out.pop("yhat"))))
        return out
    return inner_kfold(emb(sp["all"].a), sp["all"].y, task.nclasses, cfg)


def evaluate_transfer(embed: Callable[[list[str]], np.ndarray], tasks: Sequence[str] = TASKS, root=None,
                      cfg: ClassifierConfig = ClassifierConfig(), progress: bool = True,
                      max_examples: int | None = None, sample_seed: int = 1111) -> dict:
    """SentEval transfer results: ``{task: {acc, devacc, ...}}`` plus ``"Avg"`` over the tasks' accuracies.
    ``max_examples``: each split cut to a seeded sample of that many (:func:`~.transfer_data.subsample`)."""
    from tqdm.auto import tqdm

    out: dict = {}
    bar = tqdm(list(tasks), desc="transfer", unit="task", disable=not progress)
    for name in bar:
        bar.set_postfix_str(name)
        out[name] = run_task(subsample(load_task(name, root), max_examples, sample_seed), embed, cfg)
    out["Avg"] = round(float(np.mean([out[t]["acc"] for t in tasks])), 2)
    return out
