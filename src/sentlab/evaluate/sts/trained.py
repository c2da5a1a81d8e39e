"""What the evaluate stage of a TRAINED model needs beyond :mod:`sentlab.evaluate.sts.runner`: the method
settings the model was trained with. Its own module because it imports the training code
(:mod:`sentlab.train.run`): the baseline stages (``pipeline/evaluate_baseline.py``), which never train,
do not import it, so an edit of the training code does not re-run them (their code file,
``data/sources/code/evaluate_baseline.json``, lists what they execute)."""

from __future__ import annotations


def trained_method_block(params, name: str, method_id: str) -> dict:
    """The method settings model ``name`` was trained with: ``method_id``'s Params in force, with the
    ablation variant's ``set`` when ``name`` is a variant. These are the params lines its train stage
    declared (models.yaml's ``line`` and ``own``), which the evaluate stage declares too, so DVC ties them
    to the model it evaluates."""
    from ...methods.blocks import method_params

    return method_params(params, method_id, params.ablations.overrides(name)).model_dump(mode="json")


def check_trained_with(info: dict, params, name: str, method_id: str) -> None:
    """Refuse to label ``models/<name>`` with params it was not trained with.

    The model's ``sentlab.json`` records its ``run_key`` and what the key hashes (``run_key_inputs``,
    :func:`sentlab.train.run.run_key_inputs`). The record must hash to the key (else the file was edited or mixed
    up), and the method settings and backbone it records must equal those the evaluate stage labels the model with
    (its declared params: DVC ties them to the model it evaluates)."""
    import json

    from ...errors import SentlabError
    from ...methods.blocks import method_params
    from ...train.run import backbone_of, key_of

    where = f"models/{name}/sentlab.json"
    rerun = f"Re-run its training with the params now in params.yaml: `dvc repro train@{name}` (or `dvc repro`)."
    inputs, key = info.get("run_key_inputs"), info.get("run_key")
    if not isinstance(inputs, dict) or not key:
        raise SentlabError(f"{where} records no run_key with the params it hashes (run_key_inputs): it was written "
                           f"by a training before these were recorded, or not by sentlab's training, so nothing "
                           f"shows which params made it. {rerun}")
    if key_of(inputs) != key:
        raise SentlabError(f"{where}: its run_key_inputs hash to {key_of(inputs)}, not to its run_key {key}: the file "
                           f"was edited or comes from another model. {rerun}")
    mparams = method_params(params, method_id, params.ablations.overrides(name))
    labelled = json.loads(json.dumps({"method": method_id, "method_params": mparams.model_dump(),
                                      "backbone": backbone_of(params, mparams)}, default=str))
    diff = _differences(inputs, labelled)
    if diff:
        what = "; ".join(f"`{k}` trained with {old!r}, labelled {new!r}" for k, (old, new) in diff.items())
        raise SentlabError(f"{where} (run_key {key}) was trained with other params than the evaluate stage labels it "
                           f"with: {what}. Its metrics would carry settings that did not make it. {rerun}")


def _differences(trained: dict, labelled: dict, prefix: str = "") -> dict:
    out = {}
    for k, want in labelled.items():
        had = trained.get(k)
        if isinstance(want, dict) and isinstance(had, dict):
            out.update(_differences(had, want, f"{prefix}{k}."))
        elif had != want:
            out[f"{prefix}{k}"] = (had, want)
    return out


def missing_model_error(name: str, model_dir):
    """The one paragraph for an evaluation of ``models/<name>`` that has no ``sentlab.json``: its train stage
    (``train@<name>``, which every evaluate stage's model has) did not finish."""
    from ...errors import SentlabError

    return SentlabError(f"{model_dir}/sentlab.json is missing: the train stage for {name} did not finish. Run "
                        f"`dvc repro train@{name}`; to evaluate any other model folder, "
                        f"`sentlab evaluate --model PATH`.")
