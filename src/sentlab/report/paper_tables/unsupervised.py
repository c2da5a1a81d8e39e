""""Unsupervised methods under one protocol" (issue #41): every unsupervised method sentlab can train, the seven STS
tasks, their Avg and the SentEval transfer average where the profile runs it, mean ± std over the seeds where it
ran several, each method's own paper's Avg beside, with a Δ only on the paper's own backbone (:mod:`..backbones`),
ranked by the reproduced Avg (``TableSpec.rank_by``, :func:`.render.rank`), with the significance marks of every table
(:mod:`..significance`).

The rows come from the method registry (:func:`sentlab.methods.registered`): a method whose ``corpus`` is not
``nli`` is unsupervised, and its model is the one named by its id (``<id>-s<seed>`` are its seed runs). The paper
numbers are each method class's own ``paper_avg`` (:class:`sentlab.methods.base.PaperAvg`); a method without one gets
its row without a paper number (the note says so), so adding a method needs no edit here. A method in
:data:`sentlab.report.paper_numbers.NO_DELTA` shows its paper's number without a Δ, the note saying why.
"""

from __future__ import annotations

from .. import paper_numbers as P
from .spec import STS7, RowSpec, TableSpec

COLUMNS = (*STS7, "Avg", "TransferAvg")
RANK_BY = "Avg"


def unsupervised_methods() -> dict[str, type]:
    """Registered methods that train without labels (``corpus`` other than ``nli``), id -> class."""
    from ...methods import registered

    return {k: cls for k, cls in sorted(registered().items()) if cls.corpus != "nli"}


def _row(method_id: str, cls: type) -> RowSpec:
    reported = cls.paper_avg
    if reported is None:
        return RowSpec(method_id, (method_id,), None, "no paper Avg (its method class declares no paper_avg)",
                       extract="sts_transfer")
    avg, source, backbone = reported
    why = P.NO_DELTA.get(method_id)   # a paper number that cannot come from the recipe the row trains
    return RowSpec(method_id, (method_id,), {"Avg": avg}, f"paper: {source}" + (f"; {why}" if why else ""),
                   extract="sts_transfer", backbone=backbone, delta=why is None)


def table() -> TableSpec:
    rows = tuple(_row(k, cls) for k, cls in unsupervised_methods().items())
    return TableSpec(
        "unsupervised_one_protocol", "Unsupervised methods under one protocol",
        "each method's own paper (its reported Avg of the 7 STS tasks)", COLUMNS, rows,
        paper_setting="BERT-base unless the note says otherwise",
        context=("Every unsupervised method on the same corpus, training loop, evaluator and seeds, ranked by the "
                 "reproduced Avg (mean over the seeds where several ran); rows without numbers follow in "
                 "registry order. Transfer Avg: SentEval's seven tasks (`transfer@<model>` stages, params "
                 "`transfer.models`, on a seeded sample of `transfer.max_examples` per split where set); the "
                 "papers' Avg is the only paper number, so Δ is on Avg alone."),
        main=True, rank_by=RANK_BY, labels=(("Avg", "STS Avg."), ("TransferAvg", "Transfer Avg.")))

