"""One training run from params: what ``pipeline/train.py METHOD`` and ``sentlab train`` call.

Outputs of a run named ``name`` (the method id, or ``<method>_<variant>`` for an ablation):

A run with another seed (``--seed S``, params.yaml ``seeds``) is named ``<method>-s<S>``.

* ``models/<name>/`` — the best checkpoint (HF folder, safetensors, tokenizer,
  sentence-transformers module files, ``sentlab.json`` with status "trained");
* ``reports/curves/<name>.csv`` — step, stsb_dev, alignment, uniformity, loss;
* an MLflow run named ``name`` with the same curves as step metrics;
* ``checkpoints/<name>/<hash>/`` — the resume state (outside DVC's outputs),
  removed after a successful export; states of other keys are kept and named in a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from ..runtime import distributed as D
from ..config import RUNTIME_TRAIN_KEYS, Params
from ..config.models import seed_name, split_seed
from ..errors import SentlabError
from ..methods import get_method
from ..methods.blocks import method_params
from ..runtime.timing import timed
from .checkpoint import publish, write_curve, write_marker
from .data import load_corpus
from .compiled import check_step_options
from .dropout import resolve_kernel
from .heap import apply_heap, resolve_heap
from ..runtime.device import check_precision
from .loop import DevEval, resolve_attention, resolve_device, resolve_precision, seed_everything, train_loop

log = logging.getLogger(__name__)

# ``(STS table path, train.dev_max_pairs, evaluate.batch_size, evaluate.workers) -> DevEval``: the STS-B dev check
# during training, passed in from above (sentlab.evaluate.sts.diagnostics.make_dev_evaluator): train/ imports no
# evaluator (docs/architecture.md).
DevEvalMaker = Callable[[Path, Optional[int], int, Any], DevEval]

NOT_RUN = "not run in this profile"


def resolve_train(params: Params, mparams):
    """The train block a method runs with: ``params.train`` with the train keys the method's block sets for
    itself (:data:`sentlab.methods.base.TRAIN_OVERRIDES`, those not None) in place of the train block's."""
    own = mparams.train_overrides()
    return params.train.model_copy(update=own) if own else params.train


# The train block's keys out of the run (resume) key, as they decide how a run executes or which runs the profile
# makes, never what one computes: `methods` (the list of methods the profile trains) and params.yaml's runtime keys
# (RUNTIME_TRAIN_KEYS), so resuming with another checkpoint interval, more loader workers, on more ranks
# (runtime.nproc: each rank the checkpoint has no RNG state for keeps its seeded one) or another device setting
# continues the checkpoint. (train.num_threads is in the key: a CPU training's reductions depend on the thread count)
UNKEYED_TRAIN_KEYS = ("methods", *RUNTIME_TRAIN_KEYS)


def backbone_of(params: Params, mparams) -> str:
    """The backbone a method trains from: its own ``backbone`` line, else ``model.backbone``."""
    return getattr(mparams, "backbone", None) or params.model.backbone


def run_key(params: Params, method_id: str, mparams, corpus_fingerprint: str) -> str:
    """Hash of what determines the trained result: method, its params, the resolved train block minus
    :data:`UNKEYED_TRAIN_KEYS`, seed, backbone, corpus content and the code a train stage executes
    (:func:`sentlab.provenance.code.training_code_fingerprint`, comments and docstrings left out: a fixed bug
    does not resume a checkpoint of the code before the fix; a comment does not cost the checkpoint)."""
    return key_of(run_key_inputs(params, method_id, mparams, corpus_fingerprint))


def run_key_inputs(params: Params, method_id: str, mparams, corpus_fingerprint: str) -> dict:
    """What :func:`run_key` hashes, as JSON values: sentlab.json records it beside the key, so the evaluate stage
    compares the params a model is labelled with against those it was trained with (evaluate/sts/trained.py)."""
    from ..provenance import code as provenance

    train = resolve_train(params, mparams).model_dump()
    for k in UNKEYED_TRAIN_KEYS:
        train.pop(k, None)
    inputs = {"method": method_id, "method_params": mparams.model_dump(), "train": train, "seed": params.seed,
              "backbone": backbone_of(params, mparams), "corpus": corpus_fingerprint,
              "code": provenance.training_code_fingerprint(method_id)}
    return json.loads(json.dumps(inputs, default=str))


def key_of(inputs: dict) -> str:
    """The run key of :func:`run_key_inputs`' record."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def stale_checkpoints(ckpt_dir: Path) -> list[Path]:
    """The resume states beside ``ckpt_dir`` (``checkpoints/<name>/<other key>``): written with other params or
    training code, this run cannot resume them. They are kept (a reverted edit resumes them again) and
    named in a warning with the command that frees their disk."""
    if not ckpt_dir.parent.is_dir():
        return []
    stale = sorted(p for p in ckpt_dir.parent.iterdir() if p.is_dir() and p.name != ckpt_dir.name)
    for p in stale:
        size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        log.warning("keeping the resume checkpoint %s (%.0f MB) of other params or training code: this run cannot "
                    "resume it, reverting the change would; `rm -r %s` frees its disk", p, size / 2**20, p)
    return stale


def load_encoder(params: Params, cls, models_dir: Path, device: torch.device, backbone: Optional[str] = None,
                 init_name: Optional[str] = None):
    """The encoder a training starts from: the backbone, or the trained model of ``cls.init_from`` (``init_name``:
    its folder under ``models_dir``, e.g. ``paser-s43`` for ``paser_sup-s43``; default the method's id)."""
    from ..assets.resolve import load_model

    if cls.init_from:
        src = models_dir / (init_name or cls.init_from)
        info = src / "sentlab.json"
        if not info.is_file() or json.loads(info.read_text()).get("status") != "trained":
            raise SentlabError(f"Method {cls.id} starts from the trained model of `{cls.init_from}` ({src}), which is "
                               f"missing or was not trained in this profile; add {cls.init_from} to train.methods.")
        model, tok = load_model(str(src))
        model.sentlab_init = cls.init_from  # sentlab.json's init: the trained method it starts from
        return model, tok
    return load_model(backbone or params.model.backbone)


def train_method(params: Params, method_id: str, *, name: Optional[str] = None, overrides: Optional[dict] = None,
                 root: str | Path = ".", dev_eval: Optional[DevEval] = None,
                 make_dev_eval: Optional[DevEvalMaker] = None, tracking: bool = True,
                 callbacks: Sequence[Callable] = (), encoder_factory: Optional[Callable] = None,
                 keep_checkpoint: bool = False, progress: bool = True, group: Optional[str] = None,
                 init_name: Optional[str] = None) -> dict:
    """Train ``method_id`` with ``params`` and export the best model. Returns ``sentlab.json``'s content.

    The dev check: ``dev_eval`` (``encoder -> {"stsb_dev", ...}``), or ``make_dev_eval`` to build it from
    ``root``'s STS table once the corpus is loaded (:data:`DevEvalMaker`); one of them is needed.
    ``encoder_factory`` (tests) replaces the backbone loading: ``() -> (model, tokenizer)``.
    ``group`` names the model its seeds share (``simcse`` for ``simcse-s43``; default ``name``): the
    MLflow run of every seed nests under the method run of that name.
    """
    if dev_eval is None and make_dev_eval is None:
        raise TypeError("train_method needs dev_eval or make_dev_eval (the STS-B dev check: "
                        "sentlab.evaluate.sts.diagnostics.make_dev_evaluator)")
    root = Path(root)
    name = name or method_id
    cls = get_method(method_id)
    mparams = method_params(params, method_id, overrides)
    # A method's own dev interval (docs/evaluation.md#the-sts-protocol: PT-BERT 125, SimCSE 250), epochs (PaSeR: 5),
    # batch, lr or step budget.
    cfg = resolve_train(params, mparams)
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)  # `auto` resolved: what the loop uses
    # before any work: an emulated bf16 stops here (sentlab.runtime.device), unless runtime.emulated_precision allows it
    emulated = check_precision(precision, device.type, "train.precision", params.runtime.emulated_precision)
    heap = resolve_heap(cfg.heap, device)
    apply_heap(heap)  # before the model's first allocation
    D.init(device.type)
    models_dir, curves_dir = root / "models", root / "reports" / "curves"

    seed_everything(params.seed)  # the method's new layers (MLP, pseudo tokens) are initialised from the seed
    backbone = backbone_of(params, mparams)
    model, tok = (encoder_factory() if encoder_factory
                  else load_encoder(params, cls, models_dir, device, backbone, init_name))
    attention = resolve_attention(cfg.attention, device)
    # before the method copies it (MoCo's key encoder); not saved: the exported folder loads with the default
    model.set_attn_implementation(attention)
    method = cls(model, tok, mparams.resolved(cfg), seed=params.seed)
    check_step_options(method, cfg)   # train.pad_buckets / train.compile refused before anything is written

    corpus_name = method.corpus_name()
    with timed("corpus", name=corpus_name) as phase:  # sentlab.runtime.timing: observed by tools (the preflight)
        corpus = load_corpus(root / "data" / "corpus" / f"{corpus_name}.parquet", method.corpus_columns,
                             root / "data" / "annotations" / corpus_name)
        corpus = method.split_heldout(corpus)
        phase.record(sentences=len(corpus))
    if dev_eval is None:
        dev_eval = make_dev_eval(root / "data" / "sts" / "sts.parquet", cfg.dev_max_pairs,
                                 params.evaluate.batch_size, params.evaluate.workers)
    key_inputs = run_key_inputs(params, method_id, mparams, corpus.fingerprint)
    key = key_of(key_inputs)
    ckpt_dir = root / "checkpoints" / name / key
    if D.is_main():
        stale_checkpoints(ckpt_dir)
    from ..provenance.environment import environment_fingerprint

    dropout = resolve_kernel(cfg.dropout_kernel, device, cfg.compile)
    info = dict(method.export_info(), name=name, status="trained", seed=params.seed, init=method.init_sources(),
                backbone=backbone,
                attention=attention, dropout_kernel=dropout, heap=heap,
                fingerprint=environment_fingerprint(device=device, precision=precision,
                                                    data_files=[root / "data" / "corpus" / f"{corpus_name}.parquet",
                                                                root / "data" / "sts" / "sts.parquet"]))
    logged = {"seed": params.seed, "backbone": backbone,
              "train": cfg.model_dump(), "precision": precision, "attention": attention, "dropout_kernel": dropout,
              "heap": heap, "method": {"id": method_id, **mparams.model_dump()}, "run_key": key, "init": info["init"],
              "corpus": {"name": corpus_name, "sentences": len(corpus)}}
    if emulated:   # asked for (runtime.emulated_precision: allow): said in the log, sentlab.json and MLflow
        log.warning("%s: %s", name, emulated)
        info["emulated_precision"] = logged["emulated_precision"] = emulated

    def _train(log_fn):
        return train_loop(method, corpus, cfg, seed=params.seed, dev_eval=dev_eval, ckpt_dir=ckpt_dir,
                          export_info=info,
                          log_metrics=log_fn, callbacks=callbacks, device=device,
                          max_grad_norm=cfg.max_grad_norm, progress=progress, desc=name)

    if tracking and D.is_main():
        from .. import tracking as T
        from ..tracking import runs as R

        run_name = T.run_name(method_id, mparams.model_dump(), variant=None if name == method_id else name,
                              train=cfg.model_dump(), keys=cls.run_name_params)
        from ..provenance.environment import fingerprint_tags

        tags = {"stage": "train", "method": method_id, "sentlab.profile": params.profile, "sentlab.model": name,
                "sentlab.group": group or name, "sentlab.run_key": key, "sentlab.seed": str(params.seed),
                **fingerprint_tags(info["fingerprint"])}
        # every seed of a method nests under one run of the method (the report logs the seed aggregate there);
        # a run resuming a checkpoint continues the MLflow run the killed process left open
        resumable = any((ckpt_dir / d / "state.json").is_file() for d in ("last", ".last.old"))
        with T.run(f"{run_name} seed={params.seed}", params=logged, tags=tags,
                   parent_run_id=R.method_parent(group or name),
                   resume_run_id=R.interrupted_training_run(name, key, resumable),
                   system_metrics=True) as mlflow:   # MLflow's system/ metrics (CPU, memory, GPU) while it trains
            T.log_corpus_input(mlflow, root / "data" / "corpus" / f"{corpus_name}.parquet", corpus_name,
                               corpus.fingerprint, len(corpus))
            result = _train(T.log_metrics)
            mlflow.log_metrics({"best_stsb_dev": result.best_score, "best_step": float(result.best_step or 0),
                                "train_sentences_per_s": result.sentences_per_s})
    else:
        result = _train(None)

    final = dict(info, best_stsb_dev=result.best_score, best_step=result.best_step, steps=result.steps,
                 resumed_from_step=result.resumed_from, run_key=key, run_key_inputs=key_inputs)
    if D.is_main():
        method.export_artifacts(result.best_dir, root)
        publish(result.best_dir, models_dir / name, final)
        write_curve(curves_dir / f"{name}.csv", result.curve)  # after the model: never a curve without one
        if not keep_checkpoint:
            shutil.rmtree(ckpt_dir, ignore_errors=True)
    D.barrier()
    return final


def stage_main(argv: Optional[Sequence[str]] = None, prog: str = "pipeline/train.py", *,
               make_dev_eval: DevEvalMaker) -> int:
    """``pipeline/train.py NAME --method M --seed S``: the DVC stage ``train@NAME`` (dvc.yaml; the model's
    description in models.yaml, :class:`sentlab.config.models.ModelSpec`). It reads exactly the params the stage
    declares (:mod:`sentlab.config.stage_params`): the model's params lines (its method's, and an ablation variant's
    ``set``), the train keys, the backbone."""
    import argparse

    from ..config.models import load_models, train_stage
    from ..config.stage_params import stage_params

    ap = argparse.ArgumentParser(prog=prog, description="Train one model of the stage list (DVC stage train@NAME).")
    ap.add_argument("name", help="the model (models.yaml): models/<name>")
    ap.add_argument("--method", required=True, help="its registered method id")
    ap.add_argument("--seed", type=int, required=True, help="its seed")
    ap.add_argument("--keep-checkpoint", action="store_true", help="keep checkpoints/<name>/ after success")
    args = ap.parse_args(argv)
    params = stage_params(train_stage(args.name))
    # runtime.nproc > 1: the same command again under torchrun, one process per device
    rc = D.launch(params.train.nproc, sys.argv[0], list(sys.argv[1:] if argv is None else argv))
    if rc is not None:
        return rc
    spec = load_models().get(args.name)   # dvc.yaml's stage exists: models.yaml lists the model
    if spec is None or (spec.method, spec.seed) != (args.method, args.seed):
        raise SentlabError(f"models.yaml describes model `{args.name}` as "
                           f"{f'method {spec.method}, seed {spec.seed}' if spec else 'nothing'}, but its stage runs "
                           f"--method {args.method} --seed {args.seed}: dvc.yaml's `train` group passes the entry's "
                           f"values. Run `sentlab stages` to write models.yaml again, then `dvc repro`.")
    params = params.model_copy(update={"seed": args.seed})
    final = train_method(params, args.method, name=args.name, overrides=spec.overrides(params),
                         make_dev_eval=make_dev_eval, keep_checkpoint=args.keep_checkpoint, group=spec.group,
                         init_name=spec.init_model)
    print(f"{args.name}: best STS-B dev {final['best_stsb_dev']:.2f} at step {final['best_step']} "
          f"-> models/{args.name}")
    return 0


def add_train_arguments(ap) -> None:
    ap.add_argument("method", nargs="?", help="registered method id (`sentlab methods` lists them)")
    ap.add_argument("--ablation", default=None, help="an ablation variant named in params `ablations.variants` "
                    "(its method and overrides come from there); output models/<variant>")
    ap.add_argument("--variant", default=None, help="ablation variant name: output models/<method>_<variant>; "
                    "runs only when ablations.enabled is true in the active profile")
    ap.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                    help="override a key of methods.<method> (YAML value), e.g. --set pseudo_len=64")
    ap.add_argument("--seed", type=int, default=None, help="train with this seed of params.yaml `seeds.pool` "
                    "instead of `seed`; output models/<method>-s<seed> (trained when the method's seed count "
                    "includes it, else a 'not run' marker)")
    ap.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    ap.add_argument("--keep-checkpoint", action="store_true", help="keep checkpoints/<name>/ after success")


def parse_overrides(items: Sequence[str]) -> dict:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise SentlabError(f"--set expects KEY=VALUE (a key of the method's params block), got {item!r}.")
        k, v = item.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def run_from_args(args, params: Params, make_dev_eval: DevEvalMaker) -> int:
    if args.ablation:
        variant = params.ablations.variant(args.ablation)
        method_id, overrides, name = variant.method, dict(variant.set), args.ablation
    elif args.method:
        method_id = args.method
        overrides = parse_overrides(args.overrides)
        name = f"{method_id}_{args.variant}" if args.variant else method_id
        if args.seed is not None:
            name = seed_name(name, args.seed)
    else:
        raise SentlabError("Name a method (`sentlab methods` lists them) or an ablation variant (--ablation NAME).")
    method_params(params, method_id, overrides)  # a typo in an override fails even when the stage is switched off
    root = Path(".")
    if args.variant or args.ablation:
        reason = NOT_RUN if not params.ablations.enabled else None
    else:
        reason = NOT_RUN if method_id not in params.train.methods else None
    if args.seed is not None and reason is None:
        if args.seed not in params.seeds.pool:
            raise SentlabError(f"--seed {args.seed} is not in params.yaml `seeds.pool` {params.seeds.pool}; the seed "
                               f"stages are train@<method>-s<seed> for the pool's seeds (add it there).")
        if args.seed not in params.seeds.extra_seeds(method_id):
            reason = NOT_RUN
        params = params.model_copy(update={"seed": args.seed})
    if reason:
        write_marker(root / "models", root / "reports" / "curves", name, method_id, reason)
        print(f"{name}: {reason} (profile {params.profile}); wrote models/{name}/sentlab.json and an empty curve.")
        return 0
    init_from = get_method(method_id).init_from
    final = train_method(params, method_id, name=name, overrides=overrides, make_dev_eval=make_dev_eval,
                         keep_checkpoint=args.keep_checkpoint,
                         group=split_seed(name)[0] if args.seed is not None else name,
                         init_name=seed_name(init_from, args.seed) if init_from and args.seed is not None else None)
    print(f"{name}: best STS-B dev {final['best_stsb_dev']:.2f} at step {final['best_step']} -> models/{name}")
    return 0
