"""PT-BERT (``ptbert``) against the authors' released code: Namco0816/PT-BERT, its "poly" model.

Repository: https://github.com/Namco0816/PT-BERT, commit dba403c01aa2acdf8659b7a7167d41471aacb656 (HEAD, "delete
unrelated logs")::

    git clone https://github.com/Namco0816/PT-BERT DIR && git -C DIR checkout dba403c01aa2acdf8659b7a7167d41471aacb656

The released model is ``ptbert/models.py: BertForPolyMoCo`` (``--cl_type bert_poly`` in
``scripts/re-produce_result.sh``: poly 128, batch 64, lr 3e-5, max length 64, queue_size 4, τ 0.05, λ 0.885,
``--pooler_type cls --mlp_only_train``); its loss is ``poly_cl_forward``. Both sides here: MiniLM, batch
``SENTENCES`` (the key sees the same sentence: no augmentation), dropout off, m = 128 pseudo tokens.

Made identical by construction (one draw, given to both): the pseudo-token table P (N(0, 1), torch's
nn.Embedding init, which is what the released code's P gets: it is created after ``cl_init``'s ``init_weights``
and transformers 4.2.1's ``from_pretrained`` does not re-initialise missing weights), the attention (W_Q, W_K,
W_V: nn.Linear's init), the MLP (N(0, 0.02), zero bias); the momentum copies (key encoder, P_k, attention_k,
MLP_k) = the online ones plus a fixed perturbation, as after some momentum steps, so that which module each
branch uses shows in the loss. Then **four optimiser steps** (issue #66), each side its own loop from an empty
queue: the release's forward (its list ``momentum_queue``, ``queue_size`` 2: three batches of candidates),
``clip_grad_norm_(model.parameters(), 1.0)``, transformers 4.2's AdamW (``sentlab.nn.optim.AdamWLegacy
(correct_bias=True)``) and ``mocotrainers.py``'s ``update_average`` (β = 0.885, compiled from the checkout);
sentlab's forward, ``clip_gradients``, ``configure_optimizers()`` (``optimizer: adamw_transformers``) and
``after_optimizer_step()``. Each step compares the loss, the gradients, the momentum weights that made the keys
and the queue carried to the next step (as a set of rows; the release keeps whole batches, so its queue cannot
wrap inside one). Mutation control: the momentum update's weights swapped.

The setting at which they agree (loss and every gradient): ``attend_to: cls``, ``num_heads: null`` (the
encoder's heads), ``key_second_attention: online`` (the key's second mapping reuses the online attention, as
``poly_cl_forward``), ``queue_size`` = the current batch + the queued keys (the released run: ``queue_size 4``
keeps 5 batches = 320 candidates at batch 64). Skipped (gradient exactly zero on both sides): the pseudo tokens
P and the first mapping's W_Q — under ``cls`` the first attention has one key, softmax ≡ 1, so Z′ = V(y) does not
depend on P (the released code's P never learns; docs/methods.md#pt-bert) — and the attention key biases.

Shim (current transformers): ``BertSelfAttention`` lost its cross-attention arguments (``encoder_hidden_states``,
``encoder_attention_mask``) in transformers 5; the released code calls it as cross-attention. :class:`_SelfAttention421`
restores the 4.2.1 call (eager: softmax(QKᵀ/√d_h + mask) V, per head, no output projection; with
``encoder_hidden_states`` the mask is ``encoder_attention_mask`` — so the ``attention_mask=raw_attention_mask`` the
released code passes to the second mapping is ignored, as it was in 4.2.1) and is patched into
``ptbert.models`` for the build only; transformers 5's ``init_weights`` needs ``post_init`` (which ``cl_init``
never calls), so 4.2.1's (BERT's ``_init_weights`` over every module) replaces it (every weight is then set).

What the paper profile uses (profiles/paper.yaml, the code's settings): ``key_second_attention: online``,
``queue_size: 320`` (5 batches: the code's ``queue_size 4``; the paper's text says 256), ``key_init: random`` (the
released momentum encoder is not in the checkpoint, so it starts from BERT's random init: ``momentum_encoder`` is a
deepcopy taken before ``init_weights`` and ``from_pretrained`` fills ``bert.*`` only). The equivalence runs with
both key encoders given the same weights (``key_init`` only decides their start).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, init_weights_421, SENTENCES, Outputs, grads_of, import_released, load_backbone, main,  # noqa: E402
                      on_path, sentlab_steps, set_determinism, step_sentences)

CASE = "ptbert"
REPOSITORY = "Namco0816/PT-BERT"
COMMIT = "dba403c01aa2acdf8659b7a7167d41471aacb656"
SETTING = ("4 steps of batch 8 from an empty queue of 2 batches (the release keeps whole batches), each side its "
           "own AdamW (lr 1e-4; sentlab's optimizer adamw_transformers), clipping at 1 and momentum update (λ 0.885); "
           "MiniLM, m 128, attend_to cls, num_heads null, key_second_attention online, τ 0.05, dropout off")
POLY_M = 128
MOMENTUM = 0.885   # mo_beta of scripts/re-produce_result.sh
B = len(SENTENCES)
QUEUED = 2   # earlier batches in the queue
MAX_LEN = 32


class _SelfAttention421(nn.Module):
    """transformers 4.2.1's ``BertSelfAttention`` call (with cross-attention), eager, on the current config."""

    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def _heads(self, x):
        return x.view(*x.shape[:-1], self.num_attention_heads, self.attention_head_size).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, head_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None, output_attentions=False):
        if encoder_hidden_states is not None:
            kv, attention_mask = encoder_hidden_states, encoder_attention_mask
        else:
            kv = hidden_states
        q, k, v = self._heads(self.query(hidden_states)), self._heads(self.key(kv)), self._heads(self.value(kv))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            scores = scores + attention_mask
        probs = self.dropout(nn.functional.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(*ctx.shape[:-2], self.all_head_size)
        return (ctx, probs) if output_attentions else (ctx,)


def _shared(hidden: int, encoder_state: dict) -> dict:
    """The weights both sides get (one draw): online heads, their momentum copies, the key encoder, the queue."""
    g = torch.Generator().manual_seed(53)
    torch.manual_seed(53)
    attn = {n: p.detach().clone() for n, p in nn.ModuleDict(
        {k: nn.Linear(hidden, hidden) for k in ("query", "key", "value")}).state_dict().items()}
    online = {"pseudo.weight": torch.randn(POLY_M, hidden, generator=g),
              **{f"attn.{k}": v for k, v in attn.items()},
              "mlp.dense.weight": torch.randn(hidden, hidden, generator=g) * 0.02,
              "mlp.dense.bias": torch.zeros(hidden)}

    def perturb(v: torch.Tensor, scale: float) -> torch.Tensor:
        if not v.is_floating_point():
            return v.clone()
        return v + scale * v.std().nan_to_num(0.02).clamp_min(1e-3) * torch.randn(v.shape, generator=g)

    return {"online": online, "momentum": {k: perturb(v, 0.05) for k, v in online.items()},
            "key_encoder": {k: perturb(v, 0.3) for k, v in encoder_state.items()},
            "queue": [torch.randn(B, hidden, generator=g).tanh() for _ in range(QUEUED)]}


# Gradients that are zero analytically in this setting (round-off ~1e-10 on each side, differently): the key
# biases of every attention (softmax is shift-invariant) and, under ``attend_to: cls``, W_Q and W_K of the pseudo-token
# attention with their biases (the first mapping has one key, so softmax ≡ 1; the second's m keys are the same row
# V(y) repeated, so its scores are equal whatever the query). Checked to be ≤ 1e-6 of the value weight's gradient,
# then set to exactly 0 on both sides, so that the comparison lists them as skipped.
ANALYTIC_ZERO = ("attention.self.key.bias", "attn.key.", "attn.query.")


def _zero_analytic(grads: dict) -> dict:
    scale = float(grads["attn.value.weight"].norm())
    for n, g in grads.items():
        if any(k in n for k in ANALYTIC_ZERO):
            if float(g.norm()) > 1e-6 * scale:
                raise AssertionError(f"{n}: gradient {float(g.norm()):.3g}, expected 0 analytically")
            g.zero_()
    return grads


STEPS, STEP_LR, CLIP = 4, 1e-4, 1.0


def _batch_of(tok, step: int):
    return dict(tok(step_sentences(step), padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt"))


def _sentlab_name(n: str):
    """sentlab's parameter name -> the common name (backbone names; pseudo/attn/mlp heads), or None."""
    if n.startswith("encoder."):
        return n[len("encoder."):]
    return n if n.split(".")[0] in ("pseudo", "attn", "mlp") else None


def _sentlab_momentum_name(n: str):
    head, rest = n.split(".", 1)
    common = {"key_encoder": "", "key_pseudo": "pseudo.", "key_attn": "attn.", "key_mlp": "mlp."}
    if head not in common or (head == "key_encoder" and rest.startswith("pooler.")):
        return None   # the backbone's pooler: never used for a key (the [CLS] state is read before it)
    return common[head] + rest


def sentlab_outputs() -> Outputs:
    """sentlab's run of ``STEPS`` steps as its loop takes them (forward, backward, ``clip_gradients``, the method's
    AdamW (``optimizer: adamw_transformers``), ``after_optimizer_step``: the momentum update), from an empty queue."""
    from sentlab.methods import get_method
    encoder, tok = load_backbone()
    shared = _shared(encoder.config.hidden_size, encoder.state_dict())
    cls = get_method("ptbert")
    params = cls.Params(pseudo_len=POLY_M, attend_to="cls", num_heads=None, key_second_attention="online",
                        queue_size=B * (1 + QUEUED), temperature=0.05, batch_size=B, max_length=MAX_LEN,
                        lr=STEP_LR, optimizer="adamw_transformers")
    m = cls(encoder, tok, params, seed=0)
    m.train()
    with torch.no_grad():
        for name, v in shared["online"].items():
            m.get_parameter(name).copy_(v)
            m.get_parameter({"pseudo": "key_pseudo", "attn": "key_attn", "mlp": "key_mlp"}[name.split(".")[0]]
                            + name[name.index("."):]).copy_(shared["momentum"][name])
        m.key_encoder.load_state_dict(shared["key_encoder"])
    opt = m.configure_optimizers()
    return sentlab_steps(m, opt, STEPS, CLIP, lambda t: {"query": _batch_of(tok, t), "key": _batch_of(tok, t)},
                         lambda: _zero_analytic(grads_of(m.named_parameters(), rename=_sentlab_name)),
                         _sentlab_momentum_name)


def released_outputs(checkout: Path) -> Outputs:
    """The release's run: ``BertForPolyMoCo`` (its list queue, ``queue_size`` 2 = 3 batches of candidates), then
    ``ptbert/mocotrainers.py``'s step: ``clip_grad_norm_(model.parameters(), 1.0)``, transformers 4.2's ``AdamW``
    (``sentlab.nn.optim.AdamWLegacy(correct_bias=True)``, ε 1e-8, weight decay 0) and its ``update_average`` of the
    encoder, pooler, MLP, pseudo tokens and attention (β = ``mo_beta``). Its queue after a step: the batches the
    next forward keeps (the list's first ``queue_size``; the last is popped before the next forward)."""
    from sentlab.nn.optim import AdamWLegacy

    encoder, tok = load_backbone()
    config = encoder.config
    shared = _shared(config.hidden_size, encoder.state_dict())
    with on_path(checkout):
        models = import_released(checkout, "ptbert.models")
        models.BertSelfAttention = _SelfAttention421   # shims: 4.2.1's cross-attention call, its init_weights
        models.BertForPolyMoCo.init_weights = init_weights_421
        args = argparse.Namespace(poly_m=POLY_M, queue_size=QUEUED, pooler_type="cls", temp=0.05,
                                  mlp_only_train=True, return_poly=False, mo_beta=MOMENTUM, cl_type="bert_poly")
        model = models.BertForPolyMoCo(config, model_args=args)
        trainer_source = (Path(checkout) / "ptbert" / "mocotrainers.py").read_text()
    model.train()
    names = {"pseudo": "polyEmbedding", "attn": "polyAttn", "mlp": "mlp"}
    mom = {"pseudo": "momentumPolyEmbedding", "attn": "momentumPolyAttn", "mlp": "momentum_mlp"}
    with torch.no_grad():
        model.bert.load_state_dict(encoder.state_dict(), strict=False)
        model.momentum_encoder.load_state_dict(shared["key_encoder"], strict=False)
        for name, v in shared["online"].items():
            head, rest = name.split(".", 1)
            model.get_parameter(f"{names[head]}.{rest}").copy_(v)
            model.get_parameter(f"{mom[head]}.{rest}").copy_(shared["momentum"][name])
    model.momentum_queue = []
    update_average = _released_update_average(trainer_source)
    pairs = [(model.bert, model.momentum_encoder), (model.pooler, model.momentum_encoder_pooler),
             (model.mlp, model.momentum_mlp), (model.polyEmbedding, model.momentumPolyEmbedding),
             (model.polyAttn, model.momentumPolyAttn)]
    opt = AdamWLegacy([p for p in model.parameters() if p.requires_grad], lr=STEP_LR, eps=1e-8, correct_bias=True)
    back = {v: k for k, v in names.items()}
    mback = {"momentum_encoder": "", **{v: f"{k}." for k, v in mom.items()}}

    def rename(n: str):
        head, rest = n.split(".", 1)
        if head == "bert":
            return rest
        return f"{back[head]}.{rest}" if head in back else None

    steps = []
    for t in range(STEPS):
        enc = _batch_of(tok, t)
        out = model(**{k: torch.stack([v, v], dim=1) for k, v in enc.items()}, return_dict=True)
        out.loss.backward()
        momentum = {mback[n.split(".", 1)[0]] + n.split(".", 1)[1]: p.detach().clone()
                    for n, p in model.named_parameters() if n.split(".", 1)[0] in mback}
        steps.append(Outputs(float(out.loss.detach()),
                             _zero_analytic(grads_of(model.named_parameters(), rename=rename)),
                             extra={"candidates": float(out.logits.size(1))}, momentum=momentum,
                             queue=torch.cat(model.momentum_queue[:QUEUED]).detach().clone()))
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        with torch.no_grad():                                   # mocotrainers.py, after optimizer.step()
            for online, key in pairs:
                for current, ma in zip(online.parameters(), key.parameters()):
                    ma.data = update_average(None, ma.data, current.data, beta=args.mo_beta)
        model.zero_grad()
    return Outputs(steps[0].loss, steps[0].grads, extra=steps[0].extra, steps=steps)


def _released_update_average(source: str):
    """``update_average`` of the checkout's trainer, compiled alone (the module imports Trainer internals)."""
    import ast

    tree = ast.parse(source)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "update_average")
    namespace: dict = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "mocotrainers.py", "exec"), namespace)
    return namespace["update_average"]


GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.3.attention.self.query.weight",
                "encoder.layer.5.output.dense.weight", "attn.value.weight", "attn.query.weight", "mlp.dense.weight"]

def _control():
    import sentlab.methods.moco as mod

    orig = mod.momentum_update
    return patched(mod, "momentum_update", lambda online, key, m: orig(online, key, 1.0 - m))


CONTROL = ("the momentum update's weights swapped: θk ← (1−λ)θk + λθq", _control)


if __name__ == "__main__":
    set_determinism()
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
