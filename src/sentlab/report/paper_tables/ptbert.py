"""PT-BERT's tables (ACL 2022: Tables 1–5). Every row names its models literally: a variant id is an
entry of params.yaml ``ablations.variants`` (``tests/test_report_tables.py`` checks both ways)."""

from __future__ import annotations

from .. import paper_numbers as P
from .spec import COLS7, COLS_HARD, RowSpec, TableSpec, paper_only

SETTINGS = ("pseudo_len", "queue_size", "attend_to")
CLS_NOTE = "attend_to: cls (released code): P receives no gradient"
TOKENS_NOTE = "attend_to: tokens"
QUEUE_NOTE = ("; queue in sentences: the quick profile counts the batch in (64 + 3 queued batches = 256), the paper "
              "profile runs the released code's setting, one batch more (320 for the paper's 256; docs/methods.md)")
BATCH = 64   # the paper's batch: the released code keeps one batch more than the queue the paper names
Q320_NOTE = "; 320 is the released code's queue_size=4 (it keeps 5 batches of 64)"

# Table 5 (a)/(a'): pseudo sequence length m (queue 256); (b)/(b'): queue size (m = 128), in both readings of Y:
# (label, models, m or queue size, note)
SWEEP_M_CLS = (("L-64", ("ptbert_m64",), 64, CLS_NOTE), ("L-90", ("ptbert_m90",), 90, CLS_NOTE),
               ("L-128 (ours)", ("ptbert",), 128, CLS_NOTE), ("L-256", ("ptbert_m256",), 256, CLS_NOTE),
               ("L-360", ("ptbert_m360",), 360, CLS_NOTE))
SWEEP_M_TOKENS = (("L-64", ("ptbert_tokens_m64",), 64, TOKENS_NOTE),
                  ("L-90", ("ptbert_tokens_m90",), 90, TOKENS_NOTE),
                  ("L-128 (ours)", ("ptbert_tokens", "ptbert"), 128, TOKENS_NOTE),
                  ("L-256", ("ptbert_tokens_m256",), 256, TOKENS_NOTE),
                  ("L-360", ("ptbert_tokens_m360",), 360, TOKENS_NOTE))
SWEEP_Q_CLS = (("Q-192", ("ptbert_q192",), 192, CLS_NOTE + QUEUE_NOTE),
               ("Q-256 (ours)", ("ptbert",), 256, CLS_NOTE + QUEUE_NOTE),
               ("Q-320", ("ptbert_q320",), 320, CLS_NOTE + QUEUE_NOTE + Q320_NOTE))
SWEEP_Q_TOKENS = (("Q-192", ("ptbert_tokens_q192",), 192, TOKENS_NOTE + QUEUE_NOTE),
                  ("Q-256 (ours)", ("ptbert_tokens", "ptbert"), 256, TOKENS_NOTE + QUEUE_NOTE),
                  ("Q-320", ("ptbert_tokens_q320",), 320, TOKENS_NOTE + QUEUE_NOTE + Q320_NOTE))


def _queue(paper: int) -> tuple[int, int]:
    """The queue sizes that are the paper's ``paper``: as the quick profile counts it, and as the released code
    keeps it (one batch more; the paper profile)."""
    return paper, paper + BATCH


def _sweep(rows, attend_to: str, section: str, which: str) -> list[RowSpec]:
    """Table 5a (``which`` = "m": pseudo_len, queue 256) or 5b ("q": queue_size, m = 128) rows, one reading of Y."""
    paper = P.PTBERT_TABLE5A if which == "m" else P.PTBERT_TABLE5B
    return [RowSpec(label, models, dict(paper[v]), note, section,
                    expects={"pseudo_len": v if which == "m" else 128,
                             "queue_size": _queue(v if which == "q" else 256), "attend_to": attend_to})
            for label, models, v, note in rows]


def _moco_rows(section: str) -> list[RowSpec]:
    t3 = P.PTBERT_TABLE3
    return [RowSpec(t3[k][0], (k,), dict(t3[k][1]), "", section)
            for k in ("moco", "moco_reorder", "moco_duplication", "moco_deletion", "moco_srl")]


def table3_rows(backbone: str) -> list[RowSpec]:
    t3 = P.PTBERT_TABLE3
    rows = [
        RowSpec("BERT [CLS] (no training)", ("base-cls",), None, "baseline, not in PT-BERT Table 3", "Baselines"),
        RowSpec("BERT mean (no training)", ("base-mean",), None, "baseline, not in PT-BERT Table 3", "Baselines"),
        RowSpec("BERT first-last (no training)", ("base-first_last",), None, "baseline", "Baselines"),
        RowSpec("BERT whitening (no training)", ("base-whitening",), None, "baseline", "Baselines"),
    ]
    if backbone == "sentence-transformers/all-MiniLM-L6-v2":
        rows.append(RowSpec("all-MiniLM-L6-v2 mean vs MTEB", ("base-mean",), dict(P.MTEB_MINILM_MEAN),
                            "reference = the public MTEB evaluation (not a paper): |Δ| ≤ 0.01 on STS12–16/STS-B "
                            "checks the evaluator; no SICK-R reference: MTEB's SICK-R "
                            f"({P.MTEB_MINILM_SICKR_ALL_PAIRS:.2f}) scores all 9,927 SICK pairs, a different "
                            "protocol from the 4,927-pair test split", "Baselines", backbone=backbone))
    return rows + [
        paper_only("CLEAR", P.PTBERT_CLEAR, "own pre-training on Wikipedia + BookCorpus (500k steps)",
                   "Discrete augmentation"),
        *_moco_rows("Discrete augmentation"),
        RowSpec(t3["ct"][0], ("ct",), dict(t3["ct"][1]), "", "Continuous augmentation"),
        RowSpec(t3["simcse"][0], ("simcse",), dict(t3["simcse"][1]), "", "Continuous augmentation"),
        RowSpec(t3["ptbert"][0], ("ptbert",), dict(t3["ptbert"][1]), CLS_NOTE, "Continuous augmentation",
                expects={"attend_to": "cls"}),
        RowSpec("PT-BERT, Y = all token states", ("ptbert_tokens", "ptbert"), None,
                "docs/methods.md#pt-bert reading of the equations (attend_to: tokens); the paper reports one variant",
                "Continuous augmentation", expects={"attend_to": "tokens"}),
    ]


def table4_rows() -> list[RowSpec]:
    t4 = P.PTBERT_TABLE4
    simcse_own = "SimCSE's own augmentation study (its Table 1), quoted by PT-BERT"
    return [
        RowSpec("SimCSE-BERTbase + None", ("simcse",), {"STSBenchmark-dev": t4["SimCSE-BERTbase + None"]}),
        RowSpec("SimCSE-BERTbase + Crop", ("simcse_crop",), {"STSBenchmark-dev": t4["SimCSE-BERTbase + Crop"]},
                f"{simcse_own}: crop 10% (the second view keeps a contiguous 90% of the words)",
                expects={"rate": 0.1}),
        RowSpec("SimCSE-BERTbase + Deletion", ("simcse_deletion",),
                {"STSBenchmark-dev": t4["SimCSE-BERTbase + Deletion"]},
                f"{simcse_own}: word deletion 10% (75.9; 'delete one word' is 75.9 too: words: 1)",
                expects={"rate": 0.1}),
        *[RowSpec(label, (m,), {"STSBenchmark-dev": t4[label]}) for label, m in (
            ("MoCo-BERTbase + None", "moco"), ("MoCo-BERTbase + Reorder", "moco_reorder"),
            ("MoCo-BERTbase + Duplication", "moco_duplication"), ("MoCo-BERTbase + Deletion", "moco_deletion"),
            ("MoCo-BERTbase + SRL", "moco_srl"), ("PT-BERTbase", "ptbert"))],
    ]


def table5_rows() -> list[RowSpec]:
    hs = P.PTBERT_HARD_SUBSET
    return [
        *_sweep(SWEEP_M_CLS, "cls", "(a) pseudo sequence length m, attend_to: cls (P receives no gradient)", "m"),
        *_sweep(SWEEP_M_TOKENS, "tokens", "(a') pseudo sequence length m, attend_to: tokens "
                                                 "(docs/methods.md#pt-bert reading)", "m"),
        *_sweep(SWEEP_Q_CLS, "cls", "(b) queue size, attend_to: cls (P receives no gradient)", "q"),
        *_sweep(SWEEP_Q_TOKENS, "tokens", "(b') queue size, attend_to: tokens (docs/methods.md#pt-bert reading)",
                "q"),
        *[RowSpec(hs[k][0], (k,), dict(hs[k][1], Avg=hs[k][2]), "hard length subset (docs/evaluation.md#diagnostics)",
                  "(c) hard sentence pairs of STS12–16", "hard_subset") for k in ("simcse", "ptbert")],
    ]


# Table 2: SimCSE's training max length (methods.simcse.max_length; null: train.max_length = 32)
MAX_LENGTH_NOTE = "methods.simcse.max_length (null: train.max_length = 32)"
TABLE2 = (("SimCSE32", ("simcse",), 32, (None, 32)), ("SimCSE64", ("simcse_len64", "simcse"), 64, 64),
          ("SimCSE128", ("simcse_len128", "simcse"), 128, 128))


def tables(backbone: str) -> list[TableSpec]:
    t1 = P.PTBERT_TABLE1
    return [
        TableSpec("ptbert_table1", "PT-BERT Table 1: SimCSE on the hard length subset of STS12–16",
                  "PT-BERT (ACL 2022) Table 1", COLS_HARD, (
                      RowSpec("SimCSE sub-dataset", ("simcse",), t1["sub-dataset"],
                              "positives with |length diff| > 5 words, negatives < 2 "
                              "(docs/evaluation.md#diagnostics, evaluate.hard_subset)",
                              extract="hard_subset"),
                      RowSpec("SimCSE original", ("simcse",), t1["original"],
                              "every scored pair ('all' setting); paper Avg not printed", extract="hard_full"),
                      RowSpec("BERT [CLS] sub-dataset", ("base-cls",), None, "untrained reference",
                              extract="hard_subset"),
                  ), context="Avg = mean of the five tasks (printed only in Table 5c for the subset)."),
        TableSpec("ptbert_table2", "PT-BERT Table 2: SimCSE's training max length", "PT-BERT (ACL 2022) Table 2",
                  ("Avg",), tuple(RowSpec(label, models, {"Avg": P.PTBERT_TABLE2[n]}, MAX_LENGTH_NOTE,
                                          expects={"max_length": want}) for label, models, n, want in TABLE2),
                  settings=("max_length",)),
        TableSpec("ptbert_table3", "PT-BERT Table 3: STS results", "PT-BERT (ACL 2022) Table 3", COLS7,
                  tuple(table3_rows(backbone)), context="BERT-base, 1M Wikipedia sentences in the paper.", main=True,
                  settings=SETTINGS),
        TableSpec("ptbert_table4", "PT-BERT Table 4: STS-B development set", "PT-BERT (ACL 2022) Table 4",
                  ("STSBenchmark-dev",), tuple(table4_rows()),
                  context="Reproduced: the best checkpoint (selected on STS-B dev) evaluated on all 1,500 dev pairs."),
        TableSpec("ptbert_table5", "PT-BERT Table 5: ablations and hard sentence pairs", "PT-BERT (ACL 2022) Table 5",
                  COLS7, tuple(table5_rows()), main=True, settings=SETTINGS,
                  context="(c) has no STS-B / SICK-R columns; its Avg is the mean of STS12–16 on the subset. "
                          "(a), (b): the released code's reading (attend_to: cls). There the pseudo tokens P are the "
                          "queries of an attention with one key, whose weight is 1, so Z' = V(y) whatever P holds: P "
                          "receives no gradient and m tests nothing about the pseudo tokens. (a'), (b'): Y = all "
                          "token states (ptbert_tokens*); the paper prints one number per m / queue size, shown in "
                          "both readings."),
    ]
