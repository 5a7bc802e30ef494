"""A saved /dev/kmsg dump ("priority,sequence,microseconds,flags;message") reads like dmesg."""

from __future__ import annotations

from nightowl.collectors.gpu.kernel_log import parse, parse_time


def test_kmsg_records_give_events_with_seconds_since_boot() -> None:
    text = (
        "6,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
        "4,1240,12000042,-;NVRM: Xid (PCI:0000:5e:00): 13, pid=99, name=python, Graphics Exception\n"
    )
    events = parse(text).events
    assert [(e["kind"], e["code"], e["pci"], e["time"]) for e in events] == [
        ("xid", 79, "0000:3b:00", "5.678901"),
        ("xid", 13, "0000:5e:00", "12.000042"),
    ]


def test_a_kmsg_prefix_is_told_from_other_numbers() -> None:
    assert parse_time("6,1234,5678901,-;") == ("5.678901", None)
    assert parse_time("[ 5.678901] ")[0] == "5.678901"
    assert parse_time("6,1234;")[0] is None
