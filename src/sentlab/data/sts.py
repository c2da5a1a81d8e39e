"""Parsers for the STS12–16, STS-B and SICK-R files (SentEval layout), into one table.

The table has one row per scored pair: ``task``, ``subset``, ``split``,
``sentence1``, ``sentence2``, ``score``, ``line`` (1-based line in the input file).
Sentences are kept exactly as in the files (only the line ending is removed),
as docs/evaluation.md asks. Every malformed file raises
:class:`~sentlab.errors.DataFormatError` naming the file and line.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa

from ..assets.resolve import STS_TASKS
from ..config.tasks import STS_TASKS as STS_TASKS_DECLARED
from ..errors import DataFormatError

log = logging.getLogger(__name__)

TASKS = STS_TASKS_DECLARED   # the seven STS tasks, as declared (sentlab.config.tasks)

SCHEMA = pa.schema([
    ("task", pa.string()),
    ("subset", pa.string()),
    ("split", pa.string()),
    ("sentence1", pa.string()),
    ("sentence2", pa.string()),
    ("score", pa.float64()),
    ("line", pa.int32()),
])

FIX = "Restore the file from the upstream release (or the mirror) and run again."


def read_lines(path: Path) -> list[str]:
    """Decode ``path`` as UTF-8 and split into lines; bad bytes name their line."""
    path = Path(path)
    raw = path.read_bytes()
    if not raw.strip():
        raise DataFormatError(path, None, "the file is empty", FIX)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataFormatError(path, line, f"bytes that are not UTF-8 ({raw[e.start:e.start + 4]!r})", FIX) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def _score(value: str, path: Path, line: int, lo: float = 0.0, hi: float = 5.0) -> float:
    try:
        s = float(value)
    except ValueError:
        raise DataFormatError(path, line, f"score {value!r} is not a number", FIX) from None
    if not math.isfinite(s) or not lo <= s <= hi:
        raise DataFormatError(path, line, f"score {s} is outside [{lo}, {hi}]", FIX)
    return s


def parse_senteval_sts(input_path: Path, gs_path: Path, task: str, subset: str) -> list[dict]:
    """STS12–16: ``STS.input.<subset>.txt`` (sentence TAB sentence) + ``STS.gs.<subset>.txt``.

    An empty gold line means the pair is unscored and is dropped (SentEval).
    """
    pairs = read_lines(input_path)
    gold = read_lines(gs_path)
    if len(pairs) != len(gold):
        raise DataFormatError(gs_path, None,
                              f"{len(gold)} gold lines for {len(pairs)} sentence pairs in {input_path.name}",
                              "The two files must have one line per pair. " + FIX)
    rows = []
    for i, (pair, g) in enumerate(zip(pairs, gold), start=1):
        fields = pair.split("\t")
        if len(fields) != 2:
            raise DataFormatError(input_path, i, f"expected 2 tab-separated sentences, found {len(fields)} fields", FIX)
        if not g.strip():
            continue
        rows.append(dict(task=task, subset=subset, split="test", sentence1=fields[0], sentence2=fields[1],
                         score=_score(g.strip(), gs_path, i), line=i))
    return rows


def parse_stsb(path: Path, split: str) -> list[dict]:
    """STS-B ``sts-<split>.csv``: genre, file, year, id, score, sentence1, sentence2 [, extra fields]."""
    rows = []
    for i, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) < 7:
            raise DataFormatError(path, i, f"expected at least 7 tab-separated fields, found {len(fields)}", FIX)
        rows.append(dict(task="STSBenchmark", subset=fields[0], split=split, sentence1=fields[5], sentence2=fields[6],
                         score=_score(fields[4], path, i), line=i))
    return rows


SICK_HEADER = ["pair_ID", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"]


def parse_sick(path: Path, split: str) -> list[dict]:
    """SICK ``SICK_<split>.txt``: header, then pair_ID, sentence_A, sentence_B, relatedness_score,
    entailment_judgment."""
    lines = read_lines(path)
    header = lines[0].split("\t")
    if header[:5] != SICK_HEADER:
        raise DataFormatError(path, 1, f"header is {header[:5]}, expected {SICK_HEADER}", FIX)
    rows = []
    for i, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != 5:
            raise DataFormatError(path, i, f"expected 5 tab-separated fields, found {len(fields)}", FIX)
        rows.append(dict(task="SICKRelatedness", subset=fields[4], split=split, sentence1=fields[1],
                         sentence2=fields[2], score=_score(fields[3], path, i, 1.0, 5.0), line=i))
    return rows


def parse_all(sts_root: Path, sick_root: Path) -> pd.DataFrame:
    """Every task's scored pairs as one table (``sts_root``/``sick_root``: the folders holding STS/ and SICK/)."""
    rows: list[dict] = []
    for task, (folder, subsets) in STS_TASKS.items():
        for subset in subsets:
            d = Path(sts_root) / "STS" / folder
            rows += parse_senteval_sts(d / f"STS.input.{subset}.txt", d / f"STS.gs.{subset}.txt", task, subset)
    for split in ("train", "dev", "test"):
        rows += parse_stsb(Path(sts_root) / "STS" / "STSBenchmark" / f"sts-{split}.csv", split)
    for split, name in (("train", "SICK_train.txt"), ("trial", "SICK_trial.txt"), ("test", "SICK_test_annotated.txt")):
        rows += parse_sick(Path(sick_root) / "SICK" / name, split)
    return pd.DataFrame(rows, columns=SCHEMA.names)


def all_sides(sts_root: Path, sick_root: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """ConSERT's unsupervised training sentences (yym6472/ConSERT ``main.py --train_data stssick --no_pair``,
    ``data_utils.load_datasets``): both sides of every pair in the seven tasks' files, in file order, repeats kept,
    each line stripped before it is split; STS12–16 read every line of ``STS.input`` (pairs without a gold score
    too: STS15/16's unscored pairs), a line without a second sentence gives its first only; STS-B train/dev/test
    and SICK train/trial/test every pair (SICK's header skipped). ``skip``: tasks left out (the prepare stage's
    language warnings, as for ``sts_unlabeled``)."""
    out: list[str] = []
    for task, (folder, subsets) in STS_TASKS.items():
        if task in skip:
            continue
        for subset in subsets:
            for line in read_lines(Path(sts_root) / "STS" / folder / f"STS.input.{subset}.txt"):
                fields = line.strip().split("\t")
                out.append(fields[0])
                if len(fields) == 2 and fields[1]:
                    out.append(fields[1])
    if "STSBenchmark" not in skip:
        for split in ("train", "dev", "test"):
            for line in read_lines(Path(sts_root) / "STS" / "STSBenchmark" / f"sts-{split}.csv"):
                if line.strip():
                    fields = line.strip().split("\t")
                    out += [fields[5], fields[6]]
    if "SICKRelatedness" not in skip:
        for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
            lines = [ln.strip() for ln in read_lines(Path(sick_root) / "SICK" / name) if ln.strip()]
            for line in lines[1:]:
                fields = line.split("\t")
                out += [fields[1], fields[2]]
    return out


def english_share(sentences) -> float:
    """Share of letters that are ASCII: a cheap check that a mirror file is the English data set."""
    letters = ascii_letters = 0
    for s in sentences:
        for ch in s:
            if ch.isalpha():
                letters += 1
                ascii_letters += ch.isascii()
    return ascii_letters / letters if letters else 1.0


def language_warnings(table: pd.DataFrame, threshold: float = 0.9) -> dict[str, str]:
    """Tasks whose text is not (mostly) English, e.g. a translated SICK in a mirror."""
    out = {}
    for task, g in table.groupby("task"):
        share = english_share(list(g.sentence1.head(500)) + list(g.sentence2.head(500)))
        if share < threshold:
            out[task] = (f"only {share:.0%} of the letters in {task} are ASCII: this copy is not the English data set "
                         f"(a translation?); its scores are not comparable to the papers'")
    return out


def write_table(df: pd.DataFrame, path: Path) -> None:
    import pyarrow.parquet as pq

    from ..runtime.io import atomic_path

    table = pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_sts_table(path: str | Path = "data/sts/sts.parquet") -> pd.DataFrame:
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        from ..errors import SentlabError

        raise SentlabError(f"STS table {path} not found. Run the prepare stage first (`dvc repro prepare`).")
    return pq.read_table(path).to_pandas()


PIPELINE_TABLE = Path("data/sts/sts.parquet")


def sts_table(path: str | Path | None = None) -> tuple[pd.DataFrame, str]:
    """(the STS table, where it came from) for an evaluation outside the pipeline: ``path`` when given (a table
    the prepare stage wrote), else this directory's ``data/sts/sts.parquet`` when it is a pipeline workspace, else
    the table parsed from the STS and SICK assets wherever they are (the mirror, the cache, or a download:
    :func:`sentlab.assets.resolve.resolve_data`), as the prepare stage parses them: ``sentlab evaluate`` works in any
    directory."""
    if path is not None:
        return read_sts_table(path), str(path)
    if PIPELINE_TABLE.is_file():
        return read_sts_table(PIPELINE_TABLE), str(PIPELINE_TABLE)
    from ..assets.resolve import resolve_data

    sts, sick = resolve_data("senteval_sts"), resolve_data("sick")
    return parse_all(sts.root, sick.root), f"STS from {sts.root} ({sts.source}), SICK from {sick.root} ({sick.source})"


def eval_split(table: pd.DataFrame, task: str) -> pd.DataFrame:
    """The evaluation pairs of one task: test for all seven, ``dev`` for STSBenchmark-dev."""
    if task == "STSBenchmark-dev":
        return table[(table.task == "STSBenchmark") & (table.split == "dev")]
    return table[(table.task == task) & (table.split == "test")]
