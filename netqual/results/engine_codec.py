"""A path's fetch engine cells in the results file (``engine``, docs/results.md): a list of
cells, one per operation, each with the keys the contract fixes (``name``, ``version``,
``transport``, ``device``, ``chunk_bytes``, ``depth``, ``op``, ``completion_us`` {``p50``,
``p99``}, ``goodput_gbps``, ``first_op_us``, ``vs_probe``, ``fallback``) and netqual's own
(``ops``, ``error``, ``evidence``)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from netqual.files.filedata import MAX_FLOAT, MAX_INT
from netqual.model.engine import (
    EngineCell,
    EngineEvidence,
    EngineName,
    EngineOp,
    EngineTransport,
)

Us = Annotated[float, msgspec.Meta(ge=0, le=MAX_FLOAT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Text = Annotated[str, msgspec.Meta(max_length=4096)]


def _t(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def cell_to_dict(c: EngineCell) -> dict[str, Any]:
    e = c.evidence
    return {
        "name": c.name.value,
        "version": c.version,
        "op": c.op.value,
        "chunk_bytes": c.chunk_bytes,
        "depth": c.depth,
        "transport": c.transport.value,
        "device": c.device,
        "ops": c.ops,
        "completion_us": {"p50": _t(c.completion_p50_us), "p99": _t(c.completion_p99_us)},
        "goodput_gbps": None if c.goodput_gbps is None else round(c.goodput_gbps, 6),
        "first_op_us": _t(c.first_op_us),
        "vs_probe": None if c.vs_probe is None else round(c.vs_probe, 4),
        "fallback": c.fallback,
        "error": c.error,
        "evidence": {
            "claimed": list(e.claimed),
            "carried_by": e.carried_by,
            "peer_carried_by": e.peer_carried_by,
            "intended": e.intended,
            "peer_intended": e.peer_intended,
            "bytes_moved": e.bytes_moved,
            "settings": list(e.settings),
            "start_s": e.start_s,
            "peer_start_s": e.peer_start_s,
            "connect_us": _t(e.connect_us),
            "data_ok": e.data_ok,
            "worker_exit": e.worker_exit,
        },
    }


class _Completion(msgspec.Struct, frozen=True, gc=False):
    p50: Us | None = None
    p99: Us | None = None


class _Evidence(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    claimed: list[Text] = []
    carried_by: Text | None = None
    peer_carried_by: Text | None = None
    intended: Text | None = None
    peer_intended: Text | None = None
    bytes_moved: Count = 0
    settings: list[Text] = []
    start_s: Us | None = None
    peer_start_s: Us | None = None
    connect_us: Us | None = None
    data_ok: bool | None = None
    worker_exit: Text | None = None


class WireEngineCell(msgspec.Struct, kw_only=True, gc=False):
    """One engine cell of a results file, every value bounded (decoded with the path)."""

    name: EngineName
    version: Text | None
    op: EngineOp
    chunk_bytes: Positive
    depth: Positive
    transport: EngineTransport
    device: Text | None
    ops: Count = 0
    completion_us: _Completion = _Completion()
    goodput_gbps: Us | None = None
    first_op_us: Us | None = None
    vs_probe: Us | None = None
    fallback: Text | None = None
    error: Text | None = None
    evidence: _Evidence = _Evidence()

    def cell(self) -> EngineCell:
        e = self.evidence
        return EngineCell(
            name=self.name,
            version=self.version,
            op=self.op,
            chunk_bytes=self.chunk_bytes,
            depth=self.depth,
            transport=self.transport,
            device=self.device,
            ops=self.ops,
            completion_p50_us=self.completion_us.p50,
            completion_p99_us=self.completion_us.p99,
            goodput_gbps=self.goodput_gbps,
            first_op_us=self.first_op_us,
            vs_probe=self.vs_probe,
            fallback=self.fallback,
            error=self.error,
            evidence=EngineEvidence(
                claimed=tuple(e.claimed),
                carried_by=e.carried_by,
                peer_carried_by=e.peer_carried_by,
                intended=e.intended,
                peer_intended=e.peer_intended,
                bytes_moved=e.bytes_moved,
                settings=tuple(e.settings),
                start_s=e.start_s,
                peer_start_s=e.peer_start_s,
                connect_us=e.connect_us,
                data_ok=e.data_ok,
                worker_exit=e.worker_exit,
            ),
        )
