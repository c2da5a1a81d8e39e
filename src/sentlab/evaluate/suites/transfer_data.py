"""Loaders for SentEval's seven transfer tasks (Conneau & Kiela 2018), in SentEval's ``data/downstream`` layout.

Files, encodings and parsing follow SentEval's own task classes: MR/CR/SUBJ/MPQA are one sentence per line
(Latin-1, ``str.splitlines``), the first file of each pair labelled 1 (pos; SUBJ: objective); SST2 is
``sentence TAB label`` (UTF-8); TREC is ``COARSE:fine question`` (Latin-1, six coarse classes); MRPC is
SentEval's tab-separated ``Quality, #1 ID, #2 ID, #1 String, #2 String`` with a header row (UTF-8; a BOM is
accepted). Sentences are whitespace-tokenised and re-joined with single spaces, as SimCSE's batcher does, and
every split is sorted as SentEval sorts it (by token count, then label; MRPC by both lengths, then label),
because SentEval's seeded stratified folds depend on that order.

The data are resolved like STS (:mod:`sentlab.assets.resolve`): the mirror (``SENTLAB_DATA_MIRROR``), the cache, then
the upstream download of SimCSE's ``senteval.tar`` (SentEval's ``data/downstream`` as fetched by its
``get_transfer_data.bash``, MRPC included). Each file's record count is checked against the published size;
a mismatch is one :class:`~sentlab.errors.SentlabError` paragraph naming the file and the fix.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...assets import resolve as assets
from ...config.tasks import TRANSFER_TASKS as TASKS   # as declared (sentlab.config.tasks)
from ...errors import SentlabError

# task -> (folder, {file: records}); records are sentences, or pairs for MRPC (header excluded)
LAYOUT: dict[str, tuple[str, dict[str, int]]] = {
    "MR": ("MR", {"rt-polarity.pos": 5331, "rt-polarity.neg": 5331}),
    "CR": ("CR", {"custrev.pos": 2407, "custrev.neg": 1368}),
    "SUBJ": ("SUBJ", {"subj.objective": 5000, "subj.subjective": 5000}),
    "MPQA": ("MPQA", {"mpqa.pos": 3312, "mpqa.neg": 7294}),
    "SST2": ("SST/binary", {"sentiment-train": 67349, "sentiment-dev": 872, "sentiment-test": 1821}),
    "TREC": ("TREC", {"train_5500.label": 5452, "TREC_10.label": 500}),
    "MRPC": ("MRPC", {"msr_paraphrase_train.txt": 4076, "msr_paraphrase_test.txt": 1725}),
}
EXPECTED = {task: dict(files) for task, (_, files) in LAYOUT.items()}
TREC_CLASSES = {"ABBR": 0, "DESC": 1, "ENTY": 2, "HUM": 3, "LOC": 4, "NUM": 5}
NCLASSES = {"TREC": 6}

for _task, (_folder, _files) in LAYOUT.items():
    _name = f"senteval_{_task.lower()}"
    assets.ASSETS.setdefault(_name, assets.DataAsset(
        _name, tuple(f"{_folder}/{f}" for f in _files), f"{assets.SIMCSE_DATA}/senteval.tar",
        archive_prefix="downstream/", description=f"SentEval transfer task {_task} (SentEval layout)"))


@dataclass
class Split:
    """One split: sentences (or sentence pairs ``b``) and integer labels, in SentEval's sorted order."""

    a: list[str]
    y: np.ndarray
    b: list[str] | None = None


@dataclass
class TransferTask:
    name: str
    nclasses: int
    splits: dict[str, Split] = field(default_factory=dict)

    def sentences(self) -> list[str]:
        """Every distinct sentence of the task (sorted: a stable list to encode once)."""
        out = set()
        for s in self.splits.values():
            out.update(s.a)
            out.update(s.b or ())
        return sorted(out)


def _fail(path: Path, problem: str) -> SentlabError:
    return SentlabError(f"SentEval transfer file {path}: {problem}. Restore the file from SentEval's data "
                        f"(SimCSE's senteval.tar, folder downstream/, or SentEval's "
                        f"data/downstream/get_transfer_data.bash) "
                        f"into the mirror or the cache in SentEval's layout, then run again.")


def _read(path: Path, encoding: str, splitlines: bool, expected=None) -> list[str]:
    if not path.is_file():
        raise _fail(path, "the file does not exist")
    raw = path.read_bytes()
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise _fail(path, f"bytes that are not {encoding} at offset {e.start}") from None
    lines = [ln.rstrip("\r\n") for ln in io.StringIO(text, newline=None)]  # SentEval's `for line in f`
    _check(path, len(lines), expected)  # the release's line count, before any SentEval-specific splitting
    # SentEval's binary tasks read f.read().splitlines(), which also breaks a line at U+0085 (NEL): MR's Latin-1
    # ellipsis byte 0x85 occurs 23 times, so SentEval classifies 10,685 MR "sentences", not 10,662 (SUBJ:
    # 10,021, not 10,000). Kept as SentEval does it, so the folds and the numbers are SentEval's.
    return text.splitlines() if splitlines else lines


def _check(path: Path, n: int, expected: dict[str, int] | None) -> None:
    if expected is None or path.name not in expected or expected[path.name] == n:
        return
    raise _fail(path, f"it holds {n} lines where SentEval's release has {expected[path.name]} "
                      f"(a truncated, edited or different copy)")


def _tok(s: str) -> str:
    return " ".join(s.split())


def _binary(folder: Path, pos: str, neg: str, expected) -> dict[str, Split]:
    rows = []
    for fname, label in ((pos, 1), (neg, 0)):
        lines = _read(folder / fname, "latin-1", True, expected)
        rows += [(_tok(s), label) for s in lines]
    rows.sort(key=lambda r: (len(r[0].split()), r[1]))
    return {"all": Split([r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.int64))}


def _sorted(rows) -> Split:
    rows = sorted(rows, key=lambda r: (len(r[0].split()), r[1]))
    return Split([r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.int64))


def _sst(folder: Path, expected) -> dict[str, Split]:
    out = {}
    for split in ("train", "dev", "test"):
        path = folder / f"sentiment-{split}"
        lines = _read(path, "utf-8", False, expected)
        rows = []
        for i, line in enumerate(lines, 1):
            f = line.strip().split("\t")
            if len(f) != 2 or f[1] not in ("0", "1"):
                raise _fail(path, f"line {i} is not `sentence TAB 0|1`")
            rows.append((_tok(f[0]), int(f[1])))
        out[split] = _sorted(rows)
    return out


def _trec(folder: Path, expected) -> dict[str, Split]:
    out = {}
    for split, fname in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        path = folder / fname
        lines = _read(path, "latin-1", False, expected)
        rows = []
        for i, line in enumerate(lines, 1):
            target, _, rest = line.strip().partition(":")
            if target not in TREC_CLASSES or " " not in rest:
                raise _fail(path, f"line {i} is not `COARSE:fine question` with COARSE in {sorted(TREC_CLASSES)}")
            rows.append((_tok(rest.split(" ", 1)[1]), TREC_CLASSES[target]))
        out[split] = _sorted(rows)
    return out


def _mrpc(folder: Path, expected) -> dict[str, Split]:
    out = {}
    for split in ("train", "test"):
        path = folder / f"msr_paraphrase_{split}.txt"
        exp = None if expected is None else {k: v + 1 for k, v in expected.items()}  # + the header row
        lines = _read(path, "utf-8-sig", False, exp)[1:]  # header row dropped, as SentEval does
        rows = []
        for i, line in enumerate(lines, 2):
            f = line.strip().split("\t")
            if len(f) < 5 or f[0] not in ("0", "1"):
                raise _fail(path, f"line {i} is not `Quality TAB id TAB id TAB sentence TAB sentence`")
            rows.append((_tok(f[3]), _tok(f[4]), int(f[0])))
        rows.sort(key=lambda r: (len(r[0].split()), len(r[1].split()), r[2]))
        out[split] = Split([r[0] for r in rows], np.array([r[2] for r in rows], dtype=np.int64), [r[1] for r in rows])
    return out


def load_task(task: str, root: Path | None = None, expected: dict[str, int] | None | str = "release") -> TransferTask:
    """Task ``task`` from ``root`` (a folder in SentEval's ``data/downstream`` layout; default: resolved by
    :func:`sentlab.assets.resolve.resolve_data`). ``expected``: per-file record counts to enforce ("release":
    SentEval's,
    None: no check)."""
    if task not in LAYOUT:
        raise SentlabError(f"Unknown transfer task {task!r}; known: {', '.join(TASKS)}.")
    folder_rel, files = LAYOUT[task]
    if root is None:
        root = assets.resolve_data(f"senteval_{task.lower()}").root
    exp = EXPECTED[task] if expected == "release" else expected
    folder = Path(root) / folder_rel
    names = list(files)
    if task == "SST2":
        splits = _sst(folder, exp)
    elif task == "TREC":
        splits = _trec(folder, exp)
    elif task == "MRPC":
        splits = _mrpc(folder, exp)
    else:
        splits = _binary(folder, names[0], names[1], exp)
    return TransferTask(task, NCLASSES.get(task, 2), splits)


def subsample(task: TransferTask, n: int | None, seed: int) -> TransferTask:
    """``task`` with every split cut to a seeded sample of at most ``n`` examples (None: the task itself),
    kept in SentEval's sorted order: a CPU-sized slice of the protocol (``transfer.max_examples``, quick
    profile), labelled so wherever its numbers are shown."""
    if not n:
        return task
    out = {}
    for i, (name, sp) in enumerate(sorted(task.splits.items())):
        if len(sp.y) <= n:
            out[name] = sp
            continue
        rng = np.random.RandomState([seed, TASKS.index(task.name), i])
        keep = np.sort(rng.choice(len(sp.y), n, replace=False))
        out[name] = Split([sp.a[j] for j in keep], sp.y[keep], None if sp.b is None else [sp.b[j] for j in keep])
    return TransferTask(task.name, task.nclasses, out)
