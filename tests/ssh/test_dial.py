"""The sweep's dialer (nightowl/transports/dial.py) against real sshd processes and dead addresses.

It must start the hosts that answered first, hand each its own open connection once, give a failed
host the same unreachable reason a transport connecting by itself would, never hold more open
connections than its window, and leave nothing open behind.
"""

from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.engine.session import _each_once, start_workers
from nightowl.transports.dial import Dialer
from nightowl.transports.hostspec import HostSpec
from nightowl.transports.ssh import SSHConnectError, SSHOptions, SSHTransport
from tests.ssh.fleet import Fleet

# Starts real sshd processes: `pytest -m "not integration"` leaves it out.
pytestmark = pytest.mark.integration


def targets(fleet: Fleet, names: list[str]) -> dict[str, tuple[str, int]]:
    return {name: fleet.addresses[name] for name in names}


def test_live_hosts_come_first_and_each_dead_one_fails_as_it_would_alone(fleet: Fleet) -> None:
    names = ["refused", "healthy", "blackhole", "gpu-01", "silent", "gpu-02"]
    dialer = Dialer({**targets(fleet, names), "bad": ("a..b", 22)}, timeout=1.0)
    order = list(dialer.start_order(["local-one", *names, "bad"]))
    assert order[0] == "local-one"  # not a target: started at once, as given
    assert sorted(order) == sorted(["local-one", *names, "bad"])  # each name once
    assert set(order[1:5]) == {"healthy", "gpu-01", "gpu-02", "silent"}  # TCP opened (silent: no banner later)
    assert set(order[-3:]) == {"refused", "blackhole", "bad"}  # the failed ones, last
    options = SSHOptions(known_hosts=fleet.known_hosts, identity_files=(fleet.client_key,), connect_timeout=1.0)
    reasons = {}
    for name in ["refused", "blackhole", "bad"]:
        ip, port = targets(fleet, [name])[name] if name != "bad" else ("a..b", 22)
        alone = SSHTransport(HostSpec(name, ip, port, user=fleet.user), options)
        dialed = SSHTransport(HostSpec(name, ip, port, user=fleet.user), options, dial=dialer.taker(name))
        with pytest.raises(SSHConnectError) as by_dialer:
            dialed.connect()
        with pytest.raises(SSHConnectError) as by_itself:
            alone.connect()
        reasons[name] = by_dialer.value.reason
        assert (by_dialer.value.reason, by_dialer.value.detail) == (by_itself.value.reason, by_itself.value.detail)
    assert reasons == {"refused": "refused", "blackhole": "timed out", "bad": "dns"}
    ip, port = fleet.addresses["healthy"]
    transport = SSHTransport(HostSpec("healthy", ip, port, user=fleet.user), options, dial=dialer.taker("healthy"))
    with transport:
        assert transport.run(["nvidia-smi", "-L"], timeout=10).ok
    assert dialer.take("healthy") is None  # handed over once
    dialer.close()


def test_the_window_bounds_open_connections_no_worker_took(fleet: Fleet) -> None:
    names = [f"gpu-{n:02d}" for n in range(1, 11)]
    dialer = Dialer(targets(fleet, names), timeout=2.0, window=3)
    most = 0
    taken: list[socket.socket] = []

    def take_later(name: str) -> None:
        sock = dialer.take(name)
        assert sock is not None
        taken.append(sock)

    timers = []
    for name in dialer.start_order(names):
        most = max(most, len(dialer._ready))
        timer = threading.Timer(0.02, take_later, args=(name,))  # workers take their sockets a little later
        timer.start()
        timers.append(timer)
    for timer in timers:
        timer.join()
    assert most <= 3
    assert len(taken) == 10 and all(sock.getpeername() for sock in taken)
    for sock in taken:
        sock.close()


def test_close_leaves_no_connection_open(fleet: Fleet) -> None:
    names = ["healthy", "gpu-01", "gpu-02"]
    dialer = Dialer(targets(fleet, names), timeout=2.0)
    first = next(dialer.start_order(names))
    held = dict(dialer._ready)
    assert first in held
    dialer.close()
    assert not dialer._ready and all(sock.fileno() == -1 for sock in held.values())


def test_start_workers_starts_every_thread_before_any_host() -> None:
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="host-test")
    start_workers(pool, 8)
    assert len([t for t in threading.enumerate() if t.name.startswith("host-test")]) == 8
    pool.shutdown()
    assert list(_each_once(iter(["c", "x", "a", "c"]), ["a", "b", "c"])) == ["c", "a", "b"]
    assert list(_each_once(None, ["a", "b"])) == ["a", "b"]


def test_a_sweep_of_mostly_dead_hosts_keeps_inventory_order_and_every_reason(fleet: Fleet, tmp_path: Path) -> None:
    names = ["refused", "healthy", "blackhole", "xid79", "silent", "gpu-03"]
    inventory = fleet.write_inventory(tmp_path / "hosts.yaml", names)
    args = ["sweep", "--inventory", str(inventory), "--known-hosts", str(fleet.known_hosts)]
    args += ["--ssh-config", str(fleet.ssh_config), "--identity", str(fleet.client_key), "--connect-timeout", "2"]
    args += ["--format", "json", "--out", str(tmp_path / "bundles")]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    hosts = json.loads(result.stdout)["hosts"]
    assert [h["host"] for h in hosts] == names
    by_name = {h["host"]: h for h in hosts}
    assert by_name["refused"]["error"].startswith("refused")
    assert by_name["blackhole"]["error"].startswith("timed out")
    assert by_name["silent"]["error"].startswith("timed out")
    assert by_name["xid79"]["verdict"]["id"] == "gpu-fell-off-bus"
    assert by_name["healthy"]["verdict"]["id"] == by_name["gpu-03"]["verdict"]["id"] == "healthy"
