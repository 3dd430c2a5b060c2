"""``netqual inventory from-slurm``: the nodes of a Slurm allocation or nodelist.

Hosts come from a hostlist expression (default ``$SLURM_JOB_NODELIST``). Racks come from
``--rack-from REGEX`` when given, else from the leaf switches (``Level=0``) of
``scontrol show topology`` when Slurm has a topology. Agent addresses are the nodes'
``NodeAddr`` when ``scontrol show node`` knows them, else the node names. With several
agents per node (``tasks_per_node``), task *i* listens on ``port + i`` and is named
``<node>-<i>``, which is what ``examples/slurm/qualify.sbatch`` starts.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from netqual.base.errors import UsageError
from netqual.model.node import DEFAULT_PORT, Node, Role
from netqual.planning.launch.draft import (
    DEFAULT_MAX_NODES,
    Draft,
    check_name,
    check_node_count,
    check_unique,
)
from netqual.planning.launch.hostlists import expand

NODELIST_ENV = "SLURM_JOB_NODELIST"
SCONTROL_TIMEOUT_S = 30.0
_PAIR = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class SlurmRequest:
    nodelist: str | None = None  # None: $SLURM_JOB_NODELIST
    storage: str | None = None  # hostlist of the storage nodes; the others are compute
    rack_from: str | None = None  # regex on the node name; group 1 (or 'rack') is the rack
    topology_text: str | None = None  # `scontrol show topology` output; None: ask scontrol
    tasks_per_node: int = 1
    port: int = DEFAULT_PORT
    token_file: str | None = None
    max_nodes: int = DEFAULT_MAX_NODES


def scontrol(*args: str) -> str | None:
    """``scontrol ARGS`` output, or None where Slurm is absent or does not answer."""
    exe = shutil.which("scontrol")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def leaf_switches(topology_text: str) -> dict[str, str]:
    """Node -> its leaf switch (a ``Level=0`` switch) from ``scontrol show topology``."""
    leaf: dict[str, str] = {}
    for line in topology_text.splitlines():
        fields = dict(_PAIR.findall(line))
        if fields.get("Level") == "0" and "SwitchName" in fields and "Nodes" in fields:
            for host in expand(fields["Nodes"], "scontrol show topology", fields["SwitchName"]):
                leaf.setdefault(host, fields["SwitchName"])
    return leaf


def node_addresses(nodes_text: str) -> dict[str, str]:
    """NodeName -> NodeAddr from ``scontrol show node --oneliner``."""
    found: dict[str, str] = {}
    for line in nodes_text.splitlines():
        fields = dict(_PAIR.findall(line))
        if "NodeName" in fields and "NodeAddr" in fields:
            found[fields["NodeName"]] = fields["NodeAddr"]
    return found


# A regular expression can take exponential time on a name (``^(a+)+b$``) and Python's re
# cannot be interrupted: the matching runs in a child process that is killed past this.
RACK_REGEX_TIMEOUT_S = 2.0


def _match_all(pattern: str, hosts: list[str]) -> list[tuple[str | None] | None]:
    """Per host: None (no match), else (its rack,), the rack None where the group is empty."""
    regex = re.compile(pattern)
    out: list[tuple[str | None] | None] = []
    for host in hosts:
        m = regex.search(host)
        if m is None:
            out.append(None)
        elif "rack" in regex.groupindex:
            out.append((m.group("rack"),))
        else:
            out.append((m.group(1) if regex.groups else m.group(0),))
    return out


def _racks_from_regex(
    hosts: list[str], pattern: str, timeout_s: float = RACK_REGEX_TIMEOUT_S
) -> dict[str, str]:
    try:
        re.compile(pattern)
    except re.error as err:
        raise UsageError("--rack-from", f"bad regular expression {pattern!r}: {err}") from err
    with multiprocessing.get_context("fork").Pool(1) as pool:  # terminated on exit
        pending = pool.apply_async(_match_all, (pattern, hosts))
        try:
            found = pending.get(timeout_s)
        except multiprocessing.TimeoutError:
            raise UsageError(
                "--rack-from",
                f"{pattern!r} took over {timeout_s:g} s on {len(hosts)} names "
                "(nested repetition such as (a+)+ backtracks exponentially): simplify it",
            ) from None
    racks: dict[str, str] = {}
    for host, match in zip(hosts, found, strict=True):
        if match is None:
            raise UsageError("--rack-from", f"{pattern!r} does not match node {host!r}")
        if match[0] is not None:
            racks[host] = match[0]
    return racks


def from_slurm(req: SlurmRequest) -> Draft:
    expr = req.nodelist if req.nodelist is not None else os.environ.get(NODELIST_ENV)
    if expr is None:
        raise UsageError("--nodelist", f"no --nodelist given and ${NODELIST_ENV} is not set")
    hosts = expand(expr, "command line", "--nodelist")
    if req.tasks_per_node < 1:
        raise UsageError("--tasks-per-node", f"must be >= 1, got {req.tasks_per_node}")
    check_node_count(len(hosts) * req.tasks_per_node, req.max_nodes, "command line", "--nodelist")
    if req.port + req.tasks_per_node - 1 > 65535:
        raise UsageError("--port", f"{req.port} + {req.tasks_per_node} tasks passes 65535")
    storage: set[str] = set()
    if req.storage is not None:
        storage = set(expand(req.storage, "command line", "--storage"))
        if stray := sorted(storage - set(hosts)):
            raise UsageError("--storage", f"not in the nodelist: {', '.join(stray)}")

    origin = f"Slurm nodelist {expr}"
    if req.rack_from is not None:
        racks = _racks_from_regex(hosts, req.rack_from)
        origin += f"; racks from --rack-from {req.rack_from}"
    else:
        topology = req.topology_text
        if topology is None:
            topology = scontrol("show", "topology") or ""
        racks = leaf_switches(topology)
        if racks:
            origin += "; racks are the leaf switches of scontrol show topology"
    addresses = node_addresses(scontrol("show", "node", "--oneliner") or "")

    nodes: list[Node] = []
    where: list[str] = []
    for host in hosts:
        check_name(host, "command line", "--nodelist")
        role = (
            Role.ANY if req.storage is None else Role.STORAGE if host in storage else Role.COMPUTE
        )
        for task in range(req.tasks_per_node):
            name = host if req.tasks_per_node == 1 else f"{host}-{task}"
            address = addresses.get(host, host)
            nodes.append(Node(name, address, req.port + task, role, racks.get(host)))
            where.append(f"node {host}")
    check_unique(nodes, "command line", where)
    return Draft(tuple(nodes), origin, req.port, req.token_file)
