"""`sentlab evaluate --model M` works in any directory (issue #55): with no pipeline workspace, the STS table is
parsed from the STS/SICK data wherever it is (the mirror here), as SimCSE's evaluation.py works from anywhere.
(The evaluator's agreement with MTEB's published scores: tests/test_mteb_agreement.py; the whole command on MiniLM
in an empty directory gave STS12–16 and STS-B within 0.001 of MTEB, benchmarks/RESULTS.md.)"""

from __future__ import annotations

import json

from conftest import mirror_with


def test_evaluate_in_an_empty_directory_parses_the_sts_data_itself(tmp_path, monkeypatch, tiny_bert, capsys,
                                                                    one_thread):
    from sentlab.cli import main

    mirror_with(monkeypatch, "STS", "SICK")
    net, tok = tiny_bert
    model = tmp_path / "tiny"
    net.save_pretrained(model)
    tok.save_pretrained(model)
    work = tmp_path / "anywhere"
    work.mkdir()
    monkeypatch.chdir(work)                                        # no data/, no dvc.yaml, no params.yaml
    assert main(["evaluate", "--model", str(model), "--pooling", "mean", "--json", "out.json", "--no-mlflow"]) == 0
    res = json.loads((work / "out.json").read_text())
    tasks = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    assert all(isinstance(res[t], float) for t in tasks)
    assert abs(res["Avg"] - sum(res[t] for t in tasks) / 7) < 1e-4             # (scores are kept to 4 decimals)
    assert "(mirror)" in capsys.readouterr().err                   # says where the pairs came from
    assert sorted(p.name for p in work.iterdir()) == ["out.json"]  # and writes nothing else here
