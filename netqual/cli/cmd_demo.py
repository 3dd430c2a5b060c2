"""``netqual demo``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from netqual.analysis.policy import load_policy
from netqual.base.errors import UsageError
from netqual.base.units import format_size
from netqual.cli import rundir
from netqual.cli.app import (
    BULK_BYTES_HELP,
    JsonOpt,
    NoBulkOpt,
    PolicyOpt,
    WorkloadOpt,
    app,
    console,
    err_console,
)
from netqual.cli.measuring import measure_into, plan_from, workload_plan
from netqual.model.plan import ProbePlan
from netqual.model.progress import RunObserver
from netqual.planning.limits import check_limits
from netqual.run import demo as demo_mod
from netqual.table.run import Results


def _demo_default(field: str) -> str:
    """A demo plan field's default in --help: the lab's (as root) and loopback's."""

    def text(plan: ProbePlan) -> str:
        v = getattr(plan, field)
        if isinstance(v, tuple):
            return ", ".join(format_size(x) if field == "chunks_bytes" else str(x) for x in v)
        sized = field in ("size_bytes", "bulk_bytes") and v >= 1024
        return format_size(v) if sized else f"{v:g}"

    lab, loop = text(demo_mod.LAB_PLAN), text(demo_mod.LOOPBACK_PLAN)
    return (
        f"  [default: {lab}]"
        if lab == loop
        else f"  [default: {lab} in the lab; {loop} on loopback]"
    )


DemoIterationsOpt = Annotated[
    int | None,
    typer.Option("--iterations", help="Kept ping-pong samples." + _demo_default("iterations")),
]
DemoWarmupOpt = Annotated[
    int | None,
    typer.Option("--warmup", help="Discarded warm-up iterations." + _demo_default("warmup")),
]
DemoSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--size", metavar="BYTES", help="Ping-pong message size." + _demo_default("size_bytes")
    ),
]
DemoChunkOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--chunk",
        metavar="BYTES",
        help="Bulk chunk size, repeatable." + _demo_default("chunks_bytes"),
    ),
]
DemoDepthOpt = Annotated[
    list[int] | None,
    typer.Option("--depth", help="Outstanding bulk reads, repeatable." + _demo_default("depths")),
]
DemoBulkBytesOpt = Annotated[
    str | None,
    typer.Option(
        "--bulk-bytes", metavar="BYTES", help=BULK_BYTES_HELP + _demo_default("bulk_bytes")
    ),
]
DemoTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", help="Per-pair timeout in seconds." + _demo_default("timeout_s")),
]


@app.command()
def demo(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Directory for results.jsonl, results.json, report.html; replaces an earlier "
            "demo there, never another run unless --force.",
        ),
    ] = Path("netqual-demo"),
    force: Annotated[
        bool, typer.Option("--force", help="Replace the run already in --out.")
    ] = False,
    agents: Annotated[
        int, typer.Option("--agents", help="Loopback agents to start (not as root).")
    ] = 4,
    loopback: Annotated[
        bool, typer.Option("--loopback", help="Loopback agents even as root (no emulated fabric).")
    ] = False,
    policy: PolicyOpt = None,
    iterations: DemoIterationsOpt = None,
    warmup: DemoWarmupOpt = None,
    size: DemoSizeOpt = None,
    chunk: DemoChunkOpt = None,
    depth: DemoDepthOpt = None,
    no_bulk: NoBulkOpt = False,
    bulk_bytes: DemoBulkBytesOpt = None,
    timeout: DemoTimeoutOpt = None,
    workload: WorkloadOpt = None,
    as_json: JsonOpt = False,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            metavar="DIR",
            help="As root: where the demo's emulated fabric keeps its state while it runs "
            "(a lab already up elsewhere is left alone).  [default: /run/netqual-lab]",
        ),
    ] = None,
) -> None:
    """Try netqual on this machine: agents, a full run, a report.

    As root: an emulated routed fabric (racks, hops, delayed links); else loopback agents.
    The demo's plan is short, so its policy asks for fewer samples than a real run.

    \b
    Example:
      netqual demo --out demo && xdg-open demo/report.html
    """
    if agents < 2:
        raise UsageError("--agents", f"need at least 2, got {agents}")
    rundir.check_out(out, force, resume=False, demo_ok=True)
    c = err_console() if as_json else console()

    def say(text: str) -> None:
        c.print(text, style="dim")

    fallback = demo_mod.lab_unusable_reason(loopback)
    base = demo_mod.LOOPBACK_PLAN if fallback else demo_mod.LAB_PLAN
    wl, plan = workload_plan(
        workload,
        plan_from(base, iterations, warmup, size, chunk, depth, no_bulk, timeout, bulk_bytes),
    )
    if wl is not None and not fallback:
        plan = demo_mod.lab_workload_plan(plan, say)
    check_limits(plan)
    pol = demo_mod.demo_policy(load_policy(policy) if policy else None, plan, say)

    def measure(progress: RunObserver) -> Results:
        if fallback:
            say(f"demo: loopback agents ({fallback})")
            return demo_mod.run_on_loopback(out, agents, plan, pol, progress, say, wl)
        return demo_mod.run_on_lab(out, plan, pol, progress, say, wl, state_dir)

    # A demo's agents are new (new ports, new token) each time: it starts again, it
    # cannot resume, and the next demo may replace this one.
    again = f"a demo does not resume: start it again with {rundir.resume_command(out, False)}"
    measure_into(out, as_json, "auto", pol.metric, measure, again=again, shown_on=c)
