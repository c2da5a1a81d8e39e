"""Numbers reported in the papers (and public reference evaluations), as printed.

Columns: STS12, STS13, STS14, STS15, STS16, STSBenchmark, SICKRelatedness, Avg
(Spearman × 100, BERT-base unless said otherwise). Source of each table in its key.
"""

from __future__ import annotations

COLUMNS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness", "Avg")


def _row(*values):
    return dict(zip(COLUMNS, values))


# PT-BERT (ACL 2022) Table 3, BERT-base. Keys are sentlab model names.
PTBERT_TABLE3 = {
    "moco": ("MoCo", _row(68.35, 81.42, 73.34, 81.63, 78.61, 76.40, 68.50, 75.46)),
    "moco_reorder": ("MoCo+reorder", _row(66.14, 80.06, 73.14, 81.35, 76.01, 73.99, 65.76, 73.78)),
    "moco_duplication": ("MoCo+duplication", _row(65.88, 82.24, 73.34, 81.49, 77.48, 76.29, 68.86, 75.08)),
    "moco_deletion": ("MoCo+deletion", _row(67.86, 81.43, 72.80, 81.48, 77.84, 76.91, 69.46, 75.40)),
    "moco_srl": ("MoCo+SRL", _row(68.92, 82.20, 73.67, 81.58, 78.73, 77.63, 71.07, 76.26)),
    "ct": ("CT-BERT", _row(61.63, 76.80, 68.47, 77.50, 76.48, 74.31, 69.19, 72.05)),
    "simcse": ("SimCSE-BERTbase", _row(68.40, 82.41, 74.38, 80.91, 78.56, 76.85, 72.23, 76.25)),
    "ptbert": ("PT-BERTbase", _row(71.20, 83.76, 76.34, 82.63, 78.90, 79.42, 71.94, 77.74)),
}

# Public MTEB results of sentence-transformers/all-MiniLM-L6-v2 (mean pooling), test split,
# cosine Spearman × 100 (embeddings-benchmark/results and the MTEB paper's results, which agree
# to 4 decimals). The check for the evaluator: base-mean of the quick profile's backbone.
MTEB_MINILM_MEAN = _row(72.369, 80.603, 75.589, 85.390, 78.989, 82.032, 77.582, None)

# PT-BERT (ACL 2022) hard length subset of STS12–16 (Sec. 3.1 Table 1 for SimCSE "sub-dataset"
# vs "original"; Table 5c for SimCSE vs PT-BERT on the subset), BERT-base, Spearman × 100.
# The "full" rows are the same models' STS12–16 numbers of Table 1 ("original") / Table 3.
HARD_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16")
PTBERT_HARD_SUBSET = {
    "simcse": ("SimCSE-BERTbase", dict(zip(HARD_TASKS, (66.54, 78.50, 68.76, 70.27, 71.31))), 71.08,
               dict(zip(HARD_TASKS, (68.40, 82.41, 74.38, 80.91, 78.56)))),
    "ptbert": ("PT-BERTbase", dict(zip(HARD_TASKS, (72.02, 80.24, 72.92, 74.50, 72.50))), 74.44,
               dict(zip(HARD_TASKS, (71.20, 83.76, 76.34, 82.63, 78.90)))),
}

# PaSeR Appendix C Table 10: mean / variance of cosine similarity on STS-B by gold level (BERT-base).
DENSITY_LEVELS = ("0-1", "1-2", "2-3", "3-4", "4-5")
PASER_TABLE10 = {
    "BERT-[CLS]": dict(zip(DENSITY_LEVELS, ((0.86, 0.006), (0.88, 0.006), (0.89, 0.006), (0.90, 0.004), (0.90, 0.005)))),
    "SimCSE-base": dict(zip(DENSITY_LEVELS, ((0.50, 0.013), (0.67, 0.014), (0.74, 0.010), (0.81, 0.008), (0.87, 0.006)))),
    "PaSeR-base": dict(zip(DENSITY_LEVELS, ((0.55, 0.015), (0.74, 0.011), (0.81, 0.008), (0.86, 0.005), (0.92, 0.003)))),
}

# PaSeR Appendix D (text of Fig. 6): alignment on STS-B, BERT-base. Uniformity is only drawn in the figure.
PASER_ALIGNMENT = {"PaSeR-base": 0.17, "SBERT-base (supervised)": 0.19, "SimCSE-base": 0.24}
