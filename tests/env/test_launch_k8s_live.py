"""``netqual inventory from-k8s`` live: the official kubernetes client against a local
HTTP server that answers the two API calls with the recorded kubectl JSON (tests/data/k8s).
No Kubernetes cluster is involved; the client, its kubeconfig handling and the conversion
back to API JSON are the real ones."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlparse

import pytest
from cli_helpers import run_in_process
from paths import DATA

from netqual.planning.inventory import load_inventory

pytest.importorskip("kubernetes")

K8S = DATA / "k8s"


class FakeApi(BaseHTTPRequestHandler):
    status = 200
    seen: ClassVar[list[tuple[str, dict[str, list[str]]]]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        FakeApi.seen.append((url.path, parse_qs(url.query)))
        files = {"/api/v1/namespaces/netqual/pods": "pods.json", "/api/v1/nodes": "nodes.json"}
        if FakeApi.status != 200 or url.path not in files:
            code = FakeApi.status if FakeApi.status != 200 else 404
            body = json.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": code,
                    "message": 'pods is forbidden: User "system:anonymous" cannot list pods',
                }
            ).encode()
        else:
            code, body = 200, (K8S / files[url.path]).read_bytes()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "t", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
                ],
                "users": [{"name": "u", "user": {"token": "test-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "t", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    FakeApi.status = 200
    FakeApi.seen = []
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_live_reads_pods_and_nodes_through_the_client(
    api: ThreadingHTTPServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = run_in_process(
        ["inventory", "from-k8s", "--namespace", "netqual", "--out", "inv.toml"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert r.returncode == 0, r.stderr
    inv = load_inventory(tmp_path / "inv.toml")
    assert [(n.name, n.address, n.rack, n.role.value) for n in inv.nodes] == [
        ("gpu-node-a1", "10.20.1.11", "r1", "compute"),
        ("gpu-node-a2", "10.20.1.12", "r1", "compute"),
        ("stor-node-b1", "10.20.2.21", "r2", "storage"),
    ]
    assert inv.node("gpu-node-a1").labels["site"] == "eu-west-1a"
    pods_call = next(q for path, q in FakeApi.seen if path.endswith("/pods"))
    assert pods_call["labelSelector"] == ["app=netqual-agent"]


def test_live_api_refusal_is_a_runtime_error_naming_the_api(
    api: ThreadingHTTPServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    FakeApi.status = 403
    r = run_in_process(
        ["inventory", "from-k8s", "--namespace", "netqual"], tmp_path, monkeypatch, capsys
    )
    assert r.returncode == 3
    assert r.stdout == ""
    assert "Kubernetes API" in r.stderr
    assert "HTTP 403 Forbidden: pods is forbidden" in r.stderr
