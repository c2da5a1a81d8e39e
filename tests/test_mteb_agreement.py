"""The evaluator against public MTEB numbers of all-MiniLM-L6-v2 (mean pooling).

MTEB uses the same test pairs and the "all" aggregation for STS12–16 and STS-B,
so the numbers must agree to within 0.01 (SPEC §2). SICK-R is not compared: the
local mirror's SICK is a translation (see README, "Data warning").
"""

from __future__ import annotations

import pytest

from sentlab.assets import load_model
from sentlab.data.sts import parse_all
from sentlab.encoder import SentenceEncoder
from sentlab.evaluate.protocol import evaluate_table
from sentlab.report.paper_numbers import MTEB_MINILM_MEAN


@pytest.mark.slow
def test_minilm_mean_matches_mteb(mirror):
    table = parse_all(mirror, mirror)
    table = table[table.task != "SICKRelatedness"]
    model, tok = load_model("sentence-transformers/all-MiniLM-L6-v2")
    enc = SentenceEncoder(model, tok, pooling="mean")
    res = evaluate_table(enc, table, tasks=("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark"), with_dev=False)
    for task in ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark"):
        assert res[task] == pytest.approx(MTEB_MINILM_MEAN[task], abs=0.01), task
