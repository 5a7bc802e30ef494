"""The driver's status codes printed as numbers, named (nightowl/knowledge/nv_status_codes.csv).

Some driver messages name their status (``Assertion failed: Reset required [NV_ERR_RESET_REQUIRED]
(0x00000062)``), others give the number alone: nvidia-modeset's ``Failed to query display engine channel
state: 0x0000ca7e:0:0:0x00000062`` (class, channel, ..., status), an RPC's ``failed with status
0x0000000f``. The kernel-log patterns judge the names, so a message that prints a judged status as a number
gets its name and text appended before it is classified. Only the status positions are read (after
``status``, or last in a class:channel tuple), never any hex number in a line: an address or a register
value is no status.
"""

from __future__ import annotations

import functools
import re

from nightowl import knowledge

# "status 0x0000000f", "status=0x00000062", "status: 0x..." or the last field of "0x0000ca7e:0:0:0x00000062".
_STATUS = re.compile(r"(?:\bstatus\s*[=:]?\s*|\b0x[0-9a-fA-F]{8}(?::\d+)+:)0x(?P<code>[0-9a-fA-F]{8})\b", re.IGNORECASE)


@functools.cache
def _named() -> dict[int, str]:
    rows = knowledge.read_csv("nv_status_codes.csv", required=("code", "name", "text", "source"))
    return {int(row["code"], 16): f"{row['text']} [{row['name']}]" for row in rows}


def with_status_named(message: str) -> str:
    """``message`` with the name of each judged status it prints only as a number appended (unchanged when it
    names none, or names them already)."""
    if "0x" not in message or "NV_ERR_" in message:
        return message
    names = [_named().get(int(m.group("code"), 16)) for m in _STATUS.finditer(message)]
    found = [name for name in names if name is not None]
    return f"{message} ({'; '.join(dict.fromkeys(found))})" if found else message
