"""One path measured: a probe request to its source agent, judged into a PathResult.

A failure is data: an ``unsafe`` path naming it, or for a set-up refusal (token, limits,
device, a NIC endpoint nothing listens on) a ``NotMeasured`` (configuration): no path, no
network verdict. ``Measured`` is the one or the other; readers ask the type.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Any

from netqual.agent.probe_request import SilentAgentError, request_probe
from netqual.agent.wire.sessions import Sessions
from netqual.analysis import counter_evidence
from netqual.analysis.matrix import tier_of
from netqual.analysis.plausible import check_path
from netqual.analysis.policy import judge
from netqual.analysis.stats import bulk_stats, rtt_stats
from netqual.base.errors import ErrorCode, NetqualError, PeerError
from netqual.model.node import Node
from netqual.model.path import NotMeasured, PathResult
from netqual.model.plan import ProbePlan
from netqual.planning.phases import Phase
from netqual.run.config import RunConfig
from netqual.run.phaserun import Measured, merged_details
from netqual.workload.judge import judged


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def phase_plan(plan: ProbePlan, phase: Phase) -> ProbePlan:
    """The plan of one phase's request. A bulk-only request keeps a single unkept ping-pong
    round (iterations 1, no warm-up) so every agent version accepts it."""
    if phase is Phase.PINGPONG:
        return dataclasses.replace(plan, bulk=False)
    if phase is Phase.BULK:
        return dataclasses.replace(plan, iterations=1, warmup=0)
    return plan


def measure_pair(
    src: Node,
    dst: Node,
    cfg: RunConfig,
    phase: Phase = Phase.PROBE,
    silent: dict[str, str] | None = None,
    sessions: Sessions | None = None,
) -> Measured:
    """One path. ``silent``: where a source that never answers is noted (node -> why);
    ``sessions``: the run's open agent sessions (agent.wire.sessions)."""
    started = now_iso()
    t0 = time.monotonic()
    plan = phase_plan(cfg.plan, phase)
    try:
        out = request_probe(
            src,
            dst,
            cfg.transport,
            plan,
            cfg.token,
            plan.timeout_s + 15.0,
            cfg.transport_options,
            sessions,
        )
    except PeerError as err:
        reason = err.message if err.code != "protocol" else str(err)
        if err.code is ErrorCode.PEER_SILENT and silent is not None:
            silent[dst.node_name] = f"never answered an earlier probe of this run ({reason})"
        if err.code in CONFIGURATION_CODES:
            return NotMeasured(src.name, dst.name, reason, CONFIGURATION)
        return failed_path(src, dst, cfg, reason, started, t0)
    except SilentAgentError as err:
        if silent is not None:
            silent[src.node_name] = f"never answered an earlier probe of this run ({err})"
        return failed_path(src, dst, cfg, str(err), started, t0)
    except NetqualError as err:
        if err.code in CONFIGURATION_CODES:
            return NotMeasured(src.name, dst.name, str(err), CONFIGURATION)
        return failed_path(src, dst, cfg, str(err), started, t0)
    except OSError as err:
        return failed_path(src, dst, cfg, str(err), started, t0)
    if len(out.raw.rtt_ns) == 0:
        return failed_path(src, dst, cfg, f"{src.name} returned no samples", started, t0)
    rtt = rtt_stats(out.raw.rtt_ns)
    bulk = tuple(bulk_stats(b) for b in out.raw.bulk)
    verdict, reasons = judge(cfg.policy, rtt, bulk)
    details = dict(out.raw.details)
    details["initiator"] = out.initiator
    if isinstance(details.get("counters"), dict):
        moved = counter_evidence.probe_bytes(plan)
        details["counters"] = {**details["counters"], "probe_bytes": moved}
        nics = (src.nic.name if src.nic else None, dst.nic.name if dst.nic else None)
        details["carried_by"] = counter_evidence.carried_by(details, cfg.transport.value, *nics)
    if out.forward_hops is not None:
        details["forward_hops"] = out.forward_hops
    path = PathResult(
        src=src.name,
        dst=dst.name,
        transport=cfg.transport.value,
        verdict=verdict,
        reasons=reasons,
        rtt=rtt,
        bulk=bulk,
        hops=out.hops,
        tier=tier_of(src, dst),
        error=None,
        started_at=started,
        duration_s=time.monotonic() - t0,
        details=details,
        **nic_fields(src, dst),
    )
    if phase is Phase.BULK:
        return path  # half a path: combine_phases checks and judges the whole one
    return judged(check_path(path), cfg.workload)


def nic_fields(src: Node, dst: Node) -> dict[str, Any]:
    """A path's ``src_nic``, ``dst_nic`` and ``rail``: none unless both ends are NICs."""
    if src.nic is None or dst.nic is None:
        return {}
    rail = src.nic.rail if src.nic.rail == dst.nic.rail else None
    return {"src_nic": src.nic.name, "dst_nic": dst.nic.name, "rail": rail}


def combine_phases(pingpong: PathResult, bulk: Measured, cfg: RunConfig) -> Measured:
    """One path from its ping-pong request and its bulk-only request (judged on both)."""
    if isinstance(bulk, NotMeasured):
        return dataclasses.replace(bulk, reason=f"bulk phase: {bulk.reason}")
    details = merged_details(pingpong, bulk)
    duration = (pingpong.duration_s or 0.0) + (bulk.duration_s or 0.0)
    if bulk.error is not None:
        reason = f"bulk phase: {bulk.error}"
        verdict, reasons = judge(cfg.policy, None, error=reason)
        path = dataclasses.replace(
            pingpong, verdict=verdict, reasons=reasons, error=reason, details=details,
            duration_s=duration,
        )  # fmt: skip
    else:
        verdict, reasons = judge(cfg.policy, pingpong.rtt, bulk.bulk)
        path = dataclasses.replace(
            pingpong, verdict=verdict, reasons=reasons, bulk=bulk.bulk, details=details,
            duration_s=duration,
        )  # fmt: skip
    return judged(check_path(path), cfg.workload)


# A refusal for these reasons is the set-up's (token, identity, device, limits), not the
# network's: the pair is "not measured (configuration)", never an unsafe path.
CONFIGURATION_CODES = frozenset({ErrorCode.AUTH, ErrorCode.LIMIT, ErrorCode.UNAVAILABLE})
CONFIGURATION = "configuration"


def as_path(m: Measured, src: Node, dst: Node, cfg: RunConfig) -> PathResult:
    """A measurement where a path must stand (an interference sample's alone measurement,
    one rail of a multirail level): a pair not measured is a failed one there, naming
    why."""
    if isinstance(m, PathResult):
        return m
    return failed_path(src, dst, cfg, f"not measured ({m.kind}): {m.reason}", "", time.monotonic())


def failed_path(
    src: Node,
    dst: Node,
    cfg: RunConfig,
    reason: str,
    started: str,
    t0: float,
) -> PathResult:
    verdict, reasons = judge(cfg.policy, None, error=reason)
    path = PathResult(
        src=src.name,
        dst=dst.name,
        transport=cfg.transport.value,
        verdict=verdict,
        reasons=reasons,
        tier=tier_of(src, dst),
        error=reason,
        started_at=started,
        duration_s=time.monotonic() - t0,
        **nic_fields(src, dst),
    )
    return judged(path, cfg.workload)
