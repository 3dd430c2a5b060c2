"""The report's Methodology table: how the run measured (policy, plan, schedule, clock,
versions), each row in words, from the results file alone."""

from __future__ import annotations

from netqual import __version__
from netqual.base.units import format_size
from netqual.table.run import Results


def methodology(results: Results) -> list[tuple[str, str]]:
    run, plan, pol = results.run, results.run.plan, results.run.policy
    clock = ", ".join(f"{k}={v}" for k, v in run.clock.items()) or "not recorded"
    host = ", ".join(f"{k}={v}" for k, v in run.host.items()) or "not recorded"
    bulk = (
        f"chunks {', '.join(format_size(c) for c in plan.chunks_bytes)}; depths "
        f"{', '.join(str(d) for d in plan.depths)}; {format_size(plan.bulk_bytes)} per cell, "
        f"at least {plan.min_reads} reads"
        if plan.bulk
        else "not measured (--no-bulk)"
    )
    not_recorded = "not recorded in the results file"
    measured = [
        (
            "Ping-pong",
            f"{plan.size_bytes} B messages; {plan.iterations:,} kept iterations after "
            f"{plan.warmup:,} "
            "warm-up iterations (measured and discarded)",
        ),
        ("Bulk read", bulk),
    ]
    if not run.plan_recorded:  # never present the default plan as what was measured
        measured = [("Ping-pong", not_recorded), ("Bulk read", not_recorded)]
    timeout = f"{plan.timeout_s:g} s per path" if run.plan_recorded else not_recorded
    return [
        (
            "Run",
            f"{run.started_at} to {run.finished_at}; {run.mode.value}; transport {run.transport}",
        ),
        ("Inventory", run.inventory or "not recorded"),
        (
            "Policy",
            f"{pol.metric.value} of small-message RTT: offload-safe <= {pol.safe_max_us:g} us, "
            "unsafe > "
            f"{pol.unsafe_above_us:g} us, marginal in between; at least {pol.min_samples:,} kept "
            "samples "
            "to be offload-safe; unreachable or erroring paths are unsafe",
        ),
        *measured,
        *_schedule_rows(results),
        ("Timeout", timeout),
        (
            "RTT",
            "full round trip measured at the initiator with time.perf_counter_ns (perftest "
            "ib_write_lat and "
            "sockperf without --full-rtt print half of it); p99.9 is trusted only from 10,000 "
            "samples",
        ),
        ("Clock", clock),
        ("Coordinator", host),
        (
            "Versions",
            f"measured with {results.tool_name} {results.tool_version}; results schema "
            f"{results.schema_version}; report by netqual {__version__}",
        ),
    ]


def _schedule_rows(results: Results) -> list[tuple[str, str]]:
    """Methodology rows for how the run was scheduled (files from before phases: none)."""
    rows = []
    sched = results.run.schedule
    if sched:
        caps = ", ".join(
            f"{k} {sched[k]}" for k in ("bulk_per_node", "bulk_per_rack", "incast") if sched.get(k)
        )
        phases = sched.get("phases")
        text = f"{sched.get('name', '?')}: " + (
            " then ".join(str(x) for x in phases) if isinstance(phases, list) else "?"
        )
        fabric = sched.get("fabric")
        if isinstance(fabric, dict) and fabric.get("assumption"):
            caps += f" (fabric: {fabric['assumption']})"
        if sched.get("bulk_pairs"):
            text += f"; bulk pairs: {sched['bulk_pairs']}"
        rows.append(("Schedule", text + (f"; bulk caps: {caps}" if caps else "")))
    inter = results.interference
    if inter is not None:
        p50 = "-" if inter.p50_ratio is None else f"{inter.p50_ratio:.2f}"
        p99 = "-" if inter.p99_ratio is None else f"{inter.p99_ratio:.2f}"
        rows.append(
            (
                "Interference",
                f"{inter.sample} paths re-measured alone: run/alone p50 x{p50}, p99 x{p99}; "
                f"{inter.verdict_changes} verdict changes; affected tiers: "
                + (", ".join(t.value for t in inter.affected_tiers) or "none"),
            )
        )
    return rows
