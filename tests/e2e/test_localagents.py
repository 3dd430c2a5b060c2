"""Agent start-up limit: ``start_agent(timeout_s=...)`` and ``$NETQUAL_AGENT_START_S``."""

from __future__ import annotations

from pathlib import Path

import pytest

from netqual.base.errors import InputError
from netqual.run.localagents import (
    DEFAULT_START_TIMEOUT_S,
    START_TIMEOUT_ENV,
    AgentStartError,
    start_agent,
    start_timeout_s,
    stop_agents,
)


def test_default_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(START_TIMEOUT_ENV, raising=False)
    assert start_timeout_s() == DEFAULT_START_TIMEOUT_S == 60.0
    monkeypatch.setenv(START_TIMEOUT_ENV, " 55 ")
    assert start_timeout_s() == 55.0


@pytest.mark.parametrize("bad", ["soon", "0", "-3", "nan", "1e9"])
def test_bad_environment_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv(START_TIMEOUT_ENV, bad)
    with pytest.raises(InputError, match=START_TIMEOUT_ENV):
        start_timeout_s()


def test_limit_applies_and_the_argument_wins(
    monkeypatch: pytest.MonkeyPatch, token_file: Path
) -> None:
    monkeypatch.setenv(START_TIMEOUT_ENV, "0.01")  # no interpreter starts that fast
    with pytest.raises(AgentStartError, match=r"did not start within 0\.01 s"):
        start_agent("slowpoke", token_file)
    proc, port = start_agent("patient", token_file, timeout_s=60.0)
    try:
        assert port > 0 and proc.poll() is None
    finally:
        stop_agents([proc])
