"""SG-OPT against galsang/SG-BERT (issue #53 §1).

Repository: https://github.com/galsang/SG-BERT at commit 23d5ebec1ab7834ac5e74a8597117d366963a41e (its HEAD):
``git clone https://github.com/galsang/SG-BERT DIR && git -C DIR checkout 23d5ebec1ab7834ac5e74a8597117d366963a41e``.

The released side is the repository's ``loss.Loss`` (the SG-OPT objective ``NTXentLoss``, the shared projection
head, the frozen copy ``original``, the regulariser ``compute_diff``) built with ``training.py``'s defaults
(``--obj SG-OPT --T 1e-2 --lamb 0.1 --pooling cls --pooling2 mean --lmin 0 --lmax -1 --freeze --clone``).
sentlab's side is ``methods.sg_opt`` at its defaults. Both on MiniLM, the harness's batch, dropout off.

Made identical by construction: the projection head's initial weights (theirs draws them from torch's global
RNG, sentlab's from its seed) are sentlab's, copied into theirs; BERT_T is moved off BERT_F before the loss (the
same seeded offset, 1e-4·N(0, 1), added to every trainable tensor of both tuned copies after the frozen copies
were taken), so that the regulariser λ·Σ‖θ_T − θ_F‖² and its gradient are not zero and are compared too.

The extra ``step_norm`` is ‖θ₁ − θ₀‖ of BERT_T and the head after one optimiser step (lr 1e-5, after clipping
the global gradient norm at 1): the released side with the optimiser of its ``modules.SentenceTransformer.fit``
as ``training.py`` calls it — transformers' old ``AdamW(lr, correct_bias=True, betas=(0.9, 0.9), eps=1e-6)`` over
fit's two groups, weight decay 0.01 on every tensor but biases and LayerNorm (fit's own ``weight_decay=0.01``
sets the groups' decay; ``--weight_decay 0`` only reaches the optimiser's default, which the groups override) —
written here from that rule with ``sentlab.nn.optim.AdamWLegacy(correct_bias=True, decay='after')``, as
transformers 4.x no longer has it; sentlab's with ``SGOPT.configure_optimizers``.

Shims: ``modules.py`` cannot be imported on current sentence-transformers (it imports ``__DOWNLOAD_SERVER__``,
gone since 2.x), and ``loss.py`` imports ``Transformer`` / ``SentenceTransformer`` from it: a stub ``modules``
module stands in for the import, and the model ``Loss`` receives is a two-module ``nn.Sequential`` written here
that does what its ``modules.Transformer.forward`` + ``models.Pooling(cls)`` do (the backbone with
``output_hidden_states``; ``token_embeddings``, ``cls_token_embeddings``, ``all_layer_embeddings``,
``attention_mask``; ``sentence_embedding`` = the [CLS] state). The attention key biases are left out of the
comparison (gradient zero analytically, rounding noise on both sides).

Agrees at: training.py's defaults. The paper profile uses the same (methods.sg_opt defaults).
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, step_norm, SENTENCES, Outputs, grads_of, load_backbone, main, on_path,  # noqa: E402, F401
                      set_determinism)

CASE = "sg_opt"
REPOSITORY = "galsang/SG-BERT"
COMMIT = "23d5ebec1ab7834ac5e74a8597117d366963a41e"
SETTING = ("training.py defaults: --obj SG-OPT, T 0.01, lamb 0.1, [CLS] vs mean-pooled layers 0..L of the frozen "
           "copy, embeddings frozen, 4096-wide shared head; dropout off; one step of fit's AdamW "
           "(betas 0.9/0.9, eps 1e-6, bias correction, decay 0.01 but bias/LayerNorm)")
STEP_LR = 1e-5
OFFSET = 1e-4


def _common(n: str):
    if n.endswith("attention.self.key.bias"):
        return None
    for prefix, new in (("encoder.", ""), ("head.", "head."), ("model.0.auto_model.", ""),
                        ("projection_head.", "head.net.")):
        if n.startswith(prefix):
            return new + n[len(prefix):]
    return None


def _offset(named_params) -> None:
    """The same seeded offset on every trainable tensor of a tuned encoder (by name order)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, p in sorted(named_params, key=lambda x: x[0]):
            if p.requires_grad:
                p.add_(OFFSET * torch.randn(p.shape, generator=gen))


def _method():
    from sentlab.config import TrainParams
    from sentlab.methods import get_method

    model, tok = load_backbone()
    cls = get_method("sg_opt")
    params = cls.Params().resolved(TrainParams(batch_size=len(SENTENCES), max_length=64, lr=STEP_LR))
    m = cls(model, tok, params, seed=0)
    _offset(m.encoder.named_parameters())
    return m


def sentlab_outputs() -> Outputs:
    from sentlab.methods.base import Batch
    from sentlab.train.loop import clip_gradients

    m = _method()
    m.train()
    out = m(Batch(list(SENTENCES), draw=0, seed=0))
    out["loss"].backward()
    grads = grads_of(m.named_parameters(), rename=_common)
    opt = m.configure_optimizers()
    clip_gradients(opt, 1.0, m.grad_clip)
    trained = [p for p in m.parameters() if p.requires_grad]
    return Outputs(loss=float(out["loss"].detach()), grads=grads,
                   extra={"contrastive": float(out["contrastive"]), "l2_to_fixed": float(out["l2_to_fixed"]),
                          "step_norm": step_norm(trained, opt.step)})


class _Transformer(nn.Module):
    """What SG-BERT's ``modules.Transformer.forward`` returns, on a current transformers BertModel."""

    def __init__(self, auto_model):
        super().__init__()
        self.auto_model = auto_model

    def forward(self, features):
        out = self.auto_model(**features, output_hidden_states=True, return_dict=True)
        features.update({"token_embeddings": out.last_hidden_state, "cls_token_embeddings": out.last_hidden_state[:, 0],
                         "attention_mask": features["attention_mask"], "all_layer_embeddings": out.hidden_states})
        return features


class _ClsPooling(nn.Module):
    def forward(self, features):
        features["sentence_embedding"] = features["cls_token_embeddings"]
        return features


class _SentenceTransformer(nn.Sequential):
    def _first_module(self):
        return self[0]


def released_outputs(checkout: Path) -> Outputs:
    from sentlab.nn.optim import AdamWLegacy

    ours = _method()
    backbone, tok = load_backbone()
    enc = dict(tok(list(SENTENCES), padding=True, truncation=True, max_length=64, return_tensors="pt"))
    stub = types.ModuleType("modules")
    stub.Transformer = stub.SentenceTransformer = None
    had = sys.modules.get("modules")
    sys.modules["modules"] = stub
    try:
        with on_path(checkout):
            import loss as released

            model = _SentenceTransformer(_Transformer(backbone), _ClsPooling())
            args = argparse.Namespace(lmax=-1, lmin=0, freeze=True, obj="SG-OPT", device="cpu",
                                      batch_size=len(SENTENCES), T=1e-2, pooling="cls", pooling2="mean", lamb=0.1,
                                      clone=True)
            loss_model = released.Loss(model, args)
            loss_model.projection_head.load_state_dict(ours.head.net.state_dict())
            _offset(model[0].auto_model.named_parameters())   # after Loss took its frozen copy
            loss_model.train()                                   # fit() does so (dropout is off)
            feats = {k: v.clone() for k, v in enc.items()}
            loss = loss_model([feats], None)
            # the two terms, recomputed with the module's own pieces for the extras
            with torch.no_grad():
                diff = float(loss_model.compute_diff())
            loss.backward()
            grads = grads_of(loss_model.named_parameters(), rename=_common)
            named = [(n, p) for n, p in loss_model.named_parameters() if p.requires_grad]
            no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
            groups = [{"params": [p for n, p in named if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
                      {"params": [p for n, p in named if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
            opt = AdamWLegacy(groups, lr=STEP_LR, betas=(0.9, 0.9), eps=1e-6, weight_decay=0.0, correct_bias=True,
                              decay="after")
            torch.nn.utils.clip_grad_norm_(loss_model.parameters(), 1.0)
            step = step_norm([p for _, p in named], opt.step)
    finally:
        if had is None:
            sys.modules.pop("modules", None)
        else:
            sys.modules["modules"] = had
    total = float(loss.detach())
    return Outputs(loss=total, grads=grads,
                   extra={"contrastive": total - 0.1 * diff, "l2_to_fixed": diff, "step_norm": step})


def _control():
    import sentlab.methods.sg_opt as mod

    orig = mod.sg_opt_loss
    return patched(mod, "sg_opt_loss", lambda c, h, t: orig(c.roll(1, 0), h, t))


CONTROL = ("each [CLS] against another sentence's layers (a wrong order)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING,
                  golden_grads=["encoder.layer.0.attention.self.query.weight", "encoder.layer.5.output.dense.weight",
                                "pooler.dense.weight", "head.net.0.weight", "head.net.2.weight"],
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
