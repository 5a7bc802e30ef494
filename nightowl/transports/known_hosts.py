"""OpenSSH ``known_hosts`` as the SSH transport reads it: hashed and wildcard names, ``@revoked`` and
``@cert-authority`` markers, several files, and appending a new key under a lock (``accept-new``)."""

from __future__ import annotations

import fcntl
import os
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from nightowl.transports.ssh_config import FileVersion, file_version


@dataclass
class _KnownKey:
    patterns: tuple[str, ...]
    key_type: str
    blob: bytes
    revoked: bool = False
    cert_authority: bool = False

    def matches_host(self, name: str) -> bool:
        """OpenSSH host matching: hashed entries, globs and ``!negation``."""
        from nightowl.transports.paramiko_import import paramiko

        matched = False
        for pattern in self.patterns:
            negated = pattern.startswith("!")
            pattern = pattern[1:] if negated else pattern
            if pattern.startswith("|1|"):
                hit = paramiko.HostKeys.hash_host(name, pattern) == pattern
            else:
                hit = _openssh_glob(pattern).fullmatch(name.lower()) is not None
            if hit and negated:
                return False
            matched = matched or hit
        return matched


@dataclass
class KnownHosts:
    """A known_hosts file, read the way OpenSSH reads it (markers, hashes, patterns)."""

    path: Path
    entries: list[_KnownKey] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path, also: tuple[Path, ...] = ()) -> KnownHosts:
        """``path`` (where new keys are recorded) and read-only files such as /etc/ssh/ssh_known_hosts.

        Each file is parsed once per version (path, size, mtime) for the whole process: a sweep opens
        one connection per host, and re-reading a fleet's 1,000-line known_hosts for each of them was
        most of the sweep's CPU."""
        known = cls(path)
        parts = [_parsed_known_file(source) for source in (path, *also)]
        for entries in parts:
            known.entries.extend(entries)
        index = _KNOWN_INDEXES.get(tuple(id(entries) for entries in parts))
        if index is None:
            index = known._index()
            with _KNOWN_FILES_LOCK:
                _KNOWN_INDEXES[tuple(id(entries) for entries in parts)] = index
        known.__dict__["_index_cache"] = (len(known.entries), *index)
        return known

    def for_host(self, name: str) -> list[_KnownKey]:
        """The entries for ``name``, in file order: literal host names through an index, and only the
        hashed, wildcard and negated entries tested one by one (OpenSSH's matching either way)."""
        literal, others = self._index()
        candidates = sorted({*literal.get(name.lower(), ()), *others})
        return [self.entries[i] for i in candidates if self.entries[i].matches_host(name)]

    def _index(self) -> tuple[dict[str, list[int]], list[int]]:
        # Rebuilt when entries were added (accept-new appends to ``entries``).
        cached = self.__dict__.get("_index_cache")
        if cached is not None and cached[0] == len(self.entries):
            return cached[1], cached[2]
        literal: dict[str, list[int]] = {}
        others: list[int] = []
        for i, entry in enumerate(self.entries):
            if any(p.startswith(("|", "!")) or "*" in p or "?" in p for p in entry.patterns):
                others.append(i)
            else:
                for pattern in entry.patterns:
                    literal.setdefault(pattern.lower(), []).append(i)
        self.__dict__["_index_cache"] = (len(self.entries), literal, others)
        return literal, others

    def trusts_a_ca_for(self, name: str) -> bool:
        return any(e.cert_authority and not e.revoked for e in self.for_host(name))

    def verdict(
        self, name: str, key_type: str, blob: bytes, certificate: bytes | None = None, hostname: str | None = None
    ) -> tuple[str, str]:
        """("ok"|"unknown"|"mismatch", detail) for the key a server presented.

        A host certificate is accepted when an @cert-authority line for ``name`` trusts its CA and it
        vouches for ``hostname`` (nightowl/transports/host_certs.py); otherwise its plain key is judged
        as any other key, as OpenSSH falls back to do.
        """
        entries = self.for_host(name)
        if any(e.revoked and e.blob == blob for e in entries):
            return "mismatch", f"the {key_type} key of {name} is marked @revoked in {self.path}"
        if certificate is not None and any(e.revoked and e.blob == certificate for e in entries):
            return "mismatch", f"the host certificate of {name} is marked @revoked in {self.path}"
        cert_problem = ""
        if certificate is not None:
            from nightowl.transports.host_certs import problem

            revoked = {e.blob for e in entries if e.revoked}  # a revoked CA vouches for nothing
            cas = [e.blob for e in entries if e.cert_authority and e.blob not in revoked]
            reason = problem(certificate, hostname or name, cas)
            if reason is None:
                return "ok", ""
            cert_problem = f"; {reason}"
        current = [e for e in entries if not e.revoked and not e.cert_authority]
        if any(e.key_type == key_type and e.blob == blob for e in current):
            return "ok", ""
        if any(e.key_type == key_type for e in current):
            return "mismatch", (
                f"the {key_type} key of {name} differs from the one in {self.path} "
                "(changed host key or man in the middle)"
            )
        others = sorted({e.key_type for e in current})
        also = f"; known types for it: {', '.join(others)}" if others else ""
        return "unknown", f"no {key_type} key for {name} in {self.path}{also}{cert_problem}"

    def known_types(self, name: str) -> list[str]:
        return [e.key_type for e in self.for_host(name) if not e.revoked and not e.cert_authority]

    def append(self, name: str, key_type: str, key_base64: str) -> None:
        """Add one line, serialised across threads and processes (pyinfra locks this too)."""
        with _KNOWN_HOSTS_LOCK:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "r+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                handle.seek(0)
                current = [_parse_known_line(raw) for raw in handle.read().decode(errors="replace").splitlines()]
                blob = _b64decode(key_base64)
                if any(e and e.key_type == key_type and e.blob == blob and e.matches_host(name) for e in current):
                    return  # another thread or process recorded it meanwhile
                handle.seek(0, os.SEEK_END)
                needs_newline = handle.tell() > 0 and not _ends_with_newline(handle)
                line = f"{name} {key_type} {key_base64}\n"
                handle.write((("\n" if needs_newline else "") + line).encode())
                handle.flush()
            self.entries.append(_KnownKey((name,), key_type, _b64decode(key_base64)))


_KNOWN_HOSTS_LOCK = threading.Lock()


@lru_cache(maxsize=4096)
def _openssh_glob(pattern: str) -> re.Pattern[str]:
    """known_hosts patterns: only ``*`` and ``?`` are wild (``[`` is literal, as in ``[host]:port``)."""
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern.lower())
    return re.compile("".join(parts))


def _ends_with_newline(handle: Any) -> bool:
    handle.seek(-1, os.SEEK_END)
    last = handle.read(1)
    handle.seek(0, os.SEEK_END)
    return bool(last == b"\n")


def _b64decode(text: str) -> bytes:
    import base64
    import binascii

    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


# cache: keyed by each file's version (path, mtime, size): an edited known_hosts is a new key.
_KNOWN_FILES: dict[FileVersion, tuple[_KnownKey, ...]] = {}
_KNOWN_FILES_LOCK = threading.Lock()
# Host-name index per combination of parsed files (keyed by the cached tuples' identities, which live
# as long as _KNOWN_FILES holds them; both are cleared together).
# cache: keyed by the identities of _KNOWN_FILES' tuples, immutable while held there.
_KNOWN_INDEXES: dict[tuple[int, ...], tuple[dict[str, list[int]], list[int]]] = {}


def _parsed_known_file(source: Path) -> tuple[_KnownKey, ...]:
    """The entries of one known_hosts file, parsed once per version of the file."""
    try:
        key = file_version(source)
    except OSError:
        return ()
    if not source.is_file():
        return ()
    with _KNOWN_FILES_LOCK:
        cached = _KNOWN_FILES.get(key)
    if cached is None:
        lines = source.read_text(errors="replace").splitlines()
        cached = tuple(entry for line in lines if (entry := _parse_known_line(line)) is not None)
        with _KNOWN_FILES_LOCK:
            if len(_KNOWN_FILES) > 64:
                _KNOWN_FILES.clear()
                _KNOWN_INDEXES.clear()
            _KNOWN_FILES[key] = cached
    return cached


def _parse_known_line(line: str) -> _KnownKey | None:
    fields = line.split()
    if not fields or fields[0].startswith("#"):
        return None
    marker = ""
    if fields[0].startswith("@"):
        if fields[0] not in ("@revoked", "@cert-authority"):
            return None
        marker, fields = fields[0], fields[1:]
    if len(fields) < 3:
        return None
    blob = _b64decode(fields[2])
    if not blob:
        return None
    return _KnownKey(tuple(fields[0].split(",")), fields[1], blob, marker == "@revoked", marker == "@cert-authority")
