"""A serving workload: how many KV bytes one chunk is, and what fetching it must beat.

Sizes are exact integers (bytes); times are microseconds; rounding happens only when
rendering. The per-rank rules follow vLLM's ``ModelConfig.get_num_kv_heads`` and
``get_head_size`` (vllm/config/model.py): GQA/MHA heads are split across the tensor
parallel ranks but never below one head per rank (a model with fewer KV heads than
ranks replicates them), and an MLA latent is one "head" of kv_lora_rank +
qk_rope_head_dim on every rank (replicated, not divided by TP). docs/workload.md cites
the sources.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.model import ttft
from netqual.model.fetchprofile import CONNECTORS, DEFAULT_CONNECTOR
from netqual.model.ttft import Loader


class Dtype(enum.Enum):
    """KV-cache element type."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"

    @property
    def bytes(self) -> int:
        return _DTYPE_BYTES[self]


_DTYPE_BYTES = {Dtype.FP32: 4, Dtype.BF16: 2, Dtype.FP16: 2, Dtype.FP8: 1}

# Spellings seen in Hugging Face configs (torch_dtype / dtype) and in engines'
# kv-cache dtype options (vLLM --kv-cache-dtype fp8, fp8_e4m3, fp8_e5m2).
DTYPE_ALIASES: dict[str, Dtype] = {
    "fp32": Dtype.FP32,
    "float32": Dtype.FP32,
    "float": Dtype.FP32,
    "bf16": Dtype.BF16,
    "bfloat16": Dtype.BF16,
    "fp16": Dtype.FP16,
    "float16": Dtype.FP16,
    "half": Dtype.FP16,
    "fp8": Dtype.FP8,
    "fp8_e4m3": Dtype.FP8,
    "fp8_e5m2": Dtype.FP8,
    "float8_e4m3fn": Dtype.FP8,
    "float8_e5m2": Dtype.FP8,
}


def parse_dtype(text: str) -> Dtype | None:
    """The dtype for a spelling (case-insensitive, an optional 'torch.' prefix), else None."""
    return DTYPE_ALIASES.get(text.strip().lower().removeprefix("torch."))


class Attention(enum.Enum):
    GQA = "gqa"  # also MHA (kv_heads == attention heads) and MQA (one KV head)
    MLA = "mla"  # DeepSeek-style multi-head latent attention


# Link rates for the break-even table of ``netqual workload`` (no path measured yet).
LINK_RATES_GBPS = (100.0, 200.0, 400.0)


class BaselineKind(enum.Enum):
    RECOMPUTE = "recompute"
    LOCAL_READ = "local-read"


@dataclass(frozen=True)
class KvModel:
    """The KV-cache shape of one model, from a config.json or inline fields."""

    name: str
    layers: int
    attention: Attention
    kv_heads: int = 0  # GQA only
    head_dim: int = 0  # GQA only
    kv_lora_rank: int = 0  # MLA only
    qk_rope_head_dim: int = 0  # MLA only
    dtype: Dtype | None = None  # the model's own dtype, when its config says

    def kv_heads_per_rank(self, tp: int) -> int:
        if self.attention is Attention.MLA:
            return 1
        return max(1, self.kv_heads // tp)

    def elements_per_token_per_head(self) -> int:
        """K and V of one head (GQA), or the latent plus its rope part (MLA)."""
        if self.attention is Attention.MLA:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.head_dim

    def bytes_per_token(self, dtype: Dtype) -> int:
        """The whole model's KV bytes for one token (all heads, no replication)."""
        heads = 1 if self.attention is Attention.MLA else self.kv_heads
        return self.layers * heads * self.elements_per_token_per_head() * dtype.bytes

    def bytes_per_token_per_rank(self, dtype: Dtype, tp: int) -> int:
        """What one tensor-parallel rank stores (and fetches) for one token."""
        return (
            self.layers * self.kv_heads_per_rank(tp) * self.elements_per_token_per_head()
        ) * dtype.bytes

    @classmethod
    def from_shape_json(cls, d: Mapping[str, Any]) -> KvModel:
        return cls(
            name=str(d["name"]),
            layers=int(d["layers"]),
            attention=Attention(d["attention"]),
            kv_heads=int(d.get("kv_heads", 0)),
            head_dim=int(d.get("head_dim", 0)),
            kv_lora_rank=int(d.get("kv_lora_rank", 0)),
            qk_rope_head_dim=int(d.get("qk_rope_head_dim", 0)),
        )

    def shape_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "layers": self.layers,
            "attention": self.attention.value,
        }
        if self.attention is Attention.MLA:
            out["kv_lora_rank"] = self.kv_lora_rank
            out["qk_rope_head_dim"] = self.qk_rope_head_dim
        else:
            out["kv_heads"] = self.kv_heads
            out["head_dim"] = self.head_dim
        return out


@dataclass(frozen=True)
class Baseline:
    """What a KV miss costs without the network: recomputing it, or reading local NVMe."""

    prefill_tokens_per_s: float | None = None  # one serving instance, all its ranks
    local_read_gbps: float | None = None  # one node's local NVMe, 10^9 bit/s

    def to_json(self) -> dict[str, Any]:
        return {
            "prefill_tokens_per_s": self.prefill_tokens_per_s,
            "local_read_gbps": self.local_read_gbps,
        }


@dataclass(frozen=True)
class Workload:
    """A model served in a given shape, with the alternative that offload must beat."""

    source: str
    model: KvModel
    dtype: Dtype
    tp: int
    ranks_per_node: int
    chunk_tokens: int
    baseline: Baseline
    prompt_tokens: int | None = None
    hit_ratio: float = 1.0
    # serial round trips per chunk (netqual.model.ttft): the file's value, else its
    # connector's (layers for LMCache layer-wise); the bytes count once whatever it is
    round_trips_per_chunk: float = 1.0
    safe_speedup: float = 2.0
    unsafe_speedup: float = 1.0
    connector: str = DEFAULT_CONNECTOR  # how the engine fetches (model.fetchprofile)
    # f: the share of a baseline request's prefill path spent getting its cached chunks
    # (the TTFT change needs it; None: only the per-chunk speedup is judged)
    kv_share: float | None = None

    @property
    def loader(self) -> Loader:
        """Whether a node's requests queue behind each other's round trips."""
        found = CONNECTORS.get(self.connector)
        return Loader.SERIAL if found is None else found.loader

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model.bytes_per_token(self.dtype)

    @property
    def kv_bytes_per_token_per_rank(self) -> int:
        return self.model.bytes_per_token_per_rank(self.dtype, self.tp)

    @property
    def chunk_bytes(self) -> int:
        """One chunk, one rank: the size of one read the engine issues."""
        return self.chunk_tokens * self.kv_bytes_per_token_per_rank

    @property
    def node_chunk_bytes(self) -> int:
        """One chunk for every rank of a node: what a node pulls for one chunk of prompt."""
        return self.chunk_bytes * self.ranks_per_node

    @property
    def recompute_us(self) -> float | None:
        """Prefill time for chunk_tokens tokens. Ranks recompute their shares in parallel,
        so the instance's throughput is the rate (linear in tokens: a lower bound for
        late chunks of a long prompt, whose attention costs more)."""
        rate = self.baseline.prefill_tokens_per_s
        return None if rate is None else self.chunk_tokens / rate * 1e6

    @property
    def local_read_us(self) -> float | None:
        """Time for one node to read its ranks' chunks from local NVMe."""
        gbps = self.baseline.local_read_gbps
        return None if gbps is None else self.node_chunk_bytes * 8 / (gbps * 1e3)

    @property
    def budget(self) -> tuple[BaselineKind, float]:
        """The cheaper alternative: a network fetch pays only when it beats that."""
        options = [
            (kind, us)
            for kind, us in (
                (BaselineKind.RECOMPUTE, self.recompute_us),
                (BaselineKind.LOCAL_READ, self.local_read_us),
            )
            if us is not None
        ]
        return min(options, key=lambda option: option[1])

    @property
    def budget_us(self) -> float:
        return self.budget[1]

    @property
    def prompt_chunks(self) -> int | None:
        """Chunks a request of prompt_tokens fetches instead of recomputing (hit part)."""
        if self.prompt_tokens is None:
            return None
        return math.ceil(self.prompt_tokens * self.hit_ratio / self.chunk_tokens)

    def wire_us(self, link_gbps: float) -> float:
        """Serialisation of one node's chunk at a link rate: the floor of any fetch."""
        return ttft.wire_us(self.node_chunk_bytes, link_gbps)

    def modelled_fetch_us(self, rtt_us: float, link_gbps: float) -> float:
        """A node's chunk fetch at a link rate (``netqual.model.ttft.fetch_us``)."""
        return ttft.fetch_us(rtt_us, link_gbps, self.node_chunk_bytes, self.round_trips_per_chunk)

    def break_even_rtt_us(self, link_gbps: float, speedup: float = 1.0) -> float | None:
        """Largest round trip at which the fetch at this link rate still beats the budget
        by ``speedup`` (``netqual.model.ttft``). None when the wire alone takes too long."""
        got = ttft.break_even_rtt_us(
            self.budget_us, self.wire_us(link_gbps), self.round_trips_per_chunk, speedup
        )
        return None if got is None or math.isinf(got) else got

    def ttft_change(self, rtt_us: float, wire: float, concurrency: int = 1) -> float | None:
        """The relative TTFT change at a round trip and a chunk's wire time; None without
        ``kv_share``."""
        if self.kv_share is None:
            return None
        return ttft.ttft_change(
            rtt_us, wire, self.round_trips_per_chunk, self.budget_us, self.kv_share,
            self.loader, concurrency,
        )  # fmt: skip

    def break_even(self) -> tuple[BreakEven, ...]:
        return tuple(
            BreakEven(
                link_gbps=rate,
                wire_us=self.wire_us(rate),
                safe_rtt_us=self.break_even_rtt_us(rate, self.safe_speedup),
                rtt_us=self.break_even_rtt_us(rate),
            )
            for rate in LINK_RATES_GBPS
        )

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Workload:
        """The inverse of to_json (derived sizes and times are recomputed, not read).
        Raises KeyError, TypeError or ValueError on a malformed mapping."""
        base = d["baseline"]
        prompt = d.get("prompt_tokens")
        return cls(
            source=str(d["source"]),
            model=KvModel.from_shape_json(d["model"]),
            dtype=Dtype(d["dtype"]),
            tp=int(d["tp"]),
            ranks_per_node=int(d["ranks_per_node"]),
            chunk_tokens=int(d["chunk_tokens"]),
            baseline=Baseline(
                prefill_tokens_per_s=_opt_float(base.get("prefill_tokens_per_s")),
                local_read_gbps=_opt_float(base.get("local_read_gbps")),
            ),
            prompt_tokens=None if prompt is None else int(prompt),
            hit_ratio=float(d.get("hit_ratio", 1.0)),
            round_trips_per_chunk=float(d.get("round_trips_per_chunk", 1)),
            safe_speedup=float(d.get("safe_speedup", 2.0)),
            unsafe_speedup=float(d.get("unsafe_speedup", 1.0)),
            connector=str(d.get("connector", DEFAULT_CONNECTOR)),
            kv_share=_opt_float(d.get("kv_share")),
        )

    def to_json(self) -> dict[str, Any]:
        kind, budget_us = self.budget
        return {
            "source": self.source,
            "model": self.model.shape_json(),
            "dtype": self.dtype.value,
            "dtype_bytes": self.dtype.bytes,
            "tp": self.tp,
            "ranks_per_node": self.ranks_per_node,
            "chunk_tokens": self.chunk_tokens,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_per_rank": self.kv_bytes_per_token_per_rank,
            "chunk_bytes": self.chunk_bytes,
            "node_chunk_bytes": self.node_chunk_bytes,
            "budget_us": budget_us,
            "baseline": {
                **self.baseline.to_json(),
                "kind": kind.value,
                "recompute_us": self.recompute_us,
                "local_read_us": self.local_read_us,
            },
            "prompt_tokens": self.prompt_tokens,
            "hit_ratio": self.hit_ratio,
            "round_trips_per_chunk": self.round_trips_per_chunk,
            "connector": self.connector,
            "kv_share": self.kv_share,
            "safe_speedup": self.safe_speedup,
            "unsafe_speedup": self.unsafe_speedup,
            "break_even": [b.to_json() for b in self.break_even()],
        }


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class BreakEven:
    """On a link of this rate, the largest RTT at which offload still pays."""

    link_gbps: float
    wire_us: float  # the node's chunk serialised at the link rate
    safe_rtt_us: float | None  # speedup >= safe_speedup up to this RTT (None: never)
    rtt_us: float | None  # speedup >= 1 up to this RTT (None: never)

    def to_json(self) -> dict[str, Any]:
        return {
            "link_gbps": self.link_gbps,
            "wire_us": self.wire_us,
            "safe_rtt_us": self.safe_rtt_us,
            "rtt_us": self.rtt_us,
        }
