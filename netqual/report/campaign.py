"""The campaign trend report (``campaign report --html``): one self-contained page, like
report.html. The first screen is for a decision-maker: this week's milestone verdict,
verdicts per week as a chart, what regressed and improved, open suspects with their age,
waivers that expire before the next milestone. Then tiers, rack pairs and workload verdicts
per week. All numbers come from ``netqual.campaign.trend``; this module only lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from netqual.campaign.trend import Distribution, GateRow, Trend
from netqual.files.outfiles import write_text_atomic
from netqual.report.html import render

CHART_H = 160  # px, the verdict chart's bar height
BAR_W, BAR_GAP = 36, 14


@dataclass(frozen=True)
class Bar:
    """One week's stacked bar: (class, y, height, count) segments, safe at the bottom."""

    week: int
    x: int
    segments: tuple[tuple[str, float, float, int], ...]


def verdict_bars(t: Trend) -> tuple[Bar, ...]:
    bars = []
    for i, w in enumerate(t.weeks):
        total = max(w.paths, 1)
        y = float(CHART_H)
        segs = []
        for cls, n in (("safe", w.safe), ("marginal", w.marginal), ("unsafe", w.unsafe)):
            h = CHART_H * n / total
            y -= h
            segs.append((cls, y, h, n))
        bars.append(Bar(w.week, 40 + i * (BAR_W + BAR_GAP), tuple(segs)))
    return tuple(bars)


def headline(t: Trend) -> tuple[str, str]:
    """The first line and its class: the latest week's milestone verdict if one was judged."""
    latest = [g for g in t.gates if g.week == t.latest_week]
    if latest:
        g: GateRow = latest[-1]
        word = "PASSED" if g.passed else "FAILED"
        return f"Week {g.week}: milestone {g.milestone} {word}", "pass" if g.passed else "fail"
    if not t.weeks:
        return "No run in this campaign yet", "none"
    w = t.weeks[-1]
    return f"Week {w.week}: {w.unsafe} unsafe, {w.marginal} marginal of {w.paths} paths", "none"


def by_group(dists: tuple[Distribution, ...]) -> dict[str, dict[int, Distribution]]:
    out: dict[str, dict[int, Distribution]] = {}
    for d in dists:
        out.setdefault(d.group, {})[d.week] = d
    return out


def render_campaign_html(t: Trend) -> str:
    title, cls = headline(t)
    return render(
        "campaign.html.j2", t=t, title=f"netqual campaign {t.campaign}: {title}", headline=title,
        headline_class=cls, bars=verdict_bars(t), chart_h=CHART_H, bar_w=BAR_W,
        chart_w=80 + len(t.weeks) * (BAR_W + BAR_GAP), weeks=[w.week for w in t.weeks],
        tiers=by_group(t.tiers), rack_pairs=by_group(t.rack_pairs),
    )  # fmt: skip


def write_campaign_html(t: Trend, path: Path) -> None:
    """Atomically, like report.html."""
    write_text_atomic(path, render_campaign_html(t))
