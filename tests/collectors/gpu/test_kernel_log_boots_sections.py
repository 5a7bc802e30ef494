"""kernel-log-boots cuts its sections by marker line and slice (``_sections``) instead of appending line by
line: ``parse`` gives what it gave (the reference below is the function as it was) on the recorded hosts'
outputs and on random mixtures of list rows, marker lines (good, bad, repeated) and log lines."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.gpu import kernel_log_boots
from nightowl.collectors.gpu.kernel_log_boots import (
    _BOOT_ROW,
    _ENTRY_TIME,
    _MARKER_LINE,
    KIND,
    MARKER,
    candidate_lines,
)

ROOT = Path(__file__).resolve().parents[3]
OUTPUTS = sorted((ROOT / "fixtures").rglob("kernel-log-boots*.out"))
LOGS = sorted(p for p in (ROOT / "fixtures").rglob("kernel-log.out") if p.stat().st_size < 200_000)


def reference_parse(text: str, candidates: Callable[[list[str]], list[str]] = candidate_lines) -> dict[str, Any]:
    from nightowl.collectors.base import to_jsonable
    from nightowl.collectors.gpu.kernel_log import parse_lines

    warnings: list[str] = []
    boots: dict[int, dict[str, Any]] = {}
    sections: dict[int, list[str]] = {}
    current: int | None = None
    for line in text.splitlines():
        marker = _MARKER_LINE.match(line.strip()) if MARKER in line else None
        if marker:
            current = -int(marker.group(1))
            sections[current] = []
            continue
        if current is not None:
            sections[current].append(line)
            continue
        row = _BOOT_ROW.match(line)
        if row:
            times = _ENTRY_TIME.findall(row.group(3))
            boots[int(row.group(1))] = {
                "offset": int(row.group(1)),
                "boot_id": row.group(2),
                "first_entry": times[0] if times else None,
                "last_entry": times[1] if len(times) > 1 else None,
            }
        elif line.strip() and not line.lstrip().startswith("IDX"):
            warnings.append(f"not a --list-boots line: {line.strip()[:120]}")
    previous = []
    for offset in sorted(sections, reverse=True):
        log = to_jsonable(parse_lines(candidates(sections[offset])))
        known = boots.get(offset, {})
        previous.append(
            {
                "offset": offset,
                "boot_id": known.get("boot_id"),
                "first_entry": known.get("first_entry"),
                "last_entry": known.get("last_entry"),
                "events": [e for e in log.get("events") or [] if e.get("kind") != "other_nvrm"],
            }
        )
        warnings += [f"boot {offset}: {w}" for w in log.get("warnings") or []]
    current_boot = boots.get(0, {}).get("boot_id")
    return {
        "kind": KIND,
        "warnings": warnings,
        "boots": [boots[k] for k in sorted(boots)],
        "current_boot_id": current_boot,
        "previous": previous,
    }


def test_recorded_outputs_parse_as_before() -> None:
    assert OUTPUTS
    for path in OUTPUTS:
        text = path.read_text(errors="replace")
        assert kernel_log_boots.parse(text) == reference_parse(text)


@pytest.mark.parametrize("seed", range(30))
def test_random_mixtures_parse_as_before(seed: int) -> None:
    rng = random.Random(seed)
    pool = [line for p in LOGS[:12] for line in p.read_text(errors="replace").splitlines()[:60]]
    rows = [line for p in OUTPUTS for line in p.read_text(errors="replace").splitlines() if _BOOT_ROW.match(line)]
    specials = [
        f"{MARKER}-1 --",
        f"  {MARKER}-2 --  ",
        f"{MARKER}-3 --",
        f"{MARKER}-x --",
        f"say {MARKER}-1 --",
        "IDX BOOT ID FIRST ENTRY LAST ENTRY",
        "",
        "garbage",
        *rows,
    ]
    lines = [rng.choice(specials) if rng.random() < 0.25 else rng.choice(pool) for _ in range(rng.randint(0, 80))]
    text = "\n".join(lines)
    assert kernel_log_boots.parse(text) == reference_parse(text)
