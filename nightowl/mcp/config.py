"""The server's own config (``nightowl mcp --config FILE``): which live hosts a model may triage.

```yaml
hosts: [local, ssh://root@gpu-17:22]     # host specs a `triage` call may name; default none
known_hosts: /etc/nightowl/known_hosts    # SSH host keys are checked strictly against it
ssh_config: /etc/nightowl/ssh_config
identity: [/etc/nightowl/id_ed25519]
out: /var/lib/nightowl/bundles            # where bundles go (default: as `nightowl triage`)
read_roots: [/var/lib/nightowl]           # folders the paths a model gives (replay, read_bundle, parse,
                                          # path parameters) must be inside; default: any the server's user can read
tool_timeout: 120                         # seconds a tool call may take before it answers an error
```
No key enables invasive collectors: the server never runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEYS = frozenset({"hosts", "known_hosts", "ssh_config", "identity", "out", "read_roots", "tool_timeout"})
DEFAULT_TOOL_TIMEOUT = 120.0


class ConfigError(ValueError):
    """The config file cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ServerConfig:
    """What a model may reach through the server, fixed when it starts."""

    hosts: tuple[str, ...] = ()
    known_hosts: Path | None = None
    ssh_config: Path | None = None
    identity: tuple[Path, ...] = ()
    out: Path | None = None
    read_roots: tuple[Path, ...] = ()
    # A call still running after this many seconds answers an error and frees its caller (issue "trust,
    # round four", item 8); the work goes on in its thread, which never holds the server's exit.
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT

    def readable(self, given: str, also: Path | None = None, expand_user: bool = True) -> Path:
        """``given`` as a path, if the config lets a model make the server read it (inside ``read_roots``,
        or ``also``: where the server writes its bundles); else ConfigError. Resolved: ``..`` normalised,
        every symlink followed (``expand_user=False``: a leading ``~`` is a folder's name, as ``tail`` reads it)."""
        path = Path(given).expanduser() if expand_user else Path(given)
        if not self.read_roots:
            return path
        real = path.resolve()
        roots = [r.resolve() for r in (*self.read_roots, *([also] if also else []))]
        if any(real == root or root in real.parents for root in roots):
            return path
        allowed = ", ".join(str(r) for r in self.read_roots)
        raise ConfigError(f"{given!r} is outside the folders the server's config lets it read ({allowed})")


def load_config(path: Path | None) -> ServerConfig:
    """The config at ``path`` (None: no live host allowed)."""
    if path is None:
        return ServerConfig()
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with keys {', '.join(sorted(KEYS))}")
    unknown = sorted(set(map(str, data)) - KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(KEYS))})")
    hosts = _strings(path, "hosts", data.get("hosts"))
    return ServerConfig(
        hosts=tuple(dict.fromkeys(hosts)),
        known_hosts=_path(path, "known_hosts", data.get("known_hosts")),
        ssh_config=_path(path, "ssh_config", data.get("ssh_config")),
        identity=tuple(Path(p) for p in _strings(path, "identity", data.get("identity"))),
        out=_path(path, "out", data.get("out")),
        read_roots=tuple(Path(p).expanduser() for p in _strings(path, "read_roots", data.get("read_roots"))),
        tool_timeout=_seconds(path, "tool_timeout", data.get("tool_timeout")),
    )


def _strings(path: Path, key: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{path}: {key} must be a list of strings")
    return list(value)


def _path(path: Path, key: str, value: Any) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: {key} must be a path")
    return Path(value).expanduser()


def _seconds(path: Path, key: str, value: Any) -> float:
    if value is None:
        return DEFAULT_TOOL_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        raise ConfigError(f"{path}: {key} must be a number of seconds (more than 0, at most 86400)")
    return float(value)
