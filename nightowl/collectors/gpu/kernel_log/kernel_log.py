"""The kernel log: NVIDIA Xid/SXid events, GPUs off the bus, PCIe AER and OOM kills.

Reads every way the kernel log reaches a person: bare ``NVRM:`` lines, ``dmesg`` (monotonic
``[ 123.456]``), ``/dev/kmsg`` records (``6,1234,5678901,-;NVRM: ...``), ``dmesg -T``,
``dmesg --time-format iso`` (with or without ``-x`` facility columns),
syslog and journald (``short`` in any locale, ``short-iso``), Talos ``talosctl dmesg``, and the
k8s-device-plugin's ``XidCriticalError`` line. A line is recognised by its message (``NVRM:``,
``SXid (``, ``AER:`` ...), never by its timestamp, so month names in any language are fine.

The parser streams (``parse_lines``) and keeps one event per distinct message: a burst of identical
lines (same kind, code, GPU, pid, process and text) becomes one event with ``count``, ``first_time``
and ``last_time``, so memory grows with distinct events, not with lines.

The package splits along the parser's seams: ``patterns`` (the message expressions), ``timestamps``,
``classification`` (what one message is), ``parser`` (the streaming parser), ``log_facts`` (what a runbook
reads) and ``results`` (the result type); this module holds the collector and the cheap tests that
followers (``nightowl watch``) use to skip quiet text.
"""

from __future__ import annotations

from nightowl.collectors.base import Collector, registered
from nightowl.collectors.gpu.kernel_log.cursor import KERNEL_LOG_CURSOR
from nightowl.collectors.gpu.kernel_log.log_facts import facts
from nightowl.collectors.gpu.kernel_log.parser import parse
from nightowl.collectors.gpu.kernel_log.patterns import _ANCHOR, aer_detail_in
from nightowl.collectors.gpu.kernel_log.results import KIND
from nightowl.collectors.lines import iter_lines

_JOURNAL_BANNERS = ("-- No entries --", "-- Logs begin at", "-- Journal begins at", "-- Boot ")


def shows_nothing(text: str) -> bool:
    """A journal with nothing for this boot (``-- No entries --``, e.g. a container without the host's
    machine-id) or blank output: no kernel log was read, so fall back to dmesg and never call it clean."""
    return all(not line.strip() or line.strip().startswith(_JOURNAL_BANNERS) for line in iter_lines(text))


COLLECTOR = Collector(
    **registered(KIND),
    commands=(
        # `since` (runbook parameter, e.g. "-2h" or "2024-06-01 10:00") limits evidence to recent events,
        # so a sweep does not re-report last month's Xid; the dmesg fallbacks cannot filter.
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"),
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"),
        ("dmesg", "-T"),
        ("dmesg",),
        # Under kernel.dmesg_restrict=1 an unprivileged dmesg is refused: the one place nightowl asks
        # for sudo, non-interactive (-n) so it fails at once instead of waiting for a password.
        ("sudo", "-n", "--", "dmesg", "-T"),
        # No `cat /dev/kmsg` after these: util-linux dmesg already reads /dev/kmsg itself, without blocking
        # (O_NONBLOCK until EAGAIN), under the same permission (kernel.dmesg_restrict, CAP_SYSLOG), so it
        # would add nothing, and a plain read of /dev/kmsg waits for new records forever. A saved
        # /dev/kmsg dump still parses (`nightowl parse kernel-log`). See docs/reference.md#parse-output.
    ),
    parse=parse,
    facts=facts,
    invasive=False,
    shows_nothing=shows_nothing,
    # A sweep, `check` or `watch` with a history store reads only what follows its last read (cursor.py).
    cursor=KERNEL_LOG_CURSOR,
)


# Every message ``_ANCHOR`` finds holds one of these (the substring tests of parse_lines' hot loop), and
# ``in`` finds them at memory speed: text with none of them holds no event.
MESSAGE_HINTS = (
    "NVRM: ", "Xid", "AER: ", "PCIe ", "of memory", "EDAC ", "Hardware Error]", "INFO: task ", "nouveau ",
    "modeset: ERROR",
)  # fmt: skip
# Every message that can make an event or a warning holds one of these (an Xid, SXid, fallen-off-the-bus
# or other NVRM message, an AER report, an OOM kill): the other messages with a MESSAGE_HINT are host
# records (EDAC, GHES, hung tasks, nouveau) and PCIe bandwidth notes, which are no events, never warn and
# never wait for the lines after them. kernel-log-boots, which keeps an earlier boot's events alone, reads
# only lines holding one of these, in 5 passes over a boot log instead of 9.
EVENT_HINTS = ("NVRM: ", "Xid", "AER: ", "PCIe Bus Error", "of memory")


def may_hold_message(text: str) -> bool:
    """False when ``text`` (a line, or many) holds no message this parser reads; cheap (``in`` tests)."""
    return any(hint in text for hint in MESSAGE_HINTS)


def may_continue_report(line: str) -> bool:
    """Whether ``line`` may carry on a pending AER report (a detail line): only then does a line without
    a message leave the message before it pending; any other such line ends it."""
    return aer_detail_in(line)


def message_start(text: str) -> int:
    """Where the first message this parser reads (``NVRM: ``, ``SXid (``, ``AER: ``, ``EDAC `` ...) starts in
    ``text`` (a line, or many), or -1: text without one holds no event. Followers (``nightowl watch``) skip
    quiet text with it, and key what they learnt of a line by what follows its time stamp."""
    match = _ANCHOR.search(text)
    return -1 if match is None else match.start()
