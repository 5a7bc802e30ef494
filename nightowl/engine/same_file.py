"""The same output, the same file: a bundle file that holds exactly what the last bundle's file of the same
name held is a hard link to it, not a new file, in a process that repeats (`nightowl sweep --every`).

Most of a steady round's outputs are the very bytes the last round stored for the host (NVLink status and
error counters, the list of boots, a service's state, an empty port listing). Creating a file costs the
filesystem an inode: on ext4 it was a fifth of a steady round's CPU in this process, where a link to the
last bundle's file costs a twentieth of that. Each bundle still holds every file under its own name, listed
with its sha256 in its own manifest, so it reads, replays and verifies as before; removing one bundle
(`nightowl bundles --prune`) leaves the other's file, as the link count says. A file is linked only while
it is as it was stored (same inode, size, mode and mtime), and only under ``hosts/`` and the runbook (the
other documents change every round anyway); anything else, a link that fails included, is written as before.

One caveat, in docs/reference.md#repeated-sweeps: a file written over in place in one bundle after the fact
changes in the bundles that link it too; each bundle's manifest names the sha256 it had, so
`postmortem --verify` tells of the change in each. Within one bundle, a file under ``hosts/`` holding the very
bytes of one stored before it (the shared query's answer, kept as each of its readers' output; an empty listing)
is linked to that one (``BundleWriter._link_twin``; the writer's own file, so without the checks above).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from nightowl.engine import layout

OUTPUTS = layout.HOSTS + "/"  # the bundle's outputs (and their exit statuses and errors), one folder a host
LINKED = (OUTPUTS, layout.RUNBOOK)  # the bundle's outputs, and the runbook: the files a steady round repeats


class SameFile:
    """The files of the last bundle, by their name in it: (sha256, size, inode, mtime, where); thread-safe."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[str, int, int, int, str]] = {}
        self._lock = threading.Lock()
        self.linked = 0

    def link(self, name: str, size: int, sha256: str, target: Path) -> bool:
        """Link ``target`` to the last bundle's file ``name`` when that holds these bytes; False: write it."""
        with self._lock:
            kept = self._kept.get(name)
        if kept is None or kept[:2] != (sha256, size):
            return False
        try:
            status = os.stat(kept[4])
            if (status.st_ino, status.st_size, status.st_mtime_ns) != (kept[2], size, kept[3]):
                return False
            if stat.S_IMODE(status.st_mode) != 0o600:
                return False
            os.link(kept[4], target)
        except OSError:  # gone (pruned), another filesystem, no links there: written as before
            return False
        self.count_link()
        return True

    def count_link(self) -> None:
        """One more file linked, not written (the round line's "files linked")."""
        with self._lock:
            self.linked += 1

    def remember(self, bundle: Path, stored: Mapping[str, tuple[int, str]]) -> None:
        """The files of ``bundle`` (finished, at its final path) that a later bundle may link."""
        found: dict[str, tuple[str, int, int, int, str]] = {}
        for name, (size, sha256) in stored.items():
            if name.startswith(LINKED):
                with contextlib.suppress(OSError):
                    status = os.stat(path := bundle / name)
                    found[name] = (sha256, size, status.st_ino, status.st_mtime_ns, str(path))
        with self._lock:
            self._kept.update(found)


_ACTIVE: SameFile | None = None


@contextlib.contextmanager
def linking() -> Iterator[SameFile]:
    """While in force, bundles written in this process link the files they share with the last one."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, SameFile()
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = previous


def active() -> SameFile | None:
    return _ACTIVE
