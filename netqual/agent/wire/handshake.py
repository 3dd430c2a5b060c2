"""Mutual authentication bound to identity, and the per-session keys that follow.

1. agent -> ``hello`` {protocol, agent (its ``--name``), version, auth, nonce_s}
2. client -> ``auth`` {nonce (nonce_c), name (the node it dialled), mac}
   mac = HMAC-SHA256(token, transcript("client"))
3. agent -> ``welcome`` {mac: HMAC-SHA256(token, transcript("server"))}

transcript(role) = label | protocol version | role | dialled name | nonce_s | nonce_c,
each field length-prefixed. The agent refuses a client whose dialled name is not its own
``--name``: a relay at another node's address, forwarding bytes to this agent, gets
nothing. Both MACs cover both nonces, so a recorded exchange cannot be replayed.

Then both sides derive two keys (one per direction) with HKDF-SHA256 (RFC 5869) from the
token, both nonces and the name; every later frame carries HMAC-SHA256(key, sequence
number | header | payload), see ``netqual.agent.wire.protocol``.

This module does no I/O: the agent drives the server side from its event loop, clients
and tests from a blocking ``Channel``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.agent.wire.messages import Fields
from netqual.base.errors import AuthError, ErrorCode, IdentityError, PeerError, ProtocolError

# 3: TCP probes carry challenges and the responder's session-key tags (measurement
# integrity), the probe request has a typed "options" field; a release speaking 2 gets a
# clear "run the same release" error instead of an integrity failure.
PROTOCOL_VERSION = 3
NONCE_BYTES = 32
MAC_BYTES = 32
AUTH_SCHEMES = ("hmac-sha256", "none")
_LABEL = b"netqual-auth-v2"
_KEY_INFO = b"netqual-frame-keys-v2"


@dataclass(frozen=True)
class SessionKeys:
    """HMAC keys for frames this side sends and frames it receives."""

    send: bytes
    recv: bytes


@dataclass(frozen=True)
class Hello:
    protocol: int
    agent: str
    version: str
    auth: str
    nonce: bytes

    def to_body(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "agent": self.agent,
            "version": self.version,
            "auth": self.auth,
            "nonce": self.nonce.hex(),
        }

    @classmethod
    def decode(cls, body: Mapping[str, Any], peer: str) -> Hello:
        f = Fields(body, "hello", peer)
        protocol = f.integer("protocol", 0, 255)
        if protocol != PROTOCOL_VERSION:
            raise ProtocolError(peer, protocol_mismatch(protocol))
        return cls(
            protocol=protocol,
            agent=f.name("agent"),
            version=f.string("version", 64),
            auth=f.choice("auth", AUTH_SCHEMES),
            nonce=f.hex("nonce", NONCE_BYTES),
        )


def protocol_mismatch(theirs: int) -> str:
    return (
        f"protocol version {theirs} on the other side, this netqual speaks protocol version "
        f"{PROTOCOL_VERSION}: run the same netqual release on the coordinator and every agent"
    )


def _field(data: bytes) -> bytes:
    return struct.pack("!H", len(data)) + data


def _transcript(role: bytes, name: str, server_nonce: bytes, client_nonce: bytes) -> bytes:
    parts = (_LABEL, struct.pack("!B", PROTOCOL_VERSION), role, name.encode(), server_nonce)
    return b"".join(_field(p) for p in (*parts, client_nonce))


def _mac(token: bytes, role: bytes, name: str, server_nonce: bytes, client_nonce: bytes) -> bytes:
    message = _transcript(role, name, server_nonce, client_nonce)
    return hmac.new(token, message, hashlib.sha256).digest()


def _hkdf(secret: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869): extract, then expand."""
    prk = hmac.new(salt, secret, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def derive_keys(
    token: bytes, name: str, server_nonce: bytes, client_nonce: bytes, *, server: bool
) -> SessionKeys:
    okm = _hkdf(token, server_nonce + client_nonce, _KEY_INFO + _field(name.encode()), 64)
    client_to_server, server_to_client = okm[:32], okm[32:]
    if server:
        return SessionKeys(send=server_to_client, recv=client_to_server)
    return SessionKeys(send=client_to_server, recv=server_to_client)


class ServerHandshake:
    """The agent's side: ``hello()`` to send, then ``answer(kind, body)`` for the reply."""

    def __init__(self, token: bytes | None, agent_name: str, version: str) -> None:
        self.token = token
        self.agent_name = agent_name
        self.nonce = secrets.token_bytes(NONCE_BYTES)
        self.hello = Hello(
            protocol=PROTOCOL_VERSION,
            agent=agent_name,
            version=version,
            auth="hmac-sha256" if token else "none",
            nonce=self.nonce,
        )

    def answer(
        self, kind: str, body: Mapping[str, Any], peer: str
    ) -> tuple[dict[str, Any], SessionKeys | None]:
        """The ``welcome`` body and the session keys (None when insecure).

        Raises AuthError, whose ``problem`` is both what the client is told and what the
        agent logs.
        """
        if kind != "auth":
            raise AuthError(peer, f"sent {kind[:40]!r} before authenticating")
        f = Fields(body, "auth", peer)
        client_nonce = f.hex("nonce", NONCE_BYTES)
        dialled = f.name("name")
        if dialled != self.agent_name:
            raise AuthError(
                peer,
                f"dialled as {dialled!r} but this agent is {self.agent_name!r} (a relay, or "
                "an inventory entry with another node's address)",
            )
        if self.token is None:
            return {"mac": ""}, None
        mac = f.hex("mac", MAC_BYTES)
        expected = _mac(self.token, b"client", dialled, self.nonce, client_nonce)
        if not hmac.compare_digest(expected, mac):
            raise AuthError(peer, "authentication failed: wrong token")
        proof = _mac(self.token, b"server", dialled, self.nonce, client_nonce)
        keys = derive_keys(self.token, dialled, self.nonce, client_nonce, server=True)
        return {"mac": proof.hex()}, keys


class ClientHandshake:
    """The client's side. ``expect_name``: the node dialled (None: whoever answers)."""

    def __init__(self, token: bytes | None, expect_name: str | None) -> None:
        self.token = token
        self.expect_name = expect_name
        self.nonce = secrets.token_bytes(NONCE_BYTES)
        self._hello: Hello | None = None
        self._name = ""

    def auth(self, hello_body: Mapping[str, Any], peer: str) -> tuple[Hello, dict[str, Any]]:
        """Check the agent's hello; return it and the ``auth`` body to send."""
        hello = Hello.decode(hello_body, peer)
        if hello.auth == "none" and self.token is not None:
            raise AuthError(
                peer,
                "agent runs without authentication (--insecure) but a token was given; "
                "restart the agent with a token, or drop the token here",
            )
        if hello.auth != "none" and self.token is None:
            raise AuthError(peer, "agent requires a token (--token-file or NETQUAL_TOKEN)")
        # The dialled name goes to the agent even when the hello names another node: the
        # agent refuses it and logs the refusal, so a relay shows up on both sides.
        name = self.expect_name or hello.agent
        self._hello, self._name = hello, name
        mac = b""
        if self.token is not None:
            mac = _mac(self.token, b"client", name, hello.nonce, self.nonce)
        return hello, {"nonce": self.nonce.hex(), "name": name, "mac": mac.hex()}

    def welcome(self, kind: str, body: Mapping[str, Any], peer: str) -> SessionKeys | None:
        """Check the agent's proof; return the session keys (None when insecure)."""
        assert self._hello is not None, "auth() first"
        f = Fields(body, kind, peer)
        if kind == "error":
            code = f.string("code", 40)
            message = f.text("message")
            if code == "busy":
                raise PeerError(peer, ErrorCode.BUSY, message)
            if self._hello.agent != self._name:
                raise IdentityError(peer, self._name, self._hello.agent, message)
            raise AuthError(peer, message)
        if kind != "welcome":
            raise ProtocolError(peer, f"expected 'welcome', got {kind[:40]!r}")
        if self._hello.agent != self._name:  # the agent accepted a name it did not announce
            message = f"expected agent {self._name!r}, {self._hello.agent!r} answered"
            raise IdentityError(peer, self._name, self._hello.agent, message)
        if self.token is None:
            return None
        mac = f.hex("mac", MAC_BYTES)
        expected = _mac(self.token, b"server", self._name, self._hello.nonce, self.nonce)
        if not hmac.compare_digest(expected, mac):
            raise AuthError(peer, "agent failed to prove it holds the token")
        return derive_keys(self.token, self._name, self._hello.nonce, self.nonce, server=False)
