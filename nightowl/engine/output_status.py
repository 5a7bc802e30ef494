"""What a command's answer says before any parsing: blank, or what status its exit gives the collector."""

from __future__ import annotations

from nightowl.transports.base import CommandResult


def shows_nothing(collector: object, text: str) -> bool:
    """Whether an output that exited 0 holds nothing to judge (the collector may know more: a journal's
    ``-- No entries --``: its ``shows_nothing``)."""
    check = getattr(collector, "shows_nothing", None)
    if check is None:
        return is_blank(text)
    try:
        return bool(check(text))
    except Exception:  # noqa: BLE001 - the parse that follows records what went wrong; one host never ends a run
        return is_blank(text)


def is_blank(text: str) -> bool:
    """``not text.strip()`` without copying the text: a real-size output is megabytes, and its strip copies
    all of it to find that it is not blank (``isspace`` stops at the first printing character)."""
    return not text or text.isspace()


def output_status(result: CommandResult) -> tuple[str, str | None]:
    """The collector status one answer gives, and why: late (nightowl read it too late: no judgement),
    timed out, error (no exit status, or a non-zero one with its first line), no data (blank) or ok."""
    if result.late:
        return "late", result.late
    if result.timed_out:
        # the transport's own words when it has them ("timed out after 5s (ended by the host's own timeout:
        # exit 124)": the limit, not a measured time that varies with load), else the time it took
        said = result.error if result.error and result.error.startswith("timed out after") else None
        return "timed_out", said or f"timed out after {result.duration:.1f}s"
    if result.rc is None:
        return "error", result.error or "no exit status"
    if result.rc != 0:
        first = (result.stderr.strip() or result.stdout.strip()).splitlines()[:1]
        return "error", f"exit {result.rc}" + (f": {first[0][:200]}" if first else "")
    if is_blank(result.stdout):
        return "no_data", "empty output"
    return "ok", None
