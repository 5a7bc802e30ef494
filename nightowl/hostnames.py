"""What a host name or address may be, wherever one arrives: one rule set for every door.

A name comes in by three doors: a host spec (``--host``, an inventory; nightowl/transports/hostspec.py),
an alert label (nightowl/receiver/rules.py, which also demands RFC 1123) and the node's own name
(nightowl/fleet/identity.py). Whatever passes here is safe as one ssh argument, a folder name and a
Prometheus label value: no whitespace or control character, no option (a leading ``-``), no shell,
URL or path character; and it is a DNS name (RFC 1035 s2.3.4 lengths) or an IPv6 address.

This module imports nothing of nightowl, so any part of it may use it without an import cycle.
"""

from __future__ import annotations

import re

MAX_NAME = 253  # characters in all, a final dot not counted (RFC 1035 s2.3.4)
MAX_LABEL = 63  # characters between two dots

# What str.isspace() calls whitespace (re's \s is the same set), or a control character (C0 and DEL).
SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")
_CHARACTERS = re.compile(r"[A-Za-z0-9_.:%-]+")
# An IPv6 zone (fe80::1%eth0) names an interface: letters, digits, '.', '_' and '-' (eth0.100, br-lan).
_ZONE = re.compile(r"[A-Za-z0-9_.-]+")
ALLOWED = "letters, digits, '.', '-' and '_' (and ':' or '%' in an IPv6 address)"


def host_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a host name or IP address, or None when nothing is.

    The answer does not repeat the name: the caller says where it came from. Each caller may refuse
    more (the receiver: anything but RFC 1123; identity: addresses that only the dialler understands).
    """
    if not name:
        return "empty"
    if not _CHARACTERS.fullmatch(name):
        if SPACE_OR_CONTROL.search(name):
            return "whitespace or control characters"
        return f"only {ALLOWED}"
    if name.startswith("-"):
        return "starts with '-', as an option does"
    if ":" in name or "%" in name:
        return _ipv6_problem(name)
    return _dns_problem(name)


def _ipv6_problem(name: str) -> str | None:
    """':' and '%' belong to an IPv6 address (with its zone) only: a name with them must be one."""
    import ipaddress  # only for the few addresses: most hosts are names

    address, percent, zone = name.partition("%")
    if percent and not _ZONE.fullmatch(zone):
        return "an IPv6 zone after '%' is an interface name (letters, digits, '.', '_', '-')"
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return "':' and '%' belong only in an IPv6 address, and this is none"
    return None


def _dns_problem(name: str) -> str | None:
    if not name[0].isalnum():  # ASCII here: _CHARACTERS let nothing else through
        return "starts with neither a letter nor a digit"
    bare = name[:-1] if name.endswith(".") else name  # gpu-17.corp. is absolute, not longer
    if len(bare) > MAX_NAME:
        return f"longer than {MAX_NAME} characters"
    # An empty label (gpu-17..corp) fails IDNA encoding deep in the resolver: refused here instead.
    if any(not 1 <= len(label) <= MAX_LABEL for label in bare.split(".")):
        return f"an empty label or one longer than {MAX_LABEL} characters"
    return None
