"""What one paper table needs: its stages, so a campaign can run one table at a time (issue #54 §3).

A paper table (:mod:`sentlab.report.paper_tables`) names, row by row, the sentlab models that reproduce it. Its
**scope** in the profile in force is what fills those rows: the model lines of the stage list whose name is a row's
model (every seed of it: ``simcse`` covers ``simcse-s43``…), the backbone baselines its rows name (``base-cls``),
and the evaluation suites that fill it (the transfer suite fills L2P-CSR Table 2, GLUE its Table 4, retrieval
PaSeR's Table 3). :func:`table_stages` turns a scope into DVC stage names — the last stage of each chain
(``evaluate@<model>``, ``evaluate_baseline@<b>``, the suite's stage); ``dvc repro`` of those runs what they need
(sources, prepare, annotate, the trainings) and nothing else. ``sentlab run --table ID`` runs them, then builds the
report from what exists; widening the scope later (another table, or the whole profile) re-runs nothing already
done: DVC's lock and run cache hold it.

:func:`sentlab.campaign.plan.plan` costs each table through the same :func:`table_scope`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SentlabError

# The suite whose stages fill a paper table (the other tables are filled by the STS evaluation of each model).
SUITE_TABLE = {"transfer": "l2p_table2", "glue": "l2p_table4", "retrieval": "paser_table3"}


@dataclass
class Scope:
    models: list[str] = field(default_factory=list)       # stage-list model names (seeds included)
    baselines: list[str] = field(default_factory=list)    # evaluate.baselines entries (``cls``, ``whitening``…)
    suites: list[str] = field(default_factory=list)       # suite stages (``transfer@simcse``…)


def base_name(model: str) -> str:
    """A model line's name without its seed suffix: ``simcse-s43`` -> ``simcse``
    (:func:`sentlab.config.models.split_seed`)."""
    from ..config.models import split_seed

    return split_seed(model)[0]


def table_scope(spec, lists: dict) -> Scope:
    """The stage-list entries (``stage_list_for``'s ``lists``) that fill the rows of the table ``spec``."""
    from ..stages.stage_list import suite_items, suite_stage

    rows = {c.split("/")[0] for r in spec.rows for c in r.models}
    return Scope(models=[n for n in lists["models"] if base_name(n) in rows],
                 baselines=[b for b in lists["baselines"] if f"base-{b}" in rows],
                 suites=[suite_stage(suite, m) for suite, m in suite_items(lists)
                         if SUITE_TABLE.get(suite) == spec.id and m in rows])


def tables_by_id(backbone: str) -> dict:
    from ..report.paper_tables import all_tables

    return {s.id: s for s in all_tables(backbone)}


def table_stages(params, table_ids: list[str]) -> list[str]:
    """The DVC stages (last of each chain) that fill the tables ``table_ids`` in the profile in force; an unknown id
    or a table the profile fills no row of stops with one paragraph."""
    from ..stages.stage_list import stage_list_for

    specs = tables_by_id(params.model.backbone)
    lists = stage_list_for(params)
    stages: list[str] = []
    for tid in table_ids:
        if tid not in specs:
            raise SentlabError(f"--table {tid}: no such paper table. The tables are: {', '.join(specs)} "
                               f"(docs/reproducing.md#the-tables; `sentlab plan` costs each).")
        s = table_scope(specs[tid], lists)
        found = ([f"evaluate@{m}" for m in s.models] + [f"evaluate_baseline@{b}" for b in s.baselines]
                 + s.suites)
        if not found:
            raise SentlabError(f"--table {tid}: the profile in force (params.yaml, profile `{params.profile}`) has "
                               f"no stage that fills a row of {specs[tid].source}: none of its rows' models is "
                               f"trained, evaluated as a baseline or in a suite here. Switch profile "
                               f"(`sentlab profile paper-lite`) or add the method lines to your profile file.")
        stages += [st for st in found if st not in stages]
    return stages
