"""Transports: local, ssh and replay, all behind ``base.Transport``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nightowl.transports.base import CommandResult, Transport, TransportError


def open_transport(spec: str, ssh_options: Any = None) -> Transport:
    """A transport for a host spec: ``local``, ``replay:DIR``, or an SSH spec."""
    if spec == "local":
        from nightowl.transports.local import LocalTransport

        return LocalTransport(spec)
    if spec.startswith("replay:"):
        from nightowl.transports.replay import ReplayTransport

        return ReplayTransport(Path(spec[len("replay:") :]))
    from nightowl.transports.hostspec import parse_host_spec
    from nightowl.transports.ssh import SSHOptions, SSHTransport

    options = ssh_options or SSHOptions()
    host_spec = parse_host_spec(spec, getattr(options, "ssh_config", None))
    return SSHTransport(host_spec, options)


__all__ = ["CommandResult", "Transport", "TransportError", "open_transport"]
