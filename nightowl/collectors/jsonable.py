"""A parse result back from its JSON form: the inverse of ``base.to_jsonable`` for the dataclass results whose
``facts`` read typed objects (fabric, ib-ports). A bundle keeps what a run parsed of an output it stored scrubbed
as JSON (``parsed/``, nightowl/engine/parse_memo.py); a later reader rebuilds the typed result from that copy
instead of parsing the scrubbed text again, so it sees what the verdict saw (issue 44 item 4)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def from_jsonable(kind: type[T], data: Any) -> T:
    """``kind`` (a dataclass) built from ``data`` as ``to_jsonable`` wrote it; keys the class does not have are
    left out (a kept parse carries ``coverage`` and ``normalised`` beside the result's own fields), and a field
    missing from ``data`` takes its default; a ``kind`` already built is returned as it is (a reader's own parse).
    Raises TypeError or ValueError on data of another shape."""
    if isinstance(data, kind):
        return data
    return typing.cast(T, _value(kind, data))


def _value(hint: Any, data: Any) -> Any:
    if data is None:
        return None
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(data, dict):
            raise TypeError(f"{hint.__name__}: expected an object, got {type(data).__name__}")
        hints = typing.get_type_hints(hint)
        fields = {f.name for f in dataclasses.fields(hint) if f.init}
        return hint(**{name: _value(hints[name], data[name]) for name in fields if name in data})
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        arms = [arm for arm in typing.get_args(hint) if arm is not type(None)]
        shaped = [arm for arm in arms if dataclasses.is_dataclass(arm) or typing.get_origin(arm) is not None]
        if len(arms) == 1:
            return _value(arms[0], data)
        return _value(shaped[0], data) if shaped and isinstance(data, (dict, list)) else data
    if origin in (list, tuple, set, frozenset):
        if not isinstance(data, list):
            raise TypeError(f"expected a list, got {type(data).__name__}")
        args = typing.get_args(hint)
        items = [_value(args[0] if args else Any, item) for item in data]
        return origin(items) if origin is not list else items
    if origin is dict:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        args = typing.get_args(hint)
        return {key: _value(args[1] if len(args) == 2 else Any, item) for key, item in data.items()}
    return data
