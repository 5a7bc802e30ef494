"""Stand-ins for `journalctl` and `dmesg` that keep a real cursor and a real ring (tests of issue 46).

Each is a small program put first on PATH; its state is a JSON file the test edits between reads:
``{"boot": id, "entries": [[seq, line], ...]}`` for the journal (a cursor names a boot and a sequence number,
as journald's ``s=;i=;b=`` does: ``--cursor`` starts at that entry, or after where it was when it is gone,
as sd_journal_seek_cursor does), ``{"records": ["[  12.345678] text", ...], "size": N}`` for the ring (only
the last N records are kept: it wraps)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

# Under a fleet's sshd (tests/ssh/fleet.py) the state is in the host's folder, found as its stand-ins find it.
_HERE = r"""
def here(name):
    return os.path.join(os.environ["NIGHTOWL_FLEET"], "hosts", os.environ["SSH_CONNECTION"].split()[2], name)
"""

JOURNALCTL = r"""#!PYTHON
import json, os, sys
HERE
args = sys.argv[1:]
state = json.load(open(os.environ.get("STANDIN_JOURNAL") or here("journal.json")))
boot, entries = state["boot"], state["entries"]
if "--list-boots" in args:  # one boot listed, the current one (journalctl(1): IDX, boot id, first and last entry)
    import hashlib
    last = entries[-1][0] if entries else 0  # its last entry moves as the journal grows, as a real one's does
    print("IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY")
    print(f"  0 {hashlib.md5(boot.encode()).hexdigest()} Sat 2024-06-01 10:00:00 UTC "
          f"Sat 2024-06-01 {12 + last // 3600 % 12:02d}:{last // 60 % 60:02d}:{last % 60:02d} UTC")
    sys.exit(0)
if "-k" not in args or any(a.startswith("-") and a[1:].isdigit() for a in args):
    sys.exit(1)  # no earlier boot is kept
def cursor(seq):
    return f"s=standin;i={seq:x};b={boot};m=0;t=0;x=0"
start = 0
for arg in args:
    if arg.startswith("--cursor="):
        parts = dict(p.split("=", 1) for p in arg[len("--cursor="):].split(";"))
        if parts.get("b") == boot:
            seq = int(parts["i"], 16)
            start = next((n for n, (s, _) in enumerate(entries) if s >= seq), len(entries))
if not entries:
    print("-- No entries --")
    sys.exit(0)
for _, line in entries[start:]:
    print(line)
if "--show-cursor" in args:
    print("-- cursor: " + cursor(entries[-1][0]))
"""

DMESG = r"""#!PYTHON
import json, os, sys
HERE
if len(sys.argv) > 1:
    sys.exit(1)  # -T: the raw ring only
state = json.load(open(os.environ.get("STANDIN_RING") or here("ring.json")))
for record in state["records"][-state["size"]:]:
    print(record)
"""


def install(folder: Path) -> dict[str, str]:
    """Write the stand-ins into ``folder/bin``; the environment to run them with (PATH first, state files)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, source in (("journalctl", JOURNALCTL), ("dmesg", DMESG)):
        path = bin_dir / name
        path.unlink(missing_ok=True)  # a fleet's link to its own stand-in
        path.write_text(source.replace("PYTHON", sys.executable, 1).replace("HERE", _HERE, 1))
        path.chmod(0o755)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "STANDIN_JOURNAL": str(folder / "journal.json"),
        "STANDIN_RING": str(folder / "ring.json"),
    }


class Journal:
    """The journal's state file: entries appended with growing sequence numbers, vacuumed from the front."""

    def __init__(self, path: Path, boot: str = "boot-1") -> None:
        self.path, self.boot, self.entries, self.seq = path, boot, [], 0
        self.save()

    def add(self, *lines: str) -> None:
        for line in lines:
            self.seq += 1
            self.entries.append([self.seq, line])
        self.save()

    def vacuum(self, count: int) -> None:
        del self.entries[:count]
        self.save()

    def reboot(self, boot: str) -> None:
        self.boot, self.entries = boot, []
        self.save()

    def save(self) -> None:
        self.path.write_text(json.dumps({"boot": self.boot, "entries": self.entries}))


class Ring:
    """The ring's state file: raw records with monotonic stamps; only the last ``size`` are kept."""

    def __init__(self, path: Path, size: int = 10_000) -> None:
        self.path, self.size, self.records, self.clock = path, size, [], 0.0
        self.save()

    def add(self, *texts: str) -> None:
        for text in texts:
            self.clock += 1.25
            self.records.append(f"[{self.clock:12.6f}] {text}")
        self.save()

    def save(self) -> None:
        self.path.write_text(json.dumps({"records": self.records, "size": self.size}))


def record_loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(kind, whether its carried text was read) of every saved position loaded from now on."""
    from nightowl.history import cursors

    seen: list[tuple[str, bool]] = []
    real = cursors.load

    def load(path: Path, host: str, kind: str, text: bool = True) -> Any:
        seen.append((kind, text))
        return real(path, host, kind, text)

    monkeypatch.setattr(cursors, "load", load)
    return seen
