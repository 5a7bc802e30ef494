"""Issue 30 item 21: text from a replica or an alert (OSC 52 clipboard writes, screen clears,
`<!channel>`, `@here`, a newline in a PagerDuty title) reaches no terminal, status update, draft or
chat as anything but plain text on one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nightowl.safetext import chat_text, one_line, printable
from tests.postmortem.bundles import HOSTS

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # writes "rm -rf ~" into the reader's clipboard
CLEAR = "\x1b[2J\x1b[H"
HOSTILE = f"{OSC52}{CLEAR}\x9b2J\u202eevil"


@pytest.mark.parametrize(
    "raw",
    [
        OSC52,
        CLEAR,
        "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",
        "\x9b31m",
        "\x9d0;title\x9c",
        "\x07\x08\x7f",
        "\u202e",
    ],
)
def test_control_sequences_are_stripped(raw: str) -> None:
    for out in (printable("a" + raw + "b"), one_line("a" + raw + "b")):
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E for c in out), repr(out)
        assert out.startswith("a") and out.endswith("b")
    assert printable("one\r\ntwo\tx") == "one\ntwo\tx"
    assert one_line("title\nnightowl: all clear\u2028third") == "title nightowl: all clear third"


def test_chat_markup_stays_text() -> None:
    text = chat_text("<!channel> <https://evil.example|docs> @here @Channel & co")
    assert "<" not in text and ">" not in text and "&amp; co" in text
    assert "@here" not in text and "@Channel" not in text
    assert "@\u2060here" in text and "@\u2060Channel" in text


def test_notes_and_chat_keep_one_line_and_no_markup() -> None:
    from nightowl.receiver.notify import Target, request_for
    from tests.receiver.outcomes import outcome_of

    record = {
        "alert": "GpuXid\nnightowl: gpu-01: all clear <!channel>",
        "host": f"gpu-01{OSC52}",
        "source": "pagerduty",
        "fingerprint": "P1",
    }
    pd = Target("pagerduty", "https://api.example", token="k", sender="a@b")
    _, _, note = request_for(pd, outcome_of(record, "ok (ok) -> none"), "https://n.example/d")
    first, *rest = note["note"]["content"].split("\n")
    assert rest == ["Postmortem draft: https://n.example/d"]  # the only second line is nightowl's own
    assert "\x1b" not in first and "all clear" in first
    _, _, chat = request_for(Target("chat", "https://chat.example/h"), outcome_of(record, "@here look"), None)
    for text in (chat["text"], chat["blocks"][0]["text"]["text"]):
        assert "\n" not in text and "<!channel>" not in text and "@here" not in text and "\x1b" not in text


def test_terminal_status_update_and_draft_carry_no_escape(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from nightowl.cli.main import main

    host = tmp_path / "hosts" / "gpu-01"
    shutil.copytree(HOSTS / "xid79-fallen-off-bus", host)
    log = host / "kernel-log.out"
    log.write_text(
        log.read_text() + f"NVRM: Xid (PCI:0000:5a:00): 79, pid=1, name={HOSTILE}, GPU has fallen off the bus.\n"
    )
    result = CliRunner().invoke(
        main, ["triage", "xid", "--replay", str(host), "--out", str(tmp_path / "out"), "--status-update", "-v"]
    )
    assert result.exit_code == 1, result.output
    assert "\x1b" not in result.output and "\x9b" not in result.output and "\u202e" not in result.output
    (bundle,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir() and not p.name.startswith(".")]
    for name in ("status-update.md", "postmortem.md"):
        text = (bundle / name).read_text()
        assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text, name
    shown = CliRunner().invoke(main, ["postmortem", str(bundle)])
    assert "\x1b" not in shown.output


def test_a_text_log_line_stays_one_line() -> None:
    from nightowl.logline import LogLine, render

    line = render(LogLine("GpuXid\n10:00:00 forged line " + OSC52), "text", "nightowl.serve", now=0)
    assert "\n" not in line and "\x1b" not in line
