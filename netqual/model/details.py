"""Every key of a path's ``details`` (how it was measured) in one registry: its JSON type,
its unit and what it means, as pyperf's ``_metadata.py`` keeps its metadata keys.

``details`` is an open object: the transports write theirs (``transports/tcp.py``,
``tcp_fetch.py``, ``rdma/transport.py`` and the responder's ``peer``), the initiating agent
adds its host counters (``agent/probe_request.py``), the coordinator the rest
(``run/pairprobe.py``, ``run/phaserun.py``, ``results/journal.py``). Who reads it:

- ``codec/details.py`` checks the type of every key listed here, nested objects included,
  where details arrive: an agent's probe result (a wrong type is a ``bad-request`` naming
  ``probe.result.details.KEY``, so no run writes a file it cannot read back) and every
  results file read (the command stops naming the file and the field,
  ``paths[3].details.counters``); a key not listed (a newer netqual's) is kept as read;
- tests hold the producers to it: the keys whole runs over real agents write (TCP on
  loopback, RDMA on the fake verbs; tests/unit/transports/test_details_keys.py) and every
  key the code writes by name (tests/unit/results/test_details_registry.py);
- docs/results.md's table of details keys is held to it, both ways.

Adding a key is one entry here (and its row in docs/results.md).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass


class Value(enum.Enum):
    """A key's JSON type, as docs/results.md writes it."""

    FLAG = "boolean"
    COUNT = "integer >= 0"
    INTEGER = "integer"
    NUMBER = "number"
    TEXT = "string"
    OBJECT = "object"
    LIST = "array"


@dataclass(frozen=True)
class Key:
    name: str
    value: Value
    unit: str  # "bytes", "s", "count", "text", "flag", "object", ...: what a number counts
    meaning: str  # one line: docs/results.md's table says exactly this
    null: bool = False  # null is a value it may take
    keys: tuple[Key, ...] = ()  # an object's own keys (nothing else is written there)
    each: Value | None = None  # a list's items, or a map's values (an object without keys)


def _window(end: str, meaning: str) -> Key:
    """One side of a counter window (``agent.counters.window``, ``codec.counters``)."""
    return Key(end, Value.OBJECT, "object", meaning, null=True, keys=(
        Key("interfaces", Value.OBJECT, "object",
            "per IP interface, counter name -> count moved (bytes, packets, ...)",
            each=Value.OBJECT),
        Key("rdma", Value.OBJECT, "object",
            "per RDMA port (DEVICE/PORT), counter name -> count moved", each=Value.OBJECT),
        Key("tcp_retrans", Value.COUNT, "count",
            "the host's TCP retransmissions over the window (null: not counted)", null=True),
        Key("shared", Value.FLAG, "flag",
            "another probe ran on that host in the same window: not this path's alone"),
        Key("rdma_ports_read", Value.COUNT, "count", "RDMA ports whose counters were read"),
        Key("truncated", Value.FLAG, "flag", "the agent left counters out (too many)"),
    ))  # fmt: skip


def _pingpong_side(end: str) -> Key:
    return Key(end, Value.OBJECT, "object", f"the {end} end's ping-pong phase", keys=(
        Key("tcp_retrans", Value.COUNT, "count", "TCP retransmissions during the ping-pong"),
        Key("tx_packets", Value.COUNT, "count", "packets its busiest interface sent"),
    ))  # fmt: skip


def _window_s(phase: str, meaning: str) -> Key:
    return Key(phase, Value.LIST, "s", meaning, each=Value.NUMBER)


# The responder's half of an RDMA probe (``transports/rdma/responder.py``: rdma.connected)
_PEER = (
    Key("node", Value.TEXT, "text", "the responding agent's node"),
    Key("device", Value.TEXT, "text", "its RDMA device"),
    Key("port", Value.COUNT, "count", "its device port"),
    Key("gid_index", Value.COUNT, "count", "its GID table index"),
    Key("gid_type", Value.TEXT, "text", "its GID's type (RoCEv2, RoCEv1, IB)"),
    Key("active_mtu_bytes", Value.COUNT, "bytes", "its port's active MTU"),
    Key("qp_timeout", Value.COUNT, "exponent", "its QP's retry timeout (4.096 us x 2^N)"),
    Key("pingpong_loop", Value.TEXT, "text", "the ping-pong loop it ran (compiled or Python)"),
)

KEYS: tuple[Key, ...] = (
    # -- every path the coordinator measured (run/pairprobe.py, run/phaserun.py) ---------------
    Key("initiator", Value.TEXT, "text",
        "the endpoint whose agent ran the probe's initiating side"),
    Key("forward_hops", Value.COUNT, "count",
        "IP hops from the initiator to the responder, as the responder saw them (`hops`: "
        "the way back)"),
    Key("counters", Value.OBJECT, "object",
        "host counters moved during the probe, both ends (both phases' windows as one)",
        keys=(
            _window("src", "the initiating end's window (null: it did not count)"),
            _window("dst", "the responding end's window (null: it did not count)"),
            Key("probe_bytes", Value.COUNT, "bytes", "what the plan moved: both phases' payload"),
        )),
    Key("pingpong_counters", Value.OBJECT, "object",
        "the ping-pong phase's own counts, which the loss evidence judges TCP by",
        keys=(_pingpong_side("src"), _pingpong_side("dst"))),
    Key("carried_by", Value.OBJECT, "object",
        "which NIC carried the probe, by the counters (null: the path has no counters)",
        null=True, keys=(
            Key("src", Value.TEXT, "text",
                "the initiating end's interface or DEV/PORT (null: none found)", null=True),
            Key("dst", Value.TEXT, "text",
                "the responding end's interface or DEV/PORT (null: none found)", null=True),
            Key("problem", Value.TEXT, "text",
                "not the intended NIC, or too few bytes on any (null: none)", null=True),
        )),
    Key("phase_windows_s", Value.OBJECT, "object",
        "when each of the path's requests ran, from the run's start", keys=(
            _window_s("pingpong", "the ping-pong request: [start, end]"),
            _window_s("bulk", "the bulk request: [start, end]"),
            _window_s("probe", "the one request of both phases (unaligned, --no-bulk): "
                      "[start, end]"),
        )),
    Key("bulk_wave_pairs", Value.COUNT, "count", "bulk pairs that shared the path's bulk wave"),
    Key("incast_readers", Value.COUNT, "count", "readers of the path's incast bulk wave"),
    Key("bulk_pairs", Value.TEXT, "text",
        "why the path has no bulk reads: not selected by --bulk-pairs (its coverage)"),
    Key("pending", Value.TEXT, "text",
        "the phase still to run when the run stopped (\"bulk\"): --resume measures it"),
    # -- a TCP probe (transports/tcp.py) -------------------------------------------------------
    Key("tcp_nodelay", Value.FLAG, "flag", "TCP_NODELAY was set on the probe's connection"),
    Key("size_bytes", Value.COUNT, "bytes", "the ping-pong message size"),
    # -- a fetch profile's bulk phase (transports/tcp_fetch.py, transports/rdma/fetch.py) ------
    Key("fetch", Value.OBJECT, "object", "the fetch profile as it ran (--fetch-profile)", keys=(
        Key("profile", Value.TEXT, "text", "the profile's name"),
        Key("slice_bytes", Value.LIST, "bytes", "per chunk size, its slices' size",
            each=Value.COUNT),
        Key("slices_per_chunk", Value.LIST, "count", "per chunk size, slices per chunk",
            each=Value.COUNT),
        Key("slices_in_flight", Value.COUNT, "count", "slice reads outstanding per connection"),
        Key("round_trips", Value.LIST, "count", "per chunk size, sequential waves per chunk",
            each=Value.COUNT),
        Key("connections_used", Value.LIST, "count",
            "per chunk size, connections (TCP) or QPs (RDMA) used", each=Value.COUNT),
        Key("reads_in_flight_per_qp", Value.COUNT, "count",
            "RDMA: READs outstanding per QP (capped by max_rd_atomic)"),
        Key("loop", Value.TEXT, "text", "RDMA: the loop that ran the fetch"),
    )),
    # -- an RDMA probe (transports/rdma/transport.py, pingpong.py) -----------------------------
    Key("device", Value.TEXT, "text", "the initiator's RDMA device"),
    Key("port", Value.COUNT, "count", "its device port"),
    Key("gid_index", Value.COUNT, "count", "its GID table index"),
    Key("gid", Value.TEXT, "text", "its GID"),
    Key("gid_type", Value.TEXT, "text", "its GID's type (RoCEv2, RoCEv1, IB)"),
    Key("gid_reason", Value.TEXT, "text", "why that GID was chosen"),
    Key("link_layer", Value.TEXT, "text", "the port's link layer (Ethernet, InfiniBand)"),
    Key("lid", Value.COUNT, "count", "the port's LID (InfiniBand; 0 on Ethernet)"),
    Key("active_mtu_bytes", Value.COUNT, "bytes", "the port's active MTU"),
    Key("path_mtu_bytes", Value.COUNT, "bytes", "the QP's path MTU"),
    Key("max_rd_atomic", Value.COUNT, "count", "READs the QP may have outstanding"),
    Key("qp_timeout", Value.COUNT, "exponent",
        "the QP's retry timeout (4.096 us x 2^N): what a retry error was measured under"),
    Key("bulk_depth_cap", Value.COUNT, "count", "the deepest bulk depth the QP allows"),
    Key("bulk_depth_effective", Value.OBJECT, "object",
        "per asked depth (its decimal text), the depth the bulk reads ran at", each=Value.COUNT),
    Key("pyverbs_version", Value.TEXT, "text", "pyverbs' version (null: unknown)", null=True),
    Key("pyverbs_location", Value.TEXT, "text", "where pyverbs was imported from"),
    Key("peer_qpn", Value.COUNT, "count", "the responder's QP number"),
    Key("pingpong_method", Value.TEXT, "text", "how the ping-pong is timed, in words"),
    Key("pingpong_inline", Value.FLAG, "flag", "the ping-pong message was sent inline"),
    Key("inline_bytes", Value.COUNT, "bytes", "the QP's inline data limit"),
    Key("signal_every", Value.COUNT, "count", "ping-pong writes per signalled completion"),
    Key("pingpong_loop", Value.TEXT, "text", "the ping-pong loop that ran (compiled or Python)"),
    Key("pingpong_user_cpu_ns_per_round", Value.COUNT, "ns",
        "the initiator's user CPU time per round trip (it busy-polls: about the RTT)"),
    Key("pingpong_sys_cpu_ns_per_round", Value.COUNT, "ns",
        "the initiator's system CPU time per round trip (the loop's syscalls, abort checks)"),
    Key("responder_rounds", Value.INTEGER, "count",
        "ping-pong rounds the responder saw (-1: it stopped early)"),
    Key("peer", Value.OBJECT, "object", "the responder's side of the probe", keys=_PEER),
)  # fmt: skip

DETAILS: Mapping[str, Key] = {k.name: k for k in KEYS}


def walk(keys: tuple[Key, ...] = KEYS, prefix: str = "") -> Iterator[tuple[str, Key]]:
    """Every key with its dotted name (``counters.src.tcp_retrans``), parents first."""
    for key in keys:
        name = f"{prefix}{key.name}"
        yield name, key
        yield from walk(key.keys, f"{name}.")


def unregistered(details: Mapping[str, object], keys: tuple[Key, ...] = KEYS) -> list[str]:
    """The dotted names of keys in ``details`` (and in the objects whose keys the registry
    lists) that the registry does not list."""
    known = {k.name: k for k in keys}
    out: list[str] = []
    for name, value in details.items():
        key = known.get(name)
        if key is None:
            out.append(name)
        elif key.keys and isinstance(value, Mapping):
            out += [f"{name}.{n}" for n in unregistered(value, key.keys)]
    return out


def type_text(key: Key) -> str:
    """A key's type in words: ``array of number``, ``object or null``."""
    text = key.value.value
    if key.each is not None:
        text += f" of {key.each.value}"
    return f"{text} or null" if key.null else text


def docs_table() -> str:
    """docs/results.md's table of details keys: key (dotted), type, unit, meaning."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| key | type | unit | meaning |", "|---|---|---|---|"]
    for name, key in walk():
        lines.append(f"| `{name}` | {cell(type_text(key))} | {key.unit} | {cell(key.meaning)} |")
    return "\n".join(lines)
