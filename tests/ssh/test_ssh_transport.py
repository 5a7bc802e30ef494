"""SSHTransport against real OpenSSH servers (the fleet in conftest.py)."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest

from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHConnectError, SSHTransport
from tests.ssh.conftest import HEALTHY_COPIES, RECORDED
from tests.ssh.fleet import FLOOD_BYTES, SSHD, Fault, Fleet

# Starts real sshd processes: `pytest -m "not integration"` leaves it out.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)"),
]

NVSMI = ("nvidia-smi", "-q")
KERNEL_LOG = ("journalctl", "-k", "--no-pager")


def open_host(fleet: Fleet, name: str, spec: str | None = None, **options: Any) -> SSHTransport:
    host = parse_host_spec(spec or fleet.spec(name), fleet.ssh_config)
    return SSHTransport(host, fleet.options(**options))


def connect_error(fleet: Fleet, name: str, **options: Any) -> tuple[SSHConnectError, float]:
    transport = open_host(fleet, name, **options)
    started = time.monotonic()
    with pytest.raises(SSHConnectError) as caught:
        transport.connect()
    transport.close()
    return caught.value, time.monotonic() - started


# ---------------------------------------------------------------------------- a fleet at once


def test_fleet_needs_several_sshd_for_its_hosts(fleet: Fleet) -> None:
    served = [name for name in fleet.hosts if fleet.is_served(name)]
    assert len(served) > 16
    assert fleet.sshd_count == 2


def test_many_hosts_at_once_serve_their_recorded_outputs(fleet: Fleet) -> None:
    names = ["healthy", "xid79", *(f"gpu-{n:02d}" for n in range(1, HEALTHY_COPIES + 1))]

    def check(name: str) -> tuple[str, str, str, int | None, int | None]:
        with open_host(fleet, name) as transport:
            smi = transport.run(NVSMI, timeout=10, kind="nvidia-smi")
            log = transport.run(KERNEL_LOG, timeout=10, kind="kernel-log")
        return name, smi.stdout, log.stdout, smi.rc, log.rc

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        results = list(pool.map(check, names))
    for name, smi_out, log_out, smi_rc, log_rc in results:
        recorded = RECORDED / ("xid79-fallen-off-bus" if name == "xid79" else "healthy-l40s")
        assert (smi_rc, log_rc) == (0, 0), name
        assert smi_out == (recorded / "nvidia-smi.out").read_text(), name
        assert log_out == (recorded / "kernel-log.out").read_text(), name


def test_rc_stderr_and_invalid_utf8(fleet: Fleet) -> None:
    fleet.set_output("gpu-01", "dcgmi-diag", out=b"ok \xff\xfe bytes\n", err="diag failed\n", rc=226)
    with open_host(fleet, "gpu-01") as transport:
        result = transport.run(["dcgmi", "diag", "-r", "1"], timeout=10, kind="dcgmi-diag")
    assert result.rc == 226
    assert not result.ok and result.error is None and not result.timed_out
    assert result.stdout == "ok \ufffd\ufffd bytes\n"
    assert result.stderr == "diag failed\n"
    assert result.argv == ("dcgmi", "diag", "-r", "1")
    assert result.duration < 5


def test_one_connection_carries_concurrent_commands_beyond_max_sessions(fleet: Fleet) -> None:
    """24 commands from 24 threads on one connection; sshd allows 10 sessions, we use 8."""
    fleet.set_output("gpu-02", "nvidia-smi", sleep=0.2)
    ip, port = fleet.addresses["gpu-02"]
    with open_host(fleet, "gpu-02") as transport:
        with ThreadPoolExecutor(max_workers=24) as pool:
            results = list(pool.map(lambda _: transport.run(NVSMI, timeout=15), range(24)))
        links = [c for c in _tcp_connections(psutil.Process()) if c.raddr and tuple(c.raddr) == (ip, port)]
    (fleet.host_dir("gpu-02") / "nvidia-smi.sleep").unlink()
    assert [r.rc for r in results] == [0] * 24, [r.error for r in results if r.rc != 0]
    assert len({r.stdout for r in results}) == 1
    assert len(links) == 1


def test_jump_host_reaches_a_host_behind_it(fleet: Fleet) -> None:
    bastion_ip, bastion_port = fleet.addresses["bastion"]
    spec = f"{fleet.spec('behind-bastion')}?jump={fleet.user}@{bastion_ip}:{bastion_port}"
    with open_host(fleet, "behind-bastion", spec=spec) as transport:
        result = transport.run(["nvidia-smi"], timeout=10)
    assert result.rc == 0
    assert result.stdout == (RECORDED / "gpu-unreadable" / "nvidia-smi.out").read_text()


def test_jump_host_failures_keep_their_reason(fleet: Fleet) -> None:
    bastion_ip, bastion_port = fleet.addresses["bastion"]
    refused_ip, refused_port = fleet.addresses["refused"]
    behind_refused = f"ssh://{fleet.user}@{refused_ip}:{refused_port}?jump={bastion_ip}:{bastion_port}"
    transport = open_host(fleet, "refused", spec=behind_refused)
    with pytest.raises(SSHConnectError, match=r"^refused: .* via .*jump host says: Connect failed"):
        transport.connect()
    via_dead_jump = f"{fleet.spec('healthy')}?jump={refused_ip}:{refused_port}"
    transport = open_host(fleet, "healthy", spec=via_dead_jump)
    with pytest.raises(SSHConnectError, match=r"^refused: jump host "):
        transport.connect()


# ---------------------------------------------------------------------------- fault hosts


@pytest.mark.parametrize(
    ("name", "reason", "deadline"),
    [
        ("refused", "refused", 1.0),
        ("recorded-unreachable", "refused", 1.0),
        ("silent", "timed out", 2.5),  # banner_timeout=1.5 below
        ("blackhole", "timed out", 2.0),  # connect_timeout=1.0 below
        ("wrong-host-key", "host key mismatch", 2.0),
        ("rejected-key", "auth failed", 2.0),
    ],
)
def test_fault_host_gives_its_reason_within_its_deadline(fleet: Fleet, name: str, reason: str, deadline: float) -> None:
    error, took = connect_error(fleet, name, banner_timeout=1.5, connect_timeout=1.0)
    assert error.reason == reason
    assert str(error).startswith(f"{reason}: ")
    assert took < deadline, f"{name}: {took:.2f}s"


def test_unknown_dns_name_is_reported_as_dns(fleet: Fleet) -> None:
    transport = SSHTransport(parse_host_spec("ssh://root@no-such-host.invalid:22", fleet.ssh_config), fleet.options())
    with pytest.raises(SSHConnectError, match="^dns: "):
        transport.connect()


def test_command_that_never_returns_times_out_and_the_connection_survives(fleet: Fleet) -> None:
    with open_host(fleet, "hang") as transport:
        result = transport.run(NVSMI, timeout=1.0, kind="nvidia-smi")
        assert result.timed_out and result.rc is None
        assert result.error == "timed out after 1s (ended by the host's own timeout: exit 124)"
        assert 1.0 <= result.duration < 2.0
        after = transport.run(["printf", "%s", "still here"], timeout=5)
    assert after.rc == 0 and after.stdout == "still here"


def test_recorded_timeout_hangs_only_that_collector(fleet: Fleet) -> None:
    with open_host(fleet, "nvsmi-hung") as transport:
        smi = transport.run(NVSMI, timeout=0.8)
        log = transport.run(KERNEL_LOG, timeout=5)
    assert smi.timed_out and smi.rc is None
    assert log.rc == 0 and log.stdout == (RECORDED / "nvidia-smi-hung" / "kernel-log.out").read_text()


def test_200_mb_of_output_is_capped_and_counted(fleet: Fleet) -> None:
    cap = 1024 * 1024
    with open_host(fleet, "flood", output_cap_bytes=cap) as transport:
        result = transport.run(NVSMI, timeout=30)
    assert result.rc == 0 and not result.timed_out
    kept = len(result.stdout.encode())
    assert cap - 200 < kept <= cap  # cut on line boundaries: whole lines of head and tail
    assert result.stdout_truncated_bytes == FLOOD_BYTES - kept
    assert result.stdout.startswith("nightowl fleet filler line")
    # the tail is kept: the flood's last bytes (head -c cuts its last line short) are the output's last
    assert result.stdout.endswith(
        ("nightowl fleet filler line: the same words again and again\n" * 99)[: FLOOD_BYTES % 59]
    )


def test_dropped_connection_gives_a_result_not_an_exception(fleet: Fleet) -> None:
    transport = open_host(fleet, "hang")
    transport.connect()
    local = transport._transport.sock.getsockname()  # type: ignore[union-attr]
    killer = threading.Timer(0.5, _kill_sshd_serving, args=(local,))
    killer.start()
    result = transport.run(NVSMI, timeout=10)
    killer.join()
    transport.close()
    assert result.rc is None and not result.timed_out
    assert result.error is not None and result.error.startswith(("connection lost", "no exit status"))
    assert result.duration < 5


def _kill_sshd_serving(local: tuple[str, int]) -> None:
    """Kill the per-connection sshd child whose peer is our socket (a host that crashed)."""
    for process in psutil.process_iter(["name"]):
        if process.info["name"] != "sshd":
            continue
        try:
            if any(c.raddr and tuple(c.raddr) == tuple(local) for c in _tcp_connections(process)):
                process.kill()
        except psutil.Error:
            continue


def _tcp_connections(process: psutil.Process) -> list[Any]:
    """psutil >= 6 renamed connections() to net_connections()."""
    method = getattr(process, "net_connections", None) or process.connections
    return list(method("tcp"))


def test_run_before_connect_is_a_result(fleet: Fleet) -> None:
    result = open_host(fleet, "healthy").run(NVSMI, timeout=1)
    assert result.rc is None and result.error == "not connected"


# ---------------------------------------------------------------------------- quoting


def test_argv_reaches_the_remote_command_literally(fleet: Fleet, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = [
        f"; touch {marker}",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"a && touch {marker} || b",
        'it\'s "quoted" \\ and $HOME and * and ~',
        "line\nbreak",
        "",
    ]
    with open_host(fleet, "healthy") as transport:
        result = transport.run(["printf", "%s\\0", *hostile], timeout=5)
    assert result.rc == 0
    assert result.stdout.split("\0")[:-1] == hostile
    assert not marker.exists()


def test_the_remote_command_is_the_quoted_argv_under_a_timeout(fleet: Fleet) -> None:
    """sudo is never added by the transport: a collector declares `sudo -n --` in its argv."""
    with open_host(fleet, "healthy") as transport:
        result = transport.run(["dmesg", "-T"], timeout=5)
    assert result.extra["remote_command"] == "timeout -k 2 5 dmesg -T"
    assert result.rc == 0


# ---------------------------------------------------------------------------- host keys


def _known_hosts_copy(fleet: Fleet, tmp_path: Path, keep: str | None = None) -> Path:
    ip, port = fleet.addresses[keep] if keep else ("", 0)
    lines = [line for line in fleet.known_hosts.read_text().splitlines() if keep and line.startswith(f"[{ip}]:{port} ")]
    path = tmp_path / "known_hosts"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_strict_refuses_an_unknown_host_and_writes_nothing(fleet: Fleet, tmp_path: Path) -> None:
    known = _known_hosts_copy(fleet, tmp_path)
    error, _ = connect_error(fleet, "healthy", known_hosts=known)
    assert error.reason == "unknown host key"
    assert known.read_text() == ""


def test_accept_new_records_the_key_then_strict_accepts_it(fleet: Fleet, tmp_path: Path) -> None:
    known = tmp_path / "sub" / "known_hosts"  # missing folder and file, as on a fresh machine
    with open_host(fleet, "healthy", known_hosts=known, host_key_policy="accept-new") as transport:
        assert transport.run(["true"], timeout=5).rc == 0
    ip, port = fleet.addresses["healthy"]
    assert known.read_text().startswith(f"[{ip}]:{port} ssh-ed25519 ")
    with open_host(fleet, "healthy", known_hosts=known) as transport:
        assert transport.run(["true"], timeout=5).rc == 0
    assert len(known.read_text().splitlines()) == 1


def test_accept_new_still_refuses_a_changed_key(fleet: Fleet) -> None:
    before = fleet.known_hosts.read_text()
    error, _ = connect_error(fleet, "wrong-host-key", host_key_policy="accept-new")
    assert error.reason == "host key mismatch"
    assert fleet.known_hosts.read_text() == before


def test_hashed_known_hosts_entries_are_understood(fleet: Fleet, tmp_path: Path) -> None:
    from paramiko.hostkeys import HostKeys

    line = _known_hosts_copy(fleet, tmp_path, keep="healthy").read_text().split()
    hashed = tmp_path / "hashed"
    hashed.write_text(f"{HostKeys.hash_host(line[0])} {line[1]} {line[2]}\n")
    with open_host(fleet, "healthy", known_hosts=hashed) as transport:
        assert transport.run(["true"], timeout=5).rc == 0


def test_revoked_key_is_refused(fleet: Fleet, tmp_path: Path) -> None:
    line = _known_hosts_copy(fleet, tmp_path, keep="healthy").read_text()
    revoked = tmp_path / "revoked"
    revoked.write_text(f"{line}@revoked * {' '.join(line.split()[1:3])}\n")
    error, _ = connect_error(fleet, "healthy", known_hosts=revoked)
    assert error.reason == "host key mismatch" and "revoked" in str(error)


# ---------------------------------------------------------------------------- no leftovers


def test_stopping_a_fleet_leaves_no_process_behind(tmp_path: Path) -> None:
    with Fleet(tmp_path, {"stuck": Fault.HANG}, first_address=200) as small:
        with open_host(small, "stuck") as transport:
            assert transport.run(NVSMI, timeout=0.5).timed_out
        root = str(small.root)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        left = [p for p in psutil.process_iter(["cmdline"]) if any(root in a for a in p.info["cmdline"] or ())]
        if not left:
            break
        time.sleep(0.1)
    assert not left, [p.info["cmdline"] for p in left]
    with socket.socket() as probe:  # the sshd port is free again: no listener (SO_REUSEADDR lets a bind past the
        # TIME_WAIT of the connection sshd closed, never past a socket still listening there)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(small.addresses["stuck"])


def test_inventory_written_by_the_fleet_reaches_its_hosts(fleet: Fleet, tmp_path: Path) -> None:
    from nightowl.fleet.inventory import limit, load_inventory

    inventory = fleet.write_inventory(tmp_path / "fleet.yaml", ["xid79", "gpu-03", "refused"])
    hosts = load_inventory(inventory, fleet.ssh_config)
    assert [h.name for h in hosts] == ["xid79", "gpu-03", "refused"]
    (xid79,) = limit(hosts, "xid*")
    with SSHTransport(xid79, fleet.options()) as transport:
        result = transport.run(KERNEL_LOG, timeout=5)
    assert result.stdout == (RECORDED / "xid79-fallen-off-bus" / "kernel-log.out").read_text()
    with pytest.raises(SSHConnectError, match="^refused: "):
        SSHTransport(hosts[2], fleet.options()).connect()


def test_timed_out_command_is_killed_on_the_host_too(fleet: Fleet, tmp_path: Path) -> None:
    """sshd ignores signals for root sessions; the remote `timeout` wrapper ends the command."""
    marker = f"nightowl-hang-{tmp_path.name}"
    with open_host(fleet, "healthy") as transport:
        result = transport.run(["sh", "-c", f"sleep 30; : {marker}"], timeout=1)
    assert result.timed_out
    import subprocess
    import time

    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        ps = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        if ps.returncode != 0:
            return
        time.sleep(0.2)
    raise AssertionError("the remote command outlived its deadline")
