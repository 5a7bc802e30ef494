"""Where the bundled runbooks, templates and fixtures live (wheel or source tree)."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def default_out_dir() -> Path:
    """Where bundles go unless told otherwise: $NIGHTOWL_OUT, else ~/.local/state/nightowl/bundles."""
    return Path(os.environ.get("NIGHTOWL_OUT", "~/.local/state/nightowl/bundles")).expanduser()


def data_dir(name: str) -> Path:
    """``runbooks``, ``templates`` or ``fixtures``: inside the wheel, else the checkout."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name
