"""Terminal output (rich): run summary, matrix, per-hop view, worst paths, probe tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.analysis import localise
from netqual.analysis.matrix import (
    STATISTICS,
    Grouping,
    GroupRow,
    Statistic,
    build_matrix,
    group_paths,
    hop_groups,
    rack_pair_groups,
    rail_groups,
    tier_groups,
)
from netqual.analysis.narrative import (
    interference_headline,
    nodes_text,
    unmeasured_sentence,
    verdict_sentence,
)
from netqual.analysis.repeatability import describe
from netqual.base.names import visible
from netqual.base.units import format_duration_us, format_size, format_us
from netqual.model.path import PathResult, Tier, path_label
from netqual.model.suspects import (
    AsymmetryEvidence,
    Contrast,
    LinkEvidence,
    Measure,
    NicEvidence,
    NodeEvidence,
    OtherNic,
    PathEvidence,
    RailEvidence,
    Suspect,
)
from netqual.model.verdict import Verdict
from netqual.render.decision import print_decision
from netqual.render.fanin import print_fanin
from netqual.render.fleet import fleet_line
from netqual.render.hosts import hosts_line
from netqual.render.labels import abbreviate
from netqual.render.multirail import print_multirail
from netqual.table.paths import TIERS
from netqual.table.run import Results
from netqual.workload.impact import two_verdicts_sentence

STYLE = {Verdict.SAFE: "green", Verdict.MARGINAL: "yellow", Verdict.UNSAFE: "bold red"}
MATRIX_MAX_NODES = 16


def verdict_text(v: Verdict) -> Text:
    return Text(v.value, style=STYLE[v])


def print_results(
    console: Console, results: Results, stat: str | None = None, show_all: bool = False
) -> None:
    """Summary sentence, counts, matrix (per rack when large), per-hop table, worst paths.

    ``stat`` names the matrix's statistic (``netqual.analysis.matrix.STATISTICS``); default: the
    policy metric. A large run shows its worst rack pairs and first suspects only, so the
    whole fits a screen or two (at most about 60 lines); ``show_all`` prints every one."""
    run = results.run
    pol = run.policy
    unmeasured = unmeasured_sentence(results)
    if unmeasured is None:  # the answer first; an incomplete run says so before anything
        print_decision(console, results.decision)
    # headlines are one line each (soft_wrap: a terminal folds them, a log keeps them whole)
    console.print(Text(verdict_sentence(results), style="bold"), soft_wrap=True)
    if unmeasured is not None:
        console.print(Text(unmeasured, style="bold red"), soft_wrap=True)
        print_decision(console, results.decision)
    if (both := two_verdicts_sentence(results)) is not None:
        console.print(Text(both, style="bold"), soft_wrap=True)
    if (warning := interference_headline(results)) is not None:
        console.print(Text(warning, style="bold red"), soft_wrap=True)
    if results.decision is None:  # else the decision's line has the counts
        counts = Text("  ").join(
            Text.assemble((v.value, STYLE[v]), f" {results.summary.counts.get(v, 0):,}")
            for v in Verdict
        )
        console.print(counts)
    if results.fleet is not None:
        console.print(fleet_line(results.fleet), soft_wrap=True)
    if (hosts := hosts_line(results)) is not None:
        console.print(hosts, soft_wrap=True)
    console.print(
        f"policy: {pol.metric.value} <= {pol.safe_max_us:g} us safe, > {pol.unsafe_above_us:g} us "
        f"unsafe, min {pol.min_samples:,} samples | transport {run.transport} | {run.mode.value} | "
        f"{nodes_text(results.nodes)} | {run.started_at}",
        style="dim",
        soft_wrap=True,
    )
    if len(results.nodes) <= MATRIX_MAX_NODES:
        print_matrix(console, results, STATISTICS[stat or results.run.policy.metric.value])
    else:
        limit = None if show_all else RACK_PAIRS_SHOWN
        groups = rack_pair_groups(results.nodes, results.paths)
        print_groups(console, results, "rack pair", groups, limit)
    print_groups(console, results, "hops", hop_groups(results.paths))
    if (results.paths.tier != TIERS.index(Tier.UNKNOWN)).any():
        print_groups(console, results, "tier", tier_groups(results.paths))
    if (rails := rail_groups(results.paths)) is not None:
        print_groups(console, results, "rail", rails)
    print_worst(console, results)
    print_suspects(console, results, None if show_all else SUSPECTS_SHOWN)
    print_fanin(console, results)
    print_multirail(console, results)


SUSPECTS_SHOWN = 6
RACK_PAIRS_SHOWN = 8  # the worst ones; --all for every rack pair


def suspect_line(s: Suspect) -> str:
    """One suspect with its evidence, e.g. 'node gpu03: 14 of 15 paths not offload-safe ...',
    and the cause most of its bad paths show ('; counters: loss (12 TCP retransmissions)',
    '; cause: delay (7 of 7 bad paths: p50 ...)')."""
    e = s.evidence
    c = e.cause if isinstance(e, NodeEvidence | NicEvidence | LinkEvidence) else None
    if c is None:
        return _suspect_line(s)
    share = f"{c.paths} of {c.of} bad paths: " if c.of is not None else ""
    said = visible(f"{c.kind.value} ({share}{c.example})")
    return f"{_suspect_line(s)}; {'counters' if c.kind.from_counters else 'cause'}: {said}"


def bad_what(c: Contrast | None) -> str:
    """What a suspect's bad paths are: not offload-safe, or (on goodput) slow to read."""
    if c is not None and c.measure is Measure.GOODPUT:
        return "read far below their peers' bulk goodput"
    return "not offload-safe"


def contrast_text(c: Contrast, metric: str) -> str:
    """'same-rack p99 812 us vs 64 us on its peers, x12.7 > x1.20 (interference)', or on
    goodput 'same-rack goodput 0.20 Gbit/s vs 0.99 Gbit/s on its peers, x5.0 > x2.00'."""

    def value(x: float | None, missing: str) -> str:
        if x is None:
            return missing
        return f"{format_us(x)} us" if c.measure is Measure.RTT else f"{x:,.2f} Gbit/s"

    what = metric if c.measure is Measure.RTT else "bulk goodput"
    peers = value(c.peers_level, "-")
    if c.level is None or c.ratio is None:
        return f"{c.tier.value}: failed (no samples) where its peers read {what} {peers}"
    return (
        f"{c.tier.value} {what} {value(c.level, '-')} vs {peers} on its peers, "
        f"x{c.ratio:.1f} > x{c.threshold:.2f} ({c.source.value})"
    )


def _suspect_line(s: Suspect) -> str:
    e = s.evidence
    metric = e.metric.value

    def path(w: PathEvidence) -> str:
        value = w.error or f"{metric} {format_us(w.value_us)} us"
        return f"{path_label(w.src, w.dst)} {value} ({w.verdict.value})"

    if isinstance(e, AsymmetryEvidence):
        times = f", {e.ratio:.1f}x" if e.ratio is not None else ""
        beyond = f" > x{e.threshold:.2f}" if e.threshold is not None and times else ""
        return f"asymmetry {s.subject}: {path(e.forward)} vs {path(e.reverse)}{times}{beyond}"
    if isinstance(e, RailEvidence):
        shown = ", ".join(e.bad_nics)
        head = f"rail {e.rail}: {len(e.bad_nics):,} of {e.nics:,} NICs bad ({shown})"
        return f"{head}; worst {path(e.worst)}"
    if isinstance(e, LinkEvidence):
        p = e.path
        against = "" if e.contrast is None else f"; {contrast_text(e.contrast, metric)}"
        return (
            f"link {path(p)}; elsewhere {p.src} has {e.src_bad_elsewhere} of "
            f"{e.src_paths_elsewhere} paths bad, {p.dst} {e.dst_bad_elsewhere} of "
            f"{e.dst_paths_elsewhere}{against}"
        )
    median = ""
    mine, overall = e.median_us, e.all_paths_median_us
    if e.contrast is not None:
        median = f", {contrast_text(e.contrast, metric)}"
    elif mine is not None and overall is not None:
        median = f", median {metric} {format_us(mine)} us vs {format_us(overall)} us over all paths"
    what = bad_what(e.contrast)
    line = f"{s.kind.value} {s.subject}: {e.bad_paths:,} of {e.paths:,} paths {what}{median}"
    line += f"; worst {path(e.worst)}"
    if isinstance(e, NicEvidence):
        fine = "; ".join(_other_nic(o, metric) for o in e.other_nics)
        line += f"; other rails of {e.node}: {fine}" if fine else ""
    return line


def _other_nic(o: OtherNic, metric: str) -> str:
    """Another NIC of a suspect NIC's node: its rail, bad paths and median."""
    m = o.median_us
    shown = f", median {metric} {format_us(m)} us" if m is not None else ""
    return f"{o.nic} (rail {o.rail}) {o.bad_paths:,} of {o.paths:,} bad{shown}"


def print_suspects(console: Console, results: Results, limit: int | None = SUSPECTS_SHOWN) -> None:
    """Where the problem sits (netqual.analysis.localise): nodes, rack pairs, links, asymmetries."""
    found = localise.run_suspects(results)
    if (problem := localise.cannot_localise(results)) is not None:
        console.print(Text(f"suspects: {problem}", style="yellow"), soft_wrap=True)
    if not found:
        return
    loc = results.localisation
    head = "suspects (where the problem sits)"
    if loc is not None:
        line = describe(loc.repeatability.decisive)
        base = (
            f"; with the re-tested run's {loc.paths - loc.retested:,} other paths"
            if loc.base
            else ""
        )
        head = (
            f"suspects (where the problem sits: each differs from its peers at the same "
            f"distance by more than the run's repeatability, {line}{base})"
        )
    console.print(head, style="bold", soft_wrap=True)
    shown = found if limit is None else found[:limit]
    for s in shown:
        console.print(f"  {suspect_line(s)}", highlight=False)
    if len(found) > len(shown):
        console.print(
            f"  ... and {len(found) - len(shown):,} more in results.json (--all shows them)",
            style="dim",
        )


def print_matrix(console: Console, results: Results, stat: Statistic) -> None:
    """N x N of one statistic, coloured by each path's verdict. Names too long for the
    columns the console has are cut in the middle (labels.abbreviate: ``h1/…il0`` and
    ``h1/…il1``, never two identical ``h1/to-ra…``); the row names get what is left."""
    m = build_matrix(results.nodes, results.paths, stat.value)
    console.print(f"{stat.label}: row = source, column = destination", style="bold")
    rows: list[list[Text]] = []
    for i in range(len(m.names)):
        cells: list[Text] = []
        for j in range(len(m.names)):
            v, verdict = m.values[i][j], m.verdicts[i][j]
            if i == j or verdict is None:
                cells.append(Text("-", style="dim"))
            elif v is None:
                cells.append(Text("fail", style=STYLE[verdict]))
            else:
                text = f"{v:.2f}" if stat.name == "goodput" else format_us(v)
                cells.append(
                    Text(text if stat.name != "hops" else f"{v:.0f}", style=STYLE[verdict])
                )
        rows.append(cells)
    n = len(m.names)
    longest = max((len(name) for name in m.names), default=1)
    values = max((len(c.plain) for row in rows for c in row), default=1)
    # a column is its text, one space each side and a rule: 3 more; 1 for the left edge
    col_w = max(values, min(longest, (console.width - 1) // (n + 1) - 3))
    row_w = max(col_w, min(longest, console.width - 1 - n * (col_w + 3) - 3))
    table = Table()
    table.add_column("", no_wrap=True)
    for name in abbreviate(m.names, col_w):
        table.add_column(name, justify="right")
    for name, cells in zip(abbreviate(m.names, row_w), rows, strict=True):
        table.add_row(name, *cells)
    console.print(table)


# What a grouping's name means, said in its table's title where a reader first meets it
_SAID = {"tier": "where a path runs: same rack, across racks, remote site; "}


def print_groups(
    console: Console,
    results: Results,
    title: str,
    grouping: Grouping,
    limit: int | None = None,
) -> None:
    """One row per group; with ``limit``, only the worst groups, worst first (largest
    share of paths not offload-safe, then most unsafe, then worst p99), and a line for
    the rest."""
    rows = group_paths(results.paths, grouping)
    hidden: list[GroupRow] = []
    if limit is not None and len(rows) > limit:
        ranked = sorted(
            range(len(rows)),
            key=lambda i: (
                -(rows[i].marginal + rows[i].unsafe) / max(1, rows[i].paths),
                -rows[i].unsafe,
                -(rows[i].worst_p99_us or 0.0),
            ),
        )
        keep = set(ranked[:limit])
        hidden = [r for i, r in enumerate(rows) if i not in keep]
        rows = [rows[i] for i in ranked[:limit]]
    per_hop = title == "hops"
    # Short headers: the table fits 80 columns without wrapping one (us = microseconds).
    table = Table(title=f"by {title} ({_SAID.get(title, '')}us)", title_justify="left")
    cols = [title, "paths", "p50 median", *(["p50/hop"] if per_hop else [])]
    for col in [*cols, "p99 worst", "safe", "marginal", "unsafe"]:
        table.add_column(col, justify="left" if col == title else "right", no_wrap=True)
    for r in rows:
        extra = []
        if per_hop and r.key.isdigit() and int(r.key) and r.median_p50_us is not None:
            extra = [format_us(r.median_p50_us / int(r.key))]
        elif per_hop:
            extra = ["-"]
        table.add_row(
            r.key,
            f"{r.paths:,}",
            format_us(r.median_p50_us),
            *extra,
            format_us(r.worst_p99_us),
            Text(f"{r.safe:,}", style="green" if r.safe else "dim"),
            Text(f"{r.marginal:,}", style="yellow" if r.marginal else "dim"),
            Text(f"{r.unsafe:,}", style="bold red" if r.unsafe else "dim"),
        )
    if hidden:
        table.title = (
            f"by {title} ({_SAID.get(title, '')}us): the {len(rows)} worst of "
            f"{len(rows) + len(hidden):,}"
        )
    console.print(table)
    if hidden:
        clean = sum(1 for r in hidden if not r.marginal and not r.unsafe)
        console.print(
            f"  ... {len(hidden):,} more {title}s ({clean:,} of them all offload-safe); "
            "--all shows every one",
            style="dim",
        )


def print_worst(console: Console, results: Results, limit: int = 5) -> None:
    paths = results.paths
    rows = [i for i in paths.rows_of(results.summary.worst) if i is not None]
    worst = [paths.row(i) for i in rows if paths.verdict[i] != Verdict.SAFE.rank][:limit]
    if not worst:
        return
    table = Table(title="worst paths", title_justify="left")
    table.add_column("path")
    table.add_column("verdict")
    table.add_column("hops", justify="right")
    table.add_column("reasons")
    for p in worst:
        verdict = verdict_text(p.verdict)
        if results.preliminary:
            verdict.append(" (preliminary)", style="dim")
        table.add_row(
            f"{path_label(p.src, p.dst)}",
            verdict,
            "?" if p.hops is None else str(p.hops),
            "; ".join(p.reasons),
        )
    console.print(table)


def print_probe(console: Console, path: PathResult) -> None:
    """perftest-style tables for one pair."""
    console.print(
        Text.assemble(
            f"{path_label(path.src, path.dst)} over {path.transport}: ", verdict_text(path.verdict)
        )
    )
    if path.rtt is not None:
        r = path.rtt
        size = path.details.get("size_bytes", "-")
        t = Table(title="ping-pong, full round trip at the initiator (usec)", title_justify="left")
        for col in (
            "#bytes",
            "#iterations",
            "t_min",
            "t_max",
            "t_typical",
            "t_avg",
            "t_stdev",
            "99%",
            "99.9%",
            "hops",
        ):
            t.add_column(col, justify="right")
        p999 = format_us(r.p999_us) + ("*" if "p999" in r.untrusted else "")
        t.add_row(
            str(size),
            str(r.samples),
            format_us(r.min_us),
            format_us(r.max_us),
            format_us(r.p50_us),
            format_us(r.mean_us),
            format_us(r.stdev_us),
            format_us(r.p99_us),
            p999,
            "?" if path.hops is None else str(path.hops),
        )
        console.print(t)
        if r.untrusted:
            console.print(
                f"* too few samples for {', '.join(r.untrusted)} to be trusted", style="dim"
            )
    if path.bulk:
        b = Table(title="bulk read", title_justify="left")
        # completion in the unit its magnitude suits (2.6 ms, 686 ms), as the reasons say it
        for col in ("chunk", "depth", "reads", "Gbit/s", "completion p50", "p99", "max"):
            b.add_column(col, justify="right")
        for c in path.bulk:
            b.add_row(
                format_size(c.chunk_bytes),
                str(c.depth),
                str(c.reads),
                f"{c.goodput_gbps:.2f}",
                format_duration_us(c.completion_p50_us),
                format_duration_us(c.completion_p99_us),
                format_duration_us(c.completion_max_us),
            )
        console.print(b)
    for reason in path.reasons:
        console.print(f"- {reason}")
