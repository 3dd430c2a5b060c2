"""Slurm hostlist expressions (``gpu[01-64],stor[1-8]``), expanded by python-hostlist."""

from __future__ import annotations

import hostlist

from netqual.base.errors import InputError


def expand(expr: str, source: str, field: str | None) -> list[str]:
    """Every host of ``expr`` in order; an empty or malformed expression is an InputError."""
    try:
        hosts = [str(h) for h in hostlist.expand_hostlist(expr.strip())]
    except hostlist.BadHostlist as err:
        raise InputError(source, f"bad hostlist expression {expr!r}: {err}", field) from err
    if not hosts:
        raise InputError(source, f"hostlist expression {expr!r} names no host", field)
    return hosts
