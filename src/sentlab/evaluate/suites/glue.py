"""GLUE fine-tuning (L2P-CSR Table 4: WNLI, QNLI, QQP, SST-2, STS-B): each trained encoder fine-tuned with a task
head, scored on the task's dev split.

L2P-CSR §5.2 fine-tunes "the learned model parameters" on each task and prints one dev number per task; it says
nothing else. sentlab's choices (:class:`GlueConfig`, recorded in every result): the encoder's ``[CLS]`` state,
dropout 0.1, one linear layer (BERT's sequence-classification head without its pooler, which the unsupervised
encoders never trained); cross-entropy (classification) or mean squared error on the 0–5 score (STS-B); AdamW
at 2e-5 with linear decay after 10 % warm-up (``transformers.get_linear_schedule_with_warmup``), batch 32,
3 epochs, max length 128 — the defaults of transformers' ``run_glue.py``. Metrics: accuracy × 100 (WNLI, QNLI,
SST-2), accuracy and F1 × 100 (QQP; the table shows accuracy), Spearman × 100 (STS-B; Pearson beside).

Data, in GLUE's own layout (``<root>/glue/<TASK>/{train,dev}.tsv``, ``sentlab.assets.resolve``: the mirror, the cache,
then GLUE's download): SST-2 and STS-B fall back to the copies this project's mirror holds (SentEval's
``SST/binary`` — GLUE's SST-2 sentences — and STS-B's ``sts-{train,dev}.csv``); WNLI, QNLI and QQP have none
here and fail with the download command.
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...assets import resolve as assets
from ...errors import AssetMissingError, SentlabError

GLUE_URL = "https://dl.fbaipublicfiles.com/glue/data"
# task -> (GLUE folder, columns of (sentence a, sentence b or None, label), number of labels (1: regression))
TASKS = {"WNLI": ("WNLI", ("sentence1", "sentence2", "label"), 2),
         "QNLI": ("QNLI", ("question", "sentence", "label"), 2),
         "QQP": ("QQP", ("question1", "question2", "is_duplicate"), 2),
         "SST-2": ("SST-2", ("sentence", None, "label"), 2),
         "STS-B": ("STS-B", ("sentence1", "sentence2", "score"), 1)}
LABELS = {"QNLI": {"entailment": 0, "not_entailment": 1}}

for _task, (_folder, _cols, _n) in TASKS.items():
    _name = f"glue_{_task.lower().replace('-', '')}"   # asset_name(task)
    assets.ASSETS.setdefault(_name, assets.DataAsset(
        _name, (f"glue/{_folder}/train.tsv", f"glue/{_folder}/dev.tsv"), f"{GLUE_URL}/{_folder}.zip",
        description=f"GLUE {_task} (its own layout)", zip_dest="glue"))


@dataclass(frozen=True)
class GlueConfig:
    lr: float = 2e-5
    batch_size: int = 32
    epochs: int = 3
    max_length: int = 128
    warmup: float = 0.1
    dropout: float = 0.1
    max_train: Optional[int] = None     # a seeded sample of the training split (a CPU slice; recorded)
    max_steps: Optional[int] = None     # stop after this many optimiser steps (a CPU slice; recorded)
    max_dev: Optional[int] = None       # a seeded sample of the dev split (a CPU slice; recorded)
    precision: str = "fp32"             # resolved: fp32, or bf16/fp16 autocast (fp16 with a gradient scaler)


@dataclass
class GlueSplit:
    a: list[str]
    b: Optional[list[str]]
    y: np.ndarray


def _read_glue_tsv(path: Path, cols, task: str) -> GlueSplit:
    a_col, b_col, y_col = cols
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or not {c for c in cols if c} <= set(rows[0]):
        raise SentlabError(f"{path} has no {', '.join(c for c in cols if c)} columns: it is not GLUE's {task} file. "
                           f"Fetch it again ({GLUE_URL}/{TASKS[task][0]}.zip).")
    conv = float if TASKS[task][2] == 1 else (lambda v: LABELS[task][v] if task in LABELS else int(v))
    return GlueSplit([r[a_col] for r in rows], [r[b_col] for r in rows] if b_col else None,
                     np.array([conv(r[y_col]) for r in rows]))


# task -> (the asset holding the copy this project's mirror has, its train and dev files)
FALLBACK = {"SST-2": ("senteval_sst2", ("SST/binary/sentiment-train", "SST/binary/sentiment-dev")),
            "STS-B": ("senteval_sts", ("STS/STSBenchmark/sts-train.csv", "STS/STSBenchmark/sts-dev.csv"))}


def asset_name(task: str) -> str:
    return f"glue_{task.lower().replace('-', '')}"


def glue_files(task: str) -> tuple[str, Path, tuple[str, ...]]:
    """(asset, its root, the files inside it) that :func:`load_glue` reads for ``task``: GLUE's own files, else
    (SST-2, STS-B) the copies the mirror holds; :class:`AssetMissingError` (GLUE's download) when neither is here."""
    name = asset_name(task)
    try:
        return name, assets.resolve_data(name).root, assets.ASSETS[name].paths
    except AssetMissingError:
        if task not in FALLBACK:
            raise
        from . import transfer_data  # noqa: F401 - registers the senteval_sst2 asset
        fb, rels = FALLBACK[task]
        try:
            root = assets.resolve_data(fb).root
        except AssetMissingError:
            raise AssetMissingError(f"GLUE {task}: neither GLUE's files nor the copy in {fb} are here; fetch "
                                    f"Data asset '{name}': `{assets.data_fetch_command(name)}`.") from None
        if not all((root / r).is_file() for r in rels):
            raise
        return fb, root, rels


def _read_fallback(task: str, root: Path, rels) -> dict[str, GlueSplit]:
    """SST-2 / STS-B from the copies the mirror holds (SentEval's SST binary, STS-B's csv)."""
    out = {}
    for split, rel in zip(("train", "dev"), rels):
        text = (root / rel).read_text("utf-8")
        if task == "SST-2":
            lines = [ln.rsplit("\t", 1) for ln in text.splitlines() if ln.strip()]
            out[split] = GlueSplit([s for s, _ in lines], None, np.array([int(y) for _, y in lines]))
        else:
            rows = [r for r in (ln.split("\t") for ln in text.splitlines()) if len(r) >= 7]
            out[split] = GlueSplit([r[5] for r in rows], [r[6] for r in rows], np.array([float(r[4]) for r in rows]))
    return out


def load_glue(task: str, root: Optional[Path] = None) -> dict[str, GlueSplit]:
    """``{train, dev}`` of GLUE ``task`` from ``root`` (GLUE's layout), else the mirror / cache / download, else
    (SST-2, STS-B) the copies the mirror holds."""
    if task not in TASKS:
        raise SentlabError(f"Unknown GLUE task {task!r}; L2P-CSR Table 4's: {', '.join(TASKS)}.")
    folder, cols, _ = TASKS[task]
    if root is None:
        name, root, rels = glue_files(task)
        if name != asset_name(task):
            return _read_fallback(task, root, rels)
    return {split: _read_glue_tsv(Path(root) / "glue" / folder / f"{split}.tsv", cols, task)
            for split in ("train", "dev")}


def glue_metrics(task: str, y_true: np.ndarray, pred: np.ndarray) -> dict:
    """The task's dev metrics × 100 (``score``: the one Table 4 prints)."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import f1_score

    if TASKS[task][2] == 1:
        sp, pe = spearmanr(y_true, pred).statistic, pearsonr(y_true, pred).statistic
        return {"score": round(100 * float(sp), 2), "spearman": round(100 * float(sp), 2),
                "pearson": round(100 * float(pe), 2)}
    acc = round(100 * float(np.mean(pred == y_true)), 2)
    out = {"score": acc, "accuracy": acc}
    if task == "QQP":
        out["f1"] = round(100 * float(f1_score(y_true, pred)), 2)
    return out


class _Head(torch.nn.Module):
    def __init__(self, encoder, num_labels: int, dropout: float):
        super().__init__()
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(dropout)
        self.out = torch.nn.Linear(encoder.config.hidden_size, num_labels)

    def forward(self, **batch):
        cls = self.encoder(**batch).last_hidden_state[:, 0]
        return self.out(self.dropout(cls))


def finetune(encoder, tokenizer, task: str, splits: dict[str, GlueSplit], cfg: GlueConfig = GlueConfig(),
             seed: int = 42, device: str = "cpu", progress: bool = True) -> dict:
    """Fine-tune ``encoder`` (updated in place) with a new head on ``splits["train"]``; the dev metrics.
    ``cfg.precision`` bf16/fp16: the forward passes under that autocast (the loss in fp32; fp16 with a gradient
    scaler, as run_glue's ``--fp16``), fp32: none."""
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup, set_seed

    from ...nn.encoder import autocast
    from ...train.loop import loss_scaler

    set_seed(seed)
    n_labels = TASKS[task][2]
    model = _Head(encoder, n_labels, cfg.dropout).to(device)
    tr = splits["train"]
    idx = np.arange(len(tr.y))
    if cfg.max_train and cfg.max_train < len(idx):
        idx = np.sort(np.random.RandomState(seed).choice(len(idx), cfg.max_train, replace=False))
    steps_per_epoch = -(-len(idx) // cfg.batch_size)
    total = steps_per_epoch * cfg.epochs if cfg.max_steps is None else min(cfg.max_steps, steps_per_epoch * cfg.epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = get_linear_schedule_with_warmup(opt, int(cfg.warmup * total), total)
    rng = np.random.RandomState(seed)
    dev_t = torch.device(device)
    scaler = loss_scaler(cfg.precision, dev_t)   # fp16 only, as a training's

    def enc(split, rows):
        return tokenizer([split.a[i] for i in rows], [split.b[i] for i in rows] if split.b else None,
                         padding=True, truncation=True, max_length=cfg.max_length, return_tensors="pt").to(device)

    model.train()
    step = 0
    bar = tqdm(total=total, desc=f"glue {task}", unit="step", disable=not progress)
    while step < total:
        order = rng.permutation(idx)  # this epoch's order
        for s in range(0, len(order), cfg.batch_size):
            if step >= total:
                break
            rows = order[s:s + cfg.batch_size]
            with autocast(dev_t, cfg.precision):
                logits = model(**enc(tr, rows))
            logits = logits.float()
            y = torch.as_tensor(tr.y[rows], device=device)
            loss = (torch.nn.functional.mse_loss(logits.squeeze(-1), y.float()) if n_labels == 1
                    else torch.nn.functional.cross_entropy(logits, y.long()))
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)
    bar.close()
    model.eval()
    dev, preds = splits["dev"], []
    rows = np.arange(len(dev.y))
    if cfg.max_dev and cfg.max_dev < len(rows):
        rows = np.sort(np.random.RandomState(seed).choice(len(rows), cfg.max_dev, replace=False))
    with torch.inference_mode():
        for s in range(0, len(rows), 128):
            with autocast(dev_t, cfg.precision):
                out = model(**enc(dev, rows[s:s + 128]))
            out = out.float().cpu().numpy()
            preds.append(out[:, 0] if n_labels == 1 else out.argmax(1))
    return {"task": task, **glue_metrics(task, dev.y[rows], np.concatenate(preds)), "steps": step,
            "train_examples": int(len(idx)), "dev_examples": int(len(rows)), "seed": seed, "config": asdict(cfg)}


def run_glue(model: str, tasks, cfg: GlueConfig = GlueConfig(), seed: int = 42, device: str = "cpu") -> dict:
    """``{task: result}`` of fine-tuning a fresh copy of ``model`` (a folder or hub id) on each task; a task whose
    data is not here is ``{"status": "needs data: <the download>"}``, the others run."""
    from ...assets.resolve import load_model

    out: dict = {}
    for task in tasks:
        try:
            splits = load_glue(task)
        except AssetMissingError as e:
            out[task] = {"task": task, "status": f"needs data: {e}"}
            continue
        encoder, tok = load_model(model)
        out[task] = {**finetune(encoder, tok, task, splits, cfg, seed, device), "status": "evaluated"}
    return out
