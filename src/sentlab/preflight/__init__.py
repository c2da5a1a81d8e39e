"""``sentlab preflight [--profile paper]``: every stage of a profile on a tiny slice, before a GPU day.

The preflight knows no method and patches nothing. In order:

1. **Scratch copy** (:mod:`.scratch`). The workspace's tracked and untracked-not-ignored files are copied to
   a scratch folder; no ``dvc.lock``, ``data/``, ``models/``, ``reports/`` or ``mlflow.db`` of the workspace
   is read or written (``MLFLOW_TRACKING_URI`` points into the scratch folder).
2. **Slice** (:mod:`.slice`). In the copy, ``sentlab profile P`` writes the profile's values to params.yaml,
   the slice is written into params.yaml as plain edits (a small corpus, a few steps, few pairs; each method
   line's own caps, which its Params declare: ``MethodParams.slice_caps``) and the stage list again
   (``sentlab stages``).
3. **Every stage, in order** (:mod:`.stages`): the stages of the copy's dvc.yaml and models.yaml, each after
   what it depends on, a model's readers right after its training (its weights can go then). A ``python
   script.py`` stage runs in a process forked from a server that has imported torch (:mod:`.stage_runner`), with
   ``DVC_STAGE`` set as ``dvc repro`` sets it, so it reads exactly the params it declares.
4. **Probe** (:mod:`.probe`): an observer of the phases the code declares (:mod:`sentlab.runtime.timing`: the stage,
   the training's corpus, plan and optimiser steps, the encoder's passes): seconds per step, seconds per
   encoded sentence, peak RSS and CUDA peak, the stage's exception.
5. **Collect, never stop.** One row per stage: ``ok``; ``failed`` with the one-paragraph error; ``needs asset``
   with the asset and the command that fetches it; ``blocked`` when a stage it depends on did not succeed.
   A missing asset with a stand-in (:mod:`.standins`: SimCSE's NLI triples -> the SICK stand-in; a method
   line's own, e.g. PaSeR's EDA without WordNet) is recorded, the stand-in written into params.yaml and the
   stage run again, so the stages after it are still checked. A backbone that is not here but whose
   architecture is kept (:mod:`sentlab.backbones`) is had as its hub-shaped stand-in in a scratch mirror;
   each training row's ``init`` column says where each module's weights came from.
6. **Projection** (:mod:`.projection`) of the full run from the slice's measures, and the **table**
   (:mod:`.table`): ``preflight.md`` and ``preflight.json`` in ``--out`` (default ``reports/preflight/``
   of the scratch folder), the Markdown on stdout; exit status 0 only when every stage is ok.
"""

from __future__ import annotations

from .run import preflight
from .slice import SLICE, slice_edits, whitening_min_pairs
from .stages import Stage, consumers_first, dvc_stages
from .standins import backbone_standin, classify_asset, standin_for
from .table import Row

__all__ = ["SLICE", "Row", "Stage", "backbone_standin", "classify_asset", "consumers_first",
           "dvc_stages", "preflight", "slice_edits", "standin_for", "whitening_min_pairs"]
