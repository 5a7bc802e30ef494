"""``postmortem --verify`` for citations: every ``[E# file:Lstart-Lend]`` of the stored draft still
points at a file that hashes as the draft's Evidence table says, and that still has those lines."""

from __future__ import annotations

import re
from pathlib import Path

from nightowl.engine import layout
from nightowl.postmortem.citations import CITATION

_EVIDENCE_ROW = re.compile(r"^\| (E\d+) \| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", re.M)


def verify_citations(bundle: Path, draft_name: str = layout.POSTMORTEM) -> tuple[int, list[str]]:
    """(citations checked, problems) for the draft stored in the bundle; no draft is no problem."""
    from nightowl.engine.private_files import read_regular_text, sha256_file

    draft = Path(bundle) / draft_name
    if not draft.is_file():
        return 0, []
    try:
        text = read_regular_text(draft)
    except OSError as exc:
        return 0, [f"{draft_name}: cannot read: {exc}"]
    table = {m.group(1): (m.group(2), m.group(3)) for m in _EVIDENCE_ROW.finditer(text)}
    problems: list[str] = []
    seen: dict[str, tuple[str, int] | None] = {}  # path -> (sha256, line count), or None if unreadable
    checked = 0
    for match in dict.fromkeys(m.group(0) for m in CITATION.finditer(text)):
        cite = CITATION.fullmatch(match)
        assert cite is not None
        checked += 1
        eid, name, start, end = cite["id"], cite["name"], int(cite["start"]), int(cite["end"])
        where = f"{draft_name}: citation [{match[1:-1]}]"
        if eid not in table:
            problems.append(f"{where}: {eid} is not in the draft's Evidence table")
            continue
        rel, digest = table[eid]
        if rel.rsplit("/", 1)[-1] != name:
            problems.append(f"{where}: {eid} is {rel}, not {name}")
            continue
        if rel not in seen:
            path = Path(bundle) / rel
            try:
                seen[rel] = (sha256_file(path), len(read_regular_text(path).splitlines()))
            except OSError:
                seen[rel] = None
        state = seen[rel]
        if state is None:
            problems.append(f"{where}: {rel} is missing")
        elif state[0] != digest:
            problems.append(f"{where}: {rel} no longer hashes to the cited sha256 {digest[:12]}…")
        elif not (start == end == 0 == state[1] or 1 <= start <= end <= state[1]):
            problems.append(f"{where}: {rel} has {state[1]} line(s), not L{start}-L{end}")
    return checked, problems
