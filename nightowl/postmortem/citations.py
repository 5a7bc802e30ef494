"""Citations to the line: ``E1 kernel-log.out:L12-L14``, backed by the file's sha256 in the Evidence table.

A claim in the draft names the evidence id (which the Evidence table maps to the file's path and its
sha256 from the manifest), the file's name and the lines that show it. ``postmortem --verify`` reads the
citations back from the stored draft and checks that each file still hashes as cited and still has
the cited lines (see ``verify.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nightowl.postmortem.bundle_reader import Bundle
from nightowl.postmortem.outputs import FAULT_KINDS, lines_of, located_kernel_events

MAX_RANGES = 6  # line ranges cited for one fact; the file holds the rest
# How a citation is written in the draft; verify.py reads it back with CITATION.
CITATION = re.compile(r"\[(?P<id>E\d+) (?P<name>[^\s\[\]:]+):L(?P<start>\d+)-L(?P<end>\d+)\]")


@dataclass(frozen=True)
class Cite:
    id: str  # the Evidence table's E#
    path: str  # relative to the bundle
    name: str  # the file's name, shown in the citation
    sha256: str
    start: int  # 1-based, inclusive; 0-0 for an empty file
    end: int
    label: str  # "E1 kernel-log.out:L12-L14"
    anchor: str  # "E1-L12": the line's anchor in the HTML draft's copy of the raw file


def cite_lines(data: Bundle, rel: str | None, start: int, end: int) -> Cite | None:
    evidence = data.cite(rel)
    if evidence is None:
        return None
    count = len(lines_of(data, evidence.path))
    start, end = (0, 0) if count == 0 else (max(1, min(start, count)), max(1, min(end, count)))
    name = evidence.path.rsplit("/", 1)[-1]
    return Cite(
        evidence.id,
        evidence.path,
        name,
        evidence.sha256,
        start,
        max(start, end),
        f"{evidence.id} {name}:L{start}-L{max(start, end)}",
        f"{evidence.id}-L{start}",
    )


def cite_file(data: Bundle, rel: str | None) -> Cite | None:
    """The whole file, when no narrower span shows the claim."""
    evidence = data.cite(rel)
    return cite_lines(data, rel, 1, len(lines_of(data, evidence.path))) if evidence else None


def ranges(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """[3, 4, 5, 9] -> [(3, 5), (9, 9)]."""
    out: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def cite_numbers(data: Bundle, rel: str, numbers: Iterable[int]) -> list[Cite]:
    spans = ranges(numbers)
    cites = [c for a, b in spans[:MAX_RANGES] if (c := cite_lines(data, rel, a, b))]
    return cites or [c for c in [cite_file(data, rel)] if c]


def _needles(value: Any) -> list[str]:
    """The strings a fact's value would show as in a raw file (numbers and names, not booleans)."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float, str)):
        text = str(value).strip()
        return [text] if len(text) >= 2 or text.isdigit() else []
    if isinstance(value, (list, tuple)):
        return [n for item in value[:20] for n in _needles(item)]
    if isinstance(value, dict):
        return [n for item in list(value.values())[:20] for n in _needles(item)]
    return []


def lines_showing(data: Bundle, rel: str, value: Any) -> list[int]:
    """Line numbers of ``rel`` that show ``value`` (case-insensitive), a few at most."""
    needles = [n.lower() for n in _needles(value)]
    if not needles:
        return []
    found = []
    for number, line in enumerate(lines_of(data, rel), start=1):
        low = line.lower()
        if any(n in low for n in needles):
            found.append(number)
            if len(found) >= 4 * MAX_RANGES:
                break
    return found


def json_lines(data: Bundle, rel: str, key: str, value: Any) -> list[int]:
    """Lines of a pretty-printed JSON file of the bundle that hold ``"key": value``."""
    needle = f'"{key}": {json.dumps(value)}'
    return [n for n, line in enumerate(lines_of(data, rel), start=1) if needle in line]


def kind_of(data: Bundle, rel: str) -> str | None:
    """The collector kind that wrote ``rel`` (from the manifest)."""
    for command in data.manifest.get("commands", []):
        if command.get("file") == rel:
            return str(command.get("kind"))
    return None


def fact_cites(data: Bundle, rel: str | None, fact: str, value: Any) -> list[Cite]:
    """The lines of ``rel`` that show a fact: the kernel events it was read from, else the lines that
    hold its value, else the whole file."""
    evidence = data.cite(rel)
    if evidence is None:
        return []
    rel = evidence.path
    if kind_of(data, rel) == "kernel-log":
        rows = located_kernel_events(data, rel)
        matched = _kernel_rows_for(rows, fact, value)
        return cite_numbers(data, rel, [n for r in matched for n in range(r["start"], r["end"] + 1)])
    return cite_numbers(data, rel, lines_showing(data, rel, value))


def _kernel_rows_for(rows: list[dict[str, Any]], fact: str, value: Any) -> list[dict[str, Any]]:
    """Kernel events a fact was read from: by topic (recovery action, fallen off the bus, a kind),
    narrowed by the Xid codes and GPUs the value names when that leaves any."""
    faults = [r for r in rows if r["event"].get("kind") in FAULT_KINDS]
    topic = faults
    if "recovery" in fact:
        topic = [r for r in faults if r["event"].get("code") == 154] or faults
    else:
        for kind in FAULT_KINDS:
            if kind in fact:
                topic = [r for r in faults if r["event"].get("kind") == kind] or faults
                break
    needles = _needles(value)
    codes = {int(n) for n in needles if n.isdigit()}
    named = [r for r in topic if r["event"].get("code") in codes or str(r["event"].get("pci")) in needles]
    # a GPU named by no fault row (RmInitAdapter failed on 0a:00 beside Xids on 07:00): the lines naming that GPU
    on_gpu = [r for r in rows if str(r["event"].get("pci")) in needles] if not named and needles else []
    return named or on_gpu or topic


def merged(cites: Iterable[Cite], data: Bundle) -> list[Cite]:
    """Citations of one claim, overlapping spans of a file joined: [L2-L2, L1-L2] -> [L1-L2]."""
    by_file: dict[str, set[int]] = {}
    for cite in cites:
        by_file.setdefault(cite.path, set()).update(range(cite.start, cite.end + 1) if cite.end else [0])
    out: list[Cite] = []
    for rel, numbers in by_file.items():
        out += (
            cite_numbers(data, rel, [n for n in numbers if n])
            if any(numbers)
            else [c for c in [cite_file(data, rel)] if c]
        )
    return out
