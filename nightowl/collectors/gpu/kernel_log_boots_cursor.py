"""`kernel-log-boots` read once per boot (issue 46; docs/reference.md#incremental-reads).

An earlier boot's kernel log does not change once the node has booted again, so after one full read
(``journalctl --list-boots`` and each earlier boot's cut log: kernel_log_boots.py) a later read asks only for
the list. While it lists the same earlier boots (same offsets, boot ids and first entries) and the same current
boot, the earlier boots' sections read before are carried and parsed after the fresh list: the facts a full
read gives. Another list (a reboot, a boot vacuumed out of the journal) or another ``previous_boots`` is a full
read. What is carried is the sections (from the first marker line on); the list is always read fresh.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LIST = ("journalctl", "--list-boots", "--no-pager")


@dataclass(frozen=True)
class Piece:
    body: str
    state: dict[str, Any] | None
    gap: str | None = None


@dataclass(frozen=True)
class Listing:
    """How kernel_log_boots.py reads its output (handed in: that module builds its collector with this cursor)."""

    kind: str
    script: str  # the full read's `sh -c` script (its $1: previous_boots)
    boot_row: re.Pattern[str]  # a --list-boots row: offset, boot id, the rest (its entry times)
    entry_time: re.Pattern[str]
    marker_line: re.Pattern[str]  # the line before an earlier boot's section
    marker: str  # a substring of every marker line (found before the expression is tried)


class KernelLogBootsCursor:
    """The list every time; the earlier boots' logs once per list."""

    def __init__(self, listing: Listing) -> None:
        self.listing = listing
        self.kind = listing.kind
        self.full = ("sh", "-c", listing.script, listing.kind, "{previous_boots}")
        self.shapes = (self.full, LIST)  # collectors/readonly_commands.yaml allows each

    def _is_marker(self, line: str) -> bool:
        return self.listing.marker in line and self.listing.marker_line.match(line.strip()) is not None

    def _rows(self, lines: list[str]) -> tuple[list[list[Any]], str | None]:
        """The earlier boots the list shows ([offset, boot id, first entry]) and the current boot's id."""
        earlier: list[list[Any]] = []
        current = None
        for line in lines:
            if self._is_marker(line):
                break
            row = self.listing.boot_row.match(line)
            if row is None:
                continue
            offset, boot = int(row.group(1)), row.group(2)
            if offset == 0:
                current = boot
            elif offset < 0:
                times = self.listing.entry_time.findall(row.group(3))
                earlier.append([offset, boot, times[0] if times else None])
        return earlier, current

    def commands(
        self, state: Mapping[str, Any] | None, params: Mapping[str, Any]
    ) -> list[tuple[tuple[str, ...], dict[str, str]]]:
        if state is None:
            return [(self.full, {}), (self.full, {"previous_boots": "2"})]
        if str(params.get("previous_boots", "2")) != str(state.get("previous_boots")):
            return []  # another number of earlier boots asked: a full read
        return [(LIST, {})]

    def read(self, argv: tuple[str, ...], stdout: str, state: Mapping[str, Any] | None) -> Piece:
        lines = stdout.splitlines()
        earlier, current = self._rows(lines)
        if current is None:
            return Piece(stdout, None, "the boot list shows no current boot")
        if argv[:1] == ("sh",):  # a full read: the list, then each earlier boot's section
            asked = argv[-1]
            return Piece(stdout, {"boots": earlier, "current": current, "previous_boots": asked})
        new = {"boots": earlier, "current": current, "previous_boots": (state or {}).get("previous_boots")}
        if state is None or earlier != state.get("boots") or current != state.get("current"):
            return Piece("", new, "the boot list changed (a reboot, or a boot gone from the journal)")
        return Piece(stdout, new)

    def keep(self, text: str) -> str:
        """The earlier boots' sections: from the first marker line on."""
        lines = text.splitlines(keepends=True)
        for index, line in enumerate(lines):
            if self._is_marker(line):
                return "".join(lines[index:])
        return ""

    def settled(self, carried: str) -> bool:
        """Always: an earlier boot's section ends with that boot, and a list never joins it."""
        return True

    def quiet(self, body: str) -> bool:
        """Whether ``body`` is a list alone (no section): ``keep(join(carried, body))`` is then ``carried``, and
        engine/incremental.py takes the last parse's facts ``refresh``ed with the fresh list's."""
        return not any(self._is_marker(line) for line in body.splitlines())

    @staticmethod
    def refresh(facts: Mapping[str, Any], listed: Mapping[str, Any]) -> dict[str, Any]:
        """What a fresh list changes in the facts of the last parse of a list and the carried sections: the boots
        it lists, the current boot, each earlier boot's ids and entry times, and the list's warnings; the sections'
        events and warnings stand. ``listed``: the facts of the fresh list alone (kernel_log_boots.facts)."""
        boots = list(listed.get("boots") or [])
        by_offset = {boot.get("offset"): boot for boot in boots}
        times = ("boot_id", "first_entry", "last_entry")
        previous = [
            {**boot, **{key: by_offset.get(boot.get("offset"), {}).get(key) for key in times}}
            for boot in facts.get("previous") or []
        ]
        sections = [w for w in facts.get("warnings") or [] if str(w).startswith("boot ")]  # "boot -1: ..."
        return {
            "boots": boots,
            "current_boot_id": listed.get("current_boot_id"),
            "reboots_listed": listed.get("reboots_listed"),
            "previous": previous,
            "warnings": [*(listed.get("warnings") or []), *sections],
        }

    def join(self, carried: str, body: str) -> str:
        """The fresh list first, then the carried sections (the order a full read prints them in)."""
        if not carried:
            return body
        return body + ("" if not body or body.endswith("\n") else "\n") + carried
