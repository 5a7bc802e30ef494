"""Whether a file may choose what nightowl does: one rule for a site runbook (nightowl/library/runbooks.py) and
for a fragment it includes (engine/includes.py), since whoever can write either chooses what a run (often as
root) executes and concludes."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def unsafe_reason(path: Path) -> str | None:
    """Why ``path`` may not supply a runbook or its nodes (someone else may write it), or None: owned by another
    user than root or the runner, writable by every user, or writable by a group that is neither's."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"{path}: cannot stat ({exc.strerror})"
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (0, os.getuid()):
        return f"{path} is owned by uid {info.st_uid}, neither root nor the user running nightowl"
    if mode & stat.S_IWOTH:
        return f"{path} is writable by every user (mode {mode:04o})"
    if mode & stat.S_IWGRP and info.st_gid not in (0, os.getgid()):
        return f"{path} is writable by group {info.st_gid} (mode {mode:04o})"
    return None
