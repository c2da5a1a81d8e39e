"""PaSeR's training-only pieces: phrase choice, span masking, the decoding signal, the decoder and the file
they and the LM head (:mod:`sentlab.methods._paser_head`) are kept in for paser_sup.

Kept apart from :mod:`sentlab.methods.paser` so that module reads like the
algorithm. Nothing here is used at inference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..errors import SentlabError

# ``phrases`` value -> chunk labels of the annotation's ``chunks`` column. The annotation's ``VP`` label is a
# *verb group* in both backends (verbs with their adverbs, modal, particle; no object): the regexp grammar's VP
# rule (annotate/nltk_backend.py) and spaCy's verb + aux/neg/prt, not a parse-tree VP with its complements;
# so the ``phrases`` values say ``verb_group`` (Table 5's "VP only" / "NP+VP" rows are ``verb_group`` /
# ``np_verb_group``).
CHUNK_SOURCES = {"np": ("NP",), "verb_group": ("VP",), "sbar": ("SBAR",), "np_verb_group": ("NP", "VP"),
                 "np_verb_group_sbar": ("NP", "VP", "SBAR")}


# --- phrases ---------------------------------------------------------------------
def _get(obj: Any, key: str):
    return obj[key] if isinstance(obj, Mapping) else getattr(obj, key)


def choose_phrases(text: str, rake: Optional[Sequence[Any]], chunks: Optional[Sequence[Any]], source: str, k: int,
                   rng: random.Random, one_each: bool = False) -> list[tuple[int, int]]:
    """Character spans of the phrases to mask, in target order.

    ``rake``: the annotation's ranked RAKE phrases (best first) → the first
    ``k`` non-overlapping ones, in rank order (PaSeR Sec. 3.1.2). Chunk sources
    (:data:`CHUNK_SOURCES`: ``np``, ``verb_group``, ``sbar``, and the unions
    ``np_verb_group``, ``np_verb_group_sbar``): chunks with those labels; PaSeR
    (Sec. 3.1.1) masks "a random sub-tree" (SBAR, VP or NP), so ``k`` of them are
    drawn at random with ``rng`` and kept in sentence order; with ``one_each``, ``k``
    of *each* label of a union (Table 5's NP+VP: one NP and one VP), drawn label by
    label in :data:`CHUNK_SOURCES` order. Spans that overlap an already chosen one,
    are empty, or do not match the sentence are skipped.
    """
    if source != "rake" and source not in CHUNK_SOURCES:
        raise ValueError(f"phrase source {source!r}; allowed: rake, {', '.join(CHUNK_SOURCES)}")
    if source == "rake":
        cands = [(int(_get(p, "start")), int(_get(p, "end")), _get(p, "text")) for p in (rake or [])]
    else:
        labels = CHUNK_SOURCES[source]
        chosen: list[tuple[int, int]] = []
        for group in ([(lab,) for lab in labels] if one_each else [labels]):
            cands = [(int(_get(c, "start")), int(_get(c, "end")), _get(c, "text")) for c in (chunks or [])
                     if _get(c, "label") in group]
            rng.shuffle(cands)
            chosen += _pick(text, cands, k, chosen)
        return sorted(chosen)
    return _pick(text, cands, k, [])


def _pick(text: str, cands, k: int, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Up to ``k`` spans of ``cands`` (in order) that are valid and overlap neither each other nor ``taken``."""
    chosen: list[tuple[int, int]] = []
    for s, e, t in cands:
        if len(chosen) >= k:
            break
        if not (0 <= s < e <= len(text)) or not text[s:e].strip():
            continue
        if t is not None and text[s:e] != t:
            continue  # a span that does not point at its own text: the annotation is for another sentence
        if any(s < ce and cs < e for cs, ce in [*taken, *chosen]):
            continue
        chosen.append((s, e))
    return chosen


@dataclass
class MaskedView:
    """One sentence's masked duplicate s̃ and its decoder target (token ids)."""

    input_ids: list[int]          # s̃ token ids (with [CLS]/[SEP]), phrases replaced by [MASK]
    phrase_token_ids: list[list[int]] = field(default_factory=list)  # ids of each masked phrase, target order
    masked_positions: list[list[int]] = field(default_factory=list)  # token positions in s̃ per phrase


@dataclass
class Views:
    """A batch's inputs for PaSeR: the (augmented) s, the masked (augmented) s̃, the decoder targets,
    and the number of EDA edits each view of each sentence got."""

    s_texts: list[str]
    masked: list[MaskedView]
    spans: list[list[tuple[int, int]]]
    t_texts: list[str]
    edits_s: list[int] = field(default_factory=list)
    edits_masked: list[int] = field(default_factory=list)

    def eda_stats(self) -> dict[str, torch.Tensor]:
        """``eda_edits_s`` / ``eda_edits_masked``: mean EDA edits per sentence of each view (logged as train.*)."""
        return {f"eda_edits_{k}": torch.tensor(float(np.mean(v)) if v else 0.0)
                for k, v in (("s", self.edits_s), ("masked", self.edits_masked))}


MASK_UNITS = ("wordpiece", "phrase")


def mask_spans(tokenizer, text: str, spans: Sequence[tuple[int, int]], max_length: int,
               unit: str = "wordpiece") -> MaskedView:
    """Tokenise ``text`` and replace the word pieces inside each chosen span by ``[MASK]``.

    ``unit="wordpiece"``: one [MASK] per word piece (PaSeR Table 7 shows one
    blank per token: "There are _ _ for you"), so s̃ tells the phrase's length;
    ``unit="phrase"``: the phrase's pieces collapse into a single [MASK].
    Word pieces are mapped to characters with the fast tokenizer's offset
    mapping; a piece belongs to span (s, e) when its characters overlap
    [s, e). A phrase cut by truncation (at ``max_length`` word pieces of the
    unmasked text, in both units) is neither masked nor a target.
    """
    if unit not in MASK_UNITS:
        raise ValueError(f"mask unit {unit!r}; allowed: {', '.join(MASK_UNITS)}")
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
    return _one_mask_per_phrase(view) if unit == "phrase" else view


def _one_mask_per_phrase(view: MaskedView) -> MaskedView:
    """``view`` with each phrase's run of [MASK] pieces (contiguous: a span is) cut to its first one."""
    drop = {i for pos in view.masked_positions for i in pos[1:]}
    kept = [i for i in range(len(view.input_ids)) if i not in drop]
    new_at = {old: new for new, old in enumerate(kept)}
    return MaskedView(input_ids=[view.input_ids[i] for i in kept], phrase_token_ids=view.phrase_token_ids,
                      masked_positions=[[new_at[pos[0]]] for pos in view.masked_positions])


def pad(seqs: Sequence[Sequence[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(ids, attention_mask)`` CPU tensors of token-id lists."""
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), value, dtype=torch.long)
    att = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
        att[i, : len(s)] = 1
    return ids, att


def decoder_target(phrases: Sequence[Sequence[int]], sep_id: int) -> list[int]:
    """``p_1 [SEP] p_2 [SEP] … p_k [SEP]`` (the target always ends with [SEP])."""
    out: list[int] = []
    for p in phrases:
        out += list(p) + [sep_id]
    return out


def mlm_special(input_ids: torch.Tensor, attention_mask: torch.Tensor, tokenizer) -> torch.Tensor:
    """The positions MLM never masks: the tokenizer's special tokens and the padding."""
    special = torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids, device=input_ids.device))
    return special | (attention_mask == 0)


def mlm_mask(input_ids: torch.Tensor, special: torch.Tensor, tokenizer, prob: float = 0.15,
             generator: Optional[torch.Generator] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's MLM corruption (Devlin et al. 2019): ``prob`` of the non-special tokens become targets;
    of those 80% → [MASK], 10% → a random token, 10% unchanged. Returns (inputs, labels with -100 elsewhere)."""
    labels = input_ids.clone()
    p = torch.full(labels.shape, prob)
    p.masked_fill_(special.bool().to(p.device), 0.0)  # the draws on the CPU (pass CPU ids: no read-back)
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
    (signed) with ``E_s̃`` first passed through a learned linear map. ``abs_diff``
    (``|E_s − E_s̃|``), ``abs_prod`` (``|E_s ∗ E_s̃|``; Sec. 3.2.2's prose writes it
    signed, Eq. 2 and 6 absolute), ``project_masked`` and ``order`` select between
    them. Cross-attention has no
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

    def __init__(self, hidden: int, m: float, n: float, abs_diff: bool = True, abs_prod: bool = True,
                 project_masked: bool = False, order: str = "paper", type_embeddings: bool = False, norm: bool = False):
        super().__init__()
        self.m, self.n, self.order = m, n, self.ORDERS[order]
        self.abs_diff, self.abs_prod = abs_diff, abs_prod
        self.proj = nn.Linear(hidden, hidden) if project_masked else None
        if self.proj is not None:   # the code's ``projection``: made in cl_init before init_weights (BERT's init)
            nn.init.normal_(self.proj.weight, std=0.02)
            nn.init.zeros_(self.proj.bias)
        self.type_emb = nn.Parameter(torch.zeros(4, hidden)) if type_embeddings else None
        self.norm = nn.LayerNorm(hidden) if norm else None
        if self.type_emb is not None:
            nn.init.normal_(self.type_emb, std=0.02)

    def forward(self, e_s: torch.Tensor, e_t: torch.Tensor) -> torch.Tensor:
        """``(B, d), (B, d) -> (B, 4, d)`` memory."""
        if self.proj is not None:
            e_t = self.proj(e_t)
        diff, prod = e_s - e_t, e_s * e_t
        if self.abs_diff:
            diff = diff.abs()
        if self.abs_prod:
            prod = prod.abs()
        parts = {"s": e_s, "t": e_t, "diff": self.m * diff, "prod": self.n * prod}
        mem = torch.stack([parts[k] for k in self.order], dim=1)
        if self.norm is not None:
            mem = self.norm(mem)
        if self.type_emb is not None:
            mem = mem + self.type_emb
        return mem


# --- decoder ---------------------------------------------------------------------------
class _OverEncoderEmbeddings(nn.Module):
    """A decoder whose inputs are the encoder's embeddings: its whole embedding module (word + position (+ type)
    embeddings, LayerNorm; ``embeddings="encoder"``, the PaSeR code) or only its word embeddings
    (``embeddings="word"``), passed through :meth:`over_words`. Either way the word embeddings are the encoder's."""

    embeddings_kind = "encoder"

    def embed(self, encoder: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        if self.embeddings_kind == "encoder":
            return encoder.embeddings(input_ids=ids)
        return self.over_words(encoder.get_input_embeddings()(ids))

    def over_words(self, words: torch.Tensor) -> torch.Tensor:
        return words


class PhraseDecoder(_OverEncoderEmbeddings):
    """PyTorch's Transformer decoder (post-LN, GELU: BART-style), randomly initialised, over the 4-vector memory
    (``decoder_impl: torch``). With ``embeddings="word"`` it adds its own learned positions, a LayerNorm and dropout
    on the word embeddings."""

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

    def over_words(self, words: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(words.size(1), device=words.device).unsqueeze(0)
        return self.emb_drop(self.emb_norm(words + self.positions(pos)))

    def forward(self, encoder: nn.Module, ids: torch.Tensor, pad_mask: torch.Tensor,
                memory: torch.Tensor) -> torch.Tensor:
        """Hidden states ``(B, T, d)`` for decoder inputs ``ids`` (teacher forcing, causal)."""
        x = self.embed(encoder, ids)
        causal = nn.Transformer.generate_square_subsequent_mask(ids.size(1), device=ids.device, dtype=torch.bool)
        return self.layers(x, memory.to(x.dtype), tgt_mask=causal, tgt_key_padding_mask=~pad_mask.bool(),
                           tgt_is_causal=True)


class BartPhraseDecoder(_OverEncoderEmbeddings):
    """The PaSeR code's decoder (its ``cl_init``; ``decoder_impl: bart``, the default): transformers' ``BartDecoder``
    of a ``BartConfig`` with the encoder's width as ``d_model``, ``decoder_layers``, ``decoder_attention_heads``,
    ``decoder_ffn_dim`` and GELU, randomly initialised (N(0, 0.02)), its input embeddings the encoder's embedding
    module's output (the code sets ``decoder.embed_tokens = bert.embeddings``; ``embeddings="word"``: the word
    embeddings alone), onto which BART adds its own learned positions and embedding LayerNorm. BART's own token
    embedding is never used and dropped.

    Against :class:`PhraseDecoder` (PyTorch's layers): those positions and that LayerNorm, the init (PyTorch's
    Xavier/Kaiming there), and no dropout on the attention weights or after the FFN's activation
    (``attention_dropout`` and ``activation_dropout`` 0.0, BartConfig's defaults, as in the code).
    """

    def __init__(self, hidden: int, layers: int, heads: int, ffn: int, dropout: float = 0.1,
                 embeddings: str = "encoder", max_positions: int = 512, vocab: int = 30522):
        super().__init__()
        from transformers import BartConfig
        from transformers.models.bart.modeling_bart import BartDecoder

        config = BartConfig(vocab_size=vocab, d_model=hidden, decoder_layers=layers, decoder_attention_heads=heads,
                            decoder_ffn_dim=ffn, activation_function="gelu", dropout=dropout, attention_dropout=0.0,
                            activation_dropout=0.0, decoder_layerdrop=0.0, max_position_embeddings=max_positions,
                            use_cache=False)
        self.bart = BartDecoder(config)
        self.bart.embed_tokens = None   # the encoder's embeddings come in as inputs_embeds
        self.embeddings_kind = embeddings

    def forward(self, encoder: nn.Module, ids: torch.Tensor, pad_mask: torch.Tensor,
                memory: torch.Tensor) -> torch.Tensor:
        """Hidden states ``(B, T, d)`` for decoder inputs ``ids`` (teacher forcing, causal)."""
        x = self.embed(encoder, ids)
        return self.bart(inputs_embeds=x, attention_mask=pad_mask.long(), encoder_hidden_states=memory.to(x.dtype),
                         return_dict=True).last_hidden_state


def build_decoder(params, encoder: nn.Module) -> nn.Module:
    """The decoder ``params.decoder_impl`` names (:class:`BartPhraseDecoder` or :class:`PhraseDecoder`) for
    ``encoder``, randomly initialised from torch's RNG."""
    cfg = encoder.config
    shape = (cfg.hidden_size, params.decoder_layers, params.decoder_heads, params.decoder_ffn or cfg.hidden_size,
             params.decoder_dropout, params.decoder_embeddings, getattr(cfg, "max_position_embeddings", 512))
    if params.decoder_impl == "bart":
        return BartPhraseDecoder(*shape, vocab=encoder.get_input_embeddings().weight.size(0))
    return PhraseDecoder(*shape)


# --- the heads on disk (paser_sup's decoder_init: paser) ---------------------------------
HEADS_FILE = "paser_heads.safetensors"
HEADS = ("decoder.", "signal.", "lm_head.")


def save_heads(method: nn.Module, folder) -> Path:
    """Write the method's decoder + signal + LM head (everything but the encoder) to
    ``folder/paser_heads.safetensors``."""
    from safetensors.torch import save_file

    from ..runtime.io import atomic_path

    state = {k: v.detach().cpu().contiguous() for k, v in method.state_dict().items()
             if not k.startswith("encoder.")}
    path = Path(folder) / HEADS_FILE
    with atomic_path(path) as tmp:
        save_file(state, str(tmp))
    return path


def load_heads(method: nn.Module, folder, parts: tuple[str, ...] = HEADS) -> None:
    """Load the ``parts`` (prefixes of :data:`HEADS`: decoder, signal, LM head) of ``folder/paser_heads.safetensors``
    into the method; the others keep their weights."""
    from safetensors.torch import load_file

    path = Path(folder) / HEADS_FILE
    if not path.is_file():
        raise SentlabError(f"{path} not found: the paser training stage writes it next to the exported model "
                           f"(save_heads). Train paser first, or set decoder_init: random / lm_head: fresh.")
    state = {k: v for k, v in load_file(str(path)).items() if k.startswith(parts)}
    missing, unexpected = method.load_state_dict(state, strict=False)
    bad = [k for k in missing if k.startswith(parts)] + list(unexpected)
    if bad:
        raise SentlabError(f"{path} does not match this PaSeR configuration (keys {bad[:5]}); the decoder params "
                           f"(decoder_impl, decoder_layers, decoder_heads, project_masked …) must equal paser's.")
