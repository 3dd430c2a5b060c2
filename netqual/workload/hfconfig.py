"""The KV-cache shape of a model from its Hugging Face ``config.json``.

Read: num_hidden_layers; num_key_value_heads (else num_attention_heads: MHA); head_dim
(else hidden_size / num_attention_heads); torch_dtype or dtype. A config with
kv_lora_rank is MLA (DeepSeek-V2/V3, Kimi-K2): its cache is the latent of
kv_lora_rank + qk_rope_head_dim per layer. Multimodal configs keep these in
``text_config``, which is used when the top level has no num_hidden_layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from netqual.base.errors import WorkloadError
from netqual.files.filedata import load_json
from netqual.model.workload import Attention, KvModel, parse_dtype


def _int_field(source: str, config: Mapping[str, Any], key: str, required: bool) -> int | None:
    value = config.get(key)
    if value is None:
        if required:
            raise WorkloadError(source, "missing required field", key)
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WorkloadError(source, f"expected a positive integer, got {value!r}", key)
    return value


def _require(source: str, config: Mapping[str, Any], key: str) -> int:
    value = _int_field(source, config, key, required=True)
    assert value is not None  # required=True raises instead
    return value


def model_from_config(source: str, config: Mapping[str, Any], name: str) -> KvModel:
    """A KvModel from a parsed config.json; errors name ``source`` and the config key."""
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), Mapping):
        config = config["text_config"]
    layers = _require(source, config, "num_hidden_layers")
    dtype_text = config.get("torch_dtype", config.get("dtype"))
    dtype = None
    if dtype_text is not None:
        dtype = parse_dtype(str(dtype_text))
        if dtype is None:
            key = "torch_dtype" if "torch_dtype" in config else "dtype"
            raise WorkloadError(source, f"unknown dtype {dtype_text!r}", key)
    if config.get("kv_lora_rank") is not None:
        return KvModel(
            name=name,
            layers=layers,
            attention=Attention.MLA,
            kv_lora_rank=_require(source, config, "kv_lora_rank"),
            qk_rope_head_dim=_require(source, config, "qk_rope_head_dim"),
            dtype=dtype,
        )
    kv_heads = _int_field(source, config, "num_key_value_heads", required=False)
    head_dim = _int_field(source, config, "head_dim", required=False)
    if kv_heads is None or head_dim is None:
        heads = _int_field(source, config, "num_attention_heads", required=True)
        assert heads is not None
        kv_heads = kv_heads or heads
        if head_dim is None:
            hidden = _require(source, config, "hidden_size")
            if hidden % heads:
                raise WorkloadError(
                    source,
                    f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}; "
                    "give head_dim",
                    "head_dim",
                )
            head_dim = hidden // heads
    return KvModel(
        name=name,
        layers=layers,
        attention=Attention.GQA,
        kv_heads=kv_heads,
        head_dim=head_dim,
        dtype=dtype,
    )


def load_config(path: Path) -> KvModel:
    """Read a config.json file. The model's name is its ``_name_or_path``, else the file's."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise WorkloadError(source, f"cannot read: {err.strerror or err}") from err
    data = load_json(raw, source, WorkloadError)
    if not isinstance(data, dict):
        raise WorkloadError(source, "expected a JSON object (a Hugging Face config.json)")
    name = data.get("_name_or_path")
    if not isinstance(name, str) or not name.strip():
        name = path.parent.name if path.name == "config.json" else path.stem
    return model_from_config(source, data, name.strip())
