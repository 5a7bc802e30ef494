"""Where nightowl keeps and finds things: bundles, site runbooks, and its own data (wheel or checkout).

Per the XDG Base Directory spec through platformdirs (https://specifications.freedesktop.org/basedir-spec/):
bundles under the user's state directory (``$XDG_STATE_HOME``, default ~/.local/state), unless
``--out`` or ``$NIGHTOWL_OUT`` says otherwise; a team's own runbooks in ``$XDG_CONFIG_HOME/nightowl/runbooks``
(default ~/.config) and ``/etc/nightowl/runbooks``.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
APP = "nightowl"
SITE_CONFIG_DIR = Path("/etc/nightowl")


def state_dir() -> Path:
    """~/.local/state/nightowl, or under $XDG_STATE_HOME."""
    import platformdirs

    return Path(platformdirs.user_state_path(APP))


def config_dir() -> Path:
    """~/.config/nightowl, or under $XDG_CONFIG_HOME."""
    import platformdirs

    return Path(platformdirs.user_config_path(APP))


def default_out_dir() -> Path:
    """Where bundles go unless told otherwise: $NIGHTOWL_OUT, else <state dir>/bundles."""
    given = os.environ.get("NIGHTOWL_OUT")
    return Path(given).expanduser() if given else state_dir() / "bundles"


def runbook_dirs(extra: tuple[Path, ...] = ()) -> list[Path]:
    """Site runbook folders, first found wins: --runbook-path (and $NIGHTOWL_RUNBOOK_PATH, colon-separated),
    then $XDG_CONFIG_HOME/nightowl/runbooks, then /etc/nightowl/runbooks. The built-ins come after them."""
    from_env = tuple(Path(p).expanduser() for p in os.environ.get("NIGHTOWL_RUNBOOK_PATH", "").split(":") if p)
    return [*extra, *from_env, config_dir() / "runbooks", SITE_CONFIG_DIR / "runbooks"]


def data_dir(name: str) -> Path:
    """``runbooks``, ``templates`` or ``fixtures``: inside the wheel, else the checkout."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name
