"""Processes that segfaulted inside NVIDIA's user-space GPU stack (knowledge/gpu_libraries.csv): the application's
crash, not the node's. The lines are the kernel's own wording (arch/x86/mm/fault.c show_signal_msg) as posted in
ikawrakow/ik_llama.cpp#721 (dmesg -T) and leptonai/gpud's test data (dmesg --decode --time-format iso)."""

from __future__ import annotations

from typing import Any

import pytest

from nightowl.collectors.gpu.kernel_log.app_crashes import gpu_library_crashes

LIBCUDA = (
    "[Sat Aug 23 11:05:44 2025] llama-server[383019]: segfault at 20e403fd8 ip 00007fe8ef318637 sp 00007fe84ee2ff80"
    " error 4 in libcuda.so.575.64.05[518637,7fe8eefc5000+e97000] likely on CPU 114 (core 50, socket 0)\n"
)
LIBNCCL = (
    "kern  :warn  : 2025-01-21T04:41:44,285060+00:00 pt_main_thread[2536443]: segfault at 7f797fe00000"
    " ip 00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]\n"
)


def test_a_crash_in_libcuda_and_in_libnccl_are_read_with_their_process() -> None:
    found = gpu_library_crashes(LIBCUDA + LIBNCCL + LIBNCCL)
    assert [(c["process"], c["pid"], c["library"], c["count"]) for c in found] == [
        ("llama-server", 383019, "libcuda.so.575.64.05", 1),
        ("pt_main_thread", 2536443, "libnccl.so.2", 2),
    ]


@pytest.mark.parametrize(
    "text",
    [
        # a crash in a library that is not the GPU stack
        LIBCUDA.replace("libcuda.so.575.64.05", "libc.so.6"),
        # the words inside another message (an audit record quoting a user's string) are not the kernel's line
        '[  5.1] audit: type=1400 name="python[1]: segfault at 0 ip 0 sp 0 error 4 in libcuda.so.1[7f+10]"\n',
        "",
    ],
)
def test_other_lines_are_no_gpu_library_crash(text: str) -> None:
    assert gpu_library_crashes(text) == []


@pytest.mark.parametrize(
    "wrap",
    [
        lambda line: line,
        lambda line: "    " + line,  # pasted indented
        lambda line: "> " + line,  # quoted in a reply
        # journalctl -k -o short-iso: the host and "kernel:" before the message, the dmesg stamp gone
        lambda line: "2025-08-23T11:05:44+0200 gpu-17 kernel: " + line.split("] ", 1)[1],
        lambda line: "Aug 23 11:05:44 gpu-17 kernel: " + line.split("] ", 1)[1],  # syslog
    ],
    ids=["as-printed", "indented", "quoted", "journal-iso", "syslog"],
)
def test_the_crash_reads_through_the_collector_however_the_log_arrives(wrap: Any) -> None:
    from nightowl.collectors import get_collector

    collector = get_collector("kernel-log")
    text = "".join(wrap(line) + "\n" for line in (LIBCUDA + LIBCUDA.replace("383019", "383020")).splitlines())
    found = collector.facts(collector.parse(text))["gpu_library_crashes"]
    # two threads of one process in one library: one row, counted twice, the first pid kept
    assert [(c["process"], c["library"], c["count"], c["pid"]) for c in found] == [
        ("llama-server", "libcuda.so.575.64.05", 2, 383019)
    ]


@pytest.mark.parametrize(
    "before",
    [
        "",
        # a report pending when the crash is logged: an NVRM block opener, an AER report
        "[Sat Aug 23 11:05:43 2025] NVRM: The NVIDIA GPU 0000:3b:00.0\n",
        "[Sat Aug 23 11:05:43 2025] pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:3b:00.0\n",
    ],
)
def test_the_kernel_log_parse_reads_a_crash_wherever_it_falls(before: str) -> None:
    from nightowl.collectors.gpu.kernel_log import parse

    assert [c["process"] for c in parse(before + LIBCUDA).gpu_library_crashes] == ["llama-server"]


def test_a_crashing_nvidia_modprobe_is_a_crash_too() -> None:
    from nightowl.collectors.gpu.kernel_log import parse

    line = LIBCUDA.replace("llama-server[383019]", "nvidia-modprobe[77]")  # a driver-load line and a crash
    assert [c["process"] for c in parse(line).gpu_library_crashes] == ["nvidia-modprobe"]
