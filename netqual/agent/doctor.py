"""``netqual doctor``: is this node (or every node of an inventory) ready for RDMA probes?

``local_report()`` is a JSON-able dict: pyverbs (version, where it was imported from),
libibverbs release, devices, ports (state, link layer, active MTU, LID), the GID table with
types, and ``problems`` in plain words, each with a severity. An agent answers a control
request of kind ``"doctor"`` with it; ``gather`` asks every agent of an inventory and
``compare`` flags what differs between nodes (link layer, MTU, GID type), since a path is
only as good as the worse of its two ends.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from netqual.agent import engine_serve, pcisysfs
from netqual.agent.wire import hostpeer
from netqual.analysis import hostpath as host_findings
from netqual.base.errors import BadRequestError, NetqualError, TransportUnavailableError
from netqual.codec import hostpath as hostpath_codec
from netqual.model.engine import EngineName, EngineTransport
from netqual.transports.rdma import devices, hotloop, verbs
from netqual.transports.rdma.gid import GidType, LinkLayer

ERROR = "error"
WARNING = "warning"
MIN_MTU_BYTES = {LinkLayer.INFINIBAND.value: 4096, LinkLayer.ETHERNET.value: 1024}


def problem(severity: str, message: str, node: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"severity": severity, "message": message}
    if node is not None:
        entry["node"] = node
    return entry


def local_report(node: str | None = None, sysfs_root: Path = Path("/")) -> dict[str, Any]:
    """Everything doctor knows about this node. Never raises for a missing RDMA stack."""
    name = node or socket.gethostname()
    audit = pcisysfs.audit(sysfs_root, name)
    report: dict[str, Any] = {
        "node": name,
        "hostpath": hostpath_codec.to_dict(audit),
        "pyverbs": {"available": False},
        "libibverbs": verbs.libibverbs_version(),
        "sysfs_devices": verbs.rdma_sysfs_devices(),
        "devices": [],
        "problems": [
            problem(WARNING, f"host path: {f.subject}: {f.rule}: {f.text}")
            for f in host_findings.findings(audit)
        ],
        "engines": engines_report(bool(verbs.rdma_sysfs_devices())),
    }
    try:
        pv = verbs.load()
    except TransportUnavailableError as err:
        report["pyverbs"]["error"] = err.problem
        report["problems"].append(problem(ERROR, f"{err.problem}; {err.hint}"))
        return report
    report["pyverbs"] = {
        "available": True,
        "version": pv.version,
        "location": pv.location,
        "route": pv.route,
    }
    compiled, loop = hotloop.status(getattr(pv.qp, "QP", None))
    report["pingpong_loop"] = {"compiled": compiled, "text": loop}
    if not compiled and not hotloop.forced_python():
        report["problems"].append(
            problem(
                WARNING,
                f"the RDMA ping-pong runs its {loop}: per-round Python cost in every RTT "
                f"({hotloop.NOT_BUILT_HINT})",
            )
        )
    try:
        found = devices.scan(pv)
    except TransportUnavailableError as err:
        report["problems"].append(problem(ERROR, f"{err.problem}; {err.hint}"))
        return report
    report["devices"] = [_device_json(d) for d in found]
    report["problems"] += check_devices(report["devices"])
    return report


def engines_report(rdma_devices: bool) -> list[dict[str, Any]]:
    """Each fetch engine (``--engine``): installed or not, its version, the transport it
    would use here. From package metadata alone: no engine's native code loads here (the
    pre-flight's ``netqual check --engine`` imports it, in a worker)."""
    out = []
    for engine in EngineName:
        problem_text = engine_serve.installed(engine)
        would = EngineTransport.RDMA if rdma_devices else EngineTransport.TCP
        out.append(
            {
                "engine": engine.value,
                "installed": problem_text is None,
                "version": engine_serve.version(engine),
                "would_use": None if problem_text else would.value,
                "problem": problem_text,
            }
        )
    return out


def _device_json(dev: devices.DeviceInfo) -> dict[str, Any]:
    return {
        "name": dev.name,
        "error": dev.error,
        "fw_version": dev.fw_version,
        "max_qp_rd_atom": dev.max_qp_rd_atom,
        "max_qp_init_rd_atom": dev.max_qp_init_rd_atom,
        "ports": [
            {
                "port": p.num,
                "state": p.state_name,
                "link_layer": p.link_layer.value,
                "active_mtu_bytes": p.mtu_bytes,
                "lid": p.lid,
                "gids": [
                    {"index": g.index, "gid": g.gid, "type": g.gid_type.value, "ip": str(g.ip)}
                    for g in p.gids
                ],
            }
            for p in dev.ports
        ],
    }


def check_devices(devs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plain-words problems of one node's device list (as ``local_report`` records it)."""
    found: list[dict[str, Any]] = []
    ports = [(d, p) for d in devs for p in d.get("ports", [])]
    active = [(d, p) for d, p in ports if p.get("state") == "ACTIVE"]
    for dev in devs:
        if dev.get("error"):
            found.append(problem(ERROR, f"{dev['name']}: {dev['error']}"))
    for dev, port in ports:
        where = f"{dev['name']} port {port['port']}"
        if port.get("state") != "ACTIVE":
            hint = "no subnet manager?" if port["link_layer"] == "InfiniBand" else "link down?"
            severity = WARNING if active else ERROR
            found.append(problem(severity, f"{where} is {port['state']} ({hint})"))
            continue
        minimum = MIN_MTU_BYTES.get(port["link_layer"], 0)
        if port["active_mtu_bytes"] < minimum:
            found.append(
                problem(
                    ERROR,
                    f"{where}: active MTU {port['active_mtu_bytes']} is below {minimum} "
                    f"for {port['link_layer']} (raise the netdev/switch MTU)",
                )
            )
        if port["link_layer"] == "Ethernet" and not any(
            g["type"] == GidType.ROCE_V2.value for g in port["gids"]
        ):
            found.append(
                problem(
                    ERROR,
                    f"{where}: no RoCE v2 GID (give the netdev an IP address; check the "
                    "RoCE mode with 'cma_roce_mode')",
                )
            )
    if devs and not ports:
        found.append(problem(ERROR, "RDMA devices exist but none has a usable port"))
    return found


def gather(nodes: Iterable[Any], token: bytes | None, timeout_s: float = 10.0) -> dict[str, Any]:
    """Ask every node's agent for its report; an agent that fails becomes a problem."""
    from netqual.agent.wire.protocol import connect

    reports: dict[str, Any] = {}
    for node in nodes:
        try:
            ch, _hello = connect(
                node.address, node.port, token, node.name, timeout_s, expect_name=node.identity
            )
            with ch:
                ch.set_timeout(timeout_s)
                body = ch.request("doctor", {}, reply="doctor")
            reports[node.name] = _checked_hostpath(body, node.name)
        except (NetqualError, OSError) as err:
            reports[node.name] = {
                "node": node.name,
                "unreachable": True,
                "devices": [],
                "problems": [problem(ERROR, f"could not ask the agent: {err}")],
            }
    return reports


def _checked_hostpath(body: Any, node: str) -> Any:
    """The agent's host path audit re-encoded from the checked records (``hostpeer``), or
    dropped with a problem naming the bad field: nothing unchecked reaches a terminal."""
    if not isinstance(body, dict) or "hostpath" not in body:
        return body
    try:
        audit = hostpeer.from_peer(body["hostpath"], node, node)
    except BadRequestError as err:
        found = body.get("problems")
        problems: list[Any] = found if isinstance(found, list) else []
        return {**body, "hostpath": None, "problems": [*problems, problem(WARNING, str(err))]}
    return {**body, "hostpath": hostpath_codec.to_dict(audit)}


def _active_ports(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        p
        for d in report.get("devices", [])
        for p in d.get("ports", [])
        if p.get("state") == "ACTIVE"
    ]


def compare(reports: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mismatches across nodes that would break or slow a path between them."""
    link: dict[str, set[str]] = {}
    mtu: dict[str, set[str]] = {}
    gid_types: dict[str, set[str]] = {}
    for name, report in reports.items():
        ports = _active_ports(report)
        if not ports:
            continue
        link[name] = {p["link_layer"] for p in ports}
        mtu[name] = {str(p["active_mtu_bytes"]) for p in ports}
        roce = [p for p in ports if p["link_layer"] == "Ethernet"]
        if roce:
            has_v2 = any(g["type"] == GidType.ROCE_V2.value for p in roce for g in p["gids"])
            gid_types[name] = {GidType.ROCE_V2.value if has_v2 else GidType.ROCE_V1.value}
    found = []
    for what, table, consequence in (
        ("link layer", link, "InfiniBand and RoCE ends cannot connect"),
        ("active MTU", mtu, "paths run at the smaller MTU"),
        ("best RoCE GID type", gid_types, "both ends of a path must use the same RoCE version"),
    ):
        text = _mismatch(table)
        if text:
            found.append(problem(ERROR, f"{what} differs across nodes: {text} ({consequence})"))
    return found


def _mismatch(table: Mapping[str, set[str]]) -> str | None:
    values = {"/".join(sorted(v)) for v in table.values()}
    if len(values) <= 1:
        return None
    by_value: dict[str, list[str]] = {}
    for name, value in table.items():
        by_value.setdefault("/".join(sorted(value)), []).append(name)
    return "; ".join(f"{v} on {', '.join(sorted(n))}" for v, n in sorted(by_value.items()))


def all_problems(reports: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every node's problems (tagged with the node) plus the cross-node mismatches."""
    out = [
        {**p, "node": name} for name, report in reports.items() for p in report.get("problems", [])
    ]
    return out + compare(reports)


def healthy(problems: Iterable[Mapping[str, Any]]) -> bool:
    return not any(p.get("severity") == ERROR for p in problems)


def run(
    inventory: Path | None,
    token_file: Path | None,
    insecure: bool = False,
    sysfs_root: Path = Path("/"),
) -> dict[str, Any]:
    """This node, or every agent of ``inventory``: reports, problems, and a healthy flag."""
    if inventory is None:
        from netqual.agent.fleet_snapshot import Roots, collect

        report = local_report(sysfs_root=sysfs_root)
        report["configuration"] = collect(Roots(sysfs_root))  # docs/evidence.md; never raises
        nodes: dict[str, Any] = {report["node"]: report}
        problems = all_problems(nodes)
        mode = "local"
    else:
        from netqual.base.auth import load_token
        from netqual.planning.inventory import load_inventory

        inv = load_inventory(inventory)
        token = load_token(token_file or inv.token_file, insecure=insecure)
        nodes = gather(inv.nodes, token)
        problems = all_problems(nodes)
        mode = "inventory"
    return {"mode": mode, "nodes": nodes, "problems": problems, "healthy": healthy(problems)}
