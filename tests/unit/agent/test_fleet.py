"""The fleet configuration check, one layer at a time: the snapshot read from sysfs/procfs
fixture trees (the kernel's documented layouts), a peer's snapshot checked field by
field, the consistency and expectation rules, ``[fleet]`` in the policy file, the results
file's ``fleet`` key, the gate rules and the report section. The real thing (agents in
network namespaces, one host's MTU lowered) is tests/env/test_lab_fleet.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from pathlib import Path

import pytest
from factories import make_results, write_results
from sysfs_trees import hgx8

from netqual.agent import fleet_snapshot
from netqual.agent.fleet_snapshot import Roots, collect, from_peer
from netqual.analysis import fleet
from netqual.analysis.policy import load_policy
from netqual.base.errors import BadRequestError, PolicyError, ResultsFileError
from netqual.gate import evaluate as gate_evaluate
from netqual.gate.model import Status
from netqual.gate.profile import parse_profile_text
from netqual.model.fleet import (
    FLEET_KEYS,
    UNKNOWN,
    ComparedKey,
    ConfigSnapshot,
    FleetPolicy,
    FleetResult,
    SnapshotKey,
)
from netqual.report import write_html
from netqual.results import load

MAPPED_V4 = "0000:0000:0000:0000:0000:ffff:c612:010a"  # ::ffff:198.18.1.10
LINK_LOCAL = "fe80:0000:0000:0000:0202:c9ff:fe00:0001"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def fixture_roots(tmp_path: Path, *, mtu: int = 9000) -> Roots:
    """An mlx5-style host: lo, one up NIC with a RoCE port, one down NIC; sysctls, os-release."""
    roots = Roots(tmp_path)
    sys_, proc, etc = roots.sys, roots.proc, roots.etc
    net = sys_ / "class" / "net"
    _write(net / "lo" / "type", "772")
    _write(net / "lo" / "mtu", "65536")
    for name, state, speed, value in (("ens1", "up", "100000", mtu), ("eno1", "down", "-1", 1500)):
        _write(net / name / "type", "1")
        _write(net / name / "operstate", state)
        _write(net / name / "speed", speed)
        _write(net / name / "mtu", str(value))
    driver = sys_ / "bus" / "pci" / "drivers" / "mlx5_core"
    driver.mkdir(parents=True)
    (net / "ens1" / "device").mkdir()
    (net / "ens1" / "device" / "driver").symlink_to(driver)
    for prio in range(8):  # ECN on priority 3 only, as reaction and notification point
        on = "1" if prio == 3 else "0"
        _write(net / "ens1" / "ecn" / "roce_rp" / "enable" / str(prio), on)
        _write(net / "ens1" / "ecn" / "roce_np" / "enable" / str(prio), on)
    dev = sys_ / "class" / "infiniband" / "mlx5_0"
    _write(dev / "fw_ver", "28.39.1002")
    port = dev / "ports" / "1"
    _write(port / "state", "4: ACTIVE")
    _write(port / "link_layer", "Ethernet")
    _write(port / "rate", "100 Gb/sec (4X EDR)")
    _write(port / "active_mtu", "4096")
    gids = {0: (LINK_LOCAL, "IB/RoCE v1"), 1: (LINK_LOCAL, "RoCE v2"), 2: (MAPPED_V4, "IB/RoCE v1")}
    gids[3] = (MAPPED_V4, "RoCE v2")
    for i in range(4, 6):
        _write(port / "gids" / str(i), "0000:0000:0000:0000:0000:0000:0000:0000")
    for i, (gid, kind) in gids.items():
        _write(port / "gids" / str(i), gid)
        _write(port / "gid_attrs" / "types" / str(i), kind)
        _write(port / "gid_attrs" / "ndevs" / str(i), "ens1")
    ipv4 = proc / "sys" / "net" / "ipv4"
    _write(ipv4 / "tcp_congestion_control", "cubic")
    _write(ipv4 / "tcp_ecn", "1")
    _write(proc / "sys" / "kernel" / "osrelease", "6.8.0-49-generic")
    _write(etc / "os-release", 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"')
    return roots


def test_snapshot_reads_the_documented_sysfs_and_procfs_layouts(tmp_path: Path) -> None:
    got = collect(fixture_roots(tmp_path))
    assert {k: got[k] for k in ("kernel", "os", "tcp_congestion_control", "tcp_ecn")} == {
        "kernel": "6.8.0-49-generic",
        "os": "Ubuntu 24.04.1 LTS",
        "tcp_congestion_control": "cubic",
        "tcp_ecn": "1",
    }
    # only the up, non-loopback NIC counts for the fleet keys; the down one is still shown
    assert (got["mtu"], got["link_speed_mbps"], got["driver"]) == ("9000", "100000", "mlx5_core")
    assert got["nic.eno1.operstate"] == "down" and got["nic.eno1.speed_mbps"] == UNKNOWN
    assert "nic.lo.mtu" not in got
    # the GID the probes pick: RoCE v2, IPv4, not link-local (the transport's own rule)
    assert (got["gid_index"], got["roce_gid_type"], got["roce_mtu"]) == ("3", "RoCE v2", "4096")
    assert got["rdma.mlx5_0/1.gid.2"] == "RoCE v1 IPv4 ens1"
    assert got["rdma.mlx5_0/1.gid.1"] == "RoCE v2 IPv6 ens1"
    assert "rdma.mlx5_0/1.gid.4" not in got  # empty entries are left out
    assert got["rdma.mlx5_0/1.width"] == "4X"
    assert got["firmware"] == "28.39.1002"
    assert (got["ecn"], got["ecn_priorities"]) == ("true", "3")
    # not readable from a tree (dcb asks the kernel), no PCI tree here: unknown, no error
    assert got["pfc_priorities"] == got["iommu"] == got["acs"] == UNKNOWN


def test_a_platform_without_anything_gives_unknown_never_an_error(tmp_path: Path) -> None:
    got = collect(Roots(tmp_path / "nothing"))
    assert got["netqual"]
    keys = ("kernel", "os", "mtu", "gid_index", "ecn", "tcp_ecn", "iommu", "acs")
    assert all(got[k] == UNKNOWN for k in keys)


def test_pci_fields_come_from_the_host_path_reader(tmp_path: Path) -> None:
    hgx8(tmp_path, acs_on_switch_b=True)  # 8 NICs; ACS redirect above mlx5_2 and mlx5_3
    got = collect(Roots(tmp_path))
    assert got["pci.mlx5_0.acs_redirect"] == "false"
    assert got["pci.mlx5_2.acs_redirect"] == "true"
    assert got["pci.mlx5_2.bdf"] == "0000:15:00.0"
    assert got["pci.mlx5_0.link"] == "32 GT/s x16 of 32 GT/s x16"
    assert (got["acs"], got["relaxed_ordering"]) == ("false,true", "true")
    # the same tree without config space (an unprivileged reader): unknown, not false
    for cfg in tmp_path.glob("sys/devices/**/config"):
        cfg.write_bytes(cfg.read_bytes()[:64])
    got = collect(Roots(tmp_path))
    assert (got["acs"], got["relaxed_ordering"]) == (UNKNOWN, UNKNOWN)


def test_ambiguous_gids_leave_the_probe_gid_unknown(tmp_path: Path) -> None:
    roots = fixture_roots(tmp_path)
    port = roots.sys / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    _write(port / "gids" / "4", MAPPED_V4.replace("010a", "010b"))
    _write(port / "gid_attrs" / "types" / "4", "RoCE v2")
    got = collect(roots)
    assert got["rdma.mlx5_0/1.gid_index"] == UNKNOWN  # two RoCE v2 IPv4 GIDs, none chosen
    assert got["gid_index"] == UNKNOWN


def test_a_peer_snapshot_is_checked_and_shown_literally() -> None:
    snap = from_peer({"values": {"mtu": "9000", "os": "evil\x1b[2J\u202e"}}, "n1", "peer")
    assert snap.get("mtu") == "9000"
    assert snap.get("os") == "evil\\x1b[2J\\u202e"
    with pytest.raises(BadRequestError, match=r"snapshot.values.os: holds a control character"):
        from_peer({"values": {"os": "a\nb"}}, "n1", "peer")
    with pytest.raises(BadRequestError, match=r"snapshot.values: bad key"):
        from_peer({"values": {"bad key": "x"}}, "n1", "peer")
    with pytest.raises(BadRequestError, match=r"snapshot.values: more than 1024 keys"):
        from_peer({"values": {f"k{i}": "x" for i in range(1025)}}, "n1", "peer")
    with pytest.raises(BadRequestError, match=r"snapshot.values.mtu: longer than 256"):
        from_peer({"values": {"mtu": "9" * 300}}, "n1", "peer")
    with pytest.raises(BadRequestError, match=r"snapshot.values: missing"):
        from_peer({}, "n1", "peer")


def snap(node: str, **values: str) -> ConfigSnapshot:
    return ConfigSnapshot(node, tuple(sorted(values.items())))


def test_outliers_name_the_node_key_majority_and_who_has_it() -> None:
    snaps = [snap("a", mtu="9000"), snap("b", mtu="9000"), snap("c", mtu="1400"), snap("d")]
    found = fleet.evaluate(snaps)
    assert [o.text for o in found.outliers] == ["c: mtu 1400 (majority 9000 on a, b)"]
    # roles are compared apart: one storage node at 1400 is no outlier of the computes
    roles = {"a": "compute", "b": "compute", "c": "storage"}
    assert fleet.evaluate(snaps, roles).outliers == ()
    tie = fleet.evaluate([snap("a", mtu="9000"), snap("b", mtu="1500")])
    assert [o.text for o in tie.outliers] == [
        "a: mtu 9000 (no majority among the any nodes)",
        "b: mtu 1500 (no majority among the any nodes)",
    ]
    allowed = fleet.evaluate(snaps, policy=FleetPolicy(allow_differ=frozenset({"mtu"})))
    assert allowed.outliers == ()


def test_expected_values_come_first_and_unknown_does_not_pass() -> None:
    snaps = [snap("a", mtu="9000", ecn="true"), snap("b", mtu="9000"), snap("c", mtu="1400")]
    policy = FleetPolicy(expected=(("ecn", "true"),))
    found = fleet.evaluate(snaps, policy=policy)
    assert [o.text for o in found.outliers] == [
        "b: ecn unknown (expected true)",
        "c: ecn unknown (expected true)",
        "c: mtu 1400 (majority 9000 on a, b)",
    ]
    assert len(found.unexpected) == 2 and len(found.consistency) == 1


def test_one_deviation_on_many_nodes_is_one_line() -> None:
    """Issue 36: `check --fleet` printed one identical line per node for one deviation
    (1,000 lines at 1,000 nodes)."""
    import io

    from rich.console import Console

    from netqual.render.fleet import fleet_line, print_fleet

    snaps = [snap(f"n{i:04d}", mtu="1500") for i in range(1000)]
    found = fleet.evaluate(snaps, policy=FleetPolicy(expected=(("mtu", "9000"),)))
    assert len(found.outliers) == 1000
    buf = io.StringIO()
    print_fleet(Console(file=buf, width=100, color_system=None), found, [])
    lines = [x.strip() for x in buf.getvalue().splitlines() if "outlier" in x]
    assert lines == ["outlier all 1,000 nodes: mtu 1500 (expected 9000)"]
    assert "1,000 outliers: all 1,000 nodes: mtu 1500" in fleet_line(found).plain
    two = fleet.evaluate([*snaps[:3], snap("x", mtu="9000")], policy=FleetPolicy())
    buf = io.StringIO()
    print_fleet(Console(file=buf, width=100, color_system=None), two, [])
    assert "outlier x: mtu 9000 (majority 1500 on n0000, n0001, n0002)" in buf.getvalue()


def test_fleet_policy_section_is_validated_naming_the_field(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        '[policy]\nmetric = "p99"\n[fleet]\nmtu = 4096\nroce_gid_type = "RoCEv2"\n'
        'pfc_priorities = [3]\necn = true\nallow_differ = ["kernel"]\n'
    )
    load_policy(good)  # [fleet] is allowed next to [policy]
    got = fleet.load_fleet_policy(good)
    assert dict(got.expected) == {
        "mtu": "4096",
        "roce_gid_type": "RoCE v2",
        "pfc_priorities": "3",
        "ecn": "true",
    }
    assert got.allow_differ == {"kernel"}
    for body, message in (
        ("mtus = 9000", "fleet.mtus: unknown fleet key (fleet keys: kernel, os,"),
        ('roce_gid_type = "v3"', "fleet.roce_gid_type: 'v3' is not a GID type"),
        ("mtu = 9000.5", "fleet.mtu: 9000.5 is not a value"),
        ('allow_differ = ["nope"]', "fleet.allow_differ: unknown fleet key 'nope'"),
        ('mtu = 9000\nallow_differ = ["mtu"]', "fleet.mtu: mtu has an expected value and is"),
    ):
        bad = tmp_path / "bad.toml"
        bad.write_text(f'[policy]\nmetric = "p99"\n[fleet]\n{body}\n')
        with pytest.raises(PolicyError) as err:
            load_policy(bad)
        assert str(err.value).startswith(f"{bad}: {message}")
        with pytest.raises(PolicyError) as err:
            fleet.load_fleet_policy(bad)
        assert str(err.value).startswith(f"{bad}: {message}")


def _with_fleet(tmp_path: Path) -> tuple[Path, Path]:
    results = make_results(4, samples=2000, all_safe=True)
    names = [n.name for n in results.nodes]
    snaps = [snap(n, mtu="9000") for n in names[:-1]] + [snap(names[-1], mtu="1400")]
    found = fleet.evaluate(snaps)
    with_fleet = write_results(tmp_path / "new.json", dataclasses.replace(results, fleet=found))
    without = write_results(tmp_path / "old.json", results)
    return with_fleet, without


def test_results_keep_the_fleet_and_old_files_still_load(tmp_path: Path) -> None:
    with_fleet, without = _with_fleet(tmp_path)
    back = load(with_fleet)
    assert back.fleet is not None
    majority = ", ".join(s.node for s in back.fleet.snapshot[:3])
    first = back.fleet.outliers[0]
    assert first.text == f"{first.node}: mtu 1400 (majority 9000 on {majority})"
    assert load(without).fleet is None
    text = with_fleet.read_text().replace('"value":"1400"', '"value":14')
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(ResultsFileError, match=r"fleet.outliers\[0\].value: must be a string"):
        load(tmp_path / "bad.json")


PROFILE = "[limits]\nfleet_consistent = true\nfleet_expected = true\n"


def test_gate_fails_naming_node_and_key_and_without_snapshots(tmp_path: Path) -> None:
    with_fleet, without = _with_fleet(tmp_path)
    profile = parse_profile_text(PROFILE, "p.toml")
    today = dt.date(2026, 12, 1)
    report = gate_evaluate(load(with_fleet), profile, today=today)
    outcome = {o.rule: o for o in report.outcomes}
    consistent = outcome["fleet_consistent"]
    assert consistent.status is Status.FAIL
    assert consistent.failing[0].label == consistent.failing[0].src  # the node, once
    assert consistent.failing[0].detail.startswith("mtu 1400 (majority 9000 on ")
    assert outcome["fleet_expected"].status is Status.PASS  # nothing expected
    bare = {o.rule: o for o in gate_evaluate(load(without), profile, today=today).outcomes}
    assert bare["fleet_consistent"].status is Status.FAIL
    assert "no configuration snapshots" in bare["fleet_consistent"].message


def test_report_has_a_configuration_section_outliers_first(tmp_path: Path) -> None:
    with_fleet, without = _with_fleet(tmp_path)
    write_html(load(with_fleet), tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert html.index('id="fleet-outliers"') < html.index('id="fleet-keys"')
    assert 'id="fleet-alert"' in html and "mtu 1400 (majority 9000 on" in html
    write_html(load(without), tmp_path / "old.html")
    assert 'id="configuration"' not in (tmp_path / "old.html").read_text()


def test_snapshot_module_reads_this_host_without_error() -> None:
    got = fleet_snapshot.collect()  # whatever this machine has: never raises
    assert got["netqual"] and set(FLEET_KEYS) <= set(got)


def _printed(result: FleetResult) -> str:
    from rich.console import Console

    from netqual.render.fleet import print_fleet

    console = Console(record=True, width=100, color_system=None)
    print_fleet(console, result, missing=[])
    return console.export_text()


def test_check_fleet_text_is_literal_and_bounded_for_large_fleets() -> None:
    odd = snap("n1", mtu="9000", os="[bold red]x[/] \\x1b", **{"nic.eth0.mtu": "9000"})
    text = _printed(fleet.evaluate([odd, snap("n2", mtu="9000")]))
    assert "[bold red]x[/] \\x1b (n1)" in text  # rich markup from a peer stays text
    assert "  n1: eth0 unknown mtu 9000 unknown" in text
    many = [snap(f"n{i}", mtu="9000") for i in range(40)]
    text = _printed(fleet.evaluate(many))
    assert "devices of 40 nodes: netqual check --fleet --json" in text
    assert "  n1: " not in text


def test_pfc_priorities_from_dcb_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dcb pfc show dev IF prio-pfc`` as iproute2 prints it (dcb-pfc(8)); a driver
    without DCB fails (exit 1, 'Operation not supported'): unknown."""
    fake = tmp_path / "bin" / "dcb"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$4" = "ens1" ]; then echo "prio-pfc 0:off 1:off 2:off 3:on 4:on 5:off 6:off 7:off"; '
        'elif [ "$4" = "ens2" ]; then echo "prio-pfc 0:off 1:off 2:off 3:off"; '
        'else echo "Attribute read: Operation not supported" >&2; exit 1; fi\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}")
    deadline = time.monotonic() + 5
    assert fleet_snapshot._pfc("ens1", deadline) == "3,4"
    assert fleet_snapshot._pfc("ens2", deadline) == "none"
    assert fleet_snapshot._pfc("veth0", deadline) == UNKNOWN
    assert fleet_snapshot._pfc("ens1", time.monotonic()) == UNKNOWN  # budget spent
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert fleet_snapshot._pfc("ens1", deadline) == UNKNOWN  # no iproute2 dcb


def test_an_interface_up_with_operstate_unknown_is_compared_like_an_up_one(tmp_path: Path) -> None:
    """A TUN device, or a driver that never reports carrier, reads operstate ``unknown``
    while it carries traffic: MTU 1400 on such a host's only interface once gave ``mtu
    unknown`` on every node and no outlier. Administratively up (IFF_UP in ``flags``) it
    counts; down (no IFF_UP) it does not."""
    roots = fixture_roots(tmp_path)
    net = roots.sys / "class" / "net"
    for name, flags, mtu in (("tun0", "0x1091", "1400"), ("tun1", "0x1090", "1300")):
        _write(net / name / "type", "65534")
        _write(net / name / "operstate", "unknown")
        _write(net / name / "flags", flags)
        _write(net / name / "mtu", mtu)
    got = collect(roots)
    assert got["mtu"] == "1400,9000"  # tun0 (up, unknown) counts; tun1 (admin down) not
    assert got["nic.tun1.mtu"] == "1300"  # shown all the same
    peers = [snap("a", mtu="9000"), snap("b", mtu="9000"), ConfigSnapshot("c", tuple(got.items()))]
    found = fleet.evaluate(peers)
    assert [o.text for o in found.outliers if o.key == "mtu"] == [
        "c: mtu 1400,9000 (majority 9000 on a, b)"
    ]


def test_snapshot_keys_are_built_and_read_back_in_one_place() -> None:
    """The key grammar the agent writes and the coordinator reads (``SnapshotKey``): a
    device name may hold dots (VLANs), a port a slash, a GID an index."""
    cases = [
        (SnapshotKey.nic("eth0.100", "mtu"), "nic.eth0.100.mtu"),
        (SnapshotKey.rdma("mlx5_0/1", "gid.3"), "rdma.mlx5_0/1.gid.3"),
        (SnapshotKey.rdma("mlx5_0", "firmware"), "rdma.mlx5_0.firmware"),
        (SnapshotKey.pci("ens1f0", "relaxed_ordering"), "pci.ens1f0.relaxed_ordering"),
        (SnapshotKey.host("kernel"), "kernel"),
    ]
    for key, text in cases:
        assert key.text == text and SnapshotKey.parse(text) == key
    assert SnapshotKey.parse("rdma.mlx5_0/1.gid.3").port
    assert SnapshotKey.parse("nic.eth0.newfield").field == "newfield"  # a newer agent's key
    assert ComparedKey.parse("mtu[rail1]") == ComparedKey("mtu", "rail1")
    assert (
        ComparedKey("mtu", "main").text == "mtu[main]" and not ComparedKey("mtu", "main").nic_scope
    )
