"""BERT-flow baseline (Li et al., EMNLP 2020, "On the Sentence Embeddings from Pre-trained Language Models";
docs/methods.md#bert-flow).

A Glow-style normalising flow f is fitted by maximum likelihood on the frozen backbone's sentence embeddings x
(no encoder training): log p(x) = log N(f(x); 0, I) + log |det ∂f/∂x|. The sentence embedding is z = f(x), and
STS is cosine in z space. The architecture is the one of the authors' code (bohanli/BERT-flow,
``flow/glow_ops_1x1.py`` with ``flow/config/config_l3_d3_w32.json``, the default of its ``run_siamese.py``):

* ``levels`` levels; each is ``depth`` steps of [actnorm → channel mixing → coupling], then (but for the last
  level) a split: the second half of the channels leaves the flow as part of z (standard-normal prior), the first
  half goes on (Glow's multi-scale architecture on a 1 × 1 "image" of d channels);
* actnorm: y = (x + b)·exp(3·s), data-dependent init on the first batch (zero mean, unit scale per channel);
* channel mixing: the code's default ``permutation: true`` reverses the channels (log-det 0); ``lu`` is Glow's
  invertible 1 × 1 convolution W = P·L·(U + diag(sign(s)·exp(log s))) from the LU decomposition of a random
  rotation (log-det Σ log s);
* coupling (first half conditions the second): NN = Linear → actnorm → ReLU → Linear → actnorm → ReLU → a zero-
  initialised Linear whose output is scaled by exp(3·logs); ``additive``: x₂ + NN(x₁) (the code's default);
  ``affine``: (x₂ + shift)·sigmoid(raw_scale + 2), log-det Σ log scale.

The fit: Adam with decoupled weight decay 0.01 (the code's ``AdamWeightDecayOptimizer``, which has no bias
correction: ``bias_correction: false``, the paper profile; true: torch's AdamW), lr 1e-3 constant,
gradient norm clipped at 1, one epoch; the loss is the mean negative log-likelihood in bits per dimension (the
code's objective; it sums the means of a batch's 32 first and 32 second sentences, here one mean of 64). It is seeded
(initialisation, LU rotation and batch order from ``seed``) and runs on the CPU in fp32, so two fits are
identical. z is the concatenation of the split-off halves and the last level's output, in that order (the code's
``tf.concat(eps + [z])``).

Example::

    flow = Flow.fit(x, FlowParams(), seed=42)       # x: (n, d) float array
    z = flow(x)                                      # (n, d), the flow's latent codes
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import nn

from ...errors import SentlabError
from ...nn.optim import AdamWLegacy

log = logging.getLogger(__name__)
LOGSCALE = 3.0  # the code's logscale_factor: the parameter s is stored as s / 3


class ActNorm(nn.Module):
    """y = (x + b)·exp(3·s) per channel; b, s set from the first batch it sees in training (data-dependent init)."""

    def __init__(self, channels: int):
        super().__init__()
        self.b = nn.Parameter(torch.zeros(channels))
        self.s = nn.Parameter(torch.zeros(channels))
        self.register_buffer("initialized", torch.tensor(False))

    def _init(self, x: torch.Tensor) -> None:
        with torch.no_grad():
            self.b.copy_(-x.mean(0))
            centred = x + self.b
            self.s.copy_(torch.log(1.0 / (centred.pow(2).mean(0).sqrt() + 1e-6)) / LOGSCALE)
            self.initialized.fill_(True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.training and not bool(self.initialized):
            self._init(x)
        logs = self.s * LOGSCALE
        return (x + self.b) * torch.exp(logs), logs.sum().expand(x.size(0))

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * torch.exp(-self.s * LOGSCALE) - self.b


class Reverse(nn.Module):
    """The code's ``permutation: true``: the channels in reverse order (log-det 0)."""

    def forward(self, x):
        return x.flip(-1), x.new_zeros(x.size(0))

    def inverse(self, y):
        return y.flip(-1)


class InvertibleLU(nn.Module):
    """Glow's invertible 1 × 1 convolution, LU-parametrised from a random rotation (seeded by the caller)."""

    def __init__(self, channels: int, generator: torch.Generator):
        super().__init__()
        q, _ = torch.linalg.qr(torch.rand(channels, channels, generator=generator, dtype=torch.float64))
        p, lower, upper = torch.linalg.lu(q)
        s = torch.diagonal(upper)
        self.register_buffer("P", p.float())
        self.register_buffer("sign_s", torch.sign(s).float())
        self.register_buffer("l_mask", torch.tril(torch.ones(channels, channels), -1))
        self.L = nn.Parameter(lower.float())
        self.U = nn.Parameter(torch.triu(upper, 1).float())
        self.log_s = nn.Parameter(torch.log(s.abs()).float())

    def weight(self) -> torch.Tensor:
        lower = self.L * self.l_mask + torch.eye(self.L.size(0), device=self.L.device)
        upper = self.U * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
        return self.P @ lower @ upper

    def forward(self, x):
        return x @ self.weight().T, self.log_s.sum().expand(x.size(0))   # a 1 × 1 conv: y = W x per row

    def inverse(self, y):
        return y @ torch.linalg.inv(self.weight()).T


class CouplingNet(nn.Module):
    """The code's ``conv_stack`` on 1 × 1 inputs: Linear-actnorm-ReLU ×2, then a zero-initialised Linear scaled by
    exp(3·logs) (so every coupling starts as the identity)."""

    def __init__(self, d_in: int, width: int, d_out: int, generator: torch.Generator):
        super().__init__()
        self.l1, self.l2 = nn.Linear(d_in, width, bias=False), nn.Linear(width, width, bias=False)
        for lin in (self.l1, self.l2):   # the code's default_initializer: N(0, 0.05)
            with torch.no_grad():
                lin.weight.copy_(torch.randn(lin.weight.shape, generator=generator) * 0.05)
        self.n1, self.n2 = ActNorm(width), ActNorm(width)
        self.out = nn.Linear(width, d_out)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.out_logs = nn.Parameter(torch.zeros(d_out))

    def forward(self, x):
        x = torch.relu(self.n1(self.l1(x))[0])
        x = torch.relu(self.n2(self.l2(x))[0])
        return self.out(x) * torch.exp(self.out_logs * LOGSCALE)


class Coupling(nn.Module):
    def __init__(self, channels: int, width: int, kind: str, generator: torch.Generator):
        super().__init__()
        self.kind, self.half = kind, channels // 2
        self.nn = CouplingNet(self.half, width, channels - self.half if kind == "additive" else
                              2 * (channels - self.half), generator)

    def _shift_scale(self, x1):
        h = self.nn(x1)
        if self.kind == "additive":
            return h, None
        return h[:, 0::2], torch.sigmoid(h[:, 1::2] + 2.0)

    def forward(self, x):
        x1, x2 = x[:, :self.half], x[:, self.half:]
        shift, scale = self._shift_scale(x1)
        if scale is None:
            return torch.cat([x1, x2 + shift], -1), x.new_zeros(x.size(0))
        return torch.cat([x1, (x2 + shift) * scale], -1), torch.log(scale).sum(-1)

    def inverse(self, y):
        y1, y2 = y[:, :self.half], y[:, self.half:]
        shift, scale = self._shift_scale(y1)
        return torch.cat([y1, (y2 - shift) if scale is None else y2 / scale - shift], -1)


class Glow(nn.Module):
    """``levels`` × (``depth`` × [actnorm, mixing, coupling], split). ``forward`` -> (z, log-det, log-prior)."""

    def __init__(self, dim: int, levels: int, depth: int, width: int, coupling: str, permutation: str,
                 generator: torch.Generator):
        super().__init__()
        self.steps = nn.ModuleList()
        channels = dim
        for level in range(levels):
            ops = []
            for _ in range(depth):
                mix = Reverse() if permutation == "reverse" else InvertibleLU(channels, generator)
                ops += [ActNorm(channels), mix, Coupling(channels, width, coupling, generator)]
            self.steps.append(nn.ModuleList(ops))
            if level < levels - 1:
                channels //= 2

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logdet = x.new_zeros(x.size(0))
        out = []
        for level, ops in enumerate(self.steps):
            for op in ops:
                x, ld = op(x)
                logdet = logdet + ld
            if level < len(self.steps) - 1:
                half = x.size(1) // 2
                out.append(x[:, half:])      # leaves the flow: prior N(0, 1) (the code's split: x2 with a zero prior)
                x = x[:, :half]
        z = torch.cat([*out, x], -1)
        log_prior = (-0.5 * z.pow(2) - 0.5 * math.log(2 * math.pi)).sum(-1)
        return z, logdet, log_prior

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        sizes = []
        c = z.size(1)
        for _ in range(len(self.steps) - 1):
            sizes.append(c - c // 2)
            c //= 2
        parts, rest = [], z
        for s in sizes:
            parts.append(rest[:, :s])
            rest = rest[:, s:]
        x = rest
        for level in reversed(range(len(self.steps))):
            if level < len(self.steps) - 1:
                x = torch.cat([x, parts[level]], -1)
            for op in reversed(self.steps[level]):
                x = op.inverse(x)
        return x

    def log_likelihood(self, x: torch.Tensor) -> torch.Tensor:
        """log p(x) per row (nats)."""
        _, logdet, log_prior = self(x)
        return logdet + log_prior


def check_dim(dim: int, levels: int) -> None:
    if dim % (2 ** levels):
        raise SentlabError(f"evaluate.bert_flow.levels = {levels} halves the {dim} embedding dimensions {levels} times "
                           f"(each level's coupling and split cut its channels in two): {dim} is not divisible by "
                           f"{2 ** levels}. Lower evaluate.bert_flow.levels in params.yaml.")


@dataclass
class Flow:
    """A fitted flow: x ↦ z as a plain callable on arrays (a :class:`~sentlab.nn.encoder.SentenceEncoder` ``post``)."""

    model: Glow
    fit_size: int
    steps: int
    nll_start: float   # mean negative log-likelihood per dimension of the fit sentences, before and after
    nll_end: float

    @classmethod
    def fit(cls, x: np.ndarray, params, seed: int, progress: bool = False) -> "Flow":
        """Maximum likelihood on ``x`` (n × d) with ``params`` (:class:`~sentlab.config.sections.FlowParams`)."""
        from tqdm.auto import tqdm

        xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
        n, d = xt.shape
        check_dim(d, params.levels)
        if n < 2:
            raise SentlabError(f"The flow needs at least 2 fit sentences, got {n}; fit it on the STS pool "
                               f"(evaluate.bert_flow.fit_on: sts_pool) with evaluate.max_pairs null or larger.")
        gen = torch.Generator().manual_seed(seed)
        model = Glow(d, params.levels, params.depth, params.width, params.coupling, params.permutation, gen)
        batch = min(params.batch_size, n)
        per_epoch = math.ceil(n / batch)
        steps = params.steps or per_epoch * params.epochs
        # the code's AdamWeightDecayOptimizer: decoupled decay of every flow variable (its exclude list, LayerNorm /
        # bias, names none of them), β (0.9, 0.999), ε 1e-6, no bias correction (bias_correction: false; true:
        # torch's AdamW)
        if params.bias_correction:
            opt = torch.optim.AdamW(model.parameters(), lr=params.lr, betas=(0.9, 0.999), eps=1e-6,
                                    weight_decay=params.weight_decay)
        else:
            opt = AdamWLegacy(model.parameters(), lr=params.lr, betas=(0.9, 0.999), eps=1e-6,
                              weight_decay=params.weight_decay, correct_bias=False, decay="before")
        with torch.no_grad():
            model.train()
            model.log_likelihood(xt[torch.randperm(n, generator=gen)[:batch]])   # actnorm's data-dependent init
            model.eval()
            nll_start = float(-model.log_likelihood(xt).mean() / d)
        model.train()
        order = torch.randperm(n, generator=gen)
        pos = 0
        bar = tqdm(range(steps), desc="flow fit", unit="step", disable=not progress)
        for _ in bar:
            if pos + batch > n:   # the next epoch: a new seeded order (the last short batch is dropped)
                order, pos = torch.randperm(n, generator=gen), 0
            idx = order[pos: pos + batch]
            pos += batch
            loss = -model.log_likelihood(xt[idx]).mean() / (math.log(2) * d)   # the code's bits per dimension
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), params.max_grad_norm)
            opt.step()
            bar.set_postfix(nll=f"{loss.item():.3f}", refresh=False)
        model.eval()
        with torch.no_grad():
            nll_end = float(-model.log_likelihood(xt).mean() / d)
        if not math.isfinite(nll_end):
            raise SentlabError(f"The flow's fit diverged (negative log-likelihood {nll_end}); lower "
                               f"evaluate.bert_flow.lr in params.yaml.")
        return cls(model, n, steps, nll_start, nll_end)

    @property
    def out_dim(self) -> int:
        return int(self.model.steps[0][0].b.numel())

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            z, _, _ = self.model(torch.as_tensor(np.asarray(x, dtype=np.float32)))
        return z.numpy().astype(np.float32)

    def info(self) -> dict:
        return {"fit_size": self.fit_size, "steps": self.steps, "dim": self.out_dim,
                "nll_per_dim_start": round(self.nll_start, 6), "nll_per_dim_end": round(self.nll_end, 6)}


def flow_lookup(lookup: dict[str, np.ndarray], flow: Flow) -> dict[str, np.ndarray]:
    """Apply the flow to every embedding of a sentence -> embedding lookup (one batch)."""
    keys = list(lookup)
    out = flow(np.stack([lookup[k] for k in keys]))
    return dict(zip(keys, out))


def fit_sentences(pool: list[str], cap: Optional[int], seed: int) -> list[str]:
    """The fit sentences: the pool, or a seeded sample of ``cap`` of it."""
    if cap is None or len(pool) <= cap:
        return pool
    rng = np.random.default_rng(seed)
    return [pool[i] for i in sorted(rng.choice(len(pool), size=cap, replace=False))]
