"""The sentences of a workload verdict, in one place for the per-path ``judge`` (a run
judging each pair as it finishes) and the columnar ``judge_columns`` (a report re-judging
half a million paths): both must say exactly the same thing about the same path.

Everything that does not depend on the path (the chunk, the budget, the alternative) is
formatted once per workload; a path adds only its own numbers.
"""

from __future__ import annotations

from netqual.base.units import format_bytes, format_duration_us, format_size, format_us
from netqual.model.verdict import Verdict
from netqual.model.workload import BaselineKind, Workload


def cell_label(chunk_bytes: int, depth: int) -> str:
    return f"{format_size(chunk_bytes)} x depth {depth}"


def _alternative(w: Workload) -> str:
    kind = w.budget[0]
    return "recompute" if kind is BaselineKind.RECOMPUTE else "read it from local NVMe"


class Wording:
    """The reasons of one workload's verdicts; build once, call per path."""

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.extra_trips = w.round_trips_per_chunk - 1
        self.chunk = (
            f"a {w.chunk_tokens}-token chunk of {w.model.name} at TP{w.tp} is "
            f"{format_bytes(w.chunk_bytes)} per rank"
        )
        self.path_failed: tuple[str, ...] = (
            f"{self.chunk}; this path failed, nothing was fetched",
        )
        self.unmeasured: tuple[str, ...] = (
            f"{self.chunk}; no bulk read was measured on this path (run with --workload)",
        )
        self._lead = (
            f"{self.chunk}; this path delivers it to all {w.ranks_per_node} ranks of a node in "
        )
        self._against = f" at p99 against {format_duration_us(w.budget_us)} to {_alternative(w)}"
        self._short = f", short of the {w.safe_speedup:g}x needed for offload-safe"
        self._below = f", below the {w.unsafe_speedup:g}x line"
        self._no_rtt = (
            f"round_trips_per_chunk = {w.round_trips_per_chunk:g}, but no RTT was measured: "
            "the fetch counts one round trip"
        )
        self._trips = (
            f"the fetch counts {w.round_trips_per_chunk:g} sequential round trips ("
            f"{w.connector}): the measured read plus {self.extra_trips:g} x p99 RTT "
        )
        self._measure = (
            f"; run with --workload to measure {format_size(w.chunk_bytes)} x depth "
            f"{w.ranks_per_node}"
        )
        self._interpolated: dict[str, str] = {}  # basis -> its sentence, shared by paths
        self._cell_failed: dict[str, tuple[str, ...]] = {}  # error -> reasons

    def cell_failed(self, error: str) -> tuple[str, ...]:
        """The workload's own cell was measured and failed on this path."""
        got = self._cell_failed.get(error)
        if got is None:
            label = cell_label(self.w.chunk_bytes, self.w.ranks_per_node)
            got = self._cell_failed[error] = (f"{self.chunk}; the {label} read failed: {error}",)
        return got

    def interpolated(self, basis: str) -> str:
        got = self._interpolated.get(basis)
        if got is None:
            got = self._interpolated[basis] = (
                f"fetch time interpolated from the measured {basis}{self._measure}"
            )
        return got

    def fetched(
        self,
        verdict: Verdict,
        p99_us: float,
        speedup: float,
        rtt_p99_us: float | None,
        break_even_us: float | None,
        basis: str | None,
    ) -> tuple[str, ...]:
        """A path with a fetch time: the verdict line, then what went into it (extra round
        trips, interpolation) and the break-even RTT. ``basis`` is None for a measured cell;
        ``rtt_p99_us`` None where the path has no RTT."""
        lead = f"{self._lead}{format_duration_us(p99_us)}{self._against}"
        if verdict is Verdict.SAFE:
            reasons = [f"{lead}: offload pays {speedup:.1f}x"]
        elif verdict is Verdict.UNSAFE:
            if speedup < 1:
                reasons = [f"{lead}: the alternative is {1 / speedup:.1f}x faster than the fetch"]
            else:
                reasons = [f"{lead}: offload pays only {speedup:.1f}x{self._below}"]
        else:
            reasons = [f"{lead}: offload pays {speedup:.1f}x{self._short}"]
        if self.extra_trips:
            if rtt_p99_us is None:
                reasons.append(self._no_rtt)
            else:
                reasons.append(f"{self._trips}{format_us(rtt_p99_us)} us")
        if basis is not None:
            reasons.append(self.interpolated(basis))
        if rtt_p99_us is not None:
            if break_even_us is None:
                reasons.append(
                    "no round trip makes offload pay here: the transfer alone is too slow"
                )
            else:
                reasons.append(
                    "break-even RTT for this workload on this path: "
                    f"{format_duration_us(break_even_us)} (p99 RTT now {format_us(rtt_p99_us)} us)"
                )
        return tuple(reasons)
