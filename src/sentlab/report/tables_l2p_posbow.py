"""L2P-CSR's, the POS/BOW paper's and PaSeR's supervised tables (docs/reproducing.md), with RoBERTa-base rows (#34).

The RoBERTa-base rows are trained by the paper profile's ``*_roberta`` lines (params.yaml ``ablations.variants``:
``simcse_roberta``, ``prompt_roberta``, ``l2p_roberta``, ``prompt_l2p_roberta``) and ``posbow_adv`` (its method
line's ``backbone: roberta-base``); a row whose model is not the paper numbers' backbone prints no Δ
(:mod:`sentlab.report.backbones`).
"""

from __future__ import annotations

from . import paper_numbers as P
from .backbones import ROBERTA
from .paper_tables import COLS7, RowSpec, TableSpec, _paper_only


def l2p_tables() -> list[TableSpec]:
    from ..methods.l2p import ABLATIONS

    t1 = P.L2P_TABLE1
    rows1 = [
        RowSpec("CLS", ("base-cls",), t1["CLS"]), RowSpec("Mean", ("base-mean",), t1["Mean"]),
        _paper_only("+Flow", t1["+Flow"], "normalising-flow post-processing"),
        RowSpec("+Whitening", ("base-whitening",), t1["+Whitening"]),
        _paper_only("+Contrastive(BT)", t1["+Contrastive(BT)"], "needs back-translation models"),
        _paper_only("+SG-OPT", t1["+SG-OPT"], "self-guided contrastive learning"),
        RowSpec("+SimCSE", ("simcse",), t1["+SimCSE"]), RowSpec("+Ours (L2P-CSR)", ("l2p",), t1["+Ours"]),
        RowSpec(PROMPT_LABEL, ("prompt",), t1["+Prompt"], PROMPT_NOTE, delta=False),
        RowSpec("+Prompt+Ours", ("prompt_l2p",), t1["+Prompt+Ours"]),
    ]
    rows1 += roberta_rows()
    rows3 = []
    for key, ab in ABLATIONS.items():   # one row per variant, l2p_beta_0p1 included
        section = ab.get("section") or ("Table 3" if ab["paper"] is not None
                                        else "Fig. 2 sweeps (plotted, no printed values)")
        rows3.append(RowSpec(ab["label"], ("l2p",) if key == "full" else (f"l2p_{key}", "l2p"), ab["paper"],
                             "overrides: " + (", ".join(f"{k}={v}" for k, v in ab["overrides"].items()) or "none"),
                             section, expects=dict(ab["overrides"])))
    l2p_settings = tuple(dict.fromkeys(k for ab in ABLATIONS.values() for k in ab["overrides"]))
    return [
        TableSpec("l2p_table1", "L2P-CSR Table 1: STS (BERT-base and RoBERTa-base groups)", "L2P-CSR Table 1", COLS7,
                  tuple(rows1), main=True,
                  context="The RoBERTa-base group is trained by the paper profile (the *_roberta lines: L2P-CSR at lr "
                          "1e-5, masks on the embeddings and layer 0, as the authors' code); a row whose model is "
                          "another backbone than its paper numbers prints no Δ."),
        TableSpec("l2p_table3", "L2P-CSR Table 3: ablations and variations", "L2P-CSR Table 3",
                  ("STSBenchmark", "SICKRelatedness"), tuple(rows3), settings=l2p_settings),
    ]


def posbow_tables() -> list[TableSpec]:
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


# "+Prompt" is PromptBERT's unsupervised recipe; sentlab's `prompt` line trains a simpler one (issue #34): the row
# says what differs and prints no Δ.
PROMPT_LABEL = "+Prompt (sentlab: PromptBERT's template, not its recipe)"
PROMPT_NOTE = ("differs from the paper's PromptBERT run: one template, no template denoising, batch 64, lr 3e-5 "
               "(PromptBERT unsup.: two templates with template denoising, batch 256, lr 1e-5); no Δ")


def roberta_rows() -> list[RowSpec]:
    """L2P-CSR Table 1's RoBERTa-base group: its baselines paper-only (evaluate.baselines pool model.backbone),
    the trained rows from the paper profile's *_roberta lines."""
    t, sec = P.L2P_TABLE1_ROBERTA, "RoBERTa-base group"
    why = "baselines are of model.backbone only; no roberta-base baseline stage"
    return [*(_paper_only(k, t[k], why, sec) for k in ("CLS", "Mean", "+Whitening")),
            RowSpec("+SimCSE", ("simcse_roberta",), t["+SimCSE"], section=sec, backbone=ROBERTA),
            RowSpec("+Ours (L2P-CSR)", ("l2p_roberta",), t["+Ours"], "lr 1e-5, layers 1 (embeddings + layer 0)", sec,
                    backbone=ROBERTA),
            RowSpec(PROMPT_LABEL, ("prompt_roberta",), t["+Prompt"], PROMPT_NOTE, sec, backbone=ROBERTA, delta=False),
            RowSpec("+Prompt+Ours", ("prompt_l2p_roberta",), t["+Prompt+Ours"], "lr 1e-5, layers 1", sec,
                    backbone=ROBERTA)]


def paser_sup_tables() -> list[TableSpec]:
    """PaSeR Table 2 (supervised STS): supervised SimCSE (``simcse_sup``) and PaSeR (``paser_sup``), both trained on
    ``prepare.nli``'s triples (the paper: SNLI + MNLI; the quick profile's stand-in is SICK train, 123 triples)."""
    t = P.PASER_TABLE2
    rows = (RowSpec("SimCSE-BERTbase (sup.)", ("simcse_sup",), t["SimCSE-BERTbase"],
                    "batch 512, lr 5e-5, 3 epochs (SimCSE's supervised run) in the paper profile"),
            RowSpec("PaSeR-BERTbase (sup.)", ("paser_sup",), t["PaSeR-BERTbase"], "starts from models/paser"))
    return [TableSpec("paser_table2", "PaSeR Table 2: supervised STS", "PaSeR (EMNLP 2022) Table 2", COLS7, rows,
                      paper_setting="BERT-base, SNLI + MNLI", main=True,
                      context="Both rows train on data/corpus/nli.parquet (prepare.nli; its source is in each model's "
                              "sentlab.json): SimCSE's SNLI + MNLI triples in the paper profile.")]
