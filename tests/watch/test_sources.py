"""The three sources: a file followed as tail -F, /dev/kmsg records (with overruns), journalctl's JSON."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest

from nightowl.watch.file_source import FileSource
from nightowl.watch.journal_source import JournalSource, entry_line
from nightowl.watch.kmsg_source import KmsgSource
from nightowl.watch.source import MAX_LINE_CHARS

XID = "[ 10.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."


def read_all(source: FileSource) -> list[str]:
    lines: list[str] = []
    while (batch := source.read(0)) is not None:
        lines += batch.lines
    return lines


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


# --- file ----------------------------------------------------------------------------------------
def test_a_file_is_followed_from_its_end_then_resumed_at_its_saved_offset(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, old\n")
    source = FileSource(log)
    assert read_all(source) == []
    append(log, XID + "\n")
    assert read_all(source) == [XID]
    saved = source.position()
    assert saved["offset"] == log.stat().st_size
    append(log, XID.replace("79", "48") + "\n")
    again = FileSource(log, resume=saved)
    assert read_all(again) == [XID.replace("79", "48")]


def test_a_partial_line_waits_for_its_end(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("")
    source = FileSource(log)
    append(log, XID[:20])
    assert read_all(source) == []
    assert source.position()["offset"] == 0
    append(log, XID[20:] + "\n")
    assert read_all(source) == [XID]


def test_rotation_by_rename_is_followed_to_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("")
    source = FileSource(log)
    append(log, XID + " first\n")
    log.rename(tmp_path / "kern.log.1")
    append(tmp_path / "kern.log.1", XID + " late in the old file\n")
    assert read_all(source) == [XID + " first", XID + " late in the old file"]
    log.write_text(XID + " new file\n")
    assert read_all(source) == [XID + " new file"]
    assert "rotated" in (source.note() or "")


def test_truncation_starts_over(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("")
    source = FileSource(log)
    append(log, XID + " a long line before the truncation\n")
    assert len(read_all(source)) == 1
    log.write_text("")  # copytruncate
    assert read_all(source) == []
    append(log, XID + "\n")
    assert read_all(source) == [XID]


def test_a_file_replaced_while_down_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(XID + "\n")
    saved = FileSource(log).position()
    log.unlink()
    log.write_text(XID + " after rotation\n")
    source = FileSource(log, resume=saved)
    assert read_all(source) == [XID + " after rotation"]


def test_a_missing_file_is_waited_for(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    source = FileSource(log)
    assert source.read(0) is None and source.position() == {}
    log.write_text(XID + "\n")
    assert read_all(source) == [XID]


def test_quiet_chunks_are_not_split_and_long_lines_are_cut(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("")
    source = FileSource(log)
    append(log, "systemd[1]: nothing\n" * 1000)
    batch = source.read(0)
    assert batch is not None and batch.lines == [] and not batch.may_matter
    append(log, "NVRM: " + "x" * (3 * MAX_LINE_CHARS) + "\n")
    (line,) = read_all(source)
    assert len(line) == MAX_LINE_CHARS


# --- kmsg ----------------------------------------------------------------------------------------
class FakeKmsg(KmsgSource):
    """/dev/kmsg's read semantics (one record per read, EPIPE after an overrun, EAGAIN at the end)."""

    def __init__(self, records: list[bytes | int], backlog: list[bytes | int] | None = None, **kwargs: object) -> None:
        self.records = backlog or []  # what is in the ring when the watch starts
        super().__init__(path=Path(os.devnull), current_boot=lambda: "boot-1", **kwargs)  # type: ignore[arg-type]
        self.records += records  # what comes after

    def _read_record(self) -> bytes:
        if not self.records:
            raise BlockingIOError
        record = self.records.pop(0)
        if isinstance(record, int):
            raise OSError(record, os.strerror(record))
        return record


def kmsg(seq: int, message: str) -> bytes:
    return f"3,{seq},{seq * 1000},-;{message}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n".encode()


def test_kmsg_records_become_lines_without_their_dictionary() -> None:
    source = FakeKmsg([kmsg(7, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")])
    batch = source.read(0)
    assert batch is not None and batch.may_matter
    assert batch.lines == ["3,7,7000,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."]
    assert source.position() == {"boot_id": "boot-1", "seq": 7}


def test_kmsg_survives_an_overrun_and_counts_what_it_lost() -> None:
    source = FakeKmsg([kmsg(1, "a"), errno.EPIPE, kmsg(5, "b")])
    batch = source.read(0)
    assert batch is not None and [line[-1] for line in batch.lines] == ["a", "b"]
    assert source.lost == 3
    assert "overrun" in (source.note() or "")


def test_kmsg_resumes_after_the_saved_record_in_the_same_boot_only() -> None:
    records = [kmsg(1, "judged"), kmsg(2, "judged"), kmsg(3, "new")]
    same_boot = FakeKmsg(list(records), resume={"boot_id": "boot-1", "seq": 2})
    batch = same_boot.read(0)
    assert batch is not None and [line.split(";")[1] for line in batch.lines] == ["new"]
    other_boot = FakeKmsg(list(records), resume={"boot_id": "boot-0", "seq": 2})
    batch = other_boot.read(0)
    assert batch is not None and len(batch.lines) == 3


def test_kmsg_starts_at_the_end_and_knows_the_last_record_so_a_restart_resumes_exactly() -> None:
    source = FakeKmsg([kmsg(9, "NVRM: Xid (PCI:0000:3b:00): 13, new")], backlog=[kmsg(7, "old"), kmsg(8, "old")])
    assert source.position() == {"boot_id": "boot-1", "seq": 8}  # before any new record came
    batch = source.read(0)
    assert batch is not None and [line.split(";")[1] for line in batch.lines] == ["NVRM: Xid (PCI:0000:3b:00): 13, new"]


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg not readable here")
def test_the_real_kmsg_opens_at_its_end() -> None:
    source = KmsgSource()
    try:
        source.read(0.05)  # whatever the kernel logs meanwhile; never the backlog, never an error
    finally:
        source.close()


# --- journal -------------------------------------------------------------------------------------
FAKE_JOURNALCTL = """\
import json, sys
with open(sys.argv[0] + ".calls", "a") as calls:
    calls.write(json.dumps(sys.argv[1:]) + "\\n")
after = [a for a in sys.argv if a.startswith("--after-cursor=")]
n = int(after[0].split("=")[1].split("-")[1]) + 1 if after else 0
for i in range(n, n + (2 if "-f" in sys.argv else 1)):
    msg = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus." if i % 2 else "usb 1-1: new device"
    print(json.dumps({"__CURSOR": f"c-{i}", "__REALTIME_TIMESTAMP": "1717236000000000", "_HOSTNAME": "gpu-17",
                      "MESSAGE": msg}), flush=True)
"""


def test_journal_entries_are_read_and_journalctl_restarted_after_its_cursor(tmp_path: Path) -> None:
    script = tmp_path / "journalctl"
    script.write_text(f"#!{sys.executable}\n" + FAKE_JOURNALCTL)
    script.chmod(0o755)
    source = JournalSource(journalctl=str(script))
    lines: list[str] = []
    for _ in range(200):  # watchdog: the fake exits after two entries; it is started again after c-2
        batch = source.read(0.1)
        lines += batch.lines if batch else []
        source.next_start = 0.0  # no restart pause in a test
        if len(lines) >= 4:
            break
    assert lines[0] == "2024-06-01T10:00:00+0000 gpu-17 kernel: " + XID.split("] ")[1]
    assert len(lines) >= 4 and source.position()["cursor"].startswith("c-")
    calls = [json.loads(line) for line in (tmp_path / "journalctl.calls").read_text().splitlines()]
    # the newest entry's cursor first (no -f), then following after it, then again after the last read
    assert "-f" not in calls[0] and calls[1][-1] == "--after-cursor=c-0" and calls[2][-1] == "--after-cursor=c-2"
    assert "ended" in (source.note() or "")
    source.close()


def test_a_journal_message_that_is_not_utf8_is_read() -> None:
    line = entry_line({"MESSAGE": list(b"NVRM: Xid \xff"), "__REALTIME_TIMESTAMP": "0"})
    assert line is not None and line.endswith("NVRM: Xid \ufffd")
    assert entry_line({"__CURSOR": "x"}) is None
