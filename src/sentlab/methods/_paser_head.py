"""PaSeR's output head, shared by the phrase decoder and MLM: BERT's MLM head loaded through transformers.

Also SimCSE's auxiliary MLM (:mod:`sentlab.methods.simcse_mlm`) loads its head here (:func:`init_lm_head`) and
takes its loss from :func:`masked_lm_loss`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import SentlabError
from ._common import full_precision

log = logging.getLogger(__name__)


# --- LM head ---------------------------------------------------------------------------
class LMHead(nn.Module):
    """BERT's MLM head (``cls.predictions``): dense → GELU → LayerNorm → word embeddings^T + bias.

    The output projection is the encoder's word-embedding matrix, passed in at
    call time (not registered twice, so ``state_dict`` has no shared tensor),
    or, with ``own_output``, the head's own matrix ``decoder.weight`` (PaSeR's
    and SimCSE's code: their ``BertForCL.lm_head`` is never tied to the word
    embeddings; it starts from the checkpoint's output matrix and trains apart).
    Shared by the MLM loss and the phrase decoder, as in the PaSeR code.
    The head runs in fp32 with autocast off: under bf16 autocast, logits near
    10 would have a resolution of 0.06 and the cross-entropy of L_gen / L_MLM
    would be taken on rounded values.
    """

    def __init__(self, hidden: int, vocab: int, eps: float = 1e-12, own_output: bool = False):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.bias = nn.Parameter(torch.zeros(vocab))
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)
        # own output matrix (set by init_lm_head: the checkpoint's, or a copy of the word embeddings)
        self.decoder = nn.Linear(hidden, vocab, bias=False) if own_output else None

    def forward(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """fp32 logits ``(..., vocab)`` of hidden states ``h`` (any dtype), whatever autocast is on; the output
        matrix is ``word_embeddings`` unless the head has its own."""
        out = self.decoder.weight if self.decoder is not None else word_embeddings
        with torch.autocast(device_type=h.device.type, enabled=False):
            x = self.norm(F.gelu(self.dense(h.float())))
            return F.linear(x, out.float(), self.bias.float())

    def load_pretrained(self, model_dir: Optional[str]) -> bool:
        """Copy the checkpoint's MLM head (BERT ``cls.predictions``, RoBERTa ``lm_head``) into this head.

        The head is loaded by transformers, as a hub download is: ``AutoModelForMaskedLM.from_pretrained``
        of the folder, which reads the original bert-base-uncased file's LayerNorm ``gamma``/``beta`` (a
        lookup by key name finds ``…LayerNorm.weight`` there and misses it), safetensors or .bin. It costs
        one more load of the checkpoint at start-up. Returns False when the checkpoint has no head (e.g.
        all-MiniLM-L6-v2, saved without it; a sentlab output): transformers reports its tensors missing.
        """
        if not model_dir or not (Path(model_dir) / "config.json").is_file():
            return False
        import transformers
        from transformers import AutoModelForMaskedLM

        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()
        try:
            model, info = AutoModelForMaskedLM.from_pretrained(model_dir, output_loading_info=True)
        except (ValueError, OSError, KeyError):  # no masked-LM class for this config: no head to load
            return False
        finally:
            transformers.logging.set_verbosity(verbosity)
        prefix = model.base_model_prefix + "."
        if [k for k in info.get("missing_keys", ()) if not k.startswith(prefix)]:
            return False
        parts = _head_parts(model)
        if parts is None:
            return False
        dense, norm, bias = parts
        if bias.shape != self.bias.shape or dense.weight.shape != self.dense.weight.shape:
            return False
        if getattr(model.config, "hidden_act", "gelu") != "gelu":
            raise SentlabError(f"The MLM head of {model_dir} uses {model.config.hidden_act}; PaSeR's LMHead is GELU.")
        own = {"dense.weight": dense.weight, "dense.bias": dense.bias, "norm.weight": norm.weight,
               "norm.bias": norm.bias, "bias": bias}
        if self.decoder is not None:
            own["decoder.weight"] = model.get_output_embeddings().weight   # the checkpoint's output matrix
        self.load_state_dict({k: v.detach().float() for k, v in own.items()}, strict=True)
        self.norm.eps = norm.eps
        return True


def _head_parts(model) -> Optional[tuple[nn.Module, nn.Module, torch.Tensor]]:
    """(dense, LayerNorm, output bias) of a transformers masked-LM model's head (BERT / RoBERTa layouts)."""
    pred = getattr(getattr(model, "cls", None), "predictions", None)
    if pred is not None:
        return pred.transform.dense, pred.transform.LayerNorm, pred.bias
    head = getattr(model, "lm_head", None)
    if head is not None and hasattr(head, "layer_norm"):
        return head.dense, head.layer_norm, head.bias
    return None


def init_lm_head(head: LMHead, encoder: nn.Module, mode: str, method_id: str) -> str:
    """Load the backbone checkpoint's MLM head into ``head`` (``mode`` auto / pretrained) or keep it fresh;
    returns which ("pretrained" / "fresh"). ``pretrained`` fails when the checkpoint has no head; ``auto``
    then keeps a fresh one with a warning (and sentlab.json's ``init.lm_head`` says ``random``)."""
    src = getattr(encoder, "name_or_path", None) or getattr(encoder.config, "_name_or_path", None)
    if mode != "fresh" and head.load_pretrained(src):
        return "pretrained"
    if head.decoder is not None:   # a fresh head's own output matrix starts as the word embeddings
        with torch.no_grad():
            head.decoder.weight.copy_(encoder.get_input_embeddings().weight)
    if mode == "fresh":
        return "fresh"
    if mode == "pretrained":
        raise SentlabError(
            f"methods.{method_id}.lm_head = pretrained, but the backbone checkpoint ({src}) has no MLM head weights "
            f"(cls.predictions.* / lm_head.*). Use lm_head: fresh (or auto) for this backbone.")
    log.warning("%s: backbone %s has no MLM head weights; using a fresh head tied to the word embeddings",
                method_id, src)
    return "fresh"


def masked_lm_loss(encoder: nn.Module, head: LMHead, output_weight: torch.Tensor, inputs: dict[str, torch.Tensor],
                   index: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """MLM's loss: ``encoder`` on the corrupted ``inputs`` (token ids, attention mask … on the device), ``head``
    (output matrix ``output_weight``) applied at the target positions only, ``index`` into the flattened
    ``(rows · length)`` grid, their original tokens ``targets``; fp32 cross-entropy, the mean over the targets
    (as ``BertForMaskedLM`` / SimCSE's ``do_mlm``). No target: 0 (a constant)."""
    if index.numel() == 0:
        return torch.zeros((), device=index.device)
    hidden = encoder(**inputs, return_dict=True).last_hidden_state
    logits = head(hidden.flatten(0, 1).index_select(0, index), output_weight)
    with full_precision(logits.device):
        return F.cross_entropy(logits.float(), targets)
