"""``--engine`` and ``--engine-require`` (run, probe, retest; docs/engines.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from netqual.base.choices import ChoiceError, parse_choice
from netqual.base.errors import UsageError
from netqual.model.engine import REQUIRABLE, EngineName, EnginePlan, EngineTransport

if TYPE_CHECKING:  # `netqual agent --engines` reads names only: no plan, no run
    from netqual.model.plan import ProbePlan
    from netqual.model.workload import Workload

EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        metavar="mooncake|nixl",
        help="Also move each path's chunk with this fetch engine, READ and WRITE, beside "
        "netqual's own bulk cell (docs/engines.md; pip install 'netqual[ENGINE]').",
    ),
]
EngineRequireOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-require",
        metavar="rdma|tcp",
        help="The engine must move the bytes over this transport and the path's NIC; a "
        "fallback makes the path not measured (configuration).",
    ),
]


def engine_names(texts: list[str]) -> list[EngineName]:
    try:
        return [parse_choice(EngineName, t, "--engine", "engine") for t in texts]
    except ChoiceError as err:
        raise UsageError(err.where, err.problem) from None


def offered_engines(text: str) -> tuple[EngineName, ...]:
    """``netqual agent --engines``: comma-separated engine names, or ``none``."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["none"]:
        return ()
    if not words:
        raise UsageError("--engines", "give engine names (mooncake,nixl) or none")
    try:
        names = [parse_choice(EngineName, w, "--engines", "engine") for w in words]
    except ChoiceError as err:
        raise UsageError(err.where, err.problem) from None
    return tuple(dict.fromkeys(names))


def engine_plan(
    engine: str | None,
    require: str | None,
    transport: str,
    plan: ProbePlan,
    workload: Workload | None = None,
    pin: bool = False,
) -> EnginePlan | None:
    """The run's engine cells from the options; None without ``--engine``."""
    if engine is None:
        if require is not None:
            raise UsageError("--engine-require", "needs --engine mooncake|nixl")
        return None
    try:
        name = parse_choice(EngineName, engine, "--engine", "engine")
        need = None
        if require is not None:
            need = parse_choice(EngineTransport, require, "--engine-require", "transport")
            if need not in REQUIRABLE:
                raise ChoiceError("--engine-require", f"must be rdma or tcp, got {require!r}")
        want = parse_choice(EngineTransport, transport, "--transport", "transport")
    except ChoiceError as err:
        raise UsageError(err.where, err.problem) from None
    from netqual.run.engine_cells import plan_for

    return plan_for(name, plan, want, need, workload, pin)
