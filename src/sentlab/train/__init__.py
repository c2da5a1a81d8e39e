"""The method-agnostic training engine.

* :mod:`sentlab.train.loop` — :func:`~sentlab.train.loop.train_loop` (AdamW + linear decay, grad accumulation,
  dev evaluation, best-checkpoint export, resume, bf16 autocast, DDP);
* :mod:`sentlab.train.run` — one run from params (``pipeline/train.py METHOD``, ``sentlab train``);
* :mod:`sentlab.train.checkpoint` — resume state and exported models;
* :mod:`sentlab.train.data` — corpus + annotation columns + seeded order;
* :mod:`sentlab.cli.train` — ``sentlab train`` (registered, with the STS-B dev check, by ``sentlab.cli``).

The torchrun helpers (:mod:`sentlab.runtime.distributed`) and the legacy Adam (:mod:`sentlab.nn.optim`) sit on the
ground floor, below the methods that use them (docs/architecture.md).
"""
