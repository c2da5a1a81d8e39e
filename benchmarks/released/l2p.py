"""L2P-CSR: sentlab's ``l2p`` against RUCAIBox/L2P-CSR's model code.

Repository: https://github.com/RUCAIBox/L2P-CSR, pinned commit 115f216d30e5867c60ac02b5d4397065495d006b
("Update README.md", the newest). Checkout::

    git clone https://github.com/RUCAIBox/L2P-CSR DIR && git -C DIR checkout 115f216d30e5867c60ac02b5d4397065495d006b

What is compared: ``simcse/models.py``'s ``BertForCL`` (``cl_vat_forward``: 4 ascent steps on the token and
feature probability vectors of the embedding output and the first two layers, the step ``0.1 · g/‖g‖``, the
threshold 0.05, then the encoder's InfoNCE on the final masks, [CLS] + MLP, ``--pooler_type cls --mlp_only_train
--temp 0.05`` as ``run_unsup_example.sh``) against :class:`sentlab.methods.l2p.L2PCSR` at the code's
settings: ``layers: 2, steps: 4, phi: 0.05, beta: 0.1, token_norm: element`` (its token norm is taken over a
size-1 axis), ``feature_scope: batch`` (one feature vector per layer for the whole doubled batch),
``zero_grad: reset`` (its NaN → 1), ``ascent_grad: binary`` (the gradient w.r.t. the 0/1 masks, applied to p),
``attend_padding: true`` (its ``cl_forward_denoised`` calls the encoder without the attention mask, and its
token noise covers the padded grid). MiniLM's weights, the harness's batch (max length 32), dropout off, the MLP
set to the same N(0, 0.02) values on both sides, and the random start (Eq. 4) fed to both: the code draws it
with two ``torch.rand`` calls, which a shim answers with the tensors sentlab's masks are built from (rows
reordered: the code's row ``2i + v`` is sentence i's view v, sentlab's ``v·N + i``).

They agree at: the loss and the gradient of every trained tensor (backbone and MLP), except the six attention
key biases, left out on both sides: their gradient is zero analytically (softmax's shift invariance) and float
noise (~1e-9) on either side. ``prompt_l2p`` has no released code (the repository trains [CLS] only), so it has
no case; it shares this code path and PromptBERT's (benchmarks/released/promptbert.py).

Shims (transformers 5): the code's ``BertEncoderDenoised`` calls each layer with the old seven positional
arguments (``hidden_states, attention_mask, head_mask, encoder_hidden_states, encoder_attention_mask,
past_key_value, output_attentions``) and reads ``layer_outputs[0]``; BertLayer now takes five and returns a
tensor, so each layer's forward is wrapped to take the old arguments and return a 1-tuple. ``BertForCL`` lacks
``post_init()``, which transformers 5's ``init_weights`` needs (``all_tied_weights_keys``): a subclass supplies
that attribute (empty: nothing is tied), and MiniLM's weights are loaded into its ``.bert``. The feature noise
is hard-coded 768 wide (bert-base); MiniLM's is 384: the ``torch.rand`` shim returns MiniLM's width.

The paper profile (profiles/paper.yaml ``methods.l2p``) uses these settings of the code; the paper's text
(β 0.5, an L2 norm over each token vector, one feature vector per view, padding masked) stays the defaults
(docs/methods.md#l2p-csr). Its training keys are the paper's §B (100k sentences, batch 512, lr 3e-5, dev every
150 steps); ``run_unsup_example.sh`` is a template (``--model_name_or_path xxx``, batch 2×128, lr 1e-6).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, SENTENCES, Outputs, grads_of, import_released, load_backbone, main, on_path,  # noqa: E402
                      set_determinism)

__all__ = ["released_outputs", "sentlab_outputs", "set_determinism"]

CASE = "l2p"
REPOSITORY = "RUCAIBox/L2P-CSR"
COMMIT = "115f216d30e5867c60ac02b5d4397065495d006b"
SETTING = ("cl_vat_forward (layers 2, 4 steps, beta 0.1, phi 0.05, per-entry token step, one feature vector per "
           "layer, NaN->1, no attention mask), cls + MLP, temp 0.05; sentlab l2p with those params "
           "(attend_padding true); MiniLM, dropout off, the same random start and MLP values")
MAX_LEN = 32
TEMP = 0.05
LAYERS = 2   # the code: noise on the embedding output and layers 0, 1 (i < 2)
CODE_PARAMS = dict(layers=LAYERS, steps=4, phi=0.05, beta=0.1, token_norm="element", feature_scope="batch",
                   zero_grad="reset", ascent_grad="binary", attend_padding=True, max_length=MAX_LEN,
                   temperature=TEMP)
GOLDEN = ["embeddings.word_embeddings.weight", "encoder.layer.1.attention.self.query.weight",
          "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]


def _mlp_values(hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    return torch.randn(hidden, hidden, generator=g) * 0.02, torch.zeros(hidden)


def _start(n: int, length: int, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The random start (Eq. 4) in the code's layout: token noise ``(3, N, 2, L)``, feature noise ``(3, 1, 1, D)``."""
    g = torch.Generator().manual_seed(4321)
    return torch.rand(LAYERS + 1, n, 2, length, generator=g), torch.rand(LAYERS + 1, 1, 1, hidden, generator=g)


def _tokens(tok) -> dict[str, torch.Tensor]:
    return dict(tok(list(SENTENCES), padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt"))


def _no_key_bias(grads: dict) -> dict:
    return {n: g for n, g in grads.items() if not n.endswith("attention.self.key.bias")}


# --------------------------------------------------------------------------- sentlab
def sentlab_outputs() -> Outputs:
    from sentlab.config import TrainParams
    from sentlab.methods._perturb_strategies import Masks
    from sentlab.methods.base import Batch
    from sentlab.methods.l2p import L2PCSR

    model, tok = load_backbone()
    params = L2PCSR.Params(**CODE_PARAMS).resolved(TrainParams(max_length=MAX_LEN))
    m = L2PCSR(model, tok, params, seed=0)
    w, b = _mlp_values(model.config.hidden_size)
    with torch.no_grad():
        m.mlp.dense.weight.copy_(w)
        m.mlp.dense.bias.copy_(b)
    m.train()
    batch = m.prepare(Batch(list(SENTENCES)))
    real = batch.features["views"]["attention_mask"].bool()
    n, length = len(SENTENCES), real.size(1)
    tok_noise, fea_noise = _start(n, length, model.config.hidden_size)
    p_tok = tok_noise.permute(0, 2, 1, 3).reshape(LAYERS + 1, 2 * n, length)   # rows v·N + i
    batch.features["perturbation"] = Masks(torch.ones_like(real), p_tok, fea_noise.reshape(LAYERS + 1, 1, -1))
    loss = m(batch)["loss"]
    loss.backward()
    grads = grads_of(m.encoder.named_parameters())
    grads.update(grads_of(m.mlp.named_parameters(), prefix="mlp."))
    return Outputs(loss=float(loss.detach()), grads=_no_key_bias(grads))


# --------------------------------------------------------------------------- released
def _old_layer_call(layer):
    """BertLayer with the positional signature the code calls it with, returning a 1-tuple."""
    forward = layer.forward

    def call(hidden_states, attention_mask=None, head_mask=None, encoder_hidden_states=None,
             encoder_attention_mask=None, past_key_value=None, output_attentions=False):
        out = forward(hidden_states, attention_mask)
        return out if isinstance(out, tuple) else (out,)

    layer.forward = call


@contextlib.contextmanager
def _rand_answers(*tensors):
    """``torch.rand`` returns ``tensors`` in turn (the code's two draws of the random start), then is restored."""
    queue, real_rand = list(tensors), torch.rand

    def rand(*size, device=None, **kw):
        return queue.pop(0).to(device) if queue else real_rand(*size, device=device, **kw)

    torch.rand = rand
    try:
        yield
    finally:
        torch.rand = real_rand
    assert not queue, "the code drew fewer random tensors than expected"


def released_outputs(checkout: Path) -> Outputs:
    from _harness import no_dropout

    backbone, tok = load_backbone()
    with on_path(checkout):
        models = import_released(checkout, "simcse.models")
        args = SimpleNamespace(pooler_type="cls", temp=TEMP, do_mlm=False, mlp_only_train=True,
                               hard_negative_weight=0.0, mlm_weight=0.1)
        cls = type("BertForCL", (models.BertForCL,), {"all_tied_weights_keys": {}})   # (what post_init sets)
        model = cls(backbone.config, model_args=args)
        model.bert.load_state_dict(backbone.state_dict())
        model.float().train()
        no_dropout(model)
        for layer in model.bert.encoder.layer:
            _old_layer_call(layer)
        w, b = _mlp_values(model.config.hidden_size)
        with torch.no_grad():
            model.mlp.dense.weight.copy_(w)
            model.mlp.dense.bias.copy_(b)
        enc = _tokens(tok)
        batch = {k: torch.stack([v, v], dim=1) for k, v in enc.items()}   # (N, 2, L): the two views of sentence i
        n, length = enc["input_ids"].shape
        with _rand_answers(*_start(n, length, model.config.hidden_size)):
            out = model(**batch, return_dict=True)
        out.loss.backward()
    grads = grads_of(model.named_parameters(), rename=lambda k: k[len("bert."):] if k.startswith("bert.") else k)
    return Outputs(loss=float(out.loss.detach()), grads=_no_key_bias(grads))


def _control():
    import sentlab.methods._two_view as mod

    orig = mod.in_batch_info_nce
    return patched(mod, "in_batch_info_nce", lambda z1, z2, t: orig(z1, z2.roll(1, 0), t))


CONTROL = ("positives shifted by one row (a wrong order)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
