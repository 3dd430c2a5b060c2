"""A path's ``details`` as JSON, as an agent's ``probe.result`` and the results file hold
it: every key of the registry (``model.details``) as a msgspec type, derived from it, so
that the coordinator (``agent.probe_request.ProbeResult.decode``: a ``bad-request``) and
every reader of a results file (``results.wirepath.WirePath``: a ``ResultsFileError``)
check the type of each known key, nested objects included. The details themselves stay
the mapping that was sent or read: a key the registry does not list (a newer netqual's)
is kept, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import GenericAlias
from typing import Annotated, Any

import msgspec

from netqual.model.details import KEYS, Key, Value, type_text, walk

_SCALARS: dict[Value, Any] = {
    Value.FLAG: bool,
    Value.COUNT: Annotated[int, msgspec.Meta(ge=0)],
    Value.INTEGER: int,
    Value.NUMBER: float,
    Value.TEXT: str,
    Value.OBJECT: dict[str, Any],
    Value.LIST: list[Any],
}


def _type(key: Key, where: str) -> Any:
    if key.keys:
        typ: Any = _struct(key.keys, f"{where}.{key.name}")
    elif key.value is Value.LIST and key.each is not None:
        typ = GenericAlias(list, (_SCALARS[key.each],))
    elif key.value is Value.OBJECT and key.each is not None:
        typ = GenericAlias(dict, (str, _SCALARS[key.each]))
    else:
        typ = _SCALARS[key.value]
    return typ | None if key.null else typ


def _struct(keys: tuple[Key, ...], where: str) -> type[msgspec.Struct]:
    """Every key optional (absent: UNSET), unknown keys ignored: only types are checked."""
    fields = [(k.name, _type(k, where) | msgspec.UnsetType, msgspec.UNSET) for k in keys]
    return msgspec.defstruct(f"Details{where}", fields, gc=False)


DETAILS_TYPE = _struct(KEYS, "")


def check(details: Mapping[str, Any]) -> None:
    """Raise msgspec.ValidationError (naming the key: ``... - at `$.counters.src```) when
    a registered key of ``details`` has the wrong type."""
    msgspec.convert(details, DETAILS_TYPE)


_AT = re.compile(r"^(?P<msg>.*?) - at `\$(?P<at>[^`]*)`$", re.DOTALL)


def problem(details: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first registered key of the wrong type: (its field below ``details``, such as
    ``.counters.src``, and msgspec's words); None when every one has its type."""
    try:
        check(details)
    except msgspec.ValidationError as err:
        m = _AT.match(str(err))
        return (m["at"], m["msg"]) if m else ("", str(err))
    return None


def expected(field: str) -> str:
    """What the registry says ``field`` (``.phase_windows_s.bulk[1]``) holds, in words."""
    name = re.sub(r"\[[^\]]*\]", "", field).strip(".")
    key = dict(walk()).get(name)
    if key is None:
        return "has the wrong type"
    if field.endswith("]") and key.each is not None:  # one item of a list or map
        return f"expected {key.each.value} (an item of {name})"
    return f"expected {type_text(key)}"
