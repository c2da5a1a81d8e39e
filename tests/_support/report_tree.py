"""A pipeline output tree (metrics, models, curves) for the report's tests."""

from __future__ import annotations

import json
from pathlib import Path

from sentlab.report import paper_numbers as P
from sentlab.report.paper_tables import STS7

BACKBONE = "sentence-transformers/all-MiniLM-L6-v2"
PAPER_BB = "bert-base-uncased"   # the papers' backbone: the only one whose rows carry a Δ and a † (issue #55)
SICK_WARN = "only 3% of the letters in SICKRelatedness are ASCII: this copy is not the English data set"
PTBERT = {"id": "ptbert", "pseudo_len": 128, "queue_size": 256, "attend_to": "cls"}
PASER = {"id": "paser", "eda": "sr", "phrases": "rake", "top_k": 5, "m": 10.0, "n": 10.0, "pooling": "cls",
         "decoder_layers": 6, "memory_norm": False, "head_lr": None, "epochs": 5}


def _sts(base: float) -> dict:
    vals = {t: base + i for i, t in enumerate(STS7)}
    vals["Avg"] = sum(vals.values()) / 7
    vals["STSBenchmark-dev"] = base + 10
    return vals


def _diag(shift: float) -> dict:
    tasks = {t: {"subset": 50 + shift + i, "full": 60 + shift + i, "subset_pairs": 10, "full_pairs": 100,
                 "positives": 4, "negatives": 6} for i, t in enumerate(STS7[:5])}
    return {"alignment_uniformity": {"STSBenchmark-test": {"alignment": 0.2, "uniformity": -2.0, "positive_pairs": 5,
                                                           "sentences": 50}},
            "hard_subset": {"tasks": tasks, "Avg_subset": 52 + shift, "Avg_full": 62 + shift,
                            "thresholds": {"pos_min_score": 4.0, "neg_max_score": 2.0, "pos_len_diff_gt": 5,
                                           "neg_len_diff_lt": 2}, "length_unit": "whitespace words"},
            "density": {"bins": [{"level": lv, "pairs": 3, "mean": 0.5 + 0.1 * j, "var": 0.01}
                                 for j, lv in enumerate(P.DENSITY_LEVELS)]}}


def _metrics(name, base, backbone=BACKBONE, **extra):
    return {"model": name, "status": "evaluated", "kind": "trained", "backbone": backbone, "profile": "quick",
            **_sts(base), "diagnostics": _diag(base / 10), **extra}


def make_tree(root: Path, backbone: str = BACKBONE) -> Path:
    """A pipeline output tree: baselines, trained methods, an extra-row model, a variant not run in the
    profile, an unreadable metrics file, a trained-but-unevaluated model, a failed train stage, curves."""
    md, mo, cu = root / "reports/metrics", root / "models", root / "reports/curves"
    for d in (md, mo, cu, root / "data"):
        d.mkdir(parents=True)
    (root / "data/prepare_stats.json").write_text(json.dumps({"language_warnings": {"SICKRelatedness": SICK_WARN}}))
    write = lambda name, m: (md / f"{name}.json").write_text(json.dumps({**m, "backbone": backbone}  # noqa: E731
                                                                       if "backbone" in m else m))
    for b, base in (("base-cls", 20.0), ("base-mean", 40.0)):
        write(b, _metrics(b, base, kind="baseline"))
    write("simcse", _metrics("simcse", 70.0, method={"id": "simcse", "max_length": None}))
    write("ptbert", _metrics("ptbert", 72.0, method=PTBERT))
    write("paser_dec2", _metrics("paser_dec2", 60.0, method={**PASER, "decoder_layers": 2}))
    write("posbow_adv", _metrics("posbow_adv", 71.0, extra_rows={"posbow_adv_bow": _sts(69.0),
                                                                  "posbow_adv_pos": _sts(65.0)}))
    write("ptbert_m64", {"model": "ptbert_m64", "status": "not run in this profile"})
    (md / "moco.json").write_text("{ truncated")                       # unreadable metrics file
    (mo / "l2p").mkdir()                                               # trained, never evaluated
    (mo / "l2p" / "sentlab.json").write_text(json.dumps({"method": "l2p", "status": "trained"}))
    (mo / "ct").mkdir()                                                # its train stage failed: no sentlab.json
    header = "step,stsb_dev,alignment,uniformity,loss\n"
    (cu / "simcse.csv").write_text(header + "4,60.0,0.30,-2.0,1.5\n8,62.0,0.25,-2.2,1.2\n")
    (cu / "ptbert.csv").write_text(header + "4,61.0,0.28,-2.1,1.4\n8,63.0,0.22,-2.4,1.1\n12,64.0,0.21,-2.5,1.0\n")
    (cu / "ptbert_m64.csv").write_text(header)                          # not run: empty curve
    (mo / "ptbert_m64").mkdir()
    (mo / "ptbert_m64" / "sentlab.json").write_text(json.dumps({"method": "ptbert",
                                                                 "status": "not run in this profile"}))
    return root
