"""What one agent allows a probe plan to ask for."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.model.plan import ProbePlan


@dataclass(frozen=True)
class AgentLimits:
    """Hard caps on what a peer may ask of an agent; a request over a cap gets an error.

    ``check`` (a whole plan, on the initiating agent) and ``check_pingpong`` /
    ``check_bulk`` (one request, on the responder) are the only places they are applied.
    """

    max_frame_bytes: int = 1 << 20
    max_iterations: int = 1_000_000
    max_message_bytes: int = 1 << 20
    max_chunk_bytes: int = 64 << 20
    max_depth: int = 64
    max_bulk_bytes: int = 8 << 30  # per bulk request
    max_reads: int = 1 << 20  # per bulk request: the initiator keeps 40 bytes per read
    # per probe: (chunk, depth) cells and reads over all cells (8 bytes of samples each
    # are kept until the result is sent)
    max_cells: int = 64
    max_probe_reads: int = 1 << 22
    max_buffer_bytes: int = 1 << 30  # payload buffers of all sessions together
    max_duration_s: float = 600.0
    max_sessions: int = 64
    auth_timeout_s: float = 5.0
    max_pending: int = 256  # unauthenticated connections, all sources (oldest dropped first)
    max_pending_per_source: int = 128  # unauthenticated connections from one IP address
    idle_timeout_s: float = 120.0

    def check(self, plan: ProbePlan) -> str | None:
        """The first cap ``plan`` exceeds, in words naming the cap; None when it fits."""
        if plan.timeout_s > self.max_duration_s:
            return f"timeout {plan.timeout_s:g} s exceeds max_duration_s={self.max_duration_s:g}"
        problem = self.check_pingpong(plan.warmup + plan.iterations, plan.size_bytes)
        if problem is None and plan.bulk:
            cells = len(plan.chunks_bytes) * len(plan.depths)
            if cells > self.max_cells:
                return f"{cells} bulk cells (chunks x depths) exceed max_cells={self.max_cells}"
            reads = sum(plan.reads_for(c) for c in plan.chunks_bytes) * len(plan.depths)
            if reads > self.max_probe_reads:
                return (
                    f"{reads} bulk reads over all cells exceed "
                    f"max_probe_reads={self.max_probe_reads}"
                )
            for chunk in plan.chunks_bytes:
                for depth in plan.depths:
                    if (
                        problem := self.check_bulk(chunk, plan.reads_for(chunk), depth)
                    ) is not None:
                        return problem
        return problem

    def check_pingpong(self, rounds: int, size_bytes: int) -> str | None:
        if rounds > self.max_iterations:
            return f"iterations+warmup {rounds} exceeds max_iterations={self.max_iterations}"
        if size_bytes > self.max_message_bytes:
            return f"size {size_bytes} exceeds max_message_bytes={self.max_message_bytes}"
        return None

    def check_bulk(self, chunk_bytes: int, reads: int, depth: int) -> str | None:
        if chunk_bytes > self.max_chunk_bytes:
            return f"chunk {chunk_bytes} exceeds max_chunk_bytes={self.max_chunk_bytes}"
        if reads > self.max_reads:
            return f"{reads} reads of {chunk_bytes} bytes exceed max_reads={self.max_reads}"
        if reads * chunk_bytes > self.max_bulk_bytes:
            return (
                f"bulk cell of {reads} x {chunk_bytes} bytes exceeds "
                f"max_bulk_bytes={self.max_bulk_bytes}"
            )
        if depth > self.max_depth:
            return f"depth {depth} exceeds max_depth={self.max_depth}"
        return None
