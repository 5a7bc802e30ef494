"""The small runbook the validation tests break one way each, and the helpers that write it.

One text, varied per test by `variant`, so that a change to the runbook schema is made here once
instead of in each of the validation test files.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# Reads the kernel log, decides on its Xid codes, ends in one of two verdicts (line 10 is the condition).
XID_CHECK = """\
id: t
title: test
entry: start
nodes:
  start:
    collect: [kernel-log]
    next: check
  check:
    decide:
      - when: "kernel_log.xid_codes | length > 0"
        goto: bad
    default: good
  bad:
    verdict: {id: bad, severity: critical, action: reset-gpu, summary: "xids {{ kernel_log.xid_codes }}"}
  good:
    verdict: {id: good, severity: ok, action: none, summary: fine}
"""


def variant(text: str, *swaps: tuple[str, str]) -> str:
    """``text`` with each (old, new) replaced once; an ``old`` that is not there fails the test at once,
    so a variant can never silently be the unchanged text."""
    for old, new in swaps:
        assert old in text, f"{old!r} is not in the runbook text"
        text = text.replace(old, new, 1)
    return text


def write_runbook(tmp_path: Path, text: str, name: str = "rb.yaml") -> Path:
    """The runbook text (dedented) written to ``tmp_path/name``."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path
