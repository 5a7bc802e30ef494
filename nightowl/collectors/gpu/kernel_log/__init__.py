"""The kernel-log family: the collector (``kernel_log``), its parser split along its seams (``patterns``,
``timestamps``, ``classification``, ``parser``), the facts a runbook reads (``log_facts``) and the result type
(``results``). The names callers use are re-exported here, so ``from nightowl.collectors.gpu import
kernel_log; kernel_log.parse(text)`` keeps working."""

from nightowl.collectors.gpu.kernel_log.classification import classify
from nightowl.collectors.gpu.kernel_log.kernel_log import (
    COLLECTOR,
    EVENT_HINTS,
    MESSAGE_HINTS,
    may_continue_report,
    may_hold_message,
    message_start,
    shows_nothing,
)
from nightowl.collectors.gpu.kernel_log.log_facts import (
    GSP_SUBKINDS,
    INIT_FAILED_SUBKINDS,
    aer_severity,
    facts,
    host_thresholds,
)
from nightowl.collectors.gpu.kernel_log.parser import (
    MAX_DISTINCT_EVENTS,
    MAX_HOST_RECORDS,
    MAX_LINES_PER_EVENT,
    MAX_WARNINGS,
    parse,
    parse_lines,
)
from nightowl.collectors.gpu.kernel_log.patterns import may_start_report
from nightowl.collectors.gpu.kernel_log.results import EVENT_KINDS, KIND, KernelLogResult
from nightowl.collectors.gpu.kernel_log.timestamps import parse_time, seconds_of

__all__ = [
    "COLLECTOR",
    "EVENT_HINTS",
    "EVENT_KINDS",
    "GSP_SUBKINDS",
    "INIT_FAILED_SUBKINDS",
    "KIND",
    "MAX_DISTINCT_EVENTS",
    "MAX_HOST_RECORDS",
    "MAX_LINES_PER_EVENT",
    "MAX_WARNINGS",
    "MESSAGE_HINTS",
    "KernelLogResult",
    "aer_severity",
    "classify",
    "facts",
    "host_thresholds",
    "may_continue_report",
    "may_hold_message",
    "may_start_report",
    "message_start",
    "parse",
    "parse_lines",
    "parse_time",
    "seconds_of",
    "shows_nothing",
]
