"""``netqual demo``: the embedded default. As root it builds the emulated routed fabric
(``netqual.lab``) so all three verdict classes and the per-hop view appear; otherwise it
runs local agents on loopback and says so."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from netqual import lab
from netqual.base.auth import load_token
from netqual.base.units import KIB, MIB
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import RunKind
from netqual.model.workload import Workload
from netqual.planning.inventory import load_inventory
from netqual.run.coordinator import RunConfig, RunObserver, run
from netqual.run.localagents import local_agents
from netqual.table.run import Results

# The lab's delayed links go through a user-space relay on two shared cores: 2,000 kept
# samples and one small bulk cell keep the 28 pairs of the default topology near a minute.
LAB_PLAN = ProbePlan(
    iterations=2_000, warmup=200, chunks_bytes=(64 * KIB,), depths=(1,), bulk_bytes=8 * MIB
)
LOOPBACK_PLAN = ProbePlan()


# The lab's relay moves a few Gbit/s: with a workload's multi-MiB chunk, 8 reads per bulk
# cell keep the demo near two minutes (the p99 of 8 reads is their maximum).
LAB_WORKLOAD_MIN_READS = 8


def lab_workload_plan(plan: ProbePlan, say: Callable[[str], None]) -> ProbePlan:
    if plan.min_reads <= LAB_WORKLOAD_MIN_READS:
        return plan
    say(
        f"demo: {LAB_WORKLOAD_MIN_READS} reads per bulk cell on the emulated fabric "
        f"(a real run reads at least {plan.min_reads})"
    )
    return dataclasses.replace(plan, min_reads=LAB_WORKLOAD_MIN_READS)


def lab_unusable_reason(loopback: bool) -> str | None:
    """None when the demo should build the lab, else why it runs on loopback."""
    if loopback:
        return "--loopback given"
    if os.geteuid() != 0:
        return "not root (run as root for the emulated fabric with racks, hops and delays)"
    return lab.lab_available()


def demo_policy(policy: Policy | None, plan: ProbePlan, say: Callable[[str], None]) -> Policy:
    """The default policy, with min_samples lowered to the demo's sample count if needed."""
    if policy is not None:
        return policy
    base = Policy()
    if plan.iterations >= base.min_samples:
        return base
    say(
        f"demo policy: min_samples lowered to {plan.iterations} to match the demo plan "
        f"(a real qualification keeps {base.min_samples})"
    )
    return dataclasses.replace(base, min_samples=plan.iterations)


def run_on_lab(
    out: Path,
    plan: ProbePlan,
    policy: Policy,
    observer: RunObserver,
    say: Callable[[str], None],
    workload: Workload | None = None,
    state_dir: Path | None = None,
) -> Results:
    say(
        "demo: building the emulated fabric (2 racks x 3 hosts, leaf/spine, remote storage "
        "over a WAN link); one pair at a time"
    )
    with lab.running(state_dir=state_dir) as info:
        inv = load_inventory(info.inventory_path)
        cfg = RunConfig(
            nodes=inv.nodes,
            plan=plan,
            policy=policy,
            token=load_token(info.token_file),
            parallel=1,
            inventory=f"(demo lab: {info.topology_name})",
            kind=RunKind.DEMO,
            workload=workload,
        )
        results = run(cfg, out, observer)
    say("demo: fabric removed")
    return results


def run_on_loopback(
    out: Path,
    agents: int,
    plan: ProbePlan,
    policy: Policy,
    observer: RunObserver,
    say: Callable[[str], None],
    workload: Workload | None = None,
) -> Results:
    say(
        f"demo: {agents} agents on loopback (127.0.0.1); every pair shares this host's CPU, "
        "so pairs run one at a time"
    )
    with local_agents(agents) as (nodes, token_file):
        cfg = RunConfig(
            nodes=tuple(nodes),
            plan=plan,
            token=load_token(token_file),
            policy=policy,
            inventory="(demo loopback)",
            kind=RunKind.DEMO,
            workload=workload,
        )
        return run(cfg, out, observer)
