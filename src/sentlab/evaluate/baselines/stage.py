"""The baseline stages: the backbone with a pooling, BERT-whitening or BERT-flow, or averaged GloVe vectors ->
reports/metrics/base-<kind>.json.

``pipeline/evaluate_baseline.py KIND`` (dvc.yaml ``evaluate_baseline@KIND``). Nothing here imports the
training code, so an edit of it does not re-run these stages (:mod:`sentlab.evaluate.sts.trained`).
"""

from __future__ import annotations

from pathlib import Path

from ...config.sections import BASELINES
from ...config.poolings import POOLINGS

# evaluate.baselines (config.sections.BASELINES: the declared backbone poolings, then these): one evaluate_baseline
# stage each (`sentlab methods` lists them after the trained methods)
DESCRIPTIONS = {
    **{name: p.baseline for name, p in POOLINGS.items() if p.baseline},
    "whitening": "BERT-whitening (Su et al. 2021): a linear map fitted on embeddings (evaluate.whitening)",
    "bert_flow": "BERT-flow (Li et al. 2020): a Glow-style flow fitted on the STS or NLI sentences' embeddings "
                 "(evaluate.bert_flow)",
    "glove": "averaged GloVe vectors, glove.840B.300d as SentEval uses (no backbone; needs the vectors)",
}
FITTED = ("whitening", "bert_flow")   # post-processing baselines: evaluate.<name> holds the pooling they are fitted on
FIGURES = Path("reports/figures")


def run_baseline_stage(name: str) -> None:
    """The stage ``evaluate_baseline@<name>`` (in the repository's working directory)."""
    from ...data.sts import read_sts_table
    from ...errors import SentlabError
    from ..sts.cache import embedding_cache
    from ...config.stage_params import stage_params
    from ..sts.figures import note_figure

    if name not in BASELINES:
        raise SentlabError(f"Unknown baseline {name!r} in evaluate.baselines; allowed: {', '.join(BASELINES)}.")
    params = stage_params(f"evaluate_baseline@{name}")
    table = read_sts_table("data/sts/sts.parquet")
    figures = FIGURES if params.evaluate.diagnostics else None
    if not params.evaluate.diagnostics:
        # the stage's declared figure output must exist: say why it has no plot
        note_figure(FIGURES / f"base-{name}_density.png", f"base-{name}", "evaluate.diagnostics is false")
    # one forward pass of the backbone serves every baseline pooling (sentlab.evaluate.sts.cache)
    with embedding_cache(share_poolings=baseline_poolings(params)):
        evaluate_baseline(name, params, table, figures)


def baseline_poolings(params) -> list[str]:
    """The backbone poolings the profile's baseline stages need (the fit poolings of whitening and flow included;
    GloVe uses no backbone)."""
    bases = list(params.evaluate.baselines)
    fit = [getattr(params.evaluate, b).pooling for b in bases if b in FITTED]
    return list(dict.fromkeys([b for b in bases if b not in FITTED and b != "glove"] + fit))


def _glove_encoder(params, table, name):
    from .glove import glove_encoder

    return glove_encoder(params, table, name=name)


def evaluate_baseline(kind: str, params, table, figures) -> None:
    """One baseline stage: the backbone with pooling ``kind``, BERT-whitening, BERT-flow or GloVe -> base-<kind>."""
    from ..sts.runner import evaluate_sts, stage_encoders
    from ..sts.writers import STAGE_WRITERS, StageOutputs, write_all
    from .fitted import flow_encoder, whitening_encoder

    name = f"base-{kind}"
    fitted = {"whitening": ("whitening", whitening_encoder), "bert_flow": ("flow", flow_encoder),
              "glove": ("word_vectors", _glove_encoder)}   # kind -> (key of what it recorded, its encoder's maker)
    if kind in fitted:
        key, make = fitted[kind]
        enc, embeddings, info = make(params, table, name=name)
        source = info["name"] if kind == "glove" else params.model.backbone   # GloVe: its vector set
        result = evaluate_sts({name: enc}, table, params, model=source, kind="baseline", extra_params={key: info},
                              extra_metrics={key: info}, embeddings=embeddings, figures_dir=figures)
    else:
        result = evaluate_sts(stage_encoders(params.model.backbone, kind, params, name), table, params,
                              model=params.model.backbone, kind="baseline", figures_dir=figures)
    write_all(result, StageOutputs.of(name), STAGE_WRITERS)   # sentlab.evaluate.sts.writers
