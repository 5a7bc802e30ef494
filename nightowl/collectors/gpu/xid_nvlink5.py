"""`xid-nvlink5`: a derived collector: each NVLink5 Xid (144-150) decoded from the fields of its line.

NVIDIA's catalog says these Xids "need decoding of XID message as follows to determine the resolution
action": ``Xid (PCI:...): <Xid> <unit> <Fatal|Nonfatal> XC<n> i<n> Link <link> (<intrInfo> <errorStatus>
<errorDebugData[0..4]>)``. The row of the "XID 144-150 Decode" sheet (nightowl/knowledge/
xid_nvlink5_decode.csv, generated, one row per sheet row with its source) is the one whose Xid and unit
match the line, whose errorStatus equals the line's, and whose intrInfo bit pattern matches the line's
intrInfo. The sheet gives two patterns per row: V1 for drivers before R575 and V2 for R575 and later;
the driver branch is read from the kernel log's load line (or nvidia-smi) when it is there, and both are
tried otherwise (the result says which matched; lines of one host that fit different layouts are left
undecoded, since one driver prints one layout). Lines whose fields the poster elided (``(...)``) or that
no row matches stay ``undecoded``: the runbook falls back to the catalog's Xid-level action for them.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered

KIND = "xid-nvlink5"
INPUTS = ("kernel_log",)
OPTIONAL_INPUTS = ("nvidia_smi",)
DECODE_FILE = Path(__file__).resolve().parents[2] / "knowledge" / "xid_nvlink5_decode.csv"
R575 = 575  # the driver branch where the intrInfo layout changes (sheet columns V1 <R575, V2 >=R575)

# The line's fields after "<Xid>, " (R575+ prints six words in parentheses; older drivers one in brackets).
_FIELDS = re.compile(
    r"^(?P<unit>[A-Z][A-Z0-9_]*)\s+(?P<severity>Fatal|Non-?fatal)\s+XC\s*(?P<xc>\d+)\s+i\s*(?P<inj>\d+)\s+"
    r"Link\s+(?P<link>-?\d+)\s*[(\[](?P<words>[^)\]]*)[)\]]",
    re.IGNORECASE,
)
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_BRANCH = re.compile(r"^(?P<major>\d+)\.")

# The sheet's resolution -> nightowl's action (a fatal link/unit error stops its NVLink peers first, as
# xid_rules.yaml's xid149-nvlink5-fatal rule says; XID_154_EVAL follows the Xid 154 the driver prints next).
RESOLUTION_ACTIONS = {
    "IGNORE": "none",
    "RESET_GPU": "reset-gpu",
    "CONTACT_SUPPORT": "escalate",
    "XID_154_EVAL": "follow-xid-154",
}
ACTION_ORDER = ("none", "follow-xid-154", "escalate", "reset-gpu", "drain-and-reset")


@dataclass(frozen=True)
class DecodeRow:
    xid: int
    unit: str
    intrinfo_v1: str
    intrinfo_v2: str
    error_status: int
    resolution: str
    investigatory: str
    severity: str
    hw_sw: str
    local_remote: str
    source: str


@lru_cache(maxsize=1)
def decode_rows() -> tuple[DecodeRow, ...]:
    with DECODE_FILE.open(newline="") as handle:
        reader = csv.DictReader(line for line in handle if not line.startswith("#"))
        return tuple(
            DecodeRow(
                xid=int(row["xid"]),
                unit=row["unit"],
                intrinfo_v1=row["intrinfo_v1"],
                intrinfo_v2=row["intrinfo_v2"],
                error_status=int(row["error_status"], 16),
                resolution=row["resolution"],
                investigatory=row["investigatory"],
                severity=row["severity"],
                hw_sw=row["hw_sw"],
                local_remote=row["local_remote"],
                source=row["source"],
            )
            for row in reader
        )


def pattern_matches(pattern: str, value: int) -> bool:
    """A 32-character pattern, most significant bit first: ``1``/``0`` must match, ``-`` is any bit."""
    if len(pattern) != 32:
        return False
    for index, char in enumerate(pattern):
        bit = (value >> (31 - index)) & 1
        if (char == "1" and not bit) or (char == "0" and bit):
            return False
    return True


def subcode_of(intrinfo: int) -> int:
    """The sheet's sub-code: intrInfo bits 20-25 (the "------xxxxxx" part of every pattern)."""
    return (intrinfo >> 20) & 0x3F


def _units(unit: str) -> set[str]:
    return {part.strip().upper() for part in unit.split("/")}


def driver_branch(version: str | None) -> int | None:
    match = _BRANCH.match(version or "")
    return int(match.group("major")) if match else None


def decode_line(code: int, text: str, branch: int | None = None) -> dict[str, Any]:
    """One Xid 144-150 text (after ``<code>, ``) -> its fields and the sheet row it decodes to (or why not)."""
    fields = _FIELDS.search(text or "")
    if fields is None:
        return {"xid": code, "decoded": False, "reason": "the line does not carry the unit/severity/link fields"}
    words = fields.group("words").split()
    out: dict[str, Any] = {
        "xid": code,
        "unit": fields.group("unit").upper(),
        "severity_word": "fatal" if fields.group("severity").lower() == "fatal" else "nonfatal",
        "link": int(fields.group("link")),
        "intrinfo": words[0] if words else None,
        "error_status": words[1] if len(words) > 1 else None,
        "decoded": False,
    }
    if not words or not all(_HEX.match(word) for word in words[:2]):
        out["reason"] = "intrInfo/errorStatus not printed (elided, or a driver that prints fewer fields)"
        return out
    intrinfo = int(words[0], 16)
    status = int(words[1], 16) if len(words) > 1 else 0
    out["subcode"] = subcode_of(intrinfo)
    layouts = ("v1",) if branch is not None and branch < R575 else ("v2",) if branch is not None else ("v2", "v1")
    for row in decode_rows():
        if row.xid != code or out["unit"] not in _units(row.unit) or row.error_status != status:
            continue
        for layout in layouts:
            if pattern_matches(row.intrinfo_v1 if layout == "v1" else row.intrinfo_v2, intrinfo):
                out.update(
                    decoded=True,
                    layout=layout,
                    layout_from="driver branch" if branch is not None else "the pattern that matched",
                    sheet_unit=row.unit,
                    resolution=row.resolution,
                    investigatory=row.investigatory,
                    sheet_severity=row.severity,
                    hw_sw=row.hw_sw,
                    effects=row.local_remote,
                    action=_action(row),
                    source=row.source,
                )
                return out
    out["reason"] = (
        f"no row of the decode sheet matches unit {out['unit']}, errorStatus {words[1]}, intrInfo {words[0]}"
    )
    return out


def _action(row: DecodeRow) -> str:
    action = RESOLUTION_ACTIONS.get(row.resolution, "escalate")
    fatal = "fatal" in row.severity.lower() and "non" not in row.severity.lower()
    return "drain-and-reset" if action == "reset-gpu" and fatal else action


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The kernel log's NVLink5 Xids, each decoded, and the strictest action among the decoded ones."""
    kernel, smi = inputs["kernel_log"], inputs.get("nvidia_smi") or {}
    version = kernel.get("driver_version") or smi.get("driver_version")
    branch = driver_branch(version)
    from nightowl.collectors.gpu.xid_catalog import NVLINK5_CODES  # xid_rules.yaml nvlink5_codes: the one list

    decoded: list[dict[str, Any]] = []
    undecoded: list[dict[str, Any]] = []
    for event in kernel.get("events") or []:
        if event.get("kind") != "xid" or event.get("code") not in NVLINK5_CODES:
            continue
        entry = {"pci": event.get("pci"), **decode_line(int(event["code"]), event.get("text") or "", branch)}
        (decoded if entry["decoded"] else undecoded).append(entry)
    layouts = {entry["layout"] for entry in decoded}
    if branch is None and len(layouts) > 1:
        # One driver prints one layout: lines that fit different ones cannot all be read right without the version.
        why = "lines fit different intrInfo layouts (V1 before R575, V2 from R575) and the driver version is unknown"
        undecoded += [{**entry, "decoded": False, "reason": why} for entry in decoded]
        decoded = []
    actions = [entry["action"] for entry in decoded]
    return {
        "kind": KIND,
        "driver_version": version,
        "driver_branch": branch,
        "decoded": decoded,
        "undecoded": undecoded,
        "action": max(actions, key=ACTION_ORDER.index) if actions else None,
        "gpus": sorted({entry["pci"] for entry in decoded if entry.get("pci")}),
        "peer_suspected": [e for e in decoded if "PEER" in str(e.get("investigatory", "")).upper()],
        "other_xid_codes": [code for code in kernel.get("xid_codes") or [] if code not in NVLINK5_CODES],
    }


COLLECTOR = DerivedCollector(**registered(KIND), inputs=INPUTS, optional_inputs=OPTIONAL_INPUTS, derive=derive)
