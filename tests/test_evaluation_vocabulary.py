"""The evaluation's vocabulary, declared once (issue #67 §2). A pooling is declared once
(``sentlab.config.poolings.POOLINGS``): a new row there shows up
everywhere a pooling is named — the encoder, the sentence-transformers export, the params that name a pooling
(``evaluate.pooling``, ``evaluate.baselines``, ``evaluate.whitening.pooling``), the baseline stage list,
``sentlab evaluate --pooling``, ``sentlab methods`` and the model card — with no other file edited. A method sets
its exported pooling one way, and ``evaluate.pooling`` evaluates a trained model another way without retraining,
under its own embedding-cache key. A task is declared once (``sentlab.config.tasks.TASKS``) and reaches the
params, the suites' lists and the report."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
NEW_ROW = ('    Pooling("last3_mean", "the mean of the last three layers\' token averages", layers=(-1, -2, -3),\n'
           '            baseline="the backbone\'s mean of its last three layers (no training)"),\n')


def _with_row(module: str, before: str) -> str:
    """A child script's first lines: ``sentlab.config.<module>`` loaded from its source with ``sys.argv[1]`` (the
    new declaration rows) inserted before the text ``before`` (the end of its table), so that every later import
    sees the new rows."""
    return textwrap.dedent(f'''
        import importlib.util, json, sys
        from pathlib import Path
        import sentlab
        path = Path(sentlab.__file__).parent / "config" / "{module}.py"
        src = path.read_text()
        end = src.index({before!r})
        src = src[:end] + sys.argv[1] + src[end:]
        spec = importlib.util.spec_from_file_location("sentlab.config.{module}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["sentlab.config.{module}"] = mod
        exec(compile(src, str(path), "exec"), mod.__dict__)
        ''')


# Run in a child: the declared poolings are read when the package is imported (pydantic's Literal types, the CLI's
# choices), so the new row goes into pooling.py's source before anything imports it; nothing else is edited.
CHILD = _with_row("poolings", ')}\n"""Every pooling') + textwrap.dedent('''

    import torch
    from types import SimpleNamespace
    from sentlab.nn.encoder import pool, SentenceEncoder
    from sentlab.config.sections import EvaluateParams, WhiteningParams
    from sentlab.config import load_params
    from sentlab.stages.stage_list import SUITES, stage_list_for
    from sentlab.evaluate.baselines.stage import DESCRIPTIONS
    from sentlab.export import st
    from sentlab.hub.card import _usage
    from sentlab.cli import build_parser

    h = [torch.full((1, 2, 1), float(v)) for v in (1, 2, 4, 8)]   # hidden states: embeddings, 3 layers
    out = SimpleNamespace(last_hidden_state=h[-1], hidden_states=tuple(h))
    pooled = pool(out, torch.ones(1, 2, dtype=torch.long), "last3_mean").flatten().tolist()
    text = Path(sys.argv[2]).read_text().replace("baselines: [cls,", "baselines: [last3_mean, cls,", 1)
    Path("params.yaml").write_text(text)
    params = load_params(Path("params.yaml"))
    args = build_parser().parse_args(["evaluate", "--model", "m", "--pooling", "last3_mean"])
    print(json.dumps({
        "pooled": pooled,
        "evaluate_pooling": EvaluateParams(pooling="last3_mean").pooling,
        "baselines": EvaluateParams(baselines=["last3_mean", "whitening"]).baselines,
        "whitening": WhiteningParams(pooling="last3_mean").pooling,
        "stage_list": stage_list_for(params)["baselines"],
        "suite_poolings": list(SUITES["transfer"]),
        "description": DESCRIPTIONS.get("last3_mean"),
        "st_layers": st.LAYERS.get("last3_mean"),
        "needs_sentlab": st.needs_sentlab({"pooling": "last3_mean"}),
        "cli": args.pooling,
        "card": "last three layers" in _usage("m", {"pooling": "last3_mean"}),
    }))
''')


def test_a_pooling_added_in_its_one_module_shows_up_everywhere(tmp_path):
    """One row added to POOLINGS (no other file edited): the encoder computes it, every pooling param accepts it,
    the baseline stage list and descriptions list it, the export writes it with LayerMeanPooling and the CLI and
    the model card know it."""
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", CHILD, NEW_ROW, str(REPO / "params.yaml")], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["pooled"] == pytest.approx([(2 + 4 + 8) / 3], rel=1e-6)   # the last three layers' averages, averaged
    assert got["evaluate_pooling"] == "last3_mean" and got["whitening"] == "last3_mean"
    assert got["baselines"] == ["last3_mean", "whitening"]
    assert got["stage_list"] == ["last3_mean", "cls", "mean", "first_last", "whitening", "bert_flow"]
    assert got["suite_poolings"] == ["cls", "mean", "first_last", "last3_mean"]   # transfer@base-<pooling>
    assert got["description"] == "the backbone's mean of its last three layers (no training)"
    assert got["st_layers"] == [-1, -2, -3] and got["needs_sentlab"] is True
    assert got["cli"] == "last3_mean" and got["card"] is True


def test_an_undeclared_pooling_is_refused_by_the_params_and_the_encoder(tiny_bert):
    from pydantic import ValidationError

    from sentlab.config.sections import EvaluateParams
    from sentlab.nn.encoder import SentenceEncoder

    assert EvaluateParams(pooling="top2_mean").pooling == "top2_mean"
    with pytest.raises(ValidationError, match="pooling"):
        EvaluateParams(pooling="max")
    with pytest.raises(ValueError, match="unknown pooling 'max'; allowed: cls, mean, first_last, top2_mean, mask"):
        SentenceEncoder(*tiny_bert, pooling="max")


def test_one_way_for_a_method_to_set_its_pooling():
    """A method whose Params have a ``pooling`` param exports that; it may not also set ``inference_pooling``
    (PaSeR's class said cls while it exported ``params.pooling``)."""
    from sentlab.methods import registered
    from sentlab.methods.base import Method, MethodParams

    paser = registered()["paser"]
    assert "inference_pooling" not in paser.__dict__ and "inference_pooling" not in registered()["ct"].__dict__

    class WithParam(MethodParams):
        pooling: str = "mean"

    with pytest.raises(TypeError, match="drop its `inference_pooling = 'cls'`"):
        type("Both", (Method,), {"Params": WithParam, "inference_pooling": "cls"})
    with pytest.raises(ValueError, match="unknown pooling 'max'"):
        type("Undeclared", (Method,), {"inference_pooling": "max"})


def test_a_method_exports_the_pooling_of_its_param():
    """The exported pooling of a method with a ``pooling`` param is the param's value, through the one property."""
    from sentlab.methods import registered

    cls = registered()["consert"]
    p = cls.Params(pooling="first_last")
    m = object.__new__(cls)
    torch.nn.Module.__init__(m)
    m.params = p
    assert m.pooling == "first_last"
    m.params = cls.Params()
    assert m.pooling == "top2_mean"      # ConSERT's default param, not a class attribute


@pytest.fixture
def trained_folder(tiny_bert, tmp_path):
    """A trained model folder (weights, tokenizer, sentlab.json) whose own pooling is cls."""
    net, tok = tiny_bert
    folder = tmp_path / "simcse"
    net.save_pretrained(folder)
    tok.save_pretrained(folder)
    (folder / "sentlab.json").write_text(json.dumps({"method": "simcse", "pooling": "cls", "status": "trained"}))
    return folder


def test_evaluate_pooling_changes_the_vectors_and_the_cache_key(trained_folder, tmp_path, one_thread):
    """``evaluate.pooling`` null or the model's own: its own encoder (nothing moves); another pooling: the same
    weights pooled that way, other vectors under another cache key (never one pooling's vectors for another)."""
    from sentlab.evaluate.sts.cache import embedding_cache
    from sentlab.evaluate.sts.runner import build_encoders, evaluation_pooling, read_model_info

    info = read_model_info(trained_folder)
    assert evaluation_pooling(None, info) is None and evaluation_pooling("cls", info) is None
    assert evaluation_pooling("mean", info) == "mean"
    own = build_encoders(str(trained_folder), pooling=evaluation_pooling(None, info), device="cpu", workers=1,
                         name="simcse")["simcse"]
    other = build_encoders(str(trained_folder), pooling=evaluation_pooling("mean", info), device="cpu", workers=1,
                           name="simcse")["simcse"]
    assert (own.pooling, other.pooling) == ("cls", "mean")
    sents = ["a man plays a guitar", "the cat sat on the mat", "two dogs run"]
    with embedding_cache(root=tmp_path / "cache") as cache:
        a, b = cache.embed(own, sents), cache.embed(other, sents)
        assert cache.key(own, sents, 128) != cache.key(other, sents, 128)
        assert cache.misses == 2 and cache.hits == 0
        again = cache.embed(other, sents)
        assert cache.hits == 1
    tokens = own.tokenizer(sents, padding=True, return_tensors="pt")
    with torch.no_grad():
        last = own.model(**tokens).last_hidden_state
    m = tokens["attention_mask"].unsqueeze(-1).float()
    np.testing.assert_allclose(a, last[:, 0].numpy(), atol=1e-5)                          # [CLS]
    np.testing.assert_allclose(b, ((last * m).sum(1) / m.sum(1)).numpy(), atol=1e-5)      # the masked mean
    np.testing.assert_array_equal(again, b)


TASK_ROWS = ('    Task("STS17", "sts", "STS17", needs=("sts",), sts_all=True, mteb=("STS17", "rev17", 250)),\n'
             '    Task("SICKE", "transfer", "SICK-E", keys=("SICKE", "SICKE_F1"), needs=("senteval",)),\n')
TASK_CHILD = _with_row("tasks", ')\n"""Every task') + textwrap.dedent('''

    from sentlab.config.sections import TransferParams
    from sentlab.data import sts
    from sentlab.evaluate.suites import transfer_data
    from sentlab.report import protocol_table, seeds_csv, significance, senteval_results
    import importlib
    resolve = importlib.import_module("sentlab.report.paper_tables.resolve")
    spec = importlib.import_module("sentlab.report.paper_tables.spec")
    mteb = importlib.import_module("sentlab.evaluate.sts.mteb_results")
    from sentlab.hub.card import _results
    print(json.dumps({
        "params": TransferParams(tasks=["SICKE", "MR"]).tasks,
        "sts": list(sts.TASKS), "transfer": list(transfer_data.TASKS),
        "protocol_all": list(protocol_table.STS5), "seeds_csv": list(seeds_csv.TASKS),
        "significance": list(significance.TESTED), "senteval": list(senteval_results.SUBSET_TASKS),
        "transfer_keys": list(resolve.TRANSFER_KEYS), "cols3": list(spec.COLS3), "hard": list(spec.COLS_HARD),
        "label": spec.LABELS.get("SICKE"),
        "mteb": mteb.TASKS.get("STS17"),
        "card": "STS17" in _results({"model": "m", "STS17": 1.0}),
    }))
''')


def test_a_task_added_in_its_one_module_shows_up_everywhere(tmp_path):
    """Rows added to TASKS (sentlab.config.tasks; no other file edited): an STS task in the "all" setting and a
    transfer task with two keys reach the params' validation, the data and suite lists, the report's columns and
    keys, and the model card."""
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", TASK_CHILD, TASK_ROWS], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    seven = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    five = seven[:5]
    assert got["params"] == ["SICKE", "MR"]
    assert got["sts"] == [*seven, "STS17"] and got["transfer"][-1] == "SICKE"
    assert got["protocol_all"] == got["senteval"] == [*five, "STS17"]
    assert got["seeds_csv"] == [*seven, "STS17", "Avg", "STSBenchmark-dev"]
    assert got["significance"] == [*seven, "STS17", "Avg"]
    assert got["transfer_keys"][-3:] == ["SICKE", "SICKE_F1", "TransferAvg"]
    assert got["cols3"] == ["STS12-16", "STSBenchmark", "SICKRelatedness"]
    assert got["hard"] == [*five, "STS17", "Avg"]
    assert got["label"] == "SICK-E" and got["card"] is True
    assert got["mteb"] == ["STS17", "rev17", 250]              # its MTEB result JSON is written by the stages
