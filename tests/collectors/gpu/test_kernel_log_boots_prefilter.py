"""kernel-log-boots reads an earlier boot's log through a line prefilter (``candidate_lines``): its events
and warnings must be those of the whole log, as the kernel-log parser reads it line by line."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu import kernel_log, kernel_log_boots

ROOT = Path(__file__).resolve().parents[3]
LOGS = sorted(p for p in (ROOT / "fixtures").rglob("kernel-log*.out") if p.stat().st_size < 2_000_000)
LIST = (
    "IDX BOOT ID                          FIRST ENTRY                  LAST ENTRY\n"
    " -1 8d3c0e1f2a3b4c5d6e7f8091a2b3c4d5 Thu 2024-04-04 18:03:50 UTC  Fri 2024-04-05 21:40:02 UTC\n"
    "  0 1f0e2d3c4b5a69788796a5b4c3d2e1f0 Fri 2024-04-05 21:45:10 UTC  Fri 2024-04-05 23:10:00 UTC\n"
)


def whole_log_events(lines: list[str]) -> dict[str, Any]:
    """Today's reading without the prefilter: the whole section through the kernel-log parser."""
    log = to_jsonable(kernel_log.parse("\n".join(lines)))
    return {
        "events": [e for e in log.get("events") or [] if e.get("kind") != "other_nvrm"],
        "warnings": log.get("warnings") or [],
    }


def prefiltered(lines: list[str]) -> dict[str, Any]:
    log = to_jsonable(kernel_log.parse_lines(kernel_log_boots.candidate_lines(lines)))
    return {
        "events": [e for e in log.get("events") or [] if e.get("kind") != "other_nvrm"],
        "warnings": log.get("warnings") or [],
    }


def test_fixture_logs_read_alike() -> None:
    assert len(LOGS) > 20  # the recorded hosts' kernel logs (Xid, SXid, AER, OOM, fallen off the bus ...)
    differing = [
        p.name
        for p in LOGS
        if prefiltered(p.read_text(errors="replace").splitlines())
        != whole_log_events(p.read_text(errors="replace").splitlines())
    ]
    assert not differing


EXTRA_LINES = (
    "",
    "   ",
    "  NVRM: GPU at PCI:0000:3b:00: GPU-1",
    "pcieport 0000:00:01.0:    [ 0] RxErr",
    "kernel: Key type dns_resolver registered",
    "systemd[1]: Started Journal Service.",
)


def shuffled_mixture(seed: int, extra: tuple[str, ...] = EXTRA_LINES) -> list[str]:
    """Lines of every fixture log, mixed with ``extra`` lines (blank, indented, AER detail ...) in random
    order and runs: continuation lines land after messages that may or may not wait for them."""
    rng = random.Random(seed)
    pool = [line for p in LOGS for line in p.read_text(errors="replace").splitlines()]
    lines: list[str] = []
    for _ in range(rng.randrange(50, 400)):
        start = rng.randrange(len(pool))
        lines += pool[start : start + rng.randrange(1, 8)]
        if rng.random() < 0.3:
            lines.append(rng.choice(extra))
    return lines


@pytest.mark.parametrize("seed", range(40))
def test_shuffled_mixtures_read_alike(seed: int) -> None:
    lines = shuffled_mixture(seed)
    assert prefiltered(lines) == whole_log_events(lines)


def test_boot_sections_read_as_the_whole_log() -> None:
    boot = (ROOT / "fixtures" / "hosts").rglob("kernel-log.out")
    logs = [p.read_text(errors="replace") for p in sorted(boot)][:2]
    text = LIST + "".join(f"{kernel_log_boots.MARKER}-{n} --\n{log}" for n, log in enumerate(logs, start=1))
    parsed = kernel_log_boots.parse(text)
    for boot_read, log in zip(parsed["previous"], logs, strict=True):
        assert boot_read["events"] == whole_log_events(log.splitlines())["events"]
    assert not kernel_log_boots.shows_nothing(text)
    assert kernel_log_boots.shows_nothing(f"{kernel_log_boots.MARKER}-1 --\n{logs[0]}")


def test_a_log_of_skipped_lines_is_not_empty_input() -> None:
    lines = ["kernel: Key type dns_resolver registered", "kernel: systemd[1]: Started Journal Service."]
    assert prefiltered(lines) == whole_log_events(lines)
    assert prefiltered(["", "  "]) == whole_log_events(["", "  "])
