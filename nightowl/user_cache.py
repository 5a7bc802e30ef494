"""The user's cache folder, and files in it that only that user can have written.

``$NIGHTOWL_CACHE_DIR``, else ``$XDG_CACHE_HOME/nightowl``, else ``~/.cache/nightowl``, made mode 0700;
``NIGHTOWL_CACHE=off`` turns every cache off (docs/reference.md#the-runbook-cache). A file is read only
from a folder and as a file owned by the user running nightowl that no one else may write, never through
a symbolic link: the caches keep pickles and marshal data, which must come from that user alone. Any
failure to read or write is a miss, never an error: a cache costs speed when it fails, never a run.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def cache_dir() -> Path | None:
    """Where cached files live, or None when ``NIGHTOWL_CACHE=off``."""
    if os.environ.get("NIGHTOWL_CACHE", "").strip().lower() in ("off", "0", "no", "false"):
        return None
    given = os.environ.get("NIGHTOWL_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"  # the XDG spec: a relative one is ignored
    return base / "nightowl"


def _private(info: os.stat_result) -> bool:
    """Owned by the user running nightowl and writable by no one else."""
    return info.st_uid == os.getuid() and not stat.S_IMODE(info.st_mode) & (stat.S_IWGRP | stat.S_IWOTH)


def read_private(name: str) -> bytes | None:
    """The bytes of the cached file ``name``, or None (no cache, no such file, or one not the user's own)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        if not _private(os.stat(folder)):
            return None
        fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            return handle.read() if _private(os.fstat(handle.fileno())) else None
    except OSError:
        return None


def write_private(name: str, data: bytes, folder: Path | None = None) -> None:
    """Store ``data`` as the cached file ``name`` (mode 0600, replaced whole) in ``folder``, else in
    ``cache_dir()``; a folder that cannot be made or is not private is left alone."""
    folder = folder if folder is not None else cache_dir()
    if folder is None:
        return
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        if not _private(os.stat(folder)):
            return
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, folder / name)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # a read-only home or a full disk
        return
