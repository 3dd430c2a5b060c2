"""What RDMA hardware a node has (scanned once through pyverbs) and which port to use.

``scan`` turns pyverbs objects into plain records; ``choose`` is pure, so device, port and
GID selection are tested over recorded tables without hardware.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from netqual.base.errors import TransportUnavailableError
from netqual.transports.rdma import verbs
from netqual.transports.rdma.gid import (
    Family,
    GidChoice,
    GidEntry,
    GidSelectionError,
    GidType,
    LinkLayer,
    gid_text,
    gid_type_from_table,
    gid_type_from_verbs,
    select_gid,
)
from netqual.transports.rdma.options import RdmaOptions


@dataclass(frozen=True)
class PortInfo:
    num: int
    state: int
    link_layer: LinkLayer
    active_mtu: int  # ibv_mtu enum
    lid: int
    gids: tuple[GidEntry, ...]
    max_msg_bytes: int = 1 << 31

    @property
    def active(self) -> bool:
        return self.state == verbs.PORT_ACTIVE

    @property
    def state_name(self) -> str:
        return verbs.PORT_STATES.get(self.state, str(self.state))

    @property
    def mtu_bytes(self) -> int:
        return verbs.MTU_BYTES.get(self.active_mtu, 0)


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    ports: tuple[PortInfo, ...]
    fw_version: str = ""
    max_qp_rd_atom: int = 1
    max_qp_init_rd_atom: int = 1
    max_qp_wr: int = 1024
    error: str | None = None  # a device that could not be queried


@dataclass(frozen=True)
class Selection:
    device: DeviceInfo
    port: PortInfo
    gid: GidChoice

    @property
    def where(self) -> str:
        return f"{self.device.name} port {self.port.num}"


def scan(pv: verbs.Pyverbs) -> tuple[DeviceInfo, ...]:
    """Every device, port and populated GID. Raises TransportUnavailableError without RDMA."""
    try:
        devices = pv.device.get_device_list()
    except pv.error as err:
        problem = verbs.NO_DEVICE_PROBLEM
        if verbs.rdma_sysfs_devices():  # sysfs has devices, yet libibverbs sees none
            problem = f"no usable RDMA device ({err}; is the provider library installed?)"
        raise TransportUnavailableError("rdma", problem, verbs.NO_DEVICE_HINT) from err
    if not devices:
        raise TransportUnavailableError("rdma", verbs.NO_DEVICE_PROBLEM, verbs.NO_DEVICE_HINT)
    return tuple(_scan_one(pv, _name(dev)) for dev in devices)


def _name(dev: object) -> str:
    raw = getattr(dev, "name", b"")
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _scan_one(pv: verbs.Pyverbs, name: str) -> DeviceInfo:
    try:
        ctx = pv.device.Context(name=name)
    except pv.error as err:
        return DeviceInfo(name, (), error=f"cannot open: {err}")
    try:
        dev_attr = ctx.query_device()
        attrs = {n: ctx.query_port(n) for n in range(1, int(dev_attr.phys_port_cnt) + 1)}
        links = {n: LinkLayer.from_verbs(int(a.link_layer)) for n, a in attrs.items()}
        table = _gid_tables(pv, ctx, sum(int(a.gid_tbl_len) for a in attrs.values()), links)
        ports = [
            PortInfo(
                num=num,
                state=int(port_attr.state),
                link_layer=links[num],
                active_mtu=int(port_attr.active_mtu),
                lid=int(port_attr.lid),
                gids=(
                    table.get(num, ())
                    if table is not None
                    else _gid_table(pv, ctx, num, int(port_attr.gid_tbl_len), links[num])
                ),
                max_msg_bytes=int(port_attr.max_msg_sz),
            )
            for num, port_attr in attrs.items()
        ]
        return DeviceInfo(
            name,
            tuple(ports),
            fw_version=str(dev_attr.fw_version),
            max_qp_rd_atom=max(1, int(dev_attr.max_qp_rd_atom)),
            max_qp_init_rd_atom=max(1, int(dev_attr.max_qp_init_rd_atom)),
            max_qp_wr=int(dev_attr.max_qp_wr),
        )
    except pv.error as err:
        return DeviceInfo(name, (), error=f"query failed: {err}")
    finally:
        ctx.close()


def _gid_tables(
    pv: verbs.Pyverbs, ctx: object, slots: int, links: Mapping[int, LinkLayer]
) -> dict[int, tuple[GidEntry, ...]] | None:
    """Every port's populated GIDs in one call (``ibv_query_gid_table``, rdma-core 32 on):
    the slot-by-slot walk below asks once per slot (rxe has 1,024 a port, 2-4 used), at
    both ends of every probe. None where pyverbs or the device cannot: then walk."""
    query = getattr(ctx, "query_gid_table", None)
    if query is None or slots <= 0:
        return None
    try:
        found = [
            (int(e.port_num), int(e.gid_index), e.gid_str(), int(e.gid_type)) for e in query(slots)
        ]
    except (pv.error, AttributeError, TypeError, ValueError):
        return None
    out: dict[int, list[GidEntry]] = {}
    for port, index, raw, table_type in sorted(found):
        link = links.get(port)
        try:
            text = gid_text(raw)
        except ValueError:
            continue
        if link is None or int(text.replace(":", ""), 16) == 0:
            continue
        out.setdefault(port, []).append(
            GidEntry(index, text, gid_type_from_table(link, table_type))
        )
    return {port: tuple(entries) for port, entries in out.items()}


def _gid_table(
    pv: verbs.Pyverbs, ctx: object, port: int, length: int, link: LinkLayer
) -> tuple[GidEntry, ...]:
    entries = []
    for index in range(length):
        try:
            raw = str(ctx.query_gid(port, index))  # type: ignore[attr-defined]
            # Most slots are empty (rxe lists 1,024 a port, 2-4 used), and every probe scans
            # every device at both ends: parsing each empty slot as an address took 1-4 s of
            # a probe's start in the Soft-RoCE guest.
            if not raw.replace(":", "").strip("0"):
                continue
            text = gid_text(raw)
            if int(text.replace(":", ""), 16) == 0:
                continue
            sysfs_type = int(ctx.query_gid_type(port, index))  # type: ignore[attr-defined]
        except (pv.error, ValueError):
            continue  # an empty or racing entry
        entries.append(GidEntry(index, text, gid_type_from_verbs(link, sysfs_type)))
    return tuple(entries)


def choose(
    devices: Sequence[DeviceInfo],
    options: RdmaOptions,
    *,
    local_ip: str | None,
    family: Family | None = None,
    want_type: GidType | None = None,
) -> Selection:
    """Device, port and GID for a probe; automatic only when unambiguous."""
    pool = [d for d in devices if d.error is None]
    if options.device is not None:
        pool = [d for d in pool if d.name == options.device]
        if not pool:
            names = ", ".join(d.name for d in devices) or "none"
            raise GidSelectionError(
                f"--rdma-device {options.device}: no such device (have: {names})"
            )
    candidates: list[Selection] = []
    problems: list[str] = []
    for dev in pool:
        for port in dev.ports:
            if options.port is not None and port.num != options.port:
                continue
            where = f"{dev.name} port {port.num}"
            if not port.active:
                problems.append(f"{where} is {port.state_name}")
                continue
            try:
                choice = select_gid(
                    port.gids,
                    port.link_layer,
                    local_ip=local_ip,
                    family=family,
                    want_type=want_type,
                    gid_index=options.gid_index,
                    where=where,
                )
            except GidSelectionError as err:
                problems.append(str(err))
                continue
            candidates.append(Selection(dev, port, choice))
    if not candidates:
        detail = "; ".join(problems) if problems else "no port matches the given options"
        raise GidSelectionError(f"no usable RDMA port: {detail}")
    if len(candidates) == 1:
        return candidates[0]
    bound = [c for c in candidates if c.gid.bound]
    if len(bound) == 1:
        return bound[0]
    listed = ", ".join(c.where for c in candidates)
    raise GidSelectionError(
        f"several usable RDMA ports ({listed}) and none is bound to {local_ip or 'the probed IP'}; "
        "pass --rdma-device and --rdma-port"
    )
