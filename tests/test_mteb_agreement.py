"""The evaluator against public MTEB numbers of all-MiniLM-L6-v2 (mean pooling).

MTEB uses the same test pairs and the "all" aggregation for STS12–16 and STS-B,
so the numbers must agree to within 0.01 (docs/evaluation.md). SICK-R is not compared: MTEB's
SICK-R (77.58) scores all 9,927 SICK pairs, while SentEval, the papers and sentlab score
the 4,927-pair test split (a different protocol; the test pins that split's size).

CI encodes STS16 (five subsets: the "all" aggregation) and STS-B (the split) with the real model, about a
fifth of the six tasks' 21,076 distinct sentences (the six took 150 s of CI's 20 minutes); the other four
tasks' parsed pairs are pinned by a hash, taken when all six agreed with MTEB (the encoder and the aggregation
are the same code for every task). Every quick `make repro` compares all six: PT-BERT Table 3's row
"all-MiniLM-L6-v2 mean vs MTEB" (reports/tables/ptbert_table3.md).
"""

from __future__ import annotations

import hashlib

import pytest

from sentlab.assets.resolve import load_model
from sentlab.data.sts import parse_all
from sentlab.nn.encoder import SentenceEncoder
from sentlab.evaluate.sts.protocol import evaluate_table
from sentlab.report.paper_numbers import MTEB_MINILM_MEAN


# sha256 (first 16 hex digits) of each task's test pairs as parsed from the mirror: one line
# "subset<TAB>sentence1<TAB>sentence2<TAB>score (4 decimals)" per pair, in the table's order. Taken at 2026-11-27
# with all six tasks within 0.01 of MTEB (the test below, then run on the six). A change of the parsing that moves
# one: run test_minilm_mean_matches_mteb on the six tasks before taking the new hashes.
PARSED_PAIRS_SHA256 = {"STS12": "192e726bc35aa3d4", "STS13": "3122ef048c590948", "STS14": "25f164f0c0ac5db7",
                       "STS15": "88d3850d192cf0c6", "STS16": "c4e8d3c76d77b1c0", "STSBenchmark": "3e097cd219b07424"}


def _pairs_sha256(df) -> str:
    h = hashlib.sha256()
    for r in df[["subset", "sentence1", "sentence2", "score"]].itertuples(index=False):
        h.update(f"{r.subset}\t{r.sentence1}\t{r.sentence2}\t{float(r.score):.4f}\n".encode())
    return h.hexdigest()[:16]


def test_the_parsed_test_pairs_are_those_that_agreed_with_mteb(mirror):
    from sentlab.data.sts import eval_split

    table = parse_all(mirror, mirror)
    assert {t: _pairs_sha256(eval_split(table, t)) for t in PARSED_PAIRS_SHA256} == PARSED_PAIRS_SHA256


@pytest.mark.slow
def test_minilm_mean_matches_mteb(mirror):
    table = parse_all(mirror, mirror)
    model, tok = load_model("sentence-transformers/all-MiniLM-L6-v2")
    enc = SentenceEncoder(model, tok, pooling="mean")
    tasks = ("STS16", "STSBenchmark")
    res = evaluate_table(enc, table, tasks=tasks, with_dev=False)
    for task in tasks:
        assert res[task] == pytest.approx(MTEB_MINILM_MEAN[task], abs=0.01), task
    assert MTEB_MINILM_MEAN["SICKRelatedness"] is None   # 9,927 pairs in MTEB: never put beside the test split


def test_sick_test_split_is_the_4927_english_pairs(mirror):
    from sentlab.data.sts import eval_split

    sick = eval_split(parse_all(mirror, mirror), "SICKRelatedness")
    assert len(sick) == 4927
    text = "".join(sick.sentence1.head(200))
    assert sum(c.isascii() for c in text) / len(text) > 0.99     # the English SentEval files


def _mteb_stsb_task(table):
    """MTEB's own STSBenchmark task class with its data set built from the local mirror (no hub):
    the STS-B test pairs sentlab evaluates, scores 0–5 as MTEB's copy has them."""
    from datasets import Dataset
    from mteb.tasks.sts.eng.sts_benchmark_sts import STSBenchmarkSTS

    from sentlab.data.sts import eval_split

    test = eval_split(table, "STSBenchmark")
    task = STSBenchmarkSTS()
    task.dataset = {"default": {"test": Dataset.from_dict({"sentence1": list(test.sentence1),
                                                           "sentence2": list(test.sentence2),
                                                           "score": [float(s) for s in test.score]})}}
    task.data_loaded = True
    return task, len(test)


@pytest.mark.parametrize("pooling", ["mean", "mask"])
def test_mteb_sts_evaluator_agrees_with_sentlab_evaluate(mirror, tok, one_thread, pooling):
    """MTEB's STS evaluator (``AnySTSEvaluator``: MTEB's dataloader batches, MTEB's call of
    ``SentenceEncoder.encode`` and ``similarity_pairwise``; ``AbsTaskSTS``'s score normalisation and
    Spearman) scores a sentlab encoder as `sentlab evaluate` does, within 0.01, on all 1,379 STS-B
    test pairs. A tiny random BERT keeps it fast (the numbers are low; the agreement is the point);
    ``mask`` runs the PromptBERT template path.

    (The evaluator is called directly: ``AbsTask.evaluate`` also demands MTEB's ``mteb_model_meta``
    property, a model registry record sentlab's encoder does not carry.)"""
    pytest.importorskip("mteb", reason="needs the `mteb` package (optional: pip install mteb, or the test extra)")
    from mteb._evaluators.any_sts_evaluator import AnySTSEvaluator
    from mteb.timing import TimingStack
    from tiny import tiny_bert

    table = parse_all(mirror, mirror)
    enc = SentenceEncoder(tiny_bert(tok, initializer_range=0.2, max_position_embeddings=512), tok, pooling=pooling)
    task, n = _mteb_stsb_task(table)
    data = task.dataset["default"]["test"]
    evaluator = AnySTSEvaluator(data, task.column_names, task_metadata=task.metadata, hf_split="test",
                                hf_subset="default", input1_prompt_type=None, input2_prompt_type=None,
                                timer=TimingStack())
    raw = evaluator(enc, encode_kwargs={"batch_size": 128})
    scores = task._calculate_scores(raw, [task._normalize(x) for x in data["score"]])
    ours = evaluate_table(enc, table, tasks=("STSBenchmark",), with_dev=False)
    assert n == 1379
    assert 100 * scores["cosine_spearman"] == pytest.approx(ours["STSBenchmark"], abs=0.01)
    assert 100 * scores["spearman"] == pytest.approx(ours["STSBenchmark"], abs=0.01)  # via enc.similarity_pairwise
