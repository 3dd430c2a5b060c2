"""The HTML report: one self-contained file (inline CSS, SVG and JS; no external URL).

Templates live in the top-level ``templates/`` of the source tree and ship inside the
wheel as ``netqual/templates``.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from netqual.analysis.diff import RunDiff
from netqual.analysis.diffnotes import change_text, noise_sentence, preliminary_sentence, worse_rule
from netqual.base.names import visible
from netqual.base.units import plural
from netqual.files.cachedir import cache_root, private_dir
from netqual.files.outfiles import write_text_atomic
from netqual.model.policy import Waiver
from netqual.model.verdict import Verdict
from netqual.report import fmt
from netqual.report.build import build_view
from netqual.report.htmltext import keep_units, prose
from netqual.report.view import GateBanner
from netqual.table.run import Results


def templates_dir() -> Path:
    """The installed copy (inside the wheel) when present, else the source tree's."""
    installed = files("netqual") / "templates"
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parents[2] / "templates"


def nobreak_options(text: str) -> markupsafe.Markup:
    """Running text (htmltext.prose): options, numbers with units and arrows on one line."""
    return prose(text)


TEMPLATE_CACHE_ENV = "NETQUAL_TEMPLATE_CACHE"


def template_cache() -> jinja2.BytecodeCache | None:
    """Where compiled templates are kept between processes: ``$NETQUAL_TEMPLATE_CACHE``,
    else ``~/.cache/netqual/templates``; ``off`` (or a folder that is not this user's
    own, files.cachedir) keeps none. Compiling the report's templates costs each process
    that writes a report ~70 ms of CPU, reading them back ~3 ms; an entry is used only for
    the same template source (jinja2 checks its checksum) and the same Python."""
    where = os.environ.get(TEMPLATE_CACHE_ENV)
    if where == "off":
        return None
    folder = private_dir(Path(where) if where else cache_root() / "templates")
    return jinja2.FileSystemBytecodeCache(str(folder)) if folder is not None else None


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        bytecode_cache=template_cache(),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_literal,
    )
    env.filters["nobreak_options"] = nobreak_options
    env.filters["prose"] = prose
    return env


def _literal(value: Any) -> Any:
    """Every value a template prints: names and reasons from the results file keep their
    control and bidi characters visible (a U+202E would reorder the page's text); our own
    HTML (Markup) is left alone. Escaping for HTML is autoescape's job, after this. A number
    keeps its unit on its line ("1,435 us" never wraps between the two)."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return keep_units(visible(value, newlines=True))
    return value


def _literal_data(data: Any) -> Any:
    if isinstance(data, str):
        return visible(data, newlines=True)
    if isinstance(data, dict):
        return {_literal_data(k): _literal_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_literal_data(v) for v in data]
    return data


def script_json(data: Any) -> markupsafe.Markup:
    """JSON that is safe inside <script>: no '</' or '<!--' can end the element early, and
    its strings are shown literally once the page's script puts them in the DOM."""
    text = json.dumps(_literal_data(data), separators=(",", ":"), ensure_ascii=False)
    return markupsafe.Markup(text.replace("</", "<\\/").replace("<!--", "<\\u0021--"))


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(fmt=fmt, **context)


def render_html(
    results: Results,
    *,
    waivers: Sequence[Waiver] = (),
    today: dt.date | None = None,
    gate: GateBanner | None = None,
    source: str | None = None,
) -> str:
    view = build_view(results, waivers, today, gate, source)
    return render("report.html.j2", view=view, title=view.title, data_json=script_json(view.data))


def diff_sentence(d: RunDiff) -> str:
    parts = [f"{plural(len(d.worse), 'path')} worse", f"{len(d.better)} better"]
    if d.new_paths:
        parts.append(f"{len(d.new_paths)} new")
    if d.missing_paths:
        parts.append(f"{len(d.missing_paths)} missing")
    return ", ".join(parts) + f" ({len(d.deltas)} compared)"


def render_diff_html(d: RunDiff, *, limit: int = 200) -> str:
    """The terminal diff's tables and notes (analysis.diffnotes: noise marks, what "worse"
    means, which runs are preliminary) as one page."""
    top = d.measured[:20]
    sentence = diff_sentence(d)
    notes = {"preliminary": preliminary_sentence(d), "rule": worse_rule(d),
             "noise": noise_sentence(d)}  # fmt: skip
    return render(
        "diff.html.j2", diff=d, sentence=sentence, title=f"netqual diff: {sentence}", top=top,
        verdicts=list(Verdict), limit=limit, notes=notes, change_text=change_text,
    )  # fmt: skip


def write_html(
    results: Results,
    path: Path,
    *,
    waivers: Sequence[Waiver] = (),
    today: dt.date | None = None,
    gate: GateBanner | None = None,
    source: str | None = None,
) -> None:
    """Write atomically, like results.json: a half-written report is never left behind.
    ``source``: the results file, named by a summarised page as where every path is."""
    text = render_html(results, waivers=waivers, today=today, gate=gate, source=source)
    write_text_atomic(path, text)
