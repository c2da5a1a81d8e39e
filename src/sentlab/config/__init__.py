"""Typed params: ``params.yaml`` (the values in force) validated before any stage does work.

``params.yaml`` holds every value a run uses; ``sentlab profile NAME`` writes it from the profile files
(``profiles/quick.yaml`` and the overrides of ``profiles/<name>.yaml``, :mod:`sentlab.stages.profiles`), and a
researcher edits it directly (``dvc exp run -S methods.moco.lr=1e-5``). Its sections::

    profile: quick            # the profile the values came from (recorded with every output)
    seed: 42
    model: {...}              # backbone
    prepare: {...}            # stage sections
    annotate: {...}
    evaluate: {...}
    train: {...}              # the method-agnostic loop (what changes a trained model)
    runtime: {...}            # how a training runs, never what it computes (no stage declares it)
    methods: {simcse: {}, paser: {...}, ...}   # one line per method: what differs from its Params defaults
    methods_from: {paser_sup: {from: paser, ...}}  # methods that start from another's trained model
    ablations: {enabled: ..., variants: {...}}     # one train + evaluate stage per variant
    seeds: {pool: [...], count: 1, per_method: {...}}   # more seeds per method

The stage list (``models.yaml``, :mod:`sentlab.stages.stage_list`) is made from it; a stage reads only the
keys it declares (:mod:`sentlab.config.stage_params`). An unknown key or a bad value raises
:class:`~sentlab.errors.SentlabError` naming the key and the allowed values. This module is the schema and imports no
method: a method's line (``methods.<id>``) and the ablation variants are checked against the method's own ``Params`` by
:mod:`sentlab.methods.blocks`.

The package's modules: this one (:class:`Params`, :func:`validate`, :func:`load_params`: the schema);
:mod:`.sections` (the models of each section: ``train``, ``evaluate``, ...); :mod:`.profile_files` (the profile files
read, a profile's ``extends`` chain merged); :mod:`.stage_params` (the keys one stage declares in dvc.yaml, and
nothing else, as it reads them); :mod:`.yaml_files` (YAML read and merged). Writing params.yaml and the stage list from
a profile is the pipeline wing's (:mod:`sentlab.stages`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, Field, ValidationError, model_validator

from ..errors import SentlabError
from .sections import (RUNTIME_TRAIN_KEYS, AnnotateParams, EvaluateParams, GlueParams,  # noqa: F401
                            HardSubsetParams, ModelParams, PrepareParams, RetrievalParams, RuntimeParams,
                            SeedsParams, Strict, TrainParams, TransferParams, WhiteningParams)
from .yaml_files import read_yaml
from .ablations import AblationVariant, Ablations  # noqa: F401

# The profiles this repository ships (profiles/*.yaml); any other file there is a profile too
# (:func:`sentlab.config.profile_files.profile_names` lists them): the tests check these.
PROFILES = ("quick", "smoke", "paper", "paper-lite")


class Params(Strict):
    profile: str = Field("quick", pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$",
                         description="the profile the values came from: profiles/<profile>.yaml")
    seed: int = 42
    model: ModelParams = ModelParams()
    prepare: PrepareParams = PrepareParams()
    annotate: AnnotateParams = AnnotateParams()
    evaluate: EvaluateParams = EvaluateParams()
    transfer: TransferParams = TransferParams()
    glue: GlueParams = GlueParams()
    retrieval: RetrievalParams = RetrievalParams()
    train: TrainParams = TrainParams()
    methods: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="one line per method: the keys that differ from its Params defaults")
    methods_from: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="methods that start from another method's trained model: "
                                          "{<id>: {from: <that method>, <keys as in methods>}}")
    ablations: Ablations = Field(
        default_factory=Ablations, description="the ablation variants: {enabled, variants: {<name>: {method, set}}}")
    seeds: SeedsParams = SeedsParams()
    runtime: RuntimeParams = RuntimeParams()

    @model_validator(mode="before")
    @classmethod
    def _runtime_keys_in_runtime(cls, data):
        train = data.get("train") if isinstance(data, dict) else None
        moved = sorted(set(train) & set(RUNTIME_TRAIN_KEYS)) if isinstance(train, dict) else []
        if moved:
            raise ValueError(f"`train.{moved[0]}` belongs to the `runtime` section (how a training runs, not what it "
                             f"computes: no stage declares it); move {', '.join(f'`{k}`' for k in moved)} to "
                             f"`runtime:`")
        runtime = data.get("runtime") if isinstance(data, dict) else None
        if isinstance(runtime, dict) and "num_threads" in runtime:
            raise ValueError("`runtime.num_threads` moved to `train.num_threads`: a CPU training's numbers depend on "
                             "its thread count (PyTorch splits reductions by thread), so the train stages declare it; "
                             "move the line to `train:` (a changed count re-runs the trainings)")
        return data

    @model_validator(mode="after")
    def _runtime_into_train(self):
        """The loop reads one train block: ``train`` with the ``runtime`` values in."""
        given = self.runtime.model_dump(include=self.runtime.model_fields_set & set(RUNTIME_TRAIN_KEYS))
        if given:
            self.__dict__["train"] = self.train.model_copy(update=given)
        return self

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
        no_stage = sorted(set(self.seeds.per_method) - set(self.trained_ids))
        if no_stage:
            raise ValueError(f"seeds.per_method names {no_stage}, which are no method line (`methods` or "
                             f"`methods_from`); name a line of either")
        # a methods_from line's seed s starts from its `from` method's seed s (models/<from>-s<s>)
        short = [f"{m} trains {self.seeds.count_for(m)} seeds, {b['from']} {self.seeds.count_for(b['from'])}"
                 for m, b in self.methods_from.items() if m in self.train.methods
                 and self.seeds.count_for(m) > self.seeds.count_for(b["from"])]
        if short:
            raise ValueError(f"seeds: {'; '.join(short)}: each seed of a `methods_from` line starts from the same "
                             f"seed of the method it starts from; give that method at least as many seeds "
                             f"(seeds.per_method) or the line fewer")
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
        """The params.yaml line of ``method_id`` (``from`` of ``methods_from`` left out): what differs from its
        defaults."""
        if method_id in self.methods_from:
            return {k: v for k, v in (self.methods_from[method_id] or {}).items() if k != "from"}
        return dict(self.methods.get(method_id) or {})


def format_validation(e: ValidationError, model: type[BaseModel], prefix: str = "",
                       source: str = "params.yaml") -> str:
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
        elif get_origin(cur) is dict:   # a mapping of models (ablations.variants.<name>): the key names one
            cur = get_args(cur)[1]
        else:
            return []
    if isinstance(cur, type) and issubclass(cur, BaseModel):
        return list(cur.model_fields)
    return []


def validate(raw: dict, source: str = "params.yaml") -> Params:
    """Validate a raw params mapping (the profile overrides already merged) against the schema: its sections' keys and
    values. The methods' blocks are the methods' business (:func:`sentlab.methods.blocks.validate_params` checks them
    too)."""
    if not isinstance(raw, dict):
        raise SentlabError(f"{source} must be a YAML mapping of sections (prepare, train, ...); "
                           f"got {type(raw).__name__}.")
    try:
        params = Params(**raw)
    except ValidationError as e:
        raise SentlabError(format_validation(e, Params, source=source)) from None
    return params


def load_params(path: str | os.PathLike = "params.yaml", profile: str | None = None) -> Params:
    """The values in force (``path``), validated against the schema (:func:`sentlab.methods.blocks.load_checked`
    checks the methods' blocks too); with ``profile``, that profile's values from the
    profile files beside ``path`` instead (:func:`sentlab.config.profile_files.profile_values`). Stages read their
    declared keys only (:func:`sentlab.config.stage_params.stage_params`); this is for tools and tests."""
    if profile is not None:
        from .profile_files import profile_values

        return validate(profile_values(profile, Path(path).parent / "profiles"), source=f"profile {profile}")
    return validate(read_yaml(path), source=str(path))
