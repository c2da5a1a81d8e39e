"""PaSeR's tables (EMNLP 2022: Tables 1, 2, 4, 5, 8, 9, 10 and Fig. 4). Every row names its models
literally; a variant id is an entry of params.yaml ``ablations.variants``."""

from __future__ import annotations

from typing import Optional

from .. import paper_numbers as P
from .spec import COLS3, COLS7, RowSpec, TableSpec, paper_only

SETTINGS = ("eda", "phrases", "chunk_k", "top_k", "m", "n", "pooling", "decoder_layers", "memory_norm", "head_lr",
            "epochs")
# what every PaSeR ablation row needs besides its own setting: the paper's recipe (one learning rate, no memory
# LayerNorm, which makes m and n immaterial, 5 epochs); the quick paser (memory_norm, head_lr, a step budget)
# fills none of them, not even Table 8's "m = 10, n = 10" although its m and n are 10
PAPER_RECIPE = {"memory_norm": False, "head_lr": None, "epochs": 5}

# the ablation rows: (label, variant or None: the paper's own setting, which only the main paser fills, settings)
TABLE4 = (("no aug", "paser_aug_none", {"eda": "none"}), ("+ RS", "paser_aug_rs", {"eda": "rs"}),
          ("+ RD", "paser_aug_rd", {"eda": "rd"}), ("+ SR", None, {"eda": "sr"}),
          ("+ SR + RD", "paser_aug_sr_rd", {"eda": "sr+rd"}), ("+ SR + RS", "paser_aug_sr_rs", {"eda": "sr+rs"}))
TABLE5_CHUNKS = (("NP only", "paser_np", {"phrases": "np"}), ("VP only", "paser_vp", {"phrases": "verb_group"}),
                 ("NP+VP", "paser_np_vp", {"phrases": "np_verb_group"}))
TABLE5_RAKE = (("RAKE (top1)", "paser_rake1", {"phrases": "rake", "top_k": 1}),
               ("RAKE (top2)", "paser_rake2", {"phrases": "rake", "top_k": 2}),
               ("RAKE (top3)", "paser_rake3", {"phrases": "rake", "top_k": 3}),
               ("RAKE (top4)", "paser_rake4", {"phrases": "rake", "top_k": 4}),
               ("RAKE (top5)", None, {"phrases": "rake", "top_k": 5}))
TABLE8 = (("m = 0.1, n = 1", "paser_m0p1_n1", {"m": 0.1, "n": 1.0}),
          ("m = 1, n = 1", "paser_m1_n1", {"m": 1.0, "n": 1.0}),
          ("m = 10, n = 1", "paser_m10_n1", {"m": 10.0, "n": 1.0}),
          ("m = 10, n = 0.1", "paser_m10_n0p1", {"m": 10.0, "n": 0.1}),
          ("m = 10, n = 10", None, {"m": 10.0, "n": 10.0}))
TABLE9 = (("Top1 avg.", "paser_pool_mean", {"pooling": "mean"}, "trained and evaluated with mean pooling"),
          ("Top2 avg.", "paser_pool_top2", {"pooling": "top2_mean"}, "mean of the last two layers"),
          ("First-last avg.", "paser_pool_first_last", {"pooling": "first_last"}, "mean of embeddings + last layer"),
          ("[CLS]", None, {"pooling": "cls"}, ""))
FIG4 = (("1 decoder layer", "paser_dec1", {"decoder_layers": 1}),
        ("2 decoder layers", "paser_dec2", {"decoder_layers": 2}),
        ("3 decoder layers", "paser_dec3", {"decoder_layers": 3}),
        ("4 decoder layers", "paser_dec4", {"decoder_layers": 4}),
        ("5 decoder layers", "paser_dec5", {"decoder_layers": 5}),
        ("6 decoder layers", None, {"decoder_layers": 6}),
        ("7 decoder layers", "paser_dec7", {"decoder_layers": 7}),
        ("8 decoder layers", "paser_dec8", {"decoder_layers": 8}))


def ablation_row(label: str, variant: Optional[str], paper, note: str, expects: dict) -> RowSpec:
    """A PaSeR ablation row: filled by ``variant`` (None: the paper's own setting, no variant) or, when
    trained so, the main ``paser`` model, only with the ``expects`` settings and the paper's recipe
    (:data:`PAPER_RECIPE`)."""
    return RowSpec(label, (variant, "paser") if variant else ("paser",), paper, note,
                   expects={**expects, **{k: v for k, v in PAPER_RECIPE.items() if k not in expects}})


def table1_rows() -> list[RowSpec]:
    t1 = P.PASER_TABLE1
    return [
        RowSpec("GloVe embeddings", ("base-glove",), t1["GloVe embeddings"],
                f"mean of glove.840B.300d vectors, SentEval's bag of words (evaluate.glove); {P.GLOVE_NO_DELTA}",
                "Original BERT/GloVe", delta=False),
        RowSpec("BERTbase-[CLS]", ("base-cls",), t1["BERTbase-[CLS]"], section="Original BERT/GloVe"),
        RowSpec("BERTbase-mean", ("base-mean",), t1["BERTbase-mean"], section="Original BERT/GloVe"),
        RowSpec("BERTbase-first-last avg.", ("base-first_last",), t1["BERTbase-first-last avg."],
                section="Original BERT/GloVe"),
        RowSpec("BERT-flow", ("base-bert_flow",), t1["BERT-flow"], "evaluate.bert_flow", "Post-processing"),
        RowSpec("BERT-whitening", ("base-whitening",), t1["BERT-whitening"], "evaluate.whitening", "Post-processing"),
        RowSpec("CT-BERTbase", ("ct",), t1["CT-BERTbase"], "PaSeR prints STS12–16 only", "Contrastive"),
        RowSpec("ConSERTbase", ("consert",), t1["ConSERTbase"], "feature cutoff 0.2 + token shuffle, NT-Xent τ = 0.1, "
                "every side of every STS/SICK pair, last-two-layer mean (ConSERT's released script)", "Contrastive"),
        RowSpec("SimCSE-BERTbase + MLM", ("simcse_mlm",), t1["SimCSE-BERTbase + MLM"],
                f"SimCSE's do_mlm: + 0.1·MLM, BERT's pretrained MLM head; {P.NO_DELTA['simcse_mlm']}", "Contrastive",
                delta=False),
        RowSpec("SimCSE-BERTbase", ("simcse",), t1["SimCSE-BERTbase"], section="Contrastive"),
        paper_only("CMLM-BERTbase", t1["CMLM-BERTbase"], "conditional MLM pre-training", "Generative"),
        RowSpec("PaSeR-BERTbase", ("paser",), t1["PaSeR-BERTbase"], "unlabelled STS sentences", "Generative"),
    ]


def _cls_row(label: str, paper) -> RowSpec:
    return RowSpec(label, ("base-cls",), paper, "untrained [CLS]")


def ablation_rows() -> dict[str, list[RowSpec]]:
    """Tables 4, 5, 8, 9 and Fig. 4: the rows of each, by table id."""
    t4, t5, t8, t9 = P.PASER_TABLE4, P.PASER_TABLE5, P.PASER_TABLE8, P.PASER_TABLE9
    chunks = "chunks from the annotate backend (VP: the regexp verb group)"
    return {
        "paser_table4": [_cls_row("BERT-[CLS]", t4["BERT-[CLS]"]),
                         *[ablation_row(label, v, t4[label], "", e) for label, v, e in TABLE4]],
        "paser_table5": [_cls_row("None (BERT-[CLS])", t5["None (BERT-[CLS])"]),
                         *[ablation_row(label, v, t5[label], chunks, e) for label, v, e in TABLE5_CHUNKS],
                         *[ablation_row(label, v, t5[label], "", e) for label, v, e in TABLE5_RAKE]],
        "paser_table8": [ablation_row(label, v, t8[(e["m"], e["n"])], "", e) for label, v, e in TABLE8],
        "paser_table9": [ablation_row(label, v, t9[label], note, e) for label, v, e, note in TABLE9],
        "paser_fig4": [ablation_row(label, v, None, "Fig. 4 is a plot: its values are not printed", e)
                       for label, v, e in FIG4],
    }


def table10() -> TableSpec:
    levels = P.DENSITY_LEVELS
    cols = tuple(f"{lv} {s}" for lv in levels for s in ("mean", "var"))
    rows = [RowSpec(label, (m,), {f"{lv} {s}": v for lv in levels
                                  for s, v in zip(("mean", "var"), P.PASER_TABLE10[paper][lv])}, extract="density")
            for label, m, paper in (("BERT-[CLS]", "base-cls", "BERT-[CLS]"), ("SimCSE-base", "simcse", "SimCSE-base"),
                                    ("PaSeR-base", "paser", "PaSeR-base"))]
    return TableSpec("paser_table10", "PaSeR Table 10: cosine mean / variance by STS-B gold level",
                     "PaSeR Table 10 (App. C)", cols, tuple(rows), digits=3, settings=SETTINGS,
                     context="STS-B test, population variance; level [4,5] includes 5.0.")


def table2() -> TableSpec:
    """PaSeR Table 2 (supervised STS): supervised SimCSE (``simcse_sup``) and PaSeR (``paser_sup``), both trained on
    ``prepare.nli``'s triples (the paper: SNLI + MNLI; the quick profile's stand-in is SICK train, 123 triples)."""
    t = P.PASER_TABLE2
    rows = (RowSpec("SimCSE-BERTbase (sup.)", ("simcse_sup",), t["SimCSE-BERTbase"],
                    "batch 512, lr 5e-5, 3 epochs (SimCSE's supervised run) in the paper profile"),
            RowSpec("PaSeR-BERTbase (sup.)", ("paser_sup",), t["PaSeR-BERTbase"], "starts from models/paser"))
    return TableSpec("paser_table2", "PaSeR Table 2: supervised STS", "PaSeR (EMNLP 2022) Table 2", COLS7, rows,
                     paper_setting="BERT-base, SNLI + MNLI", main=True, settings=("test_mlp",),
                     context="Both rows train on data/corpus/nli.parquet (prepare.nli; its source is in each model's "
                             "sentlab.json): SimCSE's SNLI + MNLI triples in the paper profile. `test_mlp`: the "
                             "trained MLP applied at test, as SimCSE tests its supervised model (81.57 is that "
                             "model's); PaSeR's supervised test pooling is not released, paser_sup tests without "
                             "it as PaSeR's released eval.sh (docs/methods.md#supervised-simcse).")


def table3() -> TableSpec:
    """PaSeR Table 3: QQP retrieval and AskUbuntu reranking (:mod:`sentlab.evaluate.suites.retrieval`)."""
    t, sup = P.PASER_TABLE3, "Supervised"
    rows = (RowSpec("BERT-base", ("base-cls", "base-mean"), t["BERT-base"], "the paper does not say its pooling: "
                    "CLS, else mean", extract="retrieval"),
            RowSpec("BERT-whitening", ("base-whitening",), t["BERT-whitening"], extract="retrieval"),
            RowSpec("SimCSE-BERTbase", ("simcse",), t["SimCSE-BERTbase"], extract="retrieval"),
            RowSpec("PaSeR-BERTbase", ("paser",), t["PaSeR-BERTbase"], extract="retrieval"),
            RowSpec("SimCSE-BERTbase (sup.)", ("simcse_sup",), t["SimCSE-BERTbase (sup.)"], section=sup,
                    extract="retrieval"),
            RowSpec("PaSeR-BERTbase (sup.)", ("paser_sup",), t["PaSeR-BERTbase (sup.)"], section=sup,
                    extract="retrieval"))
    return TableSpec("paser_table3", "PaSeR Table 3: semantic retrieval (QQP) and reranking (AskUbuntu)",
                     "PaSeR (EMNLP 2022) Table 3", P.RETRIEVAL_COLUMNS, rows,
                     measure="MAP and MRR@10 × 100 of cosine ranking (docs/evaluation.md#retrieval-and-reranking)",
                     context="QQP: every q2 the corpus, every q1 with a duplicate a query; AskUbuntu: each query's 20 "
                             "candidates reranked. The data are not in this project's offline mirror: each row says "
                             "how to fetch them and fill it.")


def tables() -> list[TableSpec]:
    """The unsupervised tables (Table 2, supervised, is :func:`table2`)."""
    sub3 = "STS12-16 = mean of the five STS12–16 Spearmans (one decimal in the paper)."
    sub3 += (" A row is filled by a model trained with the setting it expects (its variant, else the main paser "
             "model when that is how paser was trained); every filled row says what else its model was trained with.")
    rows = ablation_rows()
    S = SETTINGS
    return [
        TableSpec("paser_table1", "PaSeR Table 1: unsupervised STS", "PaSeR (EMNLP 2022) Table 1", COLS7,
                  tuple(table1_rows()), main=True, settings=S),
        TableSpec("paser_table4", "PaSeR Table 4: data augmentation", "PaSeR Table 4", COLS3,
                  tuple(rows["paser_table4"]), context=sub3, settings=S),
        TableSpec("paser_table5", "PaSeR Table 5: phrases to mask", "PaSeR Table 5", COLS3,
                  tuple(rows["paser_table5"]), context=sub3, settings=S),
        TableSpec("paser_table8", "PaSeR Table 8: decoding-signal scales m, n", "PaSeR Table 8 (App. A)", COLS3,
                  tuple(rows["paser_table8"]), context=sub3, settings=S),
        TableSpec("paser_table9", "PaSeR Table 9: pooling", "PaSeR Table 9 (App. B)", COLS3,
                  tuple(rows["paser_table9"]),
                  context=sub3 + " Each pooling is a model trained and evaluated with it (paser_pool_*).", settings=S),
        table10(),
        TableSpec("paser_fig4", "PaSeR Fig. 4: STS Avg. vs decoder depth", "PaSeR Fig. 4", ("Avg",),
                  tuple(rows["paser_fig4"]), settings=S,
                  context="Avg of the seven STS tasks per decoder depth (methods.paser.decoder_layers); the figure is "
                          "figures/paser_fig4_decoder_depth.png."),
    ]
