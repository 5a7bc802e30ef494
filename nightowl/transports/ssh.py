"""SSH transport on paramiko: one connection per host, one channel per command.

Why it looks the way it does (issues listed in docs/sources.md#ssh-fan-out):

* Host keys follow OpenSSH, never paramiko's AutoAdd/Warning policies (st2#6386,
  fabric#2071): ``strict`` refuses a host whose key is not in known_hosts, ``accept-new``
  appends an unknown key (under a lock), and a *changed* or revoked key always fails.
* Every step has a deadline (parallel-ssh#133, testinfra#716, pyinfra PR #1679,
  asyncssh#260): TCP connect, SSH banner and key exchange, authentication (also through a
  jump host, since we dial the direct-tcpip channel ourselves), and each command.
* One connection per host, channels capped below sshd's ``MaxSessions`` (asyncssh#779).
* argv is quoted with ``shlex.join`` for the remote shell, so no inventory, alert or
  runbook value can reach that shell unquoted.

paramiko is imported inside functions: ``nightowl --help`` must not pay for it.
The known_hosts reader is in ``known_hosts``.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import select
import shlex
import socket
import struct
import termios
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nightowl.transports.base import REMOTE_TIMEOUT_EXITS, CommandResult, TransportError, late_note
from nightowl.transports.capped import CappedOutput, cut_extra
from nightowl.transports.hostspec import HostSpec, known_hosts_name
from nightowl.transports.known_hosts import KnownHosts
from nightowl.transports.ssh_config import FileVersion, file_version

if TYPE_CHECKING:
    import paramiko


HostKeyPolicy = Literal["strict", "accept-new"]
# The reason a host is unreachable: TransportError messages start with one of these.
REASONS = ("refused", "timed out", "auth failed", "host key mismatch", "unknown host key", "dns", "ssh error")
# OpenSSH's default identities, tried when no IdentityFile is configured (ssh(1) -i).
DEFAULT_IDENTITIES = ("id_ed25519", "id_ecdsa", "id_rsa")
# known_hosts stores RSA keys as "ssh-rsa"; these are the signature algorithms that verify them.
RSA_HOSTKEY_ALGORITHMS = ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")
READ_CHUNK = 65536
IDLE_WAKE_SECONDS = 5.0  # how often a kept connection's reader thread looks up while idle (``keep_alive``)
# The host's own `timeout` ends a command at the collector's timeout (rounded up to a whole second) and
# SIGKILLs it KILL_AFTER seconds later; nightowl's own deadline comes REPORT_SLACK seconds after that, so a
# command that really hangs is always reported by the host first (exit 124/137). A deadline that passes
# with nothing from the host is "no answer": the request may never have run, and it is no hang.
KILL_AFTER = 2
REPORT_SLACK = 4.0
# After nightowl's deadline, how long an answer that had arrived unread (nightowl was behind) is read on.
REMOTE_TIMEOUT_SLACK = 4.0


def client_seconds(timeout: float, remote_timeout: bool = True) -> float:
    """nightowl's own deadline for a command whose host-side limit is ``timeout`` (see KILL_AFTER)."""
    if not remote_timeout or timeout <= 0:
        return max(0.0, timeout)
    return math.ceil(timeout) + KILL_AFTER + REPORT_SLACK


@dataclass(frozen=True)
class SSHOptions:
    """How to reach hosts; shared by every SSHTransport of a run."""

    known_hosts: Path | None = None  # None: ~/.ssh/known_hosts
    # Read too (never written), as ssh's GlobalKnownHostsFile: where CA-signed fleets keep @cert-authority.
    global_known_hosts: Path | None = Path("/etc/ssh/ssh_known_hosts")
    ssh_config: Path | None = None  # None: ~/.ssh/config (used by hostspec, not here)
    host_key_policy: HostKeyPolicy = "strict"
    connect_timeout: float = 10.0
    banner_timeout: float = 10.0  # SSH banner, and again for the key exchange
    auth_timeout: float = 10.0
    output_cap_bytes: int = 8 * 1024 * 1024
    identity_files: tuple[Path, ...] = ()
    use_agent: bool = True
    look_for_keys: bool = True  # ~/.ssh/id_* when no identity file is configured, as ssh does
    max_sessions: int = 8  # concurrent channels per connection; sshd's MaxSessions default is 10
    # Wrap each command in coreutils `timeout`: sshd ignores signal requests for root sessions, so
    # closing the channel alone would leave a hung nvidia-smi running on the node.
    remote_timeout: bool = True
    # Handshakes in flight through one jump host at once: sshd refuses connections past MaxStartups
    # (default 10:30:100) while they are unauthenticated, so a wide sweep behind a bastion must queue.
    jump_max_startups: int = 8

    def known_hosts_path(self) -> Path:
        return self.known_hosts if self.known_hosts is not None else Path.home() / ".ssh" / "known_hosts"


# cache: one gate per jump host name, made on first use; the same host always gets the same gate.
_JUMP_GATES: dict[str, threading.BoundedSemaphore] = {}
_JUMP_GATES_LOCK = threading.Lock()


def _jump_gate(jump: HostSpec, size: int) -> threading.BoundedSemaphore:
    """One gate per jump host for the whole process, shared by every host behind it."""
    key = f"{jump.login_user()}@{jump.hostname}:{jump.port}"
    with _JUMP_GATES_LOCK:
        return _JUMP_GATES.setdefault(key, threading.BoundedSemaphore(max(1, size)))


class SSHConnectError(TransportError):
    """A host could not be reached; ``str(error)`` is ``"<reason>: <detail>"``."""

    def __init__(self, reason: str, detail: str) -> None:
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# ---------------------------------------------------------------------------- transport


class SSHTransport:
    """Transport over one SSH connection (optionally through jump hosts)."""

    def __init__(
        self, spec: HostSpec, options: SSHOptions | None = None, dial: Callable[[], socket.socket | None] | None = None
    ) -> None:
        """``dial``, when given, hands over the TCP connection a sweep opened ahead (transports/dial.py);
        it returns None when it has none, and the transport then connects by itself."""
        if spec.is_local:
            raise ValueError("SSHTransport cannot reach 'local'; use the local transport")
        self.spec = spec
        self.host = spec.name
        self.options = options or SSHOptions()
        self._dial = dial
        self._transport: paramiko.Transport | None = None
        self._jump: SSHTransport | None = None
        self._agent: Any = None
        self._sessions = threading.BoundedSemaphore(max(1, self.options.max_sessions))
        self._lock = threading.Lock()

    # -- connection ---------------------------------------------------------------

    def connect(self) -> None:
        gate = _jump_gate(self.spec.jump, self.options.jump_max_startups) if self.spec.jump else None
        with self._lock, gate or contextlib.nullcontext():
            if self._transport is not None and self._transport.is_active():
                return
            sock = self._open_socket()
            try:
                known = self._known_hosts()
                transport = self._handshake(sock, known)
                self._transport = transport
                self._verify_host_key(transport, known)
                self._authenticate(transport)
            except BaseException:
                self._close_locked()
                with contextlib.suppress(Exception):  # best effort after a failure
                    sock.close()
                raise

    def _open_socket(self) -> Any:
        if self.spec.jump is not None:
            return self._open_via_jump(self.spec.jump)
        target = f"{self.spec.hostname}:{self.spec.port}"
        timeout = self.options.connect_timeout
        try:
            dialed = self._dial() if self._dial is not None else None
            if dialed is not None:
                return dialed
            infos = socket.getaddrinfo(self.spec.hostname, self.spec.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise SSHConnectError("dns", f"cannot resolve {self.spec.hostname!r}: {exc.strerror}") from None
        except (UnicodeError, ValueError) as exc:  # IDNA: an empty or over-long label
            raise SSHConnectError("dns", f"cannot resolve {self.spec.hostname!r}: {exc}") from None
        except OSError as exc:  # the dial ahead failed: refused, timed out, unreachable
            raise _socket_error(exc, target, timeout) from None
        errors: list[OSError] = []
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sock.settimeout(timeout)
            try:
                sock.connect(address)
                return sock
            except OSError as exc:
                sock.close()
                errors.append(exc)
        raise _socket_error(errors[-1] if errors else OSError("no address"), target, timeout)

    def _open_via_jump(self, jump: HostSpec) -> Any:
        from nightowl.transports.paramiko_import import paramiko

        self._jump = SSHTransport(jump, self.options)
        try:
            self._jump.connect()
        except SSHConnectError as exc:
            raise SSHConnectError(exc.reason, f"jump host {jump.describe()}: {exc.detail}") from None
        assert self._jump._transport is not None
        target = (self.spec.hostname, self.spec.port)
        where = f"{self.spec.hostname}:{self.spec.port} via {jump.describe()}"
        try:
            return self._jump._transport.open_channel(
                "direct-tcpip", target, ("127.0.0.1", 0), timeout=self.options.connect_timeout
            )
        except paramiko.ChannelException as exc:
            # paramiko keeps only the code: 2 is OPEN_CONNECT_FAILED (RFC 4254 5.1), the jump host
            # could not open TCP to the target (refused, unreachable or not resolvable from there).
            reason = "refused" if exc.code == 2 else "ssh error"
            raise SSHConnectError(reason, f"{where}: jump host says: {exc.text} (code {exc.code})") from None
        except paramiko.SSHException as exc:
            reason = "timed out" if "timeout" in str(exc).lower() else "ssh error"
            raise SSHConnectError(reason, f"{where}: {exc}") from None

    def _handshake(self, sock: Any, known: KnownHosts) -> paramiko.Transport:
        from nightowl.transports.paramiko_import import paramiko

        where = self.spec.describe()
        _quiet_paramiko_logs()
        transport = paramiko.Transport(sock)
        transport.banner_timeout = self.options.banner_timeout
        transport.handshake_timeout = self.options.banner_timeout
        transport.auth_timeout = self.options.auth_timeout
        self._prefer_known_key_types(transport, known)
        _prefer_aead_ciphers(transport)
        limit = self.options.banner_timeout
        try:
            # start_client returns quietly when its timeout passes; host_key tells us kex finished.
            transport.start_client(timeout=2 * limit)
            if transport.host_key is None:
                raise TimeoutError
        except (paramiko.SSHException, TimeoutError) as exc:
            transport.close()
            if _caused_by_timeout(exc):
                step = "key exchange" if transport.remote_version else "SSH banner"
                raise SSHConnectError("timed out", f"{where}: no {step} within {limit:g}s") from None
            raise SSHConnectError("ssh error", f"{where}: handshake failed: {exc or type(exc).__name__}") from None
        except (EOFError, OSError) as exc:
            transport.close()
            raise SSHConnectError("ssh error", f"{where}: connection closed during handshake ({exc!r})") from None
        return transport

    def _known_hosts(self) -> KnownHosts:
        also = (self.options.global_known_hosts,) if self.options.global_known_hosts else ()
        return KnownHosts.load(self.options.known_hosts_path(), also)

    def _host_key_name(self) -> str:
        return known_hosts_name(self.spec.hostname, self.spec.port)

    def _prefer_known_key_types(self, transport: paramiko.Transport, known: KnownHosts) -> None:
        """Ask for the key types known_hosts holds first, as OpenSSH does."""
        from nightowl.transports.host_certs import CERT_HOSTKEY_ALGORITHMS

        preferred: list[str] = []
        if known.trusts_a_ca_for(self._host_key_name()):
            preferred += CERT_HOSTKEY_ALGORITHMS  # a CA-signed fleet: ask for the certificate first
        for key_type in known.known_types(self._host_key_name()):
            preferred += RSA_HOSTKEY_ALGORITHMS if key_type == "ssh-rsa" else [key_type]
        options = transport.get_security_options()
        available = list(options.key_types)
        # paramiko offers certificate types only after every plain one (Transport.preferred_keys), so a
        # server holding both would never show its certificate: name them explicitly, first.
        certificates = [k for k in CERT_HOSTKEY_ALGORITHMS if k in transport._key_info]
        first = [k for k in dict.fromkeys(preferred) if k in available or k in certificates]
        if first:
            options.key_types = first + [k for k in available if k not in first]

    def _verify_host_key(self, transport: paramiko.Transport, known: KnownHosts) -> None:
        from nightowl.transports.host_certs import CERT_SUFFIX

        key = transport.get_remote_server_key()
        name = self._host_key_name()
        certificate = None
        if str(transport.host_key_type).endswith(CERT_SUFFIX) and key.public_blob is not None:
            certificate = key.public_blob.key_blob
        revoked_file = getattr(self.spec, "revoked_host_keys", None)
        if revoked_file is not None:
            from nightowl.transports.host_certs import read_revoked_keys

            try:
                why = read_revoked_keys(revoked_file).why(key.asbytes(), certificate)
            except (OSError, ValueError) as exc:  # as ssh: an unreadable revocation list accepts no key
                raise SSHConnectError(
                    "host key mismatch", f"cannot read RevokedHostKeys {revoked_file}: {exc}"
                ) from None
            if why:
                raise SSHConnectError("host key mismatch", f"{why} by RevokedHostKeys {revoked_file}")
        verdict, detail = known.verdict(name, key.get_name(), key.asbytes(), certificate, self.spec.hostname)
        if verdict == "ok":
            return
        if verdict == "mismatch":
            raise SSHConnectError("host key mismatch", detail)
        if self.options.host_key_policy != "accept-new":
            raise SSHConnectError("unknown host key", f"{detail} (strict host key checking)")
        known.append(name, key.get_name(), key.get_base64())

    def _authenticate(self, transport: paramiko.Transport) -> None:
        from nightowl.transports.paramiko_import import paramiko

        user = self.spec.login_user()
        where = self.spec.describe()
        identities, notes = self._identities()
        tried: list[str] = []
        for label, key in identities:
            tried.append(label)
            try:
                transport.auth_publickey(user, key)
            except paramiko.AuthenticationException as exc:
                if "timeout" in str(exc).lower():
                    raise SSHConnectError(
                        "timed out", f"{where}: authentication took over {self.options.auth_timeout:g}s"
                    ) from None
                continue
            except (paramiko.SSHException, EOFError, OSError) as exc:
                notes.append(f"server closed authentication: {exc}")
                break
            if transport.is_authenticated():
                return
        detail = f"tried {', '.join(tried)}" if tried else "no usable key (no identity file, agent empty)"
        extra = f"; {'; '.join(notes)}" if notes else ""
        raise SSHConnectError("auth failed", f"{where}: server refused publickey for {user!r}: {detail}{extra}")

    def _identities(self) -> tuple[list[tuple[str, Any]], list[str]]:
        """Keys to offer, in order: the host's identity, configured ones, agent, defaults."""
        from nightowl.transports.paramiko_import import paramiko

        paths = [p for p in (self.spec.identity_file, *self.options.identity_files) if p is not None]
        if not paths and self.options.look_for_keys:
            ssh_dir = Path.home() / ".ssh"
            paths = [ssh_dir / n for n in DEFAULT_IDENTITIES if (ssh_dir / n).is_file()]
        keys: list[tuple[str, Any]] = []
        notes: list[str] = []
        for path in dict.fromkeys(Path(os.path.expanduser(str(p))) for p in paths):
            try:
                keys.append((str(path), _load_key(str(path))))
            except paramiko.PasswordRequiredException:
                notes.append(f"{path} needs a passphrase (load it into ssh-agent)")
            except (OSError, paramiko.SSHException, ValueError) as exc:
                notes.append(f"cannot load {path}: {exc}")
        if self.options.use_agent and os.environ.get("SSH_AUTH_SOCK"):
            try:
                self._agent = self._agent or paramiko.Agent()
                keys += [(f"agent key {k.get_name()}", k) for k in self._agent.get_keys()]
            except (paramiko.SSHException, OSError) as exc:
                notes.append(f"ssh-agent unusable: {exc}")
        return keys, notes

    # -- commands -------------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        """Run one argv on the shared connection; never raises for a failing command."""
        argv = tuple(str(arg) for arg in argv)
        started, clock = time.time(), time.monotonic()
        deadline = clock + client_seconds(timeout, self.options.remote_timeout)
        command = remote_command(argv, timeout if self.options.remote_timeout else 0)
        extra = {"remote_command": command}

        def fail(error: str, timed_out: bool = False) -> CommandResult:
            return CommandResult(argv, None, "", "", started, time.monotonic() - clock, timed_out, error, extra=extra)

        if not argv:
            return fail("empty argv")
        transport = self._transport
        if transport is None or not transport.is_active():
            return fail("not connected" if transport is None else f"connection lost: {_lost(transport)}")
        if not self._sessions.acquire(timeout=max(0.0, deadline - time.monotonic())):
            # nightowl's own limit on sessions: the command never started, which says nothing of the host
            late = f"no answer: no free SSH session within {timeout:g}s (nightowl's own limit), the command never ran"
            return CommandResult(
                argv, None, "", "", started, time.monotonic() - clock, error=late, extra=extra, late=late
            )
        try:
            return self._run_channel(transport, command, argv, started, clock, deadline, timeout, extra)
        finally:
            self._sessions.release()

    def run_batch(
        self, commands: Sequence[tuple[Sequence[str], float]], lanes: Sequence[int] = ()
    ) -> dict[tuple[str, ...], CommandResult]:
        """Several (argv, timeout) in one session, under the host's own ``timeout`` of the longest limit (an
        answer counts only from a session no longer than its command's limit); the answers it got
        (transports/batch.py: what is missing runs alone, under its own limit). ``lanes``: how many of the
        commands, in order, each lane runs side by side (none: one after the other)."""
        from nightowl.transports.batch import new_nonce, results, script

        if not self.options.remote_timeout or not commands:  # the host's `timeout` limits the batch: none, no batch
            return {}
        argvs = [tuple(str(arg) for arg in argv) for argv, _ in commands]
        timeouts = [timeout for _, timeout in commands]
        lines = [_batched_line(argv, t) for argv, t in zip(argvs, timeouts, strict=True)]
        nonce = new_nonce()
        session = self.run(("sh", "-c", script(lines, nonce, lanes)), max(timeouts))
        return results(argvs, lines, timeouts, session, nonce)

    def _run_channel(
        self,
        transport: paramiko.Transport,
        command: str,
        argv: tuple[str, ...],
        started: float,
        clock: float,
        deadline: float,
        timeout: float,
        extra: dict[str, str],
    ) -> CommandResult:
        out = CappedOutput(self.options.output_cap_bytes)
        err = CappedOutput(self.options.output_cap_bytes)
        error: str | None = None
        timed_out = False
        late: str | None = None
        channel = None
        try:
            channel = _open_session(transport, deadline)
            channel.exec_command(command)
            if not _pump(channel, out, err, deadline):
                late, timed_out = _judge_deadline(channel, out, err, timeout, self.options.remote_timeout)
            elif self.options.remote_timeout and timeout > 0 and channel.exit_status in REMOTE_TIMEOUT_EXITS:
                timed_out = True  # the host's own timeout ended it: the command ran long on the host
        except Exception as exc:  # noqa: BLE001 - a failing command must become a result
            error = f"ssh error: {type(exc).__name__}: {exc}"
        rc: int | None = None
        if timed_out:
            _kill_remote(channel)
            error = f"timed out after {timeout:g}s" + _remote_timeout_note(channel)
        elif channel is not None and error is None:
            rc = channel.exit_status if channel.exit_status_ready() and channel.exit_status >= 0 else None
            if rc is None and late is None:
                error = (
                    f"connection lost: {_lost(transport)}"
                    if not transport.is_active()
                    else "no exit status (the command was killed by a signal?)"
                )
        if channel is not None:
            _close_channel(channel)
        stdout, dropped, cut_at = out.text()
        stderr, err_dropped, _ = err.text()
        extra.update(cut_extra(cut_at, err_dropped))
        return CommandResult(
            argv=argv,
            rc=rc,
            stdout=stdout,
            stderr=stderr,
            started=started,
            duration=time.monotonic() - clock,
            timed_out=timed_out,
            error=error,
            stdout_truncated_bytes=dropped,
            extra=extra,
            late=late,
        )

    def alive(self) -> bool:
        """Whether the connection is still open as far as this end knows (a repeated sweep keeps it between
        rounds: transports/kept.py, which also retries a command that finds it gone)."""
        transport = self._transport
        return transport is not None and transport.is_active()

    def keep_alive(self, seconds: float) -> None:
        """Send SSH keepalives after ``seconds`` idle (a kept connection: its NAT entry stays, a dead peer ends it),
        and let its reader thread sleep ``IDLE_WAKE_SECONDS`` between looks while no packet comes."""
        transport = self._transport
        if transport is not None:
            transport.set_keepalive(max(1, int(seconds)))
            # paramiko's reader wakes every 0.1 s to see whether it was closed or owes a keepalive: about 1 ms of CPU
            # a second per idle connection here (bench/kept_idle.py), a core at 1,000 between a sweep's rounds. Data
            # wakes it at once whatever this is; close() does not wait for it (paramiko Transport.stop_thread); a
            # keepalive goes at most this much late.
            with contextlib.suppress(OSError, AttributeError):
                transport.sock.settimeout(IDLE_WAKE_SECONDS)

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._jump is not None:
            self._jump.close()
            self._jump = None
        if self._agent is not None:
            self._agent.close()
            self._agent = None

    def __enter__(self) -> SSHTransport:
        self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# AES-GCM first (OpenSSH has offered it since 6.2; a server without it negotiates the next one): its tag is
# checked in C, while paramiko's CTR + HMAC compares each packet's MAC byte by byte in Python. A real-size
# node's 2.5 MB arrive in ~150 packets: 40 -> 32 ms of client CPU per host in paramiko's reading thread.
AEAD_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _prefer_aead_ciphers(transport: Any) -> None:
    options = transport.get_security_options()
    offered = list(options.ciphers)
    first = [c for c in AEAD_CIPHERS if c in offered]
    if first:
        options.ciphers = first + [c for c in offered if c not in first]


def _load_key(path: str) -> Any:
    """A private key file, parsed once per version of the file (a sweep offers it to every host)."""
    return _parsed_key(file_version(Path(path)))


@lru_cache(maxsize=64)
def _parsed_key(version: FileVersion) -> Any:
    from nightowl.transports.paramiko_import import paramiko

    return paramiko.PKey.from_path(version[0])


def remote_command(argv: Sequence[str], timeout: float) -> str:
    """The command line sent to the host: with a timeout, wrapped in coreutils ``timeout`` so that the
    host ends the command itself (at the collector's timeout, SIGKILL KILL_AFTER seconds later) before
    nightowl's own deadline (``client_seconds``), and even if the connection drops; 0 sends the argv as it is."""
    wrapped = tuple(argv)
    if timeout > 0:
        wrapped = ("timeout", "-k", str(KILL_AFTER), str(math.ceil(timeout)), *wrapped)
    return shlex.join(wrapped)


@lru_cache(maxsize=4096)
def _batched_line(argv: tuple[str, ...], timeout: float) -> str:
    """A command's line in a batch (transports/batch.py ``command_line``). A repeating sweep asks each host the
    same reads every round: quoting them again was a sixth of a batch's send (0.1 to 0.15 ms a host)."""
    from nightowl.transports.batch import command_line

    return command_line(argv, remote_command(argv, timeout))


def _open_session(transport: Any, deadline: float) -> Any:
    """Open a session channel, retrying while sshd still counts sessions we just closed.

    sshd frees a session slot only after it processes our CLOSE (and, for a timed-out
    command, only once that command exits), so a full ``MaxSessions`` is usually transient.
    """
    from nightowl.transports.paramiko_import import paramiko

    pause = 0.02
    while True:
        try:
            return transport.open_session(timeout=max(0.1, deadline - time.monotonic()))
        except paramiko.SSHException:
            # ChannelException, or the bare "Unable to open channel." a concurrent opener gets
            # when another thread consumed the transport-wide saved exception first.
            if not transport.is_active() or time.monotonic() + pause >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


def _pump(channel: Any, out: CappedOutput, err: CappedOutput, deadline: float) -> bool:
    """Read both streams until EOF and exit status; False when the deadline passed first.

    The deadline is looked at before each read: what had arrived unread by then is judged by
    ``_judge_deadline`` (nightowl was behind), never taken as an answer read in time."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        _drain(channel, out, err)
        if channel.eof_received or channel.closed:
            done = channel.status_event.wait(max(0.0, deadline - time.monotonic()))
            _drain(channel, out, err)
            return done
        # Channel.fileno() is a pipe paramiko sets on data, on stderr data and on EOF.
        _wait_readable(channel, max(0.0, min(deadline - time.monotonic(), 1.0)))


def _wait_readable(channel: Any, timeout: float) -> None:
    """One wait for output (a seam: a test holds the reader back here as a saturated process would be)."""
    select.select([channel], [], [], timeout)


def _judge_deadline(
    channel: Any, out: CappedOutput, err: CappedOutput, timeout: float, remote_timeout: bool
) -> tuple[str | None, bool]:
    """(late note, timed out) once nightowl's deadline passed with the command unfinished in its eyes.

    The host ran long when nothing it sent is waiting unread, or when its own ``timeout`` ended the
    command (exit 124/137). nightowl was behind when the exit status or output had arrived unread: it
    reads on until the host's own timeout would have fired, to count what the host sent."""
    read_by_deadline = out.total + err.total
    if not channel.exit_status_ready() and not _pending(channel):
        if remote_timeout and timeout > 0:
            # the host's own timeout would have reported by now: nothing came back at all
            return no_answer(read_by_deadline, client_seconds(timeout)), False
        return None, True
    grace_end = time.monotonic() + REMOTE_TIMEOUT_SLACK
    finished = _pump(channel, out, err, grace_end)
    if finished and remote_timeout and channel.exit_status in REMOTE_TIMEOUT_EXITS:
        return None, True
    if not finished and not _pending(channel):
        return None, True
    return late_note(read_by_deadline, out.total + err.total, timeout, more=not finished), False


def no_answer(read: int, seconds: float) -> str:
    """Why a command nightowl's deadline cut, with the host's own timeout silent, says nothing of the host."""
    return (
        f"no answer from the host in {seconds:.1f} s ({read} bytes, no exit status): nightowl's deadline, not the"
        " host's own timeout, which never reported (the connection or nightowl was stalled, or the request never ran)"
    )


def _pending(channel: Any) -> bool:
    """Whether the host's answer is waiting on nightowl: an exit status, output paramiko holds unread, or
    bytes in the connection's socket paramiko has not read yet (its thread was starved too)."""
    if channel.exit_status_ready() or channel.recv_ready() or channel.recv_stderr_ready():
        return True
    sock = getattr(channel.transport, "sock", None)
    if not isinstance(sock, socket.socket):
        return False  # through a jump host the socket is a channel of another connection
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0] > 0
    except OSError:
        return False


def _remote_timeout_note(channel: Any) -> str:
    if channel is not None and channel.exit_status_ready() and channel.exit_status in REMOTE_TIMEOUT_EXITS:
        return f" (ended by the host's own timeout: exit {channel.exit_status})"
    return ""


def _close_channel(channel: Any) -> None:
    """Close a command's channel; a connection that dropped meanwhile (EOFError from paramiko's writer, as
    a saturated sshd does) leaves the result as it is instead of escaping as an internal error."""
    with contextlib.suppress(EOFError, OSError, Exception):
        channel.close()


def _drain(channel: Any, out: CappedOutput, err: CappedOutput) -> None:
    while channel.recv_ready():
        out.add(channel.recv(READ_CHUNK))
    while channel.recv_stderr_ready():
        err.add(channel.recv_stderr(READ_CHUNK))


def _kill_remote(channel: Any) -> None:
    """Ask sshd to SIGKILL the command's process group (RFC 4254 6.9 "signal" request).

    paramiko has no public call for it; OpenSSH honours it since 7.9. Closing the channel
    alone leaves a non-tty command running on the host.
    """
    if channel is None or channel.closed:
        return
    try:
        from nightowl.transports.paramiko_import import paramiko

        message = paramiko.Message()
        message.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
        message.add_int(channel.remote_chanid)
        message.add_string("signal")
        message.add_boolean(False)
        message.add_string("KILL")
        channel.transport._send_user_message(message)
    except Exception:  # noqa: BLE001, S110 - best effort: the channel is closed next anyway
        pass


@lru_cache(maxsize=1)
def _quiet_paramiko_logs() -> None:
    """paramiko logs every failed handshake with a traceback; the reason string says it better.

    A NullHandler only stops Python's last-resort stderr printing; an application that
    configures logging still receives paramiko's records.
    """
    import logging

    logging.getLogger("paramiko").addHandler(logging.NullHandler())


def _lost(transport: Any) -> str:
    exc = transport.get_exception() if transport is not None else None
    return f"{type(exc).__name__}: {exc}" if exc is not None else "the server closed the connection"


def _caused_by_timeout(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, (TimeoutError, socket.timeout)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _socket_error(exc: OSError, target: str, timeout: float) -> SSHConnectError:
    if isinstance(exc, ConnectionRefusedError):
        return SSHConnectError("refused", f"{target}: connection refused (nothing listens on that port)")
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return SSHConnectError("timed out", f"{target}: no TCP connection within {timeout:g}s")
    return SSHConnectError("ssh error", f"{target}: cannot connect: {exc}")
