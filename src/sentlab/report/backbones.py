"""Which backbone a paper number and a reproduced number come from, so the report never puts a Δ (reproduced −
paper) or a † (the paper's number outside the seeds' interval) between numbers of different backbones (issues #34,
#55).

A row's paper numbers come from BERT-base (every table's default) or RoBERTa-base (``RowSpec.backbone``: the
POS/BOW paper, L2P-CSR Table 1's RoBERTa group). A reproduced number is compared with them only when its model
ran on that very backbone (:func:`comparable`: the hub id's last part, ``google-bert/bert-base-uncased`` is
``bert-base-uncased``): the quick profile's MiniLM rows show the paper's number beside, labelled, with no Δ and no
†. Reproduced rows are tested against each other by backbone family (:func:`family`: the significance marks'
reference, :mod:`sentlab.report.significance`), which compares like with like.
"""

from __future__ import annotations

from typing import Optional

PAPER_DEFAULT = "bert-base-uncased"
ROBERTA = "roberta-base"


def family(backbone: Optional[str]) -> str:
    """``roberta`` or ``bert`` (the empty name: the paper default, BERT-base)."""
    return "roberta" if "roberta" in (backbone or PAPER_DEFAULT).lower() else "bert"


def model_name(backbone: Optional[str]) -> str:
    """The backbone's model name: the last part of its hub id or folder, lower-cased (empty: the paper default)."""
    return (backbone or PAPER_DEFAULT).rstrip("/").rsplit("/", 1)[-1].lower()


def comparable(a: Optional[str], b: Optional[str]) -> bool:
    """Whether numbers from backbones ``a`` and ``b`` may be subtracted or marked: the same model."""
    return model_name(a) == model_name(b)


def no_delta_note(model_backbone: str, paper_backbone: str) -> str:
    """The row note that says why its cells carry no Δ."""
    return (f"no Δ: trained on {model_backbone}, the paper's numbers are {paper_backbone or PAPER_DEFAULT}'s")
