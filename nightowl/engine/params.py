"""Runbook parameters: a value given as text (``--param KEY=VALUE``, an alert label) is a string unless
the runbook declares another type, and a path or URL is checked so that no parameter can make a
collector read or send a file it was not meant to (curl's ``@file`` data, a ``file://`` URL).

A parameter with no ``type`` takes the type of its default (``8`` -> integer, ``true`` -> boolean);
a null default means string. ``yaml`` parses the text as YAML (aliases capped), for mappings.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import urlsplit

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_URL_SCHEMES = frozenset({"http", "https"})


def declared_type(declared: str | None, default: Any) -> str:
    if declared:
        return declared
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, int):
        return "integer"
    if isinstance(default, float):
        return "number"
    return "string"


def coerce(name: str, kind: str, value: Any) -> Any:
    """``value`` as parameter ``name`` of type ``kind``; ValueError says what is wrong. None stays None."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else None
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"parameter {name} expects true or false, got {value!r}")
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if text is not None and text.lstrip("+-").isdigit() and len(text) <= 30:
            return int(text)
        raise ValueError(f"parameter {name} expects a whole number, got {value!r}")
    if kind == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        try:
            number = float(text) if text is not None and len(text) <= 50 else math.nan
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number
        raise ValueError(f"parameter {name} expects a number, got {value!r}")
    if not isinstance(value, str):
        return value  # given from Python or a rehearsal as data: kept as given
    _check_text(name, value)
    if kind == "yaml":  # a mapping or list given on the command line ('{r1: http://..., r2: ...}')
        from nightowl.engine.yamlines import YamlError, load_with_lines

        try:
            return load_with_lines(value)[0]
        except YamlError as exc:
            raise ValueError(f"parameter {name}: {exc.message}") from None
    if kind == "path":
        _check_path(name, value)
    elif kind == "url":
        _check_url(name, value)
    elif kind == "json":
        try:
            json.loads(value)
        except ValueError as exc:
            raise ValueError(f"parameter {name} expects JSON: {exc}") from None
    return value


def _check_text(name: str, value: str) -> None:
    if "\x00" in value:
        raise ValueError(f"parameter {name}: a NUL character is not allowed")


def _check_path(name: str, value: str) -> None:
    if not value or value[0] in "@-" or any(ch in value for ch in "\n\r"):
        raise ValueError(f"parameter {name} expects a file path, got {value!r} (no leading @ or -, one line)")


def _check_url(name: str, value: str) -> None:
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise ValueError(f"parameter {name}: {exc}") from None
    if parts.scheme.lower() not in _URL_SCHEMES or not parts.hostname or any(c.isspace() for c in value):
        raise ValueError(f"parameter {name} expects an http:// or https:// URL, got {value!r}")
