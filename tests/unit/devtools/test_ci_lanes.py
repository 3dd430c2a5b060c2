"""CI (.ci/run) runs the README's test command, in the lanes the README documents: every
folder of tests in exactly one lane (tests/env split three ways: the guest's module, the
lab modules, the rest), the fast lane (unit, cli) failing fast and before everything but
lint and the two chains' start, each lane bounded in wall-clock time."""

from __future__ import annotations

import re

from paths import KINDS, REPO

CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
COMMAND = ".venv/bin/python -m pytest -q"
LANE = re.compile(r"^lane (\w+) (fg|bg) (\d+) (.+)$", re.MULTILINE)


def _lanes() -> dict[str, str]:
    """Each lane's pytest arguments, as two workers would run them."""
    return {name: args.replace('"$workers"', "2") for name, _, _, args in LANE.findall(CI)}


def _readme_row(name: str) -> str:
    (row,) = [line for line in README.splitlines() if line.strip().startswith(f"| {name} |")]
    return row


def test_ci_runs_the_readmes_test_command() -> None:
    assert f"./setup.sh && {COMMAND}" in README
    # at the CPU's own priority (a niced lane's agents missed their own timeouts)
    assert f'run=(timeout --kill-after=30 "$3" {COMMAND} --durations=15 "${{@:4}}")' in CI
    code = [line for line in CI.splitlines() if not line.lstrip().startswith("#")]
    assert sum("-m pytest" in line for line in code) == 1  # every lane through it


def test_every_lane_is_in_the_readme_with_its_arguments() -> None:
    lanes = _lanes()
    assert sorted(lanes) == ["env", "fast", "guest", "labs", "procs"]
    for name, args in lanes.items():
        assert f"`{args}`" in _readme_row(name), (name, args)


def test_every_folder_of_tests_is_in_exactly_one_lane() -> None:
    folders = [
        word.split("/")[1]
        for args in _lanes().values()
        for word in args.split()
        if word.startswith("tests/")
    ]
    # env, labs and guest share tests/env: the guest's module in guest, the rest split by
    # the timing marker (the labs that judge timing) into labs and env
    assert sorted(folders) == sorted([*KINDS, "env", "env"])
    rest = "tests/env --ignore=tests/env/test_rxe_guest.py"
    assert _lanes()["labs"] == f"-n 0 -m timing {rest}"
    assert _lanes()["env"] == f'-n 0 -m "not timing" {rest}'
    assert _lanes()["guest"] == "tests/env/test_rxe_guest.py"


def test_the_fast_lane_fails_fast_and_first() -> None:
    fast = _lanes()["fast"]
    assert "--maxfail=1" in fast and fast.endswith("tests/unit tests/cli")
    foreground = [name for name, mode, _, _ in LANE.findall(CI) if mode == "fg"]
    assert foreground[0] == "fast"
    # before it only set-up, ruff (seconds) and the two chains' start (guest and labs, in
    # the background); a red fast lane stops everything, mypy and the other lanes come
    # after it
    before = CI[: CI.index("lane fast ")]
    assert [n for n, mode, _, _ in LANE.findall(before)] == ["guest", "labs"]
    assert all(mode == "bg" for _, mode, _, _ in LANE.findall(before))
    assert CI.index('step "ruff"') < CI.index("lane fast ") < CI.index('"mypy"')
    assert CI[CI.index("lane fast ") :].splitlines()[1] == "give_up_if_red"


def test_every_lane_has_a_wall_clock_bound() -> None:
    bounds = {name: int(bound) for name, _, bound, _ in LANE.findall(CI)}
    assert sorted(bounds) == ["env", "fast", "guest", "labs", "procs"]
    assert all(0 < b <= 2400 for b in bounds.values()), bounds


def test_a_lab_beside_the_labs_lane_runs_no_real_time_agents() -> None:
    """Every module of tests/env that brings a lab up is marked ``timing`` (the labs lane,
    one after another) or brings it up with ordinary agents and no delayed link (so no
    real-time relay): a new lab module that forgets either would run real-time agents
    beside the labs that judge round trips (the env lane runs beside the labs lane)."""
    env = REPO / "tests" / "env"
    beside = []
    for path in sorted(env.glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        if "lab.up(" not in text and '"lab", "up"' not in text:
            continue
        if "pytest.mark.timing" in text:
            continue
        beside.append(path.name)
        ups = re.findall(r"lab\.up\((.*)\)", text)
        assert ups and all("realtime_agents=False" in call for call in ups), path.name
        assert '"lab", "up"' not in text and "delay_us" not in text, path.name
    assert beside == ["test_lab_engines.py", "test_lab_fleet.py"]
