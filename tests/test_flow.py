"""BERT-flow baseline (Li et al. 2020, issue #40): log-det, invertibility, likelihood, a seeded fit."""

import math

import numpy as np
import pytest
import torch

from sentlab.errors import SentlabError
from sentlab.evaluate.baselines.flow import ActNorm, Coupling, Flow, Glow, InvertibleLU, flow_lookup
from sentlab.config.sections import FlowParams

from _support.sts_tables import nli_corpus as _nli

pytestmark = pytest.mark.usefixtures("one_thread")


def _data(n=600, d=8, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 3.0   # anisotropic, off-centre
    x[:, 0] = np.tanh(x[:, 0])                                       # and not Gaussian
    return x.astype(np.float32)


def _randomised(model: Glow, seed: int = 1) -> Glow:
    """Every parameter away from its identity-like init (zero-initialised couplings would hide bugs)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
        for m in model.modules():
            if isinstance(m, ActNorm):
                m.initialized.fill_(True)
    return model.double().eval()


@pytest.mark.parametrize("coupling,permutation", [("additive", "reverse"), ("affine", "lu"), ("additive", "lu")])
def test_log_det_is_slogdet_of_the_jacobian_and_the_flow_inverts(coupling, permutation):
    d = 8
    model = _randomised(Glow(d, levels=2, depth=2, width=6, coupling=coupling, permutation=permutation,
                             generator=torch.Generator().manual_seed(0)))
    x = torch.randn(3, d, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    z, logdet, log_prior = model(x)
    for i in range(3):
        jac = torch.autograd.functional.jacobian(lambda v: model(v.unsqueeze(0))[0].squeeze(0), x[i])
        sign, ref = torch.linalg.slogdet(jac)
        assert sign.item() != 0 and logdet[i].item() == pytest.approx(ref.item(), abs=1e-9)
    # log p(x) = log N(z; 0, I) + log|det J|, by hand
    want = (-0.5 * z.pow(2) - 0.5 * math.log(2 * math.pi)).sum(-1) + logdet
    torch.testing.assert_close(model.log_likelihood(x), want)
    torch.testing.assert_close(log_prior, (-0.5 * z.pow(2)).sum(-1) - d / 2 * math.log(2 * math.pi))
    torch.testing.assert_close(model.inverse(z), x, atol=1e-10, rtol=0)   # x -> z -> x


def test_a_hand_checkable_actnorm_and_coupling():
    an = ActNorm(2)
    with torch.no_grad():
        an.b.copy_(torch.tensor([1.0, -1.0]))
        an.s.copy_(torch.tensor([math.log(2.0), 0.0]) / 3)   # scales 2 and 1 (s is stored / 3)
    an.initialized.fill_(True)
    y, ld = an(torch.tensor([[1.0, 3.0]]))
    assert y.tolist() == [[4.0, 2.0]] and ld.item() == pytest.approx(math.log(2.0))
    c = Coupling(4, 3, "additive", torch.Generator().manual_seed(0))   # zero-initialised output: the identity
    x = torch.randn(5, 4)
    y, ld = c(x)
    assert torch.equal(y, x) and torch.equal(ld, torch.zeros(5))


def test_actnorm_data_dependent_init_whitens_the_first_batch():
    x = torch.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 50.0]])
    an = ActNorm(2).train()
    y, _ = an(x)
    torch.testing.assert_close(y.mean(0), torch.zeros(2), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.pow(2).mean(0), torch.ones(2), atol=1e-4, rtol=0)
    y2, _ = an(x * 7)               # later batches: the parameters are kept
    assert not torch.allclose(y2.mean(0), torch.zeros(2))


def test_lu_mixing_starts_as_a_rotation():
    mix = InvertibleLU(6, torch.Generator().manual_seed(3))
    w = mix.weight().double()
    torch.testing.assert_close(w @ w.T, torch.eye(6, dtype=torch.float64), atol=1e-5, rtol=0)


def test_the_fit_raises_the_likelihood_and_is_seeded():
    x = _data()
    params = FlowParams(levels=2, depth=2, width=16, batch_size=64, epochs=3)
    a = Flow.fit(x, params, seed=7)
    b = Flow.fit(x, params, seed=7)
    c = Flow.fit(x, params, seed=8)
    assert a.steps == 3 * math.ceil(600 / 64)
    assert a.nll_end < a.nll_start - 0.05, (a.nll_start, a.nll_end)   # nats per dimension
    za, zb, zc = a(x), b(x), c(x)
    assert za.shape == (600, 8) and za.dtype == np.float32
    assert np.array_equal(za, zb) and not np.array_equal(za, zc)
    assert a.info() == b.info() and a.info()["fit_size"] == 600
    # z is closer to N(0, I) than x: centred, and its dimensions far less correlated
    def offdiag(v):
        c = np.corrcoef(v, rowvar=False)
        return np.abs(c - np.diag(np.diag(c))).max()
    assert np.abs(za.mean(0)).max() < 0.3 and np.abs(x.mean(0)).max() > 2
    assert offdiag(za) < 0.6 * offdiag(x), (offdiag(za), offdiag(x))   # here 0.40 vs 0.76 after 30 steps
    lookup = flow_lookup({"s": x[0], "t": x[1]}, a)
    np.testing.assert_allclose(lookup["t"], za[1], atol=1e-5)   # a 2-row batch: float rounding differs
    # steps caps the fit (the preflight slice sets it)
    assert Flow.fit(x, params.model_copy(update={"steps": 2}), seed=7).steps == 2


def test_bad_dimensions_and_params_are_user_errors():
    with pytest.raises(SentlabError, match="evaluate.bert_flow.levels"):
        Flow.fit(_data(d=6), FlowParams(levels=3), seed=0)
    with pytest.raises(SentlabError, match="at least 2"):
        Flow.fit(_data(n=1), FlowParams(levels=1), seed=0)
    with pytest.raises(Exception, match="coupling"):
        FlowParams(coupling="spline")


def test_flow_encoder_fits_on_the_pool_and_reuses_its_embeddings(tiny_bert, monkeypatch):
    from sentlab.config import Params
    from tiny import counting_encoder
    from sentlab.evaluate.baselines import fitted
    from sentlab.evaluate.sts.protocol import evaluate_table
    from _support.sts_tables import random_word_table as _table

    model, tok = tiny_bert
    calls: list[list[str]] = []

    raw = counting_encoder(model, tok, "base-bert_flow", calls)
    monkeypatch.setattr(fitted, "build_encoders", lambda *a, **kw: {"base-bert_flow": raw})
    params = Params()
    params.evaluate.bert_flow = FlowParams(levels=2, depth=1, width=8, pooling="mean", steps=5)
    enc, embeddings, info = fitted.flow_encoder(params, _table(), progress=False)
    assert info["fit_size"] == len(calls[0]) == len(set(calls[0])) and info["steps"] == 5 and info["dim"] == 32
    assert isinstance(enc.post, Flow) and info["seed"] == params.seed
    some = calls[0][:4]
    np.testing.assert_allclose(np.stack([embeddings[s] for s in some]), enc.encode(some), atol=1e-5)
    n = len(calls)
    table = _table()
    res = evaluate_table(enc, table, embeddings=embeddings)
    assert len(calls) == n                                   # served from the fit's embeddings, nothing encoded again
    # the scores of the flow's embeddings (checked against enc.encode above), computed here: per test task
    # 100 x Spearman of the pairs' cosines with the gold scores, Avg their mean
    from scipy.stats import spearmanr

    expected = {}
    for task, g in table[table.split == "test"].groupby("task"):
        a, b = (np.stack([embeddings[s] for s in col]).astype(np.float64) for col in (g.sentence1, g.sentence2))
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        expected[task] = 100 * spearmanr(cos, g.score).statistic
    assert {t: res[t] for t in expected} == pytest.approx(expected, abs=1e-4)   # the table rounds to 4 places
    assert res["Avg"] == pytest.approx(np.mean(list(expected.values())), abs=1e-4)


def test_profiles_list_flow_and_glove():
    from pathlib import Path

    from sentlab.config import load_params

    root = Path(__file__).resolve().parents[1]
    paper = load_params(root / "params.yaml", profile="paper")
    assert {"bert_flow", "glove"} <= set(paper.evaluate.baselines)
    smoke = load_params(root / "params.yaml", profile="smoke")
    assert "bert_flow" not in smoke.evaluate.baselines and "glove" not in smoke.evaluate.baselines
    quick = load_params(root / "params.yaml", profile="quick")
    assert "glove" not in quick.evaluate.baselines
    assert quick.evaluate.bert_flow == FlowParams()   # the code's settings in every profile


def test_the_preflight_slice_caps_the_flow_fit():
    """The paper preflight's slice fits the flow in its step budget, not an epoch; without a flow baseline the
    slice leaves evaluate.bert_flow alone."""
    from pathlib import Path

    from sentlab.config import validate

    from sentlab.config.yaml_files import deep_merge
    from sentlab.preflight import slice_edits
    from sentlab.config.profile_files import profile_values

    sl = {"size": 600, "steps": 3, "batch_size": 8, "dev_max_pairs": 16, "max_pairs": 10}
    paper = profile_values("paper", Path(__file__).resolve().parents[1] / "profiles")
    p = validate(deep_merge(paper, slice_edits(paper, sl)))
    assert p.evaluate.bert_flow.steps == 3 and p.evaluate.bert_flow.levels == 3 and "glove" in p.evaluate.baselines
    paper["evaluate"]["baselines"] = ["cls"]
    assert "bert_flow" not in slice_edits(paper, sl)["evaluate"]


def test_sentlab_methods_lists_the_baselines_the_schema_allows(capsys):
    """`sentlab methods` lists every trained method, then every evaluate.baselines entry (BERT-flow and GloVe of
    issue #40 among them), exactly the names params.yaml's schema accepts."""
    import typing

    from sentlab.evaluate.baselines.stage import DESCRIPTIONS
    from sentlab.cli import main
    from sentlab.config.sections import EvaluateParams

    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    methods, baselines = out.split("\nbaselines (")
    assert {"simcse_crop", "consert", "sg_opt", "esimcse", "diffcse", "ct"} <= {ln.split()[0] for ln in
                                                                               methods.splitlines() if ln}
    listed = [ln.split()[0] for ln in baselines.splitlines()[1:] if ln]
    allowed = typing.get_args(typing.get_args(EvaluateParams.model_fields["baselines"].annotation)[0])
    assert listed == list(DESCRIPTIONS) and set(listed) == set(allowed) and {"bert_flow", "glove"} <= set(listed)


def test_the_code_s_optimiser_has_no_bias_correction():
    """bohanli/BERT-flow fits the flow with BERT's AdamWeightDecayOptimizer: no bias correction, so the first step
    moves a parameter by lr·0.1·g/(√(0.001)·|g| + ε) ≈ 3.16·lr (torch's AdamW: lr). A zero-initialised coupling
    output bias after one step, no decay (issue #53 §3.5); the step's batch is not actnorm's init batch (whose
    mean the init zeroes), so the bias has a gradient."""
    x = _data(n=600)

    def first_step(bias_correction):
        p = FlowParams(levels=1, depth=1, width=8, steps=1, weight_decay=0.0, bias_correction=bias_correction)
        moved = Flow.fit(x, p, seed=0).model.steps[0][2].nn.out.bias.detach().abs()
        return moved[moved > 0]

    np.testing.assert_allclose(first_step(False).numpy(), 1e-3 * 0.1 / math.sqrt(0.001), rtol=0.05)   # ε: −3 %
    np.testing.assert_allclose(first_step(True).numpy(), 1e-3, rtol=0.05)
    assert FlowParams().bias_correction   # the quick profile's torch AdamW; the paper profile sets the code's


def test_flow_fits_on_the_nli_sentences(tiny_bert, monkeypatch, tmp_path):
    """fit_on: nli (SimCSE App. C's "NLI" fit behind its Table 5's 66.55): the flow is fitted on the distinct
    sentences of data/corpus/nli.parquet, never on the evaluation pool, which is still encoded once for the
    evaluation (issue #53 §3.5)."""
    from sentlab.config import Params
    from sentlab.evaluate.baselines import fitted as F
    from _support.sts_tables import random_word_table as _table
    from tiny import counting_encoder

    model, tok = tiny_bert
    calls: list[list[str]] = []
    monkeypatch.setattr(F, "build_encoders",
                        lambda *a, **kw: {"base-bert_flow": counting_encoder(model, tok, "base-bert_flow", calls)})
    monkeypatch.chdir(tmp_path)
    params = Params()
    params.evaluate.bert_flow = FlowParams(levels=2, depth=1, width=8, pooling="mean", fit_on="nli",
                                           bias_correction=False)
    with pytest.raises(SentlabError, match="evaluate.bert_flow.fit_on: nli needs"):
        F.flow_encoder(params, _table(), progress=False)
    want = _nli(tmp_path)
    enc, embeddings, info = F.flow_encoder(params, _table(), progress=False)
    fitted = [s for c in calls for s in c if s in set(want)]
    assert info["fit_on"] == "nli" and info["fit_size"] == len(want) == 114 and sorted(fitted) == sorted(want)
    assert "nli: all the distinct sentences" in info["fit_source"] and info["bias_correction"] is False
    pool = set(_table().sentence1) | set(_table().sentence2)
    assert set(embeddings) <= pool and not set(want) & pool
    params.evaluate.bert_flow = params.evaluate.bert_flow.model_copy(update={"sample_size": 30})
    assert F.flow_encoder(params, _table(), progress=False)[2]["fit_size"] == 30


def test_paper_profile_fits_flow_and_whitening_on_nli():
    from pathlib import Path

    from sentlab.config import load_params

    paper = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="paper")
    fp, wp = paper.evaluate.bert_flow, paper.evaluate.whitening
    assert (fp.fit_on, fp.bias_correction, fp.sample_size) == ("nli", False, None)
    assert (wp.fit_on, wp.sample_size) == ("nli", None)
    assert fp.model_copy(update={"fit_on": "sts_pool", "bias_correction": True}) == FlowParams()
