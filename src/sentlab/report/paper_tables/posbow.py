"""The POS/BOW paper's table (SimCSE + POS/BOW auxiliaries, adversarially disentangled: Table 1, RoBERTa-base)
with sentlab's two ablations of it (params.yaml ``ablations.variants``: ``posbow_adv_noadv``,
``posbow_adv_noaux``). ``posbow_adv/posbow_adv_bow`` is an extra row of ``posbow_adv``'s metrics (a channel)."""

from __future__ import annotations

from .. import paper_numbers as P
from ..backbones import ROBERTA
from .spec import COLS7, RowSpec, TableSpec


def tables() -> list[TableSpec]:
    t = P.POSBOW_TABLE1
    rows = (RowSpec("SimCSE", ("simcse_roberta", "simcse"), t["SimCSE"],
                    "simcse_roberta where trained (paper profile), else simcse (this profile's backbone)",
                    backbone=ROBERTA),
            RowSpec("Our sentence (full embedding)", ("posbow_adv",), t["Our sentence"], backbone=ROBERTA),
            RowSpec("Our BOW (BOW channel)", ("posbow_adv/posbow_adv_bow",), t["Our BOW"], "first bow_dim dimensions",
                    backbone=ROBERTA),
            RowSpec("Our POS (POS channel)", ("posbow_adv/posbow_adv_pos",), t["Our POS"], "last pos_dim dimensions",
                    backbone=ROBERTA),
            RowSpec("sentlab: no adversary", ("posbow_adv_noadv",), None,
                    "ablation not in the paper (adversary: none)"),
            RowSpec("sentlab: no auxiliary tasks", ("posbow_adv_noaux",), None,
                    "ablation not in the paper (aux_tasks: false, adversary: none) = SimCSE with the same seed"))
    return [TableSpec("posbow_table1", "SimCSE + POS/BOW adversarial: Table 1", "SimCSE + POS/BOW auxiliaries, Table 1",
                      COLS7, rows, paper_setting="RoBERTa-base, channels 640 + 128", main=True)]
