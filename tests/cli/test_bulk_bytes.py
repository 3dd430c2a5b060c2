"""`--bulk-bytes` and the inventory's [probe] ``bulk_bytes``: the bytes each bulk cell
reads (docs/inventory.md), what a dry run shows and estimates, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_in_process

from netqual.base.units import MIB
from netqual.model.plan import ProbePlan
from netqual.planning.estimate import DurationModel

NODES = (
    '[[node]]\nname = "a"\naddress = "198.18.0.1"\n[[node]]\nname = "b"\naddress = "198.18.0.2"\n'
)


def _dry(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    probe_table: str,
    *extra: str,
) -> dict[str, Any]:
    inv = tmp_path / "inv.toml"
    inv.write_text(NODES + probe_table)
    r = run_in_process(
        ["run", str(inv), "--dry-run", "--json", *extra], tmp_path, monkeypatch, capsys
    )
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_dry_run_plans_and_prices_the_smaller_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    default = _dry(tmp_path, monkeypatch, capsys, "")
    small = _dry(tmp_path, monkeypatch, capsys, "", "--bulk-bytes", "8MiB")
    assert default["plan"]["bulk_bytes"] == 128 * MIB
    assert small["plan"]["bulk_bytes"] == 8 * MIB
    model = DurationModel()
    bulk_s = [d["estimate"]["phases"]["bulk"]["seconds"] for d in (default, small)]
    want = [model.bulk_s(ProbePlan(bulk_bytes=b), "tcp") for b in (128 * MIB, 8 * MIB)]
    assert bulk_s == [pytest.approx(w, abs=1e-3) for w in want]
    assert bulk_s[1] < bulk_s[0]
    r = run_in_process(
        ["run", str(tmp_path / "inv.toml"), "--dry-run", "--bulk-bytes", "8MiB"],
        tmp_path, monkeypatch, capsys,
    )  # fmt: skip
    assert "bulk 64KiB, 1MiB, 8MiB at depth 1, 8 (8MiB per cell)" in " ".join(r.stdout.split())


@pytest.mark.parametrize("key", ["bulk_bytes", "bulk-bytes"])
def test_the_inventory_sets_it_and_the_option_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    table = f'[probe]\n{key} = "16MiB"\n'
    assert _dry(tmp_path, monkeypatch, capsys, table)["plan"]["bulk_bytes"] == 16 * MIB
    given = _dry(tmp_path, monkeypatch, capsys, table, "--bulk-bytes", "1MiB")
    assert given["plan"] == dict(  # the rest of the plan is the default's
        _dry(tmp_path, monkeypatch, capsys, "")["plan"],
        bulk_bytes=1 * MIB,
    )


@pytest.mark.parametrize(
    ("args", "table", "said"),
    [
        (["--bulk-bytes", "0"], "", "command line: --bulk-bytes: must be positive, got '0'"),
        (["--bulk-bytes", "8M"], "", "--bulk-bytes: '8M' is ambiguous: write 8MiB"),
        (
            ["--bulk-bytes", "100GiB"],
            "",
            "--bulk-bytes: 1638400 reads of 65536 bytes exceed max_reads=1048576: "
            "every agent would refuse it (agent limit)",
        ),
        ([], "[probe]\nbulk_bytes = 0\n", "probe.bulk-bytes: must be positive, got 0"),
    ],
)
def test_bad_sizes_are_usage_errors_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    table: str,
    said: str,
) -> None:
    inv = tmp_path / "inv.toml"
    inv.write_text(NODES + table)
    r = run_in_process(["run", str(inv), "--dry-run", *args], tmp_path, monkeypatch, capsys)
    assert r.returncode == 2, r.stdout
    assert said in " ".join(r.stderr.split()), r.stderr


@pytest.mark.parametrize(
    ("command", "default"), [("probe", "[default: 128MiB]"), ("demo", "8MiB in the lab")]
)
def test_help_shows_it_with_its_default(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    default: str,
) -> None:
    r = run_in_process([command, "--help"], tmp_path, monkeypatch, capsys)
    text = " ".join(r.stdout.split())
    assert "--bulk-bytes BYTES Bytes read per bulk cell" in text, r.stdout
    assert default in text
