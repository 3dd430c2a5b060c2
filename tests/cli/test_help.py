"""Help reads like git/uv/ripgrep help: real metavars, one default style, an example each."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from cli_helpers import ROOT, netqual, run_in_process

_DESIGN_NOTES = "DESIGN" + ".md"  # the maintainers' notes: never shipped, never named


def _command_paths() -> list[list[str]]:
    from netqual.cli import app, register
    from netqual.cli.helpstyle import polish

    register()  # every command (`netqual agent` alone registers only its own)

    found: list[list[str]] = []

    def walk(cmd: object, prefix: list[str]) -> None:
        found.append(prefix)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*prefix, name])

    walk(polish(typer.main.get_command(app)), [])
    return found


COMMANDS = _command_paths()


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "netqual")
def test_help_has_metavars_one_default_style_and_an_example(
    words: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = run_in_process([*words, "--help"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert not re.search(r"<(bool|str|int|float|path|list)", text), text
    assert "{" not in text.splitlines()[0], text  # usage: INVENTORY, not {inventory}
    assert "(default" not in text, "defaults are written one way: [default: X]\n" + text
    assert _DESIGN_NOTES not in text
    assert "Example" in text, f"`netqual {' '.join(words)} --help` shows no example"
    # Every line fits 80 columns, like git's help.
    assert max(len(line) for line in text.splitlines()) <= 80, text


def test_options_that_take_a_value_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = run_in_process(["run", "--help"], tmp_path, monkeypatch, capsys).stdout
    assert "Usage: netqual run [OPTIONS] INVENTORY" in text
    for shown in (
        "--out DIR",
        "--policy FILE",
        "--iterations N",
        "--chunk BYTES",
        "--transport tcp|rdma",
        "--timeout SECONDS",
    ):
        assert shown in text, text
    # --mode's default depends on the inventory: the help says so instead of showing nothing.
    mode = text[text.index("  --mode MODE") : text.index("  --policy FILE")]
    assert "[default: the inventory's [run] mode, else full-mesh]" in " ".join(mode.split())


def _options() -> list[tuple[str, typer.core.TyperOption]]:
    from netqual.cli import app, register
    from netqual.cli.helpstyle import polish

    register()
    out: list[tuple[str, typer.core.TyperOption]] = []

    def walk(cmd: object, prefix: list[str]) -> None:
        for p in getattr(cmd, "params", []):
            if isinstance(p, typer.core.TyperOption) and p.name != "help":
                out.append((" ".join(prefix), p))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*prefix, name])

    walk(polish(typer.main.get_command(app)), [])
    return out


def test_every_option_says_what_it_is_and_shows_one_default() -> None:
    """Issue 36: `campaign init --name`, `campaign add --week` and `campaign gate
    --milestone` had no help but a default; `run --progress` listed two defaults."""
    bare, twice = [], []
    for where, opt in _options():
        own = re.findall(r"\[default:[^\]]*\]", opt.help or "")
        if not re.sub(r"\[default:[^\]]*\]", "", opt.help or "").strip():
            bare.append(f"{where} {opt.opts[0]}")
        shown = opt.show_default is not False and opt.default not in (None, False, ())
        if len(own) > 1 or (own and shown and not opt.is_flag):
            twice.append(f"{where} {opt.opts[0]}")
    assert bare == [] and twice == []


def test_metavars_say_file_or_directory_and_lone_commands_name_no_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def help_of(*words: str) -> str:
        return run_in_process([*words, "--help"], tmp_path, monkeypatch, capsys).stdout

    assert "--out FILE" in help_of("export")  # a file (it said DIR)
    assert "--cache-dir DIR" in help_of("lab", "rdma-shell")  # a directory (it said FILE)
    for words in (["agent"], ["probe"]):  # no inventory to take a token_file from
        text = " ".join(help_of(*words).split())
        assert "inventory's token_file" not in text and "[default: $NETQUAL_TOKEN]" in text
    progress = help_of("run")
    block = " ".join(progress[progress.index("--progress") :].split())[:200]
    assert block.count("[default:") == 1, block


def test_version(tmp_path: Path) -> None:
    from netqual import __version__

    r = netqual("--version", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout.strip() == f"netqual {__version__}"


def test_no_shipped_file_points_to_design_notes() -> None:
    shipped = [ROOT / "README.md", *(ROOT / "docs").rglob("*"), *(ROOT / "netqual").rglob("*")]
    shipped += list((ROOT / "templates").rglob("*"))
    offenders = [
        str(p.relative_to(ROOT))
        for p in shipped
        if p.is_file()
        and p.suffix in {".py", ".md", ".toml", ".json", ".html", ".j2", ".txt"}
        and _DESIGN_NOTES in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert offenders == []


def _agent(listen: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "NETQUAL_TOKEN": "9f2c7e1d5b3a8064e4f1a7c0b9d2386e",
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin",
    }
    return subprocess.run(
        [sys.executable, "-m", "netqual", "agent", "--listen", listen],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_agent_port_in_use_is_one_line_naming_the_address(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = _agent(f"127.0.0.1:{port}", tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "in use" in lines[0]
    assert "Traceback" not in r.stderr


def test_agent_bad_address_is_one_line_naming_the_address(tmp_path: Path) -> None:
    r = _agent("nosuch-host.invalid:18599", tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr
    assert "nosuch-host.invalid:18599" in r.stderr
    assert "Traceback" not in r.stderr


def test_agent_starts_without_the_reporting_half_of_the_cli() -> None:
    """`netqual agent` runs on every node: it registers its own command only, and never
    imports the report, campaign and schema engines (duckdb, jinja2, jsonschema); any
    other command line still sees every command."""
    probe = (
        "import contextlib, io, sys\n"
        "from netqual.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['agent', '--help'])\n"
        "heavy = sorted(m for m in ('duckdb', 'jinja2', 'jsonschema') if m in sys.modules)\n"
        "print(code, heavy)\n"
        "main(['--help'])\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    first, rest = r.stdout.split("\n", 1)
    assert first == "0 []", r.stdout
    for command in ("agent", "run", "gate", "report", "campaign", "demo"):
        assert re.search(rf"^\s+{command}\b", rest, re.M), rest


def test_each_command_registers_its_own_module_and_help_keeps_its_order() -> None:
    """Every command of `netqual --help` is mapped to its module (so `netqual run` does not
    import the campaign store); only campaign and export load duckdb; whichever commands a
    process registered first, `netqual --help` lists them in the same order."""
    from netqual.cli import COMMAND_OF

    assert {tuple(w) for w in COMMANDS if len(w) == 1} == {(c,) for c in COMMAND_OF}
    probe = (
        "import contextlib, io, sys\n"
        "from netqual.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main([sys.argv[1], '--help'])\n"
        "print(code, 'duckdb' in sys.modules)\n"
        "main(['--help'])\n"
    )
    helps = set()
    for command in ("run", "report", "gate", "campaign"):
        r = subprocess.run(
            [sys.executable, "-c", probe, command],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "NETQUAL_WIDTH": "100"},
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        first, rest = r.stdout.split("\n", 1)
        assert first == f"0 {command == 'campaign'}", (command, r.stdout)
        helps.add(rest)
    assert len(helps) == 1, helps
