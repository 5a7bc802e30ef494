"""A fleet of real OpenSSH servers on loopback that serve recorded host outputs.

Used by tests/ssh (pytest fixture in conftest.py) and by bench/sweep.py. Each host is a
loopback address 127.0.1.N served by a real ``/usr/sbin/sshd -D -e`` running as the current
user with its own host key, authorized_keys and known_hosts (one sshd per 16 addresses).
Commands on a host are stand-in scripts on sshd's ``SetEnv PATH``: ``nvidia-smi``,
``journalctl``, ``dmesg``, ``dcgmi`` ... read the server address from ``$SSH_CONNECTION``,
pick that host's recorded directory (docs/reference.md#recorded-hosts-and-bundles layout) and serve
``<kind>.out`` / ``<kind>.err`` / ``<kind>.rc``; ``<kind>.sleep`` (seconds) delays the answer,
``<kind>.timeout`` makes it hang, ``<kind>.bytes`` prints that many bytes of filler.
A ``default.*`` file answers every kind that has no file of its own.
InfiniBand ports are served as sysfs trees: a recorded ``ib-ports[.N].out`` in the collector's own
``<path>:<value>`` form becomes ``sysfs.N/class/infiniband/...`` files in the host's folder, and the ``sh``
stand-in runs the collector's real script with ``/sys/class/`` pointed at the next tree (reads cycle
through the trees, so a run's two reads a window apart see two trees); every other ``sh`` runs /bin/sh.

Usage::

    with Fleet(tmp_path, {"gpu-1": Path("fixtures/hosts/healthy"), "dead": Fault.REFUSED}) as fleet:
        transport = SSHTransport(parse_host_spec(fleet.spec("gpu-1")), fleet.options())
"""

from __future__ import annotations

import contextlib
import enum
import getpass
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

SSHD = Path("/usr/sbin/sshd")
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
# OpenSSH refuses more than this many ListenAddress lines per sshd (MAX_LISTEN_SOCKS).
MAX_ADDRESSES_PER_SSHD = 16
FLOOD_BYTES = 200 * 1024 * 1024
HANG_SECONDS = 3600
START_TIMEOUT = 10.0
# Which recorded kind a stand-in serves: (command, an argument glob that selects it or None, kind).
# First match wins; a command without a row serves the kind named like itself.
STANDIN_KINDS: tuple[tuple[str, str | None, str], ...] = (
    ("nvidia-smi", "nvlink", "nvlink"),
    ("nvidia-smi", "topo", "gpu-topology"),
    ("nvidia-smi", "--query-gpu*", "nvidia-smi-query"),
    ("nvidia-smi", None, "nvidia-smi"),
    ("journalctl", None, "kernel-log"),
    ("dmesg", None, "kernel-log"),
    ("dcgmi", "diag", "dcgmi-diag"),
    ("systemctl", "is-active", "fabric-manager"),
)
DEFAULT_STANDINS = ("nvidia-smi", "journalctl", "dmesg", "dcgmi", "systemctl", "sh")
_SYSFS_LINE = re.compile(r"^/sys/(?P<path>class/infiniband/[^:]+):(?P<value>.*)$")


class Fault(str, enum.Enum):
    """Hosts that fail in the ways real fleets do."""

    REFUSED = "refused"  # an address with nothing listening
    SILENT = "silent"  # accepts TCP, never sends an SSH banner
    BLACKHOLE = "blackhole"  # TCP connect never completes (accept queue full: SYNs are dropped)
    WRONG_HOST_KEY = "wrong-host-key"  # a real sshd, but known_hosts holds another key for it
    REJECTED_KEY = "rejected-key"  # a real sshd that refuses the client key on this address
    HANG = "hang"  # every command sleeps for an hour
    FLOOD = "flood"  # every command prints 200 MB

    @property
    def served(self) -> bool:
        """Whether a real sshd answers on this host's address."""
        return self not in (Fault.REFUSED, Fault.SILENT, Fault.BLACKHOLE)


HostSource = Path | str | Fault | None


class Fleet:
    """Start/stop a loopback fleet; see the module docstring."""

    def __init__(
        self,
        root: Path,
        hosts: Mapping[str, HostSource],
        *,
        user: str | None = None,
        first_address: int = 1,
        standins: Iterable[str] = DEFAULT_STANDINS,
        max_startups: str = "200:30:400",
        max_sessions: int = 10,
    ) -> None:
        self.root = Path(root) / "fleet"
        # A recording of an unreachable host (an `unreachable` file) gets nothing listening.
        self.hosts = {
            name: Fault.REFUSED if _recorded_unreachable(source) else source for name, source in hosts.items()
        }
        self.user = user or getpass.getuser()
        self.standins = tuple(dict.fromkeys(standins))
        self.max_startups = max_startups
        self.max_sessions = max_sessions
        self.addresses: dict[str, tuple[str, int]] = {}
        self._ips = {name: _loopback(first_address + i) for i, name in enumerate(self.hosts)}
        self._sshd: list[subprocess.Popen[bytes]] = []
        self._silent: list[_SilentListener] = []
        self.keys = self.root / "keys"
        self.known_hosts = self.root / "known_hosts"
        self.client_key = self.keys / "client_ed25519"
        self.ssh_config = self.root / "ssh_config"  # empty: tests never read ~/.ssh/config

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> Fleet:
        for sub in ("keys", "bin", "hosts", "run", "home"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.ssh_config.write_text("")
        _ensure_privsep_dir()
        for key in ("host_ed25519", "wrong_host_ed25519", "client_ed25519"):
            _keygen(self.keys / key)
        (self.root / "authorized_keys").write_text((self.keys / "client_ed25519.pub").read_text())
        self._write_standins()
        try:
            self._start_faults()
            served = [name for name in self.hosts if self.is_served(name)]
            for index, start in enumerate(range(0, len(served), MAX_ADDRESSES_PER_SSHD)):
                self._start_sshd(index, served[start : start + MAX_ADDRESSES_PER_SSHD])
            self._write_known_hosts()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for listener in self._silent:
            listener.close()
        self._silent.clear()
        for process in self._sshd:
            _stop_process_tree(process)
        self._sshd.clear()

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what tests use ------------------------------------------------------------

    def spec(self, name: str) -> str:
        ip, port = self.addresses[name]
        return f"ssh://{self.user}@{ip}:{port}"

    @property
    def sshd_count(self) -> int:
        return len(self._sshd)

    def host_dir(self, name: str) -> Path:
        """This host's served directory (a copy of the recording; safe to write into)."""
        return self.root / "hosts" / self._ips[name]

    def set_output(
        self,
        name: str,
        kind: str,
        *,
        out: str | bytes | None = None,
        err: str | None = None,
        rc: int | None = None,
        sleep: float | None = None,
    ) -> None:
        """Change what ``kind`` answers on one host (takes effect for the next command)."""
        folder = self.host_dir(name)
        for suffix, value in (("out", out), ("err", err), ("rc", rc), ("sleep", sleep)):
            if value is not None:
                data = value if isinstance(value, bytes) else str(value).encode()
                (folder / f"{kind}.{suffix}").write_bytes(data)

    def options(self, **overrides: Any) -> Any:
        """SSHOptions for this fleet: its known_hosts and key, nothing from ~/.ssh, short deadlines."""
        from nightowl.transports.ssh import SSHOptions

        settings: dict[str, Any] = {
            "known_hosts": self.known_hosts,
            "ssh_config": self.ssh_config,
            "identity_files": (self.client_key,),
            "use_agent": False,
            "look_for_keys": False,
            "connect_timeout": 3.0,
            "banner_timeout": 3.0,
            "auth_timeout": 3.0,
        }
        settings.update(overrides)
        return SSHOptions(**settings)

    def write_inventory(self, path: Path, names: Iterable[str] | None = None) -> Path:
        """A nightowl YAML inventory of these hosts (names as keys, addresses from the fleet)."""
        lines = ["hosts:"]
        for name in names if names is not None else self.hosts:
            ip, port = self.addresses[name]
            lines.append(f"  - {{name: {name}, address: {ip}, port: {port}, user: {self.user}}}")
        path.write_text("\n".join(lines) + "\n")
        return path

    # -- internals -------------------------------------------------------------------

    def is_served(self, name: str) -> bool:
        """Whether a real sshd answers for this host (False for refused/silent/blackhole)."""
        fault = self._fault(name)
        return fault is None or fault.served

    def _fault(self, name: str) -> Fault | None:
        source = self.hosts[name]
        return source if isinstance(source, Fault) else None

    def _prepare_host_dir(self, name: str) -> None:
        folder = self.host_dir(name)
        shutil.rmtree(folder, ignore_errors=True)
        source = self.hosts[name]
        if isinstance(source, (str, Path)) and not isinstance(source, Fault):
            shutil.copytree(source, folder, copy_function=shutil.copyfile)  # writable copies
        else:
            folder.mkdir(parents=True)
        _write_sysfs_trees(folder)
        if source == Fault.HANG:
            (folder / "default.sleep").write_text(str(HANG_SECONDS))
        elif source == Fault.FLOOD:
            (folder / "default.bytes").write_text(str(FLOOD_BYTES))

    def _start_faults(self) -> None:
        for name in self.hosts:
            fault = self._fault(name)
            ip = self._ips[name]
            if fault == Fault.REFUSED:
                self.addresses[name] = (ip, _free_port([ip]))
            elif fault in (Fault.SILENT, Fault.BLACKHOLE):
                listener = _SilentListener(ip, blackhole=fault == Fault.BLACKHOLE)
                self._silent.append(listener)
                self.addresses[name] = (ip, listener.port)

    def _start_sshd(self, index: int, names: list[str]) -> None:
        for name in names:
            self._prepare_host_dir(name)
        ips = [self._ips[n] for n in names]
        for _attempt in range(5):
            port = _free_port(ips)
            config = self.root / "run" / f"sshd-{index}.conf"
            config.write_text(self._sshd_config(index, ips, port, names))
            log = self.root / "run" / f"sshd-{index}.log"
            with open(log, "wb") as log_file:
                process = subprocess.Popen(
                    [str(SSHD), "-D", "-e", "-f", str(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=log_file,
                    start_new_session=True,
                )
            if _wait_listening(process, [(ip, port) for ip in ips]) and b"Bind to port" not in log.read_bytes():
                self._sshd.append(process)
                for name in names:
                    self.addresses[name] = (self._ips[name], port)
                return
            _stop_process_tree(process)
            if process.returncode not in (None, 0, -signal.SIGTERM) and b"Bind to port" not in log.read_bytes():
                raise RuntimeError(f"sshd failed to start:\n{log.read_text(errors='replace')}")
        raise RuntimeError(f"sshd could not bind a free port on {ips}")

    def _sshd_config(self, index: int, ips: list[str], port: int, names: list[str]) -> str:
        path = f"{self.root / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        lines = [f"ListenAddress {ip}:{port}" for ip in ips] + [
            f"HostKey {self.keys / 'host_ed25519'}",
            f"PidFile {self.root / 'run' / f'sshd-{index}.pid'}",
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
            "UsePAM no",
            "StrictModes no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "PermitUserRC no",
            "PermitUserEnvironment no",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AllowAgentForwarding no",
            "AllowTcpForwarding yes",  # jump-host tests forward through fleet hosts
            # One sshd stands in for up to 16 hosts, so it gets 16 hosts' worth of startups.
            f"MaxStartups {self.max_startups}",
            f"MaxSessions {self.max_sessions}",
            "LogLevel INFO",
            # HOME points at an empty folder so the login shell reads no ~/.bashrc: a developer's
            # shell start-up (pyenv, conda...) neither slows every command nor rewrites PATH.
            f"SetEnv PATH={path} HOME={self.root / 'home'} NIGHTOWL_FLEET={self.root}",
        ]
        for name in names:
            if self._fault(name) == Fault.REJECTED_KEY:
                lines += [f"Match LocalAddress {self._ips[name]}", "    AuthorizedKeysFile none"]
        return "\n".join(lines) + "\n"

    def _write_known_hosts(self) -> None:
        host_key = (self.keys / "host_ed25519.pub").read_text().split()
        wrong_key = (self.keys / "wrong_host_ed25519.pub").read_text().split()
        lines = []
        for name, (ip, port) in self.addresses.items():
            key_type, blob = wrong_key[:2] if self._fault(name) == Fault.WRONG_HOST_KEY else host_key[:2]
            lines.append(f"[{ip}]:{port} {key_type} {blob}")
        self.known_hosts.write_text("\n".join(lines) + "\n")

    def _write_standins(self) -> None:
        script = self.root / "bin" / ".standin"
        script.write_text(_standin_script(self.root / "hosts"))
        script.chmod(0o755)
        for name in self.standins:
            link = self.root / "bin" / name
            if not link.exists():
                link.symlink_to(".standin")


def _write_sysfs_trees(folder: Path) -> None:
    """Each recorded ``ib-ports[.N].out`` sysfs dump -> a tree ``sysfs.N/class/infiniband/...`` of one-line files."""
    dumps = sorted(folder.glob("ib-ports.[0-9].out")) or sorted(folder.glob("ib-ports.out"))
    for take, dump in enumerate(dumps, start=1):
        lines = [m for line in dump.read_text().splitlines() if (m := _SYSFS_LINE.match(line))]
        if not lines:
            continue  # ibstat output: served as recorded by no stand-in (sh finds no tree)
        for match in lines:
            path = folder / f"sysfs.{take}" / match.group("path")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(match.group("value") + "\n")


def kind_cases(commands: Iterable[str] | None = None) -> str:
    """The sh loop of a stand-in that sets ``kind`` from STANDIN_KINDS (the command's name, or the first
    argument matching its glob), for ``commands`` (every command when None); ``break 2`` leaves it."""
    cases: dict[str, list[str]] = {}
    for command, arg_glob, kind in STANDIN_KINDS:
        if commands is not None and command not in commands:
            continue
        if arg_glob is None:
            cases.setdefault(command, []).append(f"kind={kind}")
        else:
            cases.setdefault(command, []).append(
                f'for a in "$@"; do case "$a" in {arg_glob}) kind={kind}; break 2 ;; esac; done'
            )
    body = "\n".join(
        f"  {command})\n    " + "\n    ".join(steps[:-1] + [steps[-1] + " ;;"]) for command, steps in cases.items()
    )
    return f'while :; do\ncase "$name" in\n{body}\nesac\nbreak\ndone'


def _standin_script(hosts_dir: Path) -> str:
    """POSIX sh (no python start-up per command): pick kind, host dir, then serve the files."""
    pick_kind = kind_cases()
    return f"""#!/bin/sh
# Stand-in written by tests/ssh/fleet.py: serves this host's recorded output for one kind.
hosts_dir='{hosts_dir}'
name=${{0##*/}}
kind=$name
if [ "$name" = sh ]; then
  # The ib-ports collector's script, run on this host's sysfs trees; any other shell command is /bin/sh.
  case "$2" in *"/sys/class/infiniband/"*) ;; *) exec /bin/sh "$@" ;; esac
  conn=$SSH_CONNECTION; server=${{conn#* * }}; dir="$hosts_dir/${{server%% *}}"
  trees=0; while [ -d "$dir/sysfs.$((trees + 1))" ]; do trees=$((trees + 1)); done
  [ "$trees" -gt 0 ] || exec /bin/sh "$@"
  taken=0; [ -e "$dir/.ib-ports.taken" ] && read -r taken < "$dir/.ib-ports.taken"
  echo $((taken + 1)) > "$dir/.ib-ports.taken"
  tree="$dir/sysfs.$((taken % trees + 1))"
  script=$(printf '%s' "$2" | sed "s#/sys/class/#$tree/class/#g")
  exec /bin/sh -c "$script" "$3"
fi
{pick_kind}
conn=$SSH_CONNECTION
server=${{conn#* * }}
server_ip=${{server%% *}}
dir="$hosts_dir/$server_ip"
if [ ! -d "$dir" ]; then echo "nightowl fleet: no recorded host at $server_ip" >&2; exit 127; fi
base="$dir/$kind"
found=
for suffix in out err rc sleep bytes timeout; do [ -e "$base.$suffix" ] && found=1; done
[ -n "$found" ] || base="$dir/default"
secs=
if [ -e "$base.timeout" ]; then secs={HANG_SECONDS}
elif [ -e "$base.sleep" ]; then read -r secs < "$base.sleep"; fi
case "$secs" in
  '') ;;
  *[!0-9]*) sleep "$secs" ;;
  *) i=0
     # Sleep in steps and stop once the sshd session that started us is gone.
     while [ "$i" -lt "$secs" ]; do sleep 1; kill -0 "$PPID" 2>/dev/null || exit 143; i=$((i + 1)); done ;;
esac
[ -e "$base.err" ] && /bin/cat "$base.err" >&2
if [ -e "$base.bytes" ]; then
  read -r count < "$base.bytes"
  yes 'nightowl fleet filler line: the same words again and again' | head -c "$count"
elif [ -e "$base.out" ]; then
  /bin/cat "$base.out"
elif [ ! -e "$base.rc" ]; then
  echo "nightowl fleet: $server_ip has no recording for $kind" >&2; exit 127
fi
if [ -e "$base.rc" ]; then read -r rc < "$base.rc"; exit "$rc"; fi
exit 0
"""


class _SilentListener:
    """Accepts TCP connections and never says a word (a hung daemon, a firewall tarpit).

    As a black hole it never accepts: one connection fills its zero-length accept queue,
    after which Linux drops every SYN, so a client's TCP connect times out.
    """

    def __init__(self, ip: str, blackhole: bool = False) -> None:
        self.sock = socket.create_server((ip, 0), backlog=0 if blackhole else 64)
        self.port: int = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self._stopped = threading.Event()
        if blackhole:
            self.conns.append(socket.create_connection((ip, self.port), timeout=2))
        self._thread = threading.Thread(target=self._serve, args=(blackhole,), name=f"silent-{ip}", daemon=True)
        self._thread.start()

    def _serve(self, blackhole: bool) -> None:
        while not self._stopped.is_set():
            if blackhole:
                self._stopped.wait(0.2)
                continue
            ready, _, _ = select.select([self.sock], [], [], 0.2)
            if ready:
                conn, _ = self.sock.accept()
                self.conns.append(conn)

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=2)
        for conn in [*self.conns, self.sock]:
            conn.close()


def _recorded_unreachable(source: HostSource) -> bool:
    if source is None or isinstance(source, Fault):
        return False
    return (Path(source) / "unreachable").exists()


def _loopback(n: int) -> str:
    """127.0.1.1, 127.0.1.2, ... 127.0.1.254, 127.0.2.1 ..."""
    if not 0 < n <= 254 * 254:
        raise ValueError(f"host index {n} out of the loopback range")
    return f"127.0.{1 + (n - 1) // 254}.{1 + (n - 1) % 254}"


def _free_port(ips: list[str]) -> int:
    """A port free on every address (checked by binding; sshd binds right after)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((ips[0], 0))
            port: int = probe.getsockname()[1]
        if all(_can_bind(ip, port) for ip in ips):
            return port
    raise RuntimeError(f"no common free port on {ips}")


def _can_bind(ip: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((ip, port))
        except OSError:
            return False
    return True


def _wait_listening(process: subprocess.Popen[bytes], addresses: list[tuple[str, int]]) -> bool:
    """Listening on every address, read from /proc: a probe connection would count against sshd's
    MaxStartups until sshd reaps it, and make a strict fleet drop the test's first connections."""
    from tests.fleet.daemons import listening_addresses

    deadline = time.monotonic() + START_TIMEOUT
    wanted = {f"{ip}:{port}" for ip, port in addresses}
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if wanted <= set(listening_addresses(process.pid)):
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def _keygen(path: Path) -> None:
    if not path.exists():
        subprocess.run(
            [
                SSH_KEYGEN,
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                f"nightowl-fleet-{path.name}",
                "-f",
                str(path),
            ],
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )


def _ensure_privsep_dir() -> None:
    """sshd started as root insists on its privilege-separation directory (Debian: /run/sshd)."""
    if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)


def _stop_process_tree(process: subprocess.Popen[bytes]) -> None:
    """Stop one sshd and the per-connection children it forked (they outlive a SIGTERM'd parent)."""
    import psutil

    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        children = []
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
