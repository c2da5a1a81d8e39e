"""Typed params: ``params.yaml`` validated before any stage does work.

Layout of ``params.yaml``::

    profile: quick            # which profile is in force (``make repro PROFILE=...``)
    seed: 42
    model: {...}              # backbone
    prepare: {...}            # stage sections, one per DVC stage
    annotate: {...}
    evaluate: {...}
    train: {...}              # the method-agnostic loop
    methods: {simcse: {}, paser: {...}, ...}   # one line per method (a train + evaluate stage each):
                                               # what differs from its own ``Params`` defaults
    methods_from: {paser_sup: {from: paser, ...}}  # methods that start from another's trained model
    ablations: {enabled: ..., variants: {...}}     # one train + evaluate stage per variant
    seeds: {pool: [...], count: 1, per_method: {...}}   # more seeds per method (train_seed@<m>-<s> stages)
    profiles:                 # each profile's values in one place: overrides on top of
      quick: {}               # the sections above (quick = the sections as written)
      smoke: {...}
      paper: {...}
    stage_lines: {...}        # the active profile's stages (dvc.yaml's foreach lists), written by
                              # ``sentlab profile NAME``: see :func:`stage_lines_for`

``load_params`` merges the active profile's overrides into the sections and
validates the result. An unknown key or a bad value raises
:class:`~sentlab.errors.SentlabError` naming the key and the allowed values.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import SentlabError

PROFILES = ("quick", "smoke", "paper")


class Strict(BaseModel):
    """Base for every params section: unknown keys are errors; every float is finite (no YAML .nan/.inf)."""

    model_config = ConfigDict(extra="forbid", frozen=False, protected_namespaces=(), allow_inf_nan=False)


class ModelParams(Strict):
    backbone: str = "sentence-transformers/all-MiniLM-L6-v2"
    """Hub id or local path of the encoder (``bert-base-uncased`` in the paper profile)."""


class PrepareParams(Strict):
    corpus: Literal["wiki1m"] = "wiki1m"
    size: int = Field(11913, gt=0, description="sentences sampled from the corpus")
    min_words: int = Field(1, ge=1, description="lines with fewer whitespace words are dropped")
    max_words: int = Field(128, ge=1, description="lines with more whitespace words are dropped")
    dedupe: bool = True
    allow_smaller: bool = Field(
        False, description="accept a corpus with fewer lines than `size` (use all of it) instead of failing"
    )
    nli: Literal["auto", "simcse", "sick_standin", "none"] = Field(
        "auto", description="paser_sup's NLI triples (data/corpus/nli.parquet): SimCSE's nli_for_simcse.csv (simcse), "
                            "the offline stand-in from SICK train (sick_standin), the CSV when it can be had else the "
                            "stand-in (auto), or none")

    @model_validator(mode="after")
    def _check_lengths(self):
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) must be <= max_words ({self.max_words})")
        return self


class AnnotateParams(Strict):
    backend: Literal["nltk", "spacy"] = "nltk"
    spacy_model: str = "en_core_web_sm"
    jobs: int = Field(2, ge=1)
    shard_size: int = Field(5000, ge=1)
    rake_max_words: Optional[int] = Field(None, ge=1, description="longest RAKE phrase, in words; null: unbounded "
                                                                  "(RAKE's first-ranked phrases are often long)")


class HardSubsetParams(Strict):
    pos_min_score: float = 4.0
    neg_max_score: float = 2.0
    pos_len_diff_gt: int = 5
    neg_len_diff_lt: int = 2


class WhiteningParams(Strict):
    fit_on: Literal["sts_pool", "corpus"] = "sts_pool"
    sample_size: int = Field(10000, gt=0, description="sentences used to fit mu and W")
    dim: Optional[int] = Field(None, gt=0, description="keep the first k whitened dimensions (None: all)")
    pooling: Literal["cls", "mean", "first_last"] = "first_last"


class EvaluateParams(Strict):
    batch_size: int = Field(128, gt=0)
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when available, else CPU")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="auto: exact fp32 on every device; bf16: autocast, recorded as approximate")
    max_length: Optional[int] = Field(None, gt=0, description="None: the model's own maximum")
    workers: Union[Literal["auto"], Annotated[int, Field(ge=1)]] = Field(
        "auto", description="CPU: batches encoded at once, each on one intra-op thread; auto = the torch thread count "
                            "(1 on CUDA); 1 = one batch at a time on every thread. The bits do not depend on it above 1")
    diagnostics: bool = True
    max_pairs: Optional[int] = Field(None, gt=0, description="None: every pair; else a seeded sample per task (smoke runs; labelled)")
    hard_subset: HardSubsetParams = HardSubsetParams()
    whitening: WhiteningParams = WhiteningParams()
    baselines: list[Literal["cls", "mean", "first_last", "whitening"]] = Field(
        default_factory=lambda: ["cls", "mean", "first_last", "whitening"],
        description="pooling / whitening baselines of the backbone (one evaluate_baseline stage each)")


class TrainParams(Strict):
    methods: list[str] = Field(default_factory=list, description="methods this profile trains")
    batch_size: int = Field(64, gt=0)
    lr: float = Field(3e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    epochs: int = Field(1, gt=0)
    max_steps: Optional[int] = Field(None, gt=0, description="stop after this many optimiser steps")
    grad_accum: int = Field(1, gt=0)
    max_grad_norm: Optional[float] = Field(1.0, gt=0, description="gradient clipping (HF Trainer's default, as SimCSE/PT-BERT); None: off")
    max_length: int = Field(32, gt=0)
    eval_every: int = Field(125, gt=0)
    checkpoint_every: Optional[int] = Field(None, gt=0, description="None: at every dev evaluation")
    dev_max_pairs: Optional[int] = Field(None, gt=0, description="None: all 1500 STS-B dev pairs")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="the profile's choice, never the CPU's: auto = bf16 autocast on CUDA, fp32 on CPU; "
                            "logits and losses stay fp32; evaluation precision is evaluate.precision")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    attention: Literal["auto", "eager", "sdpa"] = Field(
        "auto", description="the backbone's attention kernel while training: auto = eager on CPU (PyTorch's CPU SDPA "
                            "backward is slower at sentence lengths; benchmarks/train_speed.py --compare-attention), "
                            "sdpa on CUDA; the same maths, round-off apart; evaluation keeps the model's default")
    dropout_kernel: Literal["auto", "torch", "fast"] = Field(
        "auto", description="the dropout mask while training: auto = fast on CPU (16-bit lanes of 64-bit draws, drop "
                            "probability within 8e-6 of p; sentlab.train.dropout), torch elsewhere (PyTorch's kernel)")
    heap: Literal["auto", "retain", "system"] = Field(
        "auto", description="malloc in the training process: auto = retain on CPU under glibc (freed blocks of >= 32 MB "
                            "stay mapped instead of being page-faulted in again; sentlab.train.heap), system elsewhere")
    num_threads: Optional[int] = Field(None, gt=0)
    loader_workers: Union[Literal["auto"], Annotated[int, Field(ge=0)]] = Field(
        "auto", description="DataLoader worker processes running each method's prepare() (tokenisation, augmentation) "
                            "ahead of the step; auto: 0 on CPU (the cores are busy training), 4 per GPU; the numbers "
                            "do not depend on it")
    nproc: int = Field(1, ge=1, description="processes (GPUs) to train on: > 1 re-runs the train stage under torchrun; "
                                             "batch_size stays the global batch, split over the processes")


class SeedsParams(Strict):
    """Seeds as an axis of the pipeline. Every method trains with ``seed`` (stage ``train@<m>`` ->
    ``models/<m>``); a method trains ``n`` seeds in all, where ``n`` is ``per_method[<m>]`` or
    ``count``: ``seed``, then the first ``n - 1`` of ``pool`` (stage ``train_seed@<m>-<s>`` ->
    ``models/<m>-s<s>``). ``pool`` is the seeds that can have stages, the same in every profile; the
    ones a profile trains are its ``stage_lines.seeds`` (:func:`stage_lines_for`). Changing ``n`` runs
    or drops only the stages of the seeds it adds or removes."""
    pool: list[int] = Field(default_factory=lambda: [43, 44, 45, 46],
                            description="the extra seeds that have stages (train_seed@<method>-<seed>)")
    count: int = Field(1, ge=1, description="seeds every method trains (1: `seed` only)")
    per_method: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="a method's own seed count, e.g. {simcse: 3}")

    @model_validator(mode="after")
    def _check_pool(self):
        if len(set(self.pool)) != len(self.pool):
            raise ValueError(f"seeds.pool {self.pool} repeats a seed; list each once")
        most = max([self.count, *self.per_method.values()])
        if most - 1 > len(self.pool):
            raise ValueError(f"seeds: a method trains {most} seeds but seeds.pool has {len(self.pool)} extra seeds "
                             f"(+ `seed`); add seeds to seeds.pool (each is a stage line) or lower the count")
        return self

    def count_for(self, method_id: str) -> int:
        return self.per_method.get(method_id, self.count)

    def extra_seeds(self, method_id: str) -> list[int]:
        """The pool seeds ``method_id`` trains besides ``seed``."""
        return self.pool[: self.count_for(method_id) - 1]


class Params(Strict):
    profile: Literal["quick", "smoke", "paper"] = "quick"
    seed: int = 42
    model: ModelParams = ModelParams()
    prepare: PrepareParams = PrepareParams()
    annotate: AnnotateParams = AnnotateParams()
    evaluate: EvaluateParams = EvaluateParams()
    train: TrainParams = TrainParams()
    methods: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="one line per method: the keys that differ from its Params defaults")
    methods_from: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="methods that start from another method's trained model: "
                                          "{<id>: {from: <that method>, <keys as in methods>}}")
    ablations: dict[str, Any] = Field(default_factory=dict)
    seeds: SeedsParams = SeedsParams()
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    stage_lines: dict[str, Any] = Field(
        default_factory=dict, description="the active profile's stages, written by `sentlab profile NAME` "
                                          "(stage_lines_for); resolve_params refuses a stale one")

    @model_validator(mode="after")
    def _check_lists(self):
        both = sorted(set(self.methods) & set(self.methods_from))
        if both:
            raise ValueError(f"{both} are in both `methods` and `methods_from`; keep each method in one of them")
        bad = [m for m, b in self.methods_from.items() if not isinstance(b, dict) or not isinstance(b.get("from"), str)]
        if bad:
            raise ValueError(f"methods_from.{bad[0]} must be a mapping with `from: <method id>` (the method whose "
                             f"trained model it starts from)")
        stages = self.trained_ids
        unknown = [m for m in self.train.methods if m not in stages]
        if unknown:
            raise ValueError(
                f"train.methods names {unknown}, which have no train stage; allowed: {stages} (the ids of `methods` "
                f"and `methods_from`: add a line there for a new method)"
            )
        if self.seed in self.seeds.pool:
            raise ValueError(f"seeds.pool {self.seeds.pool} contains `seed` ({self.seed}), which every method trains "
                             f"already (models/<method>); drop it from the pool")
        no_stage = sorted(set(self.seeds.per_method) - set(self.methods))
        if no_stage:
            raise ValueError(f"seeds.per_method names {no_stage}, which have no seed stages: only the methods of "
                             f"`methods` do (not `methods_from`, whose seeds would need a trained model per seed of "
                             f"the method they start from)")
        orphans = [f"{m} (starts from {b['from']})" for m, b in self.methods_from.items()
                   if m in self.train.methods and b["from"] not in self.train.methods]
        if orphans:
            raise ValueError(f"train.methods trains {orphans} but not the method it starts from; add that method to "
                             f"train.methods or drop the one that needs it")
        return self

    @property
    def trained_ids(self) -> list[str]:
        """Every method with a train stage: the lines of ``methods`` and ``methods_from``."""
        return list(self.methods) + list(self.methods_from)

    def method_block(self, method_id: str) -> dict[str, Any]:
        """The params.yaml line of ``method_id`` (``from`` of ``methods_from`` left out): what differs from its defaults."""
        if method_id in self.methods_from:
            return {k: v for k, v in (self.methods_from[method_id] or {}).items() if k != "from"}
        return dict(self.methods.get(method_id) or {})

    @model_validator(mode="after")
    def _check_ablation_names(self):
        bad = [k for k in (self.ablations.get("variants") or {}) if not re.fullmatch(r"[A-Za-z0-9_-]+", str(k))]
        if bad:
            raise ValueError(f"ablations.variants names {bad} must use letters, digits, '_' and '-' only "
                             f"(a '.' breaks DVC's params key paths; write 0p01 for 0.01)")
        return self

    def method_params(self, method_id: str):
        """The validated params model of one method (its own ``Params`` class)."""
        from .methods import get_method

        cls = get_method(method_id)
        section = "methods_from" if method_id in self.methods_from else "methods"
        try:
            return cls.Params(**self.method_block(method_id))
        except ValidationError as e:
            raise SentlabError(_format_validation(e, cls.Params, prefix=f"{section}.{method_id}")) from None


def deep_merge(base: dict, override: dict) -> dict:
    """Recursively merge ``override`` into a copy of ``base`` (dicts merge, anything else replaces)."""
    out = copy.deepcopy(base)
    for k, v in (override or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _format_validation(e: ValidationError, model: type[BaseModel], prefix: str = "", source: str = "params.yaml") -> str:
    """One paragraph naming every bad key, with the allowed keys/values."""
    parts = []
    for err in e.errors():
        loc = tuple(err["loc"])
        key = ".".join(str(x) for x in (prefix.split(".") if prefix else []) + list(loc))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = _allowed_for(model, loc)
            msg = "unknown key" + (f"; allowed keys here: {', '.join(allowed)}" if allowed else "")
        elif "input" in err and not isinstance(err["input"], (dict, list)):
            msg += f" (got {err['input']!r})"
        parts.append(f"`{key or '(top level)'}`: {msg}")
    return f"Invalid params in {source}: " + "; ".join(parts) + ". Fix the value(s) and run again."


def _allowed_for(model: type[BaseModel], loc: tuple) -> list[str]:
    """Walk ``model`` along ``loc`` (minus the last element) and list its field names."""
    cur: Any = model
    for part in loc[:-1]:
        if isinstance(cur, type) and issubclass(cur, BaseModel) and part in cur.model_fields:
            cur = cur.model_fields[part].annotation
        else:
            return []
    if isinstance(cur, type) and issubclass(cur, BaseModel):
        return list(cur.model_fields)
    return []


def validate(raw: dict, source: str = "params.yaml") -> Params:
    """Validate a raw params mapping (the profile overrides already merged)."""
    if not isinstance(raw, dict):
        raise SentlabError(f"{source} must be a YAML mapping of sections (prepare, train, ...); got {type(raw).__name__}.")
    try:
        params = Params(**raw)
    except ValidationError as e:
        raise SentlabError(_format_validation(e, Params, source=source)) from None
    # Each method block is validated by the method's own Params model.
    from .methods import registered

    known = registered()
    for mid in params.trained_ids:
        if mid not in known:
            raise SentlabError(
                f"Invalid params in {source}: method `{mid}` (in methods / methods_from) is not a registered method; "
                f"allowed: {', '.join(sorted(known))}. Run `sentlab methods` for the list."
            )
    for mid in params.trained_ids:
        init, given = known[mid].init_from, (params.methods_from.get(mid) or {}).get("from")
        if init != given:
            where = (f"it is in `methods_from` with from: {given}" if given else "it is in `methods`")
            fix = (f"move its line to `methods_from` as `{mid}: {{from: {init}, ...}}`" if init else
                   "move its line to `methods`")
            raise SentlabError(
                f"Invalid params in {source}: method `{mid}` starts from "
                f"{'the trained model of `' + init + '`' if init else 'the backbone'} (its init_from), but {where}; "
                f"{fix}, so its train stage depends on the right model.")
        params.method_params(mid)
    _validate_ablations(params, source)
    return params


def _validate_ablations(params: Params, source: str) -> None:
    """``ablations.enabled`` is a real bool; each variant names a registered method and only keys of
    that method's Params, with values it accepts (merged over ``methods.<id>``, as the stage does)."""
    from .methods import get_method, registered

    enabled = params.ablations.get("enabled", False)
    if not isinstance(enabled, bool):
        raise SentlabError(f"Invalid params in {source}: `ablations.enabled` must be true or false, got {enabled!r} "
                           f"(a quoted 'false' is a string). Write `enabled: false` or `enabled: true`.")
    unknown = set(params.ablations) - {"enabled", "variants"}
    if unknown:
        raise SentlabError(f"Invalid params in {source}: `ablations` has unknown keys {sorted(unknown)}; allowed: "
                           f"enabled, variants.")
    for name, spec in (params.ablations.get("variants") or {}).items():
        key = f"ablations.variants.{name}"
        if not isinstance(spec, dict) or set(spec) - {"method", "set"} or "method" not in spec:
            raise SentlabError(f"Invalid params in {source}: `{key}` must be `{{method: <id>, set: {{<key>: <value>}}}}` "
                               f"(allowed keys: method, set); got {spec!r}.")
        if spec["method"] not in registered():
            raise SentlabError(f"Invalid params in {source}: `{key}.method`: {spec['method']!r} is not a registered "
                               f"method; allowed: {', '.join(sorted(registered()))}.")
        overrides = spec.get("set") or {}
        if not isinstance(overrides, dict):
            raise SentlabError(f"Invalid params in {source}: `{key}.set` must be a mapping of the method's keys, got "
                               f"{overrides!r}.")
        cls = get_method(spec["method"])
        try:
            cls.Params(**deep_merge(params.method_block(spec["method"]), overrides))
        except ValidationError as e:
            raise SentlabError(_format_validation(e, cls.Params, prefix=f"{key}.set", source=source)) from None


def load_all_profiles(path: str | os.PathLike = "params.yaml") -> dict[str, Params]:
    """Every profile of ``path`` validated (not just the active one): a typo in ``profiles.paper`` is
    found on a quick run, before a GPU day is spent on it."""
    raw = read_yaml(path)
    return {p: validate(resolve_profile(raw, p, source=str(path)), source=f"{path} (profile {p})") for p in PROFILES}


def read_yaml(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.exists():
        raise SentlabError(f"Params file {path} not found. Run from the repository root (where params.yaml lives) or pass --params PATH.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise SentlabError(f"Params file {path} is not valid YAML: {e}. Fix the syntax and run again.") from None
    return data or {}


def resolve_profile(raw: dict, profile: str | None = None, source: str = "params.yaml") -> dict:
    """Apply ``profiles[profile]`` (default: ``raw['profile']``) on top of the sections."""
    profile = profile or raw.get("profile", "quick")
    if profile not in PROFILES:
        raise SentlabError(f"Invalid params in {source}: `profile`: {profile!r} is not a profile; allowed: {', '.join(PROFILES)}.")
    overrides = (raw.get("profiles") or {}).get(profile) or {}
    for forbidden in ("profile", "profiles", "stage_lines"):
        if forbidden in overrides:
            raise SentlabError(
                f"Invalid params in {source}: `profiles.{profile}.{forbidden}` cannot be overridden by a profile. "
                f"Remove that key."
            )
    for section in ("methods", "methods_from", "ablations"):  # a profile sets values; dvc.yaml's stages are fixed
        new = set(((overrides.get(section) or {}).get("variants") if section == "ablations" else overrides.get(section)) or {})
        have = set(((raw.get(section) or {}).get("variants") if section == "ablations" else raw.get(section)) or {})
        if new - have:
            key = f"{section}.variants" if section == "ablations" else section
            raise SentlabError(
                f"Invalid params in {source}: `profiles.{profile}.{key}` adds {sorted(new - have)}, which "
                f"`{key}` does not list; a line is defined once for every profile, so add it to `{key}` "
                f"(a profile only changes values).")
    pool = (overrides.get("seeds") or {}).get("pool")
    if pool is not None and pool != (raw.get("seeds") or {}).get("pool", SeedsParams().pool):
        raise SentlabError(
            f"Invalid params in {source}: `profiles.{profile}.seeds.pool` changes the seed pool, whose seeds are "
            f"defined once for every profile (train_seed@<method>-<seed>); edit `seeds.pool` itself and set "
            f"the profile's `seeds.count` / `seeds.per_method` to choose how many of them it trains.")
    merged = deep_merge({k: v for k, v in raw.items()}, overrides)
    merged["profile"] = profile
    return merged


# --- the active profile's stages -------------------------------------------------------------------
STAGE_LINES_HEADER = "# --- stage_lines: generated by `sentlab profile NAME`"


def stage_lines_for(params: Params) -> dict[str, Any]:
    """The stages the active profile runs, as the lists dvc.yaml's ``foreach`` loops read from
    params.yaml ``stage_lines``: ``train`` (the ``methods`` lines it trains: train@ + evaluate@),
    ``train_from`` (``{id: from}`` of the ``methods_from`` lines it trains), ``seeds``
    (``{<m>-<s>: {method, seed}}``: train_seed@ + evaluate_seed@ for every extra seed it trains),
    ``ablations`` (the variants, when ``ablations.enabled``) and ``baselines``.

    A profile's pipeline holds only its own stages: the quick profile's 35, not the paper profile's
    257 with 222 "not run" markers (each marker stage cost ~2.6 s of DVC bookkeeping, 571 s of a
    quick run). DVC reads the lists from params.yaml before any stage runs, so they are written when
    the profile is switched (:func:`set_profile`) and ``resolve_params`` refuses lists that disagree
    with the profile in force (:func:`check_stage_lines`)."""
    trains = params.train.methods
    variants = (params.ablations.get("variants") or {}) if params.ablations.get("enabled", False) else {}
    return {
        "train": [m for m in params.methods if m in trains],
        "train_from": {m: b["from"] for m, b in params.methods_from.items() if m in trains},
        "seeds": {f"{m}-{s}": {"method": m, "seed": s}
                  for m in params.methods if m in trains for s in params.seeds.extra_seeds(m)},
        "ablations": list(variants),
        "baselines": list(params.evaluate.baselines),
    }


def active_models(params: Params) -> list[str]:
    """The model names (``models/<name>``, ``reports/metrics/<name>.json``) the active profile trains:
    what its report and export read; another profile's outputs left in the workspace are not its."""
    lines = stage_lines_for(params)
    return [*lines["train"], *lines["train_from"], *(f"{v['method']}-s{v['seed']}" for v in lines["seeds"].values()),
            *lines["ablations"]]


def profile_models(params: Params) -> dict[str, bool]:
    """Every model name params.yaml can make (method lines, their pool seeds, ablation variants) ->
    whether the active profile trains it (:func:`active_models`)."""
    active = set(active_models(params))
    names = [*params.trained_ids, *(f"{m}-s{s}" for m in params.methods for s in params.seeds.pool),
             *(params.ablations.get("variants") or {})]
    return {n: n in active for n in names}


def check_stage_lines(raw: dict, params: Params, source: str = "params.yaml") -> None:
    """Refuse ``stage_lines`` that are not the active profile's: dvc.yaml would run another
    profile's stages (or miss some of this one's) under this profile's values."""
    want = stage_lines_for(params)
    have = raw.get("stage_lines")
    if have == want:
        return
    if not isinstance(have, dict):
        what = "has no `stage_lines` section"
    else:
        diff = [k for k in want if have.get(k) != want[k]] + sorted(set(have) - set(want))
        what = f"lists stages that are not profile `{params.profile}`'s (`stage_lines.{diff[0]}` differs)"
    raise SentlabError(
        f"{source} {what}: dvc.yaml makes its stages from `stage_lines`, which DVC reads before any stage runs, "
        f"so they must be those of the active profile. Run `sentlab profile {params.profile}` (or `make repro "
        f"PROFILE={params.profile}`), which rewrites them, then `dvc repro` again; an edit of `profile:`, "
        f"`train.methods`, `seeds`, `ablations.enabled` or `evaluate.baselines` by hand needs the same command.")


def _stage_lines_text(lines: dict[str, Any]) -> str:
    body = yaml.safe_dump({"stage_lines": lines}, sort_keys=False, default_flow_style=None, width=110)
    return (f"{STAGE_LINES_HEADER} (`make repro PROFILE=NAME`) from the profile's train.methods,\n"
            f"# methods_from, seeds, ablations and evaluate.baselines: the stages dvc.yaml makes (foreach). Do not edit;\n"
            f"# resolve_params refuses lists that are not the active profile's.\n{body}")


def write_stage_lines(text: str, lines: dict[str, Any]) -> str:
    """``text`` (params.yaml) with its generated ``stage_lines`` block (the file's tail, from
    :data:`STAGE_LINES_HEADER`) replaced by ``lines``, or appended."""
    at = text.find(STAGE_LINES_HEADER)
    if at < 0:
        m = re.search(r"^stage_lines:", text, re.M)
        at = m.start() if m else -1
    head = text if at < 0 else text[:at]
    return head.rstrip("\n") + "\n\n" + _stage_lines_text(lines)


def load_params(path: str | os.PathLike = "params.yaml", profile: str | None = None) -> Params:
    """Read, merge the active profile, validate. The one entry point stages use."""
    raw = read_yaml(path)
    return validate(resolve_profile(raw, profile, source=str(path)), source=str(path))


def set_profile(path: str | os.PathLike, profile: str) -> bool:
    """Point ``params.yaml``'s ``profile:`` line at ``profile`` (comments preserved) and write the
    profile's ``stage_lines`` (:func:`stage_lines_for`).

    Returns True if the file changed. The whole file is validated under the new
    profile before it is written.
    """
    path = Path(path)
    if profile not in PROFILES:
        raise SentlabError(f"Unknown profile {profile!r}; allowed: {', '.join(PROFILES)} (make repro PROFILE=...).")
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(r"^profile:\s*(\S+)(.*)$", re.M)
    m = pattern.search(text)
    if not m:
        raise SentlabError(f"{path} has no top-level `profile:` line; add `profile: quick` at the top.")
    new = text[: m.start()] + f"profile: {profile}{m.group(2)}" + text[m.end():]
    params = validate(resolve_profile(yaml.safe_load(new), profile, source=str(path)), source=str(path))
    new = write_stage_lines(new, stage_lines_for(params))
    if new == text:
        return False
    from .io import write_text

    write_text(path, new)
    return True


# --- the active profile's values, one file per params key (DVC dependencies) ----------------
RESOLVED_DIR = "data/params"
RESOLVED_SECTIONS = ("seed", "model", "prepare", "annotate", "evaluate", "train")
# train.* keys that change no number: which methods run (each method's file says whether it is
# trained), how often a resume state is written, the thread count, the device `auto` resolves to.
TRAIN_RUNTIME_KEYS = ("methods", "checkpoint_every", "num_threads", "device", "loader_workers")


def resolved_files(params: Params) -> dict[str, Any]:
    """``{relative path: content}`` of the files :func:`write_resolved` writes.

    One JSON file per params key a stage reads, each holding the active profile's name and the
    key's value *after* the profile is merged; stages depend on these files (and declare them as
    DVC params files, so ``dvc exp show`` shows the values in force), never on raw params.yaml keys.

    * ``train.json`` holds only the keys that change a trained model (not :data:`TRAIN_RUNTIME_KEYS`);
    * ``methods/<id>.json`` holds the method's Params in force (every key, its defaults included) and
      ``trained``: whether ``train.methods``
      lists it, so editing the list re-runs only the stages of the methods it adds or removes;
    * ``seeds/<id>-<seed>.json`` holds one seed stage's method and seed and ``trained`` (the method is
      trained and the seed is among its :meth:`SeedsParams.extra_seeds`): adding a seed re-runs only
      its own stages; ``seeds`` is in no other file, so the earlier seeds' outputs stay current;
    * ``ablations/variants/<name>.json`` holds the variant, the merged block of its method and
      ``enabled``: a variant re-runs when its own values change, not when the main method's
      ``trained`` flag does.

    The profile's name is in every file because outputs record it: switching profiles re-runs
    every stage.
    """
    dumped = params.model_dump(mode="json")

    def entry(value, **extra):
        return {"profile": params.profile, "value": value, **extra}

    files: dict[str, Any] = {f"{k}.json": entry(dumped[k]) for k in RESOLVED_SECTIONS}
    files["train.json"] = entry({k: v for k, v in dumped["train"].items() if k not in TRAIN_RUNTIME_KEYS})
    for mid in sorted(params.trained_ids):
        files[f"methods/{mid}.json"] = entry(params.method_params(mid).model_dump(mode="json"),
                                             trained=mid in params.train.methods)
    enabled = bool(params.ablations.get("enabled", False))
    for name, spec in sorted((params.ablations.get("variants") or {}).items()):
        from .methods import get_method

        block = get_method(spec["method"]).Params(**deep_merge(params.method_block(spec["method"]), spec.get("set") or {}))
        files[f"ablations/variants/{name}.json"] = entry(block.model_dump(mode="json"), method=spec["method"],
                                                         set=spec.get("set") or {}, enabled=enabled)
    for mid in sorted(params.methods):
        extra = params.seeds.extra_seeds(mid)
        for s in params.seeds.pool:
            files[f"seeds/{mid}-{s}.json"] = entry({"method": mid, "seed": s},
                                                   trained=mid in params.train.methods and s in extra)
    return files


def shadowed_edits(raw: dict, previous: dict, profile: str) -> list[str]:
    """Leaf keys of the sections whose value differs from ``previous`` (the raw params of the last
    run, on the same profile) while ``profiles.<profile>`` sets the same key to the same value as
    then: such an edit would not take effect. A profile switch, or an edit made together with the
    profile's own key, is not refused."""
    if previous.get("profile", profile) != profile:
        return []
    overrides = (raw.get("profiles") or {}).get(profile) or {}
    prev_overrides = (previous.get("profiles") or {}).get(profile) or {}
    out: list[str] = []
    missing = object()

    def walk(cur, prev, over, prev_over, path):
        if isinstance(over, dict) and isinstance(cur, dict):
            for k in over:
                if k in cur:
                    walk(cur[k], prev.get(k, missing) if isinstance(prev, dict) else missing, over[k],
                         prev_over.get(k, missing) if isinstance(prev_over, dict) else missing, path + [str(k)])
        elif prev is not missing and cur != prev and over == prev_over:
            out.append(".".join(path))

    for section, over in overrides.items():
        if section in raw and section in previous:
            walk(raw[section], previous[section], over, prev_overrides.get(section, missing), [section])
    return out


def write_resolved(params: Params, out_dir: str | os.PathLike = RESOLVED_DIR, extra: dict | None = None) -> int:
    """Write :func:`resolved_files` (and ``extra``, more ``{path: content}``) under ``out_dir``,
    replaced as a whole, atomically. Returns the count."""
    import json

    from .io import atomic_path

    files = {**resolved_files(params), **(extra or {})}
    with atomic_path(Path(out_dir), is_dir=True) as tmp:
        for rel, content in files.items():
            f = Path(tmp) / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return len(files)
