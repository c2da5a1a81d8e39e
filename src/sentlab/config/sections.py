"""The params sections' schemas (one pydantic model per params.yaml section): what each key may hold.

:class:`sentlab.config.Params` puts them together and validates params.yaml; the values themselves live in
params.yaml (made from ``profiles/``), so a default here is for code that builds params without a file.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .poolings import BASELINE_POOLINGS, BaselinePoolingName, PoolingName
from .tasks import GLUE_TASKS, RETRIEVAL_TASKS, TRANSFER_TASKS   # the declared tasks (sentlab.config.tasks)

BASELINES = (*BASELINE_POOLINGS, "whitening", "bert_flow", "glove")
"""``evaluate.baselines``' names: the backbone with each declared baseline pooling, then the fitted and GloVe ones."""


class Strict(BaseModel):
    """Base for every params section: unknown keys are errors; every float is finite (no YAML .nan/.inf)."""

    model_config = ConfigDict(extra="forbid", frozen=False, protected_namespaces=(), allow_inf_nan=False)


class ModelParams(Strict):
    backbone: str = "sentence-transformers/all-MiniLM-L6-v2"
    """Hub id or local path of the encoder (``bert-base-uncased`` in the paper profile)."""


class PrepareParams(Strict):
    corpus: Literal["wiki1m", "wiki1m_head"] = Field(
        "wiki1m", description="the corpus asset trained on: wiki1m (SimCSE's 1M-line file, only that file) or "
                              "wiki1m_head (its first 11,913 lines, the CPU profiles' sample); never one for the other")
    size: int = Field(11913, gt=0, description="sentences sampled from the corpus")
    min_words: int = Field(1, ge=1, description="lines with fewer whitespace words are dropped")
    max_words: int = Field(128, ge=1, description="lines with more whitespace words are dropped")
    dedupe: bool = True
    accept_size: Optional[int] = Field(
        None, gt=0, description="the exact number of usable sentences accepted when the corpus has fewer than `size` "
                                "(all of them are used); null: fewer than `size` fails. A corpus of any other size "
                                "still fails, so a sample never passes for the full file")
    nli: Literal["auto", "simcse", "sick_standin", "none"] = Field(
        "auto", description="paser_sup's NLI triples (data/corpus/nli.parquet): SimCSE's nli_for_simcse.csv (simcse), "
                            "the offline stand-in from SICK train (sick_standin), the CSV when it can be had else the "
                            "stand-in (auto), or none")

    @model_validator(mode="before")
    @classmethod
    def _allow_smaller_gone(cls, data):
        if isinstance(data, dict) and "allow_smaller" in data:
            raise ValueError("`prepare.allow_smaller` is gone: it let any smaller file (e.g. the 11,913-line sample) "
                             "pass for the corpus. Remove it; to train on a corpus with fewer usable sentences than "
                             "`size`, state their exact number as `prepare.accept_size: N` (prepare's error names N)")
        return data

    @model_validator(mode="after")
    def _check_lengths(self):
        if self.accept_size is not None and self.accept_size >= self.size:
            raise ValueError(f"accept_size ({self.accept_size}) must be smaller than size ({self.size}): it is the "
                             f"exact smaller count accepted when the corpus has fewer than `size` sentences")
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) must be <= max_words ({self.max_words})")
        return self


class AnnotateParams(Strict):
    backend: Literal["nltk", "spacy"] = "nltk"
    spacy_model: str = "en_core_web_sm"
    jobs: int = Field(2, ge=1)
    shard_size: int = Field(5000, ge=1)
    rake_max_words: Optional[int] = Field(None, ge=1, description="longest RAKE phrase, in words; null: unbounded "
                                                                  "(RAKE's first-ranked phrases are often long)")


class HardSubsetParams(Strict):
    pos_min_score: float = 4.0
    neg_max_score: float = 2.0
    pos_len_diff_gt: int = 5
    neg_len_diff_lt: int = 2


class WhiteningParams(Strict):
    fit_on: Literal["sts_pool", "corpus", "nli"] = Field(
        "sts_pool", description="sts_pool: the distinct sentences of the 7 test sets + STS-B dev (SimCSE App. C's "
        "'target'); corpus: a sample of the training corpus; nli: the NLI sentences of data/corpus/nli.parquet "
        "(SimCSE App. C's 'NLI' fit, behind its Table 5 row: the paper profile)")
    sample_size: Optional[int] = Field(10000, gt=0, description="corpus / nli: a seeded sample of this many sentences "
                                                                "fits mu and W (None: all of them)")
    dim: Optional[int] = Field(None, gt=0, description="keep the first k whitened dimensions (None: all)")
    pooling: BaselinePoolingName = "first_last"


class FlowParams(Strict):
    """The BERT-flow baseline (``evaluate.bert_flow``, :mod:`sentlab.evaluate.baselines.flow`): defaults are the
    authors' code (bohanli/BERT-flow: config_l3_d3_w32, flow lr 1e-3, one epoch) but for ``fit_on`` and
    ``bias_correction``, which the paper profile sets to the code's (nli, false) and the quick profile leaves at
    sts_pool / true."""

    fit_on: Literal["sts_pool", "nli"] = Field(
        "sts_pool", description="sts_pool: the distinct sentences of the 7 test sets + STS-B dev (the paper's "
        "'target' setting, one flow for all); nli: the NLI sentences of data/corpus/nli.parquet (SimCSE App. C's "
        "'NLI' fit, behind the 66.55 of its Table 5: the paper profile)")
    sample_size: Optional[int] = Field(None, gt=0, description="fit_on nli: a seeded sample of this many NLI "
                                                               "sentences (None: all of them)")
    pooling: BaselinePoolingName = Field(
        "first_last", description="the backbone pooling the flow is fitted on (the code's avg-last-2 averages the "
                                  "first transformer layer and the last; sentlab's first_last: embeddings and last)")
    levels: int = Field(3, gt=0, description="multi-scale levels (each but the last splits half the channels off)")
    depth: int = Field(3, gt=0, description="flow steps (actnorm, mixing, coupling) per level")
    width: int = Field(32, gt=0, description="hidden width of each coupling's network")
    coupling: Literal["additive", "affine"] = "additive"
    permutation: Literal["reverse", "lu"] = Field(
        "reverse", description="channel mixing: reverse (the code's permutation: true) or lu (Glow's invertible 1x1)")
    lr: float = Field(1e-3, gt=0, description="Adam learning rate (constant)")
    weight_decay: float = Field(0.01, ge=0, description="decoupled weight decay (the code's AdamWeightDecayOptimizer)")
    bias_correction: bool = Field(
        True, description="Adam's bias correction: true = torch's AdamW; false = the code's AdamWeightDecayOptimizer "
        "(BERT's TF optimiser: no correction, the decay on the value before the step; sentlab.nn.optim."
        "AdamWLegacy): the paper profile")
    batch_size: int = Field(64, gt=0, description="fit sentences per step (the code: 32 pairs, both sides)")
    epochs: int = Field(1, gt=0, description="passes over the fit sentences")
    steps: Optional[int] = Field(None, gt=0, description="optimiser steps (None: epochs over the fit sentences; "
                                                         "the preflight slice caps it)")
    max_grad_norm: float = Field(1.0, gt=0)


class GloveParams(Strict):
    """The averaged-GloVe baseline (``evaluate.glove``, :mod:`sentlab.evaluate.baselines.glove`): SentEval's bag of
    words."""

    vectors: Literal["glove.840B.300d"] = Field("glove.840B.300d", description="the GloVe release (SentEval's)")


class EvaluateParams(Strict):
    batch_size: int = Field(128, gt=0)
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when available, else CPU")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="auto: exact fp32 on every device; bf16: autocast, recorded as approximate")
    max_length: Optional[int] = Field(None, gt=0, description="None: the model's own maximum")
    workers: Union[Literal["auto"], Annotated[int, Field(ge=1)]] = Field(
        "auto", description="CPU: batches encoded at once, each on one intra-op thread; auto = the torch thread count "
                            "(1 on CUDA); 1 = one batch at a time on every thread. The bits do not depend on it "
                            "above 1")
    pooling: Optional[PoolingName] = Field(
        None, description="the pooling a trained model is evaluated with (evaluate@<model>); null: the model's own "
                          "(sentlab.json, what it was trained to export). Another pooling scores the bare encoder "
                          "(no test-time head) without retraining, and has its own embedding-cache key")
    diagnostics: bool = True
    max_pairs: Optional[int] = Field(None, gt=0, description="None: every pair; else a seeded sample per task "
                                                             "(smoke runs; labelled)")
    hard_subset: HardSubsetParams = HardSubsetParams()
    whitening: WhiteningParams = WhiteningParams()
    bert_flow: FlowParams = FlowParams()
    glove: GloveParams = GloveParams()
    baselines: list[Literal[BASELINES]] = Field(
        default_factory=lambda: ["cls", "mean", "first_last", "whitening"],
        description="pooling / whitening / BERT-flow baselines of the backbone and averaged GloVe vectors (one "
                    "evaluate_baseline stage each)")



class TransferParams(Strict):
    """SentEval's transfer tasks on frozen embeddings (:mod:`sentlab.evaluate.suites.transfer`): one
    ``transfer@<model>`` stage per listed model."""

    models: list[str] = Field(
        default_factory=list, description="models of the stage list (models.yaml) and backbone baselines "
                                          "(base-cls, base-mean, ...) to evaluate; [] = no transfer stage")
    tasks: list[Literal[TRANSFER_TASKS]] = Field(default_factory=lambda: list(TRANSFER_TASKS))
    max_examples: Optional[int] = Field(
        None, gt=0, description="None: every example (SentEval's protocol); a number: each split cut to a "
                                "seeded sample of that many (a CPU slice; labelled)")
    batch_size: int = Field(128, gt=0, description="sentences encoded at once")



class GlueFinetuneParams(Strict):
    """How each GLUE model is fine-tuned (:class:`sentlab.evaluate.suites.glue.GlueConfig`, transformers' run_glue
    defaults) and the CPU slice's caps (``max_train``, ``max_steps``, ``max_dev``: seeded, recorded)."""

    lr: float = Field(2e-5, gt=0)
    batch_size: int = Field(32, gt=0)
    epochs: int = Field(3, gt=0)
    max_length: int = Field(128, gt=0)
    warmup: float = Field(0.1, ge=0, lt=1, description="share of the steps with a linear warm-up")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout before the linear head")
    max_train: Optional[int] = Field(None, gt=0, description="None: the whole training split; a number: a seeded "
                                                             "sample of that many (a CPU slice; labelled)")
    max_steps: Optional[int] = Field(None, gt=0, description="None: every epoch; a number: stop after that many "
                                                             "optimiser steps (a CPU slice; labelled)")
    max_dev: Optional[int] = Field(None, gt=0, description="None: the whole dev split; a number: a seeded sample "
                                                           "of that many (a CPU slice; labelled)")
    precision: Literal["fp32", "auto", "bf16", "fp16"] = Field(
        "fp32", description="fp32: run_glue's default (the paper gives no settings); auto: as train.precision "
                            "(fp32 on a CPU; on CUDA bf16 autocast where the GPU has it, else fp16 with a gradient "
                            "scaler); bf16/fp16: that autocast (refused where it would be emulated). Recorded")


class GlueParams(Strict):
    """GLUE fine-tuning (L2P-CSR Table 4, :mod:`sentlab.evaluate.suites.glue`): one ``glue@<model>`` stage per
    listed model."""

    models: list[str] = Field(default_factory=list, description="models of the stage list and backbone baselines "
                                                                "(base-cls: the backbone) to fine-tune; [] = none")
    tasks: list[Literal[GLUE_TASKS]] = Field(default_factory=lambda: list(GLUE_TASKS))
    seeds: list[int] = Field(default_factory=lambda: [42], min_length=1,
                             description="fine-tuning seeds: each task fine-tuned once per seed (mean, std and the "
                                         "runs in the result)")
    finetune: GlueFinetuneParams = GlueFinetuneParams()



class RetrievalExamplesParams(Strict):
    """PaSeR Table 6's qualitative examples: a few QQP queries with their top hits, in the retrieval metrics JSON and
    the report (:mod:`sentlab.evaluate.suites.retrieval_examples`). They show, they change no number."""

    show: bool = Field(True, description="write the examples (false: none)")
    k: int = Field(3, gt=0, description="hits per query (Table 6 prints 3)")
    paper: bool = Field(True, description="Table 6's own queries first, where QQP has them")
    n_seeded: int = Field(3, ge=0, description="queries drawn at random (seeded) after the paper's")
    seed: int = Field(0, description="the draw's seed")
    queries: Optional[list[str]] = Field(None, description="these QQP queries instead of the paper's and the drawn "
                                                           "ones (each a q1 with a labelled duplicate)")


class RetrievalParams(Strict):
    """QQP retrieval and AskUbuntu reranking on frozen embeddings (PaSeR Table 3,
    :mod:`sentlab.evaluate.suites.retrieval`): one ``retrieval@<model>`` stage per listed model."""

    models: list[str] = Field(default_factory=list, description="models of the stage list and backbone baselines "
                                                                "(base-cls, base-mean) to evaluate; [] = none")
    tasks: list[Literal[RETRIEVAL_TASKS]] = Field(default_factory=lambda: list(RETRIEVAL_TASKS))
    map_at: int = Field(100, gt=0, description="QQP: average precision over the top map_at (sentence-transformers' "
                                               "InformationRetrievalEvaluator)")
    exclude_identical: bool = Field(True, description="QQP: a corpus text identical to the query is not ranked")
    batch_size: int = Field(128, gt=0, description="sentences encoded at once")
    examples: RetrievalExamplesParams = RetrievalExamplesParams()


class TrainParams(Strict):
    """The training loop's settings: params.yaml ``train`` (what changes a trained model) and the
    ``runtime`` keys (:data:`RUNTIME_TRAIN_KEYS`: how it runs), which :class:`Params` copies in."""
    methods: list[str] = Field(default_factory=list, description="methods this profile trains")
    batch_size: int = Field(64, gt=0)
    lr: float = Field(3e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    epochs: int = Field(1, gt=0)
    max_steps: Optional[int] = Field(None, gt=0, description="stop after this many optimiser steps")
    grad_accum: int = Field(1, gt=0)
    max_grad_norm: Optional[float] = Field(1.0, gt=0, description="gradient clipping (HF Trainer's default, as "
                                                                  "SimCSE/PT-BERT); None: off")
    max_length: int = Field(32, gt=0)
    eval_every: int = Field(125, gt=0)
    checkpoint_every: Optional[int] = Field(None, gt=0, description="None: at every dev evaluation")
    checkpoint_minutes: float = Field(
        0.0, ge=0, description="a resume checkpoint at most every this many minutes of training (at the first "
                               "checkpoint step after they passed); 0: at every checkpoint step. The profiles set 10: "
                               "a bert-base checkpoint (1.31 GB) took <= 8.4 s to write, <= 1.4 % of 10 minutes "
                               "(docs/training.md#resume)")
    dev_max_pairs: Optional[int] = Field(None, gt=0, description="None: all 1500 STS-B dev pairs")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="the profile's choice, never the CPU's: auto = fp32 on CPU; on CUDA bf16 autocast where "
                            "the GPU computes bf16 natively, else fp16 autocast with a gradient scaler (V100, T4); "
                            "the resolved value is recorded. bf16/fp16 where they would be emulated (a CPU without "
                            "AVX-512 BF16/AMX) stop the run unless runtime.emulated_precision is allow "
                            "(sentlab.runtime.device); logits and losses stay fp32; evaluation precision is "
                            "evaluate.precision")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    attention: Literal["auto", "eager", "sdpa"] = Field(
        "auto", description="the backbone's attention kernel while training: auto = eager on CPU (PyTorch's CPU SDPA "
                            "backward is slower at sentence lengths; benchmarks/train_speed.py --compare-attention), "
                            "sdpa on CUDA; the same maths, round-off apart; evaluation keeps the model's default")
    dropout_kernel: Literal["auto", "torch", "fast"] = Field(
        "auto", description="the dropout mask while training: auto = fast on CPU (16-bit lanes of 64-bit draws, drop "
                            "probability within 8e-6 of p; sentlab.train.dropout), torch elsewhere (PyTorch's kernel)")
    heap: Literal["auto", "retain", "system"] = Field(
        "auto", description="malloc in the training process: auto = retain on CPU under glibc (freed blocks of "
                            ">= 32 MB stay mapped instead of being page-faulted in again; sentlab.train.heap), "
                            "system elsewhere")
    num_threads: Optional[int] = Field(
        None, gt=0, description="the intra-op threads of a CPU training (a method's; the transfer and GLUE suites' "
                                "classifiers and fine-tuning too); part of what it computes: PyTorch splits its "
                                "reductions (a sum over 10^6 values, the gradient norm) by thread, so 1 and 2 "
                                "threads differ in the last bits, and a parallel run's task (`sentlab run --jobs`) "
                                "reproduces a serial run only with the same count; None: PyTorch's default (the "
                                "machine's cores: the bits then depend on the machine). A CUDA training's numbers "
                                "do not depend on it")
    loader_workers: Union[Literal["auto"], Annotated[int, Field(ge=0)]] = Field(
        "auto", description="DataLoader worker processes running each method's prepare() (tokenisation, augmentation) "
                            "ahead of the step; auto: 0 on CPU (the cores are busy training), 4 per GPU; the numbers "
                            "do not depend on it")
    nproc: int = Field(1, ge=1, description="processes (GPUs) to train on: > 1 re-runs the train stage under torchrun; "
                                             "batch_size stays the global batch, split over the processes")
    compile: Literal["off", "default", "reduce-overhead"] = Field(
        "off", description="torch.compile of the training step's forward and loss (sentlab.train.compiled): off = "
                           "eager; default = Inductor; reduce-overhead = Inductor with CUDA graphs on a GPU. Same "
                           "maths, other round-off and dropout draws: numbers differ by seed noise")
    pad_buckets: list[Annotated[int, Field(gt=0)]] = Field(
        default_factory=list, description="pad each tokenised batch to the smallest of these lengths that holds it "
                                          "(else to max_length), so a compiled step sees few shapes; []: to the "
                                          "batch's longest (dynamic). Refused for methods whose loss sees padding")

    @field_validator("compile", mode="before")
    @classmethod
    def _yaml_off(cls, v):
        """YAML 1.1 reads a bare ``off`` as false: it means ``off``."""
        return "off" if v is False else v

    @field_validator("pad_buckets")
    @classmethod
    def _increasing(cls, v: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError(f"train.pad_buckets {v} must be strictly increasing lengths (e.g. [16, 32])")
        return v


# TrainParams fields that params.yaml keeps in its `runtime` section: they change how a training runs, never
# what it computes, so no stage declares them (a resumed training continues its checkpoint with new values)
# (num_threads is not one: a CPU training's bits depend on it, so the train stages declare `train.num_threads`)
RUNTIME_TRAIN_KEYS = ("device", "checkpoint_every", "checkpoint_minutes", "loader_workers", "heap", "nproc")


class RuntimeParams(Strict):
    """params.yaml ``runtime``: :data:`RUNTIME_TRAIN_KEYS`, validated as :class:`TrainParams` validates them."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    checkpoint_every: Optional[int] = Field(None, gt=0)
    checkpoint_minutes: float = Field(0.0, ge=0)
    loader_workers: Union[Literal["auto"], Annotated[int, Field(ge=0)]] = "auto"
    heap: Literal["auto", "retain", "system"] = "auto"
    nproc: int = Field(1, ge=1)
    # `sentlab run --jobs N` (make repro JOBS=N, sentlab.parallel): what each Ray task (one model's chain of
    # stages) asks for; fractional GPUs let several small trainings share one; `auto`: each chain's share from the
    # plan's measured step times (sentlab.parallel.schedule, docs/scale-ray.md). Not TrainParams keys.
    gpus_per_task: Union[Literal["auto"], Annotated[float, Field(ge=0)]] = 1.0
    cpus_per_task: float = Field(1.0, gt=0)
    task_retries: int = Field(2, ge=0)
    # bf16/fp16 autocast where it would be emulated (a CPU without AVX-512 BF16/AMX: ~30x slower a step): refuse =
    # the stage stops before any work naming train.precision: fp32; allow = run it all the same, recorded in the
    # run (sentlab.runtime.device.check_precision). Not a TrainParams key: it changes no number, only whether it runs.
    emulated_precision: Literal["refuse", "allow"] = "refuse"


class SeedsParams(Strict):
    """Seeds as an axis of the pipeline. Every method trains with ``seed`` (stage ``train@<m>`` ->
    ``models/<m>``); a method trains ``n`` seeds in all, where ``n`` is ``per_method[<m>]`` or
    ``count``: ``seed``, then the first ``n - 1`` of ``pool`` (stage ``train@<m>-s<s>`` ->
    ``models/<m>-s<s>``). ``pool`` is the seeds that can have stages, the same in every profile; the
    ones a profile trains are in its stage list (:mod:`sentlab.stages.stage_list`). Changing ``n`` runs
    or drops only the stages of the seeds it adds or removes."""
    pool: list[int] = Field(default_factory=lambda: [43, 44, 45, 46],
                            description="the extra seeds that have stages (train@<method>-s<seed>)")
    count: int = Field(1, ge=1, description="seeds every method trains (1: `seed` only)")
    per_method: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="a method's own seed count, e.g. {simcse: 3}")

    @model_validator(mode="after")
    def _check_pool(self):
        if len(set(self.pool)) != len(self.pool):
            raise ValueError(f"seeds.pool {self.pool} repeats a seed; list each once")
        most = max([self.count, *self.per_method.values()])
        if most - 1 > len(self.pool):
            raise ValueError(f"seeds: a method trains {most} seeds but seeds.pool has {len(self.pool)} extra seeds "
                             f"(+ `seed`); add seeds to seeds.pool (each is a stage line) or lower the count")
        return self

    def count_for(self, method_id: str) -> int:
        return self.per_method.get(method_id, self.count)

    def extra_seeds(self, method_id: str) -> list[int]:
        """The pool seeds ``method_id`` trains besides ``seed``."""
        return self.pool[: self.count_for(method_id) - 1]
