"""The campaign exporter under load and on hostile data (campaign/serve.py, metrics.py).

One series per label set (the latest gate of a milestone and week wins), names that
collide only after escaping stay apart, a flood of half-sent requests does not keep a
scrape out, and scrapers never make ``campaign add`` fail.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentpool import cli_env
from cli_helpers import netqual
from e2e_cli import netqual_here
from factories import make_results, write_results
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from netqual.campaign.metrics import CampaignCollector, RunCollector, openmetrics_text
from netqual.campaign.serve import CONTENT_TYPE
from netqual.campaign.store import open_store
from netqual.model.node import Node


def _series(text: str) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    return [
        (s.name, tuple(sorted(s.labels.items())))
        for fam in text_string_to_metric_families(text)  # type: ignore[no-untyped-call]
        for s in fam.samples
    ]


def test_two_gates_of_one_week_export_the_latest_only(tmp_path: Path) -> None:
    """A week gated twice: the first run passed, the later failed. One series, 0."""
    store = open_store(tmp_path / "history.duckdb", create=True)
    first = store.add(make_results(4), source=tmp_path / "a", week=2).run
    later = make_results(4, seed=9, started_at="2026-12-01T00:00:00+00:00")
    second = store.add(later, source=tmp_path / "b", week=2).run
    store.record_gate(first.seq, "week2", "p", True, [], __import__("datetime").date(2027, 1, 1))
    store.record_gate(
        second.seq, "week2", "p", False, ["r"], __import__("datetime").date(2027, 1, 1)
    )
    store.close()
    text = openmetrics_text(CampaignCollector(tmp_path / "history.duckdb"))
    series = _series(text)
    assert len(series) == len(set(series)), "a label set written twice"
    gates = [line for line in text.splitlines() if line.startswith("netqual_gate_passed{")]
    assert gates == ['netqual_gate_passed{gate="week2",week="2"} 0.0'], gates


def test_names_that_collide_after_escaping_stay_apart() -> None:
    r"""A node named ``a`` + LF and one named with the four characters ``\x0a`` after
    ``a``: two different label values, each series written once."""
    results = make_results(3)
    renamed = {"gpu01": "a\n", "gpu02": "a\\x0a"}
    nodes = tuple(
        Node(**{**n.__dict__, "name": renamed.get(n.name, n.name)}) for n in results.nodes
    )
    names = tuple(renamed.get(n, n) for n in results.paths.names)
    import dataclasses

    results = dataclasses.replace(
        results, nodes=nodes, paths=dataclasses.replace(results.paths, names=names)
    )
    text = openmetrics_text(RunCollector(results))
    series = _series(text)
    assert len(series) == len(set(series)), "a label set written twice"
    srcs = {dict(labels).get("src") for name, labels in series if name == "netqual_path_verdict"}
    assert {"a\\x0a", "a\\\\x0a"} <= srcs, srcs


# -- the server -----------------------------------------------------------------------------
def _campaign(tmp_path: Path) -> None:
    # made in this process (the exporter, a process of its own, reads what they wrote)
    assert netqual_here("campaign", "init", "c", cwd=tmp_path).returncode == 0
    (tmp_path / "c").chmod(0o700)
    for i in range(4):
        run = tmp_path / f"run{i}"
        run.mkdir()
        results = make_results(4, seed=i, started_at=f"2026-12-0{i + 1}T00:00:00+00:00")
        write_results(run / "results.json", results)
    assert netqual_here("campaign", "add", "c", "run0", "--week", "1", cwd=tmp_path).returncode == 0


def _serve(
    tmp_path: Path, nofile: int = 1024, seconds: int = 120
) -> tuple[subprocess.Popen[str], int]:
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        [sys.executable, "-m", "netqual", "campaign", "serve", "c", "--listen", "127.0.0.1:0",
         "--seconds", str(seconds)],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=limit,  # noqa: PLW1509 - only setrlimit, before exec
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("serving http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
    return proc, int(line.split(":")[2].split("/")[0])


def _scrape(port: int, timeout_s: float = 15.0) -> tuple[int, str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as r:
        return r.status, r.headers["Content-Type"], r.read().decode()


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """One exporter of one campaign for the tests that only connect to it (no run added
    while it serves): the slow-loris flood and the refused requests; it must outlive them."""
    tmp = tmp_path_factory.mktemp("exporter")
    _campaign(tmp)
    # it serves until this module's last test is done (stopped below), which with other
    # modules' tests in between on this worker can be minutes: bounded at 15
    proc, port = _serve(tmp, seconds=900)
    try:
        yield proc, port
    finally:
        _stop(proc)


def test_a_thousand_slow_loris_connections_do_not_stop_a_scrape(
    served: tuple[subprocess.Popen[str], int],
) -> None:
    """1,000 connections each holding half a request, against an exporter limited to 1,024
    descriptors (the issue's setting): a scrape still gets its metrics, with the
    OpenMetrics content type, and the exporter's memory stays bounded."""
    proc, port = served
    held: list[socket.socket] = []
    try:
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the end
            held.append(s)
        status, ctype, body = _scrape(port)
        assert status == 200 and ctype == CONTENT_TYPE
        assert "netqual_paths{" in body and body.rstrip().endswith("# EOF")
        rss_kib = int(
            next(
                line.split()[1]
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:")
            )
        )
        assert rss_kib < 400 * 1024, rss_kib  # was 131 -> 511 MiB with a thread each
    finally:
        for s in held:
            s.close()
    assert proc.poll() is None, "the exporter stopped"


def test_scrapers_never_make_campaign_add_fail(tmp_path: Path) -> None:
    """8 scrapers in a loop while three runs are added one after another: every add lands,
    every scrape answers 200."""
    _campaign(tmp_path)
    proc, port = _serve(tmp_path)
    stop = threading.Event()
    codes: list[int] = []

    def scraper() -> None:
        while not stop.is_set():
            try:
                codes.append(_scrape(port)[0])
            except OSError as err:  # an HTTP 500 is an HTTPError, an OSError
                codes.append(getattr(err, "code", -1))

    threads = [threading.Thread(target=scraper, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        added = [
            netqual("campaign", "add", "c", f"run{i}", "--week", str(i + 1), cwd=tmp_path)
            for i in (1, 2, 3)
        ]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        _stop(proc)
    assert [a.returncode for a in added] == [0, 0, 0], [a.stderr for a in added]
    assert codes and set(codes) == {200}, sorted(set(codes))


@pytest.mark.parametrize("request_line", [b"POST /metrics HTTP/1.1", b"GET /etc/passwd HTTP/1.1"])
def test_only_get_metrics_is_served(
    served: tuple[subprocess.Popen[str], int], request_line: bytes
) -> None:
    proc, port = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request_line + b"\r\nHost: x\r\n\r\n")
        answer = s.recv(4096)
    assert answer.split(b"\r\n", 1)[0] in (
        b"HTTP/1.1 405 Method Not Allowed",
        b"HTTP/1.1 404 Not Found",
    )
    assert _scrape(port)[0] == 200 and proc.poll() is None  # refused, and still serving
