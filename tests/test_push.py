"""``sentlab push`` (issue #55): an exported model and its card to the Hugging Face Hub, offline.

The Hub is unreachable here: a fake ``HfApi`` is put where huggingface_hub's is (the boundary) and records the calls;
the dry run is checked as text. Token, export and repository id errors are one paragraph and a non-zero exit.
"""

from __future__ import annotations

import huggingface_hub
import pytest
from huggingface_hub import constants

from sentlab.cli import main

TOKEN = "hf_fakeTOKEN0123456789"
SENT = ("1_Pooling/config.json", "README.md", "model.safetensors", "modules.json")   # the export's files


class FakeApi:
    made: list = []

    def __init__(self, token=None, **kw):
        self.calls = [("init", {"token": token, **kw})]
        FakeApi.made.append(self)

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", {"repo_id": repo_id, **kw}))

    def create_commit(self, **kw):
        kw["operations"] = [(op.path_in_repo, op.path_or_fileobj) for op in kw["operations"]]
        self.calls.append(("create_commit", kw))
        return huggingface_hub.CommitInfo(commit_url=f"https://huggingface.co/{kw['repo_id']}/commit/abc",
                                          commit_message="m", commit_description="", oid="abc")


@pytest.fixture
def hub(monkeypatch, tmp_path):
    FakeApi.made = []
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))   # no login stored here
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "exports" / "simcse"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "README.md").write_text("---\nlibrary_name: sentence-transformers\n---\n# simcse\nSTS Avg 76.25\n")
    (folder / "model.safetensors").write_bytes(b"\0" * 3000)
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    (folder / "modules.json").write_text("[]")
    return folder


def test_push_creates_the_repo_and_uploads_the_export_with_its_card(hub, monkeypatch, capsys, caplog):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with caplog.at_level("DEBUG"):
        assert main(["-v", "push", "simcse", "--repo-id", "my-lab/simcse-minilm"]) == 0
    (api,) = FakeApi.made
    assert api.calls == [
        ("init", {"token": TOKEN}),
        ("create_repo", {"repo_id": "my-lab/simcse-minilm", "repo_type": "model", "private": False,
                         "exist_ok": True}),
        ("create_commit", {"repo_id": "my-lab/simcse-minilm", "repo_type": "model",
                           "commit_message": "sentlab push: simcse",
                           "operations": [(f, str(hub.resolve() / f)) for f in SENT]})]
    out = capsys.readouterr()
    assert out.out == ("pushed exports/simcse to my-lab/simcse-minilm: "
                       "https://huggingface.co/my-lab/simcse-minilm/commit/abc\n")
    assert TOKEN not in out.out + out.err + caplog.text


def test_dry_run_lists_files_sizes_and_the_card_and_sends_nothing(hub, capsys):
    assert main(["push", "simcse", "--repo-id", "my-lab/simcse-minilm", "--dry-run"]) == 0   # no token needed
    assert FakeApi.made == []
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("dry run: nothing sent. Would create (if missing) the model repository my-lab/simcse-minilm and "
                      "upload 4 files (3.0 KiB) from exports/simcse:")
    assert out[1:5] == ["        32 B  1_Pooling/config.json", "        67 B  README.md",
                        "     2.9 KiB  model.safetensors", "         2 B  modules.json"]
    assert out[6:] == ["model card (README.md):", "---", "library_name: sentence-transformers", "---", "# simcse",
                       "STS Avg 76.25", ""]


@pytest.mark.parametrize("argv, says", [
    (["push", "simcse", "--repo-id", "my-lab/x"], "No Hugging Face token: set HF_TOKEN"),
    (["push", "ptbert", "--repo-id", "my-lab/x"], "No exported model 'ptbert': exports/ptbert does not exist"),
    (["push", "simcse", "--repo-id", "my lab/x"], "--repo-id 'my lab/x' is not a Hub repository id"),
    (["push", "simcse", "--repo-id", "simcse"], "--repo-id 'simcse' names no owner: use ORG/NAME"),
])
def test_no_token_no_export_and_a_bad_repo_id_are_one_paragraph_and_a_failure(hub, capsys, argv, says):
    assert main(argv) != 0
    assert says in capsys.readouterr().err
    assert all(c[0] == "init" for a in FakeApi.made for c in a.calls)   # nothing created, nothing uploaded


def test_a_folder_without_its_card_is_refused(hub, capsys):
    (hub / "README.md").unlink()
    assert main(["push", "exports/simcse", "--repo-id", "my-lab/x", "--dry-run"]) != 0
    assert "exports/simcse has no README.md (the model card)" in capsys.readouterr().err


def test_a_workspace_is_not_pushed(hub, monkeypatch, capsys):
    """`sentlab push .` in a workspace (no modules.json / sentlab.json): refused before anything is created."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    ws = hub.parent.parent
    (ws / ".dvc").mkdir()
    (ws / ".dvc" / "config.local").write_text("secret_access_key = SECRET\n")
    (ws / "README.md").write_text("# a workspace\n")
    assert main(["push", ".", "--repo-id", "my-lab/x"]) == 2
    assert "is not a model folder (it has none of modules.json, sentlab.json)" in capsys.readouterr().err
    assert all(c[0] == "init" for a in FakeApi.made for c in a.calls)    # nothing created, nothing uploaded


def test_dot_folders_are_never_sent_and_the_dry_run_lists_exactly_what_is(hub, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (hub / ".dvc").mkdir()
    (hub / ".dvc" / "config.local").write_text("secret_access_key = SECRET\n")
    (hub / ".git").mkdir()
    (hub / ".git" / "config").write_text("[core]\n")
    (hub / "1_Pooling" / ".config.json.1234.tmp").write_text("{")          # a killed write's leftover
    assert main(["push", "simcse", "--repo-id", "my-lab/x", "--dry-run"]) == 0
    listed = [line.split()[-1] for line in capsys.readouterr().out.splitlines()[1:5]]
    assert main(["push", "simcse", "--repo-id", "my-lab/x"]) == 0
    (api,) = FakeApi.made
    sent = [name for name, _ in api.calls[-1][1]["operations"]]
    assert sent == listed == ["1_Pooling/config.json", "README.md", "model.safetensors", "modules.json"]
