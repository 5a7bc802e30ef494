"""No kernel pattern starts with an unanchored run (``\\S+``, ``.*``, ``.+``): ``re.search`` tries it at every
position of a line, and over a 16 KiB line without the text after it that is quadratic (the AER correctable row
took 1.1 s on one such line, and a storm of them stalled ``watch``'s follower; issue 42 item 7). A run that
starts a pattern must be held to a token start (``(?<!\\S)``) or the line start (``^``)."""

from __future__ import annotations

import csv
import re

from nightowl import knowledge

UNANCHORED_START = re.compile(r"^\(?(?:\\S|\.|\[\^[^\]]*\])[+*]")


def test_no_kernel_pattern_starts_with_an_unanchored_run() -> None:
    with knowledge.path("kernel_patterns.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    assert rows
    offenders = [row["id"] for row in rows if UNANCHORED_START.match(row["pattern"])]
    assert offenders == []


def test_the_shape_check_sees_the_shape_it_forbids() -> None:
    assert UNANCHORED_START.match(r"(\S+) (\S+): (?:AER: )?PCIe Bus Error")
    assert UNANCHORED_START.match(r".*Xid")
    assert not UNANCHORED_START.match(r"(?<!\S)(\S+) (\S+): PCIe Bus Error")
    assert not UNANCHORED_START.match(r"^(\S+) kernel:")
