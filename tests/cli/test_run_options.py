"""``netqual run`` hands every option it is given to ``RunOptions`` (``RunOptions(**locals())``
as its first statement): a parameter added to the command and not to the record, or
renamed in one of them, or typed differently, fails here rather than at a user's run."""

from __future__ import annotations

import dataclasses
import inspect
import typing

from netqual.cli.cmd_run import run
from netqual.cli.run_config import RunOptions


def test_run_options_has_one_field_per_parameter_of_the_command_with_its_type() -> None:
    params = inspect.signature(run).parameters
    fields = [f.name for f in dataclasses.fields(RunOptions)]
    assert fields == list(params)
    given = typing.get_type_hints(run)
    held = typing.get_type_hints(RunOptions)
    assert {k: given[k] for k in params} == {k: held[k] for k in fields}


def test_the_command_body_is_short_and_resume_lives_in_run() -> None:
    source = inspect.getsource(run)
    body = source[source.index('    """', source.index(") -> None:")) :]
    body = body[body.index('"""', 7) + 3 :]
    lines = [line for line in body.splitlines() if line.strip()]
    assert len(lines) <= 25, len(lines)
    assert "resume_mod" not in source and "KeyboardInterrupt" not in source
