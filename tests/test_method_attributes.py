"""A method's run-name params and its paper's Avg live on its class (issue #57 §4): ``run_name_params`` and
``paper_avg`` (:class:`sentlab.methods.base.PaperAvg`), read by the training run's MLflow name and the report's
"Unsupervised methods under one protocol" table.

The expected values are literals: ``tracking.KEY_PARAMS`` and ``report.paper_numbers.UNSUP_AVG`` of main at
1f9ef7b (before the move) and the run names that code gave each method's default Params, so the move changed no
run name and no paper number in the report.
"""

from __future__ import annotations

import pytest

from sentlab import tracking
from sentlab.methods import get_method, registered
from sentlab.methods.base import Method, PaperAvg
from sentlab.report import paper_numbers as P

TRAIN = {"batch_size": 64, "lr": 3e-5}

# tracking.run_name(id, Params().model_dump(), train=TRAIN) at 1f9ef7b, for every method registered there
RUN_NAMES = {
    "consert": "consert view1=feature_cutoff view2=shuffle cutoff_rate=0.2 bs=64 lr=3e-05",
    "ct": "ct negatives=7 pooling=mean bs=64 lr=3e-05",
    "diffcse": "diffcse bs=64 lr=3e-05",
    "esimcse": "esimcse bs=64 lr=3e-05",
    "l2p": "l2p layers=2 phi=0.05 steps=4 beta=0.5 token_mask=T feature_mask=T learn=T perturbation=mask continuous=F "
           "bs=64 lr=3e-05",
    "moco": "moco queue_size=256 momentum=0.885 bs=64 lr=3e-05",
    "moco_deletion": "moco_deletion queue_size=256 momentum=0.885 rate=0.1 bs=64 lr=3e-05",
    "moco_duplication": "moco_duplication queue_size=256 momentum=0.885 rate=0.1 bs=64 lr=3e-05",
    "moco_reorder": "moco_reorder queue_size=256 momentum=0.885 bs=64 lr=3e-05",
    "moco_srl": "moco_srl queue_size=256 momentum=0.885 bs=64 lr=3e-05",
    "paser": "paser phrases=rake top_k=5 eda=sr m=10 n=10 decoder_layers=6 pooling=cls bs=64 lr=3e-05",
    "paser_sup": "paser_sup alpha=1 phrases=rake top_k=5 bs=64 lr=3e-05",
    "posbow_adv": "posbow_adv adversary=grl adv_lambda=1 aux_tasks=T bs=64 lr=3e-05",
    "prompt": "prompt bs=64 lr=3e-05",
    "prompt_l2p": "prompt_l2p layers=2 phi=0.05 steps=4 beta=0.5 bs=64 lr=3e-05",
    "ptbert": "ptbert pseudo_len=128 queue_size=256 attend_to=cls bs=64 lr=3e-05",
    "rankcse": "rankcse bs=64 lr=3e-05",
    "sg_opt": "sg_opt bs=64 lr=3e-05",
    "simcse": "simcse max_length=null bs=64 lr=3e-05",
    "simcse_crop": "simcse_crop rate=0.1 augment_views=second bs=64 lr=3e-05",
    "simcse_deletion": "simcse_deletion rate=0.1 words=null augment_views=second bs=64 lr=3e-05",
    "simcse_mlm": "simcse_mlm mlm_weight=0.1 decoder=copy bs=64 lr=3e-05",
    "simcse_pp": "simcse_pp bs=64 lr=3e-05",
    "simcse_sup": "simcse_sup bs=64 lr=3e-05",
}

# tracking.KEY_PARAMS at 1f9ef7b (a method without an entry: ())
KEY_PARAMS = {
    "simcse": ("max_length",),
    "ct": ("negatives", "pooling"),
    "moco": ("queue_size", "momentum"),
    "moco_reorder": ("queue_size", "momentum"),
    "moco_duplication": ("queue_size", "momentum", "rate"),
    "moco_deletion": ("queue_size", "momentum", "rate"),
    "moco_srl": ("queue_size", "momentum"),
    "ptbert": ("pseudo_len", "queue_size", "attend_to"),
    "paser": ("phrases", "top_k", "eda", "m", "n", "decoder_layers", "pooling"),
    "paser_sup": ("alpha", "phrases", "top_k"),
    "l2p": ("layers", "phi", "steps", "beta", "token_mask", "feature_mask", "learn", "perturbation", "continuous"),
    "prompt_l2p": ("layers", "phi", "steps", "beta"),
    "posbow_adv": ("adversary", "adv_lambda", "aux_tasks"),
    "simcse_crop": ("rate", "augment_views"),
    "simcse_deletion": ("rate", "words", "augment_views"),
    "simcse_mlm": ("mlm_weight", "decoder"),
    "consert": ("view1", "view2", "cutoff_rate"),
}

# report.paper_numbers.UNSUP_AVG at 1f9ef7b: (Avg, backbone, source); a method without an entry: no paper number
UNSUP_AVG = {
    "moco": (75.46, "", "PT-BERT Table 3 (MoCo)"),
    "moco_reorder": (73.78, "", "PT-BERT Table 3 (MoCo+reorder)"),
    "moco_duplication": (75.08, "", "PT-BERT Table 3 (MoCo+duplication)"),
    "moco_deletion": (75.4, "", "PT-BERT Table 3 (MoCo+deletion)"),
    "moco_srl": (76.26, "", "PT-BERT Table 3 (MoCo+SRL)"),
    "ptbert": (77.74, "", "PT-BERT Table 3 (PT-BERTbase)"),
    "simcse": (76.25, "", "SimCSE Table 5 (SimCSE-BERTbase), as the papers quote it"),
    "ct": (72.05, "", "CT-BERT as PT-BERT Table 3 prints it"),
    "paser": (76.16, "", "PaSeR Table 1 (PaSeR-BERTbase)"),
    "l2p": (77.2, "", "L2P-CSR Table 1 (+Ours)"),
    "prompt": (78.54, "", "PromptBERT as L2P-CSR Table 1 prints it (+Prompt)"),
    "prompt_l2p": (79.03, "", "L2P-CSR Table 1 (+Prompt+Ours)"),
    "posbow_adv": (77.21, "roberta-base", "POS/BOW Table 1 (Our sentence, RoBERTa-base)"),
    "consert": (72.74, "", "ConSERT as PaSeR Table 1 prints it"),
    "simcse_mlm": (58.57, "", "SimCSE + MLM as PaSeR Table 1 prints it"),
    "sg_opt": (74.62, "", "SG-OPT as L2P-CSR Table 1 prints it"),
    "esimcse": (78.27, "", "ESimCSE (Wu et al., COLING 2022), BERT-base"),
    "diffcse": (78.49, "", "DiffCSE (Chuang et al., NAACL 2022), BERT-base"),
    "rankcse": (80.36, "", "RankCSE (Liu et al., ACL 2023), RankCSE-listMLE BERT-base; teacher substitution: the 0.67 "
                           "teacher here is the pipeline's SimCSE-BERT-base, where run_rankcse.sh (community code) "
                           "uses SimCSE-BERT-large"),
    "simcse_pp": (78.05, "", "SimCSE++ (Xu et al., EMNLP 2023), BERT-base: SimCSE-BERTbase's 76.25 + the abstract's "
                             "1.8"),
}


@pytest.mark.parametrize("method_id", sorted(RUN_NAMES))
def test_run_names_are_those_of_before_the_move(method_id):
    cls = get_method(method_id)
    assert cls.run_name_params == KEY_PARAMS.get(method_id, ())
    name = tracking.run_name(method_id, cls.Params().model_dump(), train=TRAIN, keys=cls.run_name_params)
    assert name == RUN_NAMES[method_id]


@pytest.mark.parametrize("method_id", sorted(RUN_NAMES))
def test_paper_avgs_and_the_one_protocol_rows_are_those_of_before_the_move(method_id):
    from sentlab.report.paper_tables.unsupervised import _row, unsupervised_methods

    cls = get_method(method_id)
    if method_id not in UNSUP_AVG:
        assert cls.paper_avg is None
    else:
        avg, backbone, source = UNSUP_AVG[method_id]
        assert (cls.paper_avg.avg, cls.paper_avg.backbone, cls.paper_avg.source) == (avg, backbone, source)
    if method_id not in unsupervised_methods():
        return
    row = _row(method_id, cls)
    if method_id in UNSUP_AVG:
        avg, backbone, source = UNSUP_AVG[method_id]
        why = {"simcse_mlm": P.SIMCSE_MLM_NO_DELTA, "simcse_pp": P.SIMCSE_PP_NO_DELTA}.get(method_id)
        assert (row.paper, row.backbone, row.delta) == ({"Avg": avg}, backbone, why is None)
        assert row.note == f"paper: {source}" + (f"; {why}" if why else "")
    else:   # the one text that changed: it named paper_numbers.UNSUP_AVG, which is gone
        assert (row.paper, row.note) == (None, "no paper Avg (its method class declares no paper_avg)")
    assert (row.label, row.models, row.extract) == (method_id, (method_id,), "sts_transfer")


# Where each quoted Avg is printed among the paper tables of report.paper_numbers (the class states the number, the
# table its row): the two must not drift apart
QUOTED = {
    **{k: P.PTBERT_TABLE3[k][1]["Avg"] for k in ("moco", "moco_reorder", "moco_duplication", "moco_deletion",
                                                   "moco_srl", "ptbert", "ct")},
    "simcse": P.PASER_TABLE1["SimCSE-BERTbase"]["Avg"],
    "paser": P.PASER_TABLE1["PaSeR-BERTbase"]["Avg"],
    "consert": P.PASER_TABLE1["ConSERTbase"]["Avg"],
    "simcse_mlm": P.PASER_TABLE1["SimCSE-BERTbase + MLM"]["Avg"],
    "l2p": P.L2P_TABLE1["+Ours"]["Avg"],
    "prompt": P.L2P_TABLE1["+Prompt"]["Avg"],
    "prompt_l2p": P.L2P_TABLE1["+Prompt+Ours"]["Avg"],
    "sg_opt": P.L2P_TABLE1["+SG-OPT"]["Avg"],
    "posbow_adv": P.POSBOW_TABLE1["Our sentence"]["Avg"],
    "diffcse": P.DIFFCSE_TABLE1["DiffCSE-BERTbase"]["Avg"],
    "rankcse": P.RANKCSE_AVG["listmle"],
}


@pytest.mark.parametrize("method_id", sorted(QUOTED))
def test_a_quoted_avg_equals_its_papers_table(method_id):
    assert get_method(method_id).paper_avg.avg == QUOTED[method_id]


def test_the_attributes_are_the_class_own_never_inherited():
    """A subclass registered under its own id is another method: SimCSE's axes and paper number do not pass to it
    unless it states them (simcse_crop has axes of its own and no paper Avg)."""
    simcse = get_method("simcse")

    class Variant(simcse):
        pass

    class Stated(simcse):
        run_name_params = ("temperature",)
        paper_avg = PaperAvg(70.0, "a paper", backbone="roberta-base")

    assert (Variant.run_name_params, Variant.paper_avg) == ((), None)
    assert simcse.run_name_params == ("max_length",) and simcse.paper_avg.avg == 76.25
    assert Stated.run_name_params == ("temperature",) and Stated.paper_avg == (70.0, "a paper", "roberta-base")
    assert (Method.run_name_params, Method.paper_avg) == ((), None)
    assert get_method("simcse_crop").paper_avg is None


def test_no_registry_of_method_names_outside_the_methods():
    """tracking and paper_numbers no longer list methods: KEY_PARAMS and UNSUP_AVG are gone."""
    assert not hasattr(tracking, "KEY_PARAMS") and not hasattr(P, "UNSUP_AVG")
    assert set(RUN_NAMES) <= set(registered())
