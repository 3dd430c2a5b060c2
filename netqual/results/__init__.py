"""The results file (docs/results.md, schema_version "1"): ``encode`` (records -> JSON,
written as a run goes), ``decode`` (JSON -> records, validated) and ``summary`` (counts per
verdict and the worst paths). Import from here; the submodules are the homes.
"""

from netqual.model.run import SCHEMA_VERSION
from netqual.results.decode import load, results_from_dict
from netqual.results.encode import (
    bulk_to_dict,
    dump_json,
    node_to_dict,
    path_to_dict,
    policy_to_dict,
    results_to_dict,
    rtt_to_dict,
    workload_result_to_dict,
    write_json,
)
from netqual.results.summary import WORST_PATHS, RunningWorst, summarize

__all__ = [
    "SCHEMA_VERSION",
    "WORST_PATHS",
    "RunningWorst",
    "bulk_to_dict",
    "dump_json",
    "load",
    "node_to_dict",
    "path_to_dict",
    "policy_to_dict",
    "results_from_dict",
    "results_to_dict",
    "rtt_to_dict",
    "summarize",
    "workload_result_to_dict",
    "write_json",
]
