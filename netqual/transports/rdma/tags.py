"""The RDMA ping-pong bound to the session key: TCP's scheme and rule
(``netqual.transports.integrity``) over RDMA WRITEs.

Each ping starts with the initiator's random challenge for the round (``width`` bytes: the
last byte of a message is the round's sequence byte). Every reply starts with the
responder's tag for its round (``marks`` lists every round: a forger of any round must
guess its tag; docs/security.md, "Tail forgery"). After the loop the initiator checks
every reply head, and the two ends compare the challenges as sent and as received over
the MAC'd control channel (``rdma.pingpong.end``), exactly as ``tcp.pingpong.end`` does.

Bulk READs take no responder CPU, so nothing can be computed per read: the responder's
bulk area holds keyed bytes instead (``fill_bulk``, once per probe), and after each cell
the initiator checks the first and last ``TAG_BYTES`` of every landing slot the cell
wrote (the last read that landed in each; ``BulkCheck``); a fetch profile's slices land
where they sit in the peer's area, and each slice's edges are checked against its part.
Something answering READs without the key fails; one that copied a real READ response can
replay it (the area does not change within a probe; docs/security.md says so).
"""

from __future__ import annotations

import ctypes
import dataclasses
import secrets

import numpy as np
import numpy.typing as npt

from netqual.agent.wire.protocol import Channel
from netqual.transports import integrity

WHAT = b"rdma.pingpong"
END = "rdma.pingpong.end"
BULK_WHAT = b"rdma.bulk"


def tag_width(size: int) -> int:
    """Challenge/tag bytes at the head of a message: the last byte is the round's sequence
    byte, so up to 8 of the others (none in a 1-byte message: nothing to tag)."""
    return integrity.tag_width(size - 1) if size > 1 else 0


@dataclasses.dataclass(frozen=True)
class Tags:
    """What one end copies per round. Initiator: ``blocks`` the challenges (round i's at
    ``i * width``), ``got`` receives every reply's head. Responder: ``blocks`` its tags,
    ``got`` receives the tagged rounds' challenges, ``marks`` the tagged rounds (every
    round) then a sentinel (the round count)."""

    width: int
    blocks: npt.NDArray[np.uint8]
    got: npt.NDArray[np.uint8]
    marks: npt.NDArray[np.uint32]
    bulk: bytes = b""  # responder: its bulk area's keyed content (``fill_bulk``)


def _key(ch: Channel, *, responder: bool) -> bytes:
    """As TCP's: an --insecure session has no key (the check only catches accidents)."""
    return ch.measurement_key(responder=responder) or b""


def for_initiator(count: int, size: int) -> Tags:
    """Fresh random challenges and room for every reply's head."""
    w = tag_width(size)
    challenges = np.frombuffer(bytearray(secrets.token_bytes(count * w)), dtype=np.uint8)
    got = np.zeros(count * w, dtype=np.uint8)
    return Tags(w, challenges, got, np.array([count], dtype=np.uint32))


def for_responder(ch: Channel, nonce: bytes, count: int, size: int, bulk_bytes: int) -> Tags:
    """This agent's tags for every round and the rounds that carry them, and its bulk
    area's keyed content, before the loop."""
    w = tag_width(size)
    key = _key(ch, responder=True)
    stream = integrity.responder_tags(key, WHAT, nonce, count, w)
    blocks = np.frombuffer(bytearray(stream), dtype=np.uint8)
    got = np.zeros(count * w, dtype=np.uint8)
    bulk = integrity.keystream(key, BULK_WHAT, nonce, bulk_bytes)
    return Tags(w, blocks, got, np.arange(count + 1, dtype=np.uint32), bulk)


def untagged(count: int, size: int) -> Tags:
    """Zero challenges and no tagged round: the loop alone (its unit tests)."""
    w = tag_width(size)
    zeros = np.zeros(count * w, dtype=np.uint8)
    return Tags(w, zeros, np.zeros(count * w, dtype=np.uint8), np.array([count], np.uint32))


def check(ch: Channel, tags: Tags, nonce: bytes, count: int, size: int, deadline: float) -> None:
    """Initiator, after the loop: every reply head checked, then the tagged rounds'
    challenges compared with the responder's; IntegrityFailure names the peer."""
    challenges = tags.blocks.tobytes()
    bad = integrity.check_replies(
        _key(ch, responder=False), WHAT, nonce, challenges, tags.got.tobytes(), count
    )
    integrity.check_end(ch, END, deadline, challenges, bad, count, "ping-pong replies")


def fill_bulk(tags: Tags, address: int) -> None:
    """Responder, before it answers ``rdma.connected``: its bulk area's keyed content."""
    ctypes.memmove(address, tags.bulk, len(tags.bulk))


class BulkCheck:
    """Initiator: the responder's bulk content as it must arrive, checked per cell."""

    def __init__(self, ch: Channel, nonce: bytes, nbytes: int) -> None:
        self.peer = ch.peer
        self.stream = integrity.keystream(_key(ch, responder=False), BULK_WHAT, nonce, nbytes)

    def _places(self, landing: int, chunk: int, slots: int, sliced: bool) -> list[tuple[int, int]]:
        """(address here, offset in the peer's area) of each place a cell's reads land:
        every slot holds the area's first ``chunk`` bytes; a fetch profile's slice i holds
        the area's i-th ``chunk`` bytes (``sliced``)."""
        return [(landing + s * chunk, s * chunk if sliced else 0) for s in range(slots)]

    def clear(self, landing: int, chunk: int, slots: int, *, sliced: bool = False) -> None:
        """Before a cell: zero the edges it will check (no earlier cell's bytes count)."""
        w = integrity.tag_width(chunk // 2)
        for address, _offset in self._places(landing, chunk, slots, sliced):
            ctypes.memset(address, 0, w)
            ctypes.memset(address + chunk - w, 0, w)

    def problem(
        self, landing: int, chunk: int, slots: int, *, sliced: bool = False, what: str = ""
    ) -> str | None:
        """After a cell: the integrity reason when a place's edges are not the keyed bytes."""
        w = integrity.tag_width(chunk // 2)
        if not w:
            return None
        bad = sum(
            ctypes.string_at(address, w) != self.stream[offset : offset + w]
            or ctypes.string_at(address + chunk - w, w)
            != self.stream[offset + chunk - w : offset + chunk]
            for address, offset in self._places(landing, chunk, slots, sliced)
        )
        return integrity.failure(what or "bulk reads checked", self.peer, bad, slots, True)
