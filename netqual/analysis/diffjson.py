"""``diff --json``: a ``RunDiff`` as a JSON document, written in pieces straight from the
columns of the two runs (``netqual.analysis.diff``), exactly as ``json.dumps(indent=1)``
would write it, without a dict per path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import numpy as np

from netqual.analysis.diff import NOISE_NO, NOISE_UNKNOWN, NOISE_YES, Changes, Rows, RunDiff
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.table.paths import VERDICTS, FloatArray, IntArray

# --json rows are formatted this many at a time: bounded memory, few writes
_JSON_CHUNK = 32_768


def _numbers(col: FloatArray) -> list[str]:
    """Each value as json.dumps writes the float; NaN (the value is absent) as null."""
    out = list(map(float.__repr__, col.tolist()))
    for k in np.flatnonzero(np.isnan(col)).tolist():
        out[k] = "null"
    return out


def _texts(texts: Sequence[str], codes: IntArray) -> list[str]:
    return list(map(texts.__getitem__, codes.tolist()))


# one item of a list member, as json.dumps(indent=1) writes a dict two levels deep
_CHANGE = (
    '  {{\n   "src": {},\n   "dst": {},\n   "old_verdict": {},\n   "new_verdict": {},\n'
    '   "old_us": {},\n   "new_us": {},\n   "delta_us": {},\n   "within_noise": {}\n  }}'
)
_PATH = '  {{\n   "src": {},\n   "dst": {},\n   "verdict": {}\n  }}'
_VERDICT_TEXTS = [json.dumps(v.value) for v in VERDICTS]
NOISE_TEXTS = {NOISE_UNKNOWN: "null", NOISE_NO: "false", NOISE_YES: "true"}


def _change_items(c: Changes) -> Iterator[str]:
    """The pairs as list items, a chunk of them joined per piece (built column by column:
    half a million dicts and one 100 MB string are what this avoids)."""
    m = c.matched
    names = [json.dumps(s) for s in m.new.names]  # a change is named as the new run has it
    noise = [NOISE_TEXTS[k] for k in (NOISE_NO, NOISE_YES, NOISE_UNKNOWN)]  # [-1] unknown
    for lo in range(0, len(c), _JSON_CHUNK):
        at = c.positions[lo : lo + _JSON_CHUNK]
        old_rows, new_rows = m.old_rows[at], m.new_rows[at]
        cols = (
            _texts(names, m.new.src[new_rows]),
            _texts(names, m.new.dst[new_rows]),
            _texts(_VERDICT_TEXTS, m.old.verdict[old_rows]),
            _texts(_VERDICT_TEXTS, m.new.verdict[new_rows]),
            _numbers(m.old_us[at]),
            _numbers(m.new_us[at]),
            _numbers(m.delta_us[at]),
            _texts(noise, m.noise[at]),
        )
        yield ",\n".join(map(_CHANGE.format, *cols))


def _path_items(r: Rows) -> Iterator[str]:
    t = r.table
    names = [json.dumps(s) for s in t.names]
    for lo in range(0, len(r), _JSON_CHUNK):
        rows = r.rows[lo : lo + _JSON_CHUNK]
        cols = (
            _texts(names, t.src[rows]),
            _texts(names, t.dst[rows]),
            _texts(_VERDICT_TEXTS, t.verdict[rows]),
        )
        yield ",\n".join(map(_PATH.format, *cols))


def _list(items: Iterator[str]) -> Iterator[str]:
    """A list member of the document: "[]", or its items one per chunk between brackets."""
    started = False
    for chunk in items:
        yield (",\n" if started else "[\n") + chunk
        started = True
    yield "\n ]" if started else "[]"


def _small(value: object) -> str:
    """A small member's value as json.dumps(indent=1) writes it one level deep."""
    return json.dumps(value, indent=1).replace("\n", "\n ")


def diff_json(d: RunDiff) -> Iterator[str]:
    """The diff as a JSON document, in pieces: exactly the text of ``json.dumps(doc,
    indent=1)`` for the document below, without holding every path's dict (``deltas`` lists
    every common path, half a million in a 1,024-node mesh).

    {"metric", "old", "new", "counts": {verdict: [old, new]}, "worse": [change],
     "worse_rule", "changed_class": [change], "deltas": [change], "new_paths": [path],
     "missing_paths": [path]}, and "incomparable": [{field, new, old}] when the runs were
    compared anyway (--allow-incomparable); a change is {src, dst, old_verdict, new_verdict, old_us,
    new_us, delta_us, within_noise} in "metric", a path {src, dst, verdict}; "worse_rule"
    {"metric": "p99", max_p99_increase_pct, min_delta_us} is the rise test (p99 always)."""
    counts = {v.value: [d.old_counts.get(v, 0), d.new_counts.get(v, 0)] for v in Verdict}
    rule = {
        "metric": Metric.P99.value,  # the rise test judges p99 whatever "metric" says
        "max_p99_increase_pct": d.increase_pct,
        "min_delta_us": d.min_delta_us,
    }
    members: list[tuple[str, Iterator[str]]] = [
        ("metric", iter([_small(d.metric.value)])),
        ("old", iter([_small(d.old_source)])),
        ("new", iter([_small(d.new_source)])),
        ("counts", iter([_small(counts)])),
        ("worse", _list(_change_items(d.worse))),
        ("worse_rule", iter([_small(rule)])),
        ("changed_class", _list(_change_items(d.changed_class))),
        ("deltas", _list(_change_items(d.deltas))),
        ("new_paths", _list(_path_items(d.new_paths))),
        ("missing_paths", _list(_path_items(d.missing_paths))),
    ]
    if d.incomparable:
        found = [x.to_dict() for x in d.incomparable]
        members.append(("incomparable", iter([_small(found)])))
    for k, (name, pieces) in enumerate(members):
        yield ("{\n" if k == 0 else ",\n") + f" {json.dumps(name)}: "
        yield from pieces
    yield "\n}"
