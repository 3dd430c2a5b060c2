"""Node names and addresses: the rules every input (inventory, --name, peers) follows.

Names are the identity the control channel authenticates and they end up in reports,
CSV cells and terminal output, so they are restricted to a safe character set.
"""

from __future__ import annotations

import ipaddress
import logging
import re

# Node names (inventory ``name``, agent ``--name``): letters, digits and ``.-_:`` only.
NAME_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,255}")
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a usable node name, or None."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        # A long value is cut, so the reason still fits where it is shown (a peer may
        # send 5,000 characters).
        shown = repr(name)
        if isinstance(name, str) and len(name) > 60:
            shown = f"{name[:40]!r}... ({len(name):,} characters)"
        return f"{shown} is not a node name (1-255 of: letters, digits, '.', '-', '_', ':')"
    return None


# NIC names (inventory ``nics``): a Linux interface name (IFNAMSIZ 16 with the NUL) and an
# RDMA device name; no '/' or ':' so "NODE/NIC" reads back unambiguously.
NIC_NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,15}")
DEVICE_NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")


def nic_name_problem(name: object, device: bool = False) -> str | None:
    """Why ``name`` is not an interface (or, ``device``, an RDMA device) name, or None."""
    pattern = DEVICE_NAME_PATTERN if device else NIC_NAME_PATTERN
    if not isinstance(name, str) or not pattern.fullmatch(name):
        what = "an RDMA device name (1-64" if device else "an interface name (1-15"
        return f"{printable(repr(name), 60)} is not {what} of: letters, digits, '.', '-', '_')"
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


# Any character outside printable ASCII is looked at one by one (str.isprintable is the
# fast path for the common all-printable case).
_SUSPECT = re.compile(r"[^ -~]")
_SUSPECT_KEEP_LINES = re.compile(r"[^ -~\n]")


def _shown(match: re.Match[str]) -> str:
    c = match.group()
    if c.isprintable():
        return c
    code = ord(c)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` with every character that could act on a terminal, a log line or an XML
    parser (controls, ESC, bidi overrides, line and paragraph separators, surrogates)
    replaced by its escape (``\\x1b``, ``\\u202e``), so it reads literally and forges nothing.

    The one rule for text from a peer or a file; ``newlines`` keeps line breaks (a
    renderer's own, in multi-line text it assembled)."""
    if text.isprintable():
        return text
    return (_SUSPECT_KEEP_LINES if newlines else _SUSPECT).sub(_shown, text)


def printable(text: str, max_chars: int = 500) -> str:
    """A peer's free text made safe to log, print or store: visible, bounded."""
    return visible(text[:max_chars]) + ("..." if len(text) > max_chars else "")


class LiteralFormatter(logging.Formatter):
    """Log lines with the message shown literally: a peer's text cannot forge a line
    (U+2028, CR, LF) or act on the terminal reading the log. Tracebacks keep their lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = visible(record.message)
        return super().formatMessage(record)


def is_loopback(address: str) -> bool:
    """An address on this host's loopback (127.0.0.0/8, ::1, "localhost")."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"
