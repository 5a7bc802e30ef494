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


# A runbook that includes the fragment ``shared`` (its ``include:`` on line 3, its node ``good`` on line 14),
# and that fragment: the include tests (test_includes*.py) vary this pair.
INCLUDING = """\
id: rb
title: t
include: [shared]
entry: start
nodes:
  start:
    collect: [kernel-log]
    next: check
  check:
    decide:
      - when: "status.kernel_log != 'ok'"
        goto: bad
    default: good
  good:
    verdict: {id: healthy, severity: ok, action: none, summary: fine}
"""

SHARED_FRAGMENT = """\
fragment: shared
description: a verdict two runbooks share
nodes:
  bad:
    verdict: {id: xid-seen, severity: warning, action: escalate, summary: seen}
"""

# The collectors the include tests' runbooks may name.
KNOWN_COLLECTORS = ["kernel-log", "nvidia-smi"]


def write_with_fragment(folder: Path, runbook: str = INCLUDING, fragment: str = SHARED_FRAGMENT) -> Path:
    """``runbook`` written to ``folder/rb.yaml`` and ``fragment`` beside it as ``fragments/shared.yaml``."""
    (folder / "fragments").mkdir(parents=True, exist_ok=True)
    (folder / "fragments" / "shared.yaml").write_text(fragment)
    path = folder / "rb.yaml"
    path.write_text(runbook)
    return path
