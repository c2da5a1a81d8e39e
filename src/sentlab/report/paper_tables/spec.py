"""What a paper table is: :class:`TableSpec` (columns, rows) and :class:`RowSpec` (the model(s) that
reproduce a row, the paper's values, the settings the row expects); :class:`Resolved`, a row filled
from the metrics. The shared columns and the paper-only row of a system sentlab does not implement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...config.tasks import LABELS as TASK_LABELS, STS_ALL, STS_TASKS as STS7

# the declared tasks' labels (sentlab.config.tasks), then the labels of the derived columns
LABELS = {**TASK_LABELS, "STSBenchmark-dev": "STS-B dev", "Avg": "Avg.", "TransferAvg": "Avg.",
          "QQP_MAP": "QQP MAP", "QQP_MRR@10": "QQP MRR@10",
          "AskUbuntu_MAP": "AskUbuntu MAP", "AskUbuntu_MRR@10": "AskUbuntu MRR@10"}
EVALUATED = "evaluated"
OTHER_SETTINGS = "sentlab runs at other settings (no paper row)"

COLS7 = (*STS7, "Avg")
COLS_HARD = (*STS_ALL, "Avg")
COLS3 = ("STS12-16", *(t for t in STS7 if t not in STS_ALL))   # the mean of STS12-16, then the others
NOT_IMPL = "not implemented in sentlab"


@dataclass(frozen=True)
class RowSpec:
    label: str
    models: tuple[str, ...] = ()          # candidates, first found wins; () = paper-only row
    paper: Optional[dict] = None          # column -> paper value (None: the paper prints none)
    note: str = ""                        # shown in the Note column (why paper-only, caveats)
    section: str = ""
    extract: str = "sts"                  # sts | sts_transfer | hard_subset | hard_full | density | transfer |
                                          # retrieval | glue
    expects: dict = field(default_factory=dict)   # method key -> value (a tuple: any of these) the model needs
    backbone: str = ""                    # the paper numbers' backbone ("": BERT-base; report.backbones)
    delta: bool = True                    # False: the model differs from the paper's run; no Δ (note says how)


@dataclass(frozen=True)
class TableSpec:
    id: str                               # file stem: reports/tables/<id>.{md,csv,tex}
    title: str
    source: str                           # paper + table, e.g. "PT-BERT (ACL 2022) Table 3"
    columns: tuple[str, ...]
    rows: tuple[RowSpec, ...]
    paper_setting: str = "BERT-base"
    context: str = ""
    main: bool = False                    # LaTeX too
    digits: int = 2
    settings: tuple[str, ...] = ()        # method keys each filled row reports as "trained with"
    measure: str = "docs/evaluation.md protocol (Spearman × 100)"
    rank_by: str = ""                     # a column: rows ranked by its reproduced value (``unsupervised.rank``)
    labels: tuple[tuple[str, str], ...] = ()   # (column, header) where this table's header is not :data:`LABELS`'

    def label(self, column: str) -> str:
        return dict(self.labels).get(column) or LABELS.get(column, column)


@dataclass
class Resolved:
    spec: RowSpec
    model: Optional[str] = None           # the sentlab model that filled the row
    status: str = ""                      # EVALUATED or the reason the row has no numbers
    values: dict = field(default_factory=dict)
    backbone: str = ""
    profile: str = ""
    method: dict = field(default_factory=dict)   # the method block the model was trained with
    trained_with: str = ""                # the table's settings keys of ``method``, as text
    marks: Optional[object] = None        # seeds / CI / significance (:class:`sentlab.report.significance.Marks`)
    caveat: str = ""                      # why this row's numbers carry no Δ though its spec allows one

    @property
    def evaluated(self) -> bool:
        return self.status == EVALUATED


def paper_only(label: str, paper: dict, why: str, section: str = "") -> RowSpec:
    """A row of a system sentlab does not implement: the paper's numbers and why there is no model."""
    return RowSpec(label, (), paper, f"{NOT_IMPL}: {why}", section)
