"""RankCSE (Liu et al., ACL 2023): SimCSE + ranking consistency + listwise ranking distillation from teachers,
docs/methods.md#rankcse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from ..nn.encoder import apply_template, pool
from ..config.poolings import POOLINGS
from ..errors import SentlabError
from . import register
from ._common import FrozenSubmodules, MLPHead, cosine_logits, full_precision, in_batch_info_nce, two_views
from .base import Batch, ContrastiveParams, Method, PaperAvg


class RankCSEParams(ContrastiveParams):
    """``methods.rankcse``. The settings are the community implementation's (perceptiveshawty/RankCSE,
    ``run_rankcse.sh`` and ``train.py``; the authors released no code, so this is a reimplementation by a third
    party, not the code behind the paper's numbers): its script's choices are the defaults (ListMLE with each row's
    own positive); where its code departs from the paper's losses (the consistency term, an ε in ListMLE) the
    paper's is the default and the community's a param (``consistency``, ``listmle_eps``), at which
    benchmarks/released/rankcse.py checks the loss against the community ``cl_forward``."""

    teachers: list[str] = Field(
        default_factory=lambda: ["models/diffcse", "models/simcse"], min_length=1,
        description="teacher encoders: folders of a trained sentlab model (models/<name>, its own pooling) or of a "
                    "sentence-transformers model (its Pooling); a models/<name> of the pipeline is a DVC dep of the "
                    "train stage (run_rankcse.sh: DiffCSE-BERT-base and SimCSE-BERT-large-unsup; here the "
                    "pipeline's DiffCSE and SimCSE, both BERT-base: the second teacher is a substitution)")
    teacher_weights: list[float] = Field(
        default_factory=lambda: [0.33, 0.67], min_length=1,
        description="weights of the teachers' similarity lists, one per teacher (run_rankcse.sh: alpha 0.33 for "
                    "the first, 1 - alpha for the second)")
    distillation: Literal["listnet", "listmle"] = Field(
        "listmle", description="the ranking distillation loss: ListMLE (Plackett-Luce likelihood of the teacher's "
                               "order; run_rankcse.sh --distillation_loss listmle, the paper profile) or ListNet "
                               "(top-1 cross-entropy; ablation rankcse_listnet); the paper reports both")
    teacher_temperature: float = Field(0.05, gt=0, description="τ2: the teachers' cos / τ2 (run_rankcse.sh --tau2)")
    student_temperature: float = Field(
        0.05, gt=0, description="τ3: the student's cos(z1_i, z2_j) / τ3 (the community code ranks the InfoNCE "
                                "logits, cos/0.05; its README says τ3 = τ2 / 2 after the paper's Sec. 5.3: 0.025)")
    distill_weight: float = Field(1.0, ge=0, description="γ, weight of L_rank (run_rankcse.sh --gamma_ 1.0)")
    consistency_weight: float = Field(1.0, ge=0, description="β, weight of the JS ranking consistency "
                                                             "(run_rankcse.sh --beta_ 1.0)")
    rank_positive: bool = Field(
        True, description="whether the list ranked for sentence i holds its own positive (the diagonal): the "
                          "community ListMLE keeps it (the teacher's first place; the default, with ListMLE), its "
                          "ListNet drops it (set false with distillation: listnet, as rankcse_listnet does)")
    consistency: Literal["js", "community"] = Field(
        "js", description="the ranking consistency term: the Jensen-Shannon divergence of the two views' "
                          "distributions (the paper) or what the community code's Divergence computes: it clamps "
                          "log of the mixture at 1e-7, which makes every log m equal 1e-7, so the term is half the "
                          "summed negative entropies of the two (1e-7-clamped) distributions per row")
    listmle_eps: float = Field(
        0.0, ge=0, description="ε in ListMLE's log(Σ_{j≥k} exp(s_j − max) + ε): 0 is the exact Plackett-Luce "
                               "likelihood; the community code (after allRank) adds 1e-7, which caps each tail "
                               "term once the student's scores fall 16 below the row's maximum")

    @model_validator(mode="after")
    def _weights_per_teacher(self):
        if len(self.teacher_weights) != len(self.teachers):
            raise ValueError(f"teacher_weights has {len(self.teacher_weights)} values for {len(self.teachers)} "
                             f"teachers: give one weight per teacher (e.g. [0.33, 0.67])")
        return self

    def model_deps(self) -> list[str]:
        """The teachers given as repository-relative folders (``models/simcse``): DVC deps of the train stage."""
        return [t.rstrip("/") for t in self.teachers if not Path(t).expanduser().is_absolute()
                and not t.startswith("~")]


def _sentlab_json(folder: Path) -> dict | None:
    """A sentlab model folder's ``sentlab.json`` (None: not a sentlab model)."""
    f = folder / "sentlab.json"
    if not f.is_file():
        return None
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except ValueError as e:
        raise SentlabError(f"{f} is not valid JSON ({e}); re-run the train stage that wrote it.") from None


def teacher_info(folder: str, method_id: str = "rankcse") -> dict:
    """How teacher ``folder`` embeds: ``{"path", "pooling", "template"}`` from a sentlab model's ``sentlab.json``
    (a trained model only) or a sentence-transformers folder's ``modules.json`` (its Pooling; the transformer's
    subfolder), else [CLS]. A missing folder fails with one paragraph naming the param and the fix."""
    from ..export.st import st_pooling_info

    path = Path(folder).expanduser()
    if not path.is_dir():
        trained = folder.startswith("models/")
        fix = (f"train `{Path(folder).name}` first: add it to train.methods (its train stage writes {folder}; `dvc "
               f"repro` runs it before this one, which declares it as a dep)" if trained else
               "point it at a folder that holds a sentence-transformers model or a trained sentlab model")
        raise SentlabError(f"methods.{method_id}.teachers names {folder}, which is not a folder here "
                           f"({path.resolve()}): RankCSE distils the ranking of each teacher's similarities, so every "
                           f"teacher must exist before training. Either {fix}, or remove it from "
                           f"methods.{method_id}.teachers (and its weight from teacher_weights).")
    info = _sentlab_json(path)
    if info is not None:
        if info.get("status") != "trained":
            raise SentlabError(f"methods.{method_id}.teachers: {folder} is a sentlab model folder whose sentlab.json "
                               f"says status {info.get('status')!r}, not trained; re-run its train stage "
                               f"(`dvc repro train@{path.name}`).")
        if info.get("channels"):
            raise SentlabError(f"methods.{method_id}.teachers: {folder} embeds with channels {info['channels']}, "
                               f"which a teacher does not reproduce; use its full embedding's model instead.")
        if info.get("head"):
            raise SentlabError(f"methods.{method_id}.teachers: {folder} applies a trained head after its pooling "
                               f"(sentlab.json `head`: supervised SimCSE's MLP), which a teacher does not reproduce; "
                               f"train it with `test_mlp: false` or use another teacher.")
        return {"path": str(path), "pooling": info.get("pooling", "cls"), "template": info.get("template")}
    st = st_pooling_info(path)
    if st is not None:
        if st.get("channels") or st.get("head"):
            raise SentlabError(f"methods.{method_id}.teachers: {folder} has a channel slice or a Dense head after "
                               f"its pooling; not supported for a teacher.")
        return {"path": str(path / st["subfolder"]), "pooling": st["pooling"], "template": st.get("template")}
    if not (path / "config.json").is_file():
        raise SentlabError(f"methods.{method_id}.teachers: {folder} has neither sentlab.json, modules.json nor "
                           f"config.json; it is not a model folder. Point it at a sentence-transformers or sentlab "
                           f"model folder.")
    return {"path": str(path), "pooling": "cls", "template": None}


def listnet_loss(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """ListNet's top-1 loss: the mean over rows of the cross-entropy between softmax(teacher row) and
    softmax(student row) (both already divided by their temperatures)."""
    with full_precision(student.device):
        return -(F.softmax(teacher.float(), dim=-1) * F.log_softmax(student.float(), dim=-1)).sum(-1).mean()


def listmle_loss(teacher: torch.Tensor, student: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """ListMLE: the mean over rows of the Plackett-Luce negative log-likelihood of the teacher's order
    (descending; ties kept in index order, a stable sort) under the student's scores:
    Σ_k [log Σ_{j≥k} exp(s_π(j)) − s_π(k)]. ``eps`` > 0: Σ_k [log(Σ_{j≥k} exp(s_π(j) − M) + eps) − (s_π(k) − M)]
    with M the row's maximum (the community code's guarded form; M keeps its gradient there)."""
    with full_precision(student.device):
        order = teacher.float().argsort(dim=-1, descending=True, stable=True)
        s = student.float().gather(-1, order)
        if eps > 0:
            shifted = s - s.max(dim=-1, keepdim=True).values
            tail = (shifted.exp().flip(-1).cumsum(-1).flip(-1) + eps).log()
            return (tail - shifted).sum(-1).mean()
        tail = torch.logcumsumexp(s.flip(-1), dim=-1).flip(-1)
        return (tail - s).sum(-1).mean()


def js_consistency(logits_12: torch.Tensor, logits_21: torch.Tensor) -> torch.Tensor:
    """Ranking consistency: the Jensen-Shannon divergence between softmax(cos(z1_i, z2_·)/τ) and
    softmax(cos(z2_i, z1_·)/τ), the mean over rows."""
    with full_precision(logits_12.device):
        p, q = F.softmax(logits_12.float(), dim=-1), F.softmax(logits_21.float(), dim=-1)
        m = (0.5 * (p + q)).clamp_min(1e-12).log()
        kl_pm = (p * (p.clamp_min(1e-12).log() - m)).sum(-1)
        kl_qm = (q * (q.clamp_min(1e-12).log() - m)).sum(-1)
        return (0.5 * (kl_pm + kl_qm)).mean()


def community_consistency(logits_12: torch.Tensor, logits_21: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """The community code's consistency term (``consistency: community``): with p, q the two views' softmaxes
    clamped below at ``eps``, its Divergence clamps log((p + q) / 2) below at ``eps``; a log-probability is ≤ 0,
    so every entry becomes ``eps`` and its two batch-mean KL terms reduce to
    ½ · Σ_ij [p_ij (log p_ij − eps) + q_ij (log q_ij − eps)] / N: half the summed negative entropies (minus a
    constant-sized ε term), not a divergence."""
    with full_precision(logits_12.device):
        p = F.softmax(logits_12.float(), dim=-1).clamp_min(eps)
        q = F.softmax(logits_21.float(), dim=-1).clamp_min(eps)
        n = p.size(0)
        return 0.5 * ((p * (p.log() - eps)).sum() + (q * (q.log() - eps)).sum()) / n


def off_diagonal(x: torch.Tensor) -> torch.Tensor:
    """The ``(N, N-1)`` matrix of ``x`` without its diagonal (row i ranks the other sentences)."""
    n = x.size(0)
    cols = torch.arange(n - 1, device=x.device).expand(n, -1)
    cols = cols + (cols >= torch.arange(n, device=x.device).unsqueeze(1)).long()   # skip column i (a gather: no sync)
    return x.gather(1, cols)


@register("rankcse")
class RankCSE(FrozenSubmodules, Method):
    """RankCSE: SimCSE whose in-batch similarity lists are also trained to rank as the teachers' do, and to rank
    the same under the two dropout views.

    Liu, Liu, Wang, Wang, Wu, Xian, Zhao, Chen & Yan, "RankCSE: Unsupervised Sentence Representations Learning via
    Learning to Rank", ACL 2023 (the authors released no code; the settings follow the community implementation
    perceptiveshawty/RankCSE, a reimplementation by a third party, and its ``run_rankcse.sh``: ListMLE, teachers
    DiffCSE-BERT-base and SimCSE-BERT-large, the latter replaced here by the pipeline's SimCSE-BERT-base). Per
    batch of N sentences:

    1. :meth:`student_scores`: SimCSE's two views ``z1, z2`` (doubled batch, [CLS] + MLP); L_infoNCE (τ);
    2. :meth:`teacher_scores` (no_grad, frozen teachers in eval mode): each teacher embeds the N sentences with its
       own tokenizer and pooling; its list for sentence i is ``cos(t_i, t_j) / τ2``; the teachers' lists are
       averaged with ``teacher_weights``;
    3. :meth:`consistency_loss`: JS divergence between the two views' similarity distributions (β);
    4. :meth:`distillation_loss`: ListMLE (default) or ListNet between the teacher lists and the student's
       ``cos(z1_i, z2_j) / τ3`` (γ), over the batch with sentence i's own positive (``rank_positive``; ListNet's
       ablation row leaves it out, as the community ListNet);
    5. ``L = L_infoNCE + β·L_consistency + γ·L_rank``.

    The teachers are not trained, not in the optimiser and not in checkpoints (reloaded from their folders); the
    exported encoder is the bare encoder with [CLS]. Teachers named ``models/<name>`` are DVC deps of the train
    stage (``model_deps``), so ``dvc repro`` trains them first.

    Inputs: ``Batch.sentences``.

    Example::

        method = RankCSE(bert, tok, RankCSE.Params(teachers=["models/simcse"], teacher_weights=[1.0]))
        out = method(Batch(["a cat sat", "dogs bark", "it rains"]))
        out["loss"].backward()
    """

    paper = ("Liu, Liu, Wang, Wang, Wu, Xian, Zhao, Chen and Yan: RankCSE: Unsupervised Sentence Representations "
             "Learning via Learning to Rank (ACL 2023)")
    citation = """@inproceedings{liu2023rankcse,
  title = {{RankCSE}: Unsupervised Sentence Representations Learning via Learning to Rank},
  author = {Liu, Jiduan and Liu, Jiahao and Wang, Qifan and Wang, Jingang and Wu, Wei and Xian, Yunsen and \
Zhao, Dongyan and Chen, Kai and Yan, Rui},
  booktitle = {Proceedings of the 61st Annual Meeting of the Association for Computational Linguistics},
  year = {2023}
}"""
    paper_avg = PaperAvg(80.36, "RankCSE (Liu et al., ACL 2023), RankCSE-listMLE BERT-base; teacher substitution: "
                                "the 0.67 teacher here is the pipeline's SimCSE-BERT-base, where run_rankcse.sh "
                                "(community code) uses SimCSE-BERT-large")
    summary = ("RankCSE: SimCSE + JS ranking consistency of the two views + ListNet/ListMLE distillation of "
               "teachers' similarity rankings; [CLS] at test")
    Params = RankCSEParams
    inference_pooling = "cls"
    frozen = ("teachers",)   # out of the checkpoints (FrozenSubmodules)

    def __init__(self, encoder, tokenizer, params: RankCSEParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.mlp = MLPHead.of(encoder.config)
        from ..assets.resolve import load_model

        self.teacher_infos = [teacher_info(t, self.id or "rankcse") for t in params.teachers]
        models, self.teacher_tokenizers = [], []
        for info in self.teacher_infos:
            model, tok = load_model(info["path"])
            model.eval()
            for p in model.parameters():
                p.requires_grad_(False)
            models.append(model)
            self.teacher_tokenizers.append(tok)
        self.teachers = nn.ModuleList(models)
        self.module_init["teachers"] = "checkpoint (" + ", ".join(params.teachers) + ")"

    # --- frozen teachers: eval mode, out of the optimiser and the checkpoints ------------------------------------
    def train(self, mode: bool = True):
        super().train(mode)
        self.teachers.eval()
        return self

    # --- the algorithm -----------------------------------------------------------------------------------------
    def prepare(self, batch: Batch) -> Batch:
        teach = []
        for info, tok in zip(self.teacher_infos, self.teacher_tokenizers):
            texts = apply_template(batch.sentences, tok.mask_token, info["template"]) if info["template"] else \
                batch.sentences
            teach.append(dict(tok(list(texts), padding=True, truncation=True, max_length=self.params.max_length,
                                  return_tensors="pt")))
        batch.features = {"enc": self.encode_text(batch.sentences), **{f"teacher{i}": t for i, t in enumerate(teach)}}
        return batch

    def _embed(self, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """z = MLP([CLS]) of the last layer (SimCSE's)."""
        return self.mlp(self.encoder(**enc, return_dict=True).last_hidden_state[:, 0])

    def student_scores(self, features: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(z1, z2): SimCSE's two dropout views."""
        return two_views(self._embed, features["enc"])

    @torch.no_grad()
    def teacher_scores(self, features: dict) -> torch.Tensor:
        """The weighted average of the teachers' ``cos(t_i, t_j) / τ2`` ``(N, N)``, fp32."""
        total = None
        for i, (model, info, w) in enumerate(zip(self.teachers, self.teacher_infos, self.params.teacher_weights)):
            enc = features[f"teacher{i}"]
            out = model(**enc, output_hidden_states=POOLINGS[info["pooling"]].needs_hidden_states,
                        return_dict=True)
            t = pool(out, enc["attention_mask"], info["pooling"], input_ids=enc["input_ids"]).float()
            s = w * cosine_logits(t, t, self.params.teacher_temperature)
            total = s if total is None else total + s
        return total

    def consistency_loss(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """JS divergence between the two views' similarity distributions (cos/τ); ``consistency: community``: the
        community code's term (:func:`community_consistency`)."""
        tau = self.params.temperature
        term = js_consistency if self.params.consistency == "js" else community_consistency
        return term(cosine_logits(z1, z2, tau), cosine_logits(z2, z1, tau))

    def distillation_loss(self, teacher: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """ListNet / ListMLE of the teacher lists against the student's ``cos(z1_i, z2_j) / τ3``."""
        student = cosine_logits(z1, z2, self.params.student_temperature)
        if not self.params.rank_positive:
            teacher, student = off_diagonal(teacher), off_diagonal(student)
        if self.params.distillation == "listnet":
            return listnet_loss(teacher, student)
        return listmle_loss(teacher, student, self.params.listmle_eps)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        f, p = self.prepared(batch), self.params
        if len(batch) < 3:
            raise SentlabError(f"RankCSE ranks the other sentences of a batch: it needs at least 3 sentences, got "
                               f"{len(batch)}; raise train.batch_size.")
        z1, z2 = self.student_scores(f)
        loss_cl = in_batch_info_nce(z1, z2, p.temperature)
        loss_con = self.consistency_loss(z1, z2)
        loss_rank = self.distillation_loss(self.teacher_scores(f), z1, z2)
        return {"loss": loss_cl + p.consistency_weight * loss_con + p.distill_weight * loss_rank,
                "loss_contrast": loss_cl.detach(), "loss_consistency": loss_con.detach(),
                "loss_rank": loss_rank.detach()}

    def export_info(self) -> dict:
        return {**super().export_info(), "teachers": list(self.params.teachers),
                "training_only": ["mlp", "teachers"]}
