"""tests/support/eventually.py, the one way a test waits: it returns what the condition
found, fails naming the event after its bound, and gives up at once when the event can no
longer happen."""

from __future__ import annotations

import time

import pytest
from eventually import eventually


def test_returns_the_first_true_value_the_check_gives() -> None:
    seen = iter([None, [], ["a line"], ["never read"]])
    assert eventually(lambda: next(seen), within_s=5, every_s=0, what="a line") == ["a line"]


def test_fails_naming_the_event_after_its_bound() -> None:
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"not within 0\.2 s: the log says hello"):
        eventually(lambda: False, within_s=0.2, every_s=0.01, what="the log says hello")
    assert time.monotonic() - t0 >= 0.2


def test_a_callable_message_is_read_only_on_failure() -> None:
    reads: list[int] = []

    def tail() -> str:
        reads.append(1)
        return "log tail"

    assert eventually(lambda: True, within_s=1, what=tail)
    assert reads == []
    with pytest.raises(AssertionError, match="log tail"):
        eventually(lambda: False, within_s=0, what=tail)
    assert reads == [1]


def test_gives_up_at_once_when_the_event_can_no_longer_happen() -> None:
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"can no longer happen.*a record"):
        eventually(lambda: False, within_s=60, unless=lambda: True, what="a record")
    assert time.monotonic() - t0 < 30  # not the 60 s bound
    # the condition is read before the give-up test: an event that came just in time counts
    assert eventually(lambda: "rec", within_s=60, unless=lambda: True, what="a record") == "rec"
