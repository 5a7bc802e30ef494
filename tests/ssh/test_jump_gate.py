"""Behind one bastion, a wide sweep queues its handshakes instead of tripping sshd's MaxStartups."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nightowl.transports.base import TransportError
from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHTransport
from tests.ssh.fleet import SSHD, Fleet

# Starts real sshd processes: `pytest -m "not integration"` leaves it out.
pytestmark = pytest.mark.integration

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "healthy-l40s"
BEHIND = [f"node-{n}" for n in range(10)]


@pytest.fixture(scope="module")
def strict_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    if not SSHD.exists():
        pytest.skip(f"{SSHD} is not installed (Debian package openssh-server)")
    hosts = {"bastion": None, **dict.fromkeys(BEHIND, RECORDED)}
    # sshd refuses every new connection while 3 are still unauthenticated (a slot of slack for a
    # session that is closing but not yet counted out)
    with Fleet(tmp_path_factory.mktemp("strict-fleet"), hosts, max_startups="3:100:3") as fleet:
        yield fleet


def sweep_behind_bastion(fleet: Fleet, gate: int) -> list[str]:
    ip, port = fleet.addresses["bastion"]
    options = fleet.options(jump_max_startups=gate)

    def one(name: str) -> str:
        spec = parse_host_spec(f"{fleet.spec(name)}?jump={fleet.user}@{ip}:{port}", fleet.ssh_config)
        transport = SSHTransport(spec, options)
        try:
            transport.connect()
            return "ok" if transport.run(["nvidia-smi", "-q"], timeout=10).ok else "command failed"
        except TransportError as exc:
            return str(exc)
        finally:
            transport.close()

    with ThreadPoolExecutor(max_workers=len(BEHIND)) as pool:
        return list(pool.map(one, BEHIND))


def test_gated_handshakes_all_get_through(strict_fleet: Fleet) -> None:
    assert sweep_behind_bastion(strict_fleet, gate=1) == ["ok"] * len(BEHIND)


def test_no_more_handshakes_in_flight_than_the_gate(strict_fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    in_flight, peak, lock = 0, 0, threading.Lock()
    original = SSHTransport._handshake

    def counting(self: SSHTransport, sock: object, known: object) -> object:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        try:
            time.sleep(0.05)  # widen the window in which overlapping handshakes would show
            return original(self, sock, known)
        finally:
            with lock:
                in_flight -= 1

    monkeypatch.setattr(SSHTransport, "_handshake", counting)
    assert sweep_behind_bastion(strict_fleet, gate=2) == ["ok"] * len(BEHIND)
    # each host's gate covers its own bastion handshake and its target's: at most 2 hosts x 1 at a time
    assert peak <= 2, peak
