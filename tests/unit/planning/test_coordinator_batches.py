"""The coordinator's rule: pairs that share a host (one CPU, one NIC) never run at once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from netqual.model.node import Node
from netqual.planning.phases import host_batches as _batches
from netqual.planning.schedule import Pair


def _round(hosts: list[int]) -> list[Pair]:
    """Node i lives on host hosts[i]; consecutive nodes are paired (a node-disjoint round)."""
    nodes = [Node(f"n{i}", f"198.18.3.{h}", port=18515 + i) for i, h in enumerate(hosts)]
    return [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]


@settings(deadline=None)  # a loaded CI machine is no reason to fail
@given(
    st.lists(st.integers(min_value=1, max_value=6), max_size=40),
    st.none() | st.integers(min_value=1, max_value=5),
)
def test_no_batch_holds_a_host_twice_and_every_pair_runs_once(
    hosts: list[int], parallel: int | None
) -> None:
    pairs = _round(hosts)
    batches = _batches(pairs, parallel)
    names = sorted((a.name, b.name) for batch in batches for a, b in batch)
    assert names == sorted((a.name, b.name) for a, b in pairs)
    for batch in batches:
        assert batch, "empty batch"
        # A pair's two ends may share a host; two pairs of one batch never do.
        hosts_per_pair = [{a.address, b.address} for a, b in batch]
        for i, x in enumerate(hosts_per_pair):
            for y in hosts_per_pair[i + 1 :]:
                assert not x & y, f"host shared inside one batch: {hosts_per_pair}"
        if parallel is not None:
            assert len(batch) <= parallel


def test_pairs_on_one_host_run_one_at_a_time() -> None:
    pairs = _round([7] * 10)
    assert [len(b) for b in _batches(pairs, None)] == [1] * 5


def test_pairs_on_distinct_hosts_run_together_up_to_the_cap() -> None:
    pairs = _round(list(range(1, 13)))
    assert [len(b) for b in _batches(pairs, None)] == [6]
    assert [len(b) for b in _batches(pairs, 4)] == [4, 2]
