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

from nightowl.collectors.base import Collector, declare
from nightowl.collectors.gpu.kernel_log.log_facts import facts
from nightowl.collectors.gpu.kernel_log.parser import parse
from nightowl.collectors.gpu.kernel_log.patterns import _AER_DETAIL, _ANCHOR
from nightowl.collectors.gpu.kernel_log.results import KIND

_JOURNAL_BANNERS = ("-- No entries --", "-- Logs begin at", "-- Journal begins at", "-- Boot ")


def shows_nothing(text: str) -> bool:
    """A journal with nothing for this boot (``-- No entries --``, e.g. a container without the host's
    machine-id) or blank output: no kernel log was read, so fall back to dmesg and never call it clean."""
    return all(not line.strip() or line.strip().startswith(_JOURNAL_BANNERS) for line in text.splitlines())


# The facts `facts` returns (docs/reference.md#kinds); tests/collectors/test_declared_facts.py checks them.
PRODUCES = declare(
    ("events", "list", "every recognised event (Xid, SXid, OOM kill, PCIe AER, ...) with its line"),
    ("driver_version", "str | None", "NVIDIA driver version from the load line"),
    ("pcie_bandwidth_limited", "list", 'the kernel\'s "PCIe bandwidth limited" lines'),
    ("lines_read", "int", "lines of log read"),
    ("xid_codes", "list[int]", "distinct Xid codes seen"),
    ("sxid_codes", "list[int]", "distinct NVSwitch SXid codes seen"),
    ("xid_event_count", "int", "Xid lines seen"),
    ("xids_by_gpu", "dict", "Xid codes per GPU PCI address"),
    ("xid_mig_instances", "list", "MIG instances Xid lines name: pci, code, gpu_instance, compute_instance"),
    ("fallen_off_bus", "bool", "a GPU has fallen off the bus (Xid 79 or the driver's message)"),
    ("fallen_off_bus_gpus", "list[str]", "GPUs that fell off the bus"),
    ("reset_required", "bool", "the driver asked for a GPU reset (Xid 154 or similar)"),
    ("reset_required_gpus", "list[str]", "GPUs the driver asked to reset"),
    ("recovery_action", "str | None", "strictest recovery action the driver printed"),
    ("recovery_actions_by_gpu", "dict", "recovery action per GPU"),
    ("recovery_action_gpus", "list[str]", "GPUs with a recovery action"),
    ("catalog_action", "str", "strictest action NVIDIA's Xid catalog gives for the codes seen"),
    ("unknown_xid_codes", "list[int]", "Xid codes not in the catalog"),
    ("memory_xid_codes", "list[int]", "Xid codes that report GPU memory errors (xid_rules.yaml memory_codes)"),
    ("app_xid_repeating_gpus", "list[str]", "GPUs where an application Xid repeats"),
    ("nvlink_xid_codes", "list[int]", "NVLink-related Xid codes seen"),
    ("oom_kills", "int", "kernel OOM-killer kills"),
    ("pcie_aer_count", "int", "PCIe AER error lines"),
    ("pcie_bandwidth_limited_devices", "list[str]", "devices the kernel says are bandwidth limited"),
    ("primary_xids", "list[int]", "Xid codes that are causes, not sympathetic follow-ups"),
    ("xid_judgement", "dict", "NVIDIA's pairing rules applied to the Xids: action, reasons, GPUs"),
    ("host_errors", "list", "host-side errors (MCE, GHES, hung tasks) with their lines"),
    ("hung_tasks", "list", "hung-task reports with the task name"),
    ("nouveau_devices", "list", "devices bound to the nouveau driver"),
    ("pcie_aer_by_severity", "dict", "PCIe AER errors counted by severity"),
    ("pcie_aer_correctable_devices", "list", "devices with correctable AER errors"),
    ("pcie_aer_nonfatal_devices", "list", "devices with non-fatal AER errors"),
    ("pcie_aer_fatal_devices", "list", "devices with fatal AER errors"),
    ("pcie_aer_unrecovered_devices", "list", "devices whose AER error was not recovered"),
    ("host_memory_errors", "dict", "host memory (EDAC) errors by DIMM"),
    ("host_memory_uncorrected_dimms", "list", "DIMMs with uncorrected errors"),
    ("host_memory_corrected_dimms", "list", "DIMMs with corrected errors"),
    ("ghes_error_count", "int", "firmware (GHES) hardware error reports"),
    ("ghes_severities", "list", "severities of the GHES reports"),
    ("ghes_devices", "list", "devices the GHES reports name"),
    ("mce_logged", "int", "machine-check events logged"),
    ("hung_task_count", "int", "hung-task reports"),
    ("hung_task_names", "list", "names of the hung tasks"),
    ("hung_tasks_after_xid", "int", "hung-task reports after the first Xid"),
    ("wedged_driver", "bool", "the NVIDIA driver is wedged (stuck in a call)"),
    ("wedged_driver_gpus", "list", "GPUs of the wedged driver"),
    ("driver_lock_waits", "list", "tasks in D state waiting on a lock inside the NVIDIA driver, with the frames"),
    ("driver_module_missing", "bool", "modprobe or systemd-modules-load found no nvidia module for this kernel"),
    ("driver_deadlock", "bool", "a task is stuck in D state on a lock inside the NVIDIA driver"),
    ("driver_deadlock_tasks", "list[str]", "names of the tasks stuck on a driver lock"),
    ("driver_deadlock_frames", "list[str]", "the driver lock frames their stacks wait in"),
    ("open_module_refused", "bool", "the open kernel module refused a GPU (needs GSP, or unsupported)"),
    ("open_module_refused_gpus", "list[str]", "GPUs the open kernel module refused"),
    ("open_module_probe_failed", "bool", "the open module refused a GPU and the probe then failed"),
    ("nic_links", "list", "NIC ports whose link went down or up: downs, ups, down times, last state"),
    ("host_memory_ce_by_dimm", "list", "corrected host memory errors per DIMM: errors, reports, span, burst"),
    ("host_memory_ce_storm_dimms", "list[str]", "DIMMs past a corrected-error threshold (host_thresholds.csv)"),
    ("host_memory_ce_thresholds", "dict", "the corrected-error thresholds applied, with their sources"),
    ("nic_flapping_ports", "list[str]", "NIC ports past a link-flap threshold (host_thresholds.csv)"),
    ("nic_flapping_devices", "list[str]", "PCI addresses of the flapping ports, where the line names them"),
    ("nic_link_down_ports", "list[str]", "NIC ports whose last link change was down"),
    ("nic_link_thresholds", "dict", "the link-flap thresholds applied, with their sources"),
    ("driver_mismatch", "bool", "the kernel module and user-space driver versions differ"),
    ("driver_mismatch_versions", "list", "the two versions that differ"),
    ("driver_conflict", "bool", "another driver (nouveau) holds the GPU"),
    ("gpu_init_failed", "bool", "a GPU failed to initialise"),
    ("adapter_init_failed_gpus", "list", "GPUs whose adapter failed to initialise"),
    ("adapter_init_errors", "list", "the adapter initialisation error lines"),
    ("gsp_errors", "list", "GSP firmware errors"),
    ("gsp_error_count", "int", "GSP firmware error lines"),
    ("gpu_lost_gpus", "list", "GPUs the driver reports lost"),
    ("gpu_indexes_with_errors", "list", "GPU indexes named in error lines"),
    ("remap_reset_pending_gpus", "list", "GPUs whose row remap waits for a reset"),
    ("remap_failed_gpus", "list", "GPUs whose row remap failed"),
)


COLLECTOR = Collector(
    produces=PRODUCES,
    kind=KIND,
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
    timeout=20.0,
    invasive=False,
    shows_nothing=shows_nothing,
    description="kernel log of the current boot: NVIDIA Xid/SXid events, GPUs off the bus, PCIe AER, OOM kills",
)


# Every message ``_ANCHOR`` finds holds one of these (the substring tests of parse_lines' hot loop), and
# ``in`` finds them at memory speed: text with none of them holds no event.
MESSAGE_HINTS = ("NVRM: ", "Xid", "AER: ", "PCIe ", "of memory", "EDAC ", "Hardware Error]", "INFO: task ", "nouveau ")


def may_hold_message(text: str) -> bool:
    """False when ``text`` (a line, or many) holds no message this parser reads; cheap (``in`` tests)."""
    return any(hint in text for hint in MESSAGE_HINTS)


def may_continue_report(line: str) -> bool:
    """Whether ``line`` may carry on a pending AER report (a detail line): only then does a line without
    a message leave the message before it pending; any other such line ends it."""
    return _AER_DETAIL.search(line) is not None


def message_start(text: str) -> int:
    """Where the first message this parser reads (``NVRM: ``, ``SXid (``, ``AER: ``, ``EDAC `` ...) starts in
    ``text`` (a line, or many), or -1: text without one holds no event. Followers (``nightowl watch``) skip
    quiet text with it, and key what they learnt of a line by what follows its time stamp."""
    match = _ANCHOR.search(text)
    return -1 if match is None else match.start()
