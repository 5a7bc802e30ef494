"""A followed file across a stop: what was written while the watch was stopped is read once, whatever the
rotation did (logrotate's create, dateext, copytruncate), and a file regrown past the saved offset is never
resumed inside. Every read loop has a watchdog (a bound on reads), since a hang is one way to fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nightowl.watch.file_source import HEAD_BYTES, FileSource
from nightowl.watch.source import Position

XID = "[ 10.0] NVRM: Xid (PCI:0000:3b:00): {code}, pid=1, name=python, {what}"
MAX_READS = 1000  # watchdog: no test here needs more than a few reads


def line(code: int, what: str) -> str:
    return XID.format(code=code, what=what)


def read_all(source: FileSource) -> list[str]:
    lines: list[str] = []
    for _ in range(MAX_READS):
        batch = source.read(0)
        if batch is None:
            return lines
        lines += batch.lines
    raise AssertionError("the source never reached the end of what was written")


def append(path: Path, *lines: str) -> None:
    with path.open("a") as handle:
        handle.write("".join(text + "\n" for text in lines))


def judged(log: Path, *lines: str) -> Position:
    """The position a watch saved after judging ``lines`` (the file's whole content), then stopped."""
    append(log, *lines)
    source = FileSource(log, from_start=True)
    assert read_all(source) == list(lines)
    saved = source.position()
    source.close()
    assert saved["offset"] == log.stat().st_size and saved["head_bytes"] == min(saved["offset"], HEAD_BYTES)
    return saved


def restarted(log: Path, saved: Position) -> tuple[list[str], list[str]]:
    """The lines a restarted watch reads, and what it noted."""
    source = FileSource(log, resume=saved)
    try:
        lines = read_all(source)
        notes = []
        while (note := source.note()) is not None:
            notes.append(note)
        return lines, notes
    finally:
        source.close()


def test_a_restart_without_rotation_reads_each_line_once(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    saved = judged(log, line(13, "judged"), line(43, "judged"))
    append(log, line(79, "written while stopped"))
    assert restarted(log, saved) == ([line(79, "written while stopped")], [])
    assert restarted(log, {**saved, "offset": log.stat().st_size}) == ([], [])  # nothing new: nothing read


@pytest.mark.parametrize("rotated_name", ["kern.log.1", "kern.log-20261206"])
def test_a_restart_across_rename_and_create_finishes_the_rotated_file_first(tmp_path: Path, rotated_name: str) -> None:
    log = tmp_path / "kern.log"
    saved = judged(log, line(13, "judged"))
    append(log, line(79, "written to the old file while stopped"))
    log.rename(tmp_path / rotated_name)  # logrotate's create: rename, then a new file at the path
    (tmp_path / "kern.log.2.gz").write_bytes(b"\x1f\x8b an older, compressed rotation")
    append(log, line(48, "written to the new file"))
    lines, notes = restarted(log, saved)
    assert lines == [line(79, "written to the old file while stopped"), line(48, "written to the new file")]
    assert rotated_name in notes[0] and "saved offset" in notes[0]


def test_a_restart_while_the_rotated_file_has_no_successor_yet_reads_it_then_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    saved = judged(log, line(13, "judged"))
    append(log, line(79, "before the rotation"))
    log.rename(tmp_path / "kern.log.1")  # the new file is not created yet
    source = FileSource(log, resume=saved)
    assert read_all(source) == [line(79, "before the rotation")]
    append(log, line(48, "the new file"))
    assert read_all(source) == [line(48, "the new file")]
    source.close()


def test_copytruncate_regrown_past_the_offset_finishes_the_copy_then_reads_the_file_from_its_start(
    tmp_path: Path,
) -> None:
    log = tmp_path / "kern.log"
    saved = judged(log, line(13, "judged"))
    append(log, line(79, "written before the copy"))
    shutil.copyfile(log, tmp_path / "kern.log.1")  # copytruncate: copy, then truncate in place
    log.write_text("")
    regrown = [line(48, f"after the truncation {n}") for n in range(5)]
    append(log, *regrown)
    assert log.stat().st_size > saved["offset"]  # resuming at the offset would land inside new content
    lines, notes = restarted(log, saved)
    assert lines == [line(79, "written before the copy"), *regrown]
    assert "kern.log.1" in notes[0]


def test_a_file_regrown_past_the_offset_with_no_copy_left_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    saved = judged(log, line(13, "judged"))
    log.write_text("")  # copytruncate whose copy was compressed (or a new file on a reused inode)
    regrown = [line(48, f"after the truncation {n}") for n in range(5)]
    append(log, *regrown)
    lines, notes = restarted(log, saved)
    assert lines == regrown
    assert "is read from its start" in notes[0]


def test_a_truncation_regrown_past_the_offset_between_two_looks_is_seen_while_following(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("")
    source = FileSource(log)
    append(log, line(13, "followed"))
    assert read_all(source) == [line(13, "followed")]
    log.write_text("")
    regrown = [line(48, f"after the truncation {n}") for n in range(3)]
    append(log, *regrown)  # already past the offset when the follower looks again
    assert read_all(source) == regrown
    assert "truncated" in (source.note() or "")
    source.close()


def test_a_position_saved_before_positions_had_a_hash_still_resumes(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    saved = judged(log, line(13, "judged"))
    append(log, line(79, "new"))
    old_style = {key: saved[key] for key in ("dev", "inode", "offset")}
    assert restarted(log, old_style) == ([line(79, "new")], [])


def test_the_head_hash_covers_at_most_the_offset_and_head_bytes(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("")
    source = FileSource(log)
    append(log, line(13, "x" * 100))
    with log.open("a") as handle:
        handle.write(line(13, "partial")[:20])  # an unfinished line: read, but not yet consumed
    read_all(source)
    first = source.position()
    assert first["head_bytes"] == first["offset"] < len(source.head)
    append(log, "rest", *[line(13, "y" * 200)] * 40)
    read_all(source)
    assert source.position()["head_bytes"] == HEAD_BYTES and source.head == log.read_bytes()[:HEAD_BYTES]
    source.close()
