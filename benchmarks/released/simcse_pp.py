"""SimCSE++ (off-dropout + DCL): sentlab's ``simcse_pp`` against the authors' released code (issue #53 §1, §3.9).

Repository: Jiahao004/SimCSE-plus-plus at its first release, commit 899e49b7be62b1b841a06ef4100ed84736795c34
(2022-09-21, "Add files via upload": it adds ``simcse/models_re_vicreg.py``, the model ``run_re_vicreg.sh`` /
``train_re_vicreg.py`` train). Later commits rewrite that file (c171daa, 2022-12-23: the views are rebuilt from
the first sentence, an ``n_samples`` / ``dim_scd`` variant is added) and HEAD has the DCL term commented out, so
the number SimCSE++ reports is this commit's code::

    git clone https://github.com/Jiahao004/SimCSE-plus-plus DIR
    git -C DIR checkout 899e49b7be62b1b841a06ef4100ed84736795c34
    python benchmarks/released/simcse_pp.py --released DIR

What runs of theirs: ``simcse/models_re_vicreg.py``'s ``BertForCL.forward`` (its ``cl_forward``: the two dropout
views of one doubled pass, the off-dropout pass with every ``nn.Dropout`` of the encoder in eval mode, the loss
``−m·s(z1, z2) + logsumexp([s(z0_i, z0_j)]_{j≠i}, m·s(z1, z2))`` with the diagonal pushed down by log 1e-45, and
``sw_weight`` × the dimension-wise term over ``BatchNorm1d(affine=False)`` of both views, τ_DCL = ``sw_temp``),
with ``model_args`` as ``run_re_vicreg.sh`` sets them (pos_ratio 1, temp 0.05, pooler cls, mlp_only_train) and
``train_re_vicreg.py``'s defaults (sw_temp 5, sw_weight 0.1). Its trainer is SimCSE's (``compute_loss`` =
``model(**inputs)``). One shim, :func:`_shimmed`: a subclass that calls ``post_init()`` at the end of
``BertForCL.__init__`` (transformers 5's ``from_pretrained`` needs it; the class, written for transformers 4.2,
calls only ``init_weights()``).

The setting at which the two agree (one step on the harness's batch of 8, MiniLM, the same MLP weights):

* hidden-state dropout ON with fixed masks, identical by construction (:class:`FixedDropout`: each
  embeddings / attention-output / feed-forward-output dropout draws its p = 0.1 mask from a seed of (module,
  sentence, view), whatever the row layout: sentlab doubles the batch as ``[x; x]``, the release interleaves
  ``[x_1, x_1, x_2, x_2, …]``); attention-probability dropout off (current transformers applies it inside the
  attention kernel, not through a module). So z1 ≠ z2 ≠ z0 and the check sees which pass feeds which term (with
  dropout off the three are equal and a swap of z0 and z1 would pass);
* extras: the same step with dropout off altogether (``loss_dropout_off``) and with the DCL weight 0
  (``loss_no_dcl``: the off-dropout term alone).

Gradients: every encoder tensor (the backbone's own names) and ``mlp.dense.*``; the attention key biases are
exactly zero analytically (set to 0 on both sides and skipped: rounding noise otherwise); BERT's pooler has none.

The paper profile's ``simcse_pp``: this loss with SimCSE's dropout 0.1 everywhere, batch 64, lr 3e-5, max length
32, 1 epoch, dev every 125 steps, [CLS] without the MLP at test.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, SENTENCES, Outputs, grads_of, import_released, load_backbone, main, minilm_path,  # noqa: E402
                      no_dropout, on_path, set_determinism)

__all__ = ["set_determinism", "sentlab_outputs", "released_outputs"]   # set_determinism: tests/test_released_golden.py

CASE = "simcse_pp"
REPOSITORY = "Jiahao004/SimCSE-plus-plus"
COMMIT = "899e49b7be62b1b841a06ef4100ed84736795c34"
SETTING = ("hidden dropout 0.1 with fixed identical masks per (module, sentence, view), attention dropout off; "
           "pos_ratio 1, temp 0.05, DCL weight 0.1, tau 5; extras: dropout off, DCL off")
TEMP, POS_RATIO, DCL_WEIGHT, DCL_TEMP, MAX_LEN, P_DROP = 0.05, 1.0, 0.1, 5.0, 32, 0.1
GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.2.attention.self.query.weight",
                "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]


class FixedDropout(nn.Dropout):
    """A dropout whose mask is a function of (this module's name, the sentence, the view): row ``r`` of the input
    is sentence ``i`` view ``v`` by ``layout`` (``stacked``: ``[x; x]``, i = r mod B, v = r div B; ``interleaved``:
    i = r div 2, v = r mod 2). An ``nn.Dropout``, so eval mode (and the release's ``layer.eval()``) turns it off."""

    def __init__(self, name: str, p: float, layout: str):
        super().__init__(p)
        self.name, self.layout = name, layout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        n = x.size(0) // 2
        rows = []
        for r in range(x.size(0)):
            i, v = (r % n, r // n) if self.layout == "stacked" else (r // 2, r % 2)
            g = torch.Generator().manual_seed(zlib.crc32(f"{self.name}:{i}:{v}".encode()))
            rows.append((torch.rand(x.shape[1:], generator=g) >= self.p).to(x.dtype) / (1 - self.p))
        return x * torch.stack(rows)


def fixed_dropout(encoder: nn.Module, layout: str, p: float = P_DROP) -> nn.Module:
    """``encoder`` (a BertModel) with its hidden-state dropouts replaced by :class:`FixedDropout` (names relative
    to the BertModel: the same on both sides); the attention-probability dropouts stay at 0."""
    for name, mod in list(encoder.named_modules()):
        for child, sub in list(mod.named_children()):
            full = f"{name}.{child}" if name else child
            if isinstance(sub, nn.Dropout) and not full.endswith("attention.self.dropout"):
                setattr(mod, child, FixedDropout(full, p, layout))
    return encoder


def _mlp_state(hidden: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {"dense.weight": torch.randn(hidden, hidden, generator=g) * 0.02, "dense.bias": torch.zeros(hidden)}


def key_biases_zeroed(grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``grads`` with each attention key bias's gradient set to exactly 0: zero analytically (softmax ignores the
    shift ``q·b_k`` adds to a whole row of scores), rounding noise numerically; the harness lists them as skipped."""
    return {n: torch.zeros_like(g) if n.endswith("attention.self.key.bias") else g for n, g in grads.items()}


def _sentlab_step(dropout: bool, dcl_weight: float):
    from sentlab.config import TrainParams
    from sentlab.methods import get_method
    from sentlab.methods.base import Batch

    encoder, tok = load_backbone(add_pooling_layer=False)
    if dropout:
        fixed_dropout(encoder, "stacked")
    cls = get_method("simcse_pp")
    params = cls.Params(temperature=TEMP, off_dropout=True, pos_ratio=POS_RATIO, dcl_weight=dcl_weight,
                        dcl_temperature=DCL_TEMP).resolved(TrainParams(batch_size=len(SENTENCES), max_length=MAX_LEN,
                                                                       lr=3e-5))
    m = cls(encoder, tok, params, seed=0).train()
    m.mlp.load_state_dict(_mlp_state(encoder.config.hidden_size))
    out = m(Batch(list(SENTENCES), draw=0, seed=0))
    return m, out["loss"]


def sentlab_outputs() -> Outputs:
    m, loss = _sentlab_step(dropout=True, dcl_weight=DCL_WEIGHT)
    loss.backward()
    grads = grads_of(m.encoder.named_parameters()) | grads_of(m.mlp.named_parameters(), prefix="mlp.")
    extra = {"loss_dropout_off": float(_sentlab_step(dropout=False, dcl_weight=DCL_WEIGHT)[1].detach()),
             "loss_no_dcl": float(_sentlab_step(dropout=True, dcl_weight=0.0)[1].detach())}
    return Outputs(loss=float(loss.detach()), grads=key_biases_zeroed(grads), extra=extra)


def _shimmed(cls):
    """``cls`` with ``post_init()`` at the end of ``__init__`` (transformers 5 needs it for ``from_pretrained``)."""

    class Shimmed(cls):
        def __init__(self, config, *args, **kwargs):
            super().__init__(config, *args, **kwargs)
            self.post_init()

    return Shimmed


def _released_step(models, dropout: bool, sw_weight: float):
    args = SimpleNamespace(pooler_type="cls", temp=TEMP, pos_ratio=POS_RATIO, sw_temp=DCL_TEMP, sw_weight=sw_weight,
                           do_mlm=False, mlp_only_train=True, hard_negative_weight=0.0, mlm_weight=0.1)
    model = _shimmed(models.BertForCL).from_pretrained(minilm_path(), model_args=args)
    no_dropout(model.float().train())
    if dropout:
        fixed_dropout(model.bert, "interleaved")
    model.mlp.load_state_dict(_mlp_state(model.config.hidden_size))
    _, tok = load_backbone()
    enc = tok(list(SENTENCES), padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
    inputs = {k: torch.stack([v, v], dim=1) for k, v in enc.items()}   # its collator: (B, 2, L), the pair (x, x)
    model.train()                                                        # as the Trainer's training_step
    return model, model(**inputs).loss


def released_outputs(checkout: Path) -> Outputs:
    root = Path(checkout)
    with on_path(root):
        models = import_released(root, "simcse.models_re_vicreg")
        model, loss = _released_step(models, dropout=True, sw_weight=DCL_WEIGHT)
        loss.backward()
        extra = {"loss_dropout_off": float(_released_step(models, dropout=False, sw_weight=DCL_WEIGHT)[1].detach()),
                 "loss_no_dcl": float(_released_step(models, dropout=True, sw_weight=0.0)[1].detach())}
    grads = grads_of(model.bert.named_parameters()) | grads_of(model.mlp.named_parameters(), prefix="mlp.")
    return Outputs(loss=float(loss.detach()), grads=key_biases_zeroed(grads), extra=extra)


def _control():
    import sentlab.methods.simcse_pp as mod

    return patched(mod, "off_dropout_info_nce", lambda z1, z2, z0, t, *a, **k: mod.in_batch_info_nce(z1, z2, t))


CONTROL = ("the off-dropout negatives dropped (plain in-batch InfoNCE)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
