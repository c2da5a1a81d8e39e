"""ESimCSE: sentlab's ``esimcse`` against the authors' released code (issue #53 §1).

Repository: caskcsg/sentemb (the ESimCSE release is its ``ESimCSE/`` folder), commit
5eeec55103c1da738761bf8c6a9c085c6ad1c9a1 (the newest; ``ESimCSE/`` last changed in fc7ca0d, 2022-10-24)::

    git clone https://github.com/caskcsg/sentemb DIR && git -C DIR checkout 5eeec55103c1da738761bf8c6a9c085c6ad1c9a1
    python benchmarks/released/esimcse.py --released DIR            # DIR or DIR/ESimCSE

What runs of theirs: ``esimcse/models.py``'s ``BertForCL`` (``model_args`` as ``run.sh`` sets them: momentum
0.995, pooler cls, temp 0.05, no MLM) and ``CLTrainer
.compute_loss`` of ``esimcse/trainers.py`` (the train pass with its momentum update, then the ``model.eval()``
pass of the momentum encoder that makes this batch's keys, then the queue ``pre_z1`` update). That function is
compiled alone from the checkout's source (:func:`_released_compute_loss`): ``trainers.py`` as a module imports
transformers-4.2-era Trainer internals (``default_hp_space`` …) and SentEval, which current transformers lacks;
its model code imports unchanged. One shim, :func:`_shimmed`: a subclass that calls ``post_init()`` at the end of
``BertForCL.__init__`` (transformers 5's ``from_pretrained`` reads ``all_tied_weights_keys``, set there; the
class, written for transformers 4.2, calls only ``init_weights()``).

The setting at which the two agree: **four optimiser steps** (issue #66), batch 8 (the harness's sentences, then
8 new ones a step), MiniLM, each side running its own loop:

* the release: ``compute_loss`` (its ``cl_forward`` moves the momentum encoder before the keys; the queue
  ``pre_z1`` starts empty and keeps ``cat((pre_z1, eval_z))[-neg_size:]``), ``loss.backward()``, its trainer's
  ``clip_grad_norm_(model.parameters(), 1.0)``, transformers 4.2's AdamW (``sentlab.nn.optim.AdamWLegacy
  (correct_bias=True)``, the rule of the AdamW its HF Trainer builds; weight decay 0 as run.sh leaves it);
* sentlab: the method's forward and backward, the loop's ``clip_gradients``, ``configure_optimizers()`` with
  ``optimizer: adamw_transformers``, ``after_optimizer_step()``; ``momentum_update: forward`` (the release's);
* ``neg_size`` = ``queue_size`` = 20: the queue fills at step 3 in the middle of a batch, so the rows it keeps
  show (issue #66 §1: sentlab kept the oldest batch's first rows, the release its last);
* dropout off (``no_dropout``), the same repetition views (sentlab's ``prepare``, ``dup_len_rule: code``, drawn
  once per step), the same MLP weights (a fixed N(0, 0.02) draw), the momentum encoder a copy of the pretrained
  encoder on both sides (the keys are then hard negatives, so the queue weighs in the loss; the release's random
  start is compared value for value with transformers 4.2.1's init in ``_fed_to_both.py``), a constant learning
  rate 1e-4 on both.

Each step compares the loss, every gradient (the backbone's names and ``mlp.dense.*``; attention key biases are
exactly zero, skipped), the momentum encoder that made the step's keys and the queue after the step as a set of
rows. Mutation control: sentlab's queue rule before #66.

The paper profile: ``momentum_init: random``, ``dup_len_rule: code``, ``momentum_update: forward``,
``queue_reset: epoch``, ``optimizer: adamw_transformers`` (the released run).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (SENTENCES, Outputs, grads_of, import_released, load_backbone, main, minilm_path,  # noqa: E402
                      no_dropout, on_path, patched, set_determinism, step_sentences)

__all__ = ["set_determinism", "sentlab_outputs", "released_outputs"]   # set_determinism: tests/test_released_golden.py

CASE = "esimcse"
REPOSITORY = "caskcsg/sentemb"
COMMIT = "5eeec55103c1da738761bf8c6a9c085c6ad1c9a1"
SETTING = ("4 steps of batch 8 from an empty queue of 20 (wraps inside a batch at step 3), each side its own "
           "AdamW (lr 1e-4; sentlab's optimizer adamw_transformers) and clipping at 1, momentum_update forward, "
           "momentum copy of the encoder, dropout off, sentlab's repetition views (dup_len_rule code) fed to both")
MOMENTUM, QUEUE, TEMP, MAX_LEN = 0.995, 160, 0.05, 32
STEPS, STEP_QUEUE, STEP_LR, CLIP = 4, 20, 1e-4, 1.0
GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.2.attention.self.query.weight",
                "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]


def _method(encoder, tok, queue: int = QUEUE, **kw):
    from sentlab.config import TrainParams
    from sentlab.methods import get_method

    cls = get_method("esimcse")
    params = cls.Params(momentum_init="copy", dup_len_rule="code", queue_size=queue, momentum=MOMENTUM,
                        temperature=TEMP, **kw).resolved(TrainParams(batch_size=len(SENTENCES), max_length=MAX_LEN,
                                                                     lr=STEP_LR))
    return cls(encoder, tok, params, seed=0)


def _mlp_state(hidden: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {"dense.weight": torch.randn(hidden, hidden, generator=g) * 0.02, "dense.bias": torch.zeros(hidden)}


def key_biases_zeroed(grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``grads`` with each attention key bias's gradient set to exactly 0: zero analytically (softmax ignores the
    shift ``q·b_k`` adds to a whole row of scores), rounding noise numerically; the harness lists them as skipped."""
    return {n: torch.zeros_like(g) if n.endswith("attention.self.key.bias") else g for n, g in grads.items()}


def _shimmed(cls):
    """``cls`` with ``post_init()`` at the end of ``__init__`` (transformers 5 needs it for ``from_pretrained``)."""

    class Shimmed(cls):
        def __init__(self, config, *args, **kwargs):
            super().__init__(config, *args, **kwargs)
            self.post_init()

    return Shimmed


def _released_compute_loss(source: Path):
    """``CLTrainer.compute_loss`` compiled alone from the checkout's ``esimcse/trainers.py`` (its module imports
    Trainer internals current transformers lacks); it needs only ``torch``."""
    tree = ast.parse(source.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CLTrainer")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "compute_loss")
    namespace = {"torch": torch}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(source), "exec"), namespace)
    return namespace["compute_loss"]


# --- several steps (issue #66): each side its own loop, queue, momentum encoder, optimiser and clipping ---------
def _step_views() -> list[dict]:
    """Each step's repetition views, drawn once by sentlab's ``prepare`` (draw t, seed 0) and fed to both."""
    from sentlab.methods.base import Batch

    encoder, tok = load_backbone()
    m = _method(encoder, tok, queue=STEP_QUEUE, momentum_update="forward")
    return [m.prepare(Batch(step_sentences(t), draw=t, seed=0)).features["views"] for t in range(STEPS)]


def sentlab_outputs() -> Outputs:
    """sentlab's run of ``STEPS`` steps as its training loop takes them: forward, backward, ``clip_gradients``
    (its per-group norm; one group here), the method's own AdamW, ``after_optimizer_step``."""
    from sentlab.methods.base import Batch
    from sentlab.train.loop import clip_gradients

    encoder, tok = load_backbone()
    views = _step_views()
    m = no_dropout(_method(encoder, tok, queue=STEP_QUEUE, momentum_update="forward",
                           optimizer="adamw_transformers")).train()
    m.mlp.load_state_dict(_mlp_state(encoder.config.hidden_size))
    opt = m.configure_optimizers()
    steps = []
    for t in range(STEPS):
        batch = Batch(step_sentences(t), draw=t, seed=0)
        batch.features = {"views": views[t]}
        out = m(batch)
        out["loss"].backward()
        grads = grads_of(m.encoder.named_parameters()) | grads_of(m.mlp.named_parameters(), prefix="mlp.")
        steps.append(Outputs(loss=float(out["loss"].detach()), grads=key_biases_zeroed(grads),
                             momentum={n: p.detach().clone() for n, p in m.key_encoder.named_parameters()},
                             queue=m.queue[: int(m.queue_len)].clone()))
        clip_gradients(opt, CLIP, getattr(m, "grad_clip", "per_group"))
        opt.step()
        opt.zero_grad(set_to_none=True)
        m.after_optimizer_step()
    return Outputs(loss=steps[0].loss, grads=steps[0].grads, steps=steps)


def released_outputs(checkout: Path) -> Outputs:
    """The release's run: ``BertForCL`` and ``CLTrainer.compute_loss`` (its momentum update inside the forward, its
    ``pre_z1`` queue), then its trainer's step: ``clip_grad_norm_(model.parameters(), 1.0)`` and transformers 4.2's
    ``AdamW`` (weight decay 0, as run.sh leaves it; its rule: ``sentlab.nn.optim.AdamWLegacy(correct_bias=True)``, eps
    1e-8), the learning rate constant on both sides."""
    from sentlab.nn.optim import AdamWLegacy

    root = Path(checkout)
    root = root / "ESimCSE" if (root / "ESimCSE" / "esimcse").is_dir() else root
    views = _step_views()
    backbone, _ = load_backbone()
    hidden = backbone.config.hidden_size
    args = SimpleNamespace(momentum=MOMENTUM, neg_size=STEP_QUEUE, do_mlm=False, pooler_type="cls", temp=TEMP,
                           mlp_only_train=True, hard_negative_weight=0.0, mlm_weight=0.1)
    with on_path(root):
        models = import_released(root, "esimcse.models")
        compute_loss = _released_compute_loss(root / "esimcse" / "trainers.py")
        model = _shimmed(models.BertForCL).from_pretrained(minilm_path(), model_args=args)
        no_dropout(model.float().train())
        model.mlp.load_state_dict(_mlp_state(hidden))
        model.momentum_model.load_state_dict(backbone.state_dict())   # θm = θe (its __init__'s copy, made real)
        for p in model.momentum_model.parameters():
            p.requires_grad_(False)
        opt = AdamWLegacy([p for p in model.parameters() if p.requires_grad], lr=STEP_LR, eps=1e-8,
                          correct_bias=True)
        trainer = SimpleNamespace(model_args=args, pre_z1=None, args=SimpleNamespace(past_index=-1),
                                  label_smoother=None)
        steps = []
        for t in range(STEPS):
            n = views[t]["input_ids"].size(0) // 2
            inputs = {k: torch.stack([v[:n], v[n:]], dim=1) for k, v in views[t].items()}
            loss = compute_loss(trainer, model, inputs)
            loss.backward()
            grads = grads_of(model.bert.named_parameters()) | grads_of(model.mlp.named_parameters(), prefix="mlp.")
            steps.append(Outputs(loss=float(loss.detach()), grads=key_biases_zeroed(grads),
                                 momentum={n: p.detach().clone() for n, p in model.momentum_model.named_parameters()},
                                 queue=trainer.pre_z1.clone()))
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            model.zero_grad()
    return Outputs(loss=steps[0].loss, grads=steps[0].grads, steps=steps)


def _old_queue_rule(self, keys: torch.Tensor) -> None:
    """The mutation control: sentlab's queue before issue #66, ``cat([keys, queue])[:size]`` (a full queue drops
    the oldest batch's last rows, the release its first)."""
    size, n = self.queue.size(0), self._queue_filled()
    merged = torch.cat([keys.detach().float(), self.queue[:n]], dim=0)[:size]
    self.queue[: merged.size(0)] = merged
    self._filled = merged.size(0)
    self.queue_len.fill_(self._filled)


def _control():
    from sentlab.methods.moco import MoCo

    return patched(MoCo, "_dequeue_and_enqueue", _old_queue_rule)


CONTROL = ("the queue before #66: cat([keys, queue])[:size] (keeps the oldest batch's first rows)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
