"""Measurement integrity: TCP ping-pong replies and bulk chunks bound to the session key.

The control frames are MAC'd (``netqual.agent.wire.protocol``), but the timed traffic is raw
bytes on the same socket. Without a check, anything on the path (a proxy at the node's address that
relays the authenticated handshake) could answer the echoes itself and make a slow path
look fast. Everything here is computed before or after the timed loop, never inside it:

* **Ping-pong.** Every ping starts with a fresh random *challenge* (the initiator's, ``w``
  bytes). Every reply starts with the responder's tag for the round instead: a keystream
  of the session key and a per-request nonce (SHAKE-256). A forger answering any round
  itself must guess its ``w`` tag bytes (``P(miss) = 2**(-8*w*k)`` for ``k`` forged
  rounds), so hiding a slow tail by answering only the slowest rounds fails as surely as
  answering them all (docs/security.md, "Tail forgery"). After the loop the initiator
  checks every reply head, and both ends compare a digest of the challenges as sent with
  one as received, over the MAC'd channel: a forger that fetches tags early with pings of
  its own is caught there. The responder lays its replies out like the initiator's pings
  (``Rounds``: its tags, reversed) and receives each ping where its challenge stays, so
  it copies nothing per round: the windows for the next round are cut right after a
  reply is sent, off the round trip's critical path.
* **Bulk.** Each read request is a random challenge; each chunk carries the responder's
  tag for its index in its first and its last ``w`` bytes, so a chunk is only complete
  once its last byte really came from the node. The same end-of-cell exchange compares
  the requests sent with those received.

The initiator lays its messages out in preallocated buffers (``Rounds``) and slices them
outside its timed section. The bytes after a round's challenge are the *previous*
rounds' (already on the wire), never a later round's.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import struct

import numpy as np

from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel, Message
from netqual.base.errors import ProbeError, ProtocolError

log = logging.getLogger("netqual.agent")

TAG_BYTES = 8
NONCE_BYTES = 16
_LABEL = b"netqual-measure-v1"


class IntegrityFailure(ProbeError):
    """The measured traffic did not come from (or did not reach) the authenticated peer."""


def tag_width(message_bytes: int) -> int:
    """Bytes of challenge/tag per message: 8, or the whole message when it is smaller."""
    return min(TAG_BYTES, message_bytes)


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def keystream(key: bytes, what: bytes, nonce: bytes, nbytes: int) -> bytes:
    """``nbytes`` of SHAKE-256(key, what, nonce): the responder's tags for one request."""
    h = hashlib.shake_256()
    for part in (_LABEL, key, what, nonce):
        h.update(struct.pack("!H", len(part)) + part)
    return h.digest(nbytes)


def miss_probability(width: int, forged_rounds: int) -> float:
    """The chance that ``forged_rounds`` replies forged without the key all pass: each must
    guess ``width`` keyed bytes (every round is tagged)."""
    return 2.0 ** (-8 * width * forged_rounds) if width else 1.0


def responder_tags(key: bytes, what: bytes, nonce: bytes, count: int, width: int) -> bytes:
    """The responder's side of a ping-pong, before its loop: every round's tag (round r's
    at ``r * width``)."""
    return keystream(key, what, nonce, count * width)


def check_replies(
    key: bytes, what: bytes, nonce: bytes, challenges: bytes, received: bytes, count: int
) -> int:
    """The initiator's side, after its loop: how many of the reply heads in ``received``
    (``width`` bytes per round, as ``challenges``) do not carry the responder's tag for
    their round. The challenges themselves the responder must say it received
    (``check_end``)."""
    w = len(challenges) // count if count else 0
    if not w:
        return 0
    return mismatches(received, keystream(key, what, nonce, len(challenges)), w)


def digest(data: bytes | bytearray | memoryview) -> str:
    """What the two ends compare after a loop (it travels in a MAC'd frame)."""
    return hashlib.sha256(data).hexdigest()


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def reversed_blocks(data: bytes | bytearray | memoryview, width: int) -> bytes:
    """Blocks of ``width`` bytes in reverse order (the send layout of ``Rounds``)."""
    if not data:
        return b""
    return np.frombuffer(data, dtype=np.uint8).reshape(-1, width)[::-1].tobytes()


class Rounds:
    """Per-round messages of ``size`` bytes whose first ``width`` bytes are round i's block.

    Outgoing: ``buf`` holds the blocks in *reverse* order then ``size`` zero bytes; round i
    sends the window at ``(count - 1 - i) * width``, so what follows its block is earlier
    rounds' blocks and zeros. Incoming: round i is received into the window at
    ``i * width`` of ``buf``; the next round overwrites all but the first ``width`` bytes,
    so after the loop ``blocks()`` are the first ``width`` bytes of every message.
    """

    def __init__(self, count: int, size: int, blocks_in_order: bytes | None = None) -> None:
        self.count, self.size, self.width = count, size, tag_width(size)
        n = count * self.width
        self.buf = bytearray(n + size)
        if blocks_in_order is not None:
            self.buf[:n] = reversed_blocks(blocks_in_order, self.width)
        self.view = memoryview(self.buf)

    def send_window(self, i: int) -> memoryview:
        o = (self.count - 1 - i) * self.width
        return self.view[o : o + self.size]

    def recv_window(self, i: int) -> memoryview:
        o = i * self.width
        return self.view[o : o + self.size]

    def received(self) -> bytes:
        """The first ``width`` bytes of every message received, in round order."""
        return bytes(self.buf[: self.count * self.width])


def mismatches(got: bytes, want: bytes, width: int) -> int:
    """How many ``width``-byte blocks differ between ``got`` and ``want`` (equal lengths)."""
    if got == want:
        return 0
    a = np.frombuffer(got, dtype=np.uint8).reshape(-1, width)
    b = np.frombuffer(want, dtype=np.uint8).reshape(-1, width)
    return int(np.count_nonzero((a != b).any(axis=1)))


def failure(what: str, peer: str, bad: int, total: int, requests_match: bool) -> str | None:
    """The integrity reason for one loop, or None when it checked out."""
    problems = []
    if bad:
        problems.append(f"{bad} of {total} {what} did not carry {peer}'s session-key tag")
    if not requests_match:
        problems.append(f"what {peer} received differs from what was sent")
    if not problems:
        return None
    return (
        f"measurement integrity check failed: {'; '.join(problems)} (something on the path "
        "answered for the node or altered the traffic)"
    )


def check_end(
    ch: Channel,
    kind: str,
    deadline: float,
    sent: bytes,
    bad: int,
    total: int,
    what: str,
) -> None:
    """Initiator, after a loop: tell the responder what was sent and whether its tags
    checked out (it logs a failure too); compare with what it says it received."""
    ch.set_deadline(deadline)
    reply = ch.request(kind, {"sent": digest(sent), "tags_ok": bad == 0})
    received = Fields(reply, kind, ch.peer).string("received", 64)
    problem = failure(what, ch.peer, bad, total, same(received, digest(sent)))
    if problem is not None:
        raise IntegrityFailure(problem)


def answer_end(
    ch: Channel, kind: str, received: bytes, what: str, msg: Message | None = None
) -> None:
    """Responder, after a loop: compare what arrived with what the initiator says it sent;
    log a mismatch (or the initiator's failed tag check), answer with what arrived.
    ``msg``: the initiator's message when the caller already read it."""
    msg = msg if msg is not None else ch.recv()
    f = Fields(msg.body, kind, ch.peer)
    if msg.kind != kind:
        raise ProtocolError(ch.peer, f"expected {kind!r} after the {what}, got {msg.kind[:40]!r}")
    mine = digest(received)
    problems = []
    if not same(f.string("sent", 64), mine):
        problems.append("the requests received differ from those the initiator sent")
    if not f.flag("tags_ok"):
        problems.append("the initiator got replies without this agent's tags")
    if problems:
        log.warning(
            "session %s: %s integrity check failed: %s (something on the path answered for "
            "this agent or altered the traffic)",
            ch.peer, what, "; ".join(problems),
        )  # fmt: skip
    ch.send("ok", {"received": mine})
