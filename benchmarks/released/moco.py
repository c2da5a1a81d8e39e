"""MoCo-BERT (``moco``) against the authors' released code: Namco0816/PT-BERT, its MoCo model.

Repository: https://github.com/Namco0816/PT-BERT, commit dba403c01aa2acdf8659b7a7167d41471aacb656 (PT-BERT's release,
whose ``--cl_type bert_moco`` is the MoCo-BERT baseline of its Table 3)::

    git clone https://github.com/Namco0816/PT-BERT DIR && git -C DIR checkout dba403c01aa2acdf8659b7a7167d41471aacb656

The released model is ``ptbert/models.py: BertForMoCo`` (``moco_cl_forward``: the online [CLS] + MLP against the
momentum encoder's [CLS] + momentum MLP of the current batch and a list of earlier batches, newest first, InfoNCE
over cos/τ). Its trainer (``ptbert/mocotrainers.py``) moves the momentum copies only under ``cl_type ==
'bert_poly'``: **the MoCo model's key encoder and key MLP never move** (and its key encoder starts from BERT's
random init: deep-copied before ``init_weights``, not in the checkpoint). So sentlab's ``moco`` is compared at
``momentum: 1.0`` (θk ← 1·θk + 0·θq: the keys' weights stay at their start, as the release's do); sentlab's
default λ = 0.885 is the paper's MoCo and this case's mutation control, which the comparison must catch.

**Four optimiser steps** (issue #66), batch 8, MiniLM, dropout off, each side its own loop from an empty queue of
two batches: the release's forward (its list ``momentum_queue``, ``queue_size`` 2), its trainer's
``clip_grad_norm_(model.parameters(), 1.0)`` and transformers 4.2's AdamW (``sentlab.nn.optim.AdamWLegacy
(correct_bias=True)``, lr 1e-4); sentlab's forward, ``clip_gradients``, ``configure_optimizers()``
(``optimizer: adamw_transformers``), ``after_optimizer_step()``. Given to both: the online MLP (N(0, 0.02), zero
bias), the key MLP and the key encoder (the online ones plus a fixed perturbation, so the keys are hard negatives
and which module each branch uses shows in the loss). Each step compares the loss, the gradients (attention key
biases: zero analytically, skipped), the key encoder and key MLP, and the queue carried to the next step (as a set
of rows; the release keeps whole batches).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, init_weights_421, Outputs, grads_of, import_released, load_backbone, main,  # noqa: E402
                      on_path, sentlab_steps, set_determinism, step_sentences)

__all__ = ["set_determinism", "sentlab_outputs", "released_outputs"]   # set_determinism: the golden test

CASE = "moco"
REPOSITORY = "Namco0816/PT-BERT"
COMMIT = "dba403c01aa2acdf8659b7a7167d41471aacb656"
SETTING = ("4 steps of batch 8 from an empty queue of 2 batches, each side its own AdamW (lr 1e-4; sentlab's "
           "optimizer adamw_transformers) and clipping at 1; sentlab momentum 1.0 (the release's trainer never moves "
           "BertForMoCo's key encoder); MiniLM, [CLS] + MLP, τ 0.05, dropout off")
B, QUEUED, MAX_LEN, STEPS, STEP_LR, CLIP = 8, 2, 32, 4, 1e-4, 1.0
GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.3.attention.self.query.weight",
                "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]


def _shared(hidden: int, encoder_state: dict) -> dict:
    """One draw for both sides: the online MLP, the key MLP and key encoder (perturbed copies)."""
    g = torch.Generator().manual_seed(66)
    mlp = {"dense.weight": torch.randn(hidden, hidden, generator=g) * 0.02, "dense.bias": torch.zeros(hidden)}

    def perturb(v: torch.Tensor, scale: float) -> torch.Tensor:
        if not v.is_floating_point():
            return v.clone()
        return v + scale * v.std().nan_to_num(0.02).clamp_min(1e-3) * torch.randn(v.shape, generator=g)

    return {"mlp": mlp, "key_mlp": {k: perturb(v, 0.05) for k, v in mlp.items()},
            "key_encoder": {k: perturb(v, 0.3) for k, v in encoder_state.items()}}


def _zero_key_biases(grads: dict) -> dict:
    return {n: torch.zeros_like(g) if n.endswith("attention.self.key.bias") else g for n, g in grads.items()}


def _batch_of(tok, step: int):
    return dict(tok(step_sentences(step), padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt"))


def _sentlab_momentum_name(n: str):
    head, rest = n.split(".", 1)
    if head == "key_encoder" and not rest.startswith("pooler."):   # the pooler: never used for a key
        return rest
    return f"mlp.{rest}" if head == "key_mlp" else None


def sentlab_outputs() -> Outputs:
    from sentlab.methods import get_method
    encoder, tok = load_backbone()
    shared = _shared(encoder.config.hidden_size, encoder.state_dict())
    cls = get_method("moco")
    params = cls.Params(momentum=1.0, queue_size=B * (1 + QUEUED), temperature=0.05, batch_size=B,
                        max_length=MAX_LEN, lr=STEP_LR, optimizer="adamw_transformers")
    m = cls(encoder, tok, params, seed=0)
    m.train()
    with torch.no_grad():
        m.mlp.load_state_dict(shared["mlp"])
        m.key_mlp.load_state_dict(shared["key_mlp"])
        m.key_encoder.load_state_dict(shared["key_encoder"])
    opt = m.configure_optimizers()
    return sentlab_steps(m, opt, STEPS, CLIP, lambda t: {"query": _batch_of(tok, t), "key": _batch_of(tok, t)},
                         lambda: _zero_key_biases(grads_of(m.encoder.named_parameters())
                                                   | grads_of(m.mlp.named_parameters(), prefix="mlp.")),
                         _sentlab_momentum_name)


def released_outputs(checkout: Path) -> Outputs:
    from sentlab.nn.optim import AdamWLegacy

    encoder, tok = load_backbone()
    config = encoder.config
    shared = _shared(config.hidden_size, encoder.state_dict())
    with on_path(checkout):
        models = import_released(checkout, "ptbert.models")
        models.BertForMoCo.init_weights = init_weights_421   # shim: transformers 4.2.1's init_weights
        args = argparse.Namespace(queue_size=QUEUED, pooler_type="cls", temp=0.05, mlp_only_train=True,
                                  cl_type="bert_moco")
        model = models.BertForMoCo(config, model_args=args)
    model.train()
    with torch.no_grad():
        model.bert.load_state_dict(encoder.state_dict(), strict=False)
        model.momentum_encoder.load_state_dict(shared["key_encoder"], strict=False)
        model.mlp.load_state_dict(shared["mlp"])
        model.momentum_mlp.load_state_dict(shared["key_mlp"])
    model.momentum_queue = []
    opt = AdamWLegacy([p for p in model.parameters() if p.requires_grad], lr=STEP_LR, eps=1e-8, correct_bias=True)

    def rename(n: str):
        head, rest = n.split(".", 1)
        return rest if head == "bert" else (n if head == "mlp" else None)

    def momentum_name(n: str):
        head, rest = n.split(".", 1)
        return rest if head == "momentum_encoder" else (f"mlp.{rest}" if head == "momentum_mlp" else None)

    steps = []
    for t in range(STEPS):
        enc = _batch_of(tok, t)
        out = model(**{k: torch.stack([v, v], dim=1) for k, v in enc.items()}, return_dict=True)
        out.loss.backward()
        momentum = {momentum_name(n): p.detach().clone() for n, p in model.named_parameters() if momentum_name(n)}
        steps.append(Outputs(float(out.loss.detach()), _zero_key_biases(grads_of(model.named_parameters(),
                                                                                 rename=rename)),
                             extra={"candidates": float(out.logits.size(1))}, momentum=momentum,
                             queue=torch.cat(model.momentum_queue[:QUEUED]).detach().clone()))
        nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()            # mocotrainers.py: no momentum update for cl_type bert_moco
        model.zero_grad()
    return Outputs(steps[0].loss, steps[0].grads, extra=steps[0].extra, steps=steps)


def _control():
    import sentlab.methods.moco as mod

    orig = mod.momentum_update
    return patched(mod, "momentum_update", lambda online, key, m: orig(online, key, 0.885))


CONTROL = ("the momentum update on (λ 0.885, MoCo's and the paper's; the release never moves the keys' weights)",
           _control)


if __name__ == "__main__":
    set_determinism()
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
