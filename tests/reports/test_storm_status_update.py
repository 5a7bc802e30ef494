"""A storm's status update names the common cause first (issue 45 item 6) and every unreachable host's reason
(item 9): 64 alerts from 8 hosts of rack r12 fold into one capture whose `status-update.md` tells the rack to be
checked before 8 nodes are rebooted, not eight reboots. Real replay captures by the receiver's own planning and
folding (tests/receiver/test_storm_common_cause.py), no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.receiver.capture import Capture, run_capture
from nightowl.receiver.config import load_config
from tests.receiver.test_storm import rack_hosts, storm_config
from tests.receiver.test_storm_common_cause import storm_of
from tests.reports.test_storm_unreachable import unreachable_storm


def line(text: str, field: str) -> str:
    return next(row for row in text.splitlines() if row.startswith(f"{field}: "))


@pytest.fixture(scope="module")
def rack_storm(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    tmp_path = tmp_path_factory.mktemp("storm")
    hosts = rack_hosts(tmp_path, "r12", 8)
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook"))
    capture = run_capture(storm_of(tmp_path, config, hosts, 8, "r12"), config)
    assert capture.status == "captured" and capture.status_update, capture.reason
    return capture


def test_a_racks_storm_status_update_names_the_common_cause_first(rack_storm: Capture) -> None:
    text = Path(str(rack_storm.status_update)).read_text()
    hosts = [f"r12-gpu-{n:02d}" for n in range(1, 9)]
    impact = line(text, "Impact")
    assert impact.startswith("Impact: common cause: rack r12 (rack power, cooling and NVLink trays): check it before ")
    assert "before reboot-node on 8 nodes (8 of 8 hosts of the storm in it show gpu-fell-off-bus)" in impact
    action = line(text, "Current action")
    assert action.startswith(f"Current action: inspect rack r12 before acting on its 8 nodes ({', '.join(hosts)}); ")
    assert action.index("inspect rack r12") < action.index("reboot-node: GPU 0000:a1:00 fell off the PCIe bus")
    # the outcome every notifier reads carries the same update, and its own summary leads with the same cause
    outcome = rack_storm.run_outcome
    assert outcome is not None and impact in outcome.status_update_lines()
    assert str((outcome.verdict or {}).get("summary")).startswith("Common cause: rack r12 (")


def test_no_common_cause_in_the_status_update_without_a_shared_domain(tmp_path: Path) -> None:
    """Two hosts of one rack are under fleet/domains.py's 3 members: their update is the hosts' own, as before."""
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook"))
    capture = run_capture(storm_of(tmp_path, config, rack_hosts(tmp_path, "r13", 2), 2, "r13"), config)
    text = Path(str(capture.status_update)).read_text()
    assert "common cause" not in text.lower()
    assert line(text, "Current action").startswith("Current action: reboot-node: GPU 0000:a1:00 fell off")


def test_an_unreachable_storms_status_update_names_every_hosts_reason(tmp_path: Path) -> None:
    hosts, capture = unreachable_storm(tmp_path)
    impact = line(Path(str(capture.status_update)).read_text(), "Impact")
    assert impact.startswith("Impact: not known yet: 3 hosts gave no verdict: ")
    assert f"{hosts[0]}, {hosts[1]} unreachable: " in impact and "port 22: Connection refused" in impact
    assert f"{hosts[2]} unreachable: " in impact and "No route to host" in impact
