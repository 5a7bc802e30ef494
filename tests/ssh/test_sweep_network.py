"""`nightowl sweep` over loopback sshd hosts that serve InfiniBand sysfs trees and NVLink fabric sections.

The fleet turns each recorded ``ib-ports.N.out`` into a sysfs tree and runs the ib-ports collector's own
``grep`` script over it (tests/ssh/fleet.py), so a sweep reads ports and counters as it would on a node.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.helpers import ROOT
from tests.ssh.fleet import SSHD, Fleet

RECORDED = ROOT / "fixtures" / "hosts"


def _fabric_host(tmp_path: Path) -> Path:
    """An HGX H100 whose nvidia-smi -q shows the Fabric Status of Azure/azhpc-images#506 (composed here: the
    fleet serves one nvidia-smi output to both the nvidia-smi and the fabric collector)."""
    host = tmp_path / "fabric-degraded"
    shutil.copytree(RECORDED / "fabric-manager-inactive-h100", host)
    text = (host / "nvidia-smi.out").read_text()
    assert "        Status                            : Success\n" in text
    (host / "nvidia-smi.out").write_text(
        text.replace(
            "        Status                            : Success\n",
            "        Status                            : Insufficient Resources\n",
        )
    )
    (host / "fabric-manager.out").write_text("active\n")
    (host / "fabric-manager.rc").unlink()
    (host / "fabric.out").unlink()
    return host


@pytest.fixture
def network_fleet(tmp_path: Path):  # noqa: ANN201
    if not SSHD.exists():
        pytest.skip(f"{SSHD} is not installed (Debian package openssh-server)")
    hosts = {
        "ib-ok": RECORDED / "ib-healthy-ndr",
        "ib-flap": RECORDED / "ib-link-flapping-ndr",
        "fabric-bad": _fabric_host(tmp_path),
        "l40s": RECORDED / "healthy-l40s",
    }
    with Fleet(tmp_path / "fleet-root", hosts) as fleet:
        yield fleet


def _sweep(fleet: Fleet, tmp_path: Path, *extra: str) -> tuple[int, str]:
    inventory = fleet.write_inventory(tmp_path / "hosts.yaml")
    args = ["sweep", "--inventory", str(inventory), "--known-hosts", str(fleet.known_hosts),
            "--ssh-config", str(fleet.ssh_config), "--identity", str(fleet.client_key), "--connect-timeout", "3",
            "--command-timeout", "10", "--host-timeout", "30", "--param", "ib_window_seconds=1",
            "--out", str(tmp_path / "bundles"), *extra]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output


def test_sweep_shows_a_flapping_port_and_a_degraded_fabric(network_fleet: Fleet, tmp_path: Path) -> None:
    code, output = _sweep(network_fleet, tmp_path, "--format", "json")
    data = json.loads(output)
    verdicts = {h["host"]: (h["verdict"] or {}) for h in data["hosts"]}
    assert verdicts["ib-flap"]["id"] == "ib-link-flapping" and verdicts["ib-flap"]["action"] == "hardware-ticket"
    assert "mlx5_3/1" in verdicts["ib-flap"]["summary"]
    assert verdicts["fabric-bad"]["id"] == "nvlink-fabric-degraded"
    assert verdicts["fabric-bad"]["action"] == "drain-and-reset" and verdicts["fabric-bad"]["gpus"] == ["0000:18:00"]
    assert verdicts["ib-ok"]["id"] == "healthy" and verdicts["l40s"]["id"] == "healthy"
    assert code == 1
    # the ports were read from the served sysfs tree by the collector's own command, twice
    bundle = Path(data["bundle"])
    assert (bundle / "hosts" / "ib-flap" / "ib-ports.1.out").read_text().startswith("/")
    assert "link_downed:6" in (bundle / "hosts" / "ib-flap" / "ib-ports.2.out").read_text()


def test_sweep_table_has_port_and_fabric_columns(network_fleet: Fleet, tmp_path: Path) -> None:
    _, table = _sweep(network_fleet, tmp_path, "--format", "table")
    lines = table.splitlines()
    assert lines[0].split() == ["HOST", "STATUS", "VERDICT", "ACTION", "GPUS", "PORTS", "FABRIC", "SECONDS"]
    row = {line.split()[0]: line for line in lines[1:5]}
    assert "8/8 up flap mlx5_3/1" in row["ib-flap"]
    assert "degraded 0000:18:00" in row["fabric-bad"]
    assert "8/8 up" in row["ib-ok"] and " ok " in row["ib-ok"]
    assert row["l40s"].split()[5:7] == ["-", "-"]  # no port and no fabric read: "-", never "ok"
