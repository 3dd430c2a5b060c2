"""``netqual inventory from-hosts``: an MPI/pdsh-style hostfile.

One host (or hostlist expression such as ``gpu[01-04]``) per line, then optional
``key=value`` fields: ``role=``, ``rack=``, ``site=``, ``port=``. MPI's ``slots=`` and
``max_slots=`` are accepted and ignored, so an existing MPI hostfile works as it is.
``#`` starts a comment. Every host name is resolved once, here, so a typo fails now
with its line instead of as an unreachable path later.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path

from netqual.base.choices import ChoiceError, parse_choice
from netqual.base.errors import InputError
from netqual.model.node import DEFAULT_PORT, Node, Role
from netqual.planning.launch.draft import (
    DEFAULT_MAX_NODES,
    Draft,
    check_name,
    check_node_count,
    check_unique,
)
from netqual.planning.launch.hostlists import expand

_IGNORED = {"slots", "max_slots", "max-slots"}
_FIELDS = {"role", "rack", "site", "port"}

Resolver = Callable[[str], str]


def resolve(host: str) -> str:
    """The host's address (IPv4 preferred); an IP literal is returned as it is."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0])


def _fields(tokens: list[str], source: str, where: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not value:
            raise InputError(source, f"expected key=value, got {token!r}", where)
        if key in _IGNORED:
            continue
        if key not in _FIELDS:
            allowed = ", ".join(sorted(_FIELDS | _IGNORED))
            raise InputError(source, f"unknown field {key!r} (allowed: {allowed})", where)
        fields[key] = value
    return fields


def _port(text: str | None, default: int, source: str, where: str) -> int:
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise InputError(source, f"port must be 1..65535, got {text!r}", where)
    return int(text)


def _role(text: str | None, source: str, where: str) -> Role:
    try:
        return parse_choice(Role, text or Role.ANY.value, where)
    except ChoiceError as err:
        raise InputError(source, err.problem, err.where) from None


def from_hosts(
    path: Path,
    port: int = DEFAULT_PORT,
    token_file: str | None = None,
    resolver: Resolver | None = resolve,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Draft:
    """Read a hostfile; ``resolver=None`` keeps host names as addresses (resolved later)."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(source, f"cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise InputError(source, "not UTF-8 text") from err
    nodes: list[Node] = []
    where: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        tokens = raw.split("#", 1)[0].split()
        if not tokens:
            continue
        line = f"line {lineno}"
        fields = _fields(tokens[1:], source, line)
        role = _role(fields.get("role"), source, line)
        node_port = _port(fields.get("port"), port, source, line)
        labels = {"site": fields["site"]} if "site" in fields else {}
        hosts = expand(tokens[0], source, line)
        check_node_count(len(nodes) + len(hosts), max_nodes, source, line)  # before resolving
        for host in hosts:
            check_name(host, source, line)
            address = host
            if resolver is not None:
                try:
                    address = resolver(host)
                except OSError as err:
                    raise InputError(
                        source, f"host {host!r} does not resolve: {err.strerror or err}", line
                    ) from err
            nodes.append(Node(host, address, node_port, role, fields.get("rack"), labels))
            where.append(line)
    if not nodes:
        raise InputError(source, "no hosts (every line is empty or a comment)")
    check_unique(nodes, source, where)
    return Draft(tuple(nodes), f"hostfile {source}", port, token_file)
