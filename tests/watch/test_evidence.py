"""A burst's lines in the run's kernel-log evidence: added when the command's output lacks them, never twice."""

from __future__ import annotations

from collections.abc import Sequence

from nightowl.collectors.gpu import kernel_log
from nightowl.transports.base import CommandResult
from nightowl.watch.evidence import BurstTransport, missing_lines

KMSG_XID = "3,812,74889644138,-;NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus."
JOURNAL_XID = "2024-06-01T10:00:00+0000 gpu-17 kernel: NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus."
AER_DETAIL = "3,810,74889542125,-;pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00000020/00000000"


class Canned:
    """A transport answering every command with one result."""

    host = "gpu-17"

    def __init__(self, stdout: str, rc: int = 0) -> None:
        self.stdout, self.rc = stdout, rc

    def connect(self) -> None:
        return None

    def close(self) -> None:
        return None

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        return CommandResult(tuple(argv), self.rc, self.stdout, "", 0.0, 0.0)


def test_a_message_the_journal_already_holds_is_not_added_again() -> None:
    assert missing_lines(JOURNAL_XID + "\n", [AER_DETAIL, KMSG_XID]) == []
    result = BurstTransport(Canned(JOURNAL_XID + "\n"), [KMSG_XID], "kmsg").run(["journalctl"], 5, "kernel-log")
    assert result.stdout == JOURNAL_XID + "\n"
    assert kernel_log.parse(result.stdout).events[0]["count"] == 1


def test_burst_lines_missing_from_the_output_are_added_with_their_context() -> None:
    result = BurstTransport(Canned("-- No entries --\n"), [AER_DETAIL, KMSG_XID], "kmsg").run(
        ["journalctl"], 5, "kernel-log"
    )
    assert result.stdout.splitlines() == ["-- No entries --", AER_DETAIL, KMSG_XID]
    assert "2 lines of the burst read from kmsg" in result.stderr
    assert kernel_log.facts(kernel_log.parse(result.stdout))["fallen_off_bus"] is True


def test_a_failed_command_keeps_its_status_and_other_kinds_are_untouched() -> None:
    failed = BurstTransport(Canned("", rc=1), [KMSG_XID], "kmsg").run(["dmesg"], 5, "kernel-log")
    assert failed.rc == 1 and failed.stdout == KMSG_XID + "\n"
    other = BurstTransport(Canned("GPU 0: ok\n"), [KMSG_XID], "kmsg").run(["nvidia-smi"], 5, "nvidia-smi")
    assert other.stdout == "GPU 0: ok\n"


def test_what_the_burst_did_not_keep_is_said_beside_the_output_added_or_not() -> None:
    note = "nightowl watch: 92 lines of the burst were not kept\n"
    added = BurstTransport(Canned(""), [KMSG_XID], "kmsg", note).run(["dmesg"], 5, "kernel-log")
    assert added.stdout == KMSG_XID + "\n" and added.stderr.endswith(note)
    held = BurstTransport(Canned(JOURNAL_XID + "\n"), [KMSG_XID], "kmsg", note).run(["journalctl"], 5, "kernel-log")
    assert held.stdout == JOURNAL_XID + "\n" and held.stderr == note
