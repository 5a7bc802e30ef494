"""PCI address normalisation (docs/reference.md#parse-output)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nightowl.collectors.pci import find_pci, normalize_pci


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00000000:5A:00.0", "0000:5a:00"),  # nvidia-smi -q Bus Id
        ("PCI:0000:5a:00", "0000:5a:00"),  # NVRM kernel line
        ("0000:5a:00.0", "0000:5a:00"),  # lspci -D
        ("5a:00.0", "0000:5a:00"),  # lspci without domain
        ("GPU0000:A1:00.0", "0000:a1:00"),  # "Unable to determine the device handle for GPU0000:A1:00.0"
        ("GPU 00000000:18:00.0", "0000:18:00"),  # -q block header
        ("00008ED0:00:00.0", "8ed0:00:00"),  # Azure VM domain: leading zeros dropped down to 4 digits
        ("00010000:01:00.0", "10000:01:00"),  # a domain wider than 4 digits is kept
        ("  00000000:10:1C.0  ", "0000:10:1c"),
    ],
)
def test_normalize_pci(text: str, expected: str) -> None:
    assert normalize_pci(text) == expected


@pytest.mark.parametrize("text", ["", None, "5a:00", "18:03", "not a pci address", "0000:5a", "GPU-b42dd28e"])
def test_normalize_pci_refuses_non_addresses(text: str | None) -> None:
    assert normalize_pci(text) is None


def test_find_pci_inside_a_line() -> None:
    line = "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error"
    assert find_pci(line) == "0000:0b:00"
    assert find_pci("[Fri Apr  5 21:29:39 2024] NVRM: no address here") is None


@given(st.text())
def test_normalize_pci_never_raises(text: str) -> None:
    result = normalize_pci(text)
    assert result is None or result.count(":") == 2
    find_pci(text)
