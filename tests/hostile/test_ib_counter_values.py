"""Issue "trust, round four", items 9 and 10: an InfiniBand counter that one read lacks (unreadable while the
port resets, exactly when it flaps) leaves the window unjudged, never healthy; a counter value no port prints
(thousands of digits, 1e400, empty) is one unreadable line of that host, never a crash of the run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nightowl.collectors.network import ib_ports
from nightowl.library.rehearse import replay_case
from tests.helpers import ROOT

FLAPPING = ROOT / "fixtures" / "hosts" / "ib-link-flapping-ndr"
HEALTHY = ROOT / "fixtures" / "hosts" / "ib-healthy-ndr"


@pytest.mark.parametrize(
    ("text", "value"), [("123", 123), ("", None), ("1e400", None), ("9" * 5000, None), ("٣", None)]
)
def test_a_counter_value_is_a_number_a_port_can_count(text: str, value: int | None) -> None:
    assert ib_ports.counter_value(text) == value


def _flapping_counter_line() -> str:
    """The counter line of the flapping port whose rise makes the recording flap."""
    first = (FLAPPING / "ib-ports.1.out").read_text().splitlines()
    second = (FLAPPING / "ib-ports.2.out").read_text().splitlines()
    moved = [line for line in second if "/counters/link_downed:" in line and line not in first]
    assert moved, "the recording flaps through link_downed"
    return moved[0]


@pytest.mark.parametrize("how", ["missing", "empty", "1e400", "5000-digits"])
def test_a_counter_unreadable_in_the_second_read_is_no_healthy_port(how: str, tmp_path: Path) -> None:
    host = tmp_path / "ib-link-flapping-ndr"
    shutil.copytree(FLAPPING, host)
    line = _flapping_counter_line()
    name = line.rsplit(":", 1)[0]
    replaced = {"missing": "", "empty": f"{name}:", "1e400": f"{name}:1e400", "5000-digits": f"{name}:{'9' * 5000}"}
    second = host / "ib-ports.2.out"
    second.write_text(second.read_text().replace(line + "\n", replaced[how] + ("\n" if replaced[how] else "")))
    (run,) = replay_case(
        "node-health",
        {"host": host.name, "params": {"expect_ib": True}},
        host_dirs={host.name: host},
        out_dir=tmp_path / "b",
    )
    assert run.verdict is None or run.verdict["action"] != "none", run.verdict
    assert run.status == "incomplete" and "ib-window-unread" in run.path


def test_one_hosts_huge_counter_leaves_the_others_judged(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(HEALTHY, bad)
    text = (bad / "ib-ports.2.out").read_text()
    (bad / "ib-ports.2.out").write_text(
        text.replace("counters/symbol_error:0", "counters/symbol_error:" + "9" * 5000, 1)
    )
    good = tmp_path / "good"
    shutil.copytree(HEALTHY, good)
    runs = replay_case(
        "node-health",
        {"hosts": ["bad", "good"], "params": {"expect_ib": True}},
        host_dirs={"bad": bad, "good": good},
        out_dir=tmp_path / "b",
    )
    by_host = {run.host: run for run in runs}
    assert by_host["good"].verdict is not None and by_host["good"].verdict["id"] == "healthy"
    assert by_host["bad"].verdict is None  # its window could not be judged: no verdict, no crash
    parsed = ib_ports.parse((bad / "ib-ports.2.out").read_text())
    assert any("unreadable sysfs value" in warning for warning in parsed.warnings)
