"""``--rdma-qp-timeout N``: on agent, run and probe; a bad N is a one-line usage error
naming the flag (exit 2, nothing sent); a good one reaches the probe request's body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_in_process

from netqual.agent.probe_request import PeerRef, ProbeRequest
from netqual.agent.wire.messages import Fields
from netqual.base.errors import ErrorCode, PeerError
from netqual.model.plan import ProbePlan
from netqual.transports import TransportOptions

PAIR = ["probe", "a@127.0.0.1:9", "b@127.0.0.1:9", "--transport", "rdma", "--insecure"]


@pytest.mark.parametrize("command", ["agent", "run", "probe"])
def test_help_says_what_n_means(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    r = run_in_process([command, "--help"], tmp_path, monkeypatch, capsys)
    text = " ".join(r.stdout.split())
    assert "--rdma-qp-timeout N" in text, r.stdout
    assert "4.096 us x 2^N per try" in text and "[default: 14 = 67 ms]" in text, r.stdout


@pytest.mark.parametrize("value", ["0", "32"])
def test_a_value_outside_1_to_31_is_a_usage_error(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    sent: list[object] = []
    monkeypatch.setattr("netqual.run.pairprobe.request_probe", lambda *a: sent.append(a))
    r = run_in_process([*PAIR, "--rdma-qp-timeout", value], tmp_path, monkeypatch, capsys)
    assert r.returncode == 2, r.stderr
    assert "--rdma-qp-timeout" in r.stderr and "1..31" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sent == []


def test_the_value_reaches_the_probe_request_body(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    seen: list[TransportOptions] = []

    def request_probe(src: Any, dst: Any, transport: Any, plan: Any, *rest: Any) -> None:
        seen.append(rest[2])  # (token, timeout_s, options, sessions)
        raise PeerError("a", ErrorCode.RDMA, "no device here")

    monkeypatch.setattr("netqual.run.pairprobe.request_probe", request_probe)
    args = [*PAIR, "--rdma-qp-timeout", "18", "--gid-index", "1", "--no-bulk"]
    r = run_in_process(args, tmp_path, monkeypatch, capsys)
    assert "no device here" in r.stdout + r.stderr, (r.stdout, r.stderr)
    (options,) = seen
    request = ProbeRequest(PeerRef("b", "127.0.0.1", 9), "rdma", ProbePlan(), options=options)
    body = request.to_body()
    assert body["options"]["rdma"] == {
        "device": None, "port": None, "gid_index": 1, "qp_timeout": 18
    }  # fmt: skip
    # what the agent reads back from the wire
    got = TransportOptions.decode(Fields(body["options"], "probe.options", "coordinator"))
    assert got.rdma.qp_timeout == 18
