"""The one place pyverbs is imported, and the builders for every pyverbs object we create.

pyverbs is optional: ``import netqual`` never touches it. ``load()`` imports it on first use
and turns every way that can fail into ``TransportUnavailableError`` with an install hint.

Import route: a normal import first; if that fails, Debian/Ubuntu's ``python3-pyverbs``
directory (``/usr/lib/python3/dist-packages``) is appended at the *end* of ``sys.path``
(so it never shadows packages of netqual's own environment) and the import is retried.
``NETQUAL_PYVERBS_PATH`` names a directory to try first instead.

The integers below are verbs.h ABI values; pyverbs accepts plain ints everywhere, which
spares us its enum module (``pyverbs.enums`` up to v58, ``pyverbs.libibverbs_enums`` later).
"""

from __future__ import annotations

import ctypes
import glob
import importlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from netqual.base.errors import TransportUnavailableError

DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
PATH_ENV = "NETQUAL_PYVERBS_PATH"
SYSFS_INFINIBAND = Path("/sys/class/infiniband")

INSTALL_HINT = (
    "install pyverbs: Debian/Ubuntu 'apt install python3-pyverbs' (netqual finds it in "
    f"{DEBIAN_DIST_PACKAGES}); RHEL 'dnf install python3-pyverbs'; MLNX OFED/DOCA ship it; "
    f"or set {PATH_ENV} to the directory holding the pyverbs package (see docs/rdma.md)"
)
NO_DEVICE_PROBLEM = "no RDMA device (no /sys/class/infiniband)"
NO_DEVICE_HINT = (
    "load the NIC driver (e.g. mlx5_ib), or for a functional test create a soft-RoCE device: "
    "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <ifname>"
)

# verbs.h values (ABI-stable)
ACCESS_LOCAL_WRITE = 1
ACCESS_REMOTE_WRITE = 2
ACCESS_REMOTE_READ = 4
WR_RDMA_WRITE = 0
WR_RDMA_READ = 4
SEND_SIGNALED = 2
SEND_INLINE = 8
QPT_RC = 2
QPS_RESET = 0
QPS_INIT = 1
QPS_RTR = 2
QPS_RTS = 3
QP_ATTR_PATH_MTU = 1 << 8  # IBV_QP_PATH_MTU, for QP.query
PORT_ACTIVE = 4
LINK_LAYER_INFINIBAND = 1
LINK_LAYER_ETHERNET = 2
MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}

# Everything the transport and doctor touch on pyverbs objects. ``load`` refuses a pyverbs
# that lacks any of it, and tests/unit/transports/test_rdma_api.py checks it against the
# installed module.
REQUIRED_API: dict[str, tuple[str, ...]] = {
    "device.get_device_list": (),
    "device.Device": ("name",),
    "device.Context": (
        "query_device",
        "query_port",
        "query_gid",
        "query_gid_type",
        "close",
    ),
    "device.DeviceAttr": (
        "max_qp_rd_atom",
        "max_qp_init_rd_atom",
        "max_qp_wr",
        "phys_port_cnt",
        "fw_version",
    ),
    "device.PortAttr": ("state", "active_mtu", "lid", "link_layer", "gid_tbl_len", "max_msg_sz"),
    "pd.PD": ("close",),
    "mr.MR": ("buf", "lkey", "rkey", "length", "close"),
    "cq.CQ": ("poll", "close"),
    "cq.WC": ("status", "wr_id", "opcode", "vendor_err"),
    "qp.QP": ("qp_num", "to_init", "to_rtr", "to_rts", "post_send", "query", "close"),
    "qp.QPCap": ("max_inline_data", "max_send_wr"),
    "qp.QPInitAttr": ("max_inline_data", "max_send_wr"),
    "qp.QPAttr": (
        "qp_access_flags",
        "path_mtu",
        "dest_qp_num",
        "rq_psn",
        "sq_psn",
        "max_dest_rd_atomic",
        "max_rd_atomic",
        "min_rnr_timer",
        "timeout",
        "retry_cnt",
        "rnr_retry",
        "ah_attr",
        "pkey_index",
    ),
    "addr.GID": ("gid",),
    "addr.GlobalRoute": ("hop_limit", "sgid_index"),
    "addr.AHAttr": ("dlid", "is_global", "hop_limit", "sgid_index"),
    "wr.SGE": ("addr", "length", "lkey"),
    "wr.SendWR": ("wr_id", "send_flags", "set_wr_rdma"),
    "pyverbs_error.PyverbsRDMAError": ("error_code",),
    "pyverbs_error.PyverbsError": (),
}
_SUBMODULES = ("device", "pd", "mr", "cq", "qp", "addr", "wr", "pyverbs_error")


def pyverbs_qp_offset(cls: type) -> int | None:
    """Where a pyverbs QP object holds its ``ibv_qp *``. pyverbs does not expose it, but
    Cython fixes the layout: ``cdef class QP(PyverbsCM)`` declares ``cdef v.ibv_qp *qp``
    first (rdma-core pyverbs/qp.pxd, v44 to v59), and a cdef class's first own field sits
    right after its base's struct, at the base's ``__basicsize__``. None for a class that
    is not pyverbs' QP (or a subclass of it)."""
    qp_class = next(
        (c for c in cls.__mro__ if c.__name__ == "QP" and c.__module__ == "pyverbs.qp"), None
    )
    if qp_class is None or len(qp_class.__mro__) < 2:
        return None
    offset = int(qp_class.__mro__[1].__basicsize__)
    if offset % ctypes.sizeof(ctypes.c_void_p) or offset + 8 > qp_class.__basicsize__:
        return None
    return offset


def pyverbs_qp_address(qp: Any) -> int | None:
    """The ``ibv_qp *`` a pyverbs QP wraps (see pyverbs_qp_offset). The caller still checks
    what it finds before use (hotloop.check_qp: readable, an RC QP of this QP number)."""
    offset = pyverbs_qp_offset(type(qp))
    if offset is None:
        return None
    return int(ctypes.c_uint64.from_address(id(qp) + offset).value)


@dataclass(frozen=True)
class Pyverbs:
    """The imported pyverbs submodules, and where they came from."""

    device: ModuleType
    pd: ModuleType
    mr: ModuleType
    cq: ModuleType
    qp: ModuleType
    addr: ModuleType
    wr: ModuleType
    pyverbs_error: ModuleType
    location: str  # directory of the pyverbs package
    version: str | None  # distribution version when it can be told
    route: str  # "sys.path", "debian dist-packages", or "NETQUAL_PYVERBS_PATH"
    # The address of the ``struct ibv_qp`` behind a QP object (for the compiled loop), or None.
    qp_address: Callable[[Any], int | None] = pyverbs_qp_address

    @property
    def error(self) -> type[Exception]:
        """PyverbsError: the base of everything pyverbs raises on purpose."""
        cls: type[Exception] = self.pyverbs_error.PyverbsError
        return cls


_loaded: dict[str, Pyverbs] = {}  # the one successful import, under key "pyverbs"


def _import_quietly() -> dict[str, ModuleType]:
    """Import the submodules; undo the ``logging.basicConfig`` pyverbs runs at import."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return {name: importlib.import_module(f"pyverbs.{name}") for name in _SUBMODULES}
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def _unavailable(err: BaseException) -> TransportUnavailableError:
    text = str(err)
    if "IBVERBS_PRIVATE" in text or "version `" in text:
        return TransportUnavailableError(
            "rdma",
            f"pyverbs does not match this system's libibverbs ({text})",
            "use the distribution's python3-pyverbs, or build pyverbs from the same "
            "rdma-core release as the installed libibverbs (docs/rdma.md)",
        )
    return TransportUnavailableError("rdma", f"pyverbs is not importable ({text})", INSTALL_HINT)


def _forget_failed_import() -> None:
    for name in [m for m in sys.modules if m == "pyverbs" or m.startswith("pyverbs.")]:
        if sys.modules[name] is not None:
            del sys.modules[name]


def loaded() -> Pyverbs | None:
    """pyverbs where this process has imported it already (``load``), else None: for
    readers that use it only where it costs no import."""
    return _loaded.get("pyverbs")


def load() -> Pyverbs:
    """Import pyverbs (once). Raises TransportUnavailableError with an install hint."""
    if "pyverbs" in _loaded:
        return _loaded["pyverbs"]
    override = os.environ.get(PATH_ENV)
    route = "sys.path"
    if override:
        if override not in sys.path:
            sys.path.insert(0, override)
        route = PATH_ENV
    try:
        mods = _import_quietly()
    except ImportError as first:
        if override or not Path(DEBIAN_DIST_PACKAGES, "pyverbs").is_dir():
            raise _unavailable(first) from first
        if DEBIAN_DIST_PACKAGES in sys.path:
            raise _unavailable(first) from first
        _forget_failed_import()
        sys.path.append(DEBIAN_DIST_PACKAGES)
        route = "debian dist-packages"
        try:
            mods = _import_quietly()
        except ImportError as second:
            raise _unavailable(second) from second
    location = str(Path(mods["device"].__file__ or ".").parent)
    pv = Pyverbs(
        **{name: mods[name] for name in _SUBMODULES},  # type: ignore[arg-type]
        location=location,
        version=_version(location),
        route=route,
    )
    missing = missing_api(pv)
    if missing:
        raise TransportUnavailableError(
            "rdma",
            f"pyverbs at {location} lacks {', '.join(missing)}",
            "install a pyverbs from rdma-core 44 or later (docs/rdma.md)",
        )
    _loaded["pyverbs"] = pv
    return pv


def missing_api(pv: Pyverbs) -> list[str]:
    """Names in REQUIRED_API that the imported pyverbs does not have."""
    missing = []
    for dotted, attrs in REQUIRED_API.items():
        module_name, cls_name = dotted.split(".")
        cls = getattr(getattr(pv, module_name), cls_name, None)
        if cls is None:
            missing.append(dotted)
            continue
        missing += [f"{dotted}.{a}" for a in attrs if not hasattr(cls, a)]
    return missing


def _version(location: str) -> str | None:
    """pyverbs has no __version__; ask the package metadata, then dpkg's database."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyverbs")
    except PackageNotFoundError:
        pass
    if location.startswith(DEBIAN_DIST_PACKAGES):
        return _dpkg_version("python3-pyverbs")
    return None


def _dpkg_version(package: str, status: Path = Path("/var/lib/dpkg/status")) -> str | None:
    try:
        text = status.read_text(errors="replace")
    except OSError:
        return None
    for block in text.split("\n\n"):
        if f"Package: {package}\n" in block + "\n":
            for line in block.splitlines():
                if line.startswith("Version: "):
                    return line.removeprefix("Version: ").strip()
    return None


def libibverbs_version() -> str | None:
    """rdma-core release of the system libibverbs, from its file name (libibverbs.so.1.14.44.0)."""
    for pattern in (
        "/usr/lib/*/libibverbs.so.1.*",
        "/usr/lib64/libibverbs.so.1.*",
        "/usr/lib/libibverbs.so.1.*",
    ):
        for path in sorted(glob.glob(pattern)):
            parts = path.rsplit("libibverbs.so.1.", 1)[1].split(".")
            if len(parts) >= 3:
                return ".".join(parts[1:])
    return None


def rdma_sysfs_devices(root: Path = SYSFS_INFINIBAND) -> list[str]:
    try:
        return sorted(p.name for p in root.iterdir())
    except OSError:
        return []


def error_code(err: BaseException) -> int | None:
    code = getattr(err, "error_code", None)
    return code if isinstance(code, int) else None


# -- builders for the objects that need no device (tests build them with the real module) --
def qp_cap(pv: Pyverbs, send_wr: int, inline_bytes: int) -> Any:
    return pv.qp.QPCap(
        max_send_wr=send_wr,
        max_recv_wr=1,
        max_send_sge=1,
        max_recv_sge=1,
        max_inline_data=inline_bytes,
    )


def qp_init_attr(pv: Pyverbs, cq: Any, cap: Any) -> Any:
    # sq_sig_all=0: only WRs flagged SIGNALED complete (ping-pong signals every k-th).
    return pv.qp.QPInitAttr(qp_type=QPT_RC, scq=cq, rcq=cq, cap=cap, sq_sig_all=0)


def ah_attr(
    pv: Pyverbs, port: int, *, dlid: int, dgid: str | None, sgid_index: int, traffic_class: int
) -> Any:
    """IB: address by LID. RoCE: global route; hop_limit 255 (the default 1 dies at a router)."""
    if dgid is None:
        return pv.addr.AHAttr(port_num=port, dlid=dlid, is_global=0)
    route = pv.addr.GlobalRoute(
        dgid=pv.addr.GID(dgid), sgid_index=sgid_index, hop_limit=255, traffic_class=traffic_class
    )
    return pv.addr.AHAttr(port_num=port, is_global=1, gr=route, dlid=0)


def qp_attr(pv: Pyverbs, port: int, path_mtu: int) -> Any:
    return pv.qp.QPAttr(qp_state=QPS_INIT, cur_qp_state=QPS_RESET, port_num=port, path_mtu=path_mtu)


def sge(pv: Pyverbs, addr: int, length: int, lkey: int) -> Any:
    return pv.wr.SGE(addr=addr, length=length, lkey=lkey)


def send_wr(pv: Pyverbs, wr_id: int, opcode: int, sg: Any, send_flags: int) -> Any:
    return pv.wr.SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sg], send_flags=send_flags)
