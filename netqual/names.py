"""Node names and addresses: the rules every input (inventory, --name, peers) follows.

Names are the identity the control channel authenticates and they end up in reports,
CSV cells and terminal output, so they are restricted to a safe character set.
"""

from __future__ import annotations

import ipaddress
import re

# Node names (inventory ``name``, agent ``--name``): letters, digits and ``.-_:`` only.
NAME_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,255}")
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a usable node name, or None."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        return f"{name!r} is not a node name (1-255 of: letters, digits, '.', '-', '_', ':')"
    return None


def address_problem(address: object) -> str | None:
    """Why ``address`` is neither an IP literal nor a DNS host name, or None."""
    if not isinstance(address, str) or not 0 < len(address) <= 253:
        return "must be an IP address or host name"
    try:
        ipaddress.ip_address(address)
        return None
    except ValueError:
        pass
    if all(_HOST_LABEL.fullmatch(label) for label in address.rstrip(".").split(".")):
        return None
    return f"{address[:64]!r} is not an IP address or host name"


def printable(text: str, max_chars: int = 500) -> str:
    """A peer's free text made safe to log, print or store: printable, bounded."""
    cleaned = "".join(c if c.isprintable() else "?" for c in text[:max_chars])
    return cleaned + ("..." if len(text) > max_chars else "")
