"""One check for a section of the receiver's config file (``notify:``, ``storm:``): a mapping of known keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def known_section(doc: Any, name: str, keys: frozenset[str] | set[str], where: str, error: type[ValueError]) -> bool:
    """False when the section is absent (use its defaults); ``error`` naming the file and key when ``doc`` is
    not a mapping or has a key outside ``keys``."""
    if doc is None:
        return False
    if not isinstance(doc, Mapping):
        raise error(f"{where}: {name} is a mapping")
    unknown = set(doc) - set(keys)
    if unknown:
        raise error(f"{where}: {name}: unknown key(s) {', '.join(sorted(unknown))}")
    return True
