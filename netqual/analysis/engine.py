"""What a fetch engine's cells say (docs/engines.md): which NIC carried them, whether the
engine fell back from what was asked, how it compares with netqual's own probe, and the
findings a reader acts on.

Pure functions over records: the coordinator calls ``carrier``, ``fallback`` and
``vs_probe`` as it builds a cell; the outputs call ``findings``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from netqual.base.units import format_size
from netqual.model.engine import EngineCell, EngineOp, EngineTransport
from netqual.model.path import PathResult, path_label
from netqual.model.policy import Policy
from netqual.model.stats import BulkStats

CARRIED_SHARE = 0.9  # an interface carried an operation when it moved >= 90% of its bytes


def carrier(moved: Mapping[str, int], need: int) -> str | None:
    """The interface (or ``rdma:DEV/PORT``) that moved at least ``CARRIED_SHARE`` of
    ``need`` bytes, the largest if several did; None when none did."""
    if need <= 0:
        return None
    enough = {k: v for k, v in moved.items() if v >= CARRIED_SHARE * need}
    if not enough:
        return None
    return max(sorted(enough), key=enough.__getitem__)


def carriers(moved: Mapping[str, int], need: int) -> tuple[str, ...]:
    """Every interface that moved a tenth of ``need`` or more (an operation split over
    NICs moves a share through each)."""
    return tuple(
        k for k, v in sorted(moved.items(), key=lambda kv: (-kv[1], kv[0])) if v >= need / 10
    )


def fallback(
    want: EngineTransport,
    got: EngineTransport,
    claimed: Sequence[str],
    carried_by: str | None,
    intended: str | None,
    split: Sequence[str] = (),
) -> str | None:
    """Why the engine did not move the bytes as asked, in words; None when it did.

    Checked in this order: a memory copy on one host (no network at all), another
    transport than ``want``, bytes split over several NICs, bytes through another NIC than
    the path's (``intended``: the path's interface at this end)."""
    said = f" ({'; '.join(claimed[:2])})" if claimed else ""
    if got is EngineTransport.SHM:
        return f"copied memory on one host, not over the network{said}"
    if got is EngineTransport.UNKNOWN:
        return None  # the cell failed before anything said; its error says why
    if got is not want:
        return f"moved over {got.value}, not {want.value}{said}"
    if len(split) > 1:
        return f"split over {' and '.join(split)}, not the path's NIC alone"
    if intended is not None and carried_by is not None and carried_by != intended:
        return f"left through {carried_by}, not the path's NIC {intended}"
    return None


def vs_probe(cell: EngineCell, bulk: Iterable[BulkStats]) -> float | None:
    """The cell's completion p50 over netqual's own bulk cell's at the same chunk and depth
    (a READ: the probe reads; a WRITE is held to the same fabric's read). None without
    such a cell, or when either side has no time."""
    if cell.completion_p50_us is None:
        return None
    for b in bulk:
        same = b.chunk_bytes == cell.chunk_bytes and b.depth == cell.depth
        if same and b.error is None and b.completion_p50_us > 0:
            return cell.completion_p50_us / b.completion_p50_us
    return None


@dataclass(frozen=True)
class EngineFinding:
    """One thing a path's engine cells show: ``kind`` fallback | slow | failed."""

    src: str
    dst: str
    kind: str
    text: str

    @property
    def subject(self) -> str:
        return path_label(self.src, self.dst)


def likely_cause(cell: EngineCell) -> str:
    """The most specific cause the cell's evidence shows for a slow engine."""
    if cell.fallback:
        return cell.fallback
    lanes = " ".join(cell.evidence.claimed)
    if "multi-frag" in lanes or "fragment" in lanes:
        return f"the engine splits each {format_size(cell.chunk_bytes)} chunk into fragments"
    if cell.transport is EngineTransport.TCP and cell.op is EngineOp.READ and "emulation" in lanes:
        return "READ is emulated over TCP: the target's CPU serves every chunk"
    if cell.transport is EngineTransport.TCP:
        return f"the engine's own TCP path ({cell.name.value}): the fabric is not the limit"
    return "the engine's own cost per operation, on the transport the probe measured"


def path_findings(path: PathResult, policy: Policy) -> tuple[EngineFinding, ...]:
    """A path's engine findings: failures, fallbacks, and cells slower than the probe by
    more than ``policy.max_engine_vs_probe``."""
    out: list[EngineFinding] = []
    for c in path.engine:
        what = f"{c.name.value} {c.op.value}"
        if c.error is not None:
            out.append(EngineFinding(path.src, path.dst, "failed", f"{what} failed: {c.error}"))
            continue
        if c.fallback is not None:
            out.append(EngineFinding(path.src, path.dst, "fallback", f"{what}: {c.fallback}"))
        if c.vs_probe is not None and c.vs_probe > policy.max_engine_vs_probe:
            out.append(
                EngineFinding(
                    path.src,
                    path.dst,
                    "slow",
                    f"the connector's data mover ({what}) is {c.vs_probe:.1f}x slower than "
                    f"the fabric here (p50 at {format_size(c.chunk_bytes)}, depth {c.depth}; "
                    f"limit {policy.max_engine_vs_probe:g}x): configuration; likely cause: "
                    f"{likely_cause(c)}",
                )
            )
    return tuple(out)


def findings(paths: Iterable[PathResult], policy: Policy) -> tuple[EngineFinding, ...]:
    return tuple(f for p in paths if p.engine for f in path_findings(p, policy))
