"""Typed params: ``params.yaml`` validated before any stage does work.

Layout of ``params.yaml``::

    profile: quick            # which profile is in force (``make repro PROFILE=...``)
    seed: 42
    model: {...}              # backbone
    prepare: {...}            # stage sections, one per DVC stage
    annotate: {...}
    evaluate: {...}
    train: {...}              # the method-agnostic loop
    methods: {simcse: {...}, ptbert: {...}, ...}   # one block per method, validated by
                                                   # the method's own ``Params`` model
    stage_lists: {...}        # which DVC stages exist (dvc.yaml's foreach reads these)
    profiles:                 # each profile's values in one place: overrides on top of
      quick: {}               # the sections above (quick = the sections as written)
      smoke: {...}
      paper: {...}

``load_params`` merges the active profile's overrides into the sections and
validates the result. An unknown key or a bad value raises
:class:`~sentlab.errors.SentlabError` naming the key and the allowed values.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import SentlabError

PROFILES = ("quick", "smoke", "paper")
POOLINGS = ("cls", "mean", "first_last")


class Strict(BaseModel):
    """Base for every params section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=False, protected_namespaces=())


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
    rake_max_words: int = Field(4, ge=1, description="longest RAKE phrase, in words")


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
    precision: Literal["fp32", "bf16"] = "fp32"
    max_length: Optional[int] = Field(None, gt=0, description="None: the model's own maximum")
    diagnostics: bool = True
    max_pairs: Optional[int] = Field(None, gt=0, description="None: every pair; else a seeded sample per task (smoke runs; labelled)")
    hard_subset: HardSubsetParams = HardSubsetParams()
    whitening: WhiteningParams = WhiteningParams()


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
    temperature: float = Field(0.05, gt=0)
    eval_every: int = Field(125, gt=0)
    checkpoint_every: Optional[int] = Field(None, gt=0, description="None: at every dev evaluation")
    dev_max_pairs: Optional[int] = Field(None, gt=0, description="None: all 1500 STS-B dev pairs")
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    length_bucketing: bool = False
    device: Literal["auto", "cpu", "cuda"] = "auto"
    num_threads: Optional[int] = Field(None, gt=0)


class StageLists(Strict):
    train: list[str] = Field(default_factory=list, description="train stages that need only the corpus")
    train_annotated: list[str] = Field(default_factory=list, description="train stages that also read data/annotations")
    baselines: list[str] = Field(default_factory=lambda: ["cls", "mean", "first_last"])


class Params(Strict):
    profile: Literal["quick", "smoke", "paper"] = "quick"
    seed: int = 42
    model: ModelParams = ModelParams()
    prepare: PrepareParams = PrepareParams()
    annotate: AnnotateParams = AnnotateParams()
    evaluate: EvaluateParams = EvaluateParams()
    train: TrainParams = TrainParams()
    methods: dict[str, dict[str, Any]] = Field(default_factory=dict)
    stage_lists: StageLists = StageLists()
    ablations: dict[str, Any] = Field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_lists(self):
        stages = self.stage_lists.train + self.stage_lists.train_annotated
        unknown = [m for m in self.train.methods if m not in stages]
        if unknown:
            raise ValueError(
                f"train.methods names {unknown}, which have no train stage; "
                f"allowed: {stages} (stage_lists.train + stage_lists.train_annotated)"
            )
        return self

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
        raw = self.methods.get(method_id, {}) or {}
        try:
            return cls.Params(**raw)
        except ValidationError as e:
            raise SentlabError(_format_validation(e, cls.Params, prefix=f"methods.{method_id}")) from None


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
    for mid in list(params.stage_lists.train) + list(params.stage_lists.train_annotated) + list(params.methods):
        if mid not in known:
            raise SentlabError(
                f"Invalid params in {source}: method `{mid}` (in stage_lists.train or methods) is not a registered method; "
                f"allowed: {', '.join(sorted(known))}. Run `sentlab methods` for the list."
            )
    for mid in params.methods:
        params.method_params(mid)
    return params


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
    for forbidden in ("profile", "profiles", "stage_lists"):
        if forbidden in overrides:
            raise SentlabError(
                f"Invalid params in {source}: `profiles.{profile}.{forbidden}` cannot be overridden by a profile "
                f"(dvc.yaml's stage lists are fixed across profiles). Remove that key."
            )
    merged = deep_merge({k: v for k, v in raw.items()}, overrides)
    merged["profile"] = profile
    return merged


def load_params(path: str | os.PathLike = "params.yaml", profile: str | None = None) -> Params:
    """Read, merge the active profile, validate. The one entry point stages use."""
    raw = read_yaml(path)
    return validate(resolve_profile(raw, profile, source=str(path)), source=str(path))


def set_profile(path: str | os.PathLike, profile: str) -> bool:
    """Point ``params.yaml``'s ``profile:`` line at ``profile`` (comments preserved).

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
    if m.group(1) == profile:
        load_params(path)
        return False
    new = text[: m.start()] + f"profile: {profile}{m.group(2)}" + text[m.end():]
    validate(resolve_profile(yaml.safe_load(new), profile, source=str(path)), source=str(path))
    from .io import write_text

    write_text(path, new)
    return True


# --- the active profile's values, one file per params key (DVC dependencies) ----------------
RESOLVED_DIR = "data/params"
RESOLVED_SECTIONS = ("seed", "model", "prepare", "annotate", "evaluate", "train", "ablations")


def resolved_files(params: Params) -> dict[str, Any]:
    """``{relative path: content}`` of the files :func:`write_resolved` writes.

    One JSON file per params key a stage declares (``seed.json``, ``train.json``,
    ``methods/<id>.json``, ``ablations/variants/<name>.json`` …), each holding the
    active profile's name and that key's value *after* the profile is merged. Stages
    depend on these files instead of on the whole ``profiles`` block, so editing
    another profile's block (or a key a stage does not read) re-runs nothing. The
    profile's name is in every file because outputs record it (sentlab.json, the
    report's stale check): switching profiles re-runs every stage.
    """
    dumped = params.model_dump(mode="json")

    def entry(value):
        return {"profile": params.profile, "value": value}

    files: dict[str, Any] = {f"{k}.json": entry(dumped[k]) for k in RESOLVED_SECTIONS}
    ids = set(params.methods) | set(params.stage_lists.train) | set(params.stage_lists.train_annotated)
    for mid in sorted(ids):
        files[f"methods/{mid}.json"] = entry(params.methods.get(mid) or {})
    files["ablations/enabled.json"] = entry(bool(params.ablations.get("enabled", False)))
    for name, spec in sorted((params.ablations.get("variants") or {}).items()):
        files[f"ablations/variants/{name}.json"] = entry(spec)
    return files


def write_resolved(params: Params, out_dir: str | os.PathLike = RESOLVED_DIR) -> int:
    """Write :func:`resolved_files` under ``out_dir`` (replaced as a whole, atomically). Returns the count."""
    import json

    from .io import atomic_path

    files = resolved_files(params)
    with atomic_path(Path(out_dir), is_dir=True) as tmp:
        for rel, content in files.items():
            f = Path(tmp) / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return len(files)
