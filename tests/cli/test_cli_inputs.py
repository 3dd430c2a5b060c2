"""Bad inputs through the CLI: exit code 2 and a message naming the file and the field;
no agent answering: exit code 3. The table runs ``netqual.cli.main`` in-process (the real
entry point, fast); a few cases run ``python -m netqual`` to cover the process boundary."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from agentpool import cli_env

from netqual.cli import main
from netqual.cli.engine_opts import offered_engines
from netqual.model.engine import EngineName

GOOD_NODES = """
[[node]]
name = "gpu01"
address = "10.0.1.11"
role = "compute"

[[node]]
name = "stor01"
address = "10.0.1.21"
role = "storage"
"""

GOOD_POLICY = """
[policy]
metric = "p99"
safe_max_us = 200.0
unsafe_above_us = 500.0
min_samples = 10000
"""

# (case id, inventory text, field the message must name, words it must contain)
BAD_INVENTORIES = [
    ("syntax", GOOD_NODES + 'rack = "r1\n', "node[1].rack (line 11)", "TOML syntax error"),
    (
        "syntax-unquoted",
        GOOD_NODES.replace('"10.0.1.21"', "10.0.1.21"),
        "node[1].address (line 9)",
        "TOML syntax error",
    ),
    (
        "missing-address",
        GOOD_NODES.replace('address = "10.0.1.21"\n', ""),
        "node[1].address",
        "missing required field",
    ),
    ("duplicate-name", GOOD_NODES.replace("stor01", "gpu01"), "node[1].name", "duplicate"),
    ("unknown-role", GOOD_NODES.replace('"storage"', '"gpu"'), "node[1].role", "unknown role"),
    ("unknown-key", GOOD_NODES.replace("role = ", "rol = ", 1), "node[0].rol", "unknown key"),
    ("bad-address", GOOD_NODES.replace("10.0.1.11", "10.0.1.11:80"), "node[0].address", "not an"),
    ("bad-port", "[defaults]\nport = 70000\n" + GOOD_NODES, "defaults.port", "<= 65535"),
    ("no-nodes", "[defaults]\nport = 18515\n", "node", "no [[node]] entries"),
    ("port-string", GOOD_NODES + "port = '1'\n", "node[1].port", "expected an integer"),
]

BAD_POLICIES = [
    ("syntax", GOOD_POLICY.replace("200.0", ""), "policy.safe_max_us (line 4)", "TOML syntax"),
    (
        "negative-threshold",
        GOOD_POLICY.replace("200.0", "-200.0"),
        "policy.safe_max_us",
        "positive",
    ),
    (
        "unsafe-below-safe",
        GOOD_POLICY.replace("500.0", "100.0"),
        "policy.unsafe_above_us",
        "must be >= safe_max_us",
    ),
    ("unknown-key", GOOD_POLICY + "safe_max = 1.0\n", "policy.safe_max", "unknown key"),
    ("unknown-metric", GOOD_POLICY.replace('"p99"', '"p95"'), "policy.metric", "unknown metric"),
    ("zero-samples", GOOD_POLICY.replace("10000", "0"), "policy.min_samples", ">= 1"),
    ("string-number", GOOD_POLICY.replace("200.0", '"200"'), "policy.safe_max_us", "a number"),
    ("no-table", "metric = 'p99'\n", "metric", "unknown key"),
]


@pytest.fixture(autouse=True)
def _pinned_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETQUAL_WIDTH", "100")
    monkeypatch.delenv("NETQUAL_TOKEN", raising=False)


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err
    return code, " ".join(err.split())  # unwrap, in case a long temp path wrapped


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [pytest.param(t, f, w, id=i) for i, t, f, w in BAD_INVENTORIES],
)
def test_bad_inventory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, field: str, words: str
) -> None:
    inv = tmp_path / "inventory.toml"
    inv.write_text(text)
    code, err = run_main(capsys, "run", str(inv), "--out", str(tmp_path / "out"))
    assert code == 2, err
    assert err.startswith(f"error: {inv}: {field}: "), err
    assert words in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [pytest.param(t, f, w, id=i) for i, t, f, w in BAD_POLICIES],
)
def test_bad_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, field: str, words: str
) -> None:
    inv = tmp_path / "inventory.toml"
    inv.write_text(GOOD_NODES)
    pol = tmp_path / "policy.toml"
    pol.write_text(text)
    code, err = run_main(capsys, "run", str(inv), "--policy", str(pol), "--out", str(tmp_path))
    assert code == 2, err
    assert err.startswith(f"error: {pol}: {field}: "), err
    assert words in err


def test_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main(capsys, "run", str(tmp_path / "nope.toml"))
    assert code == 2 and f"{tmp_path / 'nope.toml'}: cannot read" in err
    inv = tmp_path / "inventory.toml"
    inv.write_text(GOOD_NODES)
    code, err = run_main(capsys, "run", str(inv), "--policy", str(tmp_path / "p.toml"))
    assert code == 2 and f"{tmp_path / 'p.toml'}: cannot read" in err


def test_token_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = tmp_path / "inventory.toml"
    inv.write_text(GOOD_NODES)
    code, err = run_main(capsys, "run", str(inv), "--out", str(tmp_path / "o"))
    assert code == 2
    assert "--token-file" in err and "NETQUAL_TOKEN" in err
    # The inventory names a token file that is not there: the message names that file.
    inv.write_text('[defaults]\ntoken_file = "missing.token"\n' + GOOD_NODES)
    code, err = run_main(capsys, "run", str(inv))
    assert code == 2 and f"{tmp_path / 'missing.token'}: cannot read token file" in err
    loose = tmp_path / "loose.token"
    loose.write_text("x" * 64)
    loose.chmod(0o644)
    code, err = run_main(capsys, "run", str(inv), "--token-file", str(loose))
    assert code == 2 and f"{loose}: token file is readable by group/others" in err
    shared = tmp_path / "shared"  # a good token in a directory anyone can write
    shared.mkdir()
    shared.chmod(0o777)
    planted = shared / "netqual.token"
    planted.write_text("0f" * 32)
    planted.chmod(0o600)
    code, err = run_main(capsys, "run", str(inv), "--token-file", str(planted))
    assert code == 2 and f"token file's directory {shared} is writable by others" in err
    short = tmp_path / "short.token"
    short.write_text("abc")
    short.chmod(0o600)
    code, err = run_main(capsys, "run", str(inv), "--token-file", str(short))
    assert code == 2 and "shorter than 16 bytes" in err
    # A weak token (docs/security.md, tokens): long enough is not strong enough.
    for weak, words in (
        ("a" * 16, "trivially repetitive"),
        ("0123456789abcdef" * 2, "bits of entropy (patterns such as words"),
        ("0123456789abcdef0123", "bits of entropy (patterns such as words"),
        ("changeme" * 4, "trivially repetitive"),
        ("correcthorsebatterystaple", "about 28 bits of entropy"),
        ("qwertyuiopasdfghjkl1234567890", "about 28 bits of entropy"),
    ):
        short.write_text(weak)
        code, err = run_main(capsys, "run", str(inv), "--token-file", str(short))
        assert code == 2 and words in err, err
        assert "secrets.token_hex(32)" in err and "chmod 600" in err


def _closed_ports(n: int) -> list[int]:
    ports = []
    for _ in range(n):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return ports


def test_every_agent_down_is_exit_3(tmp_path: Path, token_file: Path) -> None:
    p1, p2 = _closed_ports(2)
    inv = tmp_path / "inventory.toml"
    inv.write_text(
        f'[[node]]\nname = "a1"\naddress = "127.0.0.1"\nport = {p1}\n'
        f'[[node]]\nname = "a2"\naddress = "127.0.0.1"\nport = {p2}\n'
    )
    cmd = [sys.executable, "-m", "netqual", "run", str(inv), "--token-file", str(token_file)]
    cmd += ["--out", str(tmp_path / "out")]
    done = subprocess.run(
        cmd, env=cli_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 3, done.stderr
    err = " ".join(done.stderr.split())
    # The pre-flight table names each node, its address and why; then one error line.
    assert f"a1 127.0.0.1:{p1}" in err and f"a2 127.0.0.1:{p2}" in err
    assert "a1: connection refused" in err and "a2: connection refused" in err
    assert "error: pre-flight check failed on 2 of 2 nodes (a1, a2)" in err
    assert not (tmp_path / "out").exists()


def test_bad_inventory_through_a_real_process(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.toml"
    inv.write_text(GOOD_NODES.replace('"storage"', '"gpu"'))
    done = subprocess.run(
        [sys.executable, "-m", "netqual", "run", str(inv)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert " ".join(done.stderr.split()).startswith(f"error: {inv}: node[1].role: unknown role")
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--auth-timeout", "0"),
        ("--idle-timeout", "0"),
        ("--idle-timeout", "1e6"),
        ("--max-sessions", "0"),
        ("--listen", "h:x"),
        ("--name", "gpu 01"),
        ("--name", "=cmd|' /C calc'!A0"),
        ("--engines", "ucx"),
        ("--engines", "none,nixl"),
        ("--engines", ","),
    ],
)
def test_bad_agent_options(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    code, err = run_main(capsys, "agent", "--insecure", option, value)
    assert code == 2
    assert f"error: command line: {option}: " in err


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("mooncake", (EngineName.MOONCAKE,)),
        ("nixl, mooncake,nixl", (EngineName.NIXL, EngineName.MOONCAKE)),
        ("none", ()),
    ],
)
def test_agent_engines_names_what_it_offers(text: str, want: tuple[EngineName, ...]) -> None:
    """``netqual agent --engines``: a node lacks what is left out (docs/engines.md)."""
    assert offered_engines(text) == want


def test_sizes_say_which_unit_and_take_whole_fractions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: `--chunk 64kb` silently meant 64,000 bytes; `--chunk 1.5MiB` was refused
    while netqual itself prints sizes like 7936KiB."""
    inv = tmp_path / "inv.toml"
    inv.write_text(GOOD_NODES)

    def dry(*chunk: str) -> tuple[int, str, str]:
        code = main(["run", str(inv), "--dry-run", "--json", *chunk])
        out, err = capsys.readouterr()
        return code, out, " ".join(err.split())

    code, _, err = dry("--chunk", "64kb")
    assert code == 2 and "--chunk" in err
    assert "'64kb' is ambiguous: write 64KiB (65,536 bytes) or 64kB (64,000 bytes)" in err
    assert dry("--chunk", "8M")[0] == 2
    code, out, _ = dry("--chunk", "1.5MiB", "--chunk", "64kB")
    assert code == 0 and json.loads(out)["plan"]["chunks_bytes"] == [1_572_864, 64_000]
    code, _, err = dry("--chunk", "1.3KiB")
    assert code == 2 and "not a whole number of bytes (1,331.2)" in err


def test_presets_and_fetch_profiles_in_any_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["workload", "Llama-3.1-70B-TP8", "--json"]) == 0
    shown = capsys.readouterr().out
    assert main(["workload", "llama-3.1-70b-tp8", "--json"]) == 0
    assert capsys.readouterr().out == shown
    inv = tmp_path / "inv.toml"
    inv.write_text(GOOD_NODES)
    args = ["run", str(inv), "--dry-run", "--mode", "bipartite", "--fanin", "1"]
    assert main([*args, "--fetch-profile", "LMCache"]) == 0, capsys.readouterr().err
