"""L2P-CSR's tables (Table 1 with its RoBERTa-base group, Table 2 (transfer), Table 3 with the Fig. 2
sweeps). Every row names its models literally; a variant id is an entry of params.yaml
``ablations.variants`` (the one ablation registry), and the settings a Table 3 row expects are that variant's
``set`` (``tests/test_report_tables.py``).

The RoBERTa-base rows are trained by the paper profile's ``*_roberta`` lines (``simcse_roberta``,
``prompt_roberta``, ``l2p_roberta``, ``prompt_l2p_roberta``); a row whose model is not the paper numbers'
backbone prints no Δ (:mod:`sentlab.report.backbones`).
"""

from __future__ import annotations

from .. import paper_numbers as P
from ..backbones import ROBERTA
from .spec import COLS7, RowSpec, TableSpec, paper_only

TABLE3, FIG2 = "Table 3", "Fig. 2 sweeps (plotted, no printed values)"
BETA = "sentlab: ascent step beta (paper 0.5, released code 0.1; not in the paper)"

# Table 3 (BERT-base), the Fig. 2 sweeps (plots without printed values: no paper number) and sentlab's own row:
# (label, models, section, the methods.l2p settings the row expects = its variant's `set`)
TABLE3_ROWS = (
    ("BERT-base + L2P-CSR", ("l2p",), TABLE3, {}),
    ("w/o feature mask", ("l2p_no_feature_mask", "l2p"), TABLE3, {"feature_mask": False}),
    ("w/o token mask", ("l2p_no_token_mask", "l2p"), TABLE3, {"token_mask": False}),
    ("w/o learning to perturb", ("l2p_no_learning", "l2p"), TABLE3, {"learn": False}),
    ("BERT-base + Emb Noise", ("l2p_gradient_noise", "l2p"), TABLE3, {"perturbation": "gradient_noise"}),
    ("BERT-base + Continual Mask", ("l2p_continuous", "l2p"), TABLE3, {"continuous": True}),
    ("phi = 0.01", ("l2p_phi_0p01", "l2p"), FIG2, {"phi": 0.01}),
    ("phi = 0.1", ("l2p_phi_0p1", "l2p"), FIG2, {"phi": 0.1}),
    ("phi = 0.2", ("l2p_phi_0p2", "l2p"), FIG2, {"phi": 0.2}),
    ("phi = 0.3", ("l2p_phi_0p3", "l2p"), FIG2, {"phi": 0.3}),
    ("k = 0", ("l2p_layers_0", "l2p"), FIG2, {"layers": 0}),
    ("k = 1", ("l2p_layers_1", "l2p"), FIG2, {"layers": 1}),
    ("k = 4", ("l2p_layers_4", "l2p"), FIG2, {"layers": 4}),
    ("k = 6", ("l2p_layers_6", "l2p"), FIG2, {"layers": 6}),
    ("beta = 0.1 (released code)", ("l2p_beta_0p1", "l2p"), BETA, {"beta": 0.1}),
)

# "+Prompt" is PromptBERT's unsupervised recipe, which sentlab's `prompt` line trains (kongds/Prompt-BERT run.sh
# unsup-bert, benchmarks/released/promptbert.py; issue #53 §3.1)
PROMPT_LABEL = "+Prompt"
PROMPT_NOTE = ("PromptBERT unsup. (run.sh): two templates, template denoising in training; paper profile batch 256, "
               "lr 1e-5; test: the first template's [MASK] vector, '.' ended sentences (its evaluation.py)")


def roberta_rows() -> list[RowSpec]:
    """L2P-CSR Table 1's RoBERTa-base group: its baselines paper-only (evaluate.baselines pool model.backbone),
    the trained rows from the paper profile's *_roberta lines."""
    t, sec = P.L2P_TABLE1_ROBERTA, "RoBERTa-base group"
    why = "baselines are of model.backbone only; no roberta-base baseline stage"
    return [*(paper_only(k, t[k], why, sec) for k in ("CLS", "Mean", "+Whitening")),
            RowSpec("+SimCSE", ("simcse_roberta",), t["+SimCSE"], section=sec, backbone=ROBERTA),
            RowSpec("+Ours (L2P-CSR)", ("l2p_roberta",), t["+Ours"], "lr 1e-5, layers 1 (embeddings + layer 0)", sec,
                    backbone=ROBERTA),
            RowSpec(PROMPT_LABEL, ("prompt_roberta",), t["+Prompt"], PROMPT_NOTE, sec, backbone=ROBERTA),
            RowSpec("+Prompt+Ours", ("prompt_l2p_roberta",), t["+Prompt+Ours"], "lr 1e-5, layers 1", sec,
                    backbone=ROBERTA)]


def table1_rows() -> list[RowSpec]:
    t1 = P.L2P_TABLE1
    return [
        RowSpec("CLS", ("base-cls",), t1["CLS"]), RowSpec("Mean", ("base-mean",), t1["Mean"]),
        RowSpec("+Flow", ("base-bert_flow",), t1["+Flow"], "evaluate.bert_flow"),
        RowSpec("+Whitening", ("base-whitening",), t1["+Whitening"]),
        paper_only("+Contrastive(BT)", t1["+Contrastive(BT)"], "needs back-translation models"),
        RowSpec("+SG-OPT", ("sg_opt",), t1["+SG-OPT"]),
        RowSpec("+SimCSE", ("simcse",), t1["+SimCSE"]), RowSpec("+Ours (L2P-CSR)", ("l2p",), t1["+Ours"]),
        RowSpec(PROMPT_LABEL, ("prompt",), t1["+Prompt"], PROMPT_NOTE),
        RowSpec("+Prompt+Ours", ("prompt_l2p",), t1["+Prompt+Ours"]),
        *roberta_rows(),
    ]


# Table 2's BERT-base group, then every other method's model with transfer results (no paper row): the second
# column the follow-up papers report
OTHER_TRANSFER = ("ct", "moco", "moco_srl", "ptbert", "paser", "paser_sup", "prompt", "prompt_l2p", "posbow_adv",
                  "simcse_sup", "esimcse", "simcse_pp")
TRANSFER_COLS = (*P.TRANSFER_COLUMNS[:-1], "MRPC_F1", "TransferAvg")


def table2_rows() -> list[RowSpec]:
    t, r, sec_r = P.L2P_TABLE2, P.L2P_TABLE2_ROBERTA, "RoBERTa-base group"
    why = "baselines are of model.backbone only; no roberta-base baseline stage"
    return [RowSpec("CLS", ("base-cls",), t["CLS"], extract="transfer"),
            RowSpec("Mean", ("base-mean",), t["Mean"], extract="transfer"),
            RowSpec("+SimCSE", ("simcse",), t["+SimCSE"], extract="transfer"),
            RowSpec("+Ours (L2P-CSR)", ("l2p",), t["+Ours"], extract="transfer"),
            *(paper_only(k, r[k], why, sec_r) for k in ("CLS", "Mean")),
            RowSpec("+SimCSE", ("simcse_roberta",), r["+SimCSE"], section=sec_r, extract="transfer",
                    backbone=ROBERTA),
            RowSpec("+Ours (L2P-CSR)", ("l2p_roberta",), r["+Ours"], section=sec_r, extract="transfer",
                    backbone=ROBERTA),
            *(RowSpec(m, (m,), None, section="sentlab's other methods (no paper row)", extract="transfer")
              for m in OTHER_TRANSFER)]


def table3_rows() -> list[RowSpec]:
    """One row per :data:`TABLE3_ROWS` entry; its note lists the settings it expects."""
    return [RowSpec(label, models, P.L2P_TABLE3.get(label), "overrides: " + (
        ", ".join(f"{k}={v}" for k, v in expects.items()) or "none"), section, expects=dict(expects))
        for label, models, section, expects in TABLE3_ROWS]


def tables() -> list[TableSpec]:
    settings = tuple(dict.fromkeys(k for *_, expects in TABLE3_ROWS for k in expects))
    return [
        TableSpec("l2p_table1", "L2P-CSR Table 1: STS (BERT-base and RoBERTa-base groups)", "L2P-CSR Table 1", COLS7,
                  tuple(table1_rows()), main=True,
                  context="The RoBERTa-base group is trained by the paper profile (the *_roberta lines: L2P-CSR at lr "
                          "1e-5, masks on the embeddings and layer 0, as the authors' code); a row whose model is "
                          "another backbone than its paper numbers prints no Δ."),
        TableSpec("l2p_table2", "L2P-CSR Table 2: SentEval transfer tasks (accuracy; MRPC F1 beside)",
                  "L2P-CSR Table 2", TRANSFER_COLS, tuple(table2_rows()),
                  measure="SentEval's transfer protocol (accuracy %, MRPC F1 %)",
                  context="Logistic regression on the frozen embeddings, SentEval's protocol with SimCSE's settings "
                          "(docs/evaluation.md#senteval-transfer-tasks). A profile with `transfer.max_examples` "
                          "(quick) evaluates a seeded sample of that many examples per split: its accuracies are "
                          "of the sample, not comparable with the paper's (no Δ). The BERT-large and RoBERTa-large "
                          "groups are not reproduced."),
        TableSpec("l2p_table4", "L2P-CSR Table 4: GLUE fine-tuning (dev)", "L2P-CSR Table 4", P.GLUE_COLUMNS,
                  (RowSpec("BERT-base", ("base-cls",), P.L2P_TABLE4["BERT-base"], "the backbone fine-tuned",
                           extract="glue"),
                   RowSpec("+Ours (L2P-CSR)", ("l2p",), P.L2P_TABLE4["+Ours"], extract="glue")),
                  measure="GLUE dev: accuracy × 100 (WNLI, QNLI, QQP, SST-2), Spearman × 100 (STS-B); "
                          "docs/evaluation.md#glue-fine-tuning",
                  context="Each encoder fine-tuned with a [CLS] + linear head, transformers' run_glue defaults (the "
                          "paper gives no settings). A cell without a number says what to run or fetch."),
        TableSpec("l2p_table3", "L2P-CSR Table 3: ablations and variations", "L2P-CSR Table 3",
                  ("STSBenchmark", "SICKRelatedness"), tuple(table3_rows()), settings=settings),
    ]
