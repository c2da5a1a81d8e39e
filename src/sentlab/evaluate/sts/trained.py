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
    from ...train.run import ablation_spec

    overrides = ablation_spec(params, name)[1] if name in ((params.ablations or {}).get("variants") or {}) else {}
    return method_params(params, method_id, overrides).model_dump(mode="json")


def missing_model_error(name: str, model_dir):
    """The one paragraph for an evaluation of ``models/<name>`` that has no ``sentlab.json``: its train stage
    (``train@<name>``, which every evaluate stage's model has) did not finish."""
    from ...errors import SentlabError

    return SentlabError(f"{model_dir}/sentlab.json is missing: the train stage for {name} did not finish. Run "
                        f"`dvc repro train@{name}`; to evaluate any other model folder, "
                        f"`sentlab evaluate --model PATH`.")
