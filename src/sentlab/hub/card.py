"""The model card of an exported model: ``README.md`` in the Hugging Face format.

YAML front matter (``library_name``, ``tags``, ``base_model`` and ``model-index`` with the seven STS
results, so the Hub shows them), then: the method and its paper, how to load it, the seven STS
results + Avg (with seeds and confidence intervals when the metrics record them), the params in
force, the environment fingerprint (when recorded), the command that reproduces it and the citation.
The metadata is huggingface_hub's (``ModelCardData`` with an ``EvalResult`` per task); the paper and its
BibTeX are the method class's ``paper`` and ``citation`` (:class:`sentlab.methods.base.Method`).
Everything comes from the pipeline's own outputs (``sentlab.json``, ``reports/metrics/<m>.json``,
params.yaml's values in force); nothing is typed in by hand.
"""

from __future__ import annotations

import json
import statistics
from typing import Any, Optional

import yaml

from ..config.tasks import AVG, LABELS, STS_TASKS as TASKS   # the seven STS tasks, as declared
from ..export.st import needs_sentlab


def _paper(method_id: str) -> tuple[str, Optional[str]]:
    """(paper, BibTeX or None) of a registered method: its class's ``paper`` and ``citation`` (a new method
    brings its own; this module lists none)."""
    from ..methods import registered

    cls = registered().get(method_id)
    paper = getattr(cls, "paper", "") if cls is not None else ""
    return (paper or f"method `{method_id}` (see its module docstring in sentlab)",
            getattr(cls, "citation", None) if cls is not None else None)


def _front_matter(name: str, info: dict, metrics: dict, backbone: str) -> str:
    """The YAML metadata, by huggingface_hub's :class:`~huggingface_hub.ModelCardData`: ``model-index`` holds one
    :class:`~huggingface_hub.EvalResult` per STS task with a number."""
    from huggingface_hub import EvalResult, ModelCardData

    results = [EvalResult(task_type="sentence-similarity", task_name="Semantic Textual Similarity",
                          dataset_type=task, dataset_name=task, dataset_split="test", metric_type="spearman_cosine",
                          metric_value=round(float(metrics[task]), 2),
                          metric_name="Spearman correlation of cosine similarity (x100)")
               for task in TASKS if isinstance(metrics.get(task), (int, float))]
    data = ModelCardData(library_name="sentence-transformers", pipeline_tag="sentence-similarity",
                         tags=["sentence-transformers", "sentence-similarity", "feature-extraction", "sentlab",
                               str(info.get("method", name))],
                         base_model=backbone, language=["en"], model_name=name, eval_results=results)
    return "---\n" + data.to_yaml() + "\n---\n"


def _usage(name: str, info: dict) -> str:
    extra = needs_sentlab(info)
    lines = ["```python", "from sentence_transformers import SentenceTransformer", ""]
    if extra:
        lines.append(f'model = SentenceTransformer("exports/{name}", trust_remote_code=True)'
                     '  # needs `pip install sentlab`')
    else:
        lines.append(f'model = SentenceTransformer("exports/{name}")')
    lines.append('emb = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])')
    lines.append("print(model.similarity(emb, emb))")
    for ch in info.get("channels") or {}:
        lines.append(f'emb_{ch} = model.encode(["A man is playing a guitar."], channel="{ch}")  # the {ch} channel')
    lines.append("```")
    text = "\n".join(lines)
    pooling = info.get("pooling", "cls")
    from ..config.poolings import POOLINGS

    how = POOLINGS[pooling].label if pooling in POOLINGS else pooling
    notes = [f"Pooling: `{pooling}`, {how}."]
    if info.get("template"):
        notes.append(f"Template: `{info['template']}` (its part before `{{sentence}}` is the default prompt in "
                     f"`config_sentence_transformers.json`; sentlab's `TemplateTransformer` appends the rest).")
    if info.get("channels"):
        notes.append("Channels (slices of the embedding, `encode(..., channel=NAME)`): "
                     + ", ".join(f"`{k}` = dims [{v[0]}, {v[1]})" for k, v in info["channels"].items()) + ".")
    if extra:
        notes.append("This pooling has no sentence-transformers module, so the folder uses sentlab's "
                     "(`sentlab.export.modules`): `pip install sentlab` and pass `trust_remote_code=True`, which "
                     "sentence-transformers >= 6 requires to import a module class from another package "
                     "(no code is downloaded).")
    return text + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def _fmt(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else ("–" if v is None else str(v))


def _ci_cell(ci: Any) -> str:
    """A confidence interval as recorded: ``[lo, hi]``, ``{"lo"/"low": .., "hi"/"high": ..}`` or as given."""
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"
    if isinstance(ci, dict):
        lo, hi = ci.get("lo", ci.get("low")), ci.get("hi", ci.get("high"))
        if lo is not None and hi is not None:
            return f"[{_fmt(lo)}, {_fmt(hi)}]"
    return _fmt(ci) if not isinstance(ci, (dict, list)) else json.dumps(ci)


def _results(metrics: dict) -> str:
    keys = [*TASKS, AVG]
    head = "| row | " + " | ".join(LABELS.get(k, k) for k in keys) + " |"
    rows = [head, "|" + "---|" * (len(keys) + 1),
            f"| {metrics.get('model', 'model')} | " + " | ".join(_fmt(metrics.get(k)) for k in keys) + " |"]
    for row, res in (metrics.get("extra_rows") or {}).items():
        rows.append(f"| {row} | " + " | ".join(_fmt(res.get(k)) for k in keys) + " |")
    # the evaluate stage's percentile-bootstrap interval of this model (reports/metrics/<m>.json `ci95`)
    ci = metrics.get("ci95", metrics.get("ci"))
    if isinstance(ci, dict):
        rows.append("| 95% CI | " + " | ".join(_ci_cell(ci[k]) if k in ci else "–" for k in keys) + " |")
    seeds = metrics.get("seed_rows") or {}
    for row, res in seeds.items():
        rows.append(f"| {row} | " + " | ".join(_fmt(res.get(k)) for k in keys) + " |")
    if seeds:
        runs = [metrics, *seeds.values()]
        cells = []
        for k in keys:
            vals = [r[k] for r in runs if isinstance(r.get(k), (int, float))]
            cells.append(f"{statistics.mean(vals):.2f} ± {statistics.stdev(vals):.2f}" if len(vals) > 1 else "–")
        rows.append(f"| mean ± std ({len(runs)} seeds) | " + " | ".join(cells) + " |")
    out = "\n".join(rows) + "\n\nSpearman correlation × 100 between the cosine of the two sentence embeddings and " \
                            "the gold score (SentEval's \"all\" setting for STS12–16, the test splits of " \
                            "STS-B and SICK-R: the protocol of sentlab's docs/evaluation.md)."
    dev = metrics.get("STSBenchmark-dev", metrics.get("stsb_dev"))
    if dev is not None:
        out += f" STS-B dev: {_fmt(dev)}."
    if isinstance(ci, dict):
        out += " 95% CI: percentile bootstrap over the test pairs (the evaluate stage's `ci95`)."
    if seeds:
        out += (f"\n\nSeeds: this model and {len(seeds)} more run(s) of the same params with other seeds "
                f"({', '.join(f'`{r}`' for r in seeds)}, under `models/`); mean ± std (sample std) over the "
                f"{len(seeds) + 1}.")
    if ci is not None and not isinstance(ci, dict):
        out += f"\n\nConfidence intervals: `{json.dumps(ci)}`."
    if metrics.get("numerics"):
        out += f" Embeddings computed on {metrics.get('device', '?')}, {metrics['numerics']}."
    return out + "\n"


def _yaml_block(obj: Any) -> str:
    return "```yaml\n" + yaml.safe_dump(obj, sort_keys=False, allow_unicode=True).rstrip() + "\n```\n"


def model_card(name: str, info: dict, metrics: dict, params_in_force: dict, train_params: Optional[dict],
               profile: str, backbone: str, stage: str, summary: str = "") -> str:
    """The ``README.md`` text of model ``name``.

    ``info``: its ``sentlab.json``; ``metrics``: ``reports/metrics/<name>.json``; ``params_in_force``:
    the method's Params the model trained with; ``train_params``: params.yaml ``train`` in force;
    ``stage``: its DVC train stage (``train@simcse``); ``summary``: the method's one-line summary.
    """
    method_id = str(info.get("method", name))
    paper, bibtex = _paper(method_id)
    fingerprint = info.get("fingerprint") or metrics.get("fingerprint")
    parts = [_front_matter(name, info, metrics, backbone),
             f"# sentlab `{name}`\n",
             f"A sentence encoder trained by sentlab with **{method_id}**"
             + (f" ({summary})" if summary else "") + f", from `{backbone}`, profile `{profile}`.\n",
             f"Paper: {paper}.\n",
             "## Usage\n", _usage(name, info),
             "## Results (docs/evaluation.md protocol)\n", _results(metrics),
             "## Params in force\n",
             f"The method's params (params.yaml `methods.{method_id}` over its defaults, with the model's variant "
             f"if any):\n",
             _yaml_block(params_in_force)]
    if train_params:
        parts += ["Training loop (params.yaml `train`):\n", _yaml_block(train_params)]
    run = {k: info[k] for k in ("run_key", "best_stsb_dev", "best_step", "steps", "resumed_from_step") if k in info}
    if run:
        parts += ["Training run (`sentlab.json`):\n", _yaml_block(run)]
    if fingerprint:
        parts += ["## Environment\n", _yaml_block(fingerprint)]
    parts += ["## Reproduce\n",
              "```bash\n"
              f"make repro PROFILE={profile}          # the whole pipeline, or only this model:\n"
              f"dvc repro {stage} && dvc repro export\n"
              f"sentlab evaluate --model exports/{name}   # the seven STS numbers again\n"
              "```\n",
              "## Citation\n"]
    parts.append("```bibtex\n" + bibtex + "\n```\n" if bibtex else f"{paper}: no published BibTeX entry recorded.\n")
    return "\n".join(parts)
