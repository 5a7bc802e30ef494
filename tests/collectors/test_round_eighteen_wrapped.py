"""The eighteenth session's parser fixes hold for their families, not only for the files that showed them: each
fixed text, pasted as users paste it (every wrapper the normaliser takes off for its kind: indented, quoted, with
HTML entities, CRLF, a prompt, a launcher's or syslog's prefix), reads as it does bare (tests/collectors/
test_normalise.py ``wrapped_alike``), and the bare text shows the fact the fix is for."""

from __future__ import annotations

from typing import Any

import pytest

from tests.collectors.gpu.test_field_seventeen_fixes import CRASHCAT
from tests.collectors.serving.test_field_sixteen_fixes import COMPOSE, STATS, TASK_FAILED, TIMED_OUT
from tests.collectors.test_normalise import WRAPPERS, applies, facts_of, wrapped_alike

OLD_XID = (
    "[12146.826127] NVRM Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000\n"
    "[12146.827566] NVRM Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000\n"
)
UNNAMED = "[    5.100000] NVRM: rm_init_adapter failed\n[    5.100100] nvidia: probe of 0000:01:00.0 failed\n"
FIXES: dict[str, tuple[str, str, Any]] = {
    "old-xid": ("kernel-log", OLD_XID, lambda f: f["xid_codes"] == [32]),
    "rm-init-unnamed": ("kernel-log", UNNAMED, lambda f: f["gpu_init_failed"] is True),
    "crashcat": ("kernel-log", CRASHCAT, lambda f: f["xid_judgement"]["action"] == "reset-gpu"),
    "engine-loop-gave-up": ("engine-log", f"{STATS}\n{TIMED_OUT}\n", lambda f: f["error_kinds"] == ["engine-dead"]),
    "records-run-together": (
        "engine-log",
        f"{STATS} {TIMED_OUT} {TASK_FAILED}\n",
        lambda f: f["error_kinds"] == ["engine-dead"] and f["last_stats"]["running"] == 8,
    ),
    "compose-services": ("engine-log", "\n".join(COMPOSE) + "\n", lambda f: f["last_phase"] != "ready"),
}
CASES = [(fix, family) for fix, (kind, text, _) in FIXES.items() for family in WRAPPERS if applies(kind, family, text)]


@pytest.mark.parametrize("fix", FIXES)
def test_the_bare_text_shows_what_the_fix_reads(fix: str) -> None:
    kind, text, shows = FIXES[fix]
    assert shows(facts_of(kind, text))


@pytest.mark.parametrize(("fix", "family"), CASES)
def test_the_fixed_text_reads_alike_however_it_was_pasted(fix: str, family: str) -> None:
    kind, text, _ = FIXES[fix]
    same, named = wrapped_alike(kind, text, [family])
    assert same, f"{fix} under {family} (the normaliser named: {named or 'nothing'})"
