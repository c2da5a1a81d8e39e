"""What the evaluate stage of a TRAINED model needs beyond :mod:`sentlab.evaluate.runner`: the method
settings the model was trained with. Its own module because it imports the training code
(:mod:`sentlab.train.run`): the baseline stages (``pipeline/evaluate_baseline.py``), which never train,
do not import it, so an edit of the training code does not re-run them (their code file,
``data/params/code/evaluate_baseline.json``, lists what they execute)."""

from __future__ import annotations


def trained_method_block(params, name: str, method_id: str) -> dict:
    """The method settings model ``name`` was trained with: ``method_id``'s Params in force, with the
    ablation variant's ``set`` when ``name`` is a variant. These are the values its train stage
    declared (data/params/methods/<id>.json or .../variants/<name>.json), which the evaluate stage
    declares too, so DVC ties them to the model it evaluates."""
    from ..train.run import ablation_spec, method_params

    overrides = ablation_spec(params, name)[1] if name in ((params.ablations or {}).get("variants") or {}) else {}
    return method_params(params, method_id, overrides).model_dump(mode="json")


def train_stage_name(params, name: str) -> str:
    """The DVC stage that trains model ``name`` (``models/<name>``): ``train@m``, ``train_seed@m-<s>`` for
    ``m-s<s>``, ``train_from@m``, ``ablate@v``."""
    if name in (params.methods_from or {}):
        return f"train_from@{name}"
    if name in ((params.ablations or {}).get("variants") or {}):
        return f"ablate@{name}"
    method, _, seed = name.rpartition("-s")
    if method and seed.isdigit():
        return f"train_seed@{method}-{seed}"
    return f"train@{name}"


def missing_model_error(params, name: str, model_dir):
    """The one paragraph for an evaluation of ``models/<name>`` that has no ``sentlab.json``: the stage to
    run when the active profile trains it, else how to make the profile train it (the stage does not exist)."""
    from ..config import profile_models
    from ..errors import SentlabError

    known = profile_models(params)
    if known.get(name):
        return SentlabError(f"{model_dir}/sentlab.json is missing: the train stage for {name} did not finish. "
                            f"Run `dvc repro {train_stage_name(params, name)}`.")
    p = params.profile
    what = (f"`{name}` is not a model profile `{p}` trains, so it has no train stage there" if name in known
            else f"`{name}` is not a model params.yaml can make (a method line, one of its seeds or an ablation "
                 f"variant)")
    return SentlabError(f"{model_dir}/sentlab.json is missing: {what}. Add it to the profile (e.g. "
                        f"`profiles.{p}.train.methods`, `seeds` or `ablations.enabled`), run `sentlab profile {p}` "
                        f"and `dvc repro`; or evaluate any model folder with `sentlab evaluate --model PATH`.")
