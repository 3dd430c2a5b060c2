"""Terminal text of the fleet configuration check: outliers first, then each fleet key's
values with the nodes that have them, then each node's devices (``check --fleet``), or a
single line (``run``). Every value came from a peer: it goes out as a ``Text``, never as
rich markup, and was made visible when it was read."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.analysis.fleet import by_deviation, key_rows, nodes_text, who_text
from netqual.model.fleet import (
    MAIN_INTERFACE,
    UNKNOWN,
    ConfigSnapshot,
    FleetResult,
    KeyScope,
    SnapshotKey,
)

OUTLIERS_SHOWN = 3  # in the one-line form
DEVICES_SHOWN = 32  # nodes whose device line check --fleet prints


def grouped(result: FleetResult) -> list[str]:
    """One line per deviation, naming every node that has it: 'gpu01, gpu02: mtu 1500
    (expected 9000)', 'all 1,000 nodes: ...' (one deviation on 1,000 nodes was 1,000
    identical lines)."""
    total = len(result.snapshot)
    return [f"{who_text(nodes, total)}: {o.finding}" for o, nodes in by_deviation(result)]


def fleet_line(result: FleetResult) -> Text:
    """'configuration: 9 keys alike on 4 nodes' or the first outliers in red."""
    n = len(result.snapshot)
    if not result.outliers:
        return Text(f"configuration: no outliers among {n:,} node snapshots", style="dim")
    lines = grouped(result)
    first = "; ".join(lines[:OUTLIERS_SHOWN])
    more = len(lines) - OUTLIERS_SHOWN
    rest = f" (+{more} more: netqual check --fleet)" if more > 0 else ""
    count = len(result.outliers)
    word = "outlier" if count == 1 else "outliers"
    return Text(f"configuration: {count:,} {word}: {first}{rest}", style="bold red")


def print_fleet(console: Console, result: FleetResult, missing: list[str]) -> None:
    """``missing``: nodes without a snapshot (their agent failed the check)."""
    console.print(Text("Configuration", style="bold"))
    for line in grouped(result):
        console.print(Text(f"  outlier {line}", style="red"), soft_wrap=True)
    for name in missing:
        console.print(Text(f"  {name}: no configuration snapshot", style="yellow"))
    snaps = result.snapshot
    if not snaps:
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("key", no_wrap=True)
    table.add_column("value (nodes)")
    odd = {o.key for o in result.outliers}
    for key, ranked in key_rows(result):
        cell = Text("; ").join(Text(f"{v} ({nodes_text(ns, len(snaps))})") for v, ns in ranked)
        table.add_row(Text(key, style="red" if key in odd else ""), cell)
    console.print(table)
    if len(snaps) > DEVICES_SHOWN:  # one line per node would bury the table
        console.print(
            f"  devices of {len(snaps):,} nodes: netqual check --fleet --json", style="dim"
        )
        return
    for s in snaps:
        console.print(Text(f"  {s.node}: {device_summary(s)}"), soft_wrap=True)


def device_summary(snap: ConfigSnapshot) -> str:
    """'to-leaf1 veth mtu 9000 up; mlx5_0/1 ACTIVE mtu 4096 gid 3 RoCE v2' for one node."""
    keys = snap.keys()
    nics = sorted({k.device for k in keys if k.scope is KeyScope.NIC and k.device})
    ports = sorted({k.device for k in keys if k.port and k.device})
    main = snap.get(MAIN_INTERFACE)
    parts = []
    for nic in nics:
        g = {f: snap.of(SnapshotKey.nic(nic, f)) for f in ("driver", "mtu", "operstate")}
        speed = snap.of(SnapshotKey.nic(nic, "speed_mbps"))
        parts.append(
            f"{nic}{' (main)' if nic == main else ''} {g['driver']} mtu {g['mtu']} "
            f"{g['operstate']}" + (f" {speed} Mb/s" if speed != UNKNOWN else "")
        )
    for port in ports:
        p = {
            f: snap.of(SnapshotKey.rdma(port, f))
            for f in ("state", "active_mtu", "gid_index", "gid_type", "width")
        }
        parts.append(
            f"{port} {p['state']} mtu {p['active_mtu']} width {p['width']} "
            f"gid {p['gid_index']} {p['gid_type']}"
        )
    return "; ".join(parts) or "no network device found"
