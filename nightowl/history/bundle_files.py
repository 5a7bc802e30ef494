"""Reading a bundle's files for the history: as the replay transport reads a recorded host.

A bundle handed to ``nightowl history import`` may come from anywhere (issue "trust, round four", item 6):
only regular files are read, a symbolic link is never followed (``kernel-log.out -> /dev/zero``), a FIFO
or a device is refused before it can block (``private_files.open_regular`` opens without blocking and
checks), and no read holds more than a cap: JSON files at most ``MAX_JSON_BYTES``, a command's output its
head and tail within the parser's own ``PARSE_INPUT_CAP``, exactly what a run's parser was handed.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from nightowl.engine.parse_budget import PARSE_INPUT_CAP
from nightowl.engine.private_files import open_regular
from nightowl.engine.readback import read_as_parsed

MAX_JSON_BYTES = 16 * 1024 * 1024  # a manifest of 10,000 commands is ~5 MB; as MCP's read_bundle caps it


def refuse_link(path: Path) -> os.stat_result:
    """``path``'s own status (lstat); OSError when it is a symbolic link or not a regular file."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OSError(f"{path.name}: a symbolic link, not followed")
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{path.name}: not a regular file")
    return info


def read_capped(path: Path, cap: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a regular file (no link followed); OSError for anything else or a file over ``cap``."""
    refuse_link(path)
    with open_regular(path) as handle:
        data: bytes = handle.read(cap + 1)
    if len(data) > cap:
        raise OSError(f"{path.name}: larger than {cap} bytes")
    return data


def read_json(path: Path, cap: int = MAX_JSON_BYTES) -> Any:
    """A regular JSON file within ``cap``; OSError (unreadable) or ValueError (not JSON, nested too deep)."""
    return parse_json(read_capped(path, cap))


def parse_json(data: bytes) -> Any:
    """JSON from bytes; ValueError also for nesting deeper than the decoder's recursion allows."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deep to read") from None


def read_output(path: Path, cap: int = PARSE_INPUT_CAP) -> str:
    """A command's recorded output as its parser saw it in the run (``readback.read_as_parsed``: the head and
    tail within ``cap``), never through a symbolic link."""
    refuse_link(path)
    return read_as_parsed(path, cap)
