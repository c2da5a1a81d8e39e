"""PaSeR's training-only pieces: phrase choice, span masking, the decoding signal, the decoder, the LM head.

Kept apart from :mod:`sentlab.methods.paser` so that module reads like the
algorithm. Nothing here is used at inference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn


CHUNK_SOURCES = {"np": ("NP",), "vp": ("VP",), "np_vp": ("NP", "VP")}


# --- phrases ---------------------------------------------------------------------
def _get(obj: Any, key: str):
    return obj[key] if isinstance(obj, Mapping) else getattr(obj, key)


def choose_phrases(text: str, rake: Optional[Sequence[Any]], chunks: Optional[Sequence[Any]], source: str, k: int,
                   rng: random.Random) -> list[tuple[int, int]]:
    """Character spans of the phrases to mask, in target order.

    ``rake``: the annotation's ranked RAKE phrases (best first) → the first
    ``k`` non-overlapping ones, in rank order (PaSeR Sec. 3.1.2). ``np`` /
    ``vp`` / ``np_vp``: chunk-tree phrases with those labels; PaSeR
    (Sec. 3.1.1) masks "a random sub-tree", so ``k`` of them are drawn at
    random with ``rng`` and kept in sentence order. Spans that overlap an
    already chosen one, are empty, or do not match the sentence are skipped.
    """
    if source == "rake":
        cands = [(int(_get(p, "start")), int(_get(p, "end")), _get(p, "text")) for p in (rake or [])]
    else:
        labels = CHUNK_SOURCES[source]
        cands = [(int(_get(c, "start")), int(_get(c, "end")), _get(c, "text")) for c in (chunks or [])
                 if _get(c, "label") in labels]
        rng.shuffle(cands)
    chosen: list[tuple[int, int]] = []
    for s, e, t in cands:
        if len(chosen) >= k:
            break
        if not (0 <= s < e <= len(text)) or not text[s:e].strip():
            continue
        if t is not None and text[s:e] != t:
            continue  # a span that does not point at its own text: the annotation is for another sentence
        if any(s < ce and cs < e for cs, ce in chosen):
            continue
        chosen.append((s, e))
    if source != "rake":
        chosen.sort()
    return chosen


@dataclass
class MaskedView:
    """One sentence's masked duplicate s̃ and its decoder target (token ids)."""

    input_ids: list[int]          # s̃ token ids (with [CLS]/[SEP]), phrases replaced by [MASK]
    phrase_token_ids: list[list[int]] = field(default_factory=list)  # ids of each masked phrase, target order
    masked_positions: list[list[int]] = field(default_factory=list)  # token positions in s̃ per phrase


def mask_spans(tokenizer, text: str, spans: Sequence[tuple[int, int]], max_length: int) -> MaskedView:
    """Tokenise ``text`` and replace every word piece inside a chosen span by ``[MASK]``.

    Word pieces are mapped to characters with the fast tokenizer's offset
    mapping; a piece belongs to span (s, e) when its characters overlap
    [s, e). A phrase cut by truncation is neither masked nor a target.
    """
    enc = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=True,
                    return_special_tokens_mask=True)
    ids = list(enc["input_ids"])
    offsets = enc["offset_mapping"]
    special = enc["special_tokens_mask"]
    full = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    view = MaskedView(input_ids=list(ids))
    for s, e in spans:
        pos = [i for i, (a, b) in enumerate(offsets) if not special[i] and b > a and a < e and s < b]
        n_full = sum(1 for a, b in full if b > a and a < e and s < b)
        if not pos or len(pos) != n_full:
            continue  # truncated away (entirely or partly)
        view.phrase_token_ids.append([ids[i] for i in pos])
        view.masked_positions.append(pos)
        for i in pos:
            view.input_ids[i] = tokenizer.mask_token_id
    return view


def decoder_target(phrases: Sequence[Sequence[int]], sep_id: int) -> list[int]:
    """``p_1 [SEP] p_2 [SEP] … p_k [SEP]`` (the target always ends with [SEP])."""
    out: list[int] = []
    for p in phrases:
        out += list(p) + [sep_id]
    return out


def mlm_mask(input_ids: torch.Tensor, special: torch.Tensor, tokenizer, prob: float = 0.15,
             generator: Optional[torch.Generator] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's MLM corruption (Devlin et al. 2019): ``prob`` of the non-special tokens become targets;
    of those 80% → [MASK], 10% → a random token, 10% unchanged. Returns (inputs, labels with -100 elsewhere)."""
    labels = input_ids.clone()
    p = torch.full(labels.shape, prob)
    p.masked_fill_(special.bool().cpu(), 0.0)
    chosen = torch.bernoulli(p, generator=generator).bool().to(input_ids.device)
    labels[~chosen] = -100
    inputs = input_ids.clone()
    replace = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool().to(input_ids.device) & chosen
    inputs[replace] = tokenizer.mask_token_id
    rand = (torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool().to(input_ids.device)
            & chosen & ~replace)
    words = torch.randint(len(tokenizer), labels.shape, generator=generator).to(input_ids.device)
    inputs[rand] = words[rand]
    return inputs, labels


# --- decoding signal ---------------------------------------------------------------
class DecodingSignal(nn.Module):
    """PaSeR's decoding signal as cross-attention memory: four vectors per sentence.

    Paper (Eq. 2): ``[E_s, E_s̃, m·|E_s − E_s̃|, n·|E_s ∗ E_s̃|]``. The authors' code
    feeds the four as memory vectors in the order ``[n·(E_s∗E_s̃), m·(E_s−E_s̃), E_s, E_s̃]``
    (signed) with ``E_s̃`` first passed through a learned linear map. ``absolute``,
    ``project_masked`` and ``order`` select between them. Cross-attention has no
    positions over the memory, so the order changes nothing unless
    ``type_embeddings`` adds a learned vector per slot.

    ``norm`` (neither paper nor code; the paper calls m and n "scaling factors
    to normalize these four decoding signals") puts one learned LayerNorm on
    each of the four memory vectors. A randomly initialised decoder then uses
    the memory within tens of steps instead of sitting at the unigram plateau
    (predicting [SEP]) for hundreds. LayerNorm is scale-invariant, so with it
    m and n no longer change anything: the m/n grid needs ``norm=False``.
    """

    ORDERS = {"paper": ("s", "t", "diff", "prod"), "code": ("prod", "diff", "s", "t")}

    def __init__(self, hidden: int, m: float, n: float, absolute: bool = True, project_masked: bool = False,
                 order: str = "paper", type_embeddings: bool = False, norm: bool = False):
        super().__init__()
        self.m, self.n, self.absolute, self.order = m, n, absolute, self.ORDERS[order]
        self.proj = nn.Linear(hidden, hidden) if project_masked else None
        self.type_emb = nn.Parameter(torch.zeros(4, hidden)) if type_embeddings else None
        self.norm = nn.LayerNorm(hidden) if norm else None
        if self.type_emb is not None:
            nn.init.normal_(self.type_emb, std=0.02)

    def forward(self, e_s: torch.Tensor, e_t: torch.Tensor) -> torch.Tensor:
        """``(B, d), (B, d) -> (B, 4, d)`` memory."""
        if self.proj is not None:
            e_t = self.proj(e_t)
        diff, prod = e_s - e_t, e_s * e_t
        if self.absolute:
            diff, prod = diff.abs(), prod.abs()
        parts = {"s": e_s, "t": e_t, "diff": self.m * diff, "prod": self.n * prod}
        mem = torch.stack([parts[k] for k in self.order], dim=1)
        if self.norm is not None:
            mem = self.norm(mem)
        if self.type_emb is not None:
            mem = mem + self.type_emb
        return mem


# --- LM head ---------------------------------------------------------------------------
class LMHead(nn.Module):
    """BERT's MLM head (``cls.predictions``): dense → GELU → LayerNorm → word embeddings^T + bias.

    The output projection is the encoder's word-embedding matrix, passed in at
    call time (not registered twice, so ``state_dict`` has no shared tensor).
    Shared by the MLM loss and the phrase decoder, as in the PaSeR code.
    """

    BERT_KEYS = {"dense.weight": "cls.predictions.transform.dense.weight",
                 "dense.bias": "cls.predictions.transform.dense.bias",
                 "norm.weight": "cls.predictions.transform.LayerNorm.weight",
                 "norm.bias": "cls.predictions.transform.LayerNorm.bias",
                 "bias": "cls.predictions.bias"}
    ROBERTA_KEYS = {"dense.weight": "lm_head.dense.weight", "dense.bias": "lm_head.dense.bias",
                    "norm.weight": "lm_head.layer_norm.weight", "norm.bias": "lm_head.layer_norm.bias",
                    "bias": "lm_head.bias"}

    def __init__(self, hidden: int, vocab: int, eps: float = 1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.bias = nn.Parameter(torch.zeros(vocab))
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(h))), word_embeddings, self.bias)

    def load_pretrained(self, model_dir: Optional[str]) -> bool:
        """Copy the checkpoint's MLM-head weights (BERT ``cls.predictions.*`` or RoBERTa ``lm_head.*``).

        Returns False when ``model_dir`` has no such weights (e.g. all-MiniLM-L6-v2, saved without its head).
        """
        state = _read_checkpoint_keys(model_dir, ("cls.predictions.", "lm_head."))
        for keys in (self.BERT_KEYS, self.ROBERTA_KEYS):
            if all(v in state for v in keys.values()):
                own = {k: state[v] for k, v in keys.items()}
                if own["bias"].shape != self.bias.shape or own["dense.weight"].shape != self.dense.weight.shape:
                    return False
                self.load_state_dict(own, strict=True)
                return True
        return False


def _read_checkpoint_keys(model_dir: Optional[str], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    if not model_dir or not Path(model_dir).is_dir():
        return {}
    d = Path(model_dir)
    out: dict[str, torch.Tensor] = {}
    files = sorted(d.glob("*.safetensors"))
    if files:
        from safetensors import safe_open

        for f in files:
            with safe_open(str(f), "pt") as fh:
                for k in fh.keys():
                    if k.startswith(prefixes):
                        out[k] = fh.get_tensor(k)
        return out
    for f in sorted(d.glob("pytorch_model*.bin")):
        sd = torch.load(f, map_location="cpu", weights_only=True)
        out.update({k: v for k, v in sd.items() if k.startswith(prefixes)})
    return out


# --- decoder ---------------------------------------------------------------------------
class PhraseDecoder(nn.Module):
    """A randomly initialised Transformer decoder (post-LN, GELU: BART-style) over the 4-vector memory.

    Input embeddings are the *encoder's* embedding module (word + position
    (+ type) embeddings, LayerNorm), as in the PaSeR code (``embeddings="encoder"``),
    or only the shared word embeddings plus the decoder's own learned positions
    (``embeddings="word"``). Either way the word embeddings are tied to the encoder's.
    """

    def __init__(self, hidden: int, layers: int, heads: int, ffn: int, dropout: float = 0.1,
                 embeddings: str = "encoder", max_positions: int = 512):
        super().__init__()
        layer = nn.TransformerDecoderLayer(hidden, heads, ffn, dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.layers = nn.TransformerDecoder(layer, num_layers=layers)
        self.embeddings_kind = embeddings
        if embeddings == "word":
            self.positions = nn.Embedding(max_positions, hidden)
            self.emb_norm = nn.LayerNorm(hidden)
            self.emb_drop = nn.Dropout(dropout)

    def embed(self, encoder: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        if self.embeddings_kind == "encoder":
            return encoder.embeddings(input_ids=ids)
        pos = torch.arange(ids.size(1), device=ids.device).unsqueeze(0)
        return self.emb_drop(self.emb_norm(encoder.get_input_embeddings()(ids) + self.positions(pos)))

    def forward(self, encoder: nn.Module, ids: torch.Tensor, pad_mask: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """Hidden states ``(B, T, d)`` for decoder inputs ``ids`` (teacher forcing, causal)."""
        x = self.embed(encoder, ids)
        causal = nn.Transformer.generate_square_subsequent_mask(ids.size(1), device=ids.device, dtype=torch.bool)
        return self.layers(x, memory.to(x.dtype), tgt_mask=causal, tgt_key_padding_mask=~pad_mask.bool(),
                           tgt_is_causal=True)
