"""``netqual probe``: one pair, measured and printed."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer

from netqual.analysis.policy import load_policy
from netqual.base.auth import load_token
from netqual.base.errors import EXIT_RUNTIME, NotMeasuredError
from netqual.cli.app import (
    BulkBytesOpt,
    ChunkOpt,
    DepthOpt,
    GidIndexOpt,
    IterationsOpt,
    JsonOpt,
    LoneTokenFileOpt,
    NoBulkOpt,
    PolicyOpt,
    QpTimeoutOpt,
    RdmaDeviceOpt,
    RdmaPortOpt,
    SizeOpt,
    TimeoutOpt,
    TransportOpt,
    WarmupOpt,
    WorkloadOpt,
    app,
    console,
    probe_node,
)
from netqual.cli.engine_opts import EngineOpt, EngineRequireOpt, engine_plan
from netqual.cli.measuring import InsecureOpt, plan_from, workload_plan
from netqual.model.path import NotMeasured
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.planning.limits import check_limits
from netqual.render.engine import print_engine_path
from netqual.render.terminal import print_probe
from netqual.render.workload import print_workload_path
from netqual.results import path_to_dict
from netqual.run import engine_cells
from netqual.run.config import RunConfig
from netqual.run.pairprobe import measure_pair
from netqual.transports import TransportKind, TransportOptions


@app.command()
def probe(
    src: Annotated[
        str, typer.Argument(metavar="SRC", help="Initiating agent: HOST:PORT or NAME@HOST:PORT.")
    ],
    dst: Annotated[
        str, typer.Argument(metavar="DST", help="Responding agent: HOST:PORT or NAME@HOST:PORT.")
    ],
    transport: TransportOpt = "tcp",
    policy: PolicyOpt = None,
    token_file: LoneTokenFileOpt = None,
    insecure: InsecureOpt = False,
    iterations: IterationsOpt = None,
    warmup: WarmupOpt = None,
    size: SizeOpt = None,
    chunk: ChunkOpt = None,
    depth: DepthOpt = None,
    no_bulk: NoBulkOpt = False,
    bulk_bytes: BulkBytesOpt = None,
    timeout: TimeoutOpt = None,
    rdma_device: RdmaDeviceOpt = None,
    rdma_port: RdmaPortOpt = None,
    gid_index: GidIndexOpt = None,
    qp_timeout: QpTimeoutOpt = None,
    workload: WorkloadOpt = None,
    as_json: JsonOpt = False,
    engine: EngineOpt = None,
    engine_require: EngineRequireOpt = None,
) -> None:
    """Measure one pair and print a perftest-style table.

    With --json: one path object of the results format (docs/results.md).

    \b
    Example:
      netqual probe gpu01@10.0.1.11:18515 gpu02@10.0.1.12:18515 --iterations 20000
    """
    base = ProbePlan()
    wl, plan = workload_plan(
        workload,
        plan_from(base, iterations, warmup, size, chunk, depth, no_bulk, timeout, bulk_bytes),
    )
    check_limits(plan)
    eplan = engine_plan(engine, engine_require, transport, plan, wl)
    nodes = [probe_node(text, option) for text, option in ((src, "SRC"), (dst, "DST"))]
    cfg = RunConfig(
        nodes=tuple(nodes),
        transport=TransportKind.parse(transport),
        policy=load_policy(policy) if policy else Policy(),
        plan=plan,
        token=load_token(token_file, insecure=insecure),
        transport_options=TransportOptions.from_flags(
            rdma_device, rdma_port, gid_index, qp_timeout
        ),
        workload=wl,
    )
    path = measure_pair(nodes[0], nodes[1], cfg)
    if isinstance(path, NotMeasured):  # the set-up refused it: no measurement, no verdict
        raise NotMeasuredError(path.reason)
    if eplan is not None and path.error is None:
        got = engine_cells.measure(
            nodes[0], nodes[1], eplan, cfg.token, path.bulk, cfg.transport_options.rdma.device
        )
        if got.configuration is not None:
            raise NotMeasuredError(got.configuration)
        path = dataclasses.replace(path, engine=got.cells)
    if as_json:
        print(json.dumps(path_to_dict(path), indent=1))
    else:
        print_probe(console(), path)
        print_workload_path(console(), path)
        print_engine_path(console(), path, cfg.policy)
    if path.error is not None:
        raise typer.Exit(EXIT_RUNTIME)
