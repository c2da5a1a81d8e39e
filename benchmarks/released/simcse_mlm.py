"""SimCSE + MLM (sentlab ``simcse_mlm``) against princeton-nlp/SimCSE's ``cl_forward`` with ``--do_mlm``
(issue #53 §1).

Repository: https://github.com/princeton-nlp/SimCSE, commit 49fa580a853752ede55b8c76d9debf748e214d3f (the newest)::

    git clone https://github.com/princeton-nlp/SimCSE DIR && \\
        git -C DIR checkout 49fa580a853752ede55b8c76d9debf748e214d3f

Backbone: a hub-shaped bert-base-uncased stand-in with its MLM head (``_harness.bert_standin``: 2 layers, 64 wide,
random values of seed 0, ``initializer_range`` 0.2 so that sentences differ; MiniLM has no MLM head), written once
to ``$TMPDIR/sentlab_released_bert_standin_ir0p2``.

Their side: ``BertForCL`` with the ``model_args`` of ``run_unsup_example.sh`` plus ``--do_mlm`` (``mlm_weight``
0.1, train.py's default), its ``lm_head`` loaded as train.py does (``BertForPreTraining.from_pretrained(...)
.cls.predictions.state_dict()``), fed ``input_ids``/``mlm_input_ids``/``mlm_labels`` of shape ``(bs, 2, len)``.
sentlab's side: ``simcse_mlm`` (``lm_head: pretrained``, ``decoder: copy``, λ 0.1, 15 %). The corruption is drawn
once, by sentlab's :meth:`~sentlab.methods.simcse_mlm.SimCSEMLM.corrupt` (``Batch.rng``, seed 0, draw 0), and fed
to both: sentlab's doubled layout ``[s_1..s_N, s_1..s_N]`` becomes the collator's ``(bs, 2, len)`` (row i's two
views), the targets become ``mlm_labels`` (-100 elsewhere).

Setting at which they agree: dropout off, the MLP's initial weights copied from sentlab's head, one thread.
Gradients: every backbone tensor, ``mlp.dense.*`` and the MLM head under sentlab's names (``lm_head.dense.*``,
``lm_head.norm.*`` = their ``lm_head.transform.dense.*`` / ``transform.LayerNorm.*``; ``lm_head.bias`` = their
``lm_head.decoder.bias``; ``lm_decoder.weight`` = their ``lm_head.decoder.weight``); attention key biases skipped
(zero analytically). ``extra``: the InfoNCE and MLM terms apart (theirs recomputed from their logits and the MLM
forward of their encoder).

Shims: the ``post_init()`` one of ``simcse_unsup``. And a difference of transformers 5 that needs no shim: its
``BertLMPredictionHead`` keeps ``decoder.bias`` and ``bias`` as two parameters (in transformers 4, SimCSE's, they
are one); train.py's ``load_state_dict`` gives both the checkpoint's bias and ``decoder`` uses ``decoder.bias``
only, so the forward and the gradient are transformers 4's, on ``decoder.bias`` (``bias`` gets none).

The paper profile's ``simcse_mlm`` is this on bert-base-uncased (its pretrained MLM head) with dropout on and
SimCSE's unsupervised settings (batch 64, lr 3e-5, max length 32); its paper number (PaSeR Table 1's 58.57) is
shown without a Δ (docs/methods.md#simcse-with-mlm).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import patched, SENTENCES, Outputs, bert_standin, grads_of, main, on_path, set_determinism  # noqa: E402, F401
from simcse_unsup import (COMMIT, REPOSITORY, backbone_name, key_biases_zeroed, released_model,  # noqa: E402
                          released_name)
from simcse_unsup import sentlab_method as _method  # noqa: E402

CASE = "simcse_mlm"
SETTING = ("pooler cls + MLP, temp 0.05, do_mlm (mlm_weight 0.1, 15 %), BERT stand-in with its MLM head, "
           "dropout off, MLP weights shared, masks fed to both")
MLM_WEIGHT = 0.1
GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.1.attention.self.query.weight",
                "mlp.dense.weight", "lm_head.dense.weight", "lm_decoder.weight"]
HEAD_NAMES = {"lm_head.transform.dense.weight": "lm_head.dense.weight",
              "lm_head.transform.dense.bias": "lm_head.dense.bias",
              "lm_head.transform.LayerNorm.weight": "lm_head.norm.weight",
              "lm_head.transform.LayerNorm.bias": "lm_head.norm.bias",
              "lm_head.decoder.bias": "lm_head.bias", "lm_head.decoder.weight": "lm_decoder.weight"}


STANDIN_INIT = 0.2   # initializer_range of the stand-in: at BERT's 0.02 a random 2-layer model maps every sentence
                     # to one [CLS] direction (cosines 1.0000), an InfoNCE whose gradient is rounding noise


def standin() -> Path:
    return bert_standin(Path(tempfile.gettempdir()) / "sentlab_released_bert_standin_ir0p2",
                        initializer_range=STANDIN_INIT)


def sentlab_method():
    return _method("simcse_mlm", backbone=standin(), mlm_weight=MLM_WEIGHT, lm_head="pretrained", decoder="copy")


def the_batch():
    from sentlab.methods.base import Batch

    return Batch(list(SENTENCES), seed=0, draw=0)


def sentlab_outputs() -> Outputs:
    method = sentlab_method()
    out = method(method.prepare(the_batch()))
    out["loss"].backward()
    return Outputs(float(out["loss"].detach()),
                   key_biases_zeroed(grads_of(method.named_parameters(), rename=backbone_name)),
                   {"loss_cl": float(out["loss_cl"]), "loss_mlm": float(out["loss_mlm"])})


def their_name(name: str):
    return HEAD_NAMES.get(name, released_name(name)) if name != "lm_head.bias" else None


def released_outputs(checkout: Path) -> Outputs:
    like = sentlab_method()   # the MLP's initial weights and the corruption, as sentlab draws them (seeded)
    feats = like.prepare(the_batch()).features
    enc, n = feats["enc"], len(SENTENCES)
    labels = torch.full_like(feats["mlm"]["input_ids"], -100).flatten()
    labels[feats["mlm_index"]] = feats["mlm_targets"]
    labels = labels.view_as(feats["mlm"]["input_ids"])

    def pairs(v):   # sentlab's doubled rows [view 1 of all; view 2 of all] -> the collator's (bs, 2, len)
        return torch.stack([v[:n], v[n:]], dim=1)

    with on_path(checkout):
        from transformers import BertForPreTraining

        model = released_model(checkout, backbone=standin(), like=like, do_mlm=True, mlm_weight=MLM_WEIGHT)
        pretrained = BertForPreTraining.from_pretrained(str(standin()))   # as train.py loads the head
        model.lm_head.load_state_dict(pretrained.cls.predictions.state_dict())
        batch = {k: torch.stack([v, v], dim=1) for k, v in enc.items()}
        out = model(**batch, mlm_input_ids=pairs(feats["mlm"]["input_ids"]), mlm_labels=pairs(labels),
                    return_dict=True)
        out.loss.backward()
        with torch.no_grad():   # the two terms apart: InfoNCE from their logits, MLM = (loss − InfoNCE) / λ
            loss_cl = float(torch.nn.functional.cross_entropy(out.logits, torch.arange(n)))
        grads = key_biases_zeroed(grads_of(model.named_parameters(), rename=their_name))
        return Outputs(float(out.loss.detach()), grads,
                       {"loss_cl": loss_cl, "loss_mlm": (float(out.loss.detach()) - loss_cl) / MLM_WEIGHT})


def _control():
    import sentlab.methods.simcse_mlm as mod

    orig = mod.masked_lm_loss
    return patched(mod, "masked_lm_loss", lambda *a, **k: 0.0 * orig(*a, **k))


CONTROL = ("the MLM term dropped", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
