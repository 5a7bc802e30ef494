"""Secrets of the serve config: a value may come inline, from a file, or from the environment.

``<key>_file`` and ``<key>_env`` keep the secret out of the config file itself (a config kept in git,
a Kubernetes Secret mounted as a file); an inline ``<key>`` is accepted but never required.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def read_secret(doc: Mapping[str, Any], key: str, where: str, default_env: str | None = None) -> str | None:
    """A secret from ``<key>_file``, ``<key>_env`` or ``<key>`` (in that order), else ``$default_env``.

    Raises ValueError naming ``where`` and the key when a named file cannot be read.
    """
    if doc.get(f"{key}_file"):
        path = Path(str(doc[f"{key}_file"])).expanduser()
        try:
            return path.read_text().strip() or None
        except OSError as exc:
            raise ValueError(f"{where}: {key}_file: cannot read {path}: {exc}") from None
    if doc.get(f"{key}_env"):
        return _clean(os.environ.get(str(doc[f"{key}_env"])))
    if doc.get(key):
        return _clean(str(doc[key]))
    return _clean(os.environ.get(default_env)) if default_env else None


def _clean(value: str | None) -> str | None:
    """Surrounding whitespace is never part of a secret: a Kubernetes Secret made from a file, or an
    ``echo`` into a variable, ends in a newline that would make an invalid (and logged) HTTP header."""
    return (value or "").strip() or None
