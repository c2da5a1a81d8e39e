"""ESimCSE: sentlab's ``esimcse`` against the authors' released code (issue #53 §1).

Repository: caskcsg/sentemb (the ESimCSE release is its ``ESimCSE/`` folder), commit
5eeec55103c1da738761bf8c6a9c085c6ad1c9a1 (the newest; ``ESimCSE/`` last changed in fc7ca0d, 2022-10-24)::

    git clone https://github.com/caskcsg/sentemb DIR && git -C DIR checkout 5eeec55103c1da738761bf8c6a9c085c6ad1c9a1
    python benchmarks/released/esimcse.py --released DIR            # DIR or DIR/ESimCSE

What runs of theirs: ``esimcse/models.py``'s ``BertForCL`` (``model_args`` as ``run.sh`` sets them: momentum
0.995, pooler cls, temp 0.05, no MLM) and ``CLTrainer
.compute_loss`` of ``esimcse/trainers.py`` (the train pass with its momentum update, then the ``model.eval()``
pass of the momentum encoder that makes this batch's keys, then the queue ``pre_z1`` update). That function is
compiled alone from the checkout's source (:func:`_released_compute_loss`): ``trainers.py`` as a module imports
transformers-4.2-era Trainer internals (``default_hp_space`` …) and SentEval, which current transformers lacks;
its model code imports unchanged. One shim, :func:`_shimmed`: a subclass that calls ``post_init()`` at the end of
``BertForCL.__init__`` (transformers 5's ``from_pretrained`` reads ``all_tied_weights_keys``, set there; the
class, written for transformers 4.2, calls only ``init_weights()``).

The setting at which the two agree (one training step on the harness's batch of 8, MiniLM):

* dropout off on both (the harness's ``no_dropout``), attention dropout included;
* the same word-repetition views: sentlab's ``prepare`` (``dup_len_rule: code``, the release's count) draws them
  once; the release gets them as its collator lays them out, ``input_ids[i] = [x_i, x⁺_i]`` padded together;
* the same queue: 160 fixed hard negatives (the run's ``neg_size``; :func:`_queue`) in sentlab's queue (newest
  first) and in the trainer's ``pre_z1`` (oldest first; the candidates' order does not change the loss);
* the same MLP weights (a fixed N(0, 0.02) draw);
* the momentum encoder: sentlab's ``momentum_init: random`` draws BERT's init from seed 0 and applies the
  release's first update (θm ← 0.995 θm + 0.005 θe) at construction; the release gets the same draw as its
  ``momentum_model`` (which its ``from_pretrained`` leaves at the random init) and updates it in its forward.
  Their keys are compared as extras (``keys_*``: the batch's momentum keys that enter the queue).

Gradients: every encoder tensor (the backbone's own names) and ``mlp.dense.*``; BERT's pooler has none on either
side (the [CLS] vector is read before it), the attention key biases are exactly zero (skipped).

The paper profile: ``momentum_init: random`` and ``dup_len_rule: code`` (the released run), the rest as here.
"""

from __future__ import annotations

import ast
import copy
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (SENTENCES, Outputs, grads_of, import_released, load_backbone, main, minilm_path,  # noqa: E402
                      no_dropout, on_path, set_determinism)

__all__ = ["set_determinism", "sentlab_outputs", "released_outputs"]   # set_determinism: tests/test_released_golden.py

CASE = "esimcse"
REPOSITORY = "caskcsg/sentemb"
COMMIT = "5eeec55103c1da738761bf8c6a9c085c6ad1c9a1"
SETTING = ("dropout off; sentlab's repetition views (dup_len_rule code) fed to both; a fixed queue of 160; "
           "momentum_init random (the same BERT-init draw, one update before the keys)")
MOMENTUM, QUEUE, TEMP, MAX_LEN = 0.995, 160, 0.05, 32
GOLDEN_GRADS = ["embeddings.word_embeddings.weight", "encoder.layer.2.attention.self.query.weight",
                "encoder.layer.5.output.dense.weight", "mlp.dense.weight"]


def _method(encoder, tok):
    from sentlab.config import TrainParams
    from sentlab.methods import get_method

    cls = get_method("esimcse")
    params = cls.Params(momentum_init="random", dup_len_rule="code", queue_size=QUEUE, momentum=MOMENTUM,
                        temperature=TEMP).resolved(TrainParams(batch_size=len(SENTENCES), max_length=MAX_LEN, lr=3e-5))
    return cls(encoder, tok, params, seed=0)


def _mlp_state(hidden: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {"dense.weight": torch.randn(hidden, hidden, generator=g) * 0.02, "dense.bias": torch.zeros(hidden)}


def _queue(hidden: int) -> torch.Tensor:
    """160 queued keys, oldest first, that are hard negatives (else exp(cos/τ) of a random vector is ~e⁻²⁰ of the
    positive's and the queue would not count): MLP([CLS]) of the batch's own sentences by the pretrained MiniLM
    with the fixed MLP weights, each repeated 20 times with Gaussian noise (0.5 × their spread)."""
    from torch import nn

    encoder, tok = load_backbone()
    mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())
    mlp[0].load_state_dict({k.split(".")[1]: v for k, v in _mlp_state(hidden).items()})
    with torch.no_grad():
        enc = tok(list(SENTENCES), padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
        base = mlp(encoder.eval()(**enc).last_hidden_state[:, 0]).double()
    g = torch.Generator().manual_seed(2)
    noise = torch.randn(QUEUE, hidden, generator=g, dtype=torch.float64) * 0.5 * float(base.std())
    return (base.repeat(QUEUE // len(SENTENCES), 1) + noise).float()


def key_biases_zeroed(grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``grads`` with each attention key bias's gradient set to exactly 0: zero analytically (softmax ignores the
    shift ``q·b_k`` adds to a whole row of scores), rounding noise numerically; the harness lists them as skipped."""
    return {n: torch.zeros_like(g) if n.endswith("attention.self.key.bias") else g for n, g in grads.items()}


def _views():
    """The repetition views, drawn once by sentlab's ``prepare`` (``Batch.rng('repetition')`` of draw 0, seed 0)."""
    from sentlab.methods.base import Batch

    encoder, tok = load_backbone()
    return _method(encoder, tok).prepare(Batch(list(SENTENCES), draw=0, seed=0)).features["views"]


def _key_stats(keys: torch.Tensor) -> dict[str, float]:
    g = torch.Generator().manual_seed(3)
    w = torch.randn(keys.size(1), generator=g)
    keys = keys.detach().double()
    return {"keys_abs_mean": float(keys.abs().mean()), "keys_projection": float((keys @ w.double()).mean()),
            "keys_first_row": float(keys[0] @ w.double())}


def sentlab_outputs() -> Outputs:
    from sentlab.methods.base import Batch

    encoder, tok = load_backbone()
    views = _views()
    m = no_dropout(_method(encoder, tok)).train()
    hidden = encoder.config.hidden_size
    m.mlp.load_state_dict(_mlp_state(hidden))
    with torch.no_grad():
        m.queue[:QUEUE] = _queue(hidden).flip(0)          # newest first
        m.queue_len.fill_(QUEUE)
    m._filled = QUEUE
    batch = Batch(list(SENTENCES), draw=0, seed=0)
    batch.features = {"views": views}
    out = m(batch)
    out["loss"].backward()
    keys = m.queue[: len(SENTENCES)]                        # this batch's momentum keys now lead the queue
    grads = grads_of(m.encoder.named_parameters()) | grads_of(m.mlp.named_parameters(), prefix="mlp.")
    return Outputs(loss=float(out["loss"].detach()), grads=key_biases_zeroed(grads), extra=_key_stats(keys))


def _shimmed(cls):
    """``cls`` with ``post_init()`` at the end of ``__init__`` (transformers 5 needs it for ``from_pretrained``)."""

    class Shimmed(cls):
        def __init__(self, config, *args, **kwargs):
            super().__init__(config, *args, **kwargs)
            self.post_init()

    return Shimmed


def _released_compute_loss(source: Path):
    """``CLTrainer.compute_loss`` compiled alone from the checkout's ``esimcse/trainers.py`` (its module imports
    Trainer internals current transformers lacks); it needs only ``torch``."""
    tree = ast.parse(source.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CLTrainer")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "compute_loss")
    namespace = {"torch": torch}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(source), "exec"), namespace)
    return namespace["compute_loss"]


def released_outputs(checkout: Path) -> Outputs:
    from sentlab.methods.esimcse import bert_init_

    root = Path(checkout)
    root = root / "ESimCSE" if (root / "ESimCSE" / "esimcse").is_dir() else root
    views = _views()
    backbone, _ = load_backbone()
    hidden, n = backbone.config.hidden_size, len(SENTENCES)
    fresh = bert_init_(copy.deepcopy(backbone), backbone.config.initializer_range, torch.Generator().manual_seed(0))
    args = SimpleNamespace(momentum=MOMENTUM, neg_size=QUEUE, do_mlm=False, pooler_type="cls", temp=TEMP,
                           mlp_only_train=True, hard_negative_weight=0.0, mlm_weight=0.1)
    with on_path(root):
        models = import_released(root, "esimcse.models")
        compute_loss = _released_compute_loss(root / "esimcse" / "trainers.py")
        model = _shimmed(models.BertForCL).from_pretrained(minilm_path(), model_args=args)
        no_dropout(model.float().train())
        model.mlp.load_state_dict(_mlp_state(hidden))
        model.momentum_model.load_state_dict(fresh.state_dict())   # what its from_pretrained leaves: a random init
        for p in model.momentum_model.parameters():
            p.requires_grad_(False)
        inputs = {k: torch.stack([v[:n], v[n:]], dim=1) for k, v in views.items()}   # its collator's (B, 2, L)
        trainer = SimpleNamespace(model_args=args, pre_z1=_queue(hidden), args=SimpleNamespace(past_index=-1),
                                  label_smoother=None)
        loss = compute_loss(trainer, model, inputs)
        loss.backward()
        keys = trainer.pre_z1[-n:]                            # its queue, oldest first: this batch's keys last
    grads = grads_of(model.bert.named_parameters()) | grads_of(model.mlp.named_parameters(), prefix="mlp.")
    return Outputs(loss=float(loss.detach()), grads=key_biases_zeroed(grads), extra=_key_stats(keys))


if __name__ == "__main__":
    sys.exit(main(CASE, repository=REPOSITORY, commit=COMMIT, setting=SETTING, golden_grads=GOLDEN_GRADS,
                  sentlab_outputs=sentlab_outputs, released_outputs=released_outputs))
