"""Reading a workload TOML (or a shipped preset) into a validated Workload.

Every mistake is a WorkloadError naming the file and the dotted field (exit code 2).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from netqual.base.errors import WorkloadError
from netqual.files.tomlfile import Fields, read_toml
from netqual.model.fetchprofile import CONNECTORS, DEFAULT_CONNECTOR
from netqual.model.workload import Attention, Baseline, Dtype, KvModel, Workload, parse_dtype
from netqual.workload.hfconfig import load_config

_HERE = Path(__file__).resolve().parent
PRESETS_DIR = _HERE / "presets"
MODELS_DIR = _HERE / "models"

SHAPE_KEYS = {"layers", "kv_heads", "head_dim", "kv_lora_rank", "qk_rope_head_dim"}
KEYS = {
    "name",
    "model",
    "dtype",
    "tp",
    "ranks_per_node",
    "chunk_tokens",
    "prefill_tokens_per_s",
    "local_read_gbps",
    "prompt_tokens",
    "hit_ratio",
    "round_trips_per_chunk",
    "connector",
    "kv_share",
    "safe_speedup",
    "unsafe_speedup",
} | SHAPE_KEYS

# Bounds a workload file must keep: a model name is a label, token counts and rates are
# those of real engines (a 50 MiB name or a 1e-320 rate is a hostile file, not a model).
MAX_NAME_CHARS = 200
MAX_TOKENS = 1 << 24


def _error(source: str, problem: str, field: str | None) -> WorkloadError:
    return WorkloadError(source, problem, field)


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def model_names() -> list[str]:
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


def _shipped(directory: Path, suffix: str, name: str) -> Path | None:
    """A shipped file by name, in any case ("Llama-3.1-70B-TP8" is llama-3.1-70b-tp8)."""
    if "/" in name:
        return None
    return next(
        (p for p in sorted(directory.glob(f"*{suffix}")) if p.stem.lower() == name.lower()), None
    )


def resolve(text: str) -> Path:
    """A workload argument: an existing file, else the name of a shipped preset."""
    path = Path(text)
    if path.is_file():
        return path
    preset = _shipped(PRESETS_DIR, ".toml", text)
    if preset is not None:
        return preset
    raise WorkloadError(
        text, f"no such file, and not a preset (presets: {', '.join(preset_names())})"
    )


def load_workload(text: str | Path) -> Workload:
    path = resolve(str(text))
    source = str(path)
    data = read_toml(path, _error)
    top = Fields(source, data, "", _error)
    top.check_keys({"workload"})
    f = top.sub("workload", KEYS, missing="missing [workload] table")
    model = _model(f, path.parent)
    dtype = _dtype(f, model)
    tp = f.integer("tp", 1, low=1)
    if model.attention is Attention.GQA and model.kv_heads % tp and tp % model.kv_heads:
        raise f.fail(
            "tp",
            f"{model.kv_heads} KV heads cannot be split over {tp} ranks "
            "(engines need one to divide the other)",
        )
    ranks_per_node = f.integer("ranks_per_node", tp, low=1)
    chunk_tokens = f.integer("chunk_tokens", 256, low=1, high=MAX_TOKENS)
    baseline = Baseline(  # finite and within reason: a denormal rate makes budgets infinite
        prefill_tokens_per_s=f.maybe_number("prefill_tokens_per_s", low=1e-3, high=1e9),
        local_read_gbps=f.maybe_number("local_read_gbps", low=1e-3, high=1e5),
    )
    if baseline.prefill_tokens_per_s is None and baseline.local_read_gbps is None:
        raise f.fail(
            "prefill_tokens_per_s",
            "give prefill_tokens_per_s (recompute) and/or local_read_gbps (local NVMe): "
            "a fetch is judged against the alternative",
        )
    prompt_tokens = (
        f.integer("prompt_tokens", 0, low=1, high=MAX_TOKENS)
        if "prompt_tokens" in f.table
        else None
    )
    hit_ratio = f.number("hit_ratio", 1.0, low=1e-6)
    if hit_ratio > 1:
        raise f.fail("hit_ratio", f"must be <= 1, got {hit_ratio:g}")
    conn = f.string("connector") or DEFAULT_CONNECTOR
    if conn not in CONNECTORS:
        raise f.fail("connector", f"unknown connector {conn!r} (known: {', '.join(CONNECTORS)})")
    chunks = None if prompt_tokens is None else math.ceil(prompt_tokens * hit_ratio / chunk_tokens)
    # serial round trips per chunk: the file's, else the connector's (docs/workload.md)
    round_trips = (
        f.number("round_trips_per_chunk", 1.0, positive=False, low=0.0, high=1e6)
        if "round_trips_per_chunk" in f.table
        else CONNECTORS[conn].round_trips_per_chunk(model.layers, chunks or 1)
    )
    kv_share = f.maybe_number("kv_share", low=1e-6, high=1.0)
    safe = f.number("safe_speedup", 2.0, low=1e-3, high=1e6)
    unsafe = f.number("unsafe_speedup", 1.0, low=1e-3, high=1e6)
    if safe < unsafe:
        raise f.fail("safe_speedup", f"must be >= unsafe_speedup ({unsafe:g}), got {safe:g}")
    return Workload(
        source=source,
        model=model,
        dtype=dtype,
        tp=tp,
        ranks_per_node=ranks_per_node,
        chunk_tokens=chunk_tokens,
        baseline=baseline,
        prompt_tokens=prompt_tokens,
        hit_ratio=hit_ratio,
        round_trips_per_chunk=round_trips,
        safe_speedup=safe,
        unsafe_speedup=unsafe,
        connector=conn,
        kv_share=kv_share,
    )


def _model(f: Fields, base: Path) -> KvModel:
    inline = sorted(SHAPE_KEYS & f.table.keys())
    name = f.string("name")
    if name is not None and len(name) > MAX_NAME_CHARS:
        raise f.fail("name", f"longer than {MAX_NAME_CHARS} characters")
    if "model" in f.table:
        if inline:
            raise f.fail(inline[0], "give either model (a config.json) or inline fields, not both")
        model = load_config(_model_path(f, base))
        return model if name is None else dataclasses.replace(model, name=name)
    if "layers" not in f.table:
        raise f.fail(
            "layers",
            "missing required field (or give model = a config.json path or a shipped "
            f"model: {', '.join(model_names())})",
        )
    layers = f.integer("layers", 0, low=1)
    if "kv_lora_rank" in f.table:
        return KvModel(
            name=name or "inline MLA model",
            layers=layers,
            attention=Attention.MLA,
            kv_lora_rank=f.integer("kv_lora_rank", 0, low=1),
            qk_rope_head_dim=_required_int(f, "qk_rope_head_dim"),
        )
    return KvModel(
        name=name or "inline model",
        layers=layers,
        attention=Attention.GQA,
        kv_heads=_required_int(f, "kv_heads"),
        head_dim=_required_int(f, "head_dim"),
    )


def _required_int(f: Fields, key: str) -> int:
    if key not in f.table:
        raise f.fail(key, "missing required field")
    return f.integer(key, 0, low=1)


def _model_path(f: Fields, base: Path) -> Path:
    text = f.string("model")
    assert text is not None  # the caller checked the key
    path = Path(text).expanduser()
    candidate = path if path.is_absolute() else base / path
    if candidate.is_file():
        return candidate
    shipped = _shipped(MODELS_DIR, ".json", text)
    if shipped is not None:
        return shipped
    raise f.fail(
        "model",
        f"no such file {str(candidate)!r}, and not a shipped model ({', '.join(model_names())})",
    )


def _dtype(f: Fields, model: KvModel) -> Dtype:
    text = f.string("dtype")
    if text is None:
        if model.dtype is None:
            raise f.fail("dtype", "missing: the model does not say its dtype (fp32, bf16, ...)")
        return model.dtype
    dtype = parse_dtype(text)
    if dtype is None:
        raise f.fail("dtype", f"unknown dtype {text!r} (fp32, bf16, fp16 or fp8)")
    return dtype
