"""JUnit XML (the flavour Jenkins, GitLab and GitHub test reporters read) and plain JSON.

One testcase per rule; a failing rule's <failure> lists its failing paths, one a line.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from netqual.base.names import visible
from netqual.gate.model import GateReport, Status

MAX_LISTED_PATHS = 200  # a 512-node run can fail thousands of paths; CI pages choke on that


def _path_lines(findings: tuple[Any, ...]) -> str:
    lines = [f"{f.label}: {f.detail}" for f in findings[:MAX_LISTED_PATHS]]
    if len(findings) > MAX_LISTED_PATHS:
        lines.append(f"... and {len(findings) - MAX_LISTED_PATHS} more")
    return "\n".join(lines)


def junit_xml(report: GateReport) -> str:
    failures = len(report.failed)
    skipped = sum(1 for o in report.outcomes if o.status is Status.SKIP)
    suites = ET.Element(
        "testsuites",
        name="netqual gate",
        tests=str(len(report.outcomes)),
        failures=str(failures),
        errors="0",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"netqual gate: {report.profile}",
        tests=str(len(report.outcomes)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time="0",
    )
    props = ET.SubElement(suite, "properties")
    for note in report.notes:
        ET.SubElement(props, "property", name="warning", value=note)
    for name, value in (
        ("profile", report.source),
        ("results", report.results_source),
        ("baseline", report.baseline_source or ""),
        ("date", report.today.isoformat()),
        ("paths", str(report.n_paths)),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    for o in report.outcomes:
        case = ET.SubElement(
            suite, "testcase", classname=f"netqual.gate.{report.profile}", name=o.rule, time="0"
        )
        if o.status is Status.FAIL:
            fail = ET.SubElement(case, "failure", message=o.message, type="GateRuleFailed")
            fail.text = _path_lines(o.failing)
        elif o.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=o.message)
        if o.waived:
            out = ET.SubElement(case, "system-out")
            out.text = "waived:\n" + _path_lines(o.waived)
    lines = [f"warning: {n}" for n in report.notes]
    lines += [waiver_line(report, i) for i in range(len(report.waivers))]
    if lines:
        out = ET.SubElement(suite, "system-out")
        out.text = "\n".join(lines)
    _literal(suites)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def _literal(root: ET.Element) -> None:
    """Names, reasons and profile text come from files: a control character in any of them
    would make the XML unparsable (XML 1.0 has no way to write most of them), a bidi
    override would disguise a CI page. Every attribute and text is shown literally."""
    for element in root.iter():
        for key, value in element.attrib.items():
            element.set(key, visible(value))
        if element.text:
            element.text = visible(element.text, newlines=True)


def waiver_line(report: GateReport, index: int) -> str:
    st = report.waivers[index]
    w = st.waiver
    if st.expired:
        state = f"EXPIRED on {w.until.isoformat()}, no longer applies"
    elif st.used_by:
        state = f"active until {w.until.isoformat()}, applied in {', '.join(st.used_by)}"
    else:
        state = f"active until {w.until.isoformat()}, not needed"
    return f"waiver {w.label} ({w.owner}: {w.reason}): {state}"


def report_to_dict(report: GateReport) -> dict[str, Any]:
    def findings(items: tuple[Any, ...]) -> list[dict[str, str]]:
        return [{"src": f.src, "dst": f.dst, "detail": f.detail} for f in items]

    return {
        "profile": report.profile,
        "profile_source": report.source,
        "results": report.results_source,
        "baseline": report.baseline_source,
        "date": report.today.isoformat(),
        "paths": report.n_paths,
        "passed": report.passed,
        "not_due": report.not_due,
        "failed_rules": [o.rule for o in report.failed],
        "notes": list(report.notes),
        "rules": [
            {
                "name": o.rule,
                "status": o.status.value,
                "message": o.message,
                "failing": findings(o.failing),
                "waived": findings(o.waived),
            }
            for o in report.outcomes
        ],
        "waivers": [
            {
                "src": s.waiver.src,
                "dst": s.waiver.dst,
                "until": s.waiver.until.isoformat(),
                "reason": s.waiver.reason,
                "owner": s.waiver.owner,
                "status": "expired" if s.expired else "active",
                "applied_in": list(s.used_by),
            }
            for s in report.waivers
        ],
    }
