"""A real Prometheus (Debian package `prometheus`) scrapes `netqual campaign serve` on
loopback and its HTTP API returns the values the campaign holds. Bounded: < 30 s."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import ROOT
from eventually import eventually
from factories import make_results, write_results

from netqual.analysis import localise

PROMETHEUS = shutil.which("prometheus")
DEADLINE_S = 25.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _netqual(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NETQUAL_WIDTH": "100"}
    return subprocess.run(
        [sys.executable, "-m", "netqual", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip


def _query(port: int, expr: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=2) as resp:
        doc = json.load(resp)
    assert doc["status"] == "success", doc
    result: list[dict[str, object]] = doc["data"]["result"]
    return result


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus not installed (Debian package `prometheus`, setup.sh)"
)
def test_prometheus_scrapes_the_campaign_exporter(tmp_path: Path) -> None:
    started = time.monotonic()
    run = tmp_path / "w1"
    run.mkdir()
    results = make_results(8, slow_nodes=["gpu03"], started_at="2027-01-05T10:00:00+00:00")
    write_results(
        run / "results.json", dataclasses.replace(results, suspects=localise.suspects(results))
    )
    assert (
        _netqual("campaign", "init", "joint", "--start", "2027-01-04", cwd=tmp_path).returncode == 0
    )
    added = _netqual("campaign", "add", "joint", "w1", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    exporter_port, prom_port = _free_port(), _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: netqual\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    exporter = subprocess.Popen(
        [sys.executable, "-m", "netqual", "campaign", "serve", "joint",
         "--listen", f"127.0.0.1:{exporter_port}", "--seconds", str(DEADLINE_S)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert PROMETHEUS is not None
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def stored() -> list[dict[str, object]]:
            with contextlib.suppress(OSError):
                return _query(prom_port, 'netqual_paths{verdict="unsafe",job="netqual"}')
            return []

        unsafe = eventually(
            stored,
            within_s=DEADLINE_S - (time.monotonic() - started),
            every_s=0.5,
            what="Prometheus stores a scrape of the exporter",
        )
        assert unsafe[0]["value"][1] == "7"  # type: ignore[index]
        path = _query(prom_port, 'netqual_path_rtt_p99_us{src="gpu03",dst="stor01"}')
        assert len(path) == 1
        assert path[0]["metric"]["tier"] == "same-rack"  # type: ignore[index]
        p99 = results.paths.rtt["p99"][results.paths.keys().index(("gpu03", "stor01"))]
        assert float(path[0]["value"][1]) == pytest.approx(p99, abs=1e-3)  # type: ignore[index]
        week = _query(prom_port, "netqual_campaign_week")
        assert week[0]["value"][1] == "1"  # type: ignore[index]
        up = _query(prom_port, 'up{job="netqual"}')
        assert up[0]["value"][1] == "1"  # type: ignore[index]
    finally:
        _stop(prom)
        _stop(exporter)
    assert time.monotonic() - started < 30


def test_grafana_dashboard_queries_only_exported_series() -> None:
    """examples/grafana/netqual.json: valid JSON whose every netqual_* name is one the
    exporter writes (docs/campaign.md's table)."""
    import re

    dash = json.loads((ROOT / "examples" / "grafana" / "netqual.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"netqual_\w+", e)}
    documented = set(re.findall(r"`(netqual_\w+)`", (ROOT / "docs" / "campaign.md").read_text()))
    assert used and used <= documented, used - documented


def test_per_path_series_stop_above_the_limit_and_labels_are_literal() -> None:
    """Up to PER_PATH_LIMIT paths: a series per path; above it only rack-pair aggregates.
    A node name with an escape sequence is written escaped, never raw."""
    from netqual.campaign.metrics import PER_PATH_LIMIT, RunCollector, openmetrics_text

    small = openmetrics_text(RunCollector(make_results(8)))
    assert small.count("netqual_path_rtt_p99_us{") == 28
    assert "netqual_path_series_exported 1.0" in small
    big_results = make_results(64, bulk=False, histogram=False)
    assert len(big_results.paths) > PER_PATH_LIMIT
    big = openmetrics_text(RunCollector(big_results))
    assert "netqual_path_rtt_p99_us{" not in big and "netqual_path_series_exported 0.0" in big
    assert "netqual_rack_pair_rtt_p99_max_us{" in big and big.endswith("# EOF\n")
    hostile = dataclasses.replace(
        small_results := make_results(4),
        paths=dataclasses.replace(
            small_results.paths, names=("gpu\x1b[2J01", *small_results.paths.names[1:])
        ),
    )
    text = openmetrics_text(RunCollector(hostile))
    assert "\x1b" not in text and "gpu\\\\x1b[2J01" in text
