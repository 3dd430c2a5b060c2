"""NVIDIA NIXL over UCX, worker side (docs/engines.md).

Runs only inside ``python -m netqual.engines.worker``: ``nixl_cu12`` (or ``nixl``) is
imported by ``Target``/``Initiator``, never at module import. Every process that created
a UCX backend may crash at interpreter exit (two libibverbs copies, the bundled one and
the host's): the worker leaves with ``os._exit`` after flushing, and its parent keeps a
result that arrived before any crash.

What UCX hides, and how the cell exposes it: on one host UCX copies memory between the
processes (CMA) even across network namespaces, so netqual sets ``UCX_TLS`` without
``cma``/``sm`` for a network path; with several interfaces UCX splits an operation over
them unless ``UCX_NET_DEVICES`` pins one (netqual pins with ``--rails`` and for a
loopback address); ``UCX_PROTO_INFO=y`` makes UCX print which lanes carry each
operation, into ``UCX_LOG_FILE`` here, parsed by ``netqual.engines.ucxinfo``. A READ over
TCP is served by the target's progress thread ("software emulation"), which NIXL runs
spinning (``pthrDelay = 0``): ``NETQUAL_NIXL_PTHR_DELAY_US`` makes it sleep instead.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import importlib
import importlib.metadata
import os
from pathlib import Path
from typing import Any

from netqual.engines import netdev, ucxinfo
from netqual.engines.buffer import INITIATOR_FILL, TARGET_FILL, PatternBuffer
from netqual.engines.interface import EngineDescriptor, EngineJob, EngineName
from netqual.engines.loop import Status
from netqual.model.engine import EngineOp, EngineTransport

DISTRIBUTIONS = ("nixl-cu12", "nixl-cu13", "nixl")
# UCX_TLS for a network path: never a memory copy between two processes of one host.
TLS = {EngineTransport.TCP: "tcp", EngineTransport.RDMA: "rc,ud,dc,tcp"}
PTHR_DELAY_ENV = "NETQUAL_NIXL_PTHR_DELAY_US"


def version() -> str | None:
    for dist in DISTRIBUTIONS:
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _api() -> Any:
    """NIXL's Python API: the CUDA 12 wheel's module, else the plain package's."""
    try:
        return importlib.import_module("nixl_cu12._api")
    except ImportError:
        return importlib.import_module("nixl._api")


def ucx_version() -> str | None:
    """The UCX this process loaded (NIXL bundles its own): from /proc/self/maps."""
    with contextlib.suppress(OSError):
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "libucp" in ln and "/" in ln})
        for path in paths:
            with contextlib.suppress(OSError, AttributeError):
                lib = ctypes.CDLL(path)
                lib.ucp_get_version_string.restype = ctypes.c_char_p
                return str(lib.ucp_get_version_string().decode())
    return None


def prepare(job: EngineJob, log: Path) -> tuple[str, ...]:
    """UCX's settings, in the worker's environment before NIXL loads: what netqual sets
    (returned, recorded in the cell) over what the agent's environment had."""
    settings = {"UCX_TLS": TLS[job.want], "UCX_PROTO_INFO": "y"}
    if job.netdev is not None:
        devices = [job.netdev]
        if job.want is EngineTransport.RDMA:
            devices = [*netdev.rdma_on(job.netdev), *devices]
        settings["UCX_NET_DEVICES"] = ",".join(devices)
    os.environ.update(settings)
    os.environ["UCX_LOG_FILE"] = str(log)
    kept = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("UCX_")]
    return tuple(x for x in kept if not x.startswith(("UCX_LOG_FILE=", "UCX_PROTO_INFO=")))


def _patch_pthr_delay(api: Any, delay_us: int) -> None:
    """nixl_agent.__init__ sets ``pthrDelay = 0``: the progress thread polls without
    sleeping, a core per agent. A config class that keeps ``delay_us`` instead."""
    binding = api.nixlBind
    base = binding.nixlAgentConfig.pthrDelay

    class _Config(binding.nixlAgentConfig):  # type: ignore[misc, name-defined]
        @property
        def pthrDelay(self) -> Any:
            return base.__get__(self)

        @pthrDelay.setter
        def pthrDelay(self, _value: Any) -> None:
            base.__set__(self, delay_us)

    class _Binding:
        def __getattr__(self, name: str) -> Any:
            return _Config if name == "nixlAgentConfig" else getattr(binding, name)

    api.nixlBind = _Binding()


def _flush_c_stdio() -> None:
    """UCX writes its log through stdio: flush it before reading the file."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


class _Side(PatternBuffer):
    def __init__(self, job: EngineJob, log: Path, size: int, fill: int) -> None:
        super().__init__(job, size, fill)
        api = _api()
        if (delay := os.environ.get(PTHR_DELAY_ENV)) and delay.isdigit():
            _patch_pthr_delay(api, int(delay))
        self.ucx_log = log
        self.name = f"netqual-{job.role.value}-{os.getpid()}"
        config = api.nixl_agent_config(
            enable_prog_thread=True, enable_listen_thread=False, backends=[]
        )
        self.agent: Any = api.nixl_agent(self.name, config)
        self.agent.create_backend("UCX", {})
        self.agent.register_memory([(self.addr, size, 0, "")], "DRAM")

    def rows(self) -> tuple[ucxinfo.ProtoRow, ...]:
        _flush_c_stdio()
        try:
            return ucxinfo.parse(self.ucx_log.read_text(errors="replace"))
        except OSError:
            return ()

    def version(self) -> str:
        ucx = ucx_version()
        return f"{version() or 'nixl'}" + (f", UCX {ucx}" if ucx else "")


class Target(_Side):
    def __init__(self, job: EngineJob, log: Path) -> None:
        super().__init__(job, log, job.length_bytes, TARGET_FILL)

    def descriptor(self, start_s: float) -> EngineDescriptor:
        return EngineDescriptor(
            engine=EngineName.NIXL,
            version=self.version(),
            address=self.job.address,
            session=self.name,
            buffer_addr=self.addr,
            length_bytes=self.job.length_bytes,
            metadata_b64=base64.b64encode(self.agent.get_agent_metadata()).decode(),
            claimed=(f"UCX_TLS={os.environ.get('UCX_TLS', '')}",),
            netdev=self.job.netdev,
            start_s=start_s,
        )


class Initiator(_Side):
    def __init__(self, job: EngineJob, log: Path) -> None:
        super().__init__(job, log, job.chunk_bytes * job.slots, INITIATOR_FILL)
        self.handles: dict[EngineOp, list[Any]] = {}

    def connect(self) -> float | None:
        """Attach the target (UCX connects here: a silent peer can block this forever,
        which only the parent's deadline ends)."""
        import time

        desc = self.job.descriptor
        assert desc is not None and desc.metadata_b64 is not None
        t0 = time.perf_counter_ns()
        remote = self.agent.add_remote_agent(base64.b64decode(desc.metadata_b64))
        connect_us = (time.perf_counter_ns() - t0) / 1e3
        remote = remote.decode() if isinstance(remote, bytes) else remote
        c, d = self.job.chunk_bytes, self.job.slots
        local = self.agent.prep_xfer_dlist(
            "NIXL_INIT_AGENT", [(self.addr + i * c, c, 0) for i in range(d)], "DRAM"
        )
        far = self.agent.prep_xfer_dlist(
            remote, [(desc.buffer_addr + i * c, c, 0) for i in range(d)], "DRAM"
        )
        for op in self.job.ops_list:
            word = "READ" if op is EngineOp.READ else "WRITE"
            self.handles[op] = [
                self.agent.make_prepped_xfer(word, local, [i], far, [i]) for i in range(d)
            ]
        return connect_us

    def _state(self, slot: int, state: object) -> Status:
        if state == "DONE":
            return Status.DONE
        if state == "PROC":
            return Status.PENDING
        self.failed[slot] = f"transfer state {state!r}"
        return Status.FAILED

    def post(self, op: EngineOp, slot: int) -> Status:
        try:
            return self._state(slot, self.agent.transfer(self.handles[op][slot]))
        except Exception as err:  # nixlBackendError and friends: the engine's words
            self.failed[slot] = f"{type(err).__name__}: {err}"
            return Status.FAILED

    def poll(self, op: EngineOp, slot: int) -> Status:
        try:
            return self._state(slot, self.agent.check_xfer_state(self.handles[op][slot]))
        except Exception as err:
            self.failed[slot] = f"{type(err).__name__}: {err}"
            return Status.FAILED

    def lanes(self, op: EngineOp) -> tuple[str, ...]:
        return tuple(r.text() for r in ucxinfo.rows_for(self.rows(), op))

    def transport(self, op: EngineOp) -> EngineTransport:
        kinds = {ucxinfo.classify(t) for t, _ in ucxinfo.lanes(ucxinfo.rows_for(self.rows(), op))}
        for kind in (EngineTransport.SHM, EngineTransport.TCP, EngineTransport.RDMA):
            if kind in kinds:  # a memory copy anywhere is the finding; TCP beside RDMA too
                return kind
        return EngineTransport.UNKNOWN

    def claimed(self) -> tuple[str, ...]:
        return ()
