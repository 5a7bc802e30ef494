"""The SSH test fleet: real ``/usr/sbin/sshd`` processes on 127.0.1.N (see fleet.py).

One fleet per test module: recorded hosts from fixtures/hosts/, a dozen copies of a
healthy node (so more than one sshd runs: one serves at most 16 addresses), a jump host,
and one host per fault. Nothing here reads the developer's ~/.ssh: every test gets an
empty HOME and no ssh-agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.ssh.fleet import SSHD, Fault, Fleet, HostSource

RECORDED = ROOT / "fixtures" / "hosts"
HEALTHY_COPIES = 12


def fleet_hosts() -> dict[str, HostSource]:
    hosts: dict[str, HostSource] = {
        "healthy": RECORDED / "healthy-l40s",
        "xid79": RECORDED / "xid79-fallen-off-bus",
        "nvsmi-hung": RECORDED / "nvidia-smi-hung",
        "bastion": None,
        "behind-bastion": RECORDED / "gpu-unreadable",
        "recorded-unreachable": RECORDED / "unreachable-node",
    }
    hosts.update({f"gpu-{n:02d}": RECORDED / "healthy-l40s" for n in range(1, HEALTHY_COPIES + 1)})
    hosts.update({fault.value: fault for fault in Fault})
    return hosts


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    if not SSHD.exists():
        pytest.skip(f"{SSHD} is not installed (Debian package openssh-server)")
    with Fleet(tmp_path_factory.mktemp("ssh-fleet"), fleet_hosts()) as running:
        yield running


@pytest.fixture(autouse=True)
def hermetic_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may read the developer's ~/.ssh or use their agent."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def cursor_fleet(factory: pytest.TempPathFactory, names: list[str]) -> Iterator[Fleet]:
    """Healthy recorded hosts whose `journalctl` keeps a real cursor and `dmesg` a real ring, in front of the
    fleet's own stand-ins (tests/history/cursor_standins.py): the fleet of the incremental-read tests."""
    from tests.history.cursor_standins import install

    if not SSHD.exists():
        pytest.skip(f"{SSHD} is not installed (Debian package openssh-server)")
    with Fleet(factory.mktemp("cursor-fleet"), dict.fromkeys(names, RECORDED / "healthy-l40s")) as running:
        install(running.root)
        yield running
