"""Terminal output of `netqual run --dry-run`: the plan and its estimated duration."""

from __future__ import annotations

from rich.console import Console

from netqual.base.names import visible
from netqual.base.units import format_size
from netqual.planning.estimate import DryRun


def format_hours(seconds: float) -> str:
    """'0.7 s', '42 s', '17 min', '3 h 05 min'."""
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def print_dry_run(console: Console, d: DryRun) -> None:
    p = d.plan
    bulk = "no bulk"
    if p.bulk:
        chunks = ", ".join(format_size(c) for c in p.chunks_bytes)
        depths = ", ".join(str(x) for x in p.depths)
        bulk = f"bulk {chunks} at depth {depths} ({format_size(p.bulk_bytes)} per cell)"
    rtt = d.model.rtt_us[d.transport]
    gbps = d.model.goodput_gbps[d.transport]
    console.print(f"dry run, no agent contacted: {d.inventory}", soft_wrap=True)
    agents = f" ({d.agents} agents)" if d.agents and d.agents != d.nodes else ""
    console.print(f"nodes {d.nodes}{agents}  mode {d.mode.value}  transport {d.transport}")
    console.print(
        f"rounds {d.rounds:,}  pairs {d.pairs:,}  "
        f"(up to {d.max_pairs_per_round:,} pairs per round; {d.batches:,} batches in all)"
    )
    console.print(
        f"probe plan: {p.iterations:,} iterations after {p.warmup:,} warm-up "
        f"of {format_size(p.size_bytes)}; {bulk}; timeout {p.timeout_s:g} s per pair"
    )
    console.print(f"fabric: {d.fabric}", soft_wrap=True)
    _rails(console, d)
    if d.range_s is not None:
        low, high = d.range_s
        runs = len(d.calibrated_by)
        console.print(
            f"estimated duration: {format_hours(d.estimated_s)}, expected "
            f"{format_hours(low)} to {format_hours(high)} (calibrated by {runs} earlier "
            f"run{'s' if runs != 1 else ''} of this inventory: {', '.join(d.calibrated_by)})",
            soft_wrap=True,
        )
    else:
        console.print(
            f"estimated duration: {format_hours(d.estimated_s)} (uncalibrated: the stated "
            "model below, which real runs have beaten by 2x and overrun by 8x; "
            "--calibrate-from DIR of an earlier run of this inventory uses its measured rates)",
            soft_wrap=True,
        )
    for phase in d.phases:
        span = ""
        if phase.low_s is not None and phase.high_s is not None:
            span = f" ({format_hours(phase.low_s)} to {format_hours(phase.high_s)})"
        console.print(
            f"  {phase.name:<12} {format_hours(phase.seconds):>10}{span}  {phase.text}",
            soft_wrap=True,
        )
    console.print(
        f"  model: {d.model.request_s:g} s per request (connect, authenticate, hop probe); "
        f"{p.warmup + p.iterations:,} round trips x {rtt:g} us per ping-pong; bulk at the "
        f"lesser of {gbps:g} Gbit/s and what chunk x depth keeps in flight; "
        f"{d.model.check_s:g} s per agent check, {d.model.check_each_s * 1e3:g} ms of the "
        "coordinator's own per agent. Time-outs make a real run longer.",
        style="dim",
    )
    if d.model.shared_cores > 0:
        console.print(
            f"  every agent is on this host (loopback): they share its {d.model.shared_cores} "
            "cores, and pairs measuring at once wait for each other's CPU",
            style="dim",
        )
    for r, (pairs, size) in enumerate(zip(d.preview, d.preview_sizes, strict=True), start=1):
        shown = ", ".join(f"{a}<->{b}" for a, b in pairs)
        more = f", ... ({size:,} pairs)" if len(pairs) < size else ""
        console.print(f"  round {r}: {shown}{more}", soft_wrap=True)


def _rails(console: Console, d: DryRun) -> None:
    """Per rail: its endpoints (NODE/NIC and address) and its pairs (docs/rails.md)."""
    if not d.rail_plans:
        return
    console.print(f"rails {d.rails}: probes NIC to NIC, rounds disjoint per NIC")
    for r in d.rail_plans:
        if r.rail is None:
            console.print(f"  across rails: {r.pairs:,} pairs", soft_wrap=True)
            continue
        ends = ", ".join(f"{visible(n)} {a}" for n, a in r.endpoints)
        console.print(f"  rail {r.rail}: {r.pairs:,} pairs; {ends}", soft_wrap=True)
