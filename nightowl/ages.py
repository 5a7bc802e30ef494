"""Ages and windows as people write them: ``90s``, ``10m``, ``24h``, ``30d``, ``2w`` (a bare number is seconds)."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_age(text: str) -> float | None:
    """Seconds of an age (``10m`` -> 600.0); None when it is not one."""
    match = _AGE.match(str(text))
    if not match:
        return None
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def format_age(seconds: float | None) -> str:
    """``3h``, ``2d`` ...: the largest unit that fits, for tables."""
    if seconds is None:
        return "-"
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
