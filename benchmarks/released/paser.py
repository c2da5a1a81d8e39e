"""PaSeR (``paser``) against the authors' released code: chengzhipanpan/PaSeR, ``paser/models.py``.

Repository: https://github.com/chengzhipanpan/PaSeR, commit 877ac00936515d69a2547f67d8e7ed351b599c67 (HEAD)::

    git clone https://github.com/chengzhipanpan/PaSeR DIR &&
        git -C DIR checkout 877ac00936515d69a2547f67d8e7ed351b599c67

(the snapshot's ``data/augmented.csv`` is an unreadable blob: ``git archive HEAD -- paser train.py scripts`` is what
this case needs). The released model is ``BertForCL`` (``cl_init`` builds the decoder: a ``BartDecoder`` of 6
layers, 16 heads, FFN = the hidden size, GELU, its ``embed_tokens`` = BERT's whole embedding module) and its loss
``cl_forward``: L = CE(decoder logits, the phrase target) (mean over the batch's target tokens) + mlm_weight · CE
(MLM); ``train.py`` loads BERT's pretrained MLM head into ``lm_head`` (``BertForPreTraining``'s
``cls.predictions``), which also gives the decoder's logits; ``scripts/run_unsup_example.sh``: batch 64, lr 3e-5,
max length 32, ``cls_before_pooler``, ``--do_mlm --mlm_weight 1.0``, 5 epochs; ``run_grid_search.sh`` the k / t
grid (0.1, 1, 10).

Both sides: a bert-base-uncased stand-in (``_harness.bert_standin``: 2 layers, 64 wide, with BERT's MLM head,
which MiniLM lacks), batch ``SENTENCES``, dropout off (BERT's and the decoder's: BART's dropout is a float
attribute, zeroed here). Computed once and given to both: the views (s: a fixed EDA-like edit of each sentence;
s̃: the sentence with its phrases' word pieces masked, by sentlab's ``mask_spans``), the decoder target
``p_1 [SEP] … p_k [SEP]`` (the code reads it from its CSV's third column, ``[CLS]`` dropped), the MLM corruption
of s (BERT's 15 % / 80-10-10, one draw; the code masks the even rows = s), the decoder's and the projection's
weights (one draw, names of transformers' ``BartDecoder``).

The setting at which they agree (loss, L_gen and L_MLM, every gradient): ``decoder_impl: bart``, 6 layers, 16
heads, ``decoder_ffn: null``, ``decoder_embeddings: encoder``, ``memory_order: code``, ``project_masked: true``,
``signal_abs_diff: false``, ``signal_abs_prod: false`` (the code's signed [t·(E_s∗P E_s̃), k·(E_s−P E_s̃), E_s,
P E_s̃]), m = k = 10, n = t = 10, ``gen_reduction: mean``, ``lm_head: pretrained``, ``lm_head_output: copy`` (the
code's head is ``BertForCL.lm_head``, which transformers never ties to the word embeddings: its output matrix is
its own parameter, loaded from the checkpoint's and trained apart from them), ``pooling: cls``,
``memory_norm: false``, ``memory_type_embeddings: false``. The target of a sentence whose s or s̃ reaches
max length (32) tokens is dropped by the code (``usable_sample``): ``gen_skip_long: true``; the batch here has no
such sentence. Skipped (gradient exactly zero on both sides): the attention key biases.

Shims (current transformers): 4.2.1's ``init_weights`` (transformers 5's needs ``post_init``, never called by
``cl_init``; every weight is then set); ``BertConfig.from_pretrained("bert-base-uncased")`` (only its
``pad_token_id`` 0 is read) answered offline; 4.2.1's ``BertLMPredictionHead`` shares the output bias between
``decoder.bias`` and ``bias`` (transformers 5 has two parameters, tied by the model class only): re-shared.

What the paper profile uses (profiles/paper.yaml, the code's settings): all of the above but m = n = 10 (the
paper's; the code's default k = t = 1, its grid search ran 0.1 / 1 / 10), ``eda: sr``, 6 layers, 5 epochs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, init_weights_421, SENTENCES, Outputs, bert_standin, grads_of, import_released,  # noqa: E402
                      load_backbone, main, no_dropout, on_path, set_determinism)

CASE = "paser"
REPOSITORY = "chengzhipanpan/PaSeR"
COMMIT = "877ac00936515d69a2547f67d8e7ed351b599c67"
SETTING = ("bert-base-uncased stand-in (2 layers, 64 wide, BERT's MLM head), batch 8, BART decoder 6 layers x 16 "
           "heads, memory [n·(E_s∗P E_s̃), m·(E_s−P E_s̃), E_s, P E_s̃] signed, m = n = 10, L_gen mean over tokens, "
           "MLM 1.0 on s, the head's own output matrix, dropout off")
STANDIN = Path(tempfile.gettempdir()) / "sentlab-released" / "bert-base-uncased-standin"   # written once (seed 0)
MAX_LEN = 32
LAYERS, HEADS, M, N = 6, 16, 10.0, 10.0

# s (an EDA-like edit: a deleted or swapped word) and the phrases masked in s̃ (as RAKE would rank them)
VIEWS = [
    ("A man is playing a guitar on stage.", ["playing a guitar", "stage"]),
    ("The cat sat on the mat.", ["cat sat"]),
    ("Two dogs are running through a field of grass near the river.", ["tall grass", "two dogs", "river"]),
    ("She bought three apples at market yesterday.", ["three apples", "market"]),
    ("The committee approved new the budget after a long debate.", ["new budget", "long debate"]),
    ("Rain is expected tonight.", ["rain"]),
    ("He plays football every Sunday with his friends.", ["plays football", "friends"]),
    ("The museum opened a new exhibition about Egypt.", ["ancient egypt", "new exhibition"]),
]


def _standin() -> Path:
    return bert_standin(STANDIN)


def _zero_dropout(model: nn.Module) -> nn.Module:
    """Dropout off: nn.Dropout modules and config (``no_dropout``) and BART's float dropout attributes."""
    no_dropout(model)
    for mod in model.modules():
        for attr in ("dropout", "activation_dropout", "attention_dropout", "layerdrop"):
            if isinstance(getattr(mod, attr, None), float):
                setattr(mod, attr, 0.0)
    return model


def _inputs(tok) -> dict:
    """The batch both sides get: s ids, s̃ ids, the decoder targets, the MLM corruption of s."""
    from sentlab.methods._paser_decoder import decoder_target, mask_spans

    s_ids, t_ids, targets = [], [], []
    for sent, (s_text, phrases) in zip(SENTENCES, VIEWS):
        low = sent.lower()
        spans = [(low.index(p), low.index(p) + len(p)) for p in phrases if p in low]
        view = mask_spans(tok, sent, spans, MAX_LEN, "wordpiece")
        s_ids.append(tok(s_text, truncation=True, max_length=MAX_LEN)["input_ids"])
        t_ids.append(view.input_ids)
        targets.append(decoder_target(view.phrase_token_ids, tok.sep_token_id))
    g = torch.Generator().manual_seed(53)
    special = set(tok.all_special_ids)
    mlm_in, mlm_lab = [], []
    for ids in s_ids:
        ids_t = torch.tensor(ids)
        p = torch.tensor([0.0 if i in special else 0.15 for i in ids])
        chosen = torch.bernoulli(p, generator=g).bool()
        if not chosen.any():
            chosen[1] = True
        lab = torch.where(chosen, ids_t, torch.full_like(ids_t, -100))
        replace = torch.bernoulli(torch.full(p.shape, 0.8), generator=g).bool() & chosen
        rand = torch.bernoulli(torch.full(p.shape, 0.5), generator=g).bool() & chosen & ~replace
        words = torch.randint(len(tok), p.shape, generator=g)
        inp = ids_t.clone()
        inp[replace] = tok.mask_token_id
        inp[rand] = words[rand]
        mlm_in.append(inp.tolist())
        mlm_lab.append(lab.tolist())
    return {"s": s_ids, "t": t_ids, "targets": targets, "mlm_inputs": mlm_in, "mlm_labels": mlm_lab}


def _pad(seqs, value: int, length: int | None = None) -> torch.Tensor:
    n = length or max(len(s) for s in seqs)
    return torch.tensor([list(s) + [value] * (n - len(s)) for s in seqs])


def _heads(hidden: int, vocab: int) -> dict:
    """The randomly initialised modules' weights (one draw): the BartDecoder (its parameter names, no token
    embedding) and the projection of E_s̃. Weights N(0, 0.02); biases N(0, 0.02), LayerNorm 1 + N(0, 0.1): not
    their init values, so that every tensor shows in the gradients."""
    from transformers import BartConfig
    from transformers.models.bart.modeling_bart import BartDecoder

    cfg = BartConfig(vocab_size=vocab, decoder_layers=LAYERS, max_position_embeddings=512, decoder_ffn_dim=hidden,
                     decoder_attention_heads=HEADS, d_model=hidden, activation_function="gelu")
    names = [(n, p.shape) for n, p in BartDecoder(cfg).named_parameters() if not n.startswith("embed_tokens.")]
    g = torch.Generator().manual_seed(7)
    out = {}
    for n, shape in [*((f"decoder.{n}", s) for n, s in names),
                     ("projection.weight", (hidden, hidden)), ("projection.bias", (hidden,))]:
        if "layernorm" in n.lower() or "layer_norm" in n.lower():
            out[n] = (1.0 if n.endswith("weight") else 0.0) + 0.1 * torch.randn(shape, generator=g)
        else:
            out[n] = 0.02 * torch.randn(shape, generator=g)
    return out


def _common_name(n: str):
    """sentlab's and the released code's parameter names → one name (None: not compared)."""
    for a, b in (("encoder.", ""), ("bert.", ""), ("decoder.bart.", "decoder."), ("signal.proj.", "projection."),
                 ("lm_head.dense.", "lm_head.transform.dense."), ("lm_head.norm.", "lm_head.transform.LayerNorm."),
                 ("lm_head.weight", "lm_head.decoder.weight"), ("lm_head.decoder.bias", "lm_head.bias")):
        if n.startswith(a):
            return b + n[len(a):]
    if n.startswith(("decoder.", "projection.", "lm_head.")):
        return n
    return None


# Key biases (every attention: BERT's, the decoder's self- and cross-attention) get zero gradient analytically
# (softmax is shift-invariant); each side leaves ~1e-11 of round-off, differently. Checked to be ≤ 1e-6 of the
# decoder's output projection's gradient, then set to exactly 0 on both sides: the comparison lists them skipped.
ANALYTIC_ZERO = ("attention.self.key.bias", "k_proj.bias")


def _zero_analytic(grads: dict) -> dict:
    scale = float(grads["decoder.layers.0.fc2.weight"].norm())
    for n, g in grads.items():
        if n.endswith(ANALYTIC_ZERO):
            if float(g.norm()) > 1e-6 * scale:
                raise AssertionError(f"{n}: gradient {float(g.norm()):.3g}, expected 0 analytically")
            g.zero_()
    return grads


def sentlab_outputs() -> Outputs:
    import sentlab.methods.paser as paser_mod
    from sentlab.methods import get_method
    from sentlab.methods._paser_decoder import Views
    from sentlab.methods.base import Batch

    encoder, tok = load_backbone(_standin())
    x = _inputs(tok)
    cls = get_method("paser")
    params = cls.Params(eda="none", decoder_impl="bart", decoder_layers=LAYERS, decoder_heads=HEADS,
                        decoder_ffn=None, decoder_dropout=0.0, decoder_embeddings="encoder", memory_order="code",
                        project_masked=True, signal_abs_diff=False, signal_abs_prod=False, m=M, n=N,
                        gen_reduction="mean", lm_head="pretrained", lm_head_output="copy", pooling="cls",
                        memory_norm=False, memory_type_embeddings=False, mlm_weight=1.0, gen_weight=1.0,
                        batch_size=len(SENTENCES), max_length=MAX_LEN)
    m = cls(encoder, tok, params, seed=0)
    _zero_dropout(m)
    m.train()
    heads = _heads(encoder.config.hidden_size, encoder.config.vocab_size)
    with torch.no_grad():
        missing, unexpected = m.decoder.bart.load_state_dict(
            {k[len("decoder."):]: v for k, v in heads.items() if k.startswith("decoder.")}, strict=False)
        assert not unexpected and all(k.startswith("embed_tokens") for k in missing), (missing, unexpected)
        m.signal.proj.weight.copy_(heads["projection.weight"])
        m.signal.proj.bias.copy_(heads["projection.bias"])
    s_ids = _pad(x["s"], tok.pad_token_id)
    t_ids = _pad(x["t"], tok.pad_token_id)
    features = {"s": {"input_ids": s_ids, "attention_mask": (s_ids != tok.pad_token_id).long()},
                "s_masked": {"input_ids": t_ids, "attention_mask": (t_ids != tok.pad_token_id).long()},
                "target": m.decoder_batch(x["targets"]),
                "views": Views(list(SENTENCES), [], [], [], [0] * len(SENTENCES), [0] * len(SENTENCES))}
    fixed = (_pad(x["mlm_inputs"], tok.pad_token_id), _pad(x["mlm_labels"], -100))
    real = paser_mod.mlm_mask
    paser_mod.mlm_mask = lambda *a, **k: (fixed[0].clone(), fixed[1].clone())   # the one MLM draw
    try:
        out = m(Batch(list(SENTENCES), features=features))
    finally:
        paser_mod.mlm_mask = real
    out["loss"].backward()
    return Outputs(float(out["loss"].detach()), _zero_analytic(grads_of(m.named_parameters(), rename=_common_name)),
                   extra={"loss_gen": float(out["loss_gen"]), "loss_mlm": float(out["loss_mlm"])})


class _OfflineBertConfig:
    """``BertConfig.from_pretrained("bert-base-uncased")`` offline: the code reads its ``pad_token_id`` only."""

    @staticmethod
    def from_pretrained(name, *a, **k):
        from transformers import BertConfig

        return BertConfig(pad_token_id=0)


def released_outputs(checkout: Path) -> Outputs:
    from transformers import BertForPreTraining

    encoder, tok = load_backbone(_standin())
    x = _inputs(tok)
    with on_path(checkout):
        models = import_released(checkout, "paser.models")
        models.BertConfig = _OfflineBertConfig
        models.BertForCL.init_weights = init_weights_421
        args = argparse.Namespace(pooler_type="cls_before_pooler", temp=0.05, do_mlm=True, mlm_weight=1.0,
                                  k_weight=M, t_weight=N, mlp_only_train=True)
        model = models.BertForCL(encoder.config, model_args=args)
    with torch.no_grad():
        missing, _ = model.bert.load_state_dict(encoder.state_dict(), strict=False)
        assert not missing, missing
        pretrained = BertForPreTraining.from_pretrained(_standin())   # as train.py: the MLM head
        model.lm_head.load_state_dict(pretrained.cls.predictions.state_dict())
        for head in (model.lm_head, model.lm_head_for_decoder):
            head.decoder.bias = head.bias   # 4.2.1: one output bias
        heads = _heads(encoder.config.hidden_size, encoder.config.vocab_size)
        missing, unexpected = model.decoder.load_state_dict(
            {k[len("decoder."):]: v for k, v in heads.items() if k.startswith("decoder.")}, strict=False)
        assert not unexpected and all(k.startswith("embed_tokens") for k in missing), (missing, unexpected)
        model.projection.weight.copy_(heads["projection.weight"])
        model.projection.bias.copy_(heads["projection.bias"])
    _zero_dropout(model)
    model.train()
    length = max(len(s) for s in x["s"] + x["t"])   # the collator pads s and s̃ together
    pairs = [seq for s, t in zip(x["s"], x["t"]) for seq in (s, t)]
    ids = _pad(pairs, tok.pad_token_id, length).view(len(SENTENCES), 2, length)
    labels = _pad([t for t in x["targets"]], -100, length)   # the collator's process_label: target, -100 after
    out = model(input_ids=ids, attention_mask=(ids != tok.pad_token_id).long(), token_type_ids=torch.zeros_like(ids),
                labels=labels, decode_input=labels.clone(), return_dict=True,
                mlm_input_ids=_pad(x["mlm_inputs"], tok.pad_token_id, length),
                mlm_labels=_pad(x["mlm_labels"], -100, length))
    out.loss.backward()
    grads = _zero_analytic(grads_of(model.named_parameters(), rename=_common_name))
    # L_gen and L_MLM apart: the same forward once more without MLM (no gradient)
    with torch.no_grad():
        gen = model(input_ids=ids, attention_mask=(ids != tok.pad_token_id).long(),
                    token_type_ids=torch.zeros_like(ids), labels=labels, decode_input=labels.clone(),
                    return_dict=True).loss
    return Outputs(float(out.loss.detach()), grads, extra={"loss_gen": float(gen),
                                                           "loss_mlm": float(out.loss.detach() - gen)})


GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.1.attention.self.query.weight",
                "decoder.layers.5.fc2.weight", "decoder.layers.0.encoder_attn.v_proj.weight", "projection.weight",
                "lm_head.decoder.weight", "lm_head.transform.dense.weight"]

def _control():
    from sentlab.methods.paser import PaSeR

    orig = PaSeR.decoding_signal
    return patched(PaSeR, "decoding_signal", lambda self, *a, **k: -orig(self, *a, **k))


CONTROL = ("the decoding signal's sign swapped", _control)


if __name__ == "__main__":
    set_determinism()
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
