"""Bundle files on disk: written owner-only (0600 files, 0700 folders, whatever the umask), and read
only when they are regular files (a FIFO or a device in a received bundle would block a reader)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any


def encoded(text: str | bytes) -> bytes:
    """The bytes a bundle stores for ``text``: UTF-8, undecodable input kept as it came; bytes as they are."""
    return text if isinstance(text, bytes) else text.encode("utf-8", errors="surrogateescape")


def write_private(path: Path, text: str | bytes) -> bytes:
    """Write ``text`` to a file only its owner can read (0600 from creation, not chmod afterwards).

    Returns the bytes stored (UTF-8, undecodable input kept as it came), so the caller can hash them
    without reading the file back; bytes given (a caller that encoded them to hash them) are written as
    they are, not encoded a second time."""
    data = encoded(text)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(data)
    return data


def private_dir(path: Path) -> Path:
    """Create ``path`` if missing and make it owner-only (0700), whatever the umask."""
    path.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def open_regular(path: Path) -> Any:
    """``path`` opened for reading only if it is a regular file, else OSError: a FIFO or a device in a
    received bundle would block a reader forever (opened non-blocking, checked, then read blocking)."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular_text(path: Path) -> str:
    """The text of a regular file (undecodable bytes replaced); OSError for anything else."""
    with open_regular(path) as handle:
        return handle.read().decode("utf-8", errors="replace")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a regular file, read in 1 MiB blocks (OSError for a FIFO, device, folder)."""
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
