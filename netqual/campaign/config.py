"""``campaign.toml``: the qualification campaign a directory tracks (docs/campaign.md).

A campaign has a start date, a length in weeks, milestones (a week, a gate profile and
optionally a workload) and the history rules every milestone adds to its profile. Every
mistake is a ``CampaignError`` naming the file and the field.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from netqual.analysis.rise import DEFAULT_INCREASE_PCT, DEFAULT_MIN_DELTA_US
from netqual.base.errors import CampaignError
from netqual.files.outfiles import make_out_dir, write_text_atomic
from netqual.files.tomlfile import Fields, read_toml, toml_string

CONFIG_FILE = "campaign.toml"
STORE_FILE = "history.duckdb"
MAX_WEEK = 10_000  # about 190 years: what --week, --weeks and a run's date may give
PROFILES_DIR = "profiles"
# The default milestones of a 10-week joint test: (name, week, example profile, purpose).
DEFAULT_MILESTONES = (
    ("week2", 2, "preflight", "smoke: every path measured, storage paths offload-safe"),
    ("week6", 6, "requalify", "pre-production: nothing worse than before, fixes in"),
    ("week10", 10, "signoff", "go/no-go: every path offload-safe and stable"),
)


@dataclass(frozen=True)
class Milestone:
    name: str
    week: int
    profile: Path  # resolved against the campaign directory
    description: str = ""
    workload: str | None = None  # a workload TOML or preset (docs/workload.md)


@dataclass(frozen=True)
class HistoryRules:
    """What every milestone judges on top of its profile, from the campaign's history.

    A path is worse than its best week when its p99 rose by more than ``increase_pct``
    percent and by at least ``min_delta_us`` over its lowest weekly p99: the noise rule of
    ``netqual diff`` and the gate's ``max_p99_increase_pct`` / ``min_delta_us``."""

    increase_pct: float = DEFAULT_INCREASE_PCT
    min_delta_us: float = DEFAULT_MIN_DELTA_US
    max_suspect_age_weeks: int = 2  # a suspect open longer than this fails the milestone


@dataclass(frozen=True)
class Campaign:
    directory: Path
    name: str
    start: dt.date | None
    weeks: int
    milestones: tuple[Milestone, ...]
    history: HistoryRules
    inventory: str | None = None  # the inventory it qualifies, as the user named it

    @property
    def store_path(self) -> Path:
        return self.directory / STORE_FILE

    def milestone(self, name: str) -> Milestone:
        for m in self.milestones:
            if m.name == name:
                return m
        known = ", ".join(m.name for m in self.milestones) or "none"
        raise CampaignError(
            str(self.directory / CONFIG_FILE),
            f"no milestone {name!r} (known: {known})",
            "milestone",
        )

    def week_of(self, day: dt.date) -> int | None:
        """The campaign week a date falls in (week 1 starts on ``start``), if it has a start."""
        if self.start is None:
            return None
        return (day - self.start).days // 7 + 1

    def next_milestone(self, week: int) -> Milestone | None:
        later = [m for m in self.milestones if m.week > week]
        return min(later, key=lambda m: m.week) if later else None


def _error(source: str, problem: str, field: str | None) -> CampaignError:
    return CampaignError(source, problem, field)


def load_campaign(directory: Path) -> Campaign:
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise CampaignError(
            str(directory),
            f"not a campaign directory (no {CONFIG_FILE}; run `netqual campaign init {directory}`)",
        )
    source = str(path)
    data = read_toml(path, _error)
    top = Fields(source, data, "", _error)
    top.check_keys({"campaign", "history", "milestone"})
    head = top.sub("campaign", {"name", "start", "weeks", "inventory"})
    start = head.date("start")
    hist = top.sub("history", {"max_p99_increase_pct", "min_delta_us", "max_suspect_age_weeks"})
    rules = HistoryRules(
        increase_pct=hist.number("max_p99_increase_pct", HistoryRules.increase_pct),
        min_delta_us=hist.number("min_delta_us", HistoryRules.min_delta_us, positive=False),
        max_suspect_age_weeks=hist.integer(
            "max_suspect_age_weeks", HistoryRules.max_suspect_age_weeks, low=0
        ),
    )
    weeks = head.integer("weeks", 10, low=1, high=520)
    keys = {"name", "week", "profile", "description", "workload"}
    milestones = tuple(_milestone(directory, m, weeks) for m in top.tables("milestone", keys))
    names = [m.name for m in milestones]
    if dup := next((n for n in names if names.count(n) > 1), None):
        raise top.fail("milestone", f"two milestones are named {dup!r}")
    return Campaign(
        directory=directory,
        name=head.string("name", directory.resolve().name) or directory.name,
        start=start,
        weeks=weeks,
        milestones=milestones,
        history=rules,
        inventory=head.string("inventory"),
    )


def _milestone(directory: Path, f: Fields, weeks: int) -> Milestone:
    profile = f.text("profile")
    return Milestone(
        name=f.text("name"),
        week=f.integer("week", 0, low=1, high=weeks),
        profile=directory / profile,
        description=f.string("description", "") or "",
        workload=f.string("workload"),
    )


def example_profile_text(name: str) -> str:
    """An example gate profile of docs/gate-profiles (shipped in the wheel as
    ``netqual/gate/profiles``), for ``campaign init`` to copy."""
    installed = files("netqual.gate") / "profiles" / f"{name}.toml"
    if installed.is_file():
        return installed.read_text(encoding="utf-8")
    source_tree = Path(__file__).resolve().parents[2] / "docs" / "gate-profiles" / f"{name}.toml"
    return source_tree.read_text(encoding="utf-8")


def _without_example_waivers(text: str) -> str:
    """The examples' waivers name nodes of no real cluster: copied commented out."""
    head, sep, tail = text.partition("[[waiver]]")
    if not sep:
        return text
    lines = (sep + tail).splitlines()
    return head + "\n".join(ln if ln.startswith("#") else f"# {ln}" for ln in lines) + "\n"


def init_text(name: str, start: dt.date | None, weeks: int, inventory: str | None) -> str:
    """campaign.toml for ``campaign init``: the default milestones, commented."""
    lines = [
        "# A netqual qualification campaign (docs/campaign.md).",
        "[campaign]",
        f"name = {_quote(name)}",
    ]
    if start is not None:
        lines.append(
            f"start = {start.isoformat()}  # week 1 starts here; a run's week comes from its date"
        )
    lines.append(f"weeks = {weeks}")
    if inventory is not None:
        lines.append(f"inventory = {_quote(inventory)}")
    rules = HistoryRules()
    lines += [
        "",
        "[history]  # judged by every milestone, on top of its profile",
        "# no path worse than its best week by more than this percentage ...",
        f"max_p99_increase_pct = {rules.increase_pct:g}",
        "# ... and this many microseconds (smaller rises are noise)",
        f"min_delta_us = {rules.min_delta_us:g}",
        "# no localisation suspect open for longer than this",
        f"max_suspect_age_weeks = {rules.max_suspect_age_weeks}",
    ]
    for m_name, week, profile, purpose in DEFAULT_MILESTONES:
        if week > weeks:
            continue
        lines += [
            "",
            "[[milestone]]",
            f"name = {_quote(m_name)}",
            f"week = {week}",
            f'profile = "{PROFILES_DIR}/{profile}.toml"',
            f"description = {_quote(purpose)}",
        ]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    try:
        return toml_string(text)
    except ValueError as err:
        shown = text.encode("utf-8", "backslashreplace").decode()[:80]
        raise CampaignError("command line", f"{shown!r} {err}") from None


def init_campaign(
    directory: Path, *, name: str | None, start: dt.date | None, weeks: int, inventory: str | None
) -> Path:
    """Write ``DIR/campaign.toml`` and the default milestones' profiles (copies of
    docs/gate-profiles, to edit) into ``DIR/profiles``. Refuses to overwrite a campaign."""
    path = directory / CONFIG_FILE
    if path.exists():
        raise CampaignError(str(path), "a campaign already exists here; edit it instead")
    if not 1 <= weeks <= MAX_WEEK:
        raise CampaignError("command line", f"must be 1-{MAX_WEEK:,}, got {weeks}", "--weeks")
    make_out_dir(directory / PROFILES_DIR)  # no symlinked or foreign directory (outfiles)
    for _, week, profile, _ in DEFAULT_MILESTONES:
        target = directory / PROFILES_DIR / f"{profile}.toml"
        if week <= weeks and not target.exists():
            write_text_atomic(target, _without_example_waivers(example_profile_text(profile)))
    text = init_text(name or directory.resolve().name, start, weeks, inventory)
    write_text_atomic(path, text)
    return path


def week_for(
    campaign: Campaign,
    *,
    explicit: int | None,
    retest_week: int | None,
    started_at: str,
    last_week: int | None,
) -> int:
    """A run's campaign week: ``--week``, else its retested run's week, else the week its
    start date falls in (when the campaign has a start), else the week after the last."""
    if explicit is not None:
        if not 1 <= explicit <= MAX_WEEK:
            raise CampaignError("command line", f"must be 1-{MAX_WEEK:,}, got {explicit}", "--week")
        return explicit
    if retest_week is not None:
        return retest_week
    try:
        day = dt.datetime.fromisoformat(started_at.replace("Z", "+00:00")).date()
    except ValueError:
        day = None
    if day is not None and (week := campaign.week_of(day)) is not None:
        if week > MAX_WEEK:
            raise CampaignError(
                started_at, f"the run is more than {MAX_WEEK:,} weeks after the campaign's "
                "start; give --week", "run.started_at",
            )  # fmt: skip
        if week < 1:
            raise CampaignError(
                started_at,
                f"the run started before the campaign ({campaign.start}); give --week",
                "run.started_at",
            )
        return week
    return (last_week or 0) + 1
