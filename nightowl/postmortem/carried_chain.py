"""``postmortem --verify`` for incremental reads: the chain of ``carried.json`` (docs/reference.md#incremental-reads).

A bundle whose kernel-log facts were partly carried names, per host, the bundle that read them (id and
sha256) and holds the carried text with its sha256. The check: the text matches its sha256; where the earlier
bundle is beside this one (the same output folder), its manifest hash is the one named, and what it read
(its own carried text plus what it fetched, read again through the collector's cursor) carries on to exactly
this text, and so on back to the last full read. A bundle not beside this one ends the check with a note.
An entry that cites its text (``carried_file``: a cheap read's full output; ``carried_in``: another bundle's
carried.json entry that holds it) is one link: the cited bundle's manifest is the one named, and it lists the
file's sha256 (engine/incremental.cited_text); a held text's chain goes on from the entry that holds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nightowl.engine import layout
from nightowl.engine.incremental import CARRIED, cited_text, digest, joined

MAX_LINKS = 10_000  # a chain of hourly reads over a year of uptime, and no loop


def _entries(bundle: Path) -> dict[str, dict[str, Any]] | None:
    try:
        hosts = json.loads((bundle / CARRIED).read_text(encoding="utf-8"))["hosts"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return hosts if isinstance(hosts, dict) else None


def _read_again(bundle: Path, host: str, kind: str, entry: dict[str, Any]) -> str | None:
    """What ``bundle`` parsed for ``host``'s ``kind``: its carried text plus the new part of what it fetched."""
    from nightowl.collectors import get_collector

    reader = getattr(get_collector(kind), "cursor", None)
    try:
        fetched = (bundle / layout.HOSTS / host / f"{kind}.out").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    if reader is None:
        return None
    piece = reader.read(tuple(entry.get("argv") or ()), fetched, entry.get("state_before"))
    return joined(reader, str(entry.get("carried_text") or ""), piece.body)


def verify_carried(bundle: Path) -> tuple[list[str], list[str]]:
    """(problems, notes): every link of every host's chain that does not hold; where the check stopped."""
    problems: list[str] = []
    notes: list[str] = []
    hosts = _entries(bundle)
    if hosts is None:
        return ([f"corrupt: {CARRIED}"] if (bundle / CARRIED).exists() else []), notes
    for host, kinds in sorted(hosts.items()):
        for kind, entry in sorted(kinds.items()):
            _follow(bundle, host, kind, entry, problems, notes)
    return problems, notes


def _follow(bundle: Path, host: str, kind: str, entry: dict[str, Any], problems: list[str], notes: list[str]) -> None:
    where = f"{CARRIED} {host} {kind}"
    for _ in range(MAX_LINKS):
        if entry.get("carried_file") or entry.get("carried_in"):
            _, problem = cited_text(bundle, entry, (host, kind))
            if problem is not None and problem.startswith("not beside"):
                notes.append(f"{where}: carried from {problem.removeprefix('not beside this bundle: ')}, not beside "
                             "this bundle (checked this far)")  # fmt: skip
            elif problem is not None:
                problems.append(f"{problem} ({where} in {bundle.name})")
            if problem is not None or entry.get("carried_file"):
                return  # a cited output file is a full read's: the chain starts there
            bundle = bundle.parent / str(entry["carried_from"]["bundle"])  # the entry that holds the text in full
            entry = (_entries(bundle) or {})[host][kind]
            continue
        if digest(str(entry.get("carried_text") or "")) != entry.get("carried_sha256"):
            problems.append(f"changed: {where} (the carried text's sha256 differs) in {bundle.name}")
            return
        cited = entry.get("carried_from")
        if not cited:
            return  # a full read: the chain starts here
        earlier = bundle.parent / str(cited.get("bundle"))
        hash_file = earlier / layout.MANIFEST_HASH
        if not hash_file.is_file():
            notes.append(f"{where}: carried from {cited.get('bundle')}, not beside this bundle (checked this far)")
            return
        if hash_file.read_text().split()[:1] != [cited.get("sha256")]:
            problems.append(f"changed: {cited.get('bundle')} (its manifest hash is not the one {where} cites)")
            return
        previous = (_entries(earlier) or {}).get(host, {}).get(kind)
        if previous is None:
            problems.append(f"missing: {cited.get('bundle')} holds no {CARRIED} entry for {host} {kind}")
            return
        from nightowl.collectors import get_collector

        read = _read_again(earlier, host, kind, previous)
        reader = getattr(get_collector(kind), "cursor", None)
        if read is None or reader is None or reader.keep(read) != entry.get("carried_text"):
            problems.append(f"changed: {where} in {bundle.name} is not what {cited.get('bundle')} read")
            return
        bundle, entry = earlier, previous
