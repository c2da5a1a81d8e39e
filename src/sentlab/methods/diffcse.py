"""DiffCSE (Chuang et al., NAACL 2022): SimCSE + conditional replaced-token detection, docs/methods.md#diffcse."""

from __future__ import annotations

import copy
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from ..errors import SentlabError
from . import register
from ._common import FrozenSubmodules, MLPHead, doubled, full_precision, in_batch_info_nce
from .base import Batch, ContrastiveParams, Method, PaperAvg


class DiffCSEParams(ContrastiveParams):
    """``methods.diffcse``. Defaults: the authors' code behind the 78.49 (voidism/DiffCSE, ``run_diffcse.sh``,
    ``diffcse/models.py``, ``train.py``), also where the paper's text reads otherwise (the generator's argmax at
    every position, L_RTD over the padded grid: the text's reading is the ablation ``diffcse_paper_text``);
    benchmarks/released/diffcse.py checks the loss and gradients against the code's ``cl_forward``."""

    generator: str = Field(
        "distilbert-base-uncased", min_length=1,
        description="the frozen MLM generator, a hub id or folder with an MLM head and the encoder's vocabulary "
                    "(run_diffcse.sh: distilbert-base-uncased for bert-base-uncased; distilroberta-base for roberta)")
    mask_ratio: float = Field(0.30, gt=0, lt=1, description="share of tokens masked before the generator "
                                                            "(run_diffcse.sh --masking_ratio 0.30 for BERT)")
    mask_token_prob: float = Field(0.8, ge=0, le=1, description="of the masked tokens, the share set to [MASK] (the "
                                                                "code's collator: BERT's 80/10/10)")
    random_token_prob: float = Field(0.1, ge=0, le=1, description="of the masked tokens, the share set to a random "
                                                                  "token (the rest keep their token; the code: 10 %)")
    rtd_weight: float = Field(0.005, ge=0, description="λ of L = L_contrast + λ·L_RTD (run_diffcse.sh: 0.005 for BERT)")
    generator_decoding: Literal["sample", "argmax"] = Field(
        "argmax", description="how the generator fills a position: its argmax (the code behind the 78.49: g_pred = "
                              "logits.argmax(-1); the paper profile) or a draw from its softmax (the paper's text: "
                              "'sampling from a masked language model'; ablation diffcse_paper_text)")
    generator_positions: Literal["masked", "all"] = Field(
        "all", description="positions the generator's token replaces: every non-pad position but [CLS] (the code "
                           "takes the generator's output everywhere; the paper profile) or only the masked ones "
                           "(ELECTRA's corruption, the paper's text; ablation diffcse_paper_text)")
    generator_temperature: float = Field(1.0, gt=0, description="softmax temperature of generator_decoding: sample")
    generator_dropout: bool = Field(
        True, description="the generator's dropout on in training (the code: it is a sub-module of the trained model, "
                          "so HF Trainer's model.train() leaves it on; the paper only says it is fixed)")
    projector: Literal["batchnorm", "simcse"] = Field(
        "batchnorm", description="training-time pooler: the code's --batchnorm ProjectionMLP (Linear 2d, BN, ReLU, "
                                 "Linear d, BN without affine; the paper's BatchNorm pooler) or SimCSE's Linear + tanh")
    condition: Literal["embedding_output", "inputs_embeds"] = Field(
        "embedding_output", description="where h enters the discriminator: as its embedding layer's output at "
                                        "position 0 (the code's cls_input, after LayerNorm/dropout) or as the [CLS] "
                                        "word embedding (inputs_embeds: position/type embeddings and LayerNorm added)")
    condition_vector: Literal["projected", "pooled"] = Field(
        "projected", description="h given to the discriminator: the projector's output (the code's default, "
                                 "before_mlp false) or the [CLS] vector before it (--before_mlp)")
    rtd_positions: Literal["tokens", "all"] = Field(
        "all", description="positions L_RTD averages over: every padded position (the code's CrossEntropyLoss over "
                           "the whole grid, padding counted as 'kept'; the paper profile) or the sentence's tokens "
                           "(the paper's sum over t = 1..T, as a mean; ablation diffcse_paper_text). At max length "
                           "32, batch 64, the padded grid has 1.3-1.6x the real tokens (wiki1m), so 'all' weights "
                           "each token's loss 1.3-1.6x less at the same λ")

    def hub_models(self) -> list[str]:
        return [*super().hub_models(), self.generator]


class ProjectionMLP(nn.Module):
    """DiffCSE's ``--batchnorm`` pooler (``ProjectionMLP`` in diffcse/models.py): Linear(d, 2d, no bias) → BatchNorm
    → ReLU → Linear(2d, d, no bias) → BatchNorm without affine. Its Linear weights N(0, ``initializer_range``), as the
    code's ``cl_init`` → ``init_weights`` leaves them (BERT's _init_weights does not touch BatchNorm)."""

    def __init__(self, hidden: int, std: float = 0.02):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden, 2 * hidden, bias=False), nn.BatchNorm1d(2 * hidden), nn.ReLU(),
                                 nn.Linear(2 * hidden, hidden, bias=False), nn.BatchNorm1d(hidden, affine=False))
        for m in self.net:
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def load_generator(name: str, tokenizer, method_id: str = "diffcse") -> tuple[nn.Module, str]:
    """(frozen MLM generator in eval mode, its folder) for hub id or folder ``name``, through
    :func:`sentlab.assets.resolve.resolve_model` (a hub id that is not here fails with the command that fetches it) and
    transformers' ``AutoModelForMaskedLM`` (safetensors, or a .bin read with ``weights_only``). A checkpoint without
    MLM head weights, or with another vocabulary than the encoder's tokenizer, fails here: the generator would
    replace tokens at random."""
    import transformers
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from ..assets.resolve import resolve_model

    path = resolve_model(name)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(str(path), output_loading_info=True)
    except (ValueError, OSError, KeyError) as e:
        raise SentlabError(f"methods.{method_id}.generator = {name!r} ({path}) has no masked-LM model class "
                           f"({type(e).__name__}: {str(e)[:200]}); give a checkpoint with an MLM head "
                           f"(distilbert-base-uncased for a BERT encoder).") from None
    finally:
        transformers.logging.set_verbosity(verbosity)
    prefix = model.base_model_prefix + "."
    head_missing = [k for k in info.get("missing_keys", ()) if not k.startswith(prefix)]
    if head_missing:
        raise SentlabError(f"methods.{method_id}.generator = {name!r} ({path}) has no MLM head weights (missing: "
                           f"{', '.join(sorted(head_missing)[:3])}): a random head would replace tokens at random. "
                           f"Give a checkpoint saved with its MLM head (distilbert-base-uncased for a BERT encoder).")
    vocab = tokenizer.get_vocab()
    try:
        same = AutoTokenizer.from_pretrained(str(path)).get_vocab() == vocab
    except (OSError, ValueError):
        same = model.config.vocab_size == len(vocab)
    if not same or model.config.vocab_size < len(vocab):
        raise SentlabError(f"methods.{method_id}.generator = {name!r} has another vocabulary than the encoder's "
                           f"tokenizer ({model.config.vocab_size} vs {len(vocab)} tokens): its token ids would mean "
                           f"other words. Use the generator of the backbone's family (distilbert-base-uncased for "
                           f"bert-base-uncased, distilroberta-base for roberta-base).")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, str(path)


@register("diffcse")
class DiffCSE(FrozenSubmodules, Method):
    """DiffCSE: SimCSE's dropout views + a discriminator that must tell, from the sentence embedding, which tokens
    a frozen MLM replaced.

    Chuang, Dangovski, Luo, Zhang, Chang, Soljačić, Li, Yih, Kim & Glass, "DiffCSE: Difference-based
    Contrastive Learning for Sentence Embeddings", NAACL 2022 (code: voidism/DiffCSE). Per batch of N sentences:

    1. :meth:`embed`: the doubled batch through the encoder (two dropout masks); ``h`` = [CLS];
       ``z = projector(h)`` (BatchNorm over the 2N rows, as the code); ``L_contrast`` = InfoNCE of ``z`` (τ);
    2. :meth:`mask_views` (in :meth:`prepare`, drawn from ``batch.rng()``): each of the 2N rows masked on its own,
       ``mask_ratio`` of the non-special tokens, 80/10/10 ([MASK] / random / kept);
    3. :meth:`corrupt`: the frozen generator reads them (no_grad) and its argmax replaces every token but [CLS]
       (the code; ``generator_decoding``/``generator_positions``: a sample at the masked positions): ``x''``; a
       position whose generator token equals the original counts as not replaced (the code's
       ``replaced = g_pred != input_ids``); [CLS] and padding are never replaced;
    4. :meth:`discriminate`: the discriminator (its own copy of the encoder, initialised from the same pretrained
       weights as the code's ``discriminator.load_state_dict(pretrained.bert)``) reads ``x''`` with the row's
       sentence vector in place of position 0 (``condition``) and a linear head gives 2 logits per token;
    5. :meth:`rtd_loss`: cross-entropy of those logits against ``replaced`` (= BCE on the logit difference)
       over the padded grid (the code) or the tokens (``rtd_positions``); ``L = L_contrast + λ·L_RTD``.

    The gradient of ``L_RTD`` reaches the encoder through ``h`` only. The generator is frozen (no gradient, not
    in the optimiser, not in checkpoints: it is reloaded from its checkpoint); the discriminator, its head and the
    projector are training-only: the inference encoder is the bare encoder with [CLS] (``cls_before_pooler``).
    The code patches BERT's forward for ``cls_input``; here a forward hook on the discriminator's embedding
    module puts ``h`` at position 0 of its output (``condition: embedding_output``, the code's place), or
    ``inputs_embeds`` carries it (``condition: inputs_embeds``).

    Paper vs code (params, defaults in :class:`DiffCSEParams`: the code's): the paper samples from the generator,
    the code takes its argmax at every position (``generator_decoding``, ``generator_positions``); the paper's
    L_RTD sums over the sentence's tokens, the code averages over the padded grid (``rtd_positions``). The 78.49
    came from the code, so its reading is the default and the paper profile's; the text's is the ablation
    ``diffcse_paper_text``.

    Inputs: ``Batch.sentences``.

    Example::

        method = DiffCSE(bert, tok, DiffCSE.Params(generator="distilbert-base-uncased", max_length=32))
        out = method(Batch(["a cat sat", "dogs bark"]))
        out["loss"].backward()
    """

    paper = ("Chuang, Dangovski, Luo, Zhang, Chang, Soljačić, Li, Yih, Kim and Glass: DiffCSE: Difference-based "
             "Contrastive Learning for Sentence Embeddings (NAACL 2022)")
    citation = """@inproceedings{chuang2022diffcse,
  title = {{DiffCSE}: Difference-based Contrastive Learning for Sentence Embeddings},
  author = {Chuang, Yung-Sung and Dangovski, Rumen and Luo, Hongyin and Zhang, Yang and Chang, Shiyu and \
Solja{\\v{c}}i{\\'c}, Marin and Li, Shang-Wen and Yih, Wen-tau and Kim, Yoon and Glass, James},
  booktitle = {Proceedings of the 2022 Conference of the North American Chapter of the Association for \
Computational Linguistics: Human Language Technologies},
  year = {2022}
}"""
    paper_avg = PaperAvg(78.49, "DiffCSE (Chuang et al., NAACL 2022), BERT-base")
    summary = ("DiffCSE: SimCSE + conditional replaced-token detection (frozen MLM generator, discriminator "
               "conditioned on the embedding); [CLS] at test")
    Params = DiffCSEParams
    inference_pooling = "cls"
    frozen = ("generator",)   # out of the checkpoints (FrozenSubmodules)

    def __init__(self, encoder, tokenizer, params: DiffCSEParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        hidden = encoder.config.hidden_size
        std = getattr(encoder.config, "initializer_range", 0.02)
        self.projector = ProjectionMLP(hidden, std) if params.projector == "batchnorm" else MLPHead.of(encoder.config)
        self.discriminator = copy.deepcopy(encoder)
        if params.condition == "embedding_output" and not isinstance(getattr(self.discriminator, "embeddings", None),
                                                                     nn.Module):
            raise SentlabError(f"methods.{self.id or 'diffcse'}.condition = embedding_output needs an encoder with an "
                               f"`embeddings` module (BERT, RoBERTa, DistilBERT); use condition: inputs_embeds.")
        self.rtd_head = nn.Linear(hidden, 2)  # the code: electra_head = nn.Linear(768, 2), PyTorch's default init
        self.generator, generator_dir = load_generator(params.generator, tokenizer, self.id or "diffcse")
        self.module_init["generator"] = f"checkpoint ({params.generator})"
        self.generator_dir = generator_dir
        if not (params.mask_token_prob + params.random_token_prob <= 1.0):
            raise SentlabError(f"methods.{self.id or 'diffcse'}: mask_token_prob + random_token_prob = "
                               f"{params.mask_token_prob + params.random_token_prob} > 1; they are shares of the "
                               f"masked tokens (BERT: 0.8 and 0.1).")
        self._special = torch.tensor(sorted(set(tokenizer.all_special_ids)))

    # --- the frozen generator: out of the optimiser, the checkpoints and train mode ------------------------------
    def train(self, mode: bool = True):
        super().train(mode)
        self.generator.train(mode and self.params.generator_dropout)
        return self

    # --- step 2 (CPU, DataLoader workers) ------------------------------------------------------------------------
    def mask_views(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked ids, which positions were chosen) of every row: ``mask_ratio`` of the non-special, non-pad
        tokens, each chosen one set to [MASK] (``mask_token_prob``), a random token (``random_token_prob``) or
        kept. ``gen`` draws everything (a function of the seed and the micro-batch)."""
        p = self.params
        eligible = attention_mask.bool() & ~torch.isin(input_ids, self._special)
        chosen = (torch.rand(input_ids.shape, generator=gen) < p.mask_ratio) & eligible
        u = torch.rand(input_ids.shape, generator=gen)
        to_mask = chosen & (u < p.mask_token_prob)
        to_random = chosen & (u >= p.mask_token_prob) & (u < p.mask_token_prob + p.random_token_prob)
        random_ids = torch.randint(len(self.tokenizer), input_ids.shape, generator=gen)
        out = torch.where(to_mask, torch.full_like(input_ids, self.tokenizer.mask_token_id), input_ids)
        return torch.where(to_random, random_ids, out), chosen

    def prepare(self, batch: Batch) -> Batch:
        enc = self.encode_text(batch.sentences)
        both = doubled(enc)
        rng = batch.rng("diffcse")
        masked, chosen = self.mask_views(both["input_ids"], both["attention_mask"],
                                         torch.Generator().manual_seed(rng.getrandbits(63)))
        batch.features = {"enc": enc, "masked_ids": masked, "chosen": chosen, "sample_seed": rng.getrandbits(63)}
        return batch

    # --- steps 1, 3-5 ----------------------------------------------------------------------------------------
    def embed(self, enc: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(h, z) of the doubled batch: last-layer [CLS] and the projector's output, each ``(2N, d)``."""
        h = self.encoder(**doubled(enc), return_dict=True).last_hidden_state[:, 0]
        return h, self.projector(h)

    @torch.no_grad()
    def corrupt(self, original: torch.Tensor, masked: torch.Tensor, chosen: torch.Tensor,
                attention_mask: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(x'', replaced) of the frozen generator on the masked rows: its token (``generator_decoding``) at
        ``generator_positions``, the original elsewhere, [CLS] kept, padding left as padding; ``replaced`` =
        x'' differs from the original (a generator token equal to the original is not replaced)."""
        p = self.params
        logits = self.generator(input_ids=masked, attention_mask=attention_mask).logits
        where = chosen if p.generator_positions == "masked" else attention_mask.bool()
        where = where & (torch.arange(where.size(1), device=where.device) > 0)  # [CLS] kept (the code: g_pred[:, 0])
        if p.generator_decoding == "argmax":
            tokens = logits.argmax(-1)
        else:  # Gumbel-max: a draw from softmax(logits / T) at every position, from a seeded generator, no host sync
            gen = torch.Generator(device=logits.device).manual_seed(seed)
            with full_precision(logits.device):
                u = torch.rand(logits.shape, generator=gen, device=logits.device).clamp_(min=1e-20)
                tokens = (logits.float() / p.generator_temperature - torch.log(-torch.log(u))).argmax(-1)
        out = torch.where(where, tokens.to(original.dtype), original)
        out = torch.where(attention_mask.bool(), out, torch.full_like(out, self.tokenizer.pad_token_id))
        return out, (out != original) & attention_mask.bool()

    def discriminate(self, ids: torch.Tensor, attention_mask: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """2 logits (kept, replaced) per position ``(2N, L, 2)`` of the discriminator reading ``ids`` with ``cond``
        (one vector per row) in place of position 0 (``condition``)."""
        if self.params.condition == "inputs_embeds":
            emb = self.discriminator.get_input_embeddings()(ids)
            emb = torch.cat([cond.unsqueeze(1).to(emb.dtype), emb[:, 1:]], dim=1)
            hidden = self.discriminator(inputs_embeds=emb, attention_mask=attention_mask,
                                        return_dict=True).last_hidden_state
        else:
            def first_position(_module, _inputs, out):
                return torch.cat([cond.unsqueeze(1).to(out.dtype), out[:, 1:]], dim=1)

            hook = self.discriminator.embeddings.register_forward_hook(first_position)
            try:
                hidden = self.discriminator(input_ids=ids, attention_mask=attention_mask,
                                            return_dict=True).last_hidden_state
            finally:
                hook.remove()
        return self.rtd_head(hidden)

    def rtd_loss(self, logits: torch.Tensor, replaced: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Conditional RTD (Eq. 2): cross-entropy of the 2 logits against ``replaced`` (fp32), the mean over the
        sentence's tokens (``rtd_positions: tokens``) or over every padded position (``all``, the code)."""
        weight = attention_mask.float() if self.params.rtd_positions == "tokens" else torch.ones_like(
            replaced, dtype=torch.float)
        with full_precision(logits.device):
            ce = F.cross_entropy(logits.float().flatten(0, 1), replaced.long().flatten(), reduction="none")
            return (ce * weight.flatten()).sum() / weight.sum()

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        if not batch.features:  # a direct call: prepare here
            batch = self.prepare(batch)
        f, p = self.prepared(batch), self.params
        h, z = self.embed(f["enc"])  # step 1
        n = z.size(0) // 2
        loss_contrast = in_batch_info_nce(z[:n], z[n:], p.temperature)
        both = doubled(f["enc"])
        x2, replaced = self.corrupt(both["input_ids"], f["masked_ids"], f["chosen"], both["attention_mask"],
                                    f["sample_seed"])  # steps 2-3
        cond = z if p.condition_vector == "projected" else h
        logits = self.discriminate(x2, both["attention_mask"], cond)  # step 4
        loss_rtd = self.rtd_loss(logits, replaced, both["attention_mask"])  # step 5
        tokens = both["attention_mask"].float()
        with torch.no_grad():  # masked means, no host sync
            acc = ((logits.argmax(-1) == replaced.long()).float() * tokens).sum() / tokens.sum()
            frac = (replaced.float() * tokens).sum() / tokens.sum()
        return {"loss": loss_contrast + p.rtd_weight * loss_rtd, "loss_contrast": loss_contrast.detach(),
                "loss_rtd": loss_rtd.detach(), "replaced_frac": frac, "rtd_acc": acc}

    def export_info(self) -> dict:
        return {**super().export_info(), "generator": self.params.generator,
                "training_only": ["projector", "discriminator", "rtd_head", "generator"]}
