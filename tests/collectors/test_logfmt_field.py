"""The normaliser's logfmt-field family: another program's log line carried whole in one logfmt field (Kata
Containers' shim logs its guest console through containerd as ``vmconsole="..."``; field set kernel-log-2's
kata11671 sample was a driver that does not support the GPU, read as nothing wrong). Composed lines in that form."""

from __future__ import annotations

import pytest

from nightowl.collectors.gpu.kernel_log import parse as parse_kernel_log
from nightowl.collectors.normalise import normalise

SHIM = (
    'Aug 13 00:17:32 node-3 containerd[2322]: time="2025-08-13T00:17:32.6{n}-04:00" level=debug '
    'msg="reading guest console" name=containerd-shim-v2 pid=5275 sandbox=s1 source=virtcontainers '
    'subsystem=sandbox vmconsole="{line}"'
)
GUEST = [
    "[   13.253417] NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2331)",
    "[   13.253417] NVRM: installed in this system is not supported by the",
    "[   13.253417] NVRM: NVIDIA 575.64.03 driver release.",
]


def shim_log(lines: list[str]) -> str:
    return "\n".join(SHIM.format(n=i, line=line) for i, line in enumerate(lines)) + "\n"


def test_the_guest_lines_are_what_is_read() -> None:
    result = normalise(shim_log(GUEST), "kernel-log")
    assert result.families == ("logfmt-field",)
    assert result.text == "\n".join(GUEST) + "\n"


def test_escaped_quotes_in_the_field_are_unescaped() -> None:
    line = '[   20.1] nvidia-modprobe: \\"nvidia-uvm\\" not found'
    assert normalise(shim_log([line, line]), "kernel-log").text.startswith('[   20.1] nvidia-modprobe: "nvidia-uvm"')


def test_the_carriers_own_stamp_field_is_not_a_carried_line() -> None:
    own = "\n".join(f'time="2025-08-13T00:17:3{i}.1-04:00" level=info msg="shim started" pid={i}' for i in range(4))
    assert normalise(own, "kernel-log").families == ()


def test_a_field_on_few_lines_is_left_alone() -> None:
    text = shim_log(GUEST[:1]) + "\n".join(f"[   1{i}.0] usb 1-1: new device" for i in range(5)) + "\n"
    assert "logfmt-field" not in normalise(text, "kernel-log").families


def test_the_kernel_log_reader_sees_the_guests_driver_failure() -> None:
    facts = parse_kernel_log(normalise(shim_log(GUEST), "kernel-log").text)  # as the engine reads it
    assert [f["id"] for f in facts.driver_load_failures] == ["gpu_not_supported_by_release"]


@pytest.mark.parametrize(
    "stamp",
    ["2025-08-13 00:17:3{i}.1 +0000 UTC m=+0.{i}", "2025-08-13 00:17:3{i} UTC", "Aug 13 00:17:3{i} +02:00"],
)
def test_the_carriers_own_stamp_with_a_zone_is_not_a_carried_line(stamp: str) -> None:
    # a zone after the time is no carried text: reading it as one replaced every line by its time
    own = "\n".join(f'time="{stamp.format(i=i)}" level=info msg="shim started" pid={i}' for i in range(4))
    assert normalise(own, "kernel-log").families == ()


WRAPS = {
    "indent": ("    ", ()),
    "quote": ("> ", ("quote",)),
    "diff": ("+", ("diff",)),
    "rank-tag": ("[rank0]: ", ()),
    "diff-then-quote": ("+> ", ("diff", "quote")),
}


@pytest.mark.parametrize("wrap", sorted(WRAPS))
def test_the_shim_log_pasted_or_prefixed_still_gives_the_guest_lines(wrap: str) -> None:
    prefix, outer = WRAPS[wrap]
    pasted = "".join(prefix + line + "\n" for line in shim_log(GUEST).splitlines())
    result = normalise(pasted, "kernel-log")
    assert result.families[: len(outer)] == outer and result.families[-1] == "logfmt-field"
    assert result.text == "\n".join(GUEST) + "\n"
