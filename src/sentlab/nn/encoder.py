"""Sentence encoders: a Hugging Face model plus a pooling, behind one interface.

:class:`SentenceEncoder` is what evaluation, diagnostics and the training
loop's dev evaluation call. Its ``encode(sentences, batch_size=...)`` returns a
NumPy array, the way MTEB and sentence-transformers call encoders, so any
sentlab model can be handed to those tools.

Poolings (docs/evaluation.md#pooling) are declared once, in :mod:`sentlab.config.poolings` (``cls``, ``mean``,
``first_last``, ``top2_mean``, ``mask``: name, what each computes and needs); :func:`pool` applies one.

A trained model may add a **head** after the pooling (:mod:`sentlab.nn.encoder_head`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..config.poolings import (NEEDS_HIDDEN_STATES, POOLINGS, PROMPT_TEMPLATE, apply_template, end_with_period,
                             get_pooling, mask_positions, masked_mean)
from ..runtime.timing import timed

__all__ = ["NEEDS_HIDDEN_STATES", "POOLINGS", "PROMPT_TEMPLATE", "SentenceEncoder", "apply_template", "end_with_period",
           "mask_positions", "masked_mean", "pool"]

# Padded tokens per batch at most (sentences × longest in the batch; ``batch_size`` caps the sentences):
# long sentences come in smaller batches, whose activations stay in the CPU's caches. Chosen with
# benchmarks/eval_speed.py --levers (2,000 STS sentences, MiniLM-L6, 1 thread: 2048 was 1.53x the
# previous encoder, 4096 1.41x, 8192 1.06x, 16384 0.93x).
DEFAULT_TOKEN_BUDGET = 2048


def pool(outputs, attention_mask: torch.Tensor, pooling: str, input_ids: torch.Tensor | None = None,
         mask_token_id: int | None = None, texts: Sequence[str] | None = None) -> torch.Tensor:
    """Pool a Hugging Face model output with the declared pooling ``pooling`` (:mod:`sentlab.config.poolings`;
    ``output_hidden_states`` needed where it :attr:`~sentlab.config.poolings.Pooling.needs_hidden_states`).

    ``mask`` pooling raises :class:`~sentlab.errors.SentlabError` when truncation removed a row's
    [MASK] (:func:`mask_positions`); ``texts`` only name the offending input in that message.
    """
    return get_pooling(pooling)(outputs.last_hidden_state, attention_mask, getattr(outputs, "hidden_states", None),
                                input_ids, mask_token_id, texts)


def resolve_workers(setting, device: torch.device) -> int:
    """``evaluate.workers``: ``auto`` = on CPU one single-threaded worker per intra-op thread
    (``torch.get_num_threads()``), 1 on CUDA; an explicit number is kept (1: the batches in turn, on all threads)."""
    if setting == "auto":
        return max(1, torch.get_num_threads()) if device.type == "cpu" else 1
    return max(1, int(setting))


@contextlib.contextmanager
def single_threaded_ops():
    """PyTorch's intra-op pool at one thread (it is process-wide) for the block; restored after."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def autocast(device: torch.device, precision: str):
    """bf16 (or fp16: training on a GPU without bf16, with a gradient scaler) autocast context on CPU or CUDA, or a
    no-op for fp32."""
    if precision in ("bf16", "fp16"):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
    return contextlib.nullcontext()


@dataclass
class SentenceEncoder:
    """A model + tokenizer + pooling with an MTEB/sentence-transformers style ``encode``.

    ``head`` is an optional trained module applied to the pooled vector (fp32, before ``dims``; SimCSE's MLP
    of a supervised model: :func:`sentlab.nn.encoder_head.read_head`); ``post`` is an optional callable applied to the
    pooled batch (e.g. a whitening transform); ``dims`` slices the embedding (e.g. a channel of the POS/BOW model).
    """

    model: torch.nn.Module
    tokenizer: object
    pooling: str = "cls"
    max_length: Optional[int] = None
    precision: str = "fp32"
    dims: Optional[tuple[int, int]] = None
    template: Optional[str] = None
    end_period: bool = False  # PromptBERT's test input: "." ended sentences before the template (end_with_period)
    post: Optional[Callable[[np.ndarray], np.ndarray]] = None
    name: str = "model"
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    token_budget: int = DEFAULT_TOKEN_BUDGET
    workers: int = 1  # CPU: batches encoded by this many threads at once, each on one intra-op thread (resolve_workers)
    head: Optional[torch.nn.Module] = None

    def __post_init__(self):
        if get_pooling(self.pooling).needs_template and self.template is None:
            self.template = PROMPT_TEMPLATE
        if self.head is not None:
            self.head = self.head.to(self.device)

    @property
    def batch_threads(self) -> int:
        """The intra-op threads one batch is encoded on, what an embedding's bits can depend on: 1 when
        single-threaded workers encode on CPU (``evaluate.workers``), else the process's."""
        return 1 if self.workers > 1 and self.device.type == "cpu" else torch.get_num_threads()

    @property
    def effective_max_length(self) -> int:
        if self.max_length:
            return self.max_length
        cfg_max = getattr(getattr(self.model, "config", None), "max_position_embeddings", 512)
        tok_max = getattr(self.tokenizer, "model_max_length", cfg_max) or cfg_max
        return int(min(cfg_max, tok_max))

    def _texts_for_model(self, sentences: Sequence[str]) -> list[str]:
        texts = list(sentences)
        if self.end_period:
            texts = end_with_period(texts)
        if self.template is not None:
            texts = apply_template(texts, self.tokenizer.mask_token, self.template)
        return texts

    def _forward_pool(self, enc, texts: Sequence[str], poolings: Sequence[str]) -> dict[str, torch.Tensor]:
        """One forward pass of a tokenised batch, pooled every way in ``poolings`` (float32, ``dims`` cut).

        The hidden states are requested only when a pooling needs them; the last layer is the
        same computation either way, so a pooling gives the same bits alone or beside others."""
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with torch.inference_mode(), autocast(self.device, self.precision):
            out = self.model(**enc, output_hidden_states=any(p in NEEDS_HIDDEN_STATES for p in poolings),
                             return_dict=True)
        pooled = {}
        with torch.inference_mode():
            for p in poolings:
                emb = pool(out, enc["attention_mask"], p, enc["input_ids"],
                           getattr(self.tokenizer, "mask_token_id", None), texts).float()
                if self.head is not None:
                    emb = self.head(emb)
                if self.dims is not None:
                    emb = emb[:, self.dims[0]: self.dims[1]]
                pooled[p] = emb
        return pooled

    def encode_batch(self, sentences: Sequence[str]) -> torch.Tensor:
        """Pooled embeddings of one batch, as a float32 tensor (no sorting, no progress bar)."""
        texts = self._texts_for_model(sentences)
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.effective_max_length,
                             return_tensors="pt")
        return self._forward_pool(dict(enc), texts, [self.pooling])[self.pooling]

    def encode_poolings(self, sentences: Sequence[str], poolings: Sequence[str], batch_size: int = 128,
                        show_progress_bar: bool | None = None) -> dict[str, np.ndarray]:
        """Raw pooled embeddings (no ``post``) of ``sentences`` for several poolings from ONE forward pass
        per batch: ``{pooling: (n, d) float32 array}`` in input order.

        Each array is bit-identical to ``dataclasses.replace(self, pooling=p, post=None).encode(...)``
        (same tokenisation and batches; the pooling is applied to the same outputs). The poolings must
        share this encoder's input text, so ``mask`` (which adds a template) cannot be mixed with others.
        """
        poolings = list(dict.fromkeys(poolings))
        templated = any(get_pooling(p).needs_template for p in poolings) or self.template is not None
        if (templated or self.end_period) and poolings != [self.pooling]:
            raise ValueError("encode_poolings: a template (mask pooling) changes the input text; it cannot share a "
                             f"forward pass with other poolings ({poolings})")
        texts = _texts(sentences)
        with timed("encode", sentences=len(texts), device=self.device.type):  # sentlab.runtime.timing
            return self._encode_sorted(texts, poolings, batch_size, show_progress_bar)

    def token_batches(self, texts: Sequence[str], batch_size: int) -> tuple[dict, list[np.ndarray]]:
        """Tokenise ``texts`` once (no padding) and cut them into batches: sorted by token count
        (longest first, ties in input order), at most ``batch_size`` sentences and at most
        ``token_budget`` padded tokens each. Returns the tokenisation and the index arrays."""
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.effective_max_length, padding=False)
        lengths = np.fromiter((len(ids) for ids in enc["input_ids"]), dtype=np.int64, count=len(texts))
        order = np.argsort(-lengths, kind="stable")
        batches, start = [], 0
        while start < len(order):
            longest = int(lengths[order[start]])
            n = max(1, min(batch_size, self.token_budget // max(longest, 1)))
            batches.append(order[start: start + n])
            start += n
        return enc, batches

    def _encode_sorted(self, texts: list[str], poolings: list[str], batch_size: int,
                       show_progress_bar: bool | None) -> dict[str, np.ndarray]:
        """Token-count batching (:meth:`token_batches`) over raw ``texts``; results in input order."""
        from tqdm.auto import tqdm

        n = len(texts)
        if n == 0:
            return {p: np.zeros((0, 0), dtype=np.float32) for p in poolings}
        model_texts = self._texts_for_model(texts)
        enc, batches = self.token_batches(model_texts, batch_size)
        keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
        out: dict[str, np.ndarray] = {}

        def store(idx, pooled):
            for p, emb in pooled.items():
                if p not in out:
                    out[p] = np.empty((n, emb.shape[1]), dtype=np.float32)
                out[p][idx] = emb.cpu().numpy()

        def jobs():  # padded in this thread: the tokenizer is not shared with the workers
            for idx in batches:
                feats = self.tokenizer.pad({k: [enc[k][i] for i in idx] for k in keys}, return_tensors="pt")
                yield idx, dict(feats), [model_texts[i] for i in idx]

        was_training = self.model.training
        self.model.eval()
        disable = (not show_progress_bar) if show_progress_bar is not None else n < 2000
        bar = tqdm(total=len(batches), desc=f"encode {self.name}", unit="batch", disable=disable)
        try:
            if self.workers > 1 and self.device.type == "cpu" and len(batches) > 1:
                self._encode_parallel(jobs(), poolings, store, bar)
            else:
                for idx, feats, batch_texts in jobs():
                    store(idx, self._forward_pool(feats, batch_texts, poolings))
                    bar.update()
        finally:
            bar.close()
            self.model.train(was_training)
        return out

    def _encode_parallel(self, jobs, poolings: list[str], store, bar) -> None:
        """``workers`` batches at a time, each forward pass on one intra-op thread (the batches are independent,
        and a batch's bits do not depend on how many run beside it). On two cores this is 1.1-1.2x two intra-op
        threads on one batch: the work between the matrix products (softmax, GELU, LayerNorm, Python) runs on
        both cores too (``benchmarks/eval_speed.py --levers``)."""
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        with single_threaded_ops(), ThreadPoolExecutor(self.workers, thread_name_prefix="sentlab-encode") as ex:
            pending: deque = deque()
            for idx, feats, batch_texts in jobs:
                pending.append((idx, ex.submit(self._forward_pool, feats, batch_texts, poolings)))
                while len(pending) > 2 * self.workers:  # a bounded queue: a few batches' activations in memory
                    i, fut = pending.popleft()
                    store(i, fut.result())
                    bar.update()
            while pending:
                i, fut = pending.popleft()
                store(i, fut.result())
                bar.update()

    def encode(self, sentences, batch_size: int = 128, show_progress_bar: bool | None = None,
               sort_by_length: bool = True, convert_to_numpy: bool = True, convert_to_tensor: bool = False,
               normalize_embeddings: bool = False, prompt: str | None = None, prompt_name: str | None = None,
               **kwargs):
        """Encode ``sentences`` (in their order) into an ``(n, d)`` float32 array.

        Sentences are tokenised once, sorted by token count and cut into batches of at most
        ``batch_size`` sentences and ``token_budget`` padded tokens (:meth:`token_batches`), so
        each batch pads almost nothing; the result is returned in the input order.
        ``sort_by_length=False`` encodes fixed batches of ``batch_size`` in input order instead.
        The call conventions of sentence-transformers and MTEB are accepted:

        * a single string gives a ``(d,)`` vector, a list an ``(n, d)`` array;
        * MTEB ≥ 2 passes a ``DataLoader`` of batches ``{"text": [...]}``: its texts are encoded;
        * ``convert_to_tensor=True`` returns a ``torch.Tensor`` (``convert_to_numpy=False``
          too, as in sentence-transformers); ``normalize_embeddings`` L2-normalises;
        * ``prompt`` (literal text) is prepended to every sentence, as in sentence-transformers;
        * ``prompt_name`` and MTEB's ``task_name``, ``task_metadata``, ``prompt_type``,
          ``hf_split``, ``hf_subset`` are accepted and ignored: a sentlab encoder has no named
          prompts (its template, if any, is fixed by the method).
        """
        if isinstance(sentences, str):
            return self.encode([sentences], batch_size=batch_size, show_progress_bar=show_progress_bar,
                               sort_by_length=sort_by_length, convert_to_numpy=convert_to_numpy,
                               convert_to_tensor=convert_to_tensor, normalize_embeddings=normalize_embeddings,
                               prompt=prompt)[0]
        sentences = _texts(sentences)
        if prompt:
            sentences = [prompt + s for s in sentences]
        n = len(sentences)
        if n == 0:
            out = np.zeros((0, 0), dtype=np.float32)
        else:
            with timed("encode", sentences=n, device=self.device.type):  # sentlab.runtime.timing: observed by tools
                if sort_by_length:
                    out = self._encode_sorted(sentences, [self.pooling], batch_size, show_progress_bar)[self.pooling]
                else:
                    out = self._encode_in_order(sentences, batch_size)
            if self.post is not None:
                out = self.post(out).astype(np.float32)
        if normalize_embeddings and len(out):
            out = out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        if convert_to_tensor or not convert_to_numpy:
            return torch.from_numpy(np.ascontiguousarray(out))
        return out

    def _encode_in_order(self, sentences: list[str], batch_size: int) -> np.ndarray:
        """Fixed batches of ``batch_size`` in input order (SentEval's way; ``sort_by_length=False``)."""
        was_training = self.model.training
        self.model.eval()
        try:
            chunks = [self.encode_batch(sentences[i: i + batch_size]).cpu().numpy()
                      for i in range(0, len(sentences), batch_size)]
        finally:
            self.model.train(was_training)
        return np.concatenate(chunks, 0)

    # sentence-transformers / MTEB similarity interface: cosine, as the protocol (docs/evaluation.md).
    similarity_fn_name = "cosine"

    def similarity(self, embeddings1, embeddings2) -> torch.Tensor:
        """Cosine similarity matrix ``(n1, n2)`` (``SentenceTransformer.similarity``)."""
        from sentence_transformers.util import cos_sim

        return cos_sim(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1, embeddings2) -> torch.Tensor:
        """Cosine of each pair of rows ``(n,)`` (``SentenceTransformer.similarity_pairwise``)."""
        from sentence_transformers.util import pairwise_cos_sim

        return pairwise_cos_sim(torch.as_tensor(np.asarray(embeddings1)), torch.as_tensor(np.asarray(embeddings2)))


def _texts(inputs) -> list[str]:
    """A list of strings from a list/sequence of strings or an iterable of MTEB batches ``{"text": [...]}``."""
    out: list[str] = []
    for item in inputs:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "text" in item:
            texts = item["text"]
            out.extend([texts] if isinstance(texts, str) else list(texts))
        else:
            raise TypeError(f"cannot encode {type(item).__name__!r}: pass strings or batches with a 'text' field")
    return out
