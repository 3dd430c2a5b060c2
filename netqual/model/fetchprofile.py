"""Fetch profiles: a KV chunk fetched the way a connector fetches it (docs/fanin.md).

A profile is data: how a chunk is cut into slices, how many slices are outstanding, in how
many sequential round trips, and how many ranks of one compute node fetch at once. The
chunk size itself is the run's (``--chunk``, or the workload's chunk): a profile is an
access pattern, not a model. Every number below cites where it comes from; where a
connector's number depends on the model (a block descriptor's bytes), the profile takes
a stated example and docs/fanin.md says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Whole-chunk reads one at a time: today's bulk probe at depth 1.
PLAIN = "plain"


@dataclass(frozen=True)
class FetchProfile:
    name: str
    slice_bytes: int | None  # None: the whole chunk is one read
    slices_in_flight: int  # outstanding slice reads per connection
    connections: int  # connections (TCP) or QPs (RDMA) per endpoint, as the connector opens
    round_trips: int  # sequential waves per chunk: wave n+1 is asked after wave n arrived
    ranks: int  # ranks of one compute node fetching at once (TP ranks, each its own shard)
    ranks_in_step: bool  # the slowest rank's chunk decides (SGLang all_reduce(min))
    source: str  # where the numbers come from

    def slices(self, chunk_bytes: int) -> tuple[int, int]:
        """(slice bytes, slices per chunk): the chunk rounded up to whole slices."""
        size = chunk_bytes if self.slice_bytes is None else min(self.slice_bytes, chunk_bytes)
        return size, -(-chunk_bytes // size)

    def waves(self, chunk_bytes: int) -> int:
        """Sequential waves of one chunk: never more than it has slices."""
        return min(self.round_trips, self.slices(chunk_bytes)[1])

    def fetched_bytes(self, chunk_bytes: int) -> int:
        """Bytes one chunk's slices read (the chunk rounded up to whole slices)."""
        size, count = self.slices(chunk_bytes)
        return size * count

    def connections_for(self, chunk_bytes: int) -> int:
        """Connections or QPs one chunk uses: never more than it has slices."""
        return min(self.connections, self.slices(chunk_bytes)[1])

    def used(self, chunks_bytes: tuple[int, ...], connections: int) -> dict[str, Any]:
        """``details.fetch`` of a probe that ran this profile with ``connections`` open
        (TCP connections or RDMA QPs): what each chunk size was cut into."""
        return {
            "profile": self.name,
            "slice_bytes": [self.slices(c)[0] for c in chunks_bytes],
            "slices_per_chunk": [self.slices(c)[1] for c in chunks_bytes],
            "slices_in_flight": self.slices_in_flight,
            "round_trips": [self.waves(c) for c in chunks_bytes],
            "connections_used": [min(connections, self.slices(c)[1]) for c in chunks_bytes],
        }


def wave_sizes(slices: int, waves: int) -> list[int]:
    """``slices`` split into ``waves`` sequential groups, the first ones one larger (also
    how a chunk's slices are dealt out among connections or QPs)."""
    return [slices // waves + (1 if i < slices % waves else 0) for i in range(waves)]


PROFILES: dict[str, FetchProfile] = {
    p.name: p
    for p in (
        FetchProfile(
            PLAIN, None, 1, 1, 1, 1, False,
            "netqual's own bulk probe: one request, one whole chunk back, one at a time",
        ),
        FetchProfile(
            "mooncake", 64 * 1024, 64, 2, 1, 8, False,
            "Mooncake transfer engine GlobalConfig (mooncake-transfer-engine/include/"
            "config.h): slice_size 65536, num_qp_per_ep 2, max_wr 256 (netqual keeps at "
            "most 64 slices outstanding: the agents' max_depth); a batch transfer posts "
            "every slice of the chunk at once; TP8: one transfer per rank",
        ),
        FetchProfile(
            "lmcache", None, 1, 1, 1, 8, False,
            "LMCache config chunk_size 256 tokens (default): a remote backend stores and "
            "gets one object per chunk, one get at a time per worker; each TP worker runs "
            "its own engine (TP8: 8 ranks). Give the chunk as 256 tokens' bytes per rank",
        ),
        FetchProfile(
            "nixl", 8 * 1024, 64, 1, 1, 8, False,
            "vLLM NixlConnector: the decode side pulls with one RDMA READ per block "
            "descriptor (one layer of one block_size=16-token block per rank: 8 KiB for a "
            "70B-class model at TP8, K and V x 1 KV head x 128 x 2 bytes x 16 tokens), all "
            "descriptors of a request posted as one transfer; 8 ranks",
        ),
        FetchProfile(
            "sglang-hicache", None, 1, 1, 1, 8, True,
            "SGLang HiCache: 64-token pages from the storage backend, the usable hit length "
            "agreed across TP ranks with all_reduce(min), so the slowest rank's page sets "
            "it. Give the chunk as one 64-token page's bytes per rank",
        ),
    )
}  # fmt: skip


def profile(name: str) -> FetchProfile:
    """The profile called ``name``; KeyError names the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown fetch profile {name!r} (known: {', '.join(PROFILES)})") from None
