"""DiffCSE and RankCSE with the reading of their paper's number and the other one (issue #53 §3.2, §3.3): each
paper's row is filled by the line that runs the code's setting, the other reading by its ablation variant
(params.yaml ``ablations.variants``: ``diffcse_paper_text``, ``rankcse_listnet``).

- DiffCSE's 78.49 came from voidism/DiffCSE's ``cl_forward`` (the generator's argmax at every position, L_RTD over
  the padded grid): ``diffcse``; the paper text's reading (sampled at the masked positions, the mean over the real
  tokens) has no number of its own: ``diffcse_paper_text``.
- RankCSE reports ListMLE (80.36) and ListNet (80.05); the community run script ran ListMLE: ``rankcse``, and
  ``rankcse_listnet``. Both rows carry the teacher substitution (SimCSE-BERT-base for SimCSE-BERT-large)."""

from __future__ import annotations

from .. import paper_numbers as P
from .spec import COLS7, RowSpec, TableSpec

CODE = {"generator_decoding": "argmax", "generator_positions": "all", "rtd_positions": "all"}
TEXT = {"generator_decoding": "sample", "generator_positions": "masked", "rtd_positions": "tokens"}


def table() -> TableSpec:
    rows = (
        RowSpec("DiffCSE (the code: generator argmax everywhere, L_RTD over the padded grid)", ("diffcse",),
                P.DIFFCSE_TABLE1["DiffCSE-BERTbase"], "the reading of the code behind the 78.49", expects=CODE),
        RowSpec("sentlab: DiffCSE as the text reads (sampled at the masked positions, L_RTD over the tokens)",
                ("diffcse_paper_text",), None, "ablation: the paper's text; its number came from the code's reading",
                expects=TEXT),
        RowSpec("RankCSE-listMLE (run_rankcse.sh)", ("rankcse",), P.RANKCSE_TABLE["listmle"], P.RANKCSE_TEACHER_NOTE,
                expects={"distillation": "listmle", "rank_positive": True}),
        RowSpec("RankCSE-listNet", ("rankcse_listnet",), P.RANKCSE_TABLE["listnet"],
                "ablation variant; " + P.RANKCSE_TEACHER_NOTE, expects={"distillation": "listnet",
                                                                         "rank_positive": False}),
    )
    return TableSpec(
        "followups_readings", "DiffCSE and RankCSE: the code's reading and the other",
        "DiffCSE (NAACL 2022) Table 1; RankCSE (ACL 2023), unsupervised STS", COLS7, rows,
        context=("Each paper's number is filled by the line that runs the setting its number came from (DiffCSE: "
                 "the authors' code; RankCSE: the community run script, the authors released no code); the other "
                 "reading is an ablation variant. docs/methods.md#diffcse, #rankcse."),
        settings=("generator_decoding", "generator_positions", "rtd_positions", "distillation", "rank_positive"))
