"""Channel rows of one model (e.g. POS/BOW channels) reuse the main row's embeddings."""

from __future__ import annotations

import pytest

from sentlab.config import Params
from sentlab.nn.encoder import SentenceEncoder
from sentlab.evaluate.sts.protocol import evaluate_table
from sentlab.evaluate.sts.runner import evaluate_encoders
from _support.sts_tables import three_score_table as _table


def test_channel_rows_are_slices_of_one_encoding(tiny_bert):
    model, tok = tiny_bert
    calls = []
    forward = model.forward

    def counting_forward(*a, **kw):
        calls.append(1)
        return forward(*a, **kw)

    model.forward = counting_forward
    main = SentenceEncoder(model, tok, pooling="cls", name="m")
    chan = SentenceEncoder(model, tok, pooling="cls", dims=(0, 16), name="m_bow")
    params = Params(evaluate={"diagnostics": False, "batch_size": 4})
    table = _table()
    out = evaluate_encoders({"m": main, "m_bow": chan}, table, params)
    main_calls = len(calls)
    calls.clear()
    alone = evaluate_table(chan, table, batch_size=4)   # the channel encoded on its own
    assert len(calls) == main_calls                      # ... costs as many forwards as the whole joint run did
    for k in ("STS12", "STSBenchmark", "Avg"):
        assert out["extra_rows"]["m_bow"][k] == pytest.approx(alone[k], abs=1e-6)
