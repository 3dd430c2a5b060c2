"""One hostile name through every command and every output format.

Text from a results file, a profile, a workload file or a peer is printed literally: rich
markup is not read, and control and bidi characters are shown as escapes. So no command
crashes (MarkupError), nothing acts on the terminal (ESC sequences, OSC 8 links, window
titles), no log line is forged (U+2028) and the JUnit XML always parses.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from agentpool import AgentPool
from cli_helpers import netqual, run_in_process
from e2e_cli import netqual_here
from eventually import eventually
from factories import make_results, write_results
from hostile import HOSTILE, assert_literal, hostile_named, hostile_results
from peers import frame, serving, write_inventory

from netqual.agent.wire.handshake import PROTOCOL_VERSION
from netqual.agent.wire.protocol import connect
from netqual.base.errors import NetqualError
from netqual.base.names import LiteralFormatter, printable, visible


def test_visible_shows_every_control_and_bidi_character() -> None:
    shown = visible(HOSTILE)
    assert_literal(shown)
    assert "\\x1b]0;owned\\x07" in shown and "\\u2028" in shown and "\\u202e" in shown
    assert "[/x][link=https://evil.example/]" in shown  # markup stays text
    assert visible("gpu01 -> stor03 µs 中") == "gpu01 -> stor03 µs 中"  # printable unchanged
    assert visible("a\nb", newlines=True) == "a\nb" and visible("a\nb") == "a\\x0ab"
    assert printable("x" * 600).endswith("...") and len(printable("x" * 600)) == 503


def test_log_lines_cannot_be_forged() -> None:
    record = logging.LogRecord("netqual.agent", logging.INFO, "", 0, "kind %s", (HOSTILE,), None)
    line = LiteralFormatter("%(levelname)s %(message)s").format(record)
    assert_literal(line)
    assert "\n" not in line and "\r" not in line


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    hostile_results(d / "results.json")
    (d / "profile.toml").write_text(
        "[limits]\nmax_unsafe = 0\n\n[[waiver]]\n"
        'src = "gpu01"\ndst = "gpu03"\nuntil = 2099-01-01\n'
        f"reason = {json.dumps(HOSTILE)}\nowner = {json.dumps(HOSTILE)}\n"
    )
    shape = 'tp = 1\nchunk_tokens = 256\nprefill_tokens_per_s = 20000\ndtype = "bf16"\n'
    (d / "workload.toml").write_text(
        f"[workload]\nname = {json.dumps(HOSTILE)}\nlayers = 32\nkv_heads = 8\n"
        f"head_dim = 128\n{shape}"
    )
    (d / "config.json").write_text(
        json.dumps(
            {
                "_name_or_path": HOSTILE,
                "model_type": HOSTILE,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "hidden_size": 4096,
                "torch_dtype": "bfloat16",
            }
        )
    )
    (d / "hf.toml").write_text(f'[workload]\nmodel = "config.json"\n{shape}')
    return d


COMMANDS = [  # (arguments, exit code): the failed path fails the gates
    (["report", "results.json"], 0),
    (["report", "results.json", "--json"], 0),
    (["report", "results.json", "--stat", "p50"], 0),
    (
        [
            "report",
            "results.json",
            "--html",
            "r.html",
            "--csv",
            "r.csv",
            "--profile",
            "profile.toml",
        ],
        0,
    ),
    (["report", "results.json", "--workload", "llama-3.1-8b-tp1"], 0),
    (["report", "results.json", "--workload", "hf.toml"], 0),
    (["gate", "results.json"], 1),
    (["gate", "results.json", "--json"], 1),
    (["gate", "results.json", "--profile", "profile.toml", "--junit", "j.xml"], 1),
    (["gate", "results.json", "--workload", "llama-3.1-8b-tp1", "--junit", "j2.xml"], 1),
    (["diff", "results.json", "results.json", "--html", "d.html"], 0),
    (["diff", "results.json", "results.json", "--json"], 0),
    (["workload", "workload.toml"], 0),
    (["workload", "workload.toml", "--json"], 0),
    (["workload", "hf.toml"], 0),
]


@pytest.mark.parametrize(("args", "code"), COMMANDS, ids=[" ".join(a) for a, _ in COMMANDS])
def test_every_file_command_prints_the_hostile_name_literally(
    args: list[str],
    code: int,
    hostile_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = run_in_process(args, hostile_dir, monkeypatch, capsys)
    assert r.returncode == code, r.stderr
    assert_literal(r.stdout + r.stderr)
    for xml in ("j.xml", "j2.xml"):
        if (hostile_dir / xml).exists():
            assert_literal((hostile_dir / xml).read_text())
            ET.parse(hostile_dir / xml)  # valid XML, always
    for html in ("r.html", "d.html"):
        if (hostile_dir / html).exists():
            page = (hostile_dir / html).read_text()
            assert "\x1b" not in page and '<a href="https://evil' not in page


def test_a_node_named_with_markup_is_refused_and_shown_literally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node name follows the inventory's rules in a results file too: refused (exit 2),
    the offending name shown cut and escaped, never acted on (the CLI's entry point in this
    process, as the file commands above: the file is the subject)."""
    hostile_named(tmp_path / "named.json")
    r = run_in_process(["report", "named.json"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 2 and "is not a node name" in r.stderr, r.stderr
    assert_literal(r.stdout + r.stderr)


def test_terminal_report_shows_the_markup_as_text(hostile_dir: Path) -> None:
    r = netqual("gate", "results.json", "--profile", "profile.toml", cwd=hostile_dir)
    assert r.returncode == 1, r.stderr
    assert_literal(r.stdout + r.stderr)
    assert "[/x][link=https://evil.example/]click[/link]" in r.stdout  # read as text
    assert "\\x1b]0;owned" in r.stdout  # the escape is visible, not acted on (rich drops BEL)


def test_junit_xml_parses_with_the_hostile_waiver(
    hostile_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    r = run_in_process(
        ["gate", "results.json", "--profile", "profile.toml", "--junit", "k.xml"],
        hostile_dir, monkeypatch, capsys,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr  # its failed path breaks max_unsafe = 0
    text = (hostile_dir / "k.xml").read_text()
    assert_literal(text)
    root = ET.fromstring(text)
    assert "[/x][link=" in ET.tostring(root, encoding="unicode")


def markup_refusing_agent(name: str) -> object:
    """A listener that says hello as ``name`` and refuses every client with HOSTILE as the
    reason (a token-less listener)."""
    hello = {
        "protocol": PROTOCOL_VERSION,
        "agent": name,
        "version": HOSTILE[:60],
        "auth": "hmac-sha256",
    }
    hello_frame = frame(
        json.dumps({"kind": "hello", "body": {**hello, "nonce": "ab" * 32}}).encode()
    )
    refusal = frame(
        json.dumps({"kind": "error", "body": {"code": "auth", "message": HOSTILE}}).encode()
    )

    def handle(conn: socket.socket) -> None:
        conn.sendall(hello_frame)
        conn.recv(65536)
        conn.sendall(refusal)
        time.sleep(0.2)

    return handle


def test_peer_error_text_through_run_check_report_gate(agents: AgentPool, tmp_path: Path) -> None:
    (good,) = agents.start_many([("gpu01",)])
    with serving(markup_refusing_agent("gpu02")) as liar:  # type: ignore[arg-type]
        inventory = tmp_path / "inventory.toml"
        write_inventory(inventory, [("gpu01", good.port), ("gpu02", liar.port)], agents.token_file)
        check = netqual_here("check", str(inventory), cwd=tmp_path)
        assert check.returncode != 0
        assert_literal(check.stdout + check.stderr)
        run = netqual_here(
            "run", str(inventory), "--out", "out", "--keep-going", "--iterations", "300",
            "--warmup", "20", "--no-bulk", "--allow-short-plan", cwd=tmp_path,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr  # run measures; gate judges
        assert_literal(run.stdout + run.stderr)
        assert "[/x]" in run.stdout + run.stderr
        pair = (f"gpu01@127.0.0.1:{good.port}", f"gpu02@127.0.0.1:{liar.port}")
        probe = netqual_here("probe", *pair, cwd=tmp_path)
        assert_literal(probe.stdout + probe.stderr)
    # the liar's paths are unsafe with its refusal: the gate fails, report and diff succeed
    gate = ["gate", "out", "--junit", "j.xml"]
    for args, code in ((["report", "out"], 0), (gate, 1), (["diff", "out", "out"], 0)):
        r = netqual_here(*args, cwd=tmp_path)
        assert r.returncode == code, (args, r.stderr)
        assert_literal(r.stdout + r.stderr)
    ET.parse(tmp_path / "j.xml")


def test_agent_log_shows_a_peers_request_kind_literally(agents: AgentPool, token: bytes) -> None:
    """``agent -v`` logs a refused request's kind: U+2028 or CR in it cannot forge a line."""
    agent = agents.start("gpu01", "-v")
    kind = "x\u2028forged WARNING line\r\x1b[2J"
    ch, _ = connect("127.0.0.1", agent.port, token, "gpu01", expect_name="gpu01")
    with ch:
        ch.send(kind, {})
        with contextlib.suppress(NetqualError):
            ch.recv()
    eventually(lambda: "dropped" in agent.stderr(), within_s=30, what=agent.stderr)
    log = agent.stderr()
    assert "dropped: message.kind: holds a control character" in log, log
    assert_literal(log)
    assert "\r" not in log
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:", line) for line in log.splitlines()), log


def test_stored_suspects_reach_the_terminal_literally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results file's suspects are printed as the file has them (not recomputed): a
    hostile subject and hostile path names in the evidence are shown as text."""
    path = tmp_path / "results.json"
    write_results(path, make_results(16, rack_size=4, slow_nodes=["gpu03"]))
    doc = json.loads(path.read_text())
    worst = {"src": HOSTILE, "dst": "gpu01", "verdict": "unsafe", "value_us": 812.0, "error": None}
    doc["suspects"] = [
        {
            "kind": "node",
            "subject": HOSTILE,
            "evidence": {
                "metric": "p99", "bad_paths": 3, "paths": 4, "median_us": 700.0,
                "all_paths_median_us": 60.0, "worst": worst,
                "counters": {"cause": "loss", "paths": 1, "example": HOSTILE},
            },
        }
    ]  # fmt: skip
    path.write_text(json.dumps(doc))
    r = run_in_process(["report", str(path)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert_literal(r.stdout)
    flat = r.stdout.replace("\n", "")  # the suspect's line, wrapped at the width
    # subject, worst path and counters, each as text
    assert flat.count("[/x][link=https://evil.example/]click[/link]") == 3, r.stdout
