"""Terminal escape sequences removed from a command's output before any parser reads it.

They arrive in three forms, and each parser would otherwise see them glued to its fields:

- raw bytes: ESC (0x1b) then a CSI (``ESC [ 4 m``, the underline ``nvidia-smi topo -m`` prints around its
  header on a TTY), an OSC (``ESC ] ... BEL`` or ``ESC ] ... ESC \\``) or a two-byte escape (``ESC ( B``);
  ECMA-48 (5th edition, 1991) section 5.4 gives the CSI grammar: parameter bytes 0x30-0x3f, intermediate
  bytes 0x20-0x2f, one final byte 0x40-0x7e;
- caret notation ``^[[0;36m``, which ``cat -v``, ``less`` and many web log viewers print for ESC and
  which pasted logs keep;
- rsyslog's escaping of control characters as ``#`` and three octal digits (``#033[0;36m``; rsyslog
  documentation, ``$EscapeControlCharactersOnReceive`` / ``parser.escapeControlCharactersOnReceive``).
  rsyslog's ``#012`` (newline) is kept: the kernel-log reader turns it back into a continuation.

Only well-formed sequences are removed, so a ``^[`` or ``#033`` that starts no sequence stays as text.
"""

from __future__ import annotations

import re

_INTRO = r"(?:\x1b|\^\[|#033)"  # ESC, caret notation, rsyslog octal
_CSI = _INTRO + r"\[[0-?]*[ -/]*[@-~]"
_OSC = _INTRO + r"\][^\x07\x1b]{0,4096}?(?:\x07|" + _INTRO + r"\\|\^G)"
_TWO_BYTE = _INTRO + r"[()][0-9A-Za-z]|\x1b[=>78DEHMNOZc]"
_SEQUENCE = re.compile(f"{_OSC}|{_CSI}|{_TWO_BYTE}")
# Cheap test first: almost every output has none of the three introducers.
_HINTS = ("\x1b", "^[", "#033")


def strip_escapes(text: str) -> str:
    """``text`` without terminal escape sequences (raw, caret-notation or rsyslog-escaped)."""
    if not isinstance(text, str) or not any(_holds(text, hint) for hint in _HINTS):
        return text
    return _SEQUENCE.sub("", text).replace("\x1b", "")


def _holds(text: str, hint: str) -> bool:
    """``hint in text``, found from the hint's first character: a search for one character runs at
    memory speed (memchr), where one for "^[" or "#033" walks the text (~1 ms per MB each). A text
    where that character is common ("#" of a shell transcript) gets the plain search past 512 of them."""
    at = text.find(hint[0])
    for _ in range(512):
        if at < 0:
            return False
        if text.startswith(hint, at):
            return True
        at = text.find(hint[0], at + 1)
    return at >= 0 and text.find(hint, at) >= 0
