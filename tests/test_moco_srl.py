"""MoCo+SRL: frames with fewer than ``srl_min_args`` core arguments do not build the key (issue 20)."""

import pytest

from sentlab.config import TrainParams
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from tiny import tiny_bert

pytestmark = pytest.mark.usefixtures("one_thread")


def span(text):
    return {"text": text, "start": 0, "end": len(text)}


def frame(pred, arg0=None, arg1=None, neg=None):
    return {"predicate": span(pred), "arg0": arg0 and span(arg0), "arg1": arg1 and span(arg1),
            "argm_neg": neg and span(neg)}


SENTS = ["the cat sat on the mat and slept", "it rains", "dogs do not bark"]
FRAMES = [[frame("sat", arg0="the cat", arg1="on the mat"), frame("slept")],  # the bare verb frame
          [frame("rains")],                                               # only a bare verb
          [frame("bark", arg0="dogs", neg="not")]]                        # one argument + a negation


def keys(tok, **params):
    cls = get_method("moco_srl")
    m = cls(tiny_bert(tok), tok, cls.Params(queue_size=8, **params).resolved(TrainParams(batch_size=4, max_length=16)),
            seed=0)
    return m._augment(Batch(SENTS, extras={"frames": FRAMES})), m


def test_default_drops_frames_without_arguments(tok):
    out, m = keys(tok)
    assert m.params.srl_min_args == 1 and m.export_info()["srl_min_args"] == 1
    assert out == ["the cat sat on the mat", "it rains", "dogs bark not"]


def test_min_args_zero_is_the_previous_behaviour(tok):
    out, _ = keys(tok, srl_min_args=0)
    assert out == ["the cat sat on the mat slept", "rains", "dogs bark not"]


def test_min_args_two(tok):
    out, _ = keys(tok, srl_min_args=2)
    assert out == ["the cat sat on the mat", "it rains", "dogs do not bark"]  # negation is not an argument


def test_min_args_validated():
    with pytest.raises(Exception, match="srl_min_args"):
        get_method("moco_srl").Params(srl_min_args=-1)
