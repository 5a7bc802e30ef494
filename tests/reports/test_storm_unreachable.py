"""An unreachable storm names every host's reason (issue 45 item 9), not only the first host's error: three
hosts of one rack behind a dead path fold into one capture whose outcome and record say why each gave no
verdict, one line per distinct reason. Real captures by the receiver's own planning and folding, no server."""

from __future__ import annotations

from pathlib import Path

from nightowl.receiver.capture import Capture, run_capture
from nightowl.receiver.config import load_config
from tests.receiver.test_storm import storm_config
from tests.receiver.test_storm_common_cause import storm_of


def unreachable_storm(tmp_path: Path) -> tuple[list[str], Capture]:
    """Three hosts of rack r09 behind a dead path (two refused, one with no route), folded into one capture."""
    hosts = [f"r09-gpu-{n:02d}" for n in (1, 2, 3)]
    reasons = {
        hosts[0]: f"ssh: connect to host {hosts[0]} port 22: Connection refused",
        hosts[1]: f"ssh: connect to host {hosts[1]} port 22: Connection refused",
        hosts[2]: f"ssh: connect to host {hosts[2]} port 22: No route to host",
    }
    for host, reason in reasons.items():
        (tmp_path / "hosts" / host).mkdir(parents=True)
        (tmp_path / "hosts" / host / "unreachable").write_text(reason + "\n")
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook"))
    return hosts, run_capture(storm_of(tmp_path, config, hosts, 2, "r09"), config)


def test_every_unreachable_hosts_reason_is_named(tmp_path: Path) -> None:
    hosts, capture = unreachable_storm(tmp_path)
    assert capture.status == "captured", capture.reason
    assert capture.storm is not None and {r["status"] for r in capture.storm.results} == {"unreachable"}
    error = str(capture.host_error)
    assert error.startswith("3 hosts gave no verdict: ")
    assert f"{hosts[0]}, {hosts[1]} unreachable: " in error and "port 22: Connection refused" in error
    assert f"{hosts[2]} unreachable: " in error and "No route to host" in error
    assert error in capture.outcome()
