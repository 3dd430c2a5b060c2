"""A path's ``details`` as the results file holds it: every key of the registry
(``model.details``) as a msgspec type, derived from it, so that reading a results file
checks the type of each known key, nested objects included (``check``; ``WirePath`` calls
it for every path). The details themselves stay the mapping the file held: a key the
registry does not list (a newer netqual's) is kept as read, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import GenericAlias
from typing import Annotated, Any

import msgspec

from netqual.files.filedata import MAX_FLOAT, MAX_INT
from netqual.model.details import KEYS, Key, Value

_SCALARS: dict[Value, Any] = {
    Value.FLAG: bool,
    Value.COUNT: Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)],
    Value.INTEGER: Annotated[int, msgspec.Meta(ge=-MAX_INT, le=MAX_INT)],
    Value.NUMBER: Annotated[float, msgspec.Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)],
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
