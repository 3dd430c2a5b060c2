"""The dry-run model (netqual.planning.estimate): agents sharing one host's cores slow the
pairs of a batch or wave down by their CPU demand over the cores; on a cluster they do not."""

from __future__ import annotations

import dataclasses
import os

import pytest

from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.model.run import Mode
from netqual.planning import estimate, schedule
from netqual.planning.estimate import DurationModel


def _nodes(n: int, base: str = "127.0.1.") -> tuple[Node, ...]:
    return tuple(Node(name=f"a{i:02d}", address=f"{base}{i + 1}", port=9000) for i in range(n))


def _phases(n: int, model: DurationModel | None, base: str = "127.0.1.") -> dict[str, object]:
    sched = schedule.build(_nodes(n, base), Mode.FULL_MESH)
    phases, *_ = estimate.estimate_phases(sched, "tcp", ProbePlan(), model=model)
    return {p.name: p for p in phases}


def test_one_host_per_agent_is_count_times_unit() -> None:
    got = _phases(16, DurationModel())
    for name in ("pingpong", "bulk", "interference"):
        p = got[name]
        assert isinstance(p, estimate.PhaseEstimate)
        assert p.seconds == pytest.approx(p.count * p.unit_s)
    assert "sharing" not in str(got)


def test_pairs_at_once_on_shared_cores_take_their_demand_over_the_cores() -> None:
    model = DurationModel(shared_cores=2, pair_cores={"pingpong": 1.0, "bulk": 1.5})
    got, alone = _phases(16, model), _phases(16, dataclasses.replace(model, shared_cores=0))
    pp, bulk = got["pingpong"], got["bulk"]
    assert isinstance(pp, estimate.PhaseEstimate) and isinstance(bulk, estimate.PhaseEstimate)
    # 15 rounds of 8 pairs, each pair one core of 2: 4 x one pair alone
    assert pp.count == 15 and pp.seconds == pytest.approx(15 * 4.0 * pp.unit_s)
    # 15 waves of 8 disjoint pairs at 1.5 cores each on 2 cores: 6 x one pair alone
    assert bulk.count == 15 and bulk.seconds == pytest.approx(15 * 6.0 * bulk.unit_s)
    assert "sharing 2 cores (1.5 per pair)" in bulk.rule
    # one path at a time: nothing to share
    assert got["interference"] == alone["interference"]


def test_agents_checked_at_once_share_the_cores_too() -> None:
    # an agent check needs half a core; nothing of it is one at a time
    model = DurationModel(shared_cores=2, check_each_s=0.0)
    pre = _phases(100, model)["preflight"]
    assert isinstance(pre, estimate.PhaseEstimate)
    # one pass (the coordinator asks no agent again): 64 then 36 agents at once
    groups = [64 * 0.25, 36 * 0.25]
    assert pre.seconds == pytest.approx(sum(groups) * model.check_s)
    alone = _phases(100, DurationModel(check_each_s=0.0))["preflight"]
    assert isinstance(alone, estimate.PhaseEstimate)
    assert alone.seconds == pytest.approx(2 * model.check_s)  # two groups, one check each


def test_a_pass_takes_at_least_each_agents_one_at_a_time_part() -> None:
    # 1,024 agents in 16 groups of 64 at 0.1 s: 1.6 s, less than 1,024 x 2.5 ms
    big = _phases(1024, DurationModel(), base="gpu")["preflight"]
    assert isinstance(big, estimate.PhaseEstimate)
    assert big.seconds == pytest.approx(1024 * estimate.CHECK_EACH_S)
    assert "2.5 ms each, one at a time" in big.rule
    # 16 agents: one group, 0.1 s, more than 16 x 2.5 ms
    small = _phases(16, DurationModel())["preflight"]
    assert isinstance(small, estimate.PhaseEstimate)
    assert small.seconds == pytest.approx(0.1) and "one at a time" not in small.rule


def test_contention_is_relative_to_one_pair_alone() -> None:
    model = DurationModel(shared_cores=2, pair_cores={"pingpong": 1.0, "bulk": 3.0})
    # one bulk pair alone already waits for 2 cores of its 3: two take twice as long
    assert model.contention("bulk", 1) == 1.0
    assert model.contention("bulk", 2) == pytest.approx(2.0)
    # two ping-pong pairs fit on two cores; the third shares
    assert model.contention("pingpong", 2) == 1.0
    assert model.contention("pingpong", 3) == pytest.approx(1.5)
    assert DurationModel().contention("bulk", 500) == 1.0  # a cluster


def test_loopback_agents_share_this_hosts_cores_by_default() -> None:
    cores = len(os.sched_getaffinity(0))
    assert estimate.local_cores(_nodes(4)) == cores
    assert estimate.local_cores(_nodes(4, "198.18.0.")) == 0
    mixed = (*_nodes(2), Node(name="far", address="198.18.0.9", port=9000))
    assert estimate.local_cores(mixed) == 0  # some agent runs elsewhere: no shared host
    d = estimate.dry_run("inv.toml", _nodes(8), Mode.FULL_MESH, "tcp", ProbePlan())
    assert d.model.shared_cores == cores
    recorded = estimate.dry_run_to_dict(d)["estimate"]
    assert isinstance(recorded, dict) and recorded["model"]["shared_cores"] == cores
    far = estimate.dry_run("inv.toml", _nodes(8, "198.18.0."), Mode.FULL_MESH, "tcp", ProbePlan())
    far_recorded = estimate.dry_run_to_dict(far)["estimate"]
    assert isinstance(far_recorded, dict) and "shared_cores" not in far_recorded["model"]
