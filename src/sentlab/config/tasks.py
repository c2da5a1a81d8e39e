"""The evaluation tasks, each declared once: its name, suite, table label, the keys it writes and what it needs.

mteb's ``TaskMetadata`` shape: one table (:data:`TASKS`) that the rest derives from — the STS protocol's task list
and its "all" setting (:mod:`sentlab.data.sts`, :mod:`sentlab.evaluate.sts.protocol`), the params that name a task
(``transfer.tasks``, ``glue.tasks``, ``retrieval.tasks``: :mod:`sentlab.config.sections`), the keys the report reads
from each suite's metrics JSON (:mod:`sentlab.report.paper_tables.resolve`), ``sentlab evaluate``'s printed table,
the model card and the report's columns. A new task is one :class:`Task` row here plus the code that evaluates it
(``tests/test_evaluation_vocabulary.py`` checks that a row shows up everywhere). Paper numbers stay data
(:mod:`sentlab.report.paper_numbers`: the columns the papers printed).

In the core layer (docs/architecture.md) because the params validate task names and the data layer parses the STS
tasks; it imports nothing of sentlab.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

SUITES = ("sts", "transfer", "glue", "retrieval")


@dataclass(frozen=True)
class Task:
    """One evaluation task.

    name: its key (the metrics JSON's, the params').
    suite: ``sts`` (``evaluate@<model>``), ``transfer``, ``glue`` or ``retrieval`` (their stages).
    label: the short column label of a table (``STS-B``).
    keys: the metrics-JSON keys it writes (default: its name).
    needs: the data assets it reads (:mod:`sentlab.assets.resolve`; registered by the data and suite modules).
    sts_all: an STS task scored in SentEval's "all" setting (one Spearman over its concatenated subsets:
        STS12-16), whose mean is the papers' "STS12-16" column.
    mteb: MTEB's task with the same test pairs: (its name, its dataset revision, its test pairs), mteb 2.26's
        metadata (``mteb.get_task(name)``); the evaluate stages write its result JSON
        (:mod:`sentlab.evaluate.sts.mteb_results`).
    mteb_left_out: why an STS task has no MTEB result (MTEB's task of that name scores other pairs).
    """

    name: str
    suite: str
    label: str
    keys: Optional[tuple[str, ...]] = None
    needs: tuple[str, ...] = ()
    sts_all: bool = False
    mteb: Optional[tuple[str, str, int]] = None
    mteb_left_out: Optional[str] = None

    def __post_init__(self):
        if self.suite not in SUITES:
            raise ValueError(f"task {self.name!r}: suite {self.suite!r} is not one of {', '.join(SUITES)}")
        if self.keys is None:
            object.__setattr__(self, "keys", (self.name,))


def _sts(n: int, revision: str, pairs: int) -> Task:
    return Task(f"STS{n}", "sts", f"STS{n}", needs=("sts",), sts_all=True, mteb=(f"STS{n}", revision, pairs))


TASKS: tuple[Task, ...] = (
    _sts(12, "a0d554a64d88156834ff5ae9920b964011b16384", 3108),
    _sts(13, "7e90230a92c190f1bf69ae9002b8cea547a64cca", 1500),
    _sts(14, "6031580fec1f6af667f0bd2da0a551cf4f0b2375", 3750),
    _sts(15, "ae752c7c21bf194d8b67fd573edf7ae58183cbe3", 3000),
    _sts(16, "4d8694f8f0e0100860b497b999b3dbed754a0513", 1186),
    Task("STSBenchmark", "sts", "STS-B", needs=("sts",),
         mteb=("STSBenchmark", "b0fddb56ed78048fa8b90373c8a3cfc37b684831", 1379)),
    Task("SICKRelatedness", "sts", "SICK-R", needs=("sick",),
         mteb_left_out="MTEB's SICK-R scores all 9,927 SICK pairs; sentlab's SICK-R is SentEval's 4,927-pair test "
                       "split (a different test set)"),
    # SentEval's transfer tasks (logistic regression on frozen embeddings)
    *(Task(n, "transfer", n, needs=("senteval",)) for n in ("MR", "CR", "SUBJ", "MPQA")),
    Task("SST2", "transfer", "SST", needs=("senteval",)),
    Task("TREC", "transfer", "TREC", needs=("senteval",)),
    Task("MRPC", "transfer", "MRPC", keys=("MRPC", "MRPC_F1"), needs=("senteval",)),
    # GLUE fine-tuning (L2P-CSR Table 4)
    *(Task(n, "glue", n, needs=("glue",)) for n in ("WNLI", "QNLI", "QQP", "SST-2", "STS-B")),
    # retrieval and reranking (PaSeR Tables 6-7): MAP and MRR@10 each
    Task("QQP", "retrieval", "QQP", keys=("QQP_MAP", "QQP_MRR@10"), needs=("qqp",)),
    Task("AskUbuntu", "retrieval", "AskUbuntu", keys=("AskUbuntu_MAP", "AskUbuntu_MRR@10"),
         needs=("askubuntu_text", "askubuntu_test")),
)
"""Every task, by suite, in the order the tables print them."""


def tasks_of(suite: str) -> tuple[Task, ...]:
    """The tasks of ``suite``, in their declared order."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    return tuple(t for t in TASKS if t.suite == suite)


def names_of(suite: str) -> tuple[str, ...]:
    return tuple(t.name for t in tasks_of(suite))


def keys_of(suite: str) -> tuple[str, ...]:
    """Every metrics-JSON key the tasks of ``suite`` write, in order."""
    return tuple(k for t in tasks_of(suite) for k in t.keys)


STS_TASKS = names_of("sts")
"""The seven STS tasks (the flat keys of ``reports/metrics/<model>.json``)."""
STS_ALL = tuple(t.name for t in tasks_of("sts") if t.sts_all)
"""STS12-16: the tasks scored in SentEval's "all" setting."""
STS_DEV = "STSBenchmark-dev"
"""The model-selection score (STS-B dev), beside the seven."""
AVG = "Avg"
"""The mean of the seven STS tasks."""
STS_KEYS = (*STS_TASKS, AVG)
LABELS = {t.name: t.label for t in TASKS if t.label != t.name}
"""A task's table label where it is not its name (``STSBenchmark``: ``STS-B``)."""
TRANSFER_TASKS = names_of("transfer")
TRANSFER_KEYS = (*keys_of("transfer"), "TransferAvg")
GLUE_TASKS = names_of("glue")
GLUE_KEYS = keys_of("glue")
RETRIEVAL_TASKS = names_of("retrieval")
RETRIEVAL_KEYS = keys_of("retrieval")
RETRIEVAL_ASSETS = {t.name: t.needs for t in tasks_of("retrieval")}
