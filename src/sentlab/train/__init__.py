"""The method-agnostic training engine.

* :mod:`sentlab.train.loop` — :func:`~sentlab.train.loop.train_loop` (AdamW + linear decay, grad accumulation,
  dev evaluation, best-checkpoint export, resume, bf16 autocast, DDP);
* :mod:`sentlab.train.run` — one run from params (``pipeline/train.py METHOD``, ``sentlab train``);
* :mod:`sentlab.train.checkpoint` — resume state and exported models;
* :mod:`sentlab.train.data` — corpus + annotation columns + seeded order;
* :mod:`sentlab.train.distributed` — torchrun helpers (no-ops in one process);
* :mod:`sentlab.train.optim` — Adam without bias correction (released code's optimisers: ConSERT, BERT-flow);
* :mod:`sentlab.train.cli` — ``sentlab methods`` / ``sentlab train``.

Kept import-free: methods import :mod:`sentlab.train.distributed` without pulling in the loop.
"""
