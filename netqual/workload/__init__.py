"""The workload axis: a model and serving shape, the KV chunk it moves, and its budget.

``load_workload`` reads a workload TOML or a shipped preset; ``Workload`` knows the
chunk sizes and the time budget a network fetch must beat. docs/workload.md explains
the formula, the presets and their sources.
"""

from netqual.model.workload import (
    Attention,
    Baseline,
    BaselineKind,
    BreakEven,
    Dtype,
    KvModel,
    Workload,
    parse_dtype,
)
from netqual.workload.hfconfig import load_config, model_from_config
from netqual.workload.load import load_workload, model_names, preset_names

__all__ = [
    "Attention",
    "Baseline",
    "BaselineKind",
    "BreakEven",
    "Dtype",
    "KvModel",
    "Workload",
    "load_config",
    "load_workload",
    "model_from_config",
    "model_names",
    "parse_dtype",
    "preset_names",
]
