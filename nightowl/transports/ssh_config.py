"""OpenSSH client config (ssh_config(5)), read once and looked up in time that does not grow with the file.

A fleet's ``~/.ssh/config`` often holds one ``Host`` block per node: thousands of blocks. Scanning
every block for every host (what paramiko's ``SSHConfig.lookup`` does) makes resolving an inventory
quadratic. Here the blocks whose patterns are all literal names are indexed by name; only blocks with
wildcards, negations or ``Match`` are tried on every lookup. The candidates are visited in file order,
so OpenSSH's rules hold: for each keyword the first value obtained wins; ``IdentityFile`` (and the other
list keywords) accumulate.

Honoured as ssh does: ``Include`` (globs; relative paths from ~/.ssh for the user's file, /etc/ssh for
the system's; inside a ``Host`` block it includes conditionally), the system-wide /etc/ssh/ssh_config
after the user's file (only when no file is given, as ``ssh -F`` skips it), ``Host`` patterns with
``*``, ``?`` and ``!``, ``Match all`` / ``Match host`` / ``Match originalhost``, ``%h``/``%%``/``%d``/``%u``
in ``HostName`` and ``IdentityFile``. Other ``Match`` criteria (exec, user, localuser ...) never match
here, so their settings are not applied.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

SYSTEM_CONFIG = Path("/etc/ssh/ssh_config")
# Keywords whose values accumulate across blocks instead of first-wins (ssh_config(5)).
LIST_KEYWORDS = frozenset(
    {"identityfile", "certificatefile", "localforward", "remoteforward", "dynamicforward", "sendenv", "setenv"}
)
MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
# Files one load may read, Include'd ones counted each time: a file that includes a glob of ten files,
# each including it again, would otherwise cost 10^16 reads within the depth limit, and no connect or
# host timeout bounds the time spent here.
MAX_CONFIG_READS = 1000


class SSHConfigError(ValueError):
    """A config line ssh itself would refuse; the message names the file and line."""


@dataclass
class _Block:
    """Settings that apply when every condition holds (an enclosing Host for an Include, then its own)."""

    conditions: tuple[tuple[str, tuple[str, ...]], ...]  # (kind, patterns): kind "host" or "never"
    options: list[tuple[str, str]] = field(default_factory=list)

    def literal_names(self) -> tuple[str, ...] | None:
        """The names this block can only match, or None when it has to be tried for every host."""
        if len(self.conditions) != 1 or self.conditions[0][0] != "host":
            return None
        patterns = self.conditions[0][1]
        if any(p.startswith("!") or "*" in p or "?" in p for p in patterns):
            return None
        return patterns

    def matches(self, alias: str) -> bool:
        return all(kind == "host" and _match_patterns(alias, patterns) for kind, patterns in self.conditions)


@dataclass
class SSHConfig:
    """Blocks in file order plus an index from literal host name to the blocks that name it."""

    blocks: list[_Block] = field(default_factory=list)
    by_name: dict[str, list[int]] = field(default_factory=dict)
    scanned: list[int] = field(default_factory=list)  # blocks tried on every lookup
    # What it was read from, to tell when it is out of date: every file (Include'd ones too) with its
    # version, and every Include pattern with the files it matched.
    read: list[FileVersion] = field(default_factory=list)
    globs: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def current(self) -> bool:
        """Whether every file it was read from is as it was, and every Include matches the same files."""
        try:
            if any(file_version(Path(version[0])) != version for version in self.read):
                return False
        except OSError:
            return False
        return all(_matches(pattern) == found for pattern, found in self.globs.items())

    def index(self) -> SSHConfig:
        for number, block in enumerate(self.blocks):
            names = block.literal_names()
            if names is None:
                self.scanned.append(number)
                continue
            for name in dict.fromkeys(n.lower() for n in names):
                self.by_name.setdefault(name, []).append(number)
        return self

    def lookup(self, alias: str) -> dict[str, Any]:
        """What ssh would use for ``alias``: keys lower case, ``identityfile`` a list, ``hostname`` always set."""
        candidates = sorted({*self.by_name.get(alias.lower(), ()), *self.scanned})
        found: dict[str, Any] = {}
        for number in candidates:
            block = self.blocks[number]
            if not block.matches(alias):
                continue
            for key, value in block.options:
                if key in LIST_KEYWORDS:
                    found.setdefault(key, []).append(value)
                elif key not in found:
                    found[key] = value
        return _expand(found, alias)


def _match_patterns(alias: str, patterns: tuple[str, ...]) -> bool:
    """ssh_config(5) PATTERNS: any positive pattern matches and no negated one does (case-insensitive)."""
    name = alias.lower()
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _glob(pattern[1:] if negated else pattern).fullmatch(name):
            if negated:
                return False
            matched = True
    return matched


@lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower()))


def _expand(found: dict[str, Any], alias: str) -> dict[str, Any]:
    hostname = _tokens(found.get("hostname", alias), alias, alias)
    found["hostname"] = hostname
    if "identityfile" in found:
        found["identityfile"] = [_tokens(v, alias, hostname) for v in found["identityfile"]]
    return found


def _tokens(value: str, alias: str, hostname: str) -> str:
    """The TOKENS of ssh_config(5) that need no connection: %h, %n, %d, %u, %%."""
    if "%" not in value:
        return value  # most values: no token, so no need to ask for the home folder or the user

    def token(match: re.Match[str]) -> str:
        letter = match.group(1)
        if letter == "h":
            return hostname
        if letter == "n":
            return alias
        if letter == "d":
            return _home()
        if letter == "u":
            return _local_user()
        return "%" if letter == "%" else match.group(0)

    return _TOKEN_RE.sub(token, value)


_TOKEN_RE = re.compile(r"%(.)")
# Where Path.home() and getpass.getuser() look, in their order: a changed environment (a test's
# $HOME, a sudo'd USER) is a new cache key, so the answers stay what those calls would say now.
_HOME_SOURCES = ("HOME",)
_USER_SOURCES = ("LOGNAME", "USER", "LNAME", "USERNAME")


def _home() -> str:
    return _home_for(tuple(os.environ.get(name) for name in _HOME_SOURCES), os.getuid())


def _local_user() -> str:
    return _user_for(tuple(os.environ.get(name) for name in _USER_SOURCES), os.getuid())


@lru_cache(maxsize=16)
def _home_for(environ: tuple[str | None, ...], uid: int) -> str:
    """Path.home(), once per ($HOME, uid): it is asked per host when an IdentityFile says %d."""
    return str(Path.home())


@lru_cache(maxsize=16)
def _user_for(environ: tuple[str | None, ...], uid: int) -> str:
    """getpass.getuser(), once per (its environment variables, uid)."""
    import getpass

    return getpass.getuser()


# ---------------------------------------------------------------------------------- reading


def load(files: list[Path]) -> SSHConfig:
    """Read the files in order (user's first, then the system's) into one indexed config."""
    config = SSHConfig()
    for path in files:
        # ssh_config(5) Include: relative paths are in ~/.ssh for a user's file, /etc/ssh for the system's
        base = SYSTEM_CONFIG.parent if path == SYSTEM_CONFIG else Path.home() / ".ssh"
        _read(path, config, (), base, 0)
    return config.index()


def _read(
    path: Path, config: SSHConfig, outer: tuple[tuple[str, tuple[str, ...]], ...], base: Path, depth: int
) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise SSHConfigError(f"{path}: Include nested more than {MAX_INCLUDE_DEPTH} deep (a loop?)")
    if len(config.read) >= MAX_CONFIG_READS:
        raise SSHConfigError(
            f"{path}: Include reads more than {MAX_CONFIG_READS} files in all (an Include that fans out, or a loop)"
        )
    try:
        config.read.append(file_version(path))
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise SSHConfigError(f"{path}: {exc.strerror or exc}") from None
    block = _Block(outer)
    config.blocks.append(block)
    for number, raw in enumerate(text.splitlines(), 1):
        parsed = _split(raw, path, number)
        if parsed is None:
            continue
        key, args = parsed
        if key == "host":
            block = _Block((*outer, ("host", tuple(args))))
            config.blocks.append(block)
        elif key == "match":
            block = _Block((*outer, _match_condition(args, path, number)))
            config.blocks.append(block)
        elif key == "include":
            for pattern in args:
                expanded = _include_pattern(pattern, base)
                config.globs[expanded] = _matches(expanded)
                for included in config.globs[expanded]:
                    _read(Path(included), config, block.conditions, base, depth + 1)
            block = _Block(block.conditions)  # settings after an Include continue the enclosing block
            config.blocks.append(block)
        elif key in ("sendenv", "setenv"):
            block.options.extend((key, a) for a in args)
        else:
            block.options.append((key, " ".join(args)))


def _split(raw: str, path: Path, number: int) -> tuple[str, list[str]] | None:
    line = raw.strip()
    if not line or line.startswith("#"):
        return None
    match = re.match(r"^([A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+)(.*)$", line)
    if not match:
        raise SSHConfigError(f"{path}:{number}: cannot read {raw.strip()!r}")
    key, rest = match.group(1).lower(), match.group(2).strip()
    try:
        args = shlex.split(rest, comments=True) if '"' in rest or "#" in rest else rest.split()
    except ValueError as exc:
        raise SSHConfigError(f"{path}:{number}: {exc}") from None
    if not args:
        raise SSHConfigError(f"{path}:{number}: {match.group(1)} needs a value")
    return key, args


def _match_condition(args: list[str], path: Path, number: int) -> tuple[str, tuple[str, ...]]:
    words = [a.lower() for a in args]
    if words == ["all"]:
        return ("host", ("*",))
    if len(args) == 2 and words[0] in ("host", "originalhost"):
        return ("host", tuple(args[1].split(",")))
    return ("never", tuple(args))  # exec, user, localuser, canonical, final, ...: not evaluated here


def _include_pattern(pattern: str, base: Path) -> str:
    expanded = os.path.expanduser(pattern)
    return expanded if os.path.isabs(expanded) else str(base / expanded)


def _matches(pattern: str) -> tuple[str, ...]:
    """The files an Include pattern names now, in the order ssh reads them."""
    return tuple(p for p in sorted(glob.glob(pattern)) if Path(p).is_file())


FileVersion = tuple[str, int, int, int]  # path, mtime (ns), size, inode


def file_version(path: Path) -> FileVersion:
    """What tells one version of a file from the next, for caches keyed on it (OSError if it is gone):
    a rewrite changes the mtime or size, a replaced file (rename over it) the inode."""
    stat = path.stat()
    return (str(path), stat.st_mtime_ns, stat.st_size, stat.st_ino)


# ---------------------------------------------------------------------------------- cache


def config_files(ssh_config: Path | None) -> list[Path]:
    """The files ssh reads: the one given (``ssh -F``), else ~/.ssh/config then /etc/ssh/ssh_config."""
    if ssh_config is not None:
        if not ssh_config.is_file():
            raise SSHConfigError(f"ssh config {ssh_config} does not exist")
        return [ssh_config]
    return [p for p in (Path.home() / ".ssh" / "config", SYSTEM_CONFIG) if p.is_file()]


def cached(files: list[Path]) -> SSHConfig:
    """One parse per version of the files, Include'd ones too: a sweep of thousands reads them once, and
    a long-running ``nightowl serve`` sees an edit to any of them (or a file an Include glob now matches)."""
    key = tuple(file_version(path) for path in files)
    with _CACHE_LOCK:
        config = _CACHE.get(key)
    if config is not None and config.current():
        return config
    config = load(files)
    with _CACHE_LOCK:
        if len(_CACHE) >= 16:
            _CACHE.clear()
        _CACHE[key] = config
    return config


# cache: keyed by the files' versions (path, mtime, size): an edited ssh_config is a new key.
_CACHE: dict[tuple[FileVersion, ...], SSHConfig] = {}
_CACHE_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget every parsed config (benchmarks time a cold read)."""
    with _CACHE_LOCK:
        _CACHE.clear()
