"""Host specs: what a user writes to name a host, turned into where and how to reach it.

Accepted forms (testinfra-style URLs, OpenSSH-style short forms):

* ``local``: this machine, no SSH at all;
* ``ssh://user@gpu-17:2222?jump=bastion&identity=~/.ssh/fleet&profile=h100``;
* ``user@host:port``, ``user@host``, ``host:port``, ``[::1]:22``, ``host``.

Every form is looked up in an OpenSSH client config (``~/.ssh/config`` or the file given),
as ``ssh`` itself does: ``HostName``, ``User``, ``Port``, ``IdentityFile`` and ``ProxyJump``
fill in what the spec does not say; what the spec says wins. The config is read by
``nightowl.transports.ssh_config`` (indexed by host name: thousands of blocks cost one read).
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from nightowl.hostnames import SPACE_OR_CONTROL, host_name_problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from nightowl.transports.ssh_config import SSHConfig

DEFAULT_SSH_PORT = 22
LOCAL_NAMES = frozenset({"local"})
# Jump chains longer than this are almost certainly a ProxyJump loop in the config.
MAX_JUMP_DEPTH = 8
# URL query keys a spec may carry, and the HostSpec field each fills.
URL_QUERY_KEYS = {
    "jump": "jump",
    "identity": "identity_file",
    "identity_file": "identity_file",
    "profile": "profile",
}

_USER_RE = re.compile(r"^(?!-)[^\s@:/\x00-\x1f\x7f]+$")


@dataclass(frozen=True)
class HostSpec:
    """One host, resolved: enough to open a connection, plus inventory metadata.

    ``name`` is the spec as the user or inventory wrote it (reports key on it);
    ``hostname`` is what is actually dialled. ``groups`` holds Ansible-style group
    membership, which ``inventory.limit`` matches as ``group=NAME``.
    """

    name: str
    hostname: str
    port: int = DEFAULT_SSH_PORT
    user: str | None = None
    jump: HostSpec | None = None
    identity_file: Path | None = None
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    profile: str | None = None
    kind: Literal["ssh", "local"] = "ssh"
    groups: tuple[str, ...] = ()
    problem: str | None = None  # an inventory entry that names no host it can reach: why (file:line)
    revoked_host_keys: Path | None = None  # ssh_config RevokedHostKeys: a KRL or a list of revoked keys
    # failure domains the inventory puts the host in ({"rack": "r07"}): nightowl/fleet/domains.py
    domains: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def address(self) -> str:
        """``host:port`` as OpenSSH's known_hosts writes it (``[host]:port`` off port 22)."""
        return known_hosts_name(self.hostname, self.port)

    def login_user(self) -> str:
        return self.user or getpass.getuser()

    def describe(self) -> str:
        """``user@host:port via jump`` for messages."""
        text = f"{self.login_user()}@{self.hostname}:{self.port}"
        return f"{text} via {self.jump.describe()}" if self.jump else text


def known_hosts_name(hostname: str, port: int) -> str:
    return hostname if port == DEFAULT_SSH_PORT else f"[{hostname}]:{port}"


def local_spec(name: str = "local") -> HostSpec:
    return HostSpec(name=name, hostname="localhost", port=0, kind="local")


def parse_host_spec(text: str, ssh_config: Path | None = None) -> HostSpec:
    """Parse one host spec; raise ValueError saying what is wrong with it."""
    return _parse(text, _Settings(ssh_config), depth=0)


def host_spec_parser(ssh_config: Path | None = None) -> Callable[[str], HostSpec]:
    """``parse_host_spec`` for many specs (an inventory) against one ssh config: its files are found
    and checked once, on the first spec that needs them, instead of once per host and jump host."""
    settings = _Settings(ssh_config)
    return lambda text: _parse(text, settings, depth=0)


def written_host(text: str) -> str:
    """The host a spec names, as written (``ssh://root@gpu-02:2222?jump=bastion`` -> ``gpu-02``).

    What an inventory entry is called when it gives no name of its own: a label for tables,
    textfiles and bundle folders, not a connection string. Raises ValueError for a malformed spec."""
    written = text.strip()
    if written.lower() in LOCAL_NAMES:
        return written
    host = str((_split_url(written) if "://" in written else _split_short(written))["host"])
    _check_host(host, written)
    return host


def _parse(text: str, settings: _Settings, depth: int) -> HostSpec:
    if not isinstance(text, str):
        raise ValueError(f"host spec must be text, got {type(text).__name__}")
    written = text.strip()
    if not written:
        raise ValueError("empty host spec")
    if SPACE_OR_CONTROL.search(written):
        raise ValueError(f"host spec {written!r} contains whitespace or control characters")
    if written.lower() in LOCAL_NAMES:
        return local_spec(written)
    if depth > MAX_JUMP_DEPTH:
        raise ValueError(f"jump host chain deeper than {MAX_JUMP_DEPTH} at {written!r} (a ProxyJump loop?)")
    parts = _split_url(written) if "://" in written else _split_short(written)
    return _resolve(written, parts, settings, depth)


def _split_url(written: str) -> dict[str, Any]:
    try:
        url = urlsplit(written)
        port = url.port
    except ValueError as exc:
        raise ValueError(f"host spec {written!r}: {exc}") from None
    if url.scheme.lower() != "ssh":
        raise ValueError(f"host spec {written!r}: unsupported scheme {url.scheme!r} (use ssh:// or 'local')")
    if url.path not in ("", "/") or url.fragment:
        raise ValueError(f"host spec {written!r}: unexpected path or fragment after the host")
    if url.password is not None:
        raise ValueError(f"host spec {written!r}: passwords in host specs are not supported (use keys)")
    if not url.hostname:
        raise ValueError(f"host spec {written!r}: no host name")
    parts: dict[str, Any] = {
        "host": _bracketless(url.netloc.rpartition("@")[2], url.hostname),
        "user": unquote(url.username) if url.username else None,
        "port": port,
    }
    for key, values in parse_qs(url.query, keep_blank_values=True, strict_parsing=False).items():
        if key not in URL_QUERY_KEYS:
            allowed = ", ".join(sorted(URL_QUERY_KEYS))
            raise ValueError(f"host spec {written!r}: unknown option {key!r} (allowed: {allowed})")
        if len(values) != 1 or not values[0]:
            raise ValueError(f"host spec {written!r}: option {key!r} needs exactly one value")
        parts[URL_QUERY_KEYS[key]] = values[0]
    return parts


def _bracketless(netloc_host: str, parsed_host: str) -> str:
    """Keep the host's case (urlsplit lowercases it) but drop IPv6 brackets."""
    host = netloc_host
    if host.startswith("["):
        return host[1 : host.index("]")] if "]" in host else parsed_host
    return host.rpartition(":")[0] if ":" in host else host


def _split_short(written: str) -> dict[str, Any]:
    user, at, rest = written.rpartition("@")
    if at and not user:
        raise ValueError(f"host spec {written!r}: empty user name before '@'")
    host, port = rest, None
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise ValueError(f"host spec {written!r}: unclosed '[' around an IPv6 address")
        host, tail = rest[1:close], rest[close + 1 :]
        if tail:
            if not tail.startswith(":"):
                raise ValueError(f"host spec {written!r}: unexpected {tail!r} after ']'")
            port = _port(tail[1:], written)
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
        port = _port(port_text, written)
    # Two or more colons without brackets: a bare IPv6 address, no port.
    return {"host": host, "user": user or None, "port": port}


def _port(text: str, written: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"host spec {written!r}: port {text!r} is not a number from 1 to 65535")
    return int(text)


def _resolve(written: str, parts: dict[str, Any], settings: _Settings, depth: int) -> HostSpec:
    alias = parts["host"]
    _check_host(alias, written)
    config = settings.lookup(alias)
    hostname = config.get("hostname") or alias
    if hostname != alias:  # the alias was just checked
        _check_host(hostname, written)
    user = parts.get("user") or config.get("user")
    if user is not None and not _USER_RE.match(user):
        raise ValueError(f"host spec {written!r}: invalid user name {user!r}")
    port = parts.get("port") or _config_port(config, written)
    identity = parts.get("identity_file") or _first_identity(config)
    jump_text = parts.get("jump") or config.get("proxyjump")
    return HostSpec(
        name=written,
        hostname=hostname,
        port=port,
        user=user,
        jump=_jump(jump_text, settings, depth, written),
        identity_file=Path(os.path.expanduser(identity)) if identity else None,
        profile=parts.get("profile"),
        revoked_host_keys=_revoked_host_keys(config),
    )


def _revoked_host_keys(config: dict[str, Any]) -> Path | None:
    """ssh_config(5) RevokedHostKeys: one file (``none`` switches it off)."""
    value = config.get("revokedhostkeys")
    value = value[0] if isinstance(value, list) and value else value
    if not value or str(value).lower() == "none":
        return None
    return Path(os.path.expanduser(str(value)))


def _check_host(host: str, written: str) -> None:
    """What any host name must be (nightowl/hostnames.py), and no more: a spec's host is a name to
    look up in ssh_config (an alias may hold '_' or end with a dot) or an address to dial."""
    problem = host_name_problem(host)
    if problem is not None:
        raise ValueError(f"host spec {written!r}: invalid host name {host!r} ({problem})")


def _config_port(config: dict[str, Any], written: str) -> int:
    value = config.get("port")
    return _port(str(value), f"{written} (ssh config Port)") if value else DEFAULT_SSH_PORT


def _first_identity(config: dict[str, Any]) -> str | None:
    files = config.get("identityfile") or []
    return files[0] if files else None


def _jump(text: str | None, settings: _Settings, depth: int, written: str) -> HostSpec | None:
    """ProxyJump ``a,b`` means: reach ``a``, then ``b`` through it, then the target through ``b``."""
    if not text or text.lower() == "none":
        return None
    previous: HostSpec | None = None
    for hop_text in text.split(","):
        try:
            hop = _parse(hop_text, settings, depth + 1)
        except ValueError as exc:
            raise ValueError(f"host spec {written!r}: jump host: {exc}") from None
        if hop.is_local:
            raise ValueError(f"host spec {written!r}: 'local' cannot be a jump host")
        previous = replace(hop, jump=previous) if previous is not None and hop.jump is None else hop
    return previous


class _Settings:
    """ssh's settings per alias from one ssh config (nightowl/transports/ssh_config.py: indexed,
    Include and system file). The files are found and their versions checked on the first lookup
    only; a failure is not remembered, so it is raised again, naming the alias asked for."""

    def __init__(self, ssh_config: Path | None) -> None:
        self.ssh_config = ssh_config
        self.config: SSHConfig | None = None
        self.found = False  # the files were found (and config is None when there are none)

    def lookup(self, alias: str) -> dict[str, Any]:
        from nightowl.transports.ssh_config import SSHConfigError, cached, config_files

        try:
            if not self.found:
                files = config_files(self.ssh_config)
                self.config = cached(files) if files else None
                self.found = True
            return self.config.lookup(alias) if self.config is not None else {}
        except SSHConfigError as exc:
            raise ValueError(str(exc)) from None
        except OSError as exc:
            raise ValueError(f"ssh config: cannot look up {alias!r}: {exc}") from None
