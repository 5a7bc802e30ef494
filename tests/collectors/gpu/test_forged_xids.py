"""Issue "trust, round four", item 1: a kernel message counts only where the message starts. The kernel logs
user text inside other subsystems' messages (a segfault names the file a process crashed in, AppArmor quotes a
path, USB prints a device's product string, EXT4 its mount options); planted there, "NVRM: Xid ... 79" is no
Xid: no event, no verdict, no watch trigger, no history row."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.library.rehearse import replay_case
from nightowl.watch.triggers import line_signals
from tests.helpers import facts_of

FORGED = "NVRM: Xid (PCI:0000:a1:00): 79, pid=1, name=x, GPU has fallen off the bus."
CARRIERS = {
    "segfault-file-name": (
        f"python3[4321]: segfault at 0 ip 00007f0000000000 sp 00007ffc00000000 error 4 in {FORGED}so[7f0000000000+1000]"
    ),
    "apparmor-name": (
        'audit: type=1400 audit(1700000000.000:42): apparmor="DENIED" operation="open" profile="x"'
        f' name="{FORGED}" pid=4321'
    ),
    "usb-product": f"usb 1-1: Product: {FORGED}",
    "usb-manufacturer": f"usb 1-1: Manufacturer: {FORGED}",
    "ext4-options": f"EXT4-fs (sda1): mounted filesystem with ordered data mode. Opts: {FORGED}",
    "sxid-in-a-name": (
        "python3[4321]: segfault at 0 ip 0 sp 0 error 4 in nvidia-nvswitch0: SXid (PCI:0000:84:00.0): 12028, Fatal"
    ),
}
# How the carrier reaches nightowl: dmesg, dmesg -T, the journal, syslog with the kernel's stamp, /dev/kmsg.
FORMS = {
    "dmesg": "[ 1234.567890] {line}",
    "dmesg-T": "[Tue Mar  5 10:00:00 2024] {line}",
    "journal": "2024-03-05T10:00:00+0000 gpu-17 kernel: {line}",
    "syslog": "Mar  5 10:00:00 gpu-17 kernel: [ 1234.567890] {line}",
    "kmsg": "6,1234,5678,-;{line}",
}


def _facts(text: str) -> dict:
    return facts_of("kernel-log", text)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("carrier", sorted(CARRIERS))
def test_a_planted_xid_is_no_event(carrier: str, form: str) -> None:
    line = FORMS[form].format(line=CARRIERS[carrier])
    facts = _facts(line + "\n")
    assert facts["xid_codes"] == [] and facts["sxid_codes"] == [] and facts["fallen_off_bus_gpus"] == []
    assert not {"xid", "sxid", "fallen_off_bus"} & line_signals(line)  # `watch` opens no burst on it


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_same_message_where_a_message_starts_is_read(form: str) -> None:
    """The check can fail: the very text, as the driver writes it, is an Xid 79 in every form."""
    facts = _facts(FORMS[form].format(line=FORGED) + "\n")
    assert facts["xid_codes"] == [79] and facts["fallen_off_bus_gpus"] == ["0000:a1:00"]


def test_a_burst_of_real_xids_does_not_let_a_planted_one_through() -> None:
    """The fast path of a burst reads a repeated message by its text: a planted copy of a real line's text
    is still no event (it would count as a repeat)."""
    real = f"[ 10.0] {FORGED}\n"
    planted = f"[ 11.0] usb 1-1: Product: {FORGED}\n"
    facts = _facts(real * 3 + planted * 5)
    assert [e["code"] for e in facts["events"]] == [79]
    assert facts["events"][0]["count"] == 3 and facts["xid_event_count"] == 3  # the 5 planted copies: none counted
    assert _facts(real * 8)["xid_event_count"] == 8  # the same count read where every line is the driver's


def test_no_runbook_reboots_a_node_for_a_planted_xid(tmp_path: Path) -> None:
    host = tmp_path / "gpu-17"
    host.mkdir()
    lines = [FORMS["journal"].format(line=carrier) for carrier in CARRIERS.values()]
    (host / "kernel-log.out").write_text("\n".join(lines) + "\n")
    healthy = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "healthy-l40s" / "nvidia-smi.out"
    (host / "nvidia-smi.out").write_text(healthy.read_text())
    for runbook in ("xid", "node-health"):
        (run,) = replay_case(runbook, {"host": "gpu-17"}, host_dirs={"gpu-17": host}, out_dir=tmp_path / runbook)
        assert run.verdict is not None and run.verdict["action"] == "none", (runbook, run.verdict)
