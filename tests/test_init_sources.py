"""sentlab.json's ``init``: where each module's weights came from (Method.init_sources)."""

from __future__ import annotations

from sentlab.config import TrainParams
from sentlab.methods import get_method


def _make(tiny_bert, mid, **kw):
    enc, tok = tiny_bert
    cls = get_method(mid)
    return cls(enc, tok, cls.Params(**kw).resolved(TrainParams(max_length=32)), seed=1)


def test_init_sources_name_random_modules_and_copies(tiny_bert):
    enc, _ = tiny_bert
    enc.sentlab_init = "checkpoint"  # what load_model records
    assert _make(tiny_bert, "simcse").init_sources() == {"encoder": "checkpoint", "mlp": "random"}
    moco = _make(tiny_bert, "moco").init_sources()
    assert moco["encoder"] == "checkpoint" and moco["key_encoder"] == "copy of encoder"
    assert moco["mlp"] == "random" and moco["key_mlp"] == "copy of mlp"
    del enc.sentlab_init
    assert _make(tiny_bert, "simcse").init_sources()["encoder"] == "given"  # built by the caller (tests)
