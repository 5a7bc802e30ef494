"""Runbook parameters: a value given as text (``--param KEY=VALUE``, an alert label) is a string unless
the runbook declares another type, and a path or URL is checked so that no parameter can make a
collector read or send a file it was not meant to (curl's ``@file`` data, a ``file://`` URL).

A parameter with no ``type`` takes the type of its default (``8`` -> integer, ``true`` -> boolean);
a null default means string. ``yaml`` parses the text as YAML (aliases capped), for mappings.
"""

from __future__ import annotations

import json
import math
import re
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
        if kind in ("yaml", "json"):
            _check_nested_urls(name, value)
        return value  # given from Python or a rehearsal as data: kept as given
    _check_text(name, value)
    if kind == "yaml":  # a mapping or list given on the command line ('{r1: http://..., r2: ...}')
        from nightowl.engine.yaml_lines import YamlError, load_with_lines

        try:
            loaded = load_with_lines(value)[0]
        except YamlError as exc:
            raise ValueError(f"parameter {name}: {exc.message}") from None
        _check_nested_urls(name, loaded)
        return loaded
    if kind == "path":
        _check_path(name, value)
    elif kind == "url":
        _check_url(name, value)
    elif kind == "json":
        try:
            loaded = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"parameter {name} expects JSON: {exc}") from None
        _check_nested_urls(name, loaded)
    return value


# Schemes a value inside a mapping names only to reach something other than an HTTP server; with
# "://" anywhere, any scheme counts (a URL nested in a yaml or json value is checked as a `url` is).
_LOCAL_SCHEMES = re.compile(r"^\s*(file|data|gopher|dict|ftps?|tftp|ldaps?|scp|sftp|smb|telnet|jar|netdoc):", re.I)


def _check_nested_urls(name: str, value: Any, where: str = "", depth: int = 0) -> None:
    """Every URL inside a yaml or json value, checked as a ``url`` parameter is (no ``file://``)."""
    if depth > 64:
        raise ValueError(f"parameter {name}: nested deeper than 64 levels")
    if isinstance(value, str):
        if "://" in value or _LOCAL_SCHEMES.match(value):
            _check_url(f"{name}{where}", value.strip())
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_nested_urls(name, item, f"{where}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_nested_urls(name, item, f"{where}[{index}]", depth + 1)


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
