"""The gate: judge a results file against a profile (TOML) -> pass/fail, JUnit XML, JSON."""

from netqual.gate.evaluate import evaluate
from netqual.gate.junit import junit_xml, report_to_dict
from netqual.gate.model import Finding, GateReport, Outcome, Scope, Status, WaiverState
from netqual.gate.profile import Profile, default_profile, load_profile, parse_profile_text
from netqual.model.policy import Waiver

__all__ = [
    "Finding",
    "GateReport",
    "Outcome",
    "Profile",
    "Scope",
    "Status",
    "Waiver",
    "WaiverState",
    "default_profile",
    "evaluate",
    "junit_xml",
    "load_profile",
    "parse_profile_text",
    "report_to_dict",
]
