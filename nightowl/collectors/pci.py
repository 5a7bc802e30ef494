"""PCI address normalisation shared by the GPU collectors (docs/reference.md#parse-output).

Tools spell one GPU's address several ways: ``00000000:5A:00.0`` (nvidia-smi, 8-digit domain),
``PCI:0000:5a:00`` (NVRM kernel lines), ``0000:5a:00.0`` (lspci -D), ``GPU0000:A1:00.0`` (the
"Unable to determine the device handle" message). All become ``dddd:bb:dd`` in lower case.
"""

from __future__ import annotations

import re

# Optional "PCI:" / "GPU" prefix, optional domain (1-8 hex digits), bus, device, optional function.
_PCI = re.compile(
    r"^\s*(?:pci:|gpu\s*)?(?:(?P<domain>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{2}):(?P<device>[0-9a-f]{2})"
    r"(?:\.(?P<function>[0-7]))?\s*:?\s*$",
    re.IGNORECASE,
)
# Same shape, found inside a longer line (a domain is then required, so times like 18:03 never match).
_PCI_IN_TEXT = re.compile(
    r"(?<![0-9a-f:])(?P<domain>[0-9a-f]{4,8}):(?P<bus>[0-9a-f]{2}):(?P<device>[0-9a-f]{2})(?:\.[0-7])?(?![0-9a-f])",
    re.IGNORECASE,
)


def _format(domain: str, bus: str, device: str) -> str:
    short_domain = domain.lower().lstrip("0").rjust(4, "0")
    return f"{short_domain}:{bus.lower()}:{device.lower()}"


def normalize_pci(text: str | None) -> str | None:
    """``dddd:bb:dd`` for one PCI address, or None when ``text`` is not one.

    A bare ``bb:dd.f`` (no domain) gets domain 0000; a bare ``bb:dd`` is refused because it
    cannot be told from a clock time.
    """
    if not text:
        return None
    match = _PCI.match(text)
    if match is None:
        return None
    domain = match.group("domain")
    if domain is None and match.group("function") is None:
        return None
    return _format(domain or "0", match.group("bus"), match.group("device"))


def find_pci(text: str | None) -> str | None:
    """The first domain-qualified PCI address inside a longer line, normalised, else None."""
    if not text:
        return None
    match = _PCI_IN_TEXT.search(text)
    if match is None:
        return None
    return _format(match.group("domain"), match.group("bus"), match.group("device"))
