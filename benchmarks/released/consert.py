"""ConSERT (unsupervised) against yym6472/ConSERT (issue #53 §1, §3.7).

Repository: https://github.com/yym6472/ConSERT at commit 03c9e8ffc5ed28f3efe61f1b32523ac6fe07de86 (its HEAD):
``git clone https://github.com/yym6472/ConSERT DIR && git -C DIR checkout 03c9e8ffc5ed28f3efe61f1b32523ac6fe07de86``.

The released side is the repository's own stack: its bundled transformers 3.4.0 (whose ``BertModel`` carries the
augmentations: ``_replace_position_ids`` for the token shuffle, ``_cutoff_embeddings`` for the cutoffs), its
sentence-transformers fork (``models.Transformer`` + mean ``models.Pooling``) and ``losses.AdvCLSoftmaxLoss`` built
with ``scripts/unsup-consert-base.sh``'s arguments as ``main.py`` passes them (``--no_pair --add_cl --cl_loss_only
--cl_rate 0.15 --temperature 0.1 --da_final_1 feature_cutoff --da_final_2 shuffle --cutoff_rate_final_1 0.2
--no_dropout``). sentlab's side is ``methods.consert`` at its defaults (the same script). Both on MiniLM, the
harness's batch, dropout off (the script's ``--no_dropout``).

Randomness identical by construction: sentlab's ``prepare`` draws the views (feature-cutoff columns of view 1,
position permutation of view 2); the released model draws its own with the global ``random.shuffle`` (imported
inside its functions), which is replaced, while it runs, by a queue that hands it sentlab's draws in call order
(view 1's rows, then view 2's).

The extra ``step_norm`` is ‖θ₁ − θ₀‖ of the encoder after one optimiser step (lr 1e-5, after clipping the global
gradient norm at 1): the released side with its bundled ``transformers.AdamW(eps=1e-6, correct_bias=False)`` and
sentence-transformers' ``fit`` groups (decay 0.01 but bias/LayerNorm), sentlab's with
``ConSERT.configure_optimizers`` (``sentlab.nn.optim.AdamWLegacy``).

Shims (current Python / torch / protobuf, none in the loss): stub modules ``sacremoses``, ``sentencepiece`` and
``transformers.utils.sentencepiece_model_pb2`` (transformers 3.4.0 imports them at package import; its
``tokenization_auto`` names ``XLMProphetNetTokenizer`` only when sentencepiece exists; the generated protobuf file
is too old for protobuf 4), ``collections.Sequence`` (gone in Python 3.10, imported by its DeBERTa), a no-op
tensorboard writer; ``AutoModel.from_pretrained`` builds its ``BertModel`` from MiniLM's config and loads
``model.safetensors`` (3.4.0 reads ``pytorch_model.bin`` only), ``AutoTokenizer`` is not loaded (the token ids are
sentlab's tokenizer's, fed to both).

The 6 attention key biases are left out of the comparison (gradient zero analytically, rounding noise on both
sides). Agrees at: the script's setting above. The paper profile uses the same (methods.consert defaults).
"""

from __future__ import annotations

import collections
import collections.abc
import random
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (patched, step_norm, SENTENCES, Outputs, grads_of, load_backbone, main, minilm_path,  # noqa: E402, F401
                      no_dropout, on_path, set_determinism)

CASE = "consert"
REPOSITORY = "yym6472/ConSERT"
COMMIT = "03c9e8ffc5ed28f3efe61f1b32523ac6fe07de86"
SETTING = ("scripts/unsup-consert-base.sh: feature_cutoff 0.2 / shuffle views, NT-Xent τ 0.1 × 0.15, last-layer "
           "mean, dropout off; one step of AdamW without bias correction (eps 1e-6, decay 0.01 but bias/LayerNorm)")
STEP_LR = 1e-5


def _common(n: str):
    """The backbone's own names; attention key biases left out: their gradient is zero analytically (softmax
    is shift-invariant per query), on both sides only rounding noise (~1e-12), whose relative difference means
    nothing."""
    return None if n.endswith("attention.self.key.bias") else n


def _encoder_name(n: str):
    return _common(n[len("encoder."):]) if n.startswith("encoder.") else None


def _method():
    from sentlab.config import TrainParams
    from sentlab.methods import get_method

    model, tok = load_backbone()
    cls = get_method("consert")
    params = cls.Params().resolved(TrainParams(batch_size=len(SENTENCES), max_length=64, lr=STEP_LR))
    return cls(model, tok, params, seed=0), tok


def sentlab_outputs() -> Outputs:
    from sentlab.methods.base import Batch
    from sentlab.train.loop import clip_gradients

    m, _ = _method()
    m.train()
    out = m(Batch(list(SENTENCES), draw=0, seed=0))
    out["loss"].backward()
    grads = grads_of(m.named_parameters(), rename=_encoder_name)
    opt = m.configure_optimizers()
    clip_gradients(opt, 1.0, m.grad_clip)
    enc = [p for p in m.encoder.parameters()]
    return Outputs(loss=float(out["loss"].detach()), grads=grads, extra={"step_norm": step_norm(enc, opt.step)})


def _draws():
    """sentlab's views of the batch: (token ids, view 1's cut columns per row, view 2's position order per row)."""
    from sentlab.methods.base import Batch

    m, _ = _method()
    f = m.prepare(Batch(list(SENTENCES), draw=0, seed=0)).features
    n = len(SENTENCES)
    enc = {k: v[:n] for k, v in f["enc"].items()}
    assert bool((f["keep_features"][n:] == 1).all()) and bool((f["keep_tokens"] == 1).all())
    cut = [torch.nonzero(f["keep_features"][i] == 0).flatten().tolist() for i in range(n)]
    lengths = enc["attention_mask"].sum(1).tolist()
    order = [f["position_ids"][n + i, :k].tolist() for i, k in enumerate(lengths)]
    assert all(f["position_ids"][i].tolist() == list(range(f["position_ids"].shape[1])) for i in range(n))
    return enc, cut, order


def _shims():
    for name in ("sacremoses", "sentencepiece", "transformers.utils.sentencepiece_model_pb2"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["sentencepiece"].SentencePieceProcessor = object
    if not hasattr(collections, "Sequence"):
        collections.Sequence = collections.abc.Sequence


def released_outputs(checkout: Path) -> Outputs:
    from safetensors.torch import load_file

    enc, cut, order = _draws()
    d = 384
    queue = [c + [j for j in range(d) if j not in set(c)] for c in cut] + order   # view 1's rows, then view 2's
    saved_modules = {k: v for k, v in sys.modules.items() if k == "transformers" or k.startswith("transformers.")}
    for k in saved_modules:                 # the checkout's own transformers 3.4.0, not the installed one
        del sys.modules[k]
    _shims()
    real_shuffle = random.shuffle
    try:
        with on_path(checkout):
            import transformers as t34
            from sentence_transformers import SentenceTransformer, losses, models

            assert t34.__version__ == "3.4.0", t34.__file__
            path = minilm_path()

            def automodel(_name, config=None, **_kw):
                model = t34.BertModel(config)
                missing, unexpected = model.load_state_dict(load_file(str(Path(path) / "model.safetensors")),
                                                            strict=False)
                assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
                return model

            models.Transformer.__init__.__globals__["AutoModel"].from_pretrained = automodel
            models.Transformer.__init__.__globals__["AutoTokenizer"].from_pretrained = lambda *a, **k: None
            word = models.Transformer(str(path), attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
            pooling = models.Pooling(word.get_word_embedding_dimension(), pooling_mode_mean_tokens=True,
                                     pooling_mode_cls_token=False, pooling_mode_max_tokens=False)
            model = SentenceTransformer(modules=[word, pooling])
            model.tensorboard_writer = types.SimpleNamespace(add_scalar=lambda *a, **k: None)
            model.num_steps_total, model.global_step = 1, 0
            no_dropout(model)
            loss_model = losses.AdvCLSoftmaxLoss(
                model=model, sentence_embedding_dimension=d, num_labels=3, use_contrastive_loss=True,
                contrastive_loss_type="nt_xent", contrastive_loss_rate=0.15, temperature=0.1,
                contrastive_loss_only=True, no_pair=True, data_augmentation_strategy="adv",
                data_augmentation_strategy_final_1="feature_cutoff", data_augmentation_strategy_final_2="shuffle",
                cutoff_rate_final_1=0.2, cutoff_rate_final_2=None)
            loss_model.train()

            def fed(x):
                want = queue.pop(0)
                assert sorted(want) == sorted(x), "the released code drew a different shape of view"
                x[:] = want

            random.shuffle = fed
            loss = loss_model([dict(enc)], None)
            random.shuffle = real_shuffle
            assert not queue, f"{len(queue)} sentlab draws unused"
            loss.backward()
            auto = model[0].auto_model
            grads = grads_of(auto.named_parameters(), rename=_common)
            # sentence-transformers' fit: groups, clip over loss_model.parameters(), transformers.AdamW
            named = list(loss_model.named_parameters())
            no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
            groups = [{"params": [p for n, p in named if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
                      {"params": [p for n, p in named if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
            opt = t34.AdamW(groups, lr=STEP_LR, eps=1e-6, correct_bias=False)
            torch.nn.utils.clip_grad_norm_(loss_model.parameters(), 1.0)
            step = step_norm(list(auto.parameters()), opt.step)
    finally:
        random.shuffle = real_shuffle
        for k in [k for k in sys.modules if k == "transformers" or k.startswith("transformers.")]:
            del sys.modules[k]
        sys.modules.update(saved_modules)
    return Outputs(loss=float(loss.detach()), grads=grads, extra={"step_norm": step})


def _control():
    import sentlab.methods.consert as mod

    orig = mod.nt_xent
    return patched(mod, "nt_xent", lambda z1, z2, t: orig(z1, z2.roll(1, 0), t))


CONTROL = ("positives shifted by one row (a wrong order)", _control)


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING,
                  golden_grads=["embeddings.word_embeddings.weight", "encoder.layer.2.attention.self.query.weight",
                                "encoder.layer.5.output.dense.weight", "encoder.layer.5.output.LayerNorm.weight"],
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs, control=CONTROL))
