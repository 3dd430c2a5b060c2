"""``Results``: everything one run produced, as the commands and outputs read it: the run's
metadata, its nodes, its paths as columns (``PathTable``), the summary and what was derived
from them. It sits above both ``model`` (the records) and ``table.paths`` (the columns):
the columns are built from the records, and a run holds the columns, so the records never
import the columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from netqual.model.decision import Decision
from netqual.model.fanin import FaninResult
from netqual.model.fleet import FleetResult
from netqual.model.hostpath import HostAudit
from netqual.model.multirail import MultiRail
from netqual.model.node import Node
from netqual.model.path import NotMeasured
from netqual.model.run import SCHEMA_VERSION, Interference, RunMeta, Summary
from netqual.model.suspects import Localisation, Suspect
from netqual.table.paths import PathTable

if TYPE_CHECKING:
    from netqual.model.workload import Workload


@dataclass(frozen=True)
class Results:
    run: RunMeta
    nodes: tuple[Node, ...]
    paths: PathTable  # columns, one row per path (netqual.table.paths)
    summary: Summary
    interference: Interference | None = None
    tool_name: str = "netqual"
    tool_version: str = "0"
    schema_version: str = SCHEMA_VERSION

    @property
    def preliminary(self) -> bool:
        """The plan kept fewer samples than the policy needs: no verdict is final."""
        return self.run.plan.iterations < self.run.policy.min_samples

    workload: Workload | None = None  # the workload the paths were judged by, if any
    # localise.suspects as the run stored them; None: not stored (a file written without
    # them, or with none). Read them through localise.run_suspects.
    suspects: tuple[Suspect, ...] | None = None
    retest_of: str | None = None  # the run directory this run re-measured
    not_measured: tuple[NotMeasured, ...] = ()  # configuration failures, not paths
    fanin: tuple[FaninResult, ...] = ()  # run --fanin: one sweep per storage node
    multirail: tuple[MultiRail, ...] = ()  # run --multirail: node pairs over 1..R rails
    fleet: FleetResult | None = (
        None  # configuration snapshots and outliers (netqual.analysis.fleet)
    )
    hosts: tuple[HostAudit, ...] = ()  # each node's host path audit (netqual.model.hostpath)
    # the one answer from all the evidence (netqual.analysis.decision); None: not decided
    # (a run in progress), and then ``paths.verdict`` is the RTT policy's class
    decision: Decision | None = None
    # What localisation used besides the suspects (repeatability, distance, a re-test's
    # base); None: a file written before it was kept. Read through localise.run_localisation.
    localisation: Localisation | None = None

    @property
    def pingpong_only(self) -> int:
        """Pairs of an interrupted run whose bulk phase never ran (``details.pending``,
        results.journal.as_pending): in the file with their RTT, but not measured."""
        if self.run.complete:
            return 0
        return self.paths.details.count_key("pending")

    @property
    def unmeasured(self) -> int | None:
        """Scheduled pairs not measured: without a path row, or with ping-pong only (a
        pair whose bulk phase never ran is not measured); None when the file does not say
        how many were scheduled (an older results file of a run that completed)."""
        planned = self.run.pairs_planned
        if planned is None:
            return len(self.not_measured) if self.not_measured or self.run.complete else None
        return max(0, planned - len(self.paths) + self.pingpong_only)

    @property
    def incomplete(self) -> bool:
        """Interrupted, or some scheduled pair has no measurement: no go-live decision."""
        return not self.run.complete or bool(self.unmeasured) or not len(self.paths)
