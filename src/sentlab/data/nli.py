"""NLI triples as a corpus (supervised PaSeR, docs/methods.md#supervised-paser).

Two sources, chosen by ``prepare.nli`` (:func:`choose_source`):

* ``simcse``: SimCSE's ``nli_for_simcse.csv`` (SNLI + MNLI; columns ``sent0``
  = premise, ``sent1`` = its entailment hypothesis, ``hard_neg`` = its
  contradiction), found by :func:`sentlab.assets.resolve.resolve_data` ("nli": mirror,
  cache, upstream download);
* ``sick_standin``: a small offline stand-in built from English SICK *train*
  (never trial or test, which are evaluation data; :func:`sick_standin`): one
  triple per ENTAILMENT pair of a premise (``sentence_A``) that also has a
  CONTRADICTION pair, the contradiction's ``sentence_B`` as hard negative;
  a triple holding a sentence pair that SICK test also holds (SICK repeats
  some pairs across splits) is dropped, so SICK-R is not trained on.

``auto`` takes ``simcse`` when the CSV can be had and falls back to the stand-in
otherwise. Written as ``data/corpus/nli.parquet`` with columns ``id`` int64
(0-based data row of the source file; the stand-in: of the entailment pair),
``text`` (the anchor = premise; the annotation stage annotates this column),
``positive``, ``hard_negative``, and Parquet metadata ``sentlab.nli_source`` /
``sentlab.nli_label`` ("NLI stand-in (SICK train)" …) that a trained model's
``sentlab.json`` copies. Corpus name: ``nli``.

Example::

    stats = build_nli("sick_standin", Path("data/raw/SICK/SICK_train.txt"), Path("data/corpus/nli.parquet"))
    table = read_nli("data/corpus/nli.parquet")
"""

from __future__ import annotations

import csv
import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

from ..assets.resolve import Resolved, resolve_data
from ..errors import AssetMissingError, DataFormatError, SentlabError
from ..runtime.io import atomic_path

log = logging.getLogger(__name__)

CORPUS_NAME = "nli"
COLUMNS = ("sent0", "sent1", "hard_neg")
SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string()), ("positive", pa.string()),
                    ("hard_negative", pa.string())])
SOURCES = {"simcse": "SimCSE NLI (SNLI + MNLI)", "sick_standin": "NLI stand-in (SICK train)"}
SICK_TRAIN = "SICK/SICK_train.txt"  # relative to the SICK asset's root (and data/raw)
SICK_TEST = "SICK_test_annotated.txt"  # beside it: its pairs are kept out of the stand-in


def _table(ids, texts, pos, neg) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "text": texts, "positive": pos, "hard_negative": neg},
                    schema=SCHEMA)


def read_nli_csv(path: str | Path, max_rows: Optional[int] = None) -> tuple[pa.Table, dict]:
    """Parse SimCSE's NLI CSV into the corpus schema; (table, counts). Rows with an empty field are dropped
    and counted."""
    path = Path(path)
    ids, texts, pos, neg = [], [], [], []
    rows = 0
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFormatError(path, 1, f"header lacks column(s) {missing} (found {reader.fieldnames})",
                                  "Use SimCSE's nli_for_simcse.csv (header: sent0,sent1,hard_neg).")
        for i, row in enumerate(reader):
            if max_rows is not None and len(ids) >= max_rows:
                break
            rows += 1
            a, b, c = (str(row.get(k) or "").strip() for k in COLUMNS)
            if not (a and b and c):
                continue
            ids.append(i)
            texts.append(a)
            pos.append(b)
            neg.append(c)
    if not ids:
        raise DataFormatError(path, None, "no complete (sent0, sent1, hard_neg) row", "Check the file's contents.")
    return _table(ids, texts, pos, neg), {"rows_read": rows, "incomplete_rows_dropped": rows - len(ids),
                                          "triples": len(ids)}


def sick_standin(path: str | Path) -> tuple[pa.Table, dict]:
    """The offline NLI stand-in from SICK train; (table, counts).

    Premise = ``sentence_A``. A premise with k ENTAILMENT pairs and m ≥ 1
    CONTRADICTION pairs gives k triples, in file order: (premise, j-th
    entailment's ``sentence_B``, (j mod m)-th contradiction's ``sentence_B``).
    Premises with entailments but no contradiction, or the reverse, are
    dropped and counted; NEUTRAL pairs are not used. ``id`` is the entailment
    pair's 0-based data row. Only ``SICK_train.txt`` is accepted: SICK test is
    the SICK-R evaluation set, and a triple whose (premise, positive) or
    (premise, hard negative) is also a pair of ``SICK_test_annotated.txt`` (in
    the same folder; either order) is dropped and counted.
    """
    from .sts import parse_sick

    path = Path(path)
    if path.name != Path(SICK_TRAIN).name:
        raise SentlabError(
            f"The NLI stand-in is built from SICK train only, but was given {path}: SICK trial/test are evaluation "
            f"data (SICK-R) and must not be trained on. Pass the folder's {Path(SICK_TRAIN).name}.")
    rows = parse_sick(path, "train")
    test = path.parent / SICK_TEST
    if not test.is_file():
        raise SentlabError(f"The NLI stand-in needs {test} beside {path.name} "
                           f"to keep SICK test's pairs out of training; "
                           f"restore the SICK folder (SICK_train.txt, SICK_trial.txt, SICK_test_annotated.txt).")
    test_pairs = {frozenset((r["sentence1"], r["sentence2"])) for r in parse_sick(test, "test")}
    entail, contra = defaultdict(list), defaultdict(list)
    for r in rows:
        if r["subset"] == "ENTAILMENT":
            entail[r["sentence1"]].append(r)
        elif r["subset"] == "CONTRADICTION":
            contra[r["sentence1"]].append(r)
    ids, texts, pos, neg = [], [], [], []
    overlap = 0
    for premise, ents in entail.items():  # dicts keep file order
        cons = contra.get(premise)
        for j, e in enumerate(ents if cons else ()):
            hard = cons[j % len(cons)]["sentence2"]
            if {frozenset((premise, e["sentence2"])), frozenset((premise, hard))} & test_pairs:
                overlap += 1
                continue
            ids.append(e["line"] - 2)  # file line (header = 1) -> 0-based data row
            texts.append(premise)
            pos.append(e["sentence2"])
            neg.append(hard)
    if not ids:
        raise DataFormatError(path, None, "no premise (sentence_A) has both an ENTAILMENT and a CONTRADICTION pair",
                              "Use the English SICK train file of the SentEval release.")
    stats = {"pairs_by_label": dict(sorted(Counter(r["subset"] for r in rows).items())),
             "premises": len(set(texts)), "triples": len(ids), "triples_dropped_sick_test_pair": overlap,
             "premises_dropped": {"no_contradiction": sum(p not in contra for p in entail),
                                  "no_entailment": sum(p not in entail for p in contra)}}
    return _table(ids, texts, pos, neg), stats


def choose_source(mode: str) -> tuple[str, Optional[Resolved]]:
    """``prepare.nli`` -> (source, the resolved SimCSE asset or None).

    ``auto``: SimCSE's CSV when the resolver finds or downloads it, else the SICK stand-in (logged);
    ``simcse``: the CSV or the resolver's error; ``sick_standin`` / ``none``: as named.
    """
    if mode in ("sick_standin", "none"):
        return mode, None
    try:
        return "simcse", resolve_data(CORPUS_NAME)
    except AssetMissingError as e:
        if mode == "simcse":
            raise
        log.warning("prepare.nli = auto: SimCSE's NLI triples are not available (%s); using the %s.", e,
                    SOURCES["sick_standin"])
        return "sick_standin", None


def parse_nli(source: str, path: str | Path) -> tuple[pa.Table, dict]:
    """The triples and their counts from SimCSE's CSV (``source`` "simcse") or SICK train ("sick_standin")."""
    if source not in SOURCES:
        raise SentlabError(f"Unknown NLI source {source!r}; allowed: {', '.join(SOURCES)}.")
    return read_nli_csv(path) if source == "simcse" else sick_standin(path)


def build_nli(source: str, path: str | Path, out: str | Path) -> dict:
    """Write ``out`` from :func:`parse_nli`; return the stats."""
    table, counts = parse_nli(source, path)
    write_nli(table, out, source)
    return {"source": source, "label": SOURCES[source], "file": str(path), **counts}


def write_nli(table: pa.Table, out: str | Path, source: str) -> Path:
    out = Path(out)
    table = table.replace_schema_metadata({"sentlab.nli_source": source, "sentlab.nli_label": SOURCES[source]})
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
    return out


def read_nli(path: str | Path = "data/corpus/nli.parquet") -> pa.Table:
    path = Path(path)
    if not path.is_file():
        raise SentlabError(f"{path} not found: the prepare stage writes it unless params.yaml sets prepare.nli: none "
                           f"(auto, simcse or sick_standin build it); or call sentlab.data.nli.load_nli().")
    table = pq.read_table(path)
    missing = [c for c in SCHEMA.names if c not in table.column_names]
    if missing:
        raise DataFormatError(path, None, f"missing column(s) {missing}",
                              "Rebuild it with sentlab.data.nli.load_nli().")
    return table


def nli_sentences(path: str | Path = "data/corpus/nli.parquet", key: str = "fit_on") -> list[str]:
    """The distinct NLI sentences the pipeline has (premise, entailment, contradiction of each triple, in row order,
    first occurrence kept): the "NLI" fit set of BERT-flow / BERT-whitening (SimCSE App. C: fitted on the NLI
    sentences, no labels). ``key`` names the params key in the error when the file is missing."""
    path = Path(path)
    if not path.is_file():
        raise SentlabError(f"{key}: nli needs {path}, which the prepare stage writes unless params.yaml sets "
                           f"prepare.nli: none. Set prepare.nli to auto, simcse or sick_standin and run `dvc repro "
                           f"prepare`, or fit on the STS sentences ({key}: sts_pool).")
    table = read_nli(path)
    cols = [table.column(c).to_pylist() for c in ("text", "positive", "hard_negative")]
    return list(dict.fromkeys(s for row in zip(*cols) for s in row if s and s.strip()))


def load_nli(out: str | Path = "data/corpus/nli.parquet", source: str | Path | None = None,
             max_rows: Optional[int] = None) -> pa.Table:
    """Convert SimCSE's NLI CSV (``source``, default: the resolved "nli" asset) and write ``out``; return the table."""
    if source is None:
        source = resolve_data(CORPUS_NAME).path
    table, _ = read_nli_csv(source, max_rows=max_rows)
    write_nli(table, out, "simcse")
    return read_nli(out)
