"""What a run measures (``RunConfig``), its pairs and its identity for --resume."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from netqual.analysis import interference
from netqual.model.engine import EnginePlan
from netqual.model.fanin import FaninConfig
from netqual.model.fleet import FleetPolicy
from netqual.model.multirail import DEFAULT_MIN_SHARE
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode, RunKind
from netqual.model.workload import Workload
from netqual.planning import rails as rails_mod
from netqual.planning import sampling, schedule
from netqual.planning.calibration import Calibration
from netqual.planning.fabric import Fabric
from netqual.planning.phases import ScheduleConfig
from netqual.run import resume as resume_mod
from netqual.table.run import Results
from netqual.transports import TransportKind, TransportOptions


@dataclass(frozen=True)
class RunConfig:
    nodes: tuple[Node, ...]
    transport: TransportKind = TransportKind.TCP
    mode: Mode = Mode.FULL_MESH
    policy: Policy = field(default_factory=Policy)
    plan: ProbePlan = field(default_factory=ProbePlan)
    token: bytes | None = None
    parallel: int | None = None  # max concurrent pairs per round; None = all disjoint pairs
    sample_k: int = schedule.DEFAULT_SAMPLE_K  # sampled mode: pairs between every two racks
    transport_options: TransportOptions = field(default_factory=TransportOptions)
    inventory: str | None = None
    kind: RunKind = RunKind.CLUSTER  # what the run is (results.json run.kind)
    workload: Workload | None = None  # also judge each path by this workload's chunk
    # netqual retest: measure exactly these (src, dst) pairs instead of the mode's plan
    pairs: tuple[tuple[str, str], ...] | None = None
    retest_of: str | None = None  # the run directory being re-tested
    # its results: a re-test localises on them with its own re-measurements in place
    retest_base: Results | None = field(default=None, compare=False, repr=False)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    fabric: Fabric = field(default_factory=Fabric)  # stated NIC and uplink rates
    # Interference check: sample max(minimum, fraction of paths); minimum 0 skips it.
    interference_fraction: float = sampling.DEFAULT_FRACTION
    interference_minimum: int = sampling.DEFAULT_MINIMUM
    interference_seed: int | None = None
    interference_tolerance: float = interference.TOLERANCE  # run/alone p99 beyond noise
    fanin: FaninConfig | None = None  # run --fanin: the sweep after the pairs (fanin_run)
    rails: rails_mod.Rails = rails_mod.Rails.NONE  # probe NIC by NIC (docs/rails.md)
    multirail: int = 0  # run --multirail N: node pairs read over 1..R rails at once
    multirail_share: float = DEFAULT_MIN_SHARE  # what an added rail must add of its line rate

    @property
    def endpoints(self) -> tuple[Node, ...]:
        """What the paths run between: the nodes, or with rails every NIC of every node."""
        return rails_mod.endpoint_nodes(self.nodes, self.rails)

    fleet_policy: FleetPolicy = field(default_factory=FleetPolicy)  # [fleet] of the policy
    engine: EnginePlan | None = None  # run --engine: each path's engine cells (docs/engines.md)
    # --calibrate-from: earlier runs whose measured rates calibrate the recorded estimate
    calibration: Calibration | None = None


def pair_schedule(cfg: RunConfig) -> schedule.Schedule:
    if cfg.pairs is not None:
        return schedule.explicit(cfg.endpoints, cfg.pairs, cfg.mode)
    return rails_mod.build(cfg.nodes, cfg.mode, cfg.rails, cfg.sample_k)


def run_identity(cfg: RunConfig) -> dict[str, Any]:
    """What a run measures; a resumed run must match it (see netqual.run.resume)."""
    ident = resume_mod.identity(
        cfg.nodes, cfg.mode, cfg.sample_k, cfg.transport.value, cfg.policy, cfg.plan
    )
    if cfg.pairs is not None:
        ident["pairs"] = [list(p) for p in cfg.pairs]
    if cfg.rails is not rails_mod.Rails.NONE:
        ident["rails"] = cfg.rails.value
    if cfg.engine is not None:  # a resumed run keeps the cells of the same engine plan
        ident["engine"] = {
            "name": cfg.engine.name.value,
            "chunk_bytes": cfg.engine.chunk_bytes,
            "depths": list(cfg.engine.depths),
            "require": None if cfg.engine.require is None else cfg.engine.require.value,
        }
    if cfg.fanin is not None:  # a resumed sweep keeps its levels: the same sweep only
        ident["fanin"] = dataclasses.asdict(cfg.fanin) | {"levels": list(cfg.fanin.levels)}
    return ident
