"""What a run diff says beside its tables, in the same words in the terminal and the HTML
page: what "worse" means, how many changes lie within the run-to-run noise, which runs are
preliminary, and each change with its noise mark."""

from __future__ import annotations

from netqual.analysis.diff import PathChange, RunDiff


def change_text(c: PathChange) -> str:
    """'-64.8 (-6%), noise': the metric's change in us, its percentage, and ", noise" when
    the two runs' 95% confidence intervals overlap; '-' when a run has no value."""
    if c.delta_us is None:
        return "-"
    pct = f" ({c.delta_pct:+.0f}%)" if c.delta_pct is not None else ""
    noise = ", noise" if c.within_noise else ""
    return f"{c.delta_us:+.1f}{pct}{noise}"


def noise_sentence(d: RunDiff) -> str:
    """'11 of 28 changes lie within the run-to-run noise (...)', or why it is unknown."""
    if not d.judged:
        return "run-to-run noise unknown (no confidence intervals in these results)"
    return (
        f"{len(d.noise):,} of {d.judged:,} changes lie within the run-to-run noise "
        f"(the two runs' 95% confidence intervals of {d.metric.value} overlap)"
    )


def worse_rule(d: RunDiff) -> str:
    return (
        f"worse = dropped a class, or p99 up more than {d.increase_pct:g}% and "
        f"{d.min_delta_us:g} us (the gate's max_p99_increase_pct, min_delta_us)"
    )


def preliminary_sentence(d: RunDiff) -> str | None:
    """Which runs kept fewer samples than their policy needs; None when neither did."""
    old, new = d.old_preliminary, d.new_preliminary
    if old and new:
        detail = old.removeprefix("PRELIMINARY ")
        same = detail == new.removeprefix("PRELIMINARY ")
        both = detail if same else f"old {detail}, new {new.removeprefix('PRELIMINARY ')}"
        return f"Both runs are PRELIMINARY {both}: no verdict of either is final"
    if old:
        return f"The old run is {old}: its verdicts are not final"
    if new:
        return f"The new run is {new}: its verdicts are not final"
    return None
