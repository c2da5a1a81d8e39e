"""Unsupervised SimCSE (sentlab ``simcse``) against princeton-nlp/SimCSE's ``cl_forward`` (issue #53 §1).

Repository: https://github.com/princeton-nlp/SimCSE, commit 49fa580a853752ede55b8c76d9debf748e214d3f (the newest,
2024-10-16; ``simcse/models.py`` last changed long before it)::

    git clone https://github.com/princeton-nlp/SimCSE DIR && \
        git -C DIR checkout 49fa580a853752ede55b8c76d9debf748e214d3f

Their side: ``simcse.models.BertForCL`` built from the MiniLM folder with the ``model_args`` of
``run_unsup_example.sh`` (``pooler_type cls``, ``temp 0.05``, ``mlp_only_train``, no MLM, hard-negative weight 0),
fed the collator's layout ``input_ids (bs, 2, len)`` (each sentence twice), ``cl_forward``'s loss. sentlab's side:
``simcse`` with τ 0.05 on the same MiniLM weights, its doubled batch ``[s_1..s_N, s_1..s_N]``.

Setting at which they agree: dropout off on both (then the two views are identical, which an exact check does not
mind), the MLP's initial weights copied from sentlab's head into theirs (both are N(0, 0.02) / zero by
``_init_weights``, drawn from different RNG calls), one thread. Gradients compared: every backbone tensor
(``bert.`` stripped from their names) and ``mlp.dense.*``; the six attention key biases are skipped (their gradient
is zero analytically, rounding noise of ~1e-10 numerically: :func:`key_biases_zeroed`).

Shims (transformers 5.24, torch 2.13): one, :func:`released_class`: a subclass that calls ``post_init()`` at the end
of ``BertForCL.__init__`` (transformers 5's ``from_pretrained`` reads ``all_tied_weights_keys``, set there; SimCSE's
class, written for transformers 4.2, calls only ``init_weights()``). ``from_pretrained(path, model_args=...)`` still
passes ``model_args`` through to ``__init__``; MiniLM's checkpoint has no ``mlp.*`` tensors, so transformers
initialises them (we overwrite them as said).

The paper profile's ``simcse`` is this setting with dropout on (0.1), batch 64, lr 3e-5, max length 32, 1 epoch
of the 10^6 Wikipedia sentences, [CLS] without the MLP at test (``--mlp_only_train``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, SENTENCES, Outputs, grads_of, load_backbone, main, minilm_path,  # noqa: E402
                      no_dropout, on_path)
from _harness import set_determinism  # noqa: E402, F401 (the golden test calls it)

CASE = "simcse_unsup"
REPOSITORY = "princeton-nlp/SimCSE"
COMMIT = "49fa580a853752ede55b8c76d9debf748e214d3f"
SETTING = "pooler cls + MLP, temp 0.05, dropout off, MiniLM, MLP weights shared"
TEMPERATURE = 0.05
MAX_LENGTH = 32
GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.2.attention.self.query.weight",
                "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]


def model_args(**kw) -> SimpleNamespace:
    """SimCSE's ``ModelArguments`` fields that ``BertForCL`` reads (train.py's defaults, then ``kw``)."""
    return SimpleNamespace(**({"pooler_type": "cls", "temp": TEMPERATURE, "hard_negative_weight": 0.0,
                               "do_mlm": False, "mlm_weight": 0.1, "mlp_only_train": True} | kw))


def key_biases_zeroed(grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``grads`` with every attention key bias's gradient set to exactly 0: it is zero analytically (softmax is
    invariant to the shift ``q·b_k`` adds to a whole row of scores) and only rounding noise (~1e-10, relative
    differences up to 0.5) numerically; the harness then lists these tensors as skipped."""
    return {n: torch.zeros_like(g) if n.endswith("attention.self.key.bias") else g for n, g in grads.items()}


def backbone_name(name: str) -> str:
    """sentlab's method parameter name -> the common name (the backbone's own, heads as they are)."""
    return name[len("encoder."):] if name.startswith("encoder.") else name


def released_name(name: str) -> str:
    """BertForCL's parameter name -> the common name."""
    return name[len("bert."):] if name.startswith("bert.") else name


def sentlab_method(method_id: str = "simcse", backbone=None, **params):
    """sentlab's ``method_id`` on MiniLM (or ``backbone``), dropout off, τ 0.05, seed 0."""
    from sentlab.methods import get_method

    cls = get_method(method_id)
    encoder, tok = load_backbone(backbone, add_pooling_layer=False)
    method = cls(encoder, tok, cls.Params(max_length=MAX_LENGTH, temperature=TEMPERATURE, **params), seed=0)
    return no_dropout(method.train())


def released_class():
    """Their ``BertForCL`` with the one shim transformers 5 needs: ``post_init()`` at the end of ``__init__``
    (transformers >= 5 sets ``all_tied_weights_keys`` there and ``from_pretrained`` reads it; SimCSE's class,
    written for transformers 4.2, calls only ``init_weights()``). Call inside :func:`on_path`."""
    from simcse.models import BertForCL

    class BertForCLShim(BertForCL):
        def __init__(self, config, *args, **kwargs):
            super().__init__(config, *args, **kwargs)
            self.post_init()

    return BertForCLShim


def released_model(checkout: Path, backbone=None, like=None, **kw):
    """Their ``BertForCL`` from the backbone folder with :func:`model_args` (``kw``), dropout off; its MLP (and
    any module named in ``like``'s state) set to ``like``'s initial weights."""
    import transformers

    transformers.logging.set_verbosity_error()
    model = released_class().from_pretrained(str(backbone or minilm_path()), model_args=model_args(**kw))
    model = model.float().train()
    if like is not None:
        with torch.no_grad():
            model.mlp.dense.weight.copy_(like.mlp.dense.weight)
            model.mlp.dense.bias.copy_(like.mlp.dense.bias)
    return no_dropout(model)


def sentlab_outputs() -> Outputs:
    from sentlab.methods.base import Batch

    method = sentlab_method()
    out = method(Batch(list(SENTENCES)))
    out["loss"].backward()
    return Outputs(float(out["loss"].detach()),
                   key_biases_zeroed(grads_of(method.named_parameters(), rename=backbone_name)))


def released_outputs(checkout: Path) -> Outputs:
    like = sentlab_method()   # the MLP's initial weights, as sentlab draws them (seeded)
    enc = like.encode_text(SENTENCES)
    with on_path(checkout):
        model = released_model(checkout, like=like)
        # the collator's layout: (bs, num_sent=2, len), sentence i twice
        batch = {k: torch.stack([v, v], dim=1) for k, v in enc.items()}
        out = model(**batch, return_dict=True)
        out.loss.backward()
        return Outputs(float(out.loss.detach()),
                       key_biases_zeroed(grads_of(model.named_parameters(), rename=released_name)))


def _control():
    import sentlab.methods.simcse as mod

    orig = mod.in_batch_info_nce
    return patched(mod, "in_batch_info_nce", lambda z1, z2, t: orig(z1, z2.roll(1, 0), t))


CONTROL = ("positives shifted by one row (a wrong order)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
