"""Which backbone a paper number and a reproduced number come from, so the report never puts a Δ (reproduced −
paper) or a significance mark between numbers of different backbones (issue #34).

A row's paper numbers come from BERT-base (every table's default) or RoBERTa-base (``RowSpec.backbone``: the
POS/BOW paper, L2P-CSR Table 1's RoBERTa group). Backbones compare by family: ``roberta`` when the name says so,
else ``bert``. The quick profile's MiniLM (a BERT-architecture model with BERT's uncased vocabulary) stands in for
BERT-base, so its rows keep their Δ against the BERT-base numbers and print none against the RoBERTa-base ones.
"""

from __future__ import annotations

from typing import Optional

PAPER_DEFAULT = "bert-base-uncased"
ROBERTA = "roberta-base"


def family(backbone: Optional[str]) -> str:
    """``roberta`` or ``bert`` (the empty name: the paper default, BERT-base)."""
    return "roberta" if "roberta" in (backbone or PAPER_DEFAULT).lower() else "bert"


def comparable(a: Optional[str], b: Optional[str]) -> bool:
    """Whether numbers from backbones ``a`` and ``b`` may be subtracted (same family)."""
    return family(a) == family(b)


def no_delta_note(model_backbone: str, paper_backbone: str) -> str:
    """The row note that says why its cells carry no Δ."""
    return (f"no Δ: trained on {model_backbone}, the paper's numbers are {paper_backbone or PAPER_DEFAULT}'s")
