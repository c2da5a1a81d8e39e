"""Make a saved encoder folder a sentence-transformers model, and read one back.

:func:`write_sentence_transformers` turns a folder holding ``save_pretrained`` weights + tokenizer and
sentlab's pooling record (``sentlab.json``: ``pooling``, ``template``, ``channels``) into a folder that
``SentenceTransformer(path)`` loads and that gives the embeddings of sentlab's own encoder. The files
are written by sentence-transformers' own ``save`` (``modules.json``,
``config_sentence_transformers.json`` with the template's head as the default prompt,
``sentence_bert_config.json``, one folder per pooling module).

:func:`st_pooling_info` reads any sentence-transformers folder's modules back into sentlab's terms
(``pooling``, ``template``, ``channels``, ``max_length``, the transformer's ``subfolder``, a ``head``), so
``sentlab evaluate --model PATH`` scores published models as they pool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from ..errors import SentlabError
from ..config.poolings import POOLINGS, PROMPT_TEMPLATE, get_pooling

TEMPLATE_PROMPT = "sentlab_template"
"""Name of the prompt holding a template's head (``prompts`` in ``config_sentence_transformers.json``)."""
# which module exports a pooling follows from its declaration (sentlab.config.poolings): sentence-transformers' own
# Pooling where it has the mode, else sentlab's LayerMeanPooling (the ``layers``) or MaskPooling (``token: mask``)
LAYERS = {n: list(p.layers) for n, p in POOLINGS.items() if p.layers and not p.st_mode}
ST_POOLINGS = {p.st_mode: n for n, p in POOLINGS.items() if p.st_mode}   # sentence-transformers' mode -> sentlab's
SENTLAB_MODULES = "sentlab.export.modules."


def split_template(template: str, mask_token: str) -> tuple[str, str]:
    """``(head, tail)`` of a template around ``{sentence}``, with ``{mask}`` filled in."""
    if template.count("{sentence}") != 1:
        raise SentlabError(f"prompt template {template!r} must contain {{sentence}} exactly once (sentlab.json "
                           f"`template`, the method's `template` param).")
    head, tail = template.split("{sentence}")
    return head.format(mask=mask_token), tail.format(mask=mask_token)


def needs_sentlab(info: dict) -> bool:
    """Whether loading the folder needs sentlab's module classes (not only sentence-transformers')."""
    pooling = info.get("pooling", "cls")
    return not get_pooling(pooling).st_mode or bool(info.get("template")) or bool(info.get("channels"))


def build_sentence_transformer(folder: Path, info: dict, max_length: int):
    """A ``SentenceTransformer`` over the weights in ``folder`` that pools as ``info`` says."""
    from sentence_transformers import SentenceTransformer

    from .modules import ChannelSlice, LayerMeanPooling, MaskPooling, TemplateTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.models import Pooling, Transformer

    pooling = info.get("pooling", "cls")
    if pooling not in POOLINGS:
        raise SentlabError(f"sentlab.json in {folder}: pooling {pooling!r} is not a sentlab pooling; "
                           f"known: {', '.join(POOLINGS)}.")
    spec = POOLINGS[pooling]
    template = info.get("template") or (PROMPT_TEMPLATE if spec.needs_template else None)
    from ..assets.resolve import _is_bert_like

    kwargs: dict[str, Any] = {"max_seq_length": int(max_length)}
    if _is_bert_like(Path(folder)):  # as sentlab loads it: no pooler (none saved; a random one would be written)
        kwargs["model_kwargs"] = {"add_pooling_layer": False}
    if spec.needs_hidden_states:
        kwargs["config_kwargs"] = {"output_hidden_states": True}  # saved into config.json: ST returns every layer
    prompts, head = None, None
    if template:
        from transformers import AutoTokenizer

        head, tail = split_template(template, AutoTokenizer.from_pretrained(folder).mask_token)
        first = TemplateTransformer(str(folder), template_suffix=tail, end_period=bool(info.get("end_period")),
                                    **kwargs)
        prompts = {TEMPLATE_PROMPT: head}
    else:
        first = Transformer(str(folder), **kwargs)
    dim = first.get_embedding_dimension()
    if spec.st_mode:
        pool = Pooling(dim, pooling_mode=spec.st_mode)
    elif spec.needs_template:
        pool = MaskPooling(first.tokenizer.mask_token_id, dim)
    elif spec.layers:
        pool = LayerMeanPooling(list(spec.layers), dim)
    else:
        raise SentlabError(f"sentlab.json in {folder}: pooling {pooling!r} has no sentence-transformers export "
                           f"(its declaration in sentlab.config.poolings names no st_mode, layers or mask token).")
    modules = [first, pool]
    if info.get("head"):   # the test-time head (supervised SimCSE's MLP), saved by sentlab in Dense's format
        try:
            from sentence_transformers.sentence_transformer.modules import Dense
        except ImportError:  # sentence-transformers 5.x
            from sentence_transformers.models import Dense
        modules.append(Dense.load(str(Path(folder) / info["head"])))
    if info.get("channels"):
        modules.append(ChannelSlice(info["channels"]))
    return SentenceTransformer(modules=modules, device="cpu", prompts=prompts,
                               default_prompt_name=TEMPLATE_PROMPT if prompts else None, similarity_fn_name="cosine")


def write_sentence_transformers(folder: Path, info: dict, max_length: int) -> None:
    """Write the sentence-transformers files into ``folder`` (weights + tokenizer already there) with
    sentence-transformers' own ``save``; ``max_length`` is the encoder's token limit."""
    import logging

    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    st_log = logging.getLogger("sentence_transformers")
    level = st_log.level
    st_log.setLevel(logging.ERROR)  # "default prompt name is set to ...": what we asked for, not news
    try:
        st = build_sentence_transformer(Path(folder), info, max_length)
        st.save(str(folder), create_model_card=False)
    finally:
        st_log.setLevel(level)
        if bars:
            hf_logging.enable_progress_bar()


def load_sentence_transformer(path, **kwargs):
    """``SentenceTransformer(path, trust_remote_code=True)``: sentence-transformers >= 6 imports module
    classes from outside its own package (sentlab's) only with that flag."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device=kwargs.pop("device", "cpu"), trust_remote_code=True, **kwargs)


# --- reading a sentence-transformers folder back -------------------------------------------------
def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError as e:
        raise SentlabError(f"{path} is not valid JSON ({e}); copy or download the model folder again.") from None


def st_pooling_info(folder: Path) -> Optional[dict]:
    """sentlab's view of the sentence-transformers folder ``folder`` (None when it has no ``modules.json``):
    ``pooling``, ``template``, ``channels``, ``max_length``, ``subfolder`` (where the transformer's
    weights are) and ``head`` (the folder of a Linear + tanh ``Dense`` after the pooling, e.g. SimCSE's MLP of a
    supervised model; None without one). Normalize modules are skipped (cosine does not see them); a module that
    changes the embedding otherwise (another Dense, ...) raises, naming it."""
    folder = Path(folder)
    modules = _json(folder / "modules.json")
    if not modules:
        return None
    out: dict[str, Any] = {"pooling": None, "template": None, "channels": None, "max_length": None,
                           "subfolder": "", "head": None, "source": "sentence-transformers modules.json"}
    suffix = ""
    for m in modules:
        kind, sub = m.get("type", ""), m.get("path", "")
        cls = kind.rsplit(".", 1)[-1]
        cfg_dir = folder / sub
        if cls in ("Transformer", "TemplateTransformer"):
            cfg = _json(cfg_dir / "sentence_bert_config.json")
            out["subfolder"], out["max_length"] = sub, cfg.get("max_seq_length")
            suffix = cfg.get("template_suffix", "")
            if cfg.get("end_period"):
                out["end_period"] = True
        elif cls == "Pooling":
            out["pooling"] = _st_pooling_mode(_json(cfg_dir / "config.json"), cfg_dir)
        elif kind == SENTLAB_MODULES + "MaskPooling":
            out["pooling"] = "mask"
        elif kind == SENTLAB_MODULES + "LayerMeanPooling":
            layers = _json(cfg_dir / "config.json").get("layers")
            names = {tuple(v): k for k, v in LAYERS.items()}
            if tuple(layers or ()) not in names:
                raise SentlabError(f"{cfg_dir}/config.json: layers {layers} is not a sentlab pooling "
                                   f"({', '.join(f'{k}={v}' for k, v in LAYERS.items())}).")
            out["pooling"] = names[tuple(layers)]
        elif kind == SENTLAB_MODULES + "ChannelSlice":
            out["channels"] = _json(cfg_dir / "config.json").get("channels")
        elif cls == "Dense" and out["pooling"] is not None and not out["head"] and _is_tanh_head(cfg_dir):
            out["head"] = sub   # a Linear + tanh after the pooling: SimCSE's MLP (sentlab.nn.encoder_head.read_head)
        elif cls == "Normalize":
            continue
        else:
            raise SentlabError(f"{folder}/modules.json: module {kind!r} ({sub or 'root'}) "
                               f"changes the embedding in a way sentlab's evaluator does not reproduce (it knows "
                               f"Transformer, Pooling {'/'.join(ST_POOLINGS)}, "
                               f"Normalize and sentlab's modules); evaluate this model with its own code, or pass "
                               f"--pooling to score the bare transformer.")
    if out["pooling"] is None:
        raise SentlabError(f"{folder}/modules.json has no pooling module; "
                           f"pass --pooling ({', '.join(POOLINGS)}).")
    st_cfg = _json(folder / "config_sentence_transformers.json")
    head = (st_cfg.get("prompts") or {}).get(st_cfg.get("default_prompt_name") or "", "") or ""
    if head or suffix:
        out["template"] = _as_template(head, suffix, folder / out["subfolder"])
    return out


def _is_tanh_head(cfg_dir: Path) -> bool:
    """Whether the ``Dense`` module in ``cfg_dir`` is a square Linear + tanh (what sentlab's evaluator applies)."""
    cfg = _json(cfg_dir / "config.json")
    return (cfg.get("activation_function") == "torch.nn.modules.activation.Tanh" and not cfg.get("use_residual")
            and cfg.get("in_features") == cfg.get("out_features"))


def _st_pooling_mode(cfg: dict, where: Path) -> str:
    """sentlab's pooling for a sentence-transformers ``Pooling`` config (new ``pooling_mode`` or legacy keys)."""
    mode = cfg.get("pooling_mode")
    if mode is None:  # sentence-transformers < 6: one boolean per mode
        modes = [k[len("pooling_mode_"):] for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
        mode = modes[0] if len(modes) == 1 else tuple(modes)
        mode = {"cls_token": "cls", "mean_tokens": "mean"}.get(mode, mode) if isinstance(mode, str) else mode
    if isinstance(mode, list):
        mode = mode[0] if len(mode) == 1 else tuple(mode)
    if mode not in ST_POOLINGS:
        raise SentlabError(f"{where}/config.json: pooling mode {mode!r} is not one sentlab's evaluator computes "
                           f"({', '.join(ST_POOLINGS)}); pass --pooling to choose one.")
    if cfg.get("include_prompt") is False:
        raise SentlabError(f"{where}/config.json: include_prompt false (prompt tokens left out of the pooling) is not "
                           f"reproduced by sentlab's evaluator; pass --pooling to choose one.")
    return ST_POOLINGS[mode]


def _as_template(head: str, suffix: str, model_dir: Path) -> str:
    """A sentlab template (``{sentence}``, ``{mask}``) from a prompt head and a template tail."""
    from transformers import AutoTokenizer

    mask = AutoTokenizer.from_pretrained(model_dir).mask_token
    esc = lambda s: s.replace("{", "{{").replace("}", "}}")  # noqa: E731 - literal braces in a format string
    parts = [esc(p).replace(esc(mask), "{mask}") if mask else esc(p) for p in (head, suffix)]
    return parts[0] + "{sentence}" + parts[1]
