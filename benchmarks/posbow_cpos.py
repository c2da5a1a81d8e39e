"""C_POS against the majority tag in the quick posbow_adv run (issue #53 §4), and the POS channel's probe ceiling.

    cd SCRATCH && python /path/to/benchmarks/posbow_cpos.py train [--precision bf16] [--override '{"k": v}']
    cd SCRATCH && python /path/to/benchmarks/posbow_cpos.py probe [--rows 6000]

SCRATCH holds a copy of a quick run's ``data/corpus``, ``data/annotations/train`` and ``data/sts`` (never write into
the run's own workspace). ``train``: the quick profile's posbow_adv training (this checkout's profiles/quick.yaml,
``overrides`` on its method line; the dev evaluation skipped) and the means of the logged diagnostics over all 30
steps and over steps 21-30 (each batch scored before its update). ``probe``: a linear head on the frozen backbone's
[CLS] (the POS channel's dims, then all of them) fitted to convergence (L-BFGS) on the tag distributions of
``rows`` - 2,000 training sentences and scored on 2,000 others: the most any head reads from the untrained channel.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
KEYS = ("acc_c_pos_top", "acc_base_pos_top", "acc_c_pos_word", "acc_base_pos_word", "acc_c_pos", "acc_base_pos",
        "loss_pos", "loss_base_pos", "grad_con", "grad_pos", "grad_bow", "grad_adv_bow", "grad_adv_pos")


def train(precision: str, overrides: dict) -> None:
    from sentlab.config import load_params
    from sentlab.train.run import train_method

    params = load_params(REPO / "params.yaml", "quick")
    params = params.model_copy(update={"train": params.train.model_copy(update={"precision": precision})})
    records = []
    train_method(params, "posbow_adv", root=Path.cwd(), tracking=False, progress=False,
                 dev_eval=lambda enc: {"stsb_dev": 0.0}, callbacks=[lambda s, r: records.append(dict(r))],
                 overrides=overrides)
    for label, part in (("steps 1-30", records), ("steps 21-30", records[-10:])):
        print(label, {k: round(float(np.mean([float(r[k]) for r in part])), 4) for k in KEYS if k in records[0]})


def probe(rows: int) -> None:
    import pyarrow.parquet as pq
    from transformers import AutoModel, AutoTokenizer

    from sentlab.assets.resolve import resolve_model
    from sentlab.config import load_params
    from sentlab.data.tags import pos_targets

    params = load_params(REPO / "params.yaml", "quick")
    cols = {"text": [], "tokens": [], "pos": []}
    for f in sorted(Path("data/annotations/train").glob("*.parquet")):
        for k, v in pq.read_table(f, columns=list(cols)).to_pydict().items():
            cols[k] += v
    idx = np.random.default_rng(0).permutation(len(cols["text"]))[:rows]
    text, tokens, tags = ([cols[k][i] for i in idx] for k in ("text", "tokens", "pos"))
    path = str(resolve_model(params.model.backbone))
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    target = torch.from_numpy(pos_targets(tok, text, tokens, tags, params.train.max_length)).float()
    with torch.no_grad():
        x = torch.cat([model(**tok(text[i:i + 256], truncation=True, max_length=params.train.max_length,
                                   padding=True, return_tensors="pt")).last_hidden_state[:, 0]
                       for i in range(0, len(text), 256)])
    d = x.shape[1]
    pos = slice(d - round(d / 6), d)  # the Params default: the last round(d/6) dims
    n = rows - 2000
    prior = ((target[:n].sum(0) + 1 / target.shape[1]) / (n + 1)).log()

    def scores(logits, p):
        return {"CE": round(float(-(p * F.log_softmax(logits, -1)).sum(-1).mean()), 4),
                "word acc": round(float(p.gather(1, logits.expand_as(p).argmax(-1, keepdim=True)).mean()), 4)}

    print("majority tag (the prior)", scores(prior.expand_as(target[n:]), target[n:]))
    for name, dims in (("POS channel", pos), ("full [CLS]", slice(0, d))):
        w = torch.zeros(dims.stop - dims.start, target.shape[1], requires_grad=True)
        b = prior.clone().requires_grad_(True)
        opt = torch.optim.LBFGS([w, b], max_iter=500, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = -(target[:n] * F.log_softmax(x[:n, dims] @ w + b, -1)).sum(-1).mean() + 1e-3 * (w ** 2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            print(f"linear probe, {name} ({dims.stop - dims.start} dims)", scores(x[n:, dims] @ w + b, target[n:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["train", "probe"])
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--override", default="{}", help="JSON: methods.posbow_adv keys for this run")
    ap.add_argument("--rows", type=int, default=6000)
    a = ap.parse_args()
    torch.set_num_threads(2)
    train(a.precision, json.loads(a.override)) if a.mode == "train" else probe(a.rows)


if __name__ == "__main__":
    main()
