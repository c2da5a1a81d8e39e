"""What a model is: one typed description (:class:`ModelSpec`), the entries of ``models.yaml``.

A model of the pipeline (``models/<name>``, ``reports/metrics/<name>.json``) is a method line of params.yaml trained
with one seed, or an ablation variant of one. Its description::

    name       simcse-s43          models/<name>; <line>-s<seed> for another seed (:func:`seed_name`)
    method     simcse              the registered method it trains
    seed       43
    line       methods.simcse      the params.yaml key of its method's line (methods.<m> or methods_from.<m>)
    own        methods.simcse      the key that makes it itself: the same, or ablations.variants.<v>
    variant    null                the ablation variant, when it is one
    init       data/sources/model.json   what its weights start from: the backbone's files or models/<other>
    teachers   []                  the other models its training reads (RankCSE's: the method's block declares
                                   them, ``Params.model_deps``)

It is built once from the profile (:func:`sentlab.stages.stage_list.models_for`, which asks the methods for their
teachers), written as ``models.yaml`` (``sentlab stages``), which dvc.yaml's loops read, and read back by every stage
and command through :func:`load_models`. Its stages are :func:`train_stage` and :func:`evaluate_stage`; dvc.yaml has
one ``train`` group for every model: its deps name :data:`TEACHER_SLOTS` teacher slots (``reads``: the teachers,
then the model's ``init`` again in the slots left, a path the stage depends on already, which DVC accepts), since DVC
cannot put a list into ``deps``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ..errors import SentlabError

STAGE_LIST = "models.yaml"
BACKBONE_DEP = "data/sources/model.json"
# dvc.yaml's `train` group names this many teacher slots (`- ${item.reads[0]}`, ...): a model reads at most this
# many other models (tests/test_model_spec.py checks dvc.yaml against it)
TEACHER_SLOTS = 2

_SEED_NAME = re.compile(r"^(?P<line>.+)-s(?P<seed>\d+)$")


def seed_name(line: str, seed: int) -> str:
    """The model of line ``line`` (a method id) trained with another seed: ``<line>-s<seed>``."""
    return f"{line}-s{seed}"


def split_seed(name: str) -> tuple[str, Optional[int]]:
    """:func:`seed_name` read back: ``simcse-s43`` -> ``("simcse", 43)``; a name without a seed suffix ->
    ``(name, None)``."""
    m = _SEED_NAME.match(name)
    return (m["line"], int(m["seed"])) if m else (name, None)


def train_stage(name: str) -> str:
    """The dvc.yaml stage that trains model ``name``."""
    return f"train@{name}"


def evaluate_stage(name: str) -> str:
    """The dvc.yaml stage that evaluates model ``name`` on STS."""
    return f"evaluate@{name}"


class ModelSpec(BaseModel):
    """One model of the profile (the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    method: str
    seed: int
    line: str
    own: str
    variant: Optional[str] = None
    init: str = BACKBONE_DEP
    teachers: tuple[str, ...] = ()

    @property
    def train_stage(self) -> str:
        return train_stage(self.name)

    @property
    def evaluate_stage(self) -> str:
        return evaluate_stage(self.name)

    @property
    def group(self) -> str:
        """The model without its seed: the line id, or the variant (the MLflow group of its seeds)."""
        return self.variant or self.line.split(".", 1)[1]

    @property
    def init_model(self) -> Optional[str]:
        """The pipeline model it starts from (``init`` ``models/<x>`` -> ``x``), or None for the backbone."""
        return self.init[len("models/"):] if self.init.startswith("models/") else None

    @model_validator(mode="after")
    def _fits_the_slots(self):
        if len(self.teachers) > TEACHER_SLOTS:   # SentlabError, not ValueError: pydantic lets it through as it is
            raise SentlabError(
                f"{self.own} (model {self.name}) reads {len(self.teachers)} other models "
                f"({', '.join(self.teachers)}); dvc.yaml's `train` group names {TEACHER_SLOTS} teacher slots "
                f"(`- ${{item.reads[i]}}`). Name at most {TEACHER_SLOTS} in the block, or add a slot to dvc.yaml's "
                f"`train` deps and raise sentlab.config.models.TEACHER_SLOTS to match.")
        return self

    @property
    def reads(self) -> list[str]:
        """dvc.yaml's teacher slots: the teachers, then ``init`` (a dep of the stage already) in those left."""
        return [*self.teachers, *[self.init] * (TEACHER_SLOTS - len(self.teachers))]

    def overrides(self, params) -> dict[str, Any]:
        """Its ablation variant's ``set`` (``{}`` for a method line): what it changes of its method's line."""
        return params.ablations.overrides(self.variant) if self.variant else {}

    def entry(self) -> dict[str, Any]:
        """Its ``models.yaml`` entry (the name is the key)."""
        return {**self.model_dump(mode="json", exclude={"name"}), "reads": self.reads}

    @classmethod
    def from_entry(cls, name: str, entry: dict, source: str = STAGE_LIST) -> "ModelSpec":
        try:
            return cls(name=name, **{k: v for k, v in entry.items() if k != "reads"})
        except (ValidationError, TypeError) as e:   # pydantic's message, said as the file's fault
            raise SentlabError(f"{source}: the entry of model `{name}` is not a model description ({e}). The file "
                               f"is generated: run `sentlab stages` to write it again.") from None


def models_of(lists: dict, source: str = STAGE_LIST) -> dict[str, ModelSpec]:
    """The ``models`` of a stage list (models.yaml's content) as descriptions."""
    return {n: ModelSpec.from_entry(n, e, source) for n, e in (lists.get("models") or {}).items()}


def load_models(path: str | os.PathLike = STAGE_LIST) -> dict[str, ModelSpec]:
    """The models of ``models.yaml``, ``name -> ModelSpec``, in its order: what a stage or command reads."""
    from .yaml_files import read_yaml

    path = Path(path)
    if not path.is_file():
        raise SentlabError(f"{path} not found: run `sentlab stages` (make repro does) to write the stage list.")
    return models_of(read_yaml(path) or {}, str(path))
