"""Where a problem sits: suspects computed from the verdict matrix with numpy (Pingmesh's
idea: a bad node shows up as a bad row, a bad uplink as a bad rack-pair block).

"Bad" means not offload-safe. Attribution, most specific cause last:
1. distance: when same-rack paths are mostly (>= 75%) offload-safe but most (>= half, at
   least two) paths of a farther tier (cross-rack, remote) are not, distance is the cause
   and those paths are not held against their nodes or racks (``distance_tiers``);
2. node: at least two, and at least half, of a node's remaining paths are bad;
3. rack-pair: of the bad paths left (no suspect node on them), at least two and at least
   half of all paths between two racks (or inside one rack);
4. link: every bad path still unexplained whose two nodes each have another judged path
   (with none, nothing tells the link from its ends: no suspect is named);
5. asymmetry (independent of 1-4): a pair measured in both directions whose verdicts
   differ, or whose metric differs by 2x or more (a bad cable, a mis-set ECN/PFC queue).
Everything is bincounts and sorts over per-path arrays: O(paths log paths), no loop over
node pairs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.analysis import counter_evidence
from netqual.analysis.matrix import group_medians
from netqual.analysis.policy import sample_limited
from netqual.model.path import Tier
from netqual.model.stats import Metric
from netqual.model.suspects import (
    AsymmetryEvidence,
    LinkEvidence,
    NicEvidence,
    NodeEvidence,
    OtherNic,
    PathEvidence,
    RackPairEvidence,
    RailEvidence,
    Suspect,
    SuspectKind,
)
from netqual.table.paths import TIERS, VERDICTS, worst_first, worst_per_group
from netqual.table.run import Results

MAJORITY = 0.5
NEAR_SAFE = 0.75
ASYMMETRY_RATIO = 2.0
FAR_TIERS = (Tier.CROSS_RACK, Tier.REMOTE)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PathColumns:
    """One row per path, node and rack as integer codes: what localisation reads."""

    node_names: tuple[str, ...]
    node_rack: IntArray  # rack code per node, -1 when the node has no rack
    rack_names: tuple[str, ...]
    src: IntArray
    dst: IntArray
    verdict: IntArray  # Verdict.rank: 0 safe, 1 marginal, 2 unsafe
    value_us: FloatArray  # the policy metric; NaN when the path has no RTT
    tier: IntArray  # index into TIERS
    errors: Sequence[str | None]


def columns(results: Results, metric: Metric) -> PathColumns:
    """The table's columns with node codes in node-list order (a path to a node the list
    lacks appends the name, rack-less) and sample-limited paths counted as safe."""
    table = results.paths
    names = [n.name for n in results.nodes]
    index = {name: i for i, name in enumerate(names)}
    racks: dict[str, int] = {}
    node_rack = [racks.setdefault(n.rack, len(racks)) if n.rack else -1 for n in results.nodes]
    used = np.zeros(len(table.names), dtype=bool)
    used[table.src] = True
    used[table.dst] = True
    remap = np.zeros(max(len(table.names), 1), dtype=np.int64)
    for code, name in enumerate(table.names):
        if name not in index and used[code]:  # a path to a node the node list lacks
            index[name] = len(names)
            names.append(name)
            node_rack.append(-1)
        remap[code] = index.get(name, -1)
    value = table.values(metric)
    return PathColumns(
        node_names=tuple(names),
        node_rack=np.array(node_rack, dtype=np.int64),
        rack_names=tuple(racks),
        src=remap[table.src],
        dst=remap[table.dst],
        # A path marginal only for want of samples says nothing about the hardware.
        verdict=np.where(sample_limited(results.run.policy, table), 0, table.verdict).astype(
            np.int64
        ),
        value_us=value,
        tier=table.tier,
        errors=table.error,
    )


def distance_tiers(c: PathColumns) -> set[Tier]:
    """Tiers whose paths fail because of distance (rule 1 of the module docstring)."""
    bad = c.verdict > 0
    near = c.tier == TIERS.index(Tier.SAME_RACK)
    if not near.any() or (~bad[near]).mean() < NEAR_SAFE:
        return set()
    far = set()
    for t in FAR_TIERS:
        mine = c.tier == TIERS.index(t)
        n_bad = int((bad & mine).sum())
        if n_bad >= 2 and n_bad / int(mine.sum()) >= MAJORITY:
            far.add(t)
    return far


def _us(x: float) -> float | None:
    """Unrounded (renderers round); None for no value."""
    return None if math.isnan(x) or math.isinf(x) else x


def _path_evidence(c: PathColumns, i: int) -> PathEvidence:
    return PathEvidence(
        src=c.node_names[c.src[i]],
        dst=c.node_names[c.dst[i]],
        verdict=VERDICTS[c.verdict[i]],
        value_us=_us(float(c.value_us[i])),
        error=c.errors[i],
    )


def topology_unknown(c: PathColumns) -> bool:
    """No node has a rack and no path a tier (a results file without either): a bad node,
    a bad rack and distance leave the same marks, so nothing is localised but asymmetry
    (which compares a pair with itself)."""
    return not (c.node_rack >= 0).any() and bool((c.tier == TIERS.index(Tier.UNKNOWN)).all())


def cannot_localise(results: Results) -> str | None:
    """Why the suspects are missing when paths fail but the topology is unknown; else None."""
    c = columns(results, results.run.policy.metric)
    if not (c.verdict > 0).any() or not topology_unknown(c):
        return None
    return (
        "cannot localise: no path has a tier and no node a rack, so a bad node, a bad "
        "rack and distance look alike; give the nodes racks (and sites) in the inventory "
        "and re-run, or re-test the paths that are not offload-safe"
    )


def localise(c: PathColumns, metric: Metric) -> tuple[Suspect, ...]:
    if topology_unknown(c):
        return tuple(_asymmetries(c, metric))
    n_nodes, n_racks = len(c.node_names), len(c.rack_names)
    bad = c.verdict > 0
    far = distance_tiers(c)
    near = ~np.isin(c.tier, [TIERS.index(t) for t in far])
    # worst first by localisation's verdicts (sample-limited paths count as safe)
    ranked = worst_first(c.verdict, c.value_us)
    both = np.concatenate([c.src, c.dst])
    near2, bad2 = np.concatenate([near, near]), np.concatenate([bad, bad])
    paths_of = np.bincount(both[near2], minlength=n_nodes)
    bad_of = np.bincount(both[near2 & bad2], minlength=n_nodes)
    culprit = (bad_of >= 2) & (bad_of >= MAJORITY * np.maximum(paths_of, 1))
    overall = float(np.nanmedian(c.value_us)) if np.isfinite(c.value_us).any() else math.nan
    out: list[Suspect] = []

    if culprit.any():
        idx2 = np.concatenate([np.arange(len(bad))] * 2)
        mask = near2 & bad2 & culprit[both]
        worst = worst_per_group(both[mask], idx2[mask], ranked, n_nodes)
        medians = group_medians(both[near2], np.concatenate([c.value_us] * 2)[near2], n_nodes)
        order = sorted(
            np.flatnonzero(culprit).tolist(), key=lambda n: (-bad_of[n], c.node_names[n])
        )
        for n in order:
            out.append(
                Suspect(
                    SuspectKind.NODE,
                    c.node_names[n],
                    NodeEvidence(
                        metric=metric,
                        bad_paths=int(bad_of[n]),
                        paths=int(paths_of[n]),
                        median_us=_us(float(medians[n])),
                        all_paths_median_us=_us(overall),
                        worst=_path_evidence(c, int(worst[n])),
                    ),
                )
            )

    rest = bad & near & ~culprit[c.src] & ~culprit[c.dst]
    ra, rb = c.node_rack[c.src], c.node_rack[c.dst]
    has_racks = (ra >= 0) & (rb >= 0)
    rack_key = np.minimum(ra, rb) * max(n_racks, 1) + np.maximum(ra, rb)
    flagged = np.zeros(max(n_racks, 1) ** 2, dtype=bool)
    if n_racks and rest.any():
        size = n_racks * n_racks
        totals = np.bincount(rack_key[has_racks], minlength=size)
        in_rest = rest & has_racks
        bad_rest = np.bincount(rack_key[in_rest], minlength=size)
        flagged = (bad_rest >= 2) & (bad_rest >= MAJORITY * np.maximum(totals, 1))
        worst = worst_per_group(rack_key[in_rest], np.flatnonzero(in_rest), ranked, size)
        medians = group_medians(rack_key[has_racks], c.value_us[has_racks], size)
        keys = sorted(
            np.flatnonzero(flagged).tolist(),
            key=lambda k: (c.rack_names[k // n_racks], c.rack_names[k % n_racks]),
        )
        for k in keys:
            a, b = c.rack_names[k // n_racks], c.rack_names[k % n_racks]
            a, b = min(a, b), max(a, b)
            out.append(
                Suspect(
                    SuspectKind.RACK_PAIR,
                    f"{a}<->{b}",
                    RackPairEvidence(
                        metric=metric,
                        racks=(a, b),
                        bad_paths=int(bad_rest[k]),
                        paths=int(totals[k]),
                        median_us=_us(float(medians[k])),
                        all_paths_median_us=_us(overall),
                        worst=_path_evidence(c, int(worst[k])),
                    ),
                )
            )

    isolated = rest & ~(has_racks & flagged[np.where(has_racks, rack_key, 0)])
    isolated &= (paths_of[c.src] >= 2) & (paths_of[c.dst] >= 2)  # seen elsewhere too
    names = c.node_names
    links = sorted(
        np.flatnonzero(isolated).tolist(),
        key=lambda i: (-c.verdict[i], names[c.src[i]], names[c.dst[i]]),
    )
    for i in links:
        s, d = int(c.src[i]), int(c.dst[i])
        out.append(
            Suspect(
                SuspectKind.LINK,
                f"{c.node_names[s]}->{c.node_names[d]}",
                LinkEvidence(
                    metric=metric,
                    path=_path_evidence(c, i),
                    src_bad_elsewhere=int(bad_of[s]) - 1,
                    src_paths_elsewhere=int(paths_of[s]) - 1,
                    dst_bad_elsewhere=int(bad_of[d]) - 1,
                    dst_paths_elsewhere=int(paths_of[d]) - 1,
                ),
            )
        )
    out += _asymmetries(c, metric)
    return tuple(out)


def _asymmetries(c: PathColumns, metric: Metric) -> list[Suspect]:
    n = max(len(c.node_names), 1)
    fwd = c.src * n + c.dst
    rev = c.dst * n + c.src
    order = np.argsort(fwd, kind="stable")
    pos = np.searchsorted(fwd[order], rev)
    pos = np.minimum(pos, len(order) - 1) if len(order) else pos
    found = (fwd[order][pos] == rev) if len(order) else np.zeros(0, dtype=bool)
    i = np.flatnonzero(found & (c.src < c.dst))
    j = order[pos[i]]
    a, b = c.value_us[i], c.value_us[j]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.maximum(a, b) / np.minimum(a, b)
    differs = (c.verdict[i] != c.verdict[j]) | (ratio >= ASYMMETRY_RATIO)
    found_pairs: list[tuple[float, Suspect]] = []
    for k in np.flatnonzero(differs).tolist():
        fi, ri = int(i[k]), int(j[k])
        r = float(ratio[k])
        found_pairs.append(
            (
                -r if math.isfinite(r) else -math.inf,
                Suspect(
                    SuspectKind.ASYMMETRY,
                    f"{c.node_names[c.src[fi]]}<->{c.node_names[c.dst[fi]]}",
                    AsymmetryEvidence(
                        metric=metric,
                        forward=_path_evidence(c, fi),
                        reverse=_path_evidence(c, ri),
                        ratio=r if math.isfinite(r) else None,
                    ),
                ),
            )
        )
    return [s for _, s in sorted(found_pairs, key=lambda x: x[0])]


def suspects(results: Results) -> tuple[Suspect, ...]:
    metric = results.run.policy.metric
    c = columns(results, metric)
    found = counter_evidence.annotate(results, localise(c, metric))
    nics = {n.name: n.nic for n in results.nodes if n.nic is not None and n.agent is not None}
    return by_nic(c, found, nics, metric) if nics else found


def by_nic(
    c: PathColumns, found: tuple[Suspect, ...], nics: Mapping[str, Any], metric: Metric
) -> tuple[Suspect, ...]:
    """With endpoints below the node (``NODE/NIC``, docs/rails.md), the node rule's
    suspects are NICs. Read per rail plane and per node:

    - ``rail``: more than half of a rail's endpoints are suspects (and at least two): the
      plane (its switches) is the common cause, not each NIC;
    - ``node``: every NIC of a node is a suspect: the host itself;
    - ``nic``: otherwise, one NIC bad while the node's other rails are fine.
    """
    culprits = {
        s.subject: s.evidence
        for s in found
        if isinstance(s.evidence, NodeEvidence) and s.subject in nics
    }
    if not culprits:
        return found
    rail_of = {name: nic.rail for name, nic in nics.items()}
    node_of = {name: name.rsplit("/", 1)[0] for name in nics}
    stats = _endpoint_stats(c)
    out: list[Suspect] = []
    rails_bad = set()
    for rail in sorted(set(rail_of.values())):
        members = [e for e, r in rail_of.items() if r == rail]
        bad = [e for e in members if e in culprits]
        if len(bad) >= 2 and len(bad) > MAJORITY * len(members):
            rails_bad.add(rail)
            worst = max(bad, key=lambda e: (stats[e].bad_paths or 0, e))
            ev = RailEvidence(metric, rail, tuple(sorted(bad)), len(members), culprits[worst].worst)
            out.append(Suspect(SuspectKind.RAIL, f"rail {rail}", ev))
    left = {e: s for e, s in culprits.items() if rail_of[e] not in rails_bad}
    for node in sorted({node_of[e] for e in left}):
        mine = sorted((e for e in nics if node_of[e] == node), key=lambda e: rail_of[e])
        bad = [e for e in mine if e in left]
        if len(bad) == len(mine) and len(mine) > 1:
            ev_node = dataclasses.replace(left[bad[0]], nics=tuple(nics[e].name for e in bad))
            out.append(Suspect(SuspectKind.NODE, node, ev_node))
            continue
        others = tuple(
            dataclasses.replace(stats.get(e, OtherNic("", 0)), nic=nics[e].name, rail=rail_of[e])
            for e in mine
            if e not in left
        )
        for e in bad:
            n = left[e]
            ev_nic = NicEvidence(
                metric=n.metric, bad_paths=n.bad_paths, paths=n.paths, median_us=n.median_us,
                all_paths_median_us=n.all_paths_median_us, worst=n.worst, node=node,
                nic=nics[e].name, rail=rail_of[e], other_nics=others, counters=n.counters,
            )  # fmt: skip
            out.append(Suspect(SuspectKind.NIC, e, ev_nic))
    rest = [s for s in found if not (s.kind is SuspectKind.NODE and s.subject in culprits)]
    return (*out, *rest)


def _endpoint_stats(c: PathColumns) -> dict[str, OtherNic]:
    """Per endpoint: bad paths, paths and the median of the metric over its paths (the
    NIC and rail fields are the caller's)."""
    n = len(c.node_names)
    both = np.concatenate([c.src, c.dst])
    bad2 = np.concatenate([c.verdict > 0] * 2)
    paths_of = np.bincount(both, minlength=n)
    bad_of = np.bincount(both[bad2], minlength=n)
    medians = group_medians(both, np.concatenate([c.value_us] * 2), n)
    return {
        name: OtherNic(
            nic="",
            rail=0,
            bad_paths=int(bad_of[i]),
            paths=int(paths_of[i]),
            median_us=_us(float(medians[i])),
        )
        for i, name in enumerate(c.node_names)
    }


def run_suspects(results: Results) -> tuple[Suspect, ...]:
    """The suspects a run stored when it finished, computed here (``suspects``) only for a
    file written without them."""
    return results.suspects if results.suspects is not None else suspects(results)
