"""``details.counters`` as JSON <-> ``model.counters`` records (docs/evidence.md).

The one reader of counter windows: a results file may come from anywhere, so every value
is taken only when it has the right type (a count is a non-negative integer; anything
else reads as absent), never trusted. The agents' strict wire check is
``agent.counters.checked_window``; this is what the rules read afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netqual.model.counters import CounterWindow, PathCounters

GROUPS = ("interfaces", "rdma")


def _count(value: object) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None  # type: ignore[return-value]


def _table(value: object) -> dict[str, dict[str, int]]:
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, dict[str, int]] = {}
    for name, counts in value.items():
        if not isinstance(name, str) or not isinstance(counts, Mapping):
            continue
        out[name] = {
            str(k): n
            for k, v in counts.items()
            if isinstance(k, str) and (n := _count(v)) is not None
        }
    return out


def window(value: object) -> CounterWindow | None:
    """One side's window, or None when it is not an object."""
    if not isinstance(value, Mapping):
        return None
    return CounterWindow(
        interfaces=_table(value.get("interfaces")),
        rdma=_table(value.get("rdma")),
        tcp_retrans=_count(value.get("tcp_retrans")),
        shared=value.get("shared") is True,
        rdma_ports_read=_count(value.get("rdma_ports_read")) or 0,
        truncated=value.get("truncated") is True,
    )


def path_counters(details: Mapping[str, Any]) -> PathCounters | None:
    """``details.counters`` of a path, or None when it has none."""
    raw = details.get("counters")
    if not isinstance(raw, Mapping) or not raw:
        return None
    return PathCounters(
        src=window(raw.get("src")),
        dst=window(raw.get("dst")),
        probe_bytes=_count(raw.get("probe_bytes")) or 0,
    )


def window_to_dict(w: CounterWindow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "interfaces": {k: dict(v) for k, v in w.interfaces.items()},
        "rdma": {k: dict(v) for k, v in w.rdma.items()},
        "tcp_retrans": w.tcp_retrans,
        "shared": w.shared,
        "rdma_ports_read": w.rdma_ports_read,
    }
    if w.truncated:
        out["truncated"] = True
    return out


def _add(
    a: Mapping[str, Mapping[str, int]], b: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    return {
        name: {k: a.get(name, {}).get(k, 0) + b.get(name, {}).get(k, 0)
               for k in {**a.get(name, {}), **b.get(name, {})}}
        for name in {**a, **b}
    }  # fmt: skip


def merge_windows(a: CounterWindow | None, b: CounterWindow | None) -> CounterWindow | None:
    """Two phases' windows of one side as one (counts add up)."""
    if a is None or b is None:
        return a if a is not None else b
    retrans = (
        None
        if a.tcp_retrans is None and b.tcp_retrans is None
        else ((a.tcp_retrans or 0) + (b.tcp_retrans or 0))
    )
    return CounterWindow(
        interfaces=_add(a.interfaces, b.interfaces),
        rdma=_add(a.rdma, b.rdma),
        tcp_retrans=retrans,
        shared=a.shared or b.shared,
        rdma_ports_read=max(a.rdma_ports_read, b.rdma_ports_read),
        truncated=a.truncated or b.truncated,
    )
