"""Small STS tables and encoders for the evaluation tests."""

from __future__ import annotations

import numpy as np
import pandas as pd


class LookupEncoder:
    """An encoder whose embedding of each sentence is fixed in a dict; counts calls."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.encoded: list[str] = []

    def encode(self, sentences, batch_size=128, **kw):
        self.encoded += list(sentences)
        return np.array([self.table[s] for s in sentences], dtype=np.float32)


def three_score_table():
    rows = []
    tasks = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    for t in tasks:
        for i, sc in enumerate([0.0, 2.5, 5.0]):
            rows.append(dict(task=t, subset="s", split="test", sentence1=f"{t}-{i}", sentence2="shared", score=sc,
                             line=i + 1))
    for i, sc in enumerate([1.0, 4.0]):
        rows.append(dict(task="STSBenchmark", subset="s", split="dev", sentence1=f"dev-{i}", sentence2="shared",
                         score=sc, line=i + 1))
    return pd.DataFrame(rows)


def random_word_table() -> pd.DataFrame:
    words = "a man woman plays guitar dog runs beach cat sleeps rain sun child reads book car".split()
    rng = np.random.default_rng(0)
    rows = []
    for t in ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"):
        for i in range(8):
            s1 = " ".join(rng.choice(words, size=int(rng.integers(3, 8))))
            s2 = " ".join(rng.choice(words, size=int(rng.integers(3, 8))))
            rows.append(dict(task=t, subset="s", split="test", sentence1=f"{s1} {t}", sentence2=s2,
                             score=float(rng.uniform(0, 5))))
    for i in range(8):
        rows.append(dict(task="STSBenchmark", subset="s", split="dev", sentence1=f"dev {i} a man", sentence2=f"dev {i}",
                         score=float(rng.uniform(0, 5))))
    return pd.DataFrame(rows)


def nli_corpus(tmp_path, n=40):
    import pyarrow as pa

    from sentlab.data.nli import SCHEMA, write_nli

    texts = [f"premise {i // 2} about {'cats' if i % 3 else 'dogs'}" for i in range(n)]   # 34 distinct
    pos = [f"entailed {i} here" for i in range(n)]
    neg = [f"contradicted {i} there" for i in range(n)]
    table = pa.Table.from_arrays([pa.array(range(n), pa.int64()), pa.array(texts), pa.array(pos), pa.array(neg)],
                                 schema=SCHEMA)
    (tmp_path / "data/corpus").mkdir(parents=True, exist_ok=True)
    write_nli(table, tmp_path / "data/corpus/nli.parquet", "sick_standin")
    return list(dict.fromkeys(s for row in zip(texts, pos, neg) for s in row))


def sts_pairs_table(pairs: dict, seed: int = 0, noise: float = 1.0):
    """An STS test table with ``pairs`` (task -> pair count), sentences ``<task>-<i>-a/b``, and random 8-d embeddings
    (the lookup) whose cosine follows the gold score loosely (``noise`` scales the second vector's noise)."""
    rng = np.random.default_rng(seed)
    rows, lookup = [], {}
    for task, n in pairs.items():
        gold = rng.uniform(0, 5, n)
        for i in range(n):
            a, b = f"{task}-{i}-a", f"{task}-{i}-b"
            va = rng.normal(size=8)
            lookup[a], lookup[b] = va, va * gold[i] / 5 + rng.normal(size=8) * noise
            rows.append({"task": task, "split": "test", "subset": "x", "sentence1": a, "sentence2": b,
                         "score": gold[i]})
    return pd.DataFrame(rows), lookup
