"""A local upstream for the download tests (issue #54 §1): an HTTP server on 127.0.0.1 that serves files at the
paths of the real hosts (SimCSE's files under ``/datasets/princeton-nlp/datasets-for-simcse/resolve/main/``, GloVe's
zip under ``/data/``, …), so ``SENTLAB_UPSTREAM=http://127.0.0.1:PORT`` points every asset's URL at it
(:func:`sentlab.assets.download.upstream_url`).

It answers ``Range`` requests (206 with ``Content-Range``), logs each request's path and Range, and has two fault
switches: ``cut_once[path] = n`` ends the first transfer of ``path`` after ``n`` bytes (the connection closes with
the body short of its Content-Length), and ``announce[path] = n`` sends ``n`` as the Content-Length however long the
file is (a server or proxy that serves a wrong size); ``delay_s`` holds every answer that long (a slow link, so that
two clients' downloads overlap). :meth:`Upstream.hub_repo` serves a model repository the way the Hugging Face Hub's
API does for ``huggingface_hub.snapshot_download`` (``HF_ENDPOINT`` at this server): its revision info, its file
tree, each file's ``resolve`` URL (HEAD and GET, with the commit and ETag headers).
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SIMCSE = "/datasets/princeton-nlp/datasets-for-simcse/resolve/main"


class Upstream:
    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.cut_once: dict[str, int] = {}
        self.announce: dict[str, int] = {}
        self.requests: list[tuple[str, str]] = []     # (path, Range header or "")
        self.delay_s = 0.0
        self.hub_headers: dict[str, dict[str, str]] = {}
        self.url = ""

    def hub_repo(self, repo_id: str, files: dict[str, bytes]) -> str:
        """Serve model repository ``repo_id`` holding ``files`` (path -> bytes) at revision main; returns its commit."""
        import hashlib
        import json

        commit = hashlib.sha1(repo_id.encode()).hexdigest()   # noqa: S324 - a commit id's shape, as the hub's
        api = f"/api/models/{repo_id}"
        info = {"id": repo_id, "modelId": repo_id, "sha": commit, "private": False,
                "siblings": [{"rfilename": f} for f in files]}
        tree = [{"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}  # noqa: S324
                for f, b in files.items()]
        for rev in ("main", commit):
            self.files[f"{api}/revision/{rev}"] = json.dumps(info).encode()
            self.files[f"{api}/tree/{rev}"] = json.dumps(tree).encode()
            for f, b in files.items():
                self.files[f"/{repo_id}/resolve/{rev}/{f}"] = b
                self.hub_headers[f"/{repo_id}/resolve/{rev}/{f}"] = {
                    "X-Repo-Commit": commit, "ETag": f'"{hashlib.sha256(b).hexdigest()}"'}
        return commit

    def handler(self):
        up = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):   # quiet
                pass

            def do_HEAD(self):   # noqa: N802 - http.server's name
                path = self.path.split("?")[0]
                up.requests.append((path, "HEAD"))
                body = up.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                for k, v in up.hub_headers.get(path, {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()

            def do_GET(self):   # noqa: N802 - http.server's name
                rng = self.headers.get("Range", "")
                path = self.path.split("?")[0]
                up.requests.append((path, rng))
                time.sleep(up.delay_s)
                body = up.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                start = int(rng.split("=")[1].split("-")[0]) if rng.startswith("bytes=") else 0
                if start >= len(body) and start:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.end_headers()
                    return
                chunk = body[start:]
                self.send_response(206 if start else 200)
                for k, v in up.hub_headers.get(path, {}).items():
                    self.send_header(k, v)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Content-Length", str(up.announce.get(path, len(chunk))))
                self.end_headers()
                cut = up.cut_once.pop(path, None)
                self.wfile.write(chunk if cut is None else chunk[:cut])
                self.wfile.flush()
                if cut is not None:
                    self.close_connection = True

        return Handler


@contextlib.contextmanager
def serve():
    """A running :class:`Upstream` on a free loopback port (``.url``), stopped when the block ends."""
    up = Upstream()
    server = ThreadingHTTPServer(("127.0.0.1", 0), up.handler())
    up.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield up
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def senteval_tar() -> bytes:
    """SentEval's ``senteval.tar`` in its layout (``downstream/STS/…``, ``downstream/SICK/…``), a few pairs a file."""
    from sentlab.assets.resolve import ASSETS

    files = {}
    for rel in ASSETS["senteval_sts"].paths + ASSETS["sick"].paths:
        if "/STS.gs." in rel:
            data = b"4.0\n2.5\n1.0\n"
        elif "/STS.input." in rel:
            data = b"A man plays a guitar.\tA man plays music.\nA cat sleeps.\tA dog runs.\nRain falls.\tIt rains.\n"
        elif rel.endswith(".csv"):
            data = b"".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s:.3f}\tA man is here.\tA man is there.\n"
                            .encode() for i, s in enumerate((4.0, 2.5, 1.0)))
        else:   # SICK
            data = (b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    b"1\tA man plays.\tA man is playing.\t4.5\tENTAILMENT\n2\tA cat.\tA dog.\t1.5\tNEUTRAL\n")
        files[f"downstream/{rel}"] = data
    return tar_of(files)
