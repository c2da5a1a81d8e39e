"""A model's test-time head: a dense layer (Linear + tanh) applied to the pooled vector at test, as SimCSE
evaluates its supervised model ([CLS] through the trained MLP, its ``--pooler cls``).

:class:`~sentlab.nn.encoder.SentenceEncoder` applies it (its ``head``). The exported folder keeps it in
sentence-transformers' ``Dense`` format (:func:`write_head`, :func:`read_head`; ``sentlab.json``'s ``head`` names
the folder).
"""

from __future__ import annotations

import torch

HEAD_DIR = "head"
"""The folder of a model's test-time head (``sentlab.json``'s ``head``), relative to the model folder."""
_TANH = "torch.nn.modules.activation.Tanh"


def write_head(head: torch.nn.Module, folder) -> None:
    """A Linear + tanh head (``head.dense``, e.g. SimCSE's MLP) into ``folder`` in sentence-transformers' ``Dense``
    format: ``config.json`` and ``model.safetensors`` (``linear.weight``, ``linear.bias``), so the published
    sentence-transformers model loads it as its ``Dense`` module."""
    import json
    from pathlib import Path

    from safetensors.torch import save_file

    dense = head.dense
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"in_features": dense.in_features, "out_features": dense.out_features, "bias": dense.bias is not None,
              "activation_function": _TANH, "module_input_name": "sentence_embedding",
              "module_output_name": "sentence_embedding"}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    tensors = {"linear.weight": dense.weight.detach().float().cpu().contiguous()}
    if dense.bias is not None:
        tensors["linear.bias"] = dense.bias.detach().float().cpu().contiguous()
    save_file(tensors, str(folder / "model.safetensors"))


def read_head(folder) -> torch.nn.Module:
    """The head :func:`write_head` wrote in ``folder`` (or a sentence-transformers ``Dense`` folder with tanh):
    ``nn.Sequential(Linear, Tanh)``, fp32, eval mode."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    from ..errors import SentlabError

    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        tensors = load_file(str(folder / "model.safetensors"))
    except (OSError, ValueError) as e:
        raise SentlabError(f"the model's test-time head in {folder} cannot be read ({e}): its sentlab.json names "
                           f"`head`; re-run the train stage that exported the model.") from None
    if config.get("activation_function", _TANH) != _TANH:
        raise SentlabError(f"{folder}/config.json: a head with activation {config['activation_function']!r}; sentlab's "
                           f"evaluator applies Linear + tanh only (SimCSE's MLP).")
    linear = torch.nn.Linear(int(config["in_features"]), int(config["out_features"]), bias=bool(config.get("bias", 1)))
    linear.load_state_dict({k[len("linear."):]: v for k, v in tensors.items() if k.startswith("linear.")})
    return torch.nn.Sequential(linear, torch.nn.Tanh()).float().eval()
