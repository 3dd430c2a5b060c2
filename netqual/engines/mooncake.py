"""The Mooncake Transfer Engine, worker side (docs/engines.md).

Runs only inside ``python -m netqual.engines.worker``: ``mooncake.engine`` is imported by
``open_target``/``open_initiator``, never at module import, so the agent and the
coordinator can read this module (its log parser, its version) without loading native
code.

What Mooncake hides, and how the cell exposes it: ``initialize(ip, "P2PHANDSHAKE",
protocol, device_filter)`` ignores ``protocol``: it installs RDMA whenever an RDMA device
survives the device filter, TCP otherwise, and says so only in its log (glog on stderr,
here the worker's log file). ``parse_log`` reads the transport it installed; the byte
counters of the path's NIC prove where the bytes went. The TCP path is the address the
target initialised with (its data port is bound to every address).
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netqual.engines.buffer import INITIATOR_FILL, TARGET_FILL, PatternBuffer
from netqual.engines.interface import EngineDescriptor, EngineJob, EngineName
from netqual.engines.loop import Status
from netqual.model.engine import EngineOp, EngineTransport

DISTRIBUTIONS = (
    "mooncake-transfer-engine-non-cuda",
    "mooncake-transfer-engine",
    "mooncake-transfer-engine-cuda13",
    "mooncake-transfer-engine-rocm",
)
MODULE = "mooncake.engine"

_INSTALLED = re.compile(r"installTransport, type=(\w+)")
_TCP_LISTEN = re.compile(r"TcpTransport: listen on port (\d+)")
_HCAS = re.compile(r"Topology discovery complete\. Found (\d+) HCAs")
_FORCE_TCP = re.compile(r"MC_FORCE_TCP is set")
_ERROR = re.compile(r"^E\d{4} [^\]]*\] (.*)$", re.M)
# printed on every start, harmless (docs/engines.md)
_BENIGN = ("Local segment descriptor not found",)


def version() -> str | None:
    """The installed distribution and its version, from its metadata (no import)."""
    for dist in DISTRIBUTIONS:
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@dataclass(frozen=True)
class MooncakeLog:
    """What Mooncake's log says: the transports it installed, the RDMA devices it found,
    its errors (benign start-up lines left out)."""

    transports: tuple[str, ...]
    hcas: int | None
    force_tcp: bool
    errors: tuple[str, ...]

    @property
    def transport(self) -> EngineTransport:
        if "rdma" in self.transports:
            return EngineTransport.RDMA
        if "tcp" in self.transports:
            return EngineTransport.TCP
        return EngineTransport.UNKNOWN

    def claimed(self) -> tuple[str, ...]:
        words = [f"installed transport: {', '.join(self.transports) or 'none found in log'}"]
        if self.hcas is not None:
            words.append(f"RDMA devices found: {self.hcas}")
        if self.force_tcp:
            words.append("MC_FORCE_TCP set")
        return tuple(words)


def parse_log(text: str) -> MooncakeLog:
    """The transport Mooncake installed: ``installTransport, type=X`` lines; a classic
    engine that found no RDMA device prints none and listens with its TCP transport."""
    installed = dict.fromkeys(m.group(1).lower() for m in _INSTALLED.finditer(text))
    if _TCP_LISTEN.search(text):
        installed["tcp"] = None
    hcas = [int(m.group(1)) for m in _HCAS.finditer(text)]
    errors = tuple(
        e.strip()[:200] for e in _ERROR.findall(text) if not any(b in e for b in _BENIGN)
    )
    return MooncakeLog(
        tuple(installed), hcas[-1] if hcas else None, bool(_FORCE_TCP.search(text)), errors[:8]
    )


def prepare(job: EngineJob) -> tuple[str, ...]:
    """What netqual sets for Mooncake (before the import): nothing but its arguments; the
    device filter and protocol are recorded so a reader can reproduce the cell."""
    protocol = "rdma" if job.want is EngineTransport.RDMA else "tcp"
    return (
        f"initialize({job.address}, P2PHANDSHAKE, {protocol}, "
        f"device filter {job.rdma_device or 'none'})",
    )


class _Side(PatternBuffer):
    def __init__(self, job: EngineJob, log: Path, size: int, fill: int) -> None:
        super().__init__(job, size, fill)
        from mooncake.engine import TransferEngine

        self.log = log
        self.te: Any = TransferEngine()
        protocol = "rdma" if job.want is EngineTransport.RDMA else "tcp"
        rc = self.te.initialize(job.address, "P2PHANDSHAKE", protocol, job.rdma_device or "")
        if rc != 0:
            raise RuntimeError(f"TransferEngine.initialize returned {rc}: {self._why()}")
        if (rc := self.te.register_memory(self.addr, size)) != 0:
            raise RuntimeError(f"register_memory returned {rc}: {self._why()}")

    def version(self) -> str:
        return version() or "mooncake"

    def parsed(self) -> MooncakeLog:
        try:
            return parse_log(self.log.read_text(errors="replace"))
        except OSError:
            return MooncakeLog((), None, False, ())

    def _why(self) -> str:
        errors = self.parsed().errors
        return errors[-1] if errors else "no error in its log"


class Target(_Side):
    def __init__(self, job: EngineJob, log: Path) -> None:
        super().__init__(job, log, job.length_bytes, TARGET_FILL)

    def descriptor(self, start_s: float) -> EngineDescriptor:
        port = int(self.te.get_rpc_port())
        host = f"[{self.job.address}]" if ":" in self.job.address else self.job.address
        return EngineDescriptor(
            engine=EngineName.MOONCAKE,
            version=self.version(),
            address=self.job.address,
            session=f"{host}:{port}",
            buffer_addr=self.addr,
            length_bytes=self.job.length_bytes,
            claimed=self.parsed().claimed(),
            netdev=self.job.netdev,
            start_s=start_s,
        )


class Initiator(_Side):
    def __init__(self, job: EngineJob, log: Path) -> None:
        super().__init__(job, log, job.chunk_bytes * job.slots, INITIATOR_FILL)
        assert job.descriptor is not None
        self.session = job.descriptor.session
        self.remote = job.descriptor.buffer_addr
        self.batch = [0] * job.slots
        self.opened = False

    def connect(self) -> float | None:
        """Nothing to do: the first operation opens the session (timed as first_op_us)."""
        return None

    def post(self, op: EngineOp, slot: int) -> Status:
        c = self.job.chunk_bytes
        local, remote = self.addr + slot * c, self.remote + slot * c
        if not self.opened:  # the first operation does the P2P handshake: synchronous
            call = (
                self.te.transfer_sync_read if op is EngineOp.READ else self.te.transfer_sync_write
            )
            rc = call(self.session, local, remote, c)
            if rc != 0:
                self.failed[slot] = f"transfer_sync_{op.value} returned {rc}: {self._why()}"
                return Status.FAILED
            self.opened = True
            return Status.DONE
        submit = (
            self.te.batch_transfer_async_read
            if op is EngineOp.READ
            else self.te.batch_transfer_async_write
        )
        batch = submit(self.session, [local], [remote], [c])
        if not batch:
            self.failed[slot] = f"batch_transfer_async_{op.value} refused: {self._why()}"
            return Status.FAILED
        self.batch[slot] = batch
        return Status.PENDING

    def poll(self, op: EngineOp, slot: int) -> Status:
        # 1 done (the batch is freed), 0 pending, -1 failed, -2 timed out
        st = self.te.transfer_check_status(self.batch[slot])
        if st == 0:
            return Status.PENDING
        self.batch[slot] = 0
        if st == 1:
            return Status.DONE
        what = "timed out (MC_TRANSFER_TIMEOUT)" if st == -2 else "failed"
        self.failed[slot] = f"{what}: {self._why()}"
        return Status.FAILED

    def lanes(self, op: EngineOp) -> tuple[str, ...]:
        return self.parsed().transports

    def transport(self, op: EngineOp) -> EngineTransport:
        return self.parsed().transport

    def claimed(self) -> tuple[str, ...]:
        return self.parsed().claimed()
