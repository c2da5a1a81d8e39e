"""The two-view contrastive core of ``l2p``, ``prompt`` and ``prompt_l2p`` (:mod:`sentlab.methods.l2p`):
SimCSE's doubled batch ``[s_1..s_N, s_1..s_N]`` in one forward pass (or the sentences in two templates), the
[CLS] or [MASK] vector + MLP, in-batch InfoNCE over cos/τ between the two halves — docs/methods.md#l2p-csr.
"""

from __future__ import annotations

import contextlib
from typing import Optional

import torch

from ..nn.encoder import pool
from ._common import MLPHead, doubled, in_batch_info_nce
from .base import Batch, Method


class TwoViewContrastive(Method):
    """Two views of each sentence in one doubled batch, pooled ([CLS] or [MASK]) + MLP, in-batch InfoNCE."""

    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.mlp = MLPHead.of(encoder.config) if params.mlp_train else None
        self._template_cache: dict[str, tuple[list[int], list[int]]] = {}

    # --- input --------------------------------------------------------------
    @property
    def templates(self) -> Optional[tuple[str, str]]:
        t = getattr(self.params, "template", None)
        if t is None:
            return None
        return t, (getattr(self.params, "template2", None) or t)

    def prepare(self, batch: Batch) -> Batch:
        batch.features = {"views": self.encode_views(batch.sentences)}
        return batch

    def encode_views(self, sentences) -> dict[str, torch.Tensor]:
        """CPU token ids of the doubled batch ``[view 1 of s_1..s_N, view 2 of s_1..s_N]``: SimCSE's
        :func:`~sentlab.methods._common.doubled` batch, or the sentences in ``template`` then ``template2``."""
        sentences = list(sentences)
        if self.templates is None:
            return doubled(self.encode_text(sentences))
        t1, t2 = self.templates
        ids = self.templated_ids(sentences, t1) + self.templated_ids(sentences, t2)
        return dict(self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt"))

    def templated_ids(self, sentences, template: str) -> list[list[int]]:
        """Token ids of ``template`` around each sentence, special tokens added.

        The sentence alone is truncated to ``max_length`` tokens *before* it is
        wrapped, as PromptBERT's training code does (``train.py`` cuts the
        sentence's ids at ``max_seq_length``, then adds the template), so the
        [MASK] token is never cut off and the input is up to ``max_length`` plus
        the template's tokens long.
        """
        before, after = self._template_pieces(template)
        head, tail = self._special_tokens()
        sent = self.tokenizer(list(sentences), add_special_tokens=False, truncation=True,
                              max_length=self.params.max_length)["input_ids"]
        return [head + before + s + after + tail for s in sent]

    def _template_pieces(self, template: str) -> tuple[list[int], list[int]]:
        """The ids of the template's text before and after ``{sentence}`` (no special tokens). The text before
        is right-stripped, as PromptBERT's code strips it for RoBERTa (for BERT's tokenizer it changes nothing)."""
        if template not in self._template_cache:
            before, after = template.split("{sentence}")
            before = before.rstrip()
            mask = self.tokenizer.mask_token
            ids = [self.tokenizer(part.format(mask=mask), add_special_tokens=False)["input_ids"]
                   for part in (before, after)]
            self._template_cache[template] = (ids[0], ids[1])
        return self._template_cache[template]

    def _special_tokens(self) -> tuple[list[int], list[int]]:
        """The ids the tokenizer puts before / after a single sequence ([CLS] … [SEP] for BERT)."""
        if "__special__" not in self._template_cache:
            with_sp = self.tokenizer("x", add_special_tokens=True)["input_ids"]
            bare = self.tokenizer("x", add_special_tokens=False)["input_ids"]
            i = next(i for i in range(len(with_sp)) if with_sp[i: i + len(bare)] == bare)
            self._template_cache["__special__"] = (with_sp[:i], with_sp[i + len(bare):])
        return self._template_cache["__special__"]

    # --- representation and loss ----------------------------------------------
    def represent(self, views: dict[str, torch.Tensor]) -> torch.Tensor:
        """Training representation: [CLS] (or [MASK] with a template, minus the empty template's [MASK] vector
        with ``denoise``) of the last layer, then the MLP."""
        denoise = self.templates is not None and getattr(self.params, "denoise", False)
        bias = self.template_bias(views) if denoise else None   # first, as PromptBERT's cl_forward
        out = self.encoder(**self.encoder_inputs(views), return_dict=True)
        if self.templates is not None:
            h = pool(out, views["attention_mask"], "mask", views["input_ids"], self.tokenizer.mask_token_id)
            if bias is not None:
                h = h - bias
        else:
            h = out.last_hidden_state[:, 0]
        return self.mlp(h) if self.mlp is not None else h

    def encoder_inputs(self, views: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What the training passes give the encoder (all of ``views`` here)."""
        return views

    def template_bias(self, views: dict[str, torch.Tensor]) -> torch.Tensor:
        """PromptBERT's template denoising (its ``get_delta``): for each row of the doubled batch, the last-layer
        [MASK] vector of the row's template *without* the sentence, its tokens after the sentence slot at the
        positions they have in the row (position ids shifted by the sentence's token count), every token attending
        every token (the code passes no mask; sentlab an all-ones one, which is the same up to transformers 5.24
        and stays so after: docs/methods.md#promptbert), in train mode (dropout as the main pass) and with the
        gradient. ``(2N, d)``.

        One empty-template row per sentence length 0 … the widest the batch allows (the code: 50 rows), indexed
        by each row's sentence length = its real tokens − the template's (no host sync). The position ids are
        ``0, 1, …`` as the code passes them (for RoBERTa, whose own ids start after the padding index, that is
        the code's offset too)."""
        mask, width = views["attention_mask"], views["attention_mask"].size(1)
        n = mask.size(0) // 2
        device = mask.device
        out = []
        first_before = self._template_pieces(self.templates[0])[0]
        for rows, template in ((slice(0, n), self.templates[0]), (slice(n, None), self.templates[1])):
            before, after = self._template_pieces(template)
            head, tail = self._special_tokens()
            ids = torch.tensor(head + before + after + tail, device=device)
            lengths = torch.arange(max(1, width - len(ids) + 1), device=device)
            d_ids = ids.unsqueeze(0).expand(len(lengths), -1)
            pos = torch.arange(len(ids), device=device).unsqueeze(0).repeat(len(lengths), 1)
            # the shift starts at the sentence slot: the row's own, or template 1's (denoise_shift: template1)
            slot = len(head) + (len(first_before) if getattr(self.params, "denoise_shift", "own") == "template1"
                                else len(before))
            pos[:, slot:] += lengths.unsqueeze(-1)
            with self.unperturbed():
                # an all-ones mask, as "no mask" meant up to transformers 5.24: from 5.25 on, ids that jump with
                # no mask are read as packed sequences and the template's attention is split (docs/methods.md)
                last = self.encoder(input_ids=d_ids, attention_mask=torch.ones_like(d_ids), position_ids=pos,
                                    return_dict=True).last_hidden_state
            at = ids.tolist().index(self.tokenizer.mask_token_id)
            sent_len = (mask[rows].sum(-1) - len(ids)).clamp(0, len(lengths) - 1)
            out.append(last[:, at][sent_len])
        return torch.cat(out)

    def unperturbed(self):
        """A block whose encoder passes see no training perturbation (none here)."""
        return contextlib.nullcontext()

    def contrastive_loss(self, views: dict[str, torch.Tensor]) -> torch.Tensor:
        """In-batch InfoNCE (L2P-CSR Eq. 9) between the two halves of the doubled batch."""
        z1, z2 = self.represent(views).chunk(2)
        return in_batch_info_nce(z1, z2, self.params.temperature)

    def export_info(self) -> dict:
        info = super().export_info()   # pooling: the class's (mask for the templated methods, else cls)
        if self.templates is not None:
            info["template"] = self.templates[0]
            return info | ({"end_period": True} if getattr(self.params, "end_period", False) else {})
        return info
