"""A GPU node stood in by scripts: ``nvidia-smi``, ``journalctl`` and ``dmesg`` on PATH that print a
recorded host's outputs (the layout of a bundle's hosts/NAME/), so the real ``nightowl check`` runs unchanged.
A ``<kind>.sleep`` file (seconds) makes that tool hang first, as a wedged driver does.

The recording served is the target of the symlink ``<root>/current``; ``switch()`` repoints it
atomically, so a test can turn a node from faulty to healthy while daemons keep calling it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.ssh.fleet import kind_cases

STANDINS = ("nvidia-smi", "journalctl", "dmesg")


class StandinNode:
    def __init__(self, root: Path, recording: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.current = root / "current"
        script = self.bin / ".standin"
        script.write_text(_script(self.current))
        script.chmod(0o755)
        for name in STANDINS:
            (self.bin / name).symlink_to(".standin")
        self.switch(recording)

    def switch(self, recording: Path) -> None:
        staged = self.root / "current.new"
        staged.unlink(missing_ok=True)
        staged.symlink_to(recording.resolve())
        os.replace(staged, self.current)

    def path(self) -> str:
        """PATH with the stand-ins first and only the system directories after them."""
        return f"{self.bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

    def copy_recording(self, name: str, dest: Path) -> Path:
        """The recording served now, copied to ``dest/name`` (what a later capture would find)."""
        target = dest / name
        shutil.copytree(self.current.resolve(), target)
        return target


def _script(current: Path) -> str:
    pick_kind = kind_cases(STANDINS)
    return f"""#!/bin/sh
# Stand-in written by tests/fleet/standin.py: prints the current recording's output for one kind.
name=${{0##*/}}
kind=$name
{pick_kind}
base='{current}'/$kind
if [ ! -e "$base.out" ] && [ ! -e "$base.rc" ] && [ ! -e "$base.sleep" ]; then
  echo "$name: not recorded ($kind)" >&2; exit 127
fi
if [ -e "$base.sleep" ]; then read -r secs < "$base.sleep"; /bin/sleep "$secs"; fi
[ -e "$base.err" ] && /bin/cat "$base.err" >&2
[ -e "$base.out" ] && /bin/cat "$base.out"
if [ -e "$base.rc" ]; then read -r rc < "$base.rc"; exit "$rc"; fi
exit 0
"""
