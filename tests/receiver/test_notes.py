"""Notes that carry the finding (issue 27.4): the PagerDuty note, the chat message and the webhook carry the
verdict, the GPU(s), the why line, the first action and the status update, within each target's limits,
one line staying one line and chat markup escaped."""

from __future__ import annotations

import json
from pathlib import Path

from nightowl.receiver.notify import CUT, Target, fit
from nightowl.receiver.notify import request_for as request_of
from nightowl.receiver.targets.chat import SECTION_CHARS as SLACK_SECTION_CHARS
from nightowl.receiver.targets.chat import TEXT_CHARS as SLACK_TEXT_CHARS
from nightowl.receiver.targets.pagerduty import NOTE_CHARS as PAGERDUTY_NOTE_CHARS
from tests.receiver.outcomes import outcome_of

PD = Target("pagerduty", "https://api.example", token="k", sender="a@b")
CHAT = Target("chat", "https://chat.example/hook")
HOOK = Target("webhook", "https://hook.example/in")
VERDICT = {
    "id": "gpu-fault-on-rank-host",
    "severity": "critical",
    "action": "drain-and-reset",
    "summary": "Pull gpu-b from the job: its kernel log shows Xid 79. A GPU fault on a rank's host stalls every rank.",
    "gpus": ["0000:a1:00"],
    "implicated": ["gpu-b"],
    "not_implicated": ["gpu-a"],
}


def request_for(target: Target, record: dict, line: str, link: str | None) -> tuple:
    return request_of(target, outcome_of(record, line), link)


UPDATE = (
    "STATUS UPDATE - trainer (a, b) - 2026-12-01 23:00 UTC\n\nImpact: gpu fault on b (2 checked: a, b)\nWho: on-call\n"
)


def _record(tmp_path: Path, update: str = UPDATE, verdict: dict | None = None) -> dict:
    path = tmp_path / "status-update.md"
    path.write_text(update)
    return {
        "alert": "NcclHang",
        "host": "gpu-a",
        "source": "pagerduty",
        "fingerprint": "P1",
        "verdict": verdict or VERDICT,
        "status_update": str(path),
    }


def test_each_target_carries_verdict_gpu_why_action_and_status_update(tmp_path: Path) -> None:
    record = _record(tmp_path)
    _, _, note = request_for(PD, record, "gpu-fault-on-rank-host (critical) -> drain-and-reset", "https://n/d")
    content = note["note"]["content"]
    assert (
        content.splitlines()[0] == "nightowl: NcclHang on gpu-a: gpu-fault-on-rank-host (critical) -> drain-and-reset"
    )
    for want in (
        "GPU(s): 0000:a1:00",
        "Why: Pull gpu-b from the job: its kernel log shows Xid 79.",
        "First action: drain-and-reset on gpu-b (not implicated: gpu-a)",
        "Impact: gpu fault on b (2 checked: a, b)",
    ):
        assert want in content.splitlines(), (want, content)
    assert content.endswith("Postmortem draft: https://n/d")
    _, _, chat = request_for(CHAT, record, "gpu-fault-on-rank-host (critical) -> drain-and-reset", None)
    assert "GPU(s): 0000:a1:00" in chat["blocks"][0]["text"]["text"] and "Why: Pull gpu-b" in chat["text"]
    assert "Impact: gpu fault on b" in chat["blocks"][-1]["text"]["text"]
    _, _, hook = request_for(HOOK, record, "x", None)
    assert "First action: drain-and-reset on gpu-b (not implicated: gpu-a)" in hook["finding"]
    assert hook["status_update_text"].startswith("STATUS UPDATE") and json.dumps(hook)


def test_a_long_status_update_is_cut_to_each_limit_with_a_mark(tmp_path: Path) -> None:
    update = "\n".join(f"line {i}: " + "x" * 150 for i in range(400))
    hostile = {**VERDICT, "summary": "<!channel> " + "y" * 5000 + "\nforged line. rest"}
    record = _record(tmp_path, update, hostile)
    _, _, note = request_for(PD, record, "v", "https://n/d")
    content = note["note"]["content"]
    assert len(content) <= PAGERDUTY_NOTE_CHARS and CUT in content
    assert not any(line.startswith("forged") for line in content.splitlines())  # one line stays one line
    _, _, chat = request_for(CHAT, record, "v", None)
    assert len(chat["text"]) <= SLACK_TEXT_CHARS
    assert all(len(b["text"]["text"]) <= SLACK_SECTION_CHARS for b in chat["blocks"] if b["type"] == "section")
    assert "<!channel>" not in json.dumps(chat) and "&lt;!channel&gt;" in chat["blocks"][0]["text"]["text"]


def test_fit_keeps_whole_lines_and_never_half_an_escape() -> None:
    assert fit(["a" * 10, "b" * 10], 21) == "a" * 10 + "\n" + "b" * 10
    cut = fit(["a" * 10, "&lt;" * 100], 120)
    assert cut.endswith(CUT) and len(cut) <= 120 and not cut[: -len(CUT)].rstrip().endswith(("&", "&l", "&lt"))
    assert fit(["a" * 300], 100) == "a" * (100 - len(CUT)) + CUT
    assert fit(["a" * 100], 50) == ""  # no room for the mark: nothing rather than half a line unmarked


def test_no_verdict_and_no_status_update_keep_the_one_line(tmp_path: Path) -> None:
    record = {
        "alert": "A",
        "host": "h",
        "source": "pagerduty",
        "fingerprint": "P1",
        "status_update": str(tmp_path / "x"),
    }
    _, _, note = request_for(PD, record, "no verdict: host h unreachable", None)
    assert note["note"]["content"] == "nightowl: A on h: no verdict: host h unreachable"
