"""Fetch profiles: a KV chunk fetched the way a connector fetches it (docs/fanin.md); and
connectors: the serial round trips each costs a chunk, for the one TTFT model
(docs/workload.md).

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

from netqual.model.ttft import Loader

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


# -- connectors: the serial round trips each costs a chunk (the one TTFT model) ----------


@dataclass(frozen=True)
class Connector:
    """How one connector configuration fetches cached KV, for the TTFT model
    (``netqual.model.ttft``, docs/workload.md "Connectors"): the round trips it makes one
    after another on a request's critical path, per chunk and per layer of a chunk, and
    per request and per layer of a request, whether a node's requests queue behind each
    other's (``loader``), and the fetch profile that measures its access pattern (None:
    it uses no network). Per chunk it pays ``round_trips_per_chunk(layers, chunks)``."""

    name: str
    profile: str | None
    per_chunk: float = 0.0
    per_chunk_per_layer: float = 0.0
    per_request: float = 0.0
    per_request_per_layer: float = 0.0
    loader: Loader = Loader.SERIAL
    source: str = ""

    def round_trips_per_chunk(self, layers: int, chunks: int) -> float:
        """Serial round trips per chunk of a request of ``chunks`` chunks: the per-request
        ones spread over its chunks."""
        per_request = self.per_request + self.per_request_per_layer * layers
        return self.per_chunk + self.per_chunk_per_layer * layers + per_request / max(1, chunks)


DEFAULT_CONNECTOR = "lmcache"

CONNECTORS: dict[str, Connector] = {
    c.name: c
    for c in (
        Connector(
            "lmcache", "lmcache", per_chunk=1,
            source="LMCache synchronous retrieve, chunk_size 256, use_layerwise false (the "
            "defaults, lmcache/v1/config.py): one object per chunk with all its layers' K "
            "and V (cache_engine.py _process_tokens_internal -> batched_get); the lm:// "
            "connector answers one get at a time on one socket (lm_connector.py "
            "LMCServerConnector.get): one round trip and the bytes per chunk",
        ),
        Connector(
            "lmcache-layerwise", "lmcache", per_chunk_per_layer=1,
            source="LMCache use_layerwise over a connector that answers one key at a time "
            "(lm://): a chunk key is split per layer, K and V in one object per layer "
            "(cache_engine.py retrieve_layer, key.split_layers), one layerwise_batched_get "
            "per layer (storage_manager.py): layers round trips per chunk, one after "
            "another. Measured like lmcache; the model adds the further round trips",
        ),
        Connector(
            "lmcache-mooncake", "mooncake", per_request=2,
            source="LMCache MooncakestoreConnector._batch_get_into: one batch_get_into for "
            "all chunks of a request; Mooncake RealClient::batch_get_into_internal = "
            "BatchQuery (one master RPC) and one BatchGet transfer wave: 2 per request",
        ),
        Connector(
            "vllm-mooncake-store", "mooncake", per_request=2,
            source="vLLM MooncakeStoreConnector: KVCacheStoreRecvingThread._handle_request "
            "(mooncake/store/worker.py) one batch_get_into_multi_buffers per request, one "
            "receiving thread per worker: 2 per request",
        ),
        Connector(
            "vllm-nixl", "nixl", per_request=1, loader=Loader.PARALLEL,
            source="vLLM NixlConnector start_load_kv / _read_blocks: one prepped READ with "
            "every block descriptor of a request per remote rank, posted without blocking "
            "and polled each step: 1 per request, requests overlap",
        ),
        Connector(
            "vllm-offloading-cpu", None, loader=Loader.PARALLEL,
            source="vLLM OffloadingConnector (offloading/worker.py submit_load): GPU <-> host "
            "DRAM copies; no network round trip (not a remote offload)",
        ),
        Connector(
            "sglang-hicache-mooncake", "sglang-hicache", per_request=2,
            source="SGLang HiCache: storage I/O in batches of storage_batch_size = 128 pages "
            "(managers/cache_controller.py), each a Mooncake batch get (2): 2 per request "
            "of up to 128 pages",
        ),
    )
}  # fmt: skip


def connector(name: str) -> Connector:
    """The connector called ``name``; KeyError names the known ones."""
    try:
        return CONNECTORS[name]
    except KeyError:
        raise KeyError(f"unknown connector {name!r} (known: {', '.join(CONNECTORS)})") from None
