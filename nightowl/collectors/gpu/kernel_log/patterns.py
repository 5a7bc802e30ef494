"""The kernel log's message patterns: where a message starts, NVRM messages, other kernel messages
and the host around the GPU. Tables of expressions only; ``classification`` reads them."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

# --- where a message starts -------------------------------------------------------------------
# Messages we read, found anywhere in a line; what precedes is the timestamp/host/tag prefix.
# (Plain literals: an optional group here makes every search several times slower.)
_ANCHOR = re.compile(
    r"NVRM: |SXid \(|Xid \(|XidCriticalError|Out of memory|out of memory|AER: |PCIe Bus Error"
    r"|available PCIe bandwidth|EDAC |Hardware Error\]: |INFO: task |nouveau |nvidia-modeset: ERROR: "
)
# "pcieport 0000:00:02.0: " before an AER/bandwidth message: part of the message, not of the prefix.
# (The lookbehind only skips starts inside a word, which could never be the leftmost match: same
# matches as without it, found without re-scanning each word.)
_DEVICE_TAIL = re.compile(r"((?<!\S)\S+ [0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:\s)")
_OOM_CGROUP = re.compile(r"Memory cgroup $")
# The time stamp in front of a line (blanks, then dmesg "[ 1234.567890] ", dmesg -T "[Tue Mar  5 10:00:00
# 2024] ", ISO 8601 as journalctl -o short-iso writes it, or syslog "Mar  5 10:00:00 "; or blanks alone).
# The rest of the line, which repeats in a burst, keys the memo of line shapes; see _Shape for why the
# stamp cannot change how the rest reads.
_STAMP = re.compile(  # always matches, maybe empty; no backtracking into the blanks (a stamp starts non-blank)
    r"[ \t]*(?P<stamp>\[ *\+?[0-9]+\.[0-9]+\] "
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}\] "
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})? "
    r"|[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} )?"
)
# What may stand before an NVRM/Xid/SXid message: only the prefixes kernel logs put there (blanks; a kmsg
# priority or record header; a dmesg, dmesg -T, ISO or syslog stamp in any locale; a host and "kernel:";
# dmesg -x's "kern  :err   :"; Talos's "ip: kern: level: [time]:"; an NVSwitch's device name; a scanning
# tool's "[XID found] (54 minutes ago) \"" around a quoted line; the pre-2015 drivers' "NVRM Xid (PCI:...) : 32"
# with no colon after NVRM). Another subsystem's text before it (a
# segfault naming the file it crashed in, an AppArmor name="...", a USB product string) carries a user's
# words, never a kernel message of the driver (issue "trust, round four", item 1).
_PREFIX_TOKEN = (
    r"\s+|<\d{1,3}>|\d+,\d+,\d+,[^;\s]*;|\[[^\]\n]{1,48}\]:?|\([^)\n]{1,40}\)|\""
    r"|\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?"
    r"|\S{1,12}\.?\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:[.,]\d+)?"
    r"|(?:[\w.-]+\s+)?kernel:|(?:[a-z]{1,8}\s+)?(?:kern|user|daemon|syslog|local\d)\s*:\s*[a-z]+\s*:"
    r"|[\w.:<>-]+:\s+kern:\s+[a-z]+:|nvidia-nvswitch\d+:|[\w.-]+(?=\s+kernel:)|NVRM(?=\s)"
)
_MESSAGE_PREFIX = re.compile(f"(?:{_PREFIX_TOKEN})*")


@functools.lru_cache(maxsize=4096)
def _prefix_of_message(rest: str) -> bool:
    return _MESSAGE_PREFIX.fullmatch(rest) is not None


def message_prefix(prefix: str) -> bool:
    """Whether ``prefix`` may stand before a kernel message of the driver (``_PREFIX_TOKEN``): the stamp is
    cut first, so the rest (host, tag) repeats and its answer is remembered."""
    if not prefix or prefix.isspace():
        return True
    stamp = _STAMP.match(prefix)
    return _prefix_of_message(prefix[stamp.end() :] if stamp is not None else prefix)


def lines_holding(text: str, mark: str) -> Iterator[tuple[int, int, int]]:
    """(line start, where ``mark`` is, line end) of each line of ``text`` that holds ``mark``: a substring search,
    the text may be 8 MB; a reader then asks ``message_prefix`` whether the kernel's own message starts there."""
    position = text.find(mark)
    while position >= 0:
        start = text.rfind("\n", 0, position) + 1
        end = text.find("\n", position)
        end = len(text) if end < 0 else end
        yield start, position, end
        position = text.find(mark, end)


_ADDRESS_FIRST = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:\s")
_NVSWITCH_DEVICE = re.compile(r"(nvidia-nvswitch\d+):\s*$")

# --- NVRM messages (text after "NVRM: ") -------------------------------------------------------
_XID = re.compile(r"Xid \((?:PCI:)?(?P<pci>[^)]*)\) ?:?\s*(?P<code>\d+)\b,?\s*(?P<rest>.*)$")
_SXID = re.compile(r"SXid \((?:PCI:)?(?P<pci>[^)]*)\) ?:?\s*(?P<code>\d+)\b,?\s*(?P<text>.*)$")
_PID_NAME = re.compile(r"pid=(?P<pid>'?<unknown>'?|'?\d+'?),\s*name=(?P<name>[^,]*?)\s*(?:,\s*(?P<text>.*))?$")
_SXID_DETAIL = re.compile(r"(?:Severity \d+|Data \{)")  # continuation lines of an SXid report
_SXID_SEVERITY = re.compile(r"(non-?fatal|fatal)\b", re.I)
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")
# On a MIG GPU the driver attributes an Xid to its GPU / compute instance inside the parenthesis:
# "Xid (PCI:0000:01:00 GPU-I:05): 94, ..." or "(PCI:0000:3b:00 GPU-I:01 GPU-CI:02)" (open-gpu-kernel-modules
# kernel_rc_notification.c; NVIDIA A100 GPU memory error management, docs/sources.md#nvidia-smi).
_XID_MIG = re.compile(r"^(?P<pci>\S+)\s+GPU-I:(?P<gi>\d+)(?:\s+GPU-CI:(?P<ci>\d+))?")
_GPU_PRELUDE = re.compile(r"GPU at (?:PCI:)?(?P<pci>[0-9a-fA-F:.]+?):?\s+(?P<uuid>GPU-[0-9a-fA-F-]+)")
_BOARD_SERIAL = re.compile(r"GPU Board Serial Number:\s*(?P<serial>\S+)")
_GPU_SERIAL = re.compile(r"GPU (?P<pci>[0-9a-fA-F:.]+): GPU serial number is (?P<serial>\w+)")
_FALLEN_OFF_BUS = re.compile(r"fallen off the bus", re.I)
_RESET_REQUIRED = re.compile(
    r"NV_ERR_RESET_REQUIRED|\breset required\b|\brequires? (?:a )?(?:GPU )?reset\b|\bneeds? to be reset\b",
    re.I,
)
_DRIVER_VERSION = re.compile(r"loading NVIDIA .*?Kernel Module.*?\s(?P<version>\d+\.\d+(?:\.\d+)?)(?:\s|$)")
# Multi-line NVRM messages printed as several lines: the opener, then lines that continue it
# (NVSentinel #155 fallen-off-the-bus block; the crash-dump banner).
# The API-mismatch and probe-routine reports (driver source kernel-open/nvidia/nv.c) come as an indented
# block, as one line per part each with its own (or the same repeated) time, or as bare "NVRM:" lines.
_BLOCK_OPENER = re.compile(
    r"The NVIDIA GPU \S+\s*$|crash dump has been created|API mismatch|probe routine was not called"
    r"|This can occur when a driver such as|Try unloading the conflicting|device is invalid:"
)
_BLOCK_CONTINUATION = re.compile(
    r"\(PCI ID: |installed in this system|fallen off the bus and is not|nvidia-bug-report\.sh as root"
    r"|the NVIDIA kernel module is unloaded"
    r"|has the version |this kernel module has|the version \d|make sure that this|kernel module and all NVIDIA"
    r"|components have the same|have the same version"
    r"|This can occur when a driver such as|nouveau, rivafb|nvidiafb,? or rivatv|was loaded and obtained"
    r"|the NVIDIA device\(s\)|Try unloading the conflicting|reconfigure your kernel without|driver\(s\)\), then"
    r"|again\.$|BAR\d is "
)


def may_start_report(line: str) -> bool:
    """Whether ``line`` may hold a message that waits for the lines after it (an AER report, a multi-line
    NVRM block): true of every line whose message the parser keeps pending (``_Message.waits``, read on
    the message, which is a piece of the line), and cheap (``in`` tests first). Here, not in kernel_log.py,
    so the cursor that module builds its collector with reads it too."""
    return "AER: " in line or "PCIe Bus Error" in line or ("NVRM: " in line and _BLOCK_OPENER.search(line) is not None)


# A GPU named by address after "GPU " / "PCI:" with or without the domain and function ("GPU 18:00.0").
_GPU_ADDRESS = re.compile(
    r"(?:PCI:|GPU )(?P<addr>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
    r"(?![0-9a-fA-F]|:[0-9a-fA-F])"
)
_BUS_DEVICE = re.compile(r"[0-9a-fA-F]{2}:[0-9a-fA-F]{2}")
_GPU_INDEX = re.compile(r"GPU(\d+)[ :]")  # "GPU6 _kgspIsHeartbeatTimedOut: ..." (the driver's GPU instance)
_RM_INIT_CODE = re.compile(r"RmInitAdapter failed! \((?P<code>0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:\d+)\)")
_API_MISMATCH = re.compile(
    r"API mismatch: the client (?:'(?P<client>[^']*)' \(pid (?P<pid>\d+)\) )?"
    r"has the version (?P<client_version>[\d.]+),"
    r" but this kernel module has the version (?P<module_version>\d[\d.]*\d)"
)
_REMAP_PENDING = re.compile(r"reset (?:the )?gpu to activate|pending", re.I)
_REMAP_FAILED = re.compile(r"fail", re.I)
_ESCAPED_NEWLINE = re.compile(r"#012(?:NVRM: )?")  # rsyslog writes a message's newlines as "#012"
# Rows of the driver's diagnostic tables (GSP RPC history) and crash reports are printed indented after
# "NVRM: ", or under a "... history" header: details of the event before them, never events of their own.
_DETAIL_HEADER = re.compile(r"(?:GPU\d+ )?RPC (?:event )?history|entry function ")
# Of those, the GSP RPC debug dump (kgspLogRpcDebugInfo, src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c): its two
# tables' titles and column header. The driver prints it only with a GSP RPC timeout (Xid 119), a failed RPC
# sanity check or a fatal GSP error (Xid 120): a GSP fault report even where its Xid line was cut off.
GSP_RPC_DUMP = re.compile(
    r"(?:GPU(?P<gpu>\d+) )?RPC (?:event )?history \(CPU (?:->|<-) GSP\)"
    r"|entry function\s+sequence\s+data0\s+data1\s+ts_start\s+ts_end\s+duration"
)
# other_nvrm sub-kinds, first match wins (sources: corpus samples named in fixtures/corpus/gpu/INDEX.md).
# New sub-kinds (GPU failures that are not Xids) read from the samples in fixtures/corpus-extra/kernel-log/.
_OTHER_SUBKINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("driver_load", re.compile(r"^loading NVIDIA ")),
    ("driver_mismatch", re.compile(r"API mismatch")),
    ("driver_conflict", re.compile(r"probe routine was not called|obtained ownership of the NVIDIA device")),
    ("rm_init_adapter_failed", re.compile(r"RmInitAdapter failed|rm_init_adapter failed", re.I)),
    ("probe_failed", re.compile(r"probe routine failed")),
    ("pci_resource_invalid", re.compile(r"region assigned to your NVIDIA device is invalid|BAR\d is \d+M @ 0x0\b")),
    ("no_device_initialized", re.compile(r"No NVIDIA graphics adapter probed|None of the NVIDIA devices")),
    ("gpu_lost", re.compile(r"\bGPU (?:is|has been|was) lost\b|\blost from the bus\b|\bGPU lost\b", re.I)),
    ("gsp_heartbeat_timeout", re.compile(r"Heartbeat timed out|HeartbeatTimedOut", re.I)),
    ("gsp_boot_failed", re.compile(r"BootGspRm|Cannot initialize GSP firmware|GSP-RM image|No firmware image found")),
    ("gsp_timeout", re.compile(r"GSP Timeout|waiting for RPC response", re.I)),
    ("gsp_rpc_failed", re.compile(r"(?<!\w)\w+_GSP: .*failed")),  # (?<!\w): one try per word, not per letter
    ("gsp_rpc_failed", re.compile(r"rpcSendMessage failed|rpcRecvPoll failed")),
    ("memory_subsystem_error", re.compile(r"Memory Subsystem Error")),
    ("gsp_coredump", re.compile(r"CoreDump", re.I)),
    ("pmu_halted", re.compile(r"PMU has halted")),
    ("nvlink_training_failed", re.compile(r"knvlink\w*:.*failed", re.I)),
    ("crash_dump", re.compile(r"crash dump has been created")),
    ("assertion_failed", re.compile(r"Assertion failed")),
    # nvidia-modeset's (the only source of these words): the GPU's display engine did not idle (classify reads
    # nvidia-modeset ERROR lines through the NVRM path)
    ("display_engine_hang", re.compile(r"Idling display engine timed out")),
)

# --- other kernel messages ----------------------------------------------------------------------
_OOM_KILL = re.compile(r"[Oo]ut of memory.*?: Kill(?:ed)? process (?P<pid>\d+) \((?P<name>[^)]*)\)")
_AER_RECEIVED = re.compile(
    r"AER: (?P<what>.*?)error(?: message)? received(?::? (?:from )?(?P<src>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:"
    r"[0-9a-fA-F]{2}\.[0-7]))?"
)
_AER_SEVERITY = re.compile(r"(Uncorrected \((?:Non-)?Fatal\)|Corrected)", re.I)
_PCIE_BUS_ERROR = re.compile(r"PCIe Bus Error: severity=(?P<severity>[^,]+)")
# Lines that continue an AER report (kernel drivers/pci/pcie/aer.c print one report over several lines).
_AER_DETAIL = re.compile(
    r"PCIe Bus Error|\bdevice \[[0-9a-fA-F]{4}:[0-9a-fA-F]{4}\] error status|:\s+\[\s*\d+\] \w"
    r"|error_detected|AER-aware|TLP Header|AER:\s+(?!.*error(?: message)? received)"
)
# Every alternative of _AER_DETAIL holds one of these, and most lines hold none: substring tests (C speed)
# answer for them, where the pattern, which has no literal start, is tried at every position (~7 us a line).
_AER_DETAIL_HINTS = ("AER", "] ", "PCIe Bus Error", "error_detected", "TLP Header")


def aer_detail_in(text: str) -> bool:
    """``_AER_DETAIL.search(text) is not None``, cheaply for text that cannot hold one."""
    return (
        "AER" in text or "] " in text or "PCIe Bus Error" in text or "error_detected" in text or "TLP Header" in text
    ) and _AER_DETAIL.search(text) is not None


_BANDWIDTH = re.compile(
    r"(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): "
    r"(?P<available>[\d.]+ [GMT]b/s) available PCIe bandwidth, limited by (?P<limited_by>.+?) "
    r"link at (?P<at>\S+) \(capable of (?P<capable>[\d.]+ [GMT]b/s)"
)
_PLUGIN_XID = re.compile(r"XidCriticalError: Xid=(?P<code>\d+) on Device=(?P<uuid>[^,\s]+)")
# --- the host around the GPU (kernel Documentation/driver-api/edac.rst, drivers/acpi/apei/ghes.c,
# arch/x86/kernel/cpu/mce, kernel/hung_task.c) -----------------------------------------------------
# "EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 ...)"
_EDAC = re.compile(
    r"EDAC (?:\w+ )?MC(?P<mc>\d+): (?P<count>\d+) (?P<sev>CE|UE|Fatal) (?P<what>[^(]*?)on (?P<dimm>[^\s(]+)"
)
# The wording of kernels before 3.x (edac_mc.c: "CE page 0x%lx, offset 0x%lx, grain %d, syndrome 0x%lx, row %d,
# channel %d, label \"%s\": %s"), still printed by some vendor kernels: one error per line, the DIMM by label
# (or by row and channel when no label is registered).
_EDAC_LEGACY = re.compile(
    r"EDAC MC(?P<mc>\d+): (?P<sev>CE|UE) (?:page 0x[0-9a-fA-F]+, offset 0x[0-9a-fA-F]+, grain \d+, "
    r"(?:syndrome 0x[0-9a-fA-F]+, )?)?row (?P<row>\d+), channel (?P<channel>\d+), labels?:? ?\"(?P<label>[^\"]*)\""
)
_GHES_OPENER = re.compile(r"\[Hardware Error\]: Hardware error from APEI Generic Hardware Error Source")
_GHES_FIELD = re.compile(
    r"\[Hardware Error\]:\s+(?:event severity: (?P<severity>\w[\w ]*)|section_type: (?P<section>.+)"
    r"|device_id: (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
    r"|port_type: \d+, (?P<port_type>.+?)\s*$|vendor_id: (?P<vendor_id>0x[0-9a-fA-F]{4}))"
)
_MCE_LOGGED = re.compile(r"\[Hardware Error\]: (?:Machine check events logged|CPU \d+: Machine Check)")
_HUNG_TASK = re.compile(r"INFO: task (?P<name>.+):(?P<pid>\d+) blocked for more than (?P<seconds>\d+) seconds")
_NOUVEAU_DEVICE = re.compile(r"nouveau (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): ")
