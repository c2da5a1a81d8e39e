"""Reading the metrics and filling a table's rows: :func:`resolve` gives each :class:`RowSpec` the first of
its models that was evaluated with the settings the row expects (else the reason it has no numbers);
:func:`render_rows` adds the models of the table whose settings fit none of its rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

from ...config.tasks import STS_ALL
from .spec import EVALUATED, OTHER_SETTINGS, STS7, Resolved, RowSpec, TableSpec

# the keys each suite's metrics JSON holds, from the declared tasks (sentlab.config.tasks)
from ...config.tasks import GLUE_KEYS, RETRIEVAL_KEYS, TRANSFER_KEYS  # noqa: E402,F401 - re-exported
TRANSFER_DIR = "transfer"   # reports/metrics/transfer/<model>.json (the transfer@<model> stages)
RETRIEVAL_DIR = "retrieval"  # reports/metrics/retrieval/<model>.json (the retrieval@<model> stages)
GLUE_DIR = "glue"             # reports/metrics/glue/<model>.json (the glue@<model> stages, `sentlab glue --json`)


def retrieval_missing() -> str:
    """The reason of a retrieval row without results: the data to fetch, then the command that fills it."""
    from ...assets.resolve import data_fetch_command
    from ...evaluate.suites import retrieval  # noqa: F401 - registers the qqp / askubuntu assets

    fetch = "; ".join(f"`{data_fetch_command(a)}`" for a in ("qqp", "askubuntu_text", "askubuntu_test"))
    return (f"needs data: QQP and AskUbuntu are not in the mirror here ({fetch}); then list the model in params.yaml "
            f"retrieval.models (stage retrieval@<model>), or `sentlab evaluate --model models/<model> --tasks "
            f"retrieval --json reports/metrics/retrieval/<model>.json`")

def load_metrics(folder: Path) -> dict[str, dict]:
    """``{name: metrics}`` of ``folder/*.json``; an unreadable file becomes a status saying so. A model's
    transfer results (``folder/transfer/<name>.json``) are its ``transfer_metrics``, its retrieval results
    (``folder/retrieval/<name>.json``) its ``retrieval_metrics``."""
    out = _load_folder(folder)
    for sub, key in ((TRANSFER_DIR, "transfer_metrics"), (RETRIEVAL_DIR, "retrieval_metrics"),
                     (GLUE_DIR, "glue_metrics")):
        for name, t in _load_folder(Path(folder) / sub).items():
            if name in out:
                out[name][key] = t
    return out


def _load_folder(folder: Path) -> dict[str, dict]:
    out = {}
    for f in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(f.read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            out[f.stem] = data
        except (ValueError, OSError) as e:
            out[f.stem] = {"model": f.stem, "status": f"unreadable metrics file {f} ({e}); re-run its evaluate stage"}
    return out


def _num(v) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(float(v)) else float(v)


def _mean(vals) -> Optional[float]:
    vals = [_num(v) for v in vals]
    return None if not vals or any(v is None for v in vals) else sum(vals) / len(vals)


def extract(m: dict, how: str) -> tuple[dict, Optional[str]]:
    """(column -> value, reason when the needed part is absent)."""
    if how == "sts":
        vals = {k: _num(m.get(k)) for k in (*STS7, "Avg", "STSBenchmark-dev")}
        vals["STS12-16"] = _mean([m.get(t) for t in STS_ALL])
        return vals, None
    if how == "sts_transfer":
        vals, _ = extract(m, "sts")
        t = m.get("transfer_metrics")
        ok = isinstance(t, dict) and t.get("status", EVALUATED) == EVALUATED
        vals["TransferAvg"] = _num(t.get("TransferAvg")) if ok else None
        return vals, None
    if how == "glue":
        t = m.get("glue_metrics")
        if not isinstance(t, dict):
            name = str(m.get("model", "<model>"))
            src = m.get("backbone", "<backbone>") if name.startswith("base-") else f"models/{name}"
            return {}, (f"not fine-tuned: list `{name}` in params.yaml glue.models (stage glue@{name}), or "
                        f"`sentlab glue --model {src} --json reports/metrics/glue/{name}.json` (WNLI, QNLI and QQP "
                        f"need GLUE's data)")
        return {k: _num(t.get(k)) for k in GLUE_KEYS}, None
    if how == "retrieval":
        t = m.get("retrieval_metrics")
        if not isinstance(t, dict):
            return {}, retrieval_missing()
        return {k: _num(t.get(k)) for k in RETRIEVAL_KEYS}, None
    if how == "transfer":
        t = m.get("transfer_metrics")
        if not isinstance(t, dict):
            return {}, "no transfer evaluation (reports/metrics/transfer/): add it to params.yaml transfer.models"
        if t.get("status", EVALUATED) != EVALUATED:
            return {}, str(t["status"])
        return {k: _num(t.get(k)) for k in TRANSFER_KEYS}, None
    diag = m.get("diagnostics")
    if not isinstance(diag, dict):
        return {}, "evaluated without diagnostics (evaluate.diagnostics is false)"
    if how in ("hard_subset", "hard_full"):
        which = "subset" if how == "hard_subset" else "full"
        hs = diag.get("hard_subset") or {}
        vals = {t: _num((hs.get("tasks") or {}).get(t, {}).get(which)) for t in STS7[:5]}
        vals["Avg"] = _num(hs.get(f"Avg_{which}"))
        return vals, None
    if how == "density":
        vals = {}
        for b in (diag.get("density") or {}).get("bins", []):
            vals[f"{b['level']} mean"] = _num(b.get("mean"))
            vals[f"{b['level']} var"] = _num(b.get("var"))
        return vals, None
    raise ValueError(f"unknown extractor {how!r}")


def _why_missing(name: str, models_dir: Path) -> str:
    base = name.split("/")[0]
    info_file = Path(models_dir) / base / "sentlab.json"
    metrics = f"reports/metrics/{base}.json"
    if base == "base-glove":
        from ...evaluate.baselines.glove import glove_missing

        why = glove_missing()   # "needs data" with the fetch command when the vectors are not here
        if why:
            return why
    if base.startswith("base-"):
        return f"{metrics} missing: the evaluate_baseline stage for {base[5:]} did not run or failed"
    if not info_file.is_file():
        return (f"{metrics} and models/{base}/sentlab.json missing: the train stage of {base} did not run or "
                f"failed (see `dvc repro` output)")
    try:
        status = json.loads(info_file.read_text()).get("status", "?")
    except ValueError:
        return f"{metrics} missing and models/{base}/sentlab.json unreadable: the train stage of {base} failed"
    if status == "trained":
        return f"{metrics} missing: {base} was trained but its evaluate stage did not run or failed"
    return f"{metrics} missing; models/{base}/sentlab.json says: {status}"


def _fmt(v) -> str:
    return "/".join(map(_fmt, v)) if isinstance(v, tuple) else ("null" if v is None else str(v))


def settings_text(d: dict) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in d.items())


def mismatch(expects: dict, method: Optional[dict]) -> Optional[str]:
    """Why a model trained with the ``method`` block cannot fill a row expecting ``expects`` (None: it can)."""
    if not expects:
        return None
    if not isinstance(method, dict) or not method:
        return "its metrics record no method settings (evaluated before they were recorded); re-run its evaluate stage"
    bad = {k: method.get(k, "absent") for k, want in expects.items()
           if method.get(k) not in (want if isinstance(want, tuple) else (want,))}
    if bad:
        return f"trained with {settings_text(bad)}, this row expects {settings_text({k: expects[k] for k in bad})}"
    return None


def resolve(row: RowSpec, metrics: dict[str, dict], models_dir: Path = Path("models")) -> Resolved:
    if not row.models:
        return Resolved(row, status=row.note or "paper only")
    reasons: list[str] = []
    for cand in row.models:
        base, _, extra = cand.partition("/")
        m = metrics.get(base)
        if m is None:
            reasons.append(_why_missing(cand, models_dir))
            continue
        status = m.get("status", EVALUATED)
        if status != EVALUATED:
            reasons.append(f"{base}: {status}")
            continue
        why = mismatch(row.expects, m.get("method"))
        if why:
            reasons.append(f"{base}: {why}")
            continue
        method = m.get("method") if isinstance(m.get("method"), dict) else {}
        if extra:
            m2 = (m.get("extra_rows") or {}).get(extra)
            if m2 is None:
                reasons.append(f"{base} was evaluated without the extra row {extra}")
                continue
            m = {**m2, "backbone": m.get("backbone"), "profile": m.get("profile")}
        vals, why = extract(m, row.extract)
        if why:
            reasons.append(f"{base}: {why}")
            continue
        res = Resolved(row, cand, EVALUATED, vals, str(m.get("backbone", "")), str(m.get("profile", "")), method)
        sample = (m.get("transfer_metrics") or {}).get("max_examples") if row.extract == "transfer" else None
        if sample:
            res.caveat = f"a seeded sample of {sample} examples per split (transfer.max_examples): no Δ"
        cut = (m.get("glue_metrics") or {}).get("slice") if row.extract == "glue" else None
        if cut:
            res.caveat = f"fine-tuned on a CPU slice ({cut}; glue.finetune): no Δ"
        return res
    return Resolved(row, row.models[0], "; ".join(reasons) or "not evaluated")



def render_rows(spec: TableSpec, metrics: dict[str, dict], models_dir: Path = Path("models")) -> list[Resolved]:
    """The table's rows resolved, each filled row labelled with its model's settings, then the
    models of the table whose settings fit none of its rows (:data:`OTHER_SETTINGS`)."""
    rows = [resolve(r, metrics, models_dir) for r in spec.rows]
    rows += unplaced_rows(spec, rows, metrics)
    for res in rows:
        if res.evaluated and spec.settings and res.method:
            res.trained_with = settings_text({k: res.method[k] for k in spec.settings if k in res.method})
    return rows


def unplaced_rows(spec: TableSpec, rows: list[Resolved], metrics: dict[str, dict]) -> list[Resolved]:
    """A row "``<model>`` as trained" for each evaluated model that settings-checked rows name but
    whose recorded settings fit none of the rows naming it."""
    filled = {res.model for res in rows if res.evaluated}
    out, seen = [], set()
    for row in spec.rows:
        for cand in row.models if row.expects else ():
            m = metrics.get(cand)
            if (cand in filled or cand in seen or "/" in cand or m is None or m.get("status", EVALUATED) != EVALUATED
                    or not isinstance(m.get("method"), dict) or not m["method"]):
                continue
            if any(cand in r.models and mismatch(r.expects, m["method"]) is None for r in spec.rows):
                continue                                   # fits a row another model of its settings filled
            seen.add(cand)
            vals, why = extract(m, row.extract)
            if why is None:
                out.append(Resolved(RowSpec(f"{cand} (as trained)", (cand,), None,
                                            "its settings fit no row of this table",
                                            OTHER_SETTINGS, row.extract), cand, EVALUATED, vals,
                                    str(m.get("backbone", "")), str(m.get("profile", "")), m["method"]))
    return out
