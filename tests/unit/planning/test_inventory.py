"""Inventory parsing: docs/inventory.md's example loads; every mistake names the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from netqual.base.errors import InventoryError
from netqual.base.units import KIB, MIB
from netqual.model.node import Role
from netqual.model.run import Mode
from netqual.planning.inventory import load_inventory

DESIGN_EXAMPLE = """
[defaults]
port = 18515              # agent control port
token_file = "netqual.token"

[[node]]
name = "gpu01"            # unique
address = "10.0.1.11"     # where its agent listens
port = 18515              # optional; overrides [defaults] port
role = "compute"          # compute | storage | any (default any)
rack = "r1"               # optional topology labels
labels = { leaf = "leaf1", pod = "p1" }

[[node]]
name = "stor01"
address = "stor01.example"
role = "storage"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "inventory.toml"
    p.write_text(text)
    return p


def test_design_example_loads(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, DESIGN_EXAMPLE))
    gpu, stor = inv.nodes
    assert (gpu.name, gpu.address, gpu.port, gpu.role, gpu.rack) == (
        "gpu01",
        "10.0.1.11",
        18515,
        Role.COMPUTE,
        "r1",
    )
    assert dict(gpu.labels) == {"leaf": "leaf1", "pod": "p1"}
    assert stor.role is Role.STORAGE and stor.port == 18515 and stor.rack is None
    assert inv.token_file == tmp_path / "netqual.token"  # relative to the inventory
    assert inv.mode is None


def test_probe_and_run_tables(tmp_path: Path) -> None:
    text = (
        DESIGN_EXAMPLE + '\n[probe]\niterations = 2000\nchunk = ["64KiB", "1MiB"]\ndepth = 4\n'
        '\n[run]\nmode = "bipartite"\n'
    )
    inv = load_inventory(write(tmp_path, text))
    assert inv.plan.iterations == 2000
    assert inv.plan.chunks_bytes == (64 * KIB, MIB)
    assert inv.plan.depths == (4,)
    assert inv.mode is Mode.BIPARTITE


NODE = '[[node]]\nname = "a"\naddress = "127.0.0.1"\n'


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("[[node]\n", "line 1", "TOML syntax error"),
        ('[[node]]\nname = "a"\n', "node[0].address", "missing required field"),
        (NODE + NODE, "node[1].name", "duplicate node name 'a'"),
        (NODE + 'role = "gpu"\n', "node[0].role", "unknown role 'gpu'"),
        (NODE + "port = 70000\n", "node[0].port", "<= 65535"),
        (NODE + "colour = 1\n", "node[0].colour", "unknown key"),
        ('[[node]]\nname = "a"\naddress = "not an address!"\n', "node[0].address", "not an IP"),
        ("[defaults]\nport = 1\n", "node", "no [[node]] entries"),
        (NODE + "[probe]\niterations = 0\n", "probe.iterations", ">= 1"),
        (NODE + '[probe]\nchunk = "lots"\n', "probe.chunk", "not a size"),
        (NODE + "[probe]\nrounds = 3\n", "probe.rounds", "unknown key (allowed: bulk-bytes"),
        (NODE + "probe = 3\n", "node[0].probe", "unknown key"),
        (NODE + "[[probe]]\n", "probe", "expected a table"),
        (NODE + '[run]\nmode = "ring"\n', "run.mode", "unknown mode"),
        (NODE + "labels = { leaf = 3 }\n", "node[0].labels", "string values"),
        ('[[node]]\nname = "=HYPERLINK(1)"\naddress = "h"\n', "node[0].name", "not a node name"),
        ('[[node]]\nname = "gpu 01"\naddress = "h"\n', "node[0].name", "letters, digits"),
    ],
)
def test_bad_inventory_names_file_and_field(
    tmp_path: Path, text: str, field: str | None, words: str
) -> None:
    p = write(tmp_path, text)
    with pytest.raises(InventoryError) as info:
        load_inventory(p)
    assert info.value.source == str(p)
    assert info.value.field == field
    assert words in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="cannot read"):
        load_inventory(tmp_path / "nope.toml")
