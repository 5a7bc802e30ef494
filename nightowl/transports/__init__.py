"""Transports: local, ssh, replay and http (serving replicas by URL), behind ``base.Transport``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nightowl.transports.base import CommandResult, Transport, TransportError


def open_transport(spec: str, ssh_options: Any = None) -> Transport:
    """A transport for a host spec: ``local``, ``replay:DIR``, or an SSH spec (URL or ssh_config name)."""
    if spec.startswith("replay:"):
        from nightowl.transports.replay import ReplayTransport

        return ReplayTransport(Path(spec[len("replay:") :]))
    from nightowl.transports.hostspec import parse_host_spec

    return transport_for(parse_host_spec(spec, getattr(ssh_options, "ssh_config", None)), ssh_options)


def transport_for(host: Any, ssh_options: Any = None, dial: Any = None) -> Transport:
    """The transport for a parsed HostSpec: local for ``local`` (any case), SSH otherwise (``dial``: the
    TCP connection a sweep opened ahead, see transports/dial.py). A host whose inventory entry could
    not be parsed (``host.problem``) is TransportError: unreachable, with the reason."""
    if getattr(host, "problem", None):
        raise TransportError(host.problem)
    if host.is_local:
        from nightowl.transports.local import LocalTransport

        return LocalTransport(host.name)
    from nightowl.transports.ssh import SSHOptions, SSHTransport

    return SSHTransport(host, ssh_options or SSHOptions(), dial=dial)


__all__ = ["CommandResult", "Transport", "TransportError", "open_transport", "transport_for"]
