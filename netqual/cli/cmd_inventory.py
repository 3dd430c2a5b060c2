"""``netqual inventory from-hosts|from-slurm|from-k8s`` (docs/deploy.md)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from netqual.base.auth import load_token
from netqual.base.errors import InputError, UsageError
from netqual.base.names import visible
from netqual.cli.app import app, err_console
from netqual.files.outfiles import write_text_atomic
from netqual.model.node import DEFAULT_PORT
from netqual.planning.launch import Draft, render_inventory
from netqual.planning.launch import hostfile as hostfile_mod
from netqual.planning.launch import k8s as k8s_mod
from netqual.planning.launch import slurm as slurm_mod
from netqual.planning.launch.draft import DEFAULT_MAX_NODES
from netqual.planning.rails import nics_from_report
from netqual.run import preflight

inventory_app = typer.Typer(
    help="Write an inventory from a hostfile, Slurm or Kubernetes.\n\n"
    "From a hostfile, a Slurm nodelist or the agent DaemonSet's pods (docs/deploy.md).\n\n"
    "\b\nExample:\n  netqual inventory from-slurm --out inventory.toml",
    no_args_is_help=True,
)
app.add_typer(inventory_app, name="inventory")

OutOpt = Annotated[
    Path | None,
    typer.Option("--out", metavar="FILE", help="Write the inventory here.  [default: stdout]"),
]
PortOpt = Annotated[int, typer.Option("--port", help="Agent control port.")]
MaxNodesOpt = Annotated[
    int,
    typer.Option("--max-nodes", metavar="N", help="Refuse more nodes than this (a typo guard)."),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token-file",
        metavar="FILE",
        help="The agents' token file (as a path from here): written into the inventory's "
        "defaults relative to --out's directory, or absolute on stdout.",
    ),
]
NicsOpt = Annotated[
    bool,
    typer.Option(
        "--nics-from-agents",
        help="Ask every node's agent (with --token-file) for its NICs and write them as "
        "nics (docs/rails.md): RDMA netdevs in device order, else every addressed "
        "interface but the node's own; review the rails.",
    ),
]


def _emit(draft: Draft, out: Path | None, nics_from_agents: bool = False) -> None:
    if nics_from_agents:
        draft = _with_agent_nics(draft)
    if draft.token_file:
        draft = replace(draft, token_file=_token_path(draft.token_file, out))
    text = render_inventory(draft)
    if out is None:
        typer.echo(text, nl=False)
        return
    write_text_atomic(out, text)
    storage = f", {draft.storage_count} storage" if draft.storage_count else ""
    err_console().print(f"inventory: {out} ({len(draft.nodes)} nodes{storage})")


def _token_path(token_file: str, out: Path | None) -> str:
    """--token-file as the inventory must say it: a path in an inventory is read relative
    to the inventory's directory, while the option names one relative to here. Relative to
    --out's directory (the pair moves together), or absolute when printed to stdout."""
    given = Path(token_file).expanduser().absolute()
    if out is None:
        return str(given)
    return os.path.relpath(given, out.absolute().parent)


def _with_agent_nics(draft: Draft) -> Draft:
    """Each node with the NICs its agent reports (``rails.nics_from_report``); a node whose
    agent does not answer keeps none, with a warning naming it."""
    if not draft.token_file:
        raise UsageError("--nics-from-agents", "needs --token-file: the agents' token")
    token = load_token(Path(draft.token_file))
    report = preflight.check(draft.nodes, token)
    found = {n.node: n for n in report.nodes}
    nodes = []
    for node in draft.nodes:
        check = found[node.name]
        if check.nics is None:
            why = "; ".join(check.problems + check.warnings) or "no NIC report"
            err_console().print(f"{visible(node.name)}: no nics written: {visible(why)}")
            nodes.append(node)
            continue
        nodes.append(replace(node, nics=nics_from_report(check.nics, node.address)))
    return replace(draft, nodes=tuple(nodes))


@inventory_app.command("from-hosts")
def from_hosts(
    hostfile: Annotated[
        Path, typer.Argument(help="One host per line; role=, rack=, site=, port=.")
    ],
    out: OutOpt = None,
    port: PortOpt = DEFAULT_PORT,
    token_file: TokenOpt = None,
    nics_from_agents: NicsOpt = False,
    max_nodes: MaxNodesOpt = DEFAULT_MAX_NODES,
    no_resolve: Annotated[
        bool, typer.Option("--no-resolve", help="Keep host names as addresses (resolve later).")
    ] = False,
) -> None:
    """Inventory from an MPI/pdsh-style hostfile.

    One host or hostlist per line, with optional role=, rack=, site=, port= fields;
    every host name is resolved once.

    \b
    Example:
      netqual inventory from-hosts hosts.txt --out inventory.toml
    """
    resolver = None if no_resolve else hostfile_mod.resolve
    _emit(
        hostfile_mod.from_hosts(hostfile, port, token_file, resolver, max_nodes),
        out,
        nics_from_agents,
    )


@inventory_app.command("from-slurm")
def from_slurm(
    nodelist: Annotated[
        str | None,
        typer.Option(
            "--nodelist",
            metavar="HOSTLIST",
            help="Hostlist expression.  [default: $SLURM_JOB_NODELIST]",
        ),
    ] = None,
    storage: Annotated[
        str | None,
        typer.Option("--storage", metavar="HOSTLIST", help="Hostlist of the storage nodes."),
    ] = None,
    rack_from: Annotated[
        str | None,
        typer.Option(
            "--rack-from", metavar="REGEX", help="Regex on the node name; group 1 is the rack."
        ),
    ] = None,
    topology: Annotated[
        Path | None,
        typer.Option(
            "--topology",
            help="Saved `scontrol show topology` output.  [default: ask scontrol]",
        ),
    ] = None,
    tasks_per_node: Annotated[
        int,
        typer.Option("--tasks-per-node", help="Agents per node: task i is <node>-<i> on port+i."),
    ] = 1,
    out: OutOpt = None,
    port: PortOpt = DEFAULT_PORT,
    token_file: TokenOpt = None,
    nics_from_agents: NicsOpt = False,
    max_nodes: MaxNodesOpt = DEFAULT_MAX_NODES,
) -> None:
    """Inventory from a Slurm nodelist.

    Racks are the leaf switches of `scontrol show topology` (or --rack-from); with
    --tasks-per-node N, task i on each node is <node>-<i> on port + i.

    \b
    Example:
      netqual inventory from-slurm --nodelist 'gpu[01-04],stor[1-2]' \\
          --storage 'stor[1-2]'
    """
    topology_text = None
    if topology is not None:
        try:
            topology_text = topology.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(str(topology), f"cannot read: {err}") from err
    req = slurm_mod.SlurmRequest(
        nodelist, storage, rack_from, topology_text, tasks_per_node, port, token_file, max_nodes
    )
    _emit(slurm_mod.from_slurm(req), out, nics_from_agents)


@inventory_app.command("from-k8s")
def from_k8s(
    namespace: Annotated[str, typer.Option("--namespace", help="Namespace of the agents.")] = (
        "default"
    ),
    selector: Annotated[
        str, typer.Option("--selector", metavar="LABELS", help="Label selector of the agent pods.")
    ] = "app=netqual-agent",
    pods: Annotated[
        Path | None, typer.Option("--pods", help="Saved `kubectl get pods -o json`.")
    ] = None,
    nodes: Annotated[
        Path | None, typer.Option("--nodes", help="Saved `kubectl get nodes -o json`.")
    ] = None,
    rack_label: Annotated[
        str, typer.Option("--rack-label", help="Node label holding the rack.")
    ] = "netqual.io/rack",
    role_label: Annotated[
        str, typer.Option("--role-label", help="Node label holding compute|storage|any.")
    ] = "netqual.io/role",
    out: OutOpt = None,
    port: PortOpt = DEFAULT_PORT,
    token_file: TokenOpt = None,
    nics_from_agents: NicsOpt = False,
    max_nodes: MaxNodesOpt = DEFAULT_MAX_NODES,
) -> None:
    """Inventory from the agent DaemonSet's pods.

    Live through the kubernetes client, or from saved `kubectl get pods -o json` and
    `kubectl get nodes -o json` output.

    \b
    Example:
      netqual inventory from-k8s --pods pods.json --nodes nodes.json
    """
    req = k8s_mod.K8sRequest(selector, rack_label, role_label, port, token_file, max_nodes)
    if (pods is None) != (nodes is None):
        raise InputError("command line", "give both --pods and --nodes, or neither", "--pods")
    if pods is not None and nodes is not None:
        docs = k8s_mod.load_list(pods), k8s_mod.load_list(nodes)
        sources = str(pods), str(nodes)
    else:
        docs = k8s_mod.fetch_live(namespace, selector)
        sources = f"namespace {namespace}", "cluster nodes"
    _emit(k8s_mod.from_k8s(docs[0], docs[1], req, *sources), out, nics_from_agents)
