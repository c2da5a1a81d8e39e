"""DiffCSE: sentlab's ``diffcse`` against the authors' ``cl_forward`` (issue #53 §1, §3.2).

Repository: voidism/DiffCSE, commit f724b2cc921efdfb4e4bd85cd7ca13a8f0d1f0cf (its HEAD, "Use
`cls_before_pooler` for DiffCSE models"); the code behind DiffCSE's 78.49 (``run_diffcse.sh``, BERT-base)::

    git clone https://github.com/voidism/DiffCSE DIR && git -C DIR checkout f724b2cc921efdfb4e4bd85cd7ca13a8f0d1f0cf
    python benchmarks/released/diffcse.py --released DIR [--write-golden]

What runs: their ``diffcse/models.py`` ``BertForCL`` (its ``cl_init``: the ``--batchnorm`` ``ProjectionMLP``, the
generator loaded by ``AutoModelForMaskedLM.from_pretrained(generator_name)``) and its ``cl_forward``, unchanged,
with ``train.py``'s set-up around it: ``model.electra_head = nn.Linear(hidden, 2)`` and the discriminator loaded
with the backbone's weights (``discriminator.load_state_dict(..., strict=False)``). The loss is the one their
HF Trainer back-propagates: InfoNCE over the projected [CLS] + λ · the 2-way cross-entropy of the conditional
discriminator over the padded grid, with the generator's argmax at every non-pad position.

Setting at which the two agree: MiniLM (the PyPI package) as encoder and discriminator; as generator a hub-shaped
bert-base-uncased stand-in with its MLM head (:func:`_harness.bert_standin`: 2 layers, 64 wide, random values,
seed 0, MiniLM's vocabulary); the harness's 8 sentences, max length 32, τ 0.05, λ 0.005; the masked inputs
(mask ratio 0.30, 80/10/10, as their collator) computed once here (:func:`masked_inputs`) and fed to both; dropout
off everywhere (generator, encoder, discriminator: the code leaves the generator's dropout on in training, sentlab
too with ``generator_dropout: true``); the projector's and the 2-way head's initial weights drawn once here
(:func:`initial_heads`) and loaded into both.
sentlab: ``generator_decoding: argmax``, ``generator_positions: all``, ``rtd_positions: all`` — the code's
reading, which is the paper profile's (the Params defaults). The paper text's reading (sampling at the masked
positions, L_RTD over the real tokens) is the ablation ``diffcse_paper_text``; it does not agree here by design.

Shims (written here, for transformers 5): the code calls its discriminator with ``cls_input=`` (its patched
``modeling_bert.py`` of transformers 4.2.1 puts that vector at position 0 of the embedding layer's output); here
:class:`_CondBert`, a ``BertModel`` whose ``forward`` takes ``cls_input`` and does the same with a forward hook
on ``embeddings``; ``cl_init`` calls ``init_weights()``, which in transformers 5 reads ``all_tied_weights_keys``
(set by ``post_init``, which their class never calls): a subclass gives it as ``{}`` (BERT ties nothing here).
``electra_head`` is ``nn.Linear(768, 2)`` in ``train.py``; here ``nn.Linear(hidden, 2)``
(MiniLM is 384 wide). Nothing else is changed. The code's row order is interleaved ((s1 v1, s1 v2, s2 v1, …));
sentlab's is [all views 1; all views 2]: the inputs are permuted, the losses are order-free means.

Trained tensors: the encoder (its own names), ``projector.*``, ``discriminator.*``, ``rtd_head.*``; the
generator has no gradient (no_grad, frozen) on both sides. Skipped as zero analytically (their float gradient is
~1e-11 of rounding noise on both sides, set to 0 after a check, :func:`analytic_zero`): the attention key biases
and the encoder's last LayerNorm bias (a shift of every [CLS] row that the projector's BatchNorm removes).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, SENTENCES, Outputs, bert_standin, grads_of, load_backbone, main, minilm_path,  # noqa: E402
                      no_dropout, on_path, set_determinism)

CASE = "diffcse"
REPOSITORY = "voidism/DiffCSE"
COMMIT = "f724b2cc921efdfb4e4bd85cd7ca13a8f0d1f0cf"
SETTING = ("MiniLM encoder/discriminator, bert stand-in generator (2x64, seed 0), max_len 32, tau 0.05, lambda "
           "0.005, masks fed to both, dropout off; sentlab generator_decoding=argmax, generator_positions=all, "
           "rtd_positions=all (the paper profile)")
MAX_LEN, TEMP, LAMBDA, MASK_RATIO = 32, 0.05, 0.005, 0.30


def generator_dir() -> Path:
    """The generator stand-in (deterministic: written once per machine, seed 0)."""
    return bert_standin(Path(tempfile.gettempdir()) / "sentlab-released" / "diffcse-generator")


def masked_inputs(tok, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked ids, chosen) of the doubled batch in sentlab's row order ([views 1; views 2]): the code's collator
    recipe (30 % of the non-special tokens; of those 80 % [MASK], 10 % a random token, 10 % kept) from a fixed
    generator, computed once and fed to both sides."""
    ids = torch.cat([input_ids, input_ids])
    att = torch.cat([attention_mask, attention_mask]).bool()
    g = torch.Generator().manual_seed(1234)
    eligible = att & ~torch.isin(ids, torch.tensor(tok.all_special_ids))
    chosen = (torch.rand(ids.shape, generator=g) < MASK_RATIO) & eligible
    u = torch.rand(ids.shape, generator=g)
    random_ids = torch.randint(len(tok), ids.shape, generator=g)
    out = torch.where(chosen & (u < 0.8), torch.full_like(ids, tok.mask_token_id), ids)
    out = torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, out)
    return out, chosen


def analytic_zero(name: str) -> bool:
    """Tensors whose gradient is zero analytically (their float gradient is rounding noise, ~1e-11): every
    attention key bias (softmax is shift invariant) and the encoder's last LayerNorm bias (it shifts every [CLS]
    row alike; the projector's first BatchNorm subtracts the batch mean, and the discriminator reads the
    projected vector)."""
    return name.endswith("attention.self.key.bias") or name == "encoder.layer.5.output.LayerNorm.bias"


def zero_analytic(grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``grads`` with :func:`analytic_zero` tensors set to exact zero (the harness then lists them as skipped),
    after checking they are rounding noise indeed (norm < 1e-8)."""
    for n, g in grads.items():
        if analytic_zero(n):
            assert float(g.double().norm()) < 1e-8, (n, float(g.norm()))
            grads[n] = torch.zeros_like(g)
    return grads


def _rename(name: str):
    """Common names: the encoder's own, ``projector.*``, ``discriminator.*``, ``rtd_head.*``."""
    for theirs, ours in (("bert.", ""), ("mlp.", "projector."), ("electra_head.", "rtd_head."),
                         ("discriminator.", "discriminator.")):
        if name.startswith(theirs):
            return ours + name[len(theirs):]
    return None


def released_outputs(checkout: Path) -> Outputs:
    from torch import nn
    from transformers import AutoTokenizer, BertConfig, BertModel

    class _CondBert(BertModel):
        """Shim for the code's patched BertModel: ``cls_input`` replaces position 0 of the embedding output."""

        def forward(self, *args, cls_input=None, **kwargs):
            if cls_input is None:
                return super().forward(*args, **kwargs)
            hook = self.embeddings.register_forward_hook(
                lambda _m, _i, out: torch.cat([cls_input.unsqueeze(1).to(out.dtype), out[:, 1:]], dim=1))
            try:
                return super().forward(*args, **kwargs)
            finally:
                hook.remove()

    path = minilm_path()
    tok = AutoTokenizer.from_pretrained(path)
    config = BertConfig.from_pretrained(path)
    backbone = BertModel.from_pretrained(path).state_dict()
    args = SimpleNamespace(pooler_type="cls", batchnorm=True, temp=TEMP, generator_name=str(generator_dir()),
                           before_mlp=False, lambda_weight=LAMBDA, hard_negative_weight=0.0, mlp_only_train=True)
    with on_path(checkout):
        models = __import__("diffcse.models", fromlist=["BertForCL"])
        class _BertForCL(models.BertForCL):
            all_tied_weights_keys: dict = {}   # shim: transformers 5's init_weights reads what post_init sets

        torch.manual_seed(0)
        model = _BertForCL(config, model_args=args)
        model.bert.load_state_dict(backbone, strict=False)
        model.discriminator = _CondBert(config, add_pooling_layer=False)
        model.discriminator.load_state_dict(backbone, strict=False)      # train.py: the backbone's weights
        model.electra_head = nn.Linear(config.hidden_size, 2)            # train.py: nn.Linear(768, 2)
        _load_heads(model.mlp, model.electra_head, config.hidden_size)
        model.float().train()
        no_dropout(model)
        enc = tok(SENTENCES, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
        masked, _ = masked_inputs(tok, enc["input_ids"], enc["attention_mask"])
        n, length = enc["input_ids"].shape

        def pairs(x):   # (N, L) -> (N, 2, L): both views of a sentence side by side, as their collator
            return torch.stack([x, x], dim=1)

        out = model(input_ids=pairs(enc["input_ids"]), attention_mask=pairs(enc["attention_mask"]),
                    token_type_ids=pairs(enc["token_type_ids"]),
                    mlm_input_ids=masked.view(2, n, length).transpose(0, 1).contiguous(),
                    mlm_labels=torch.zeros(n, 2, length, dtype=torch.long))   # only "is not None" is read
        out.loss.backward()
        return Outputs(loss=float(out.loss.detach()),
                       grads=zero_analytic(grads_of(model.named_parameters(), rename=_rename)))


def initial_heads(hidden: int) -> dict:
    """The projector's and the 2-way head's initial values, drawn once here and loaded into both sides (each
    side's own init is a random draw): the ProjectionMLP's Linear weights N(0, 0.02) as the code's
    ``init_weights``, BatchNorm at (1, 0), the head's weight and bias uniform(±1/√hidden) as ``nn.Linear``'s."""
    g = torch.Generator().manual_seed(2022)
    bound = hidden ** -0.5
    return {
        "projector": {"net.0.weight": torch.randn(2 * hidden, hidden, generator=g) * 0.02,
                      "net.1.weight": torch.ones(2 * hidden), "net.1.bias": torch.zeros(2 * hidden),
                      "net.3.weight": torch.randn(hidden, 2 * hidden, generator=g) * 0.02},
        "rtd_head": {"weight": (torch.rand(2, hidden, generator=g) * 2 - 1) * bound,
                     "bias": (torch.rand(2, generator=g) * 2 - 1) * bound},
    }


def _load_heads(projector, head, hidden: int) -> None:
    init = initial_heads(hidden)
    with torch.no_grad():
        for k, v in init["projector"].items():
            projector.get_parameter(k).copy_(v)
        head.load_state_dict(init["rtd_head"])


def sentlab_outputs() -> Outputs:
    from sentlab.config import TrainParams
    from sentlab.methods import get_method
    from sentlab.methods.base import Batch

    encoder, tok = load_backbone()
    cls = get_method("diffcse")
    params = cls.Params(generator=str(generator_dir()), temperature=TEMP, rtd_weight=LAMBDA, mask_ratio=MASK_RATIO,
                        ).resolved(TrainParams(max_length=MAX_LEN))
    method = cls(encoder, tok, params, seed=0)
    _load_heads(method.projector, method.rtd_head, encoder.config.hidden_size)
    method.train()
    no_dropout(method)
    batch = method.prepare(Batch(list(SENTENCES), draw=0, seed=0))
    enc = batch.features["enc"]
    batch.features["masked_ids"], batch.features["chosen"] = masked_inputs(tok, enc["input_ids"],
                                                                          enc["attention_mask"])
    out = method(batch)
    out["loss"].backward()
    grads = grads_of(method.encoder.named_parameters())
    for prefix, mod in (("projector.", method.projector), ("discriminator.", method.discriminator),
                        ("rtd_head.", method.rtd_head)):
        grads |= grads_of(mod.named_parameters(), prefix=prefix)
    return Outputs(loss=float(out["loss"].detach()), grads=zero_analytic(grads))


def _control():
    from sentlab.methods.diffcse import DiffCSE

    orig = DiffCSE.rtd_loss
    return patched(DiffCSE, "rtd_loss", lambda self, *a, **k: 0.0 * orig(self, *a, **k))


CONTROL = ("the RTD term dropped", _control)


if __name__ == "__main__":
    set_determinism()
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING,
                  golden_grads=["embeddings.word_embeddings.weight", "encoder.layer.3.attention.self.query.weight",
                                "projector.net.0.weight", "discriminator.encoder.layer.5.output.dense.weight",
                                "rtd_head.weight"],
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
