"""Where a problem sits: suspects computed from the path columns with numpy (Pingmesh's
idea: a bad node shows up as a bad row, a bad uplink as a bad rack-pair block), each one
judged against its peers at the same distance and the run's own repeatability.

"Bad" means not offload-safe (a path marginal only for want of samples counts as safe).
``T`` is the run's repeatability (``analysis/repeatability``): how far one path's metric
reads apart when it is read twice. A path that failed (no samples) counts as infinitely
slow. The *level* of a set of paths is their lower median: more than half of them are at
least that slow. Attribution, most specific cause last:

1. distance: when same-rack paths are mostly (>= 75%) offload-safe, or none was measured
   (a bipartite run), but most (>= half, at least two) paths of a farther tier
   (cross-rack, remote) are not, distance is the cause: those paths are not held against
   their racks or links (``distance``), and the report says so;
2. node: at one tier, more than half (and at least two) of the node's paths are bad, and
   their level exceeds ``T`` times its peers' (the lower median of the same level over
   the other nodes with paths at that tier; in a bipartite run the nodes of its role:
   compute against compute, storage against storage). Every tier is judged, distance
   tiers too: a storage node slower than its twin at the same remote site is named;
3. rack-pair: of the bad paths left (no suspect node on them, no distance tier), more
   than half (and at least two) of all paths between two racks (or inside one rack), and
   their level exceeds ``T`` times the other rack pairs' of the same tier;
4. link: a bad path still unexplained whose two nodes each have another judged path,
   whose metric exceeds ``T`` times its tier's level, and which shows a cause
   (``analysis/causes``: its counters, an MTU outlier, its p50 beyond the repeatability:
   the whole distribution moved) or failed. With no other judged path nothing tells the
   link from its ends, and a tail alone on one path is what one path's tail does from
   run to run (a stall of the host): no suspect is named;
5. asymmetry (independent of 1-4): a pair measured in both directions whose metrics
   differ by more than ``T`` and whose verdicts differ, or which differ by 2x or more and
   by more than ``T`` (a bad cable, a mis-set ECN/PFC queue).

A re-test (``netqual retest``) localises on the run it re-tested with its own
re-measurements in place of the re-tested paths, never on its subset alone, and adds the
before/after ratio of those paths to the repeatability (``localisation(..., base=)``).

Everything is bincounts and sorts over per-path arrays: O(paths log paths), no loop over
node pairs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from netqual.analysis import causes, repeatability
from netqual.analysis.matrix import group_medians
from netqual.analysis.policy import sample_limited
from netqual.model.node import Nic
from netqual.model.path import Tier
from netqual.model.run import Mode
from netqual.model.stats import Metric
from netqual.model.suspects import (
    AsymmetryEvidence,
    Cause,
    CauseKind,
    Contrast,
    DistanceEvidence,
    LinkEvidence,
    LinkSubject,
    Localisation,
    Measure,
    NicEvidence,
    NicSubject,
    NodeEvidence,
    NodeSubject,
    OtherNic,
    PairSubject,
    PathEvidence,
    RackPairEvidence,
    RackPairSubject,
    RailEvidence,
    RailSubject,
    Repeatability,
    RepeatMeasure,
    RepeatSource,
    Suspect,
    SuspectKind,
)
from netqual.planning.rails import split_endpoint
from netqual.table.paths import NO_HOPS, TIERS, VERDICTS, worst_first, worst_per_group
from netqual.table.run import Results
from netqual.table.store import concat

MAJORITY = 0.5
NEAR_SAFE = 0.75
ASYMMETRY_RATIO = 2.0
FAR_TIERS = (Tier.CROSS_RACK, Tier.REMOTE)
N_TIERS = len(TIERS)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class PathColumns:
    """One row per path, node and rack as integer codes: what localisation reads."""

    node_names: tuple[str, ...]
    node_rack: IntArray  # rack code per node, -1 when the node has no rack
    rack_names: tuple[str, ...]
    node_group: IntArray  # peer group per node: its role in a bipartite run, else 0
    src: IntArray
    dst: IntArray
    verdict: IntArray  # Verdict.rank: 0 safe, 1 marginal, 2 unsafe
    value_us: FloatArray  # the policy metric; NaN when the path has no RTT
    tier: IntArray  # index into TIERS
    hops: IntArray  # NO_HOPS where unknown
    errors: tuple[str | None, ...]
    goodput_gbps: FloatArray  # best bulk goodput per path; NaN without bulk cells


def columns(results: Results, metric: Metric) -> PathColumns:
    """The table's columns with node codes in node-list order (a path to a node the list
    lacks appends the name, rack-less) and sample-limited paths counted as safe."""
    table = results.paths
    names = [n.name for n in results.nodes]
    index = {name: i for i, name in enumerate(names)}
    racks: dict[str, int] = {}
    node_rack = [racks.setdefault(n.rack, len(racks)) if n.rack else -1 for n in results.nodes]
    by_role = results.run.mode is Mode.BIPARTITE
    roles: dict[str, int] = {}
    group = [roles.setdefault(n.role.value, len(roles)) if by_role else 0 for n in results.nodes]
    used = np.zeros(len(table.names), dtype=bool)
    used[table.src] = True
    used[table.dst] = True
    remap = np.zeros(max(len(table.names), 1), dtype=np.int64)
    for code, name in enumerate(table.names):
        if name not in index and used[code]:  # a path to a node the node list lacks
            index[name] = len(names)
            names.append(name)
            node_rack.append(-1)
            group.append(-1)
        remap[code] = index.get(name, -1)
    return PathColumns(
        node_names=tuple(names),
        node_rack=np.array(node_rack, dtype=np.int64),
        rack_names=tuple(racks),
        node_group=np.array(group, dtype=np.int64),
        src=remap[table.src],
        dst=remap[table.dst],
        # A path marginal only for want of samples says nothing about the hardware.
        verdict=np.where(sample_limited(results.run.policy, table), 0, table.verdict).astype(
            np.int64
        ),
        value_us=table.values(metric),
        tier=table.tier,
        hops=table.hops,
        errors=table.error,
        goodput_gbps=causes.best_goodput(table),
    )


# -- levels: lower medians per group, and the peers' --------------------------------------


def lower_medians(keys: IntArray, values: FloatArray, size: int) -> FloatArray:
    """Per key 0..size-1 the lower median of its values (more than half of them are at
    least this large), NaN for a key without any. ``values`` may hold inf, never NaN."""
    out = np.full(size, np.nan)
    if not len(keys):
        return out
    # sorted by key, then value: one argsort of (key, the value's rank) as one int64, a
    # third of np.lexsort's CPU over 1,024 nodes' million path ends (equal values tie
    # in any order: only the values are read)
    n = len(values)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(values)] = np.arange(n)
    order = np.argsort(keys.astype(np.int64) * n + rank)
    counts = np.bincount(keys, minlength=size)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    has = counts > 0
    out[has] = values[order][starts[has] + (counts[has] - 1) // 2]
    return out


def peer_levels(groups: IntArray, levels: FloatArray) -> tuple[FloatArray, IntArray]:
    """For each entry: the lower median of the levels of the *other* entries of its group,
    and how many there are (NaN and 0 when it is alone)."""
    n = len(levels)
    ref, peers = np.full(n, np.nan), np.zeros(n, dtype=np.int64)
    if not n:
        return ref, peers
    order = np.lexsort((levels, groups))
    g_sorted = groups[order]
    counts = np.bincount(g_sorted - g_sorted.min())[g_sorted - g_sorted.min()]
    new = np.ones(n, dtype=bool)
    new[1:] = g_sorted[1:] != g_sorted[:-1]
    starts = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    rank = np.arange(n) - starts
    others = counts - 1
    j = (others - 1) // 2  # the lower median's index among the others
    pick = starts + np.where(rank <= j, j + 1, j)
    ok = others >= 1
    values = levels[order]
    got = np.full(n, np.nan)
    got[ok] = values[np.minimum(pick[ok], n - 1)]
    ref[order] = got
    peers[order] = others
    return ref, peers


def _stands_out(level: FloatArray, ref: FloatArray, threshold: float) -> BoolArray:
    """``level`` beyond ``threshold`` times a finite, positive peer level."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(ref) & (ref > 0) & (level > threshold * ref)


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


def _contrast(tier: int, level: float, ref: float, peers: int, repeat: Repeatability) -> Contrast:
    return Contrast(
        tier=TIERS[tier],
        level=_us(level),
        peers_level=_us(ref),
        peers=peers,
        threshold=repeat.ratio,
        source=repeat.decisive.source,
    )


# -- distance ------------------------------------------------------------------------


def distance_tiers(c: PathColumns) -> set[Tier]:
    """Tiers whose paths fail because of distance (rule 1 of the module docstring)."""
    bad = c.verdict > 0
    near = c.tier == TIERS.index(Tier.SAME_RACK)
    if near.any() and (~bad[near]).mean() < NEAR_SAFE:
        return set()
    far = set()
    for t in FAR_TIERS:
        mine = c.tier == TIERS.index(t)
        n_bad = int((bad & mine).sum())
        if n_bad >= 2 and n_bad / int(mine.sum()) >= MAJORITY:
            far.add(t)
    return far


def distance(c: PathColumns, metric: Metric) -> tuple[DistanceEvidence, ...]:
    """The evidence of each distance tier (``distance_tiers``), nearest first."""
    far = distance_tiers(c)
    bad = c.verdict > 0
    near = c.tier == TIERS.index(Tier.SAME_RACK)
    out = []
    for t in FAR_TIERS:
        if t not in far:
            continue
        mine = c.tier == TIERS.index(t)
        measured = c.value_us[bad & mine & np.isfinite(c.value_us)]
        hops = np.unique(c.hops[mine & (c.hops != NO_HOPS)]).tolist()
        out.append(
            DistanceEvidence(
                metric=metric,
                tier=t,
                bad_paths=int((bad & mine).sum()),
                paths=int(mine.sum()),
                unsafe=bool((c.verdict[mine] == 2).any()),
                low_us=float(measured.min()) if len(measured) else None,
                high_us=float(measured.max()) if len(measured) else None,
                hops=tuple(int(h) for h in hops),
                near_safe=int((near & ~bad).sum()),
                near_paths=int(near.sum()),
            )
        )
    return tuple(out)


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


# -- the rules -----------------------------------------------------------------------


def localise(
    c: PathColumns, metric: Metric, repeat: Repeatability, goodput: Repeatability | None = None
) -> tuple[Suspect, ...]:
    """The suspects (module docstring); ``goodput``: the line bulk goodput must clear
    (``repeatability.of_goodput``)."""
    if topology_unknown(c):
        return tuple(_asymmetries(c, metric, repeat))
    threshold = repeat.ratio
    n_nodes, n_racks = len(c.node_names), len(c.rack_names)
    bad = c.verdict > 0
    slow = np.where(np.isnan(c.value_us), np.inf, c.value_us)  # a failed path: slowest
    far = distance_tiers(c)
    near = ~np.isin(c.tier, [TIERS.index(t) for t in far])
    ranked = worst_first(c.verdict, c.value_us)
    both = np.concatenate([c.src, c.dst])
    bad2, near2 = np.concatenate([bad, bad]), np.concatenate([near, near])
    idx2 = np.concatenate([np.arange(len(bad))] * 2)
    paths_all = np.bincount(both, minlength=n_nodes)
    bad_all = np.bincount(both[bad2], minlength=n_nodes)
    paths_of = np.bincount(both[near2], minlength=n_nodes)  # outside distance tiers
    bad_of = np.bincount(both[near2 & bad2], minlength=n_nodes)
    overall = float(np.nanmedian(c.value_us)) if np.isfinite(c.value_us).any() else math.nan

    # rule 2: per (node, tier), the node's level against its peers' at that tier
    tier2 = np.concatenate([c.tier, c.tier])
    key = both * N_TIERS + tier2
    size = n_nodes * N_TIERS
    count_k = np.bincount(key, minlength=size)
    bad_k = np.bincount(key[bad2], minlength=size)
    level_k = lower_medians(key, np.concatenate([slow, slow]), size)
    present = np.flatnonzero(count_k > 0)
    node_of, tier_of = present // N_TIERS, present % N_TIERS
    ref_p, peers_p = peer_levels(c.node_group[node_of] * N_TIERS + tier_of, level_k[present])
    qualify = (
        (bad_k[present] >= 2)
        & (bad_k[present] > MAJORITY * count_k[present])
        & _stands_out(level_k[present], ref_p, threshold)
    )
    decisive: dict[int, int] = {}  # node -> position in ``present`` of its decisive tier
    for p in np.flatnonzero(qualify).tolist():
        n = int(node_of[p])
        ratio = level_k[present[p]] / ref_p[p]
        score = (int(bad_k[present[p]]), ratio)
        held = decisive.get(n)
        if held is None or score > (
            int(bad_k[present[held]]),
            level_k[present[held]] / ref_p[held],
        ):
            decisive[n] = p
    culprit = np.zeros(n_nodes, dtype=bool)
    culprit[list(decisive)] = True
    out: list[Suspect] = []
    if decisive:
        mask = bad2 & culprit[both]
        worst = worst_per_group(both[mask], idx2[mask], ranked, n_nodes)
        medians = group_medians(both, np.concatenate([c.value_us] * 2), n_nodes)
        for n in sorted(decisive, key=lambda n: (-bad_all[n], c.node_names[n])):
            p = decisive[n]
            out.append(
                Suspect(
                    SuspectKind.NODE,
                    NodeSubject(c.node_names[n]),
                    NodeEvidence(
                        metric=metric,
                        bad_paths=int(bad_all[n]),
                        paths=int(paths_all[n]),
                        median_us=_us(float(medians[n])),
                        all_paths_median_us=_us(overall),
                        worst=_path_evidence(c, int(worst[n])),
                        contrast=_contrast(
                            int(tier_of[p]),
                            float(level_k[present[p]]),
                            float(ref_p[p]),
                            int(peers_p[p]),
                            repeat,
                        ),
                    ),
                )
            )

    out += _goodput_nodes(c, metric, goodput or repeatability.of_goodput(), culprit, overall)

    # rule 3: rack pairs, over the bad paths no node or distance explains
    rest = bad & near & ~culprit[c.src] & ~culprit[c.dst]
    ra, rb = c.node_rack[c.src], c.node_rack[c.dst]
    has_racks = (ra >= 0) & (rb >= 0)
    rack_key = np.minimum(ra, rb) * max(n_racks, 1) + np.maximum(ra, rb)
    flagged = np.zeros(max(n_racks, 1) ** 2, dtype=bool)
    if n_racks and rest.any():
        rsize = n_racks * n_racks
        rk = rack_key[has_racks]
        totals = np.bincount(rk, minlength=rsize)
        in_rest = rest & has_racks
        bad_rest = np.bincount(rack_key[in_rest], minlength=rsize)
        level_r = lower_medians(rk, slow[has_racks], rsize)
        # a rack pair's tier: the one most of its paths have
        by_tier = np.bincount(rk * N_TIERS + c.tier[has_racks], minlength=rsize * N_TIERS)
        tier_r = by_tier.reshape(rsize, N_TIERS).argmax(axis=1)
        pairs = np.flatnonzero(totals > 0)
        ref_r = np.full(rsize, np.nan)
        peers_r = np.zeros(rsize, dtype=np.int64)
        ref_r[pairs], peers_r[pairs] = peer_levels(tier_r[pairs], level_r[pairs])
        flagged = (
            (bad_rest >= 2)
            & (bad_rest > MAJORITY * np.maximum(totals, 1))
            & _stands_out(level_r, ref_r, threshold)
        )
        worst = worst_per_group(rack_key[in_rest], np.flatnonzero(in_rest), ranked, rsize)
        medians = group_medians(rk, c.value_us[has_racks], rsize)
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
                    RackPairSubject(a, b),
                    RackPairEvidence(
                        metric=metric,
                        racks=(a, b),
                        bad_paths=int(bad_rest[k]),
                        paths=int(totals[k]),
                        median_us=_us(float(medians[k])),
                        all_paths_median_us=_us(overall),
                        worst=_path_evidence(c, int(worst[k])),
                        contrast=_contrast(
                            int(tier_r[k]),
                            float(level_r[k]),
                            float(ref_r[k]),
                            int(peers_r[k]),
                            repeat,
                        ),
                    ),
                )
            )

    # rule 4: links, each against its tier
    isolated = rest & ~(has_racks & flagged[np.where(has_racks, rack_key, 0)])
    isolated &= (paths_of[c.src] >= 2) & (paths_of[c.dst] >= 2)  # seen elsewhere too
    level_t = lower_medians(c.tier, slow, N_TIERS)
    paths_t = np.bincount(c.tier, minlength=N_TIERS)
    isolated &= _stands_out(slow, level_t[c.tier], threshold) & (paths_t[c.tier] >= 2)
    names = c.node_names
    links = sorted(
        np.flatnonzero(isolated).tolist(),
        key=lambda i: (-c.verdict[i], names[c.src[i]], names[c.dst[i]]),
    )
    for i in links:
        s, d, t = int(c.src[i]), int(c.dst[i]), int(c.tier[i])
        out.append(
            Suspect(
                SuspectKind.LINK,
                LinkSubject(names[s], names[d]),
                LinkEvidence(
                    metric=metric,
                    path=_path_evidence(c, i),
                    src_bad_elsewhere=int(bad_of[s]) - 1,
                    src_paths_elsewhere=int(paths_of[s]) - 1,
                    dst_bad_elsewhere=int(bad_of[d]) - 1,
                    dst_paths_elsewhere=int(paths_of[d]) - 1,
                    contrast=_contrast(
                        t, float(slow[i]), float(level_t[t]), int(paths_t[t]) - 1, repeat
                    ),
                ),
            )
        )
    out += _asymmetries(c, metric, repeat)
    return tuple(out)


def _goodput_nodes(
    c: PathColumns, metric: Metric, line: Repeatability, culprit: BoolArray, overall: float
) -> list[Suspect]:
    """Rule 2 on bulk goodput (lower is worse): at one tier more than half (and at least
    two) of a node's paths read below its peers' level divided by ``line``, and its own
    level (more than half of its paths read at most this) is that far below its peers'.
    A NIC shaped to a fifth of its twin reads this way while its RTT stays healthy.
    Nodes already suspects on the RTT are left as they are; the new ones are marked in
    ``culprit``, so their paths are held against no rack or link."""
    n_nodes = len(c.node_names)
    g = c.goodput_gbps
    has = np.isfinite(g) & (g > 0)
    if has.sum() < 2:
        return []
    threshold = line.ratio
    both = np.concatenate([c.src, c.dst])[np.concatenate([has, has])]
    rows = np.concatenate([np.arange(len(g))] * 2)[np.concatenate([has, has])]
    values = g[rows]
    key = both * N_TIERS + c.tier[rows]
    size = n_nodes * N_TIERS
    count_k = np.bincount(key, minlength=size)
    level_k = -lower_medians(key, -values, size)  # more than half read at most this
    present = np.flatnonzero(count_k > 0)
    node_of, tier_of = present // N_TIERS, present % N_TIERS
    neg_ref, peers_p = peer_levels(c.node_group[node_of] * N_TIERS + tier_of, -level_k[present])
    ref_k = np.full(size, np.nan)
    ref_k[present] = -neg_ref
    with np.errstate(invalid="ignore"):
        low = values * threshold < ref_k[key]
        low_k = np.bincount(key[low], minlength=size)
        qualify = (
            (low_k[present] >= 2)
            & (low_k[present] > MAJORITY * count_k[present])
            & np.isfinite(ref_k[present])
            & (level_k[present] * threshold < ref_k[present])
        )
    decisive: dict[int, int] = {}
    for p in np.flatnonzero(qualify).tolist():
        n = int(node_of[p])
        if culprit[n]:
            continue
        score = (int(low_k[present[p]]), ref_k[present[p]] / level_k[present[p]])
        held = decisive.get(n)
        if held is None or score > (
            int(low_k[present[held]]),
            ref_k[present[held]] / level_k[present[held]],
        ):
            decisive[n] = p
    out = []
    medians = group_medians(
        np.concatenate([c.src, c.dst]), np.concatenate([c.value_us] * 2), n_nodes
    )
    for n in sorted(decisive, key=lambda n: (-low_k[present[decisive[n]]], c.node_names[n])):
        p = decisive[n]
        k = int(present[p])
        mine = rows[(both == n) & (key == k) & low]
        worst_row = int(mine[np.argmin(g[mine])])
        ref, level = float(ref_k[k]), float(level_k[k])
        culprit[n] = True
        out.append(
            Suspect(
                SuspectKind.NODE,
                NodeSubject(c.node_names[n]),
                NodeEvidence(
                    metric=metric,
                    bad_paths=int(low_k[k]),
                    paths=int(count_k[k]),
                    median_us=_us(float(medians[n])),
                    all_paths_median_us=_us(overall),
                    worst=_path_evidence(c, worst_row),
                    cause=Cause(
                        CauseKind.BANDWIDTH,
                        int(low_k[k]),
                        f"{float(g[worst_row]):,.2f} Gbit/s vs {ref:,.2f} Gbit/s on its peers",
                        int(low_k[k]),
                    ),
                    contrast=Contrast(
                        tier=TIERS[int(tier_of[p])],
                        level=level,
                        peers_level=ref,
                        peers=int(peers_p[p]),
                        threshold=threshold,
                        source=line.decisive.source,
                        measure=Measure.GOODPUT,
                    ),
                ),
            )
        )
    return out


def _asymmetries(c: PathColumns, metric: Metric, repeat: Repeatability) -> list[Suspect]:
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
    # a failed direction against a measured one: as far apart as they can be
    ratio = np.where(np.isnan(a) != np.isnan(b), np.inf, ratio)
    beyond = np.nan_to_num(ratio, nan=1.0) > repeat.ratio
    differs = beyond & ((c.verdict[i] != c.verdict[j]) | (ratio >= ASYMMETRY_RATIO))
    found_pairs: list[tuple[float, Suspect]] = []
    for k in np.flatnonzero(differs).tolist():
        fi, ri = int(i[k]), int(j[k])
        r = float(ratio[k])
        found_pairs.append(
            (
                -r if math.isfinite(r) else -math.inf,
                Suspect(
                    SuspectKind.ASYMMETRY,
                    PairSubject(c.node_names[c.src[fi]], c.node_names[c.dst[fi]]),
                    AsymmetryEvidence(
                        metric=metric,
                        forward=_path_evidence(c, fi),
                        reverse=_path_evidence(c, ri),
                        ratio=r if math.isfinite(r) else None,
                        threshold=repeat.ratio,
                    ),
                ),
            )
        )
    return [s for _, s in sorted(found_pairs, key=lambda x: x[0])]


# -- a run's localisation -----------------------------------------------------------


def retest_base(retest: Results, base: Results) -> Results:
    """The run ``base`` with ``retest``'s re-measurements in place of the paths they
    re-measured (and any path it added): what a re-test localises on."""
    names = [n.name for n in base.nodes]
    again = set(retest.paths.keys())
    keep = [i for i, k in enumerate(base.paths.keys()) if k not in again]
    table = concat([base.paths.take(keep), retest.paths], names)
    return dataclasses.replace(base, paths=table, run=dataclasses.replace(retest.run))


def _retest_measure(retest: Results, base: Results, metric: Metric) -> RepeatMeasure | None:
    rows = base.paths.rows_of(retest.paths.keys())
    found = [(i, r) for i, r in enumerate(rows) if r is not None]
    if not found:
        return None
    after = retest.paths.values(metric)[[i for i, _ in found]]
    before = base.paths.values(metric)[[r for _, r in found]]
    return repeatability.remeasured(RepeatSource.RETEST, before, after)


def _retest_goodput(retest: Results, base: Results) -> RepeatMeasure | None:
    rows = base.paths.rows_of(retest.paths.keys())
    found = [(i, r) for i, r in enumerate(rows) if r is not None]
    if not found:
        return None
    after = causes.best_goodput(retest.paths)[[i for i, _ in found]]
    before = causes.best_goodput(base.paths)[[r for _, r in found]]
    measure = repeatability.remeasured(RepeatSource.RETEST, before, after)
    return None if measure is None else dataclasses.replace(measure, source=RepeatSource.RETEST)


def localisation(
    results: Results, base: Results | None = None
) -> tuple[tuple[Suspect, ...], Localisation]:
    """The run's suspects and what they were judged on. ``base``: the run ``results``
    re-tests (``netqual retest``): localised together (``retest_base``)."""
    metric = results.run.policy.metric
    whole = results if base is None else retest_base(results, base)
    more = [] if base is None else [_retest_measure(results, base, metric)]
    inter = [results.interference] + ([] if base is None else [base.interference])
    repeat = repeatability.of_run(whole.paths, metric, inter, more)
    line = repeatability.of_goodput([] if base is None else [_retest_goodput(results, base)])
    c = columns(whole, metric)
    found = causes.attach(whole, localise(c, metric, repeat, line), repeat)
    found = tuple(s for s in found if not _tail_only(s))
    nics = {n.name: n.nic for n in whole.nodes if n.nic is not None and n.agent is not None}
    if nics:
        found = by_nic(c, found, nics, metric)
    loc = Localisation(
        repeatability=repeat,
        distance=distance(c, metric) if not topology_unknown(c) else (),
        paths=len(whole.paths),
        retested=0 if base is None else len(results.paths),
        base=None if base is None else results.retest_of,
    )
    return found, loc


def _tail_only(s: Suspect) -> bool:
    """A link candidate whose one path shows no cause and did not fail (rule 4)."""
    e = s.evidence
    if not isinstance(e, LinkEvidence):
        return False
    return e.cause is None and e.path.error is None and e.path.value_us is not None


def suspects(results: Results) -> tuple[Suspect, ...]:
    return localisation(results)[0]


def by_nic(
    c: PathColumns, found: tuple[Suspect, ...], nics: Mapping[str, Nic], metric: Metric
) -> tuple[Suspect, ...]:
    """With endpoints below the node (``NODE/NIC``, docs/rails.md), the node rule's
    suspects are NICs. Read per rail plane and per node:

    - ``rail``: more than half of a rail's endpoints are suspects (and at least two): the
      plane (its switches) is the common cause, not each NIC;
    - ``node``: every NIC of a node is a suspect: the host itself;
    - ``nic``: otherwise, one NIC bad while the node's other rails are fine.
    """
    culprits: dict[str, NodeEvidence] = {
        s.subject: s.evidence
        for s in found
        if isinstance(s.evidence, NodeEvidence) and s.subject in nics
    }
    if not culprits:
        return found
    rail_of = {name: nic.rail for name, nic in nics.items()}
    node_of = {name: split_endpoint(name)[0] for name in nics}
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
            out.append(Suspect(SuspectKind.RAIL, RailSubject(rail), ev))
    left = {e: s for e, s in culprits.items() if rail_of[e] not in rails_bad}
    for node in sorted({node_of[e] for e in left}):
        mine = sorted((e for e in nics if node_of[e] == node), key=lambda e: rail_of[e])
        bad = [e for e in mine if e in left]
        if len(bad) == len(mine) and len(mine) > 1:
            ev_node = dataclasses.replace(left[bad[0]], nics=tuple(nics[e].name for e in bad))
            out.append(Suspect(SuspectKind.NODE, NodeSubject(node), ev_node))
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
                nic=nics[e].name, rail=rail_of[e], other_nics=others, cause=n.cause,
                contrast=n.contrast,
            )  # fmt: skip
            out.append(Suspect(SuspectKind.NIC, NicSubject(node, nics[e].name), ev_nic))
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
    file written without them (nor its localisation: a run with none writes no key)."""
    if results.suspects is not None:
        return results.suspects
    if results.localisation is not None:
        return ()
    return suspects(results)


def run_localisation(results: Results) -> Localisation:
    """The localisation a run stored, or (an older file) computed from its paths alone."""
    if results.localisation is not None:
        return results.localisation
    return localisation(results)[1]
