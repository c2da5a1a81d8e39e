"""What the equivalence cases feed to both sides, against the released functions (issue #66 §4).

    python benchmarks/released/_fed_to_both.py --checkouts DIR [--draws 400] [--json F]

``DIR`` holds the checkouts ``run_all.py`` uses (``DIR/DiffCSE``: voidism/DiffCSE@f724b2c). The cases make some
inputs once with sentlab's own code and give them to both sides, so those parts of sentlab are never compared
there. Here each is run against the released function itself:

* ``esimcse_start`` — ESimCSE's ``momentum_init: random``. The release's momentum encoder is what
  transformers 4.2.1's ``BertPreTrainedModel._init_weights`` draws (``cl_init`` → ``init_weights()``; the release
  pins ``transformers==4.2.1``; its source is the copy DiffCSE's repository vendors,
  ``transformers-4.2.1/src/transformers/models/bert/modeling_bert.py``, compiled alone). sentlab's
  :func:`sentlab.methods.esimcse.bert_init_` from ``Generator().manual_seed(s)`` against that function applied with
  ``module.apply`` after ``torch.manual_seed(s)``: the streams match, so the values must be *equal*.
* ``diffcse_masks`` — DiffCSE's masks. The release's collator ``mask_tokens`` (``train.py:512-544``, compiled
  alone: 30 % of the non-special tokens; of those 80 % [MASK], then half the rest a random token) against
  sentlab's ``DiffCSE.mask_views``: their random streams differ (two Bernoulli draws against one uniform), so the
  *distribution* is compared over ``--draws`` draws of the 32-sentence batch: each side's rate of chosen tokens,
  [MASK], random and kept within 4.5 σ of the nominal rate (binomial), the two sides within 4.5 σ of each other,
  and the same set of positions ever chosen (specials and padding never).

Each has a control (a deliberate change of sentlab's side: the init's std × 1.5; masks at 75/15/10) that must be
reported as different (``control_caught``).

Not here: L2P-CSR's random start (Eq. 4) is ``torch.rand`` on both sides, U(0, 1) over the same positions (under
``attend_padding: true``, the paper profile, sentlab draws the padding positions too, as the release, whose noise
covers the padded grid); only the layout of the draw differs (the release's ``(3, N, 2, L)`` against sentlab's
``(3, 2N, L)``), so the case feeds one draw to both, and tests/test_l2p.py compares sentlab's draw with the
release's in distribution (its shapes, every position, U(0, 1); a control). PromptBERT's template-2 position
shift: ``denoise_shift`` (tests/test_prompt_denoise_shift.py).
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Optional, Tuple

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import MORE_SENTENCES, SENTENCES, load_backbone  # noqa: E402

SIGMAS = 4.5


def _function(source: Path, name: str, namespace: dict):
    """The first function ``name`` in ``source`` (at any depth: a method or a nested class's), compiled alone."""
    tree = ast.parse(source.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    fn.decorator_list = []
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(source), "exec"), namespace)
    return namespace[name]


def esimcse_start(checkouts: Path, seeds=(0, 1, 7), control: bool = False) -> dict:
    """``control``: sentlab's draw at 1.5 × the std (must differ)."""
    from sentlab.methods.esimcse import bert_init_

    src = checkouts / "DiffCSE" / "transformers-4.2.1" / "src" / "transformers" / "models" / "bert" / "modeling_bert.py"
    init = _function(src, "_init_weights", {"nn": nn, "torch": torch})
    backbone, _ = load_backbone()
    worst, tensors = 0.0, 0
    for s in seeds:
        std = backbone.config.initializer_range * (1.5 if control else 1.0)
        ours = bert_init_(copy.deepcopy(backbone), std, torch.Generator().manual_seed(s))
        theirs = copy.deepcopy(backbone)
        owner = SimpleNamespace(config=backbone.config)
        torch.manual_seed(s)
        with torch.no_grad():
            theirs.apply(lambda m: init(owner, m))
        a, b = dict(ours.named_parameters()), dict(theirs.named_parameters())
        assert a.keys() == b.keys()
        for n in a:
            worst = max(worst, float((a[n] - b[n]).detach().abs().max()))
            tensors += 1
    return {"part": "esimcse_start", "released": f"transformers 4.2.1 _init_weights ({src.relative_to(checkouts)})",
            "compared": f"{tensors} tensors over seeds {list(seeds)}", "max_abs_delta": worst,
            "agrees": worst == 0.0, "how": "same values (streams matched)"}


class _Tok:
    """The tokenizer as the release's collator sees it (its ``custom_mlm_prob`` attribute: None, the run's)."""

    def __init__(self, tok):
        self._tok, self.custom_mlm_prob, self.mask_token = tok, None, tok.mask_token

    def __len__(self):
        return len(self._tok)

    def __getattr__(self, name):
        return getattr(self._tok, name)


def _bounds(k: int, n: int, p: float) -> bool:
    return abs(k / n - p) <= SIGMAS * math.sqrt(p * (1 - p) / n)


def diffcse_masks(checkouts: Path, draws: int, control: bool = False) -> dict:
    """``control``: sentlab's masks at 75 % [MASK] / 15 % random (must differ)."""
    from sentlab.methods.diffcse import DiffCSE

    mask_tokens = _function(checkouts / "DiffCSE" / "train.py", "mask_tokens",
                            {"torch": torch, "Optional": Optional, "Tuple": Tuple})
    _, tok = load_backbone()
    enc = tok(list(SENTENCES) + list(MORE_SENTENCES), padding=True, truncation=True, max_length=32,
              return_tensors="pt")
    ids, att = enc["input_ids"], enc["attention_mask"]
    params = (DiffCSE.Params(mask_ratio=0.3, mask_token_prob=0.75, random_token_prob=0.15) if control
              else DiffCSE.Params(mask_ratio=0.3))
    me = SimpleNamespace(params=params, tokenizer=tok, _special=torch.tensor(sorted(set(tok.all_special_ids))))
    collator = SimpleNamespace(mlm_probability=0.3, tokenizer=_Tok(tok))
    mask_id = tok.mask_token_id
    counts = {side: {"eligible": 0, "chosen": 0, "mask": 0, "random": 0, "kept": 0} for side in ("released", "sentlab")}
    ever = {"released": torch.zeros_like(ids, dtype=torch.bool), "sentlab": torch.zeros_like(ids, dtype=torch.bool)}
    for d in range(draws):
        torch.manual_seed(d)
        out_r, labels = mask_tokens(collator, ids)
        chosen_r = labels != -100
        out_s, chosen_s = DiffCSE.mask_views(me, ids, att, torch.Generator().manual_seed(d))
        for side, out, chosen in (("released", out_r, chosen_r), ("sentlab", out_s, chosen_s)):
            c = counts[side]
            c["chosen"] += int(chosen.sum())
            c["mask"] += int((chosen & (out == mask_id)).sum())
            c["kept"] += int((chosen & (out == ids)).sum())
            c["random"] += int((chosen & (out != ids) & (out != mask_id)).sum())
            ever[side] |= chosen
    eligible = int((att.bool() & ~torch.isin(ids, me._special)).sum()) * draws
    checks = {}
    # nominal shares; a random token equal to the original counts as kept (p ≈ 0.1·(1 − 1/|V|) random)
    nominal = {"chosen": (0.3, "eligible"), "mask": (0.8, "chosen"), "random": (0.1, "chosen"), "kept": (0.1, "chosen")}
    for side, c in counts.items():
        c["eligible"] = eligible
        for k, (p, of) in nominal.items():
            checks[f"{side} {k} rate {c[k] / c[of]:.4f} vs {p}"] = _bounds(c[k], c[of], p)
    r, s = counts["released"], counts["sentlab"]
    for k, (p, of) in nominal.items():
        se = math.sqrt(p * (1 - p) * (1 / r[of] + 1 / s[of]))
        gap = abs(r[k] / r[of] - s[k] / s[of])
        checks[f"{k}: released {r[k] / r[of]:.4f} vs sentlab {s[k] / s[of]:.4f}"] = gap <= SIGMAS * se
    checks["the same positions ever chosen"] = bool(torch.equal(ever["released"], ever["sentlab"]))
    return {"part": "diffcse_masks", "released": "DiffCSE train.py mask_tokens (its collator, mlm_probability 0.3)",
            "compared": f"{draws} draws of {ids.size(0)} sentences ({eligible // draws} eligible tokens a draw)",
            "counts": counts, "checks": checks, "agrees": all(checks.values()),
            "how": f"distribution: each rate within {SIGMAS} σ (binomial), the two sides within {SIGMAS} σ"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkouts", required=True, type=Path)
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not (args.checkouts / "DiffCSE" / "train.py").is_file():
        print(f"--checkouts {args.checkouts}: no DiffCSE/train.py. Clone it: git clone "
              f"https://github.com/voidism/DiffCSE {args.checkouts}/DiffCSE && "
              f"git -C {args.checkouts}/DiffCSE checkout f724b2cc921efdfb4e4bd85cd7ca13a8f0d1f0cf", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    results = [esimcse_start(args.checkouts), diffcse_masks(args.checkouts, args.draws)]
    controls = [esimcse_start(args.checkouts, control=True), diffcse_masks(args.checkouts, args.draws, control=True)]
    for r, c in zip(results, controls):   # a deliberate change must be reported as different
        r["control"] = "std × 1.5" if r["part"] == "esimcse_start" else "80/10/10 → 75/15/10"
        r["control_caught"] = not c["agrees"]
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["agrees"] and r["control_caught"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
