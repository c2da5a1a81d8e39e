"""Supervised SimCSE (sentlab ``simcse_sup``) against princeton-nlp/SimCSE's ``cl_forward`` with hard negatives
(issue #53 §1).

Repository: https://github.com/princeton-nlp/SimCSE, commit 49fa580a853752ede55b8c76d9debf748e214d3f (the newest)::

    git clone https://github.com/princeton-nlp/SimCSE DIR && \
        git -C DIR checkout 49fa580a853752ede55b8c76d9debf748e214d3f

Their side: ``simcse.models.BertForCL`` from the MiniLM folder with the ``model_args`` of ``run_sup_example.sh``
(``pooler_type cls``, ``temp 0.05``, hard-negative weight 0 — train.py's default, the script does not set it — no
MLM, no ``--mlp_only_train``), fed the collator's layout ``input_ids (bs, 3, len)`` (premise, entailment,
contradiction), ``cl_forward``'s loss. sentlab's side: ``simcse_sup`` (τ 0.05, ``hard_negative_weight`` 0) on the
same weights and the same triples, encoded in one forward ``[premises; positives; negatives]``; the tokenised
triples are the same tensors on both sides (one padding length), only laid out differently.

Setting at which they agree: dropout off, the MLP's initial weights copied from sentlab's head into theirs, one
thread; gradients of every backbone tensor and ``mlp.dense.*``; the attention key biases skipped (zero
analytically, rounding noise numerically: ``simcse_unsup.key_biases_zeroed``).

Shims: the one of ``simcse_unsup`` (``post_init()`` at the end of ``BertForCL.__init__`` for transformers 5).

The paper profile's ``simcse_sup`` is this setting with dropout on, SNLI+MNLI triples, batch 512, lr 5e-5, 3 epochs,
max length 32, and — as SimCSE evaluates its supervised model (``--pooler cls``: ``sentemb_forward`` keeps the MLP
without ``--mlp_only_train``) — [CLS] + the trained MLP at test (``test_pooler: mlp``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import patched, SENTENCES, Outputs, grads_of, main, on_path, set_determinism  # noqa: E402, F401 (the golden test calls it)
from simcse_unsup import (COMMIT, REPOSITORY, backbone_name, key_biases_zeroed, released_model,  # noqa: E402
                          released_name, sentlab_method)

CASE = "simcse_sup"
SETTING = "pooler cls + MLP, temp 0.05, hard negatives (weight 0), dropout off, MiniLM, MLP weights shared"
GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.2.attention.self.query.weight",
                "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]
# NLI-like triples for the harness's SENTENCES: an entailment and a contradiction of each
POSITIVES = [
    "Someone is performing music with a guitar.",
    "A cat is sitting on a mat.",
    "Animals are running outside.",
    "She purchased fruit at the market.",
    "The budget was approved by the committee.",
    "It will rain tonight.",
    "He plays a sport on weekends.",
    "There is an exhibition about Egypt at the museum.",
]
HARD_NEGATIVES = [
    "Nobody is playing any instrument.",
    "The cat is running in the garden.",
    "Two dogs are sleeping indoors.",
    "She did not buy anything yesterday.",
    "The committee rejected the budget without discussion.",
    "The weather will be dry all night.",
    "He never plays football.",
    "The museum is closed for the year.",
]


def sentlab_outputs() -> Outputs:
    from sentlab.methods.base import Batch

    method = sentlab_method("simcse_sup", hard_negative_weight=0.0)
    out = method(Batch(list(SENTENCES), extras={"positive": POSITIVES, "hard_negative": HARD_NEGATIVES}))
    out["loss"].backward()
    return Outputs(float(out["loss"].detach()),
                   key_biases_zeroed(grads_of(method.named_parameters(), rename=backbone_name)))


def released_outputs(checkout: Path) -> Outputs:
    like = sentlab_method("simcse_sup")   # the MLP's initial weights, as sentlab draws them (seeded)
    n = len(SENTENCES)
    enc = like.encode_text(list(SENTENCES) + POSITIVES + HARD_NEGATIVES)
    with on_path(checkout):
        model = released_model(checkout, like=like, mlp_only_train=False, hard_negative_weight=0.0)
        # the collator's layout: (bs, num_sent=3, len), row i = (premise i, its entailment, its contradiction)
        batch = {k: torch.stack([v[:n], v[n:2 * n], v[2 * n:]], dim=1) for k, v in enc.items()}
        out = model(**batch, return_dict=True)
        out.loss.backward()
        return Outputs(float(out.loss.detach()),
                       key_biases_zeroed(grads_of(model.named_parameters(), rename=released_name)))


def _control():
    import sentlab.methods.simcse_sup as mod

    orig = mod.supervised_info_nce
    return patched(mod, "supervised_info_nce", lambda z1, z2, z3, t, *a, **k: orig(z1, z3, z2, t, *a, **k))


CONTROL = ("the positive and the hard negative swapped (a wrong order)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
