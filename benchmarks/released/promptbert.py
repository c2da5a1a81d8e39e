"""PromptBERT (unsupervised, BERT): sentlab's ``prompt`` against kongds/Prompt-BERT's model code.

Repository: https://github.com/kongds/Prompt-BERT, pinned commit 690ba6ef3a1d954c24d9a992ff8e339816866a05
("support hf hub", the newest). Checkout::

    git clone https://github.com/kongds/Prompt-BERT DIR && git -C DIR checkout 690ba6ef3a1d954c24d9a992ff8e339816866a05

What is compared: ``prompt_bert/models.py``'s ``BertForCL`` (``cl_forward``) with the flags of ``run.sh``'s
``unsup-bert`` run (``--mlp_only_train --mask_embedding_sentence --mask_embedding_sentence_template
TEMPLATE --mask_embedding_sentence_different_template TEMPLATE2 --mask_embedding_sentence_delta``, ``--temp
0.05``, ``--max_seq_length 32``; the other model arguments at ``train.py``'s defaults) against
:class:`sentlab.methods.l2p.PromptBERT` at its defaults (``template`` = TEMPLATE, ``template2`` = TEMPLATE2,
``denoise: true``, τ 0.05, max length 32), on MiniLM's weights (a BertModel, the vocabulary of
bert-base-uncased), the harness's batch, dropout off, the MLP (Linear + tanh) set to the same N(0, 0.02) values
on both sides. The released side's input ids are built as its ``train.py`` builds them (the run script's template
strings cut into the text before and after the sentence, ``encode(before)[:-1] + encode(sentence)[:32] +
encode(after)[1:]``, the two views of sentence i as rows ``(i, 0)`` and ``(i, 1)``, padded to the longest) and
the template ids and [MASK]/[PAD] ids set on the model as ``train.py`` sets them; sentlab builds its own.

They agree at: the loss and the gradient of every trained tensor (the backbone's and the MLP's; the pooler is
unused on both sides), except those whose gradient is zero analytically and which are left out on both sides:
the six attention key biases (softmax's shift invariance) and the last layer's output LayerNorm bias (it adds
the same vector to a row's [MASK] vector and to its empty template's, so it cancels in the denoised difference);
their values on either side are float noise, norms ~1e-9.

Shims: transformers 5's ``from_pretrained`` needs ``post_init()`` in a model's ``__init__``, which ``BertForCL``
lacks (it calls ``init_weights``, which then misses ``all_tied_weights_keys``), so a subclass supplies that
attribute (empty: nothing is tied), the model is built from MiniLM's config and MiniLM's weights are loaded into
its ``.bert``; the model arguments are a namespace of the flags ``cl_forward`` reads (``train.py``'s
``ModelArguments`` needs its whole command line).

Test time (not compared here, evaluation code): ``run.sh`` evaluates unsup-bert with ``evaluation.py
--mask_embedding_sentence --mask_embedding_sentence_template TEMPLATE`` and no ``--mask_embedding_sentence_delta``:
the first template, the plain [MASK] vector, no MLP, no denoising, which is what sentlab's ``export_info``
(pooling ``mask``, ``template``) gives; its batcher appends "." to a sentence that does not end in ``.?"'``,
as sentlab's test encoder does (``end_period``; docs/methods.md#promptbert).

The paper profile (profiles/paper.yaml ``methods.prompt``) trains this with the script's batch 256, lr 1e-5,
1 epoch, max length 32, STS-B dev every 125 steps.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, SENTENCES, Outputs, grads_of, import_released, load_backbone, main, on_path,  # noqa: E402
                      set_determinism)

__all__ = ["released_outputs", "sentlab_outputs", "set_determinism"]

CASE = "promptbert"
REPOSITORY = "kongds/Prompt-BERT"
COMMIT = "690ba6ef3a1d954c24d9a992ff8e339816866a05"
SETTING = ("run.sh unsup-bert model flags (two templates, delta, mlp_only_train, temp 0.05, max_seq_length 32); "
           "sentlab prompt defaults; MiniLM, dropout off, the same MLP values")
# run.sh unsup-bert
TEMPLATE = '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*'
TEMPLATE2 = '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*'
MAX_LEN = 32
TEMP = 0.05
GOLDEN = ["embeddings.word_embeddings.weight", "encoder.layer.3.attention.self.query.weight",
          "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]


def _mlp_values(hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    return torch.randn(hidden, hidden, generator=g) * 0.02, torch.zeros(hidden)


def _analytic_zeros(grads: dict, layers: int) -> dict:
    """The gradients without those that are zero analytically, whose values on either side are float noise
    (norms ~1e-9 against ~1e-3 for the others): every attention key bias (softmax's shift invariance) and the
    last layer's output LayerNorm bias (it adds the same vector to the [MASK] vector and to the empty template's
    one, so it cancels in the denoised difference)."""
    last = f"encoder.layer.{layers - 1}.output.LayerNorm.bias"
    return {n: g for n, g in grads.items() if not n.endswith("attention.self.key.bias") and n != last}


def _common_name(name: str):
    for prefix in ("bert.", "encoder."):
        if name.startswith(prefix) and not name.startswith("encoder.layer"):
            return name[len(prefix):]
    return name


# --------------------------------------------------------------------------- sentlab
def sentlab_outputs() -> Outputs:
    from sentlab.config import TrainParams
    from sentlab.methods.base import Batch
    from sentlab.methods.l2p import PromptBERT

    model, tok = load_backbone()
    params = PromptBERT.Params(max_length=MAX_LEN, temperature=TEMP).resolved(TrainParams(max_length=MAX_LEN))
    m = PromptBERT(model, tok, params, seed=0)
    w, b = _mlp_values(model.config.hidden_size)
    with torch.no_grad():
        m.mlp.dense.weight.copy_(w)
        m.mlp.dense.bias.copy_(b)
    m.train()
    loss = m(Batch(list(SENTENCES)))["loss"]
    loss.backward()
    grads = grads_of(m.encoder.named_parameters())
    grads.update(grads_of(m.mlp.named_parameters(), prefix="mlp."))
    return Outputs(loss=float(loss.detach()), grads=_analytic_zeros(grads, model.config.num_hidden_layers))


# --------------------------------------------------------------------------- released
def _pieces(template: str, mask_token: str) -> tuple[str, str]:
    """The run script's template string as train.py cuts it: the text before and after the sentence slot."""
    t = template.replace("*mask*", mask_token).replace("*sep+*", "").replace("*cls*", "").replace("*sent_0*", " ")
    before, after = t.split(" ")
    return before.replace("_", " "), after.replace("_", " ")


def _released_batch(tok) -> dict[str, torch.Tensor]:
    """(N, 2, L) ids: row (i, v) is sentence i in template v+1, as train.py's prepare_features makes it."""
    views = []
    for template in (TEMPLATE, TEMPLATE2):
        before, after = _pieces(template, tok.mask_token)
        bs, es = tok.encode(before)[:-1], tok.encode(after)[1:]
        views.append([bs + tok.encode(s, add_special_tokens=False)[:MAX_LEN] + es for s in SENTENCES])
    width = max(len(r) for v in views for r in v)
    ids = [[v[i] + [tok.pad_token_id] * (width - len(v[i])) for v in views] for i in range(len(SENTENCES))]
    mask = [[[1] * len(v[i]) + [0] * (width - len(v[i])) for v in views] for i in range(len(SENTENCES))]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}


def released_outputs(checkout: Path) -> Outputs:
    from _harness import no_dropout

    _, tok = load_backbone()
    with on_path(checkout):
        models = import_released(checkout, "prompt_bert.models")
        args = SimpleNamespace(
            mask_embedding_sentence=True, mask_embedding_sentence_template=TEMPLATE,
            mask_embedding_sentence_different_template=TEMPLATE2, mask_embedding_sentence_delta=True,
            mask_embedding_sentence_delta_freeze=False, mask_embedding_sentence_delta_no_position=False,
            mask_embedding_sentence_org_mlp=False, mask_embedding_sentence_autoprompt=False,
            mask_embedding_sentence_autoprompt_continue_training_as_positive=False,
            mask_embedding_sentence_num_masks=1, mlp_only_train=True, temp=TEMP, dot_sim=False,
            norm_instead_temp=False, hard_negative_weight=0.0, only_embedding_training=False)
        # shim: transformers 5's from_pretrained needs post_init() in __init__ (BertForCL calls init_weights only):
        # build it from the config and load MiniLM's backbone weights into its .bert
        backbone, _ = load_backbone()
        cls = type("BertForCL", (models.BertForCL,), {"all_tied_weights_keys": {}})   # (what post_init sets)
        model = cls(backbone.config, model_args=args)
        model.bert.load_state_dict(backbone.state_dict())
        model.float().train()
        no_dropout(model)
        w, b = _mlp_values(model.config.hidden_size)
        with torch.no_grad():
            model.mlp.dense.weight.copy_(w)
            model.mlp.dense.bias.copy_(b)
        # what train.py sets on the model for --mask_embedding_sentence (its own lines, in this module's words)
        b1, e1 = _pieces(TEMPLATE, tok.mask_token)
        b2, e2 = _pieces(TEMPLATE2, tok.mask_token)
        model.mask_token_id, model.pad_token_id = tok.mask_token_id, tok.pad_token_id
        model.bs = tok.encode(b1, add_special_tokens=False)
        model.es = tok.encode(e1, add_special_tokens=False)
        model.mask_embedding_template = tok.encode(b1 + e1)
        model.mask_embedding_template2 = tok.encode(b2 + e2)
        out = model(**_released_batch(tok), return_dict=True)
        out.loss.backward()
    grads = _analytic_zeros(grads_of(model.named_parameters(), rename=_common_name), model.config.num_hidden_layers)
    return Outputs(loss=float(out.loss.detach()), grads=grads)


def _control():
    import sentlab.methods._two_view as mod

    orig = mod.in_batch_info_nce
    return patched(mod, "in_batch_info_nce", lambda z1, z2, t: orig(z1, z2.roll(1, 0), t))


CONTROL = ("positives shifted by one row (a wrong order)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
