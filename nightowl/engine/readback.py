"""A bundle output parsed again by one of the bundle's readers (the history store, the postmortem draft).

The run parsed each output once, with the host's deadline and at most PARSE_INPUT_CAP bytes of it
(nightowl/engine/parse_budget.py). A reader that parsed the bundle's copy again without those bounds
turned a 5-second ``--host-timeout`` over a 64 MB kernel log into most of a minute after the verdict,
and far more on a busy machine. A reader here sees what the run's parser saw: the same head and tail of
the file, the run's own result for that file when the run kept one (its ``ParsedOutputs``,
nightowl/engine/parse_memo.py, handed in as ``kept``; or, for a reader that takes the result as JSON, the
bundle's ``parsed/`` copy of what the run parsed of an output it stored scrubbed), and otherwise a parse
stopped by the same watchdog once its own budget is spent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nightowl.engine import layout
from nightowl.engine.parse_budget import PARSE_INPUT_CAP, ParseBudgetExceeded, within
from nightowl.engine.private_files import open_regular
from nightowl.transports.capped import CappedOutput

READBACK_SECONDS = 10.0  # one parse of one bundle file by a reader; the run's host deadline is long spent


class ReadBackTimedOut(Exception):
    """A reader's parse of a bundle file ran past its budget: the reader says the file was not read again."""


def read_as_parsed(path: Path, cap: int = PARSE_INPUT_CAP) -> str:
    """A command's recorded output as its parser saw it in the run: the whole text, or the head and tail of
    a bigger one within ``cap`` (the runner's ``bounded_input``), reading only what is kept. A regular file
    only (``open_regular``: a FIFO or a device is refused before it can block); OSError otherwise."""
    kept = CappedOutput(cap)
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= cap:
            kept.add(handle.read(cap + 1))
        else:
            kept.add(handle.read(kept.head_cap))
            kept.skip(size - kept.head_cap - kept.tail_cap)
            handle.seek(size - kept.tail_cap)
            kept.add(handle.read(kept.tail_cap))
    return kept.text()[0]


def read_back(
    kind: str,
    parse: Callable[[str], Any],
    path: Path,
    digest: str | None = None,
    seconds: float | None = None,
    reader: Callable[[Path], str] = read_as_parsed,
    kept: Any = None,
    as_json: bool = False,
    bundle_copy: bool = False,
) -> Any:
    """``parse`` of the bundle file at ``path`` as the run's parser saw it (its head and tail within the
    parse cap, read by ``reader``), the run's kept result when there is one (``digest``: the manifest's sha256
    of the file). ``kept``: the run's ParsedOutputs (None: a reader after the run); ``as_json``: the caller
    takes the result as plain JSON (``to_jsonable``), so what the run parsed of an output stored scrubbed
    serves it (scrubbed too), and with ``bundle_copy`` the bundle's ``parsed/`` copy of it as well.

    OSError when the file is not a regular file one may read; ReadBackTimedOut past ``seconds`` (by default
    READBACK_SECONDS)."""
    seconds = READBACK_SECONDS if seconds is None else seconds
    found = kept.recall_file(kind, digest, as_json) if kept is not None else None
    if found is None and as_json and bundle_copy:
        found = bundle_parsed(kind, path)
    if found is not None:
        return found
    text = reader(path)
    found = kept.recall(kind, text, as_json) if kept is not None else None
    if found is not None:
        return found
    if seconds <= 0:
        raise ReadBackTimedOut(f"no time was left to parse {path.name} again")
    try:
        return within(seconds, lambda: parse(text))
    except ParseBudgetExceeded:
        raise ReadBackTimedOut(f"parsing {path.name} again took more than {seconds:.1f} s") from None


PARSED_MAX_BYTES = 64 * 1024 * 1024  # a kept parse bigger than this is not read (the file is parsed again)


def bundle_parsed(kind: str, path: Path) -> Any | None:
    """What the run parsed of the output at ``path`` (``<bundle>/hosts/<host>/<file>``) when the bundle kept it
    (``parsed/hosts/<host>/<file>.json``: an output stored scrubbed), as JSON; else None."""
    host_dir = os.path.dirname(path)
    hosts_dir = os.path.dirname(host_dir)
    if os.path.basename(hosts_dir) != layout.HOSTS:
        return None
    root = os.path.dirname(hosts_dir)
    # Most bundles store no output scrubbed, so keep no parse: one look at the folder says so. Building each
    # copy's path with pathlib and opening a file that is not there was two fifths of a steady sweep's history
    # rows (1.04 against 0.62 ms a host on two real 64-host bundles).
    if not os.path.isdir(os.path.join(root, layout.PARSED)):
        return None
    kept = Path(root, layout.parsed_copy(f"{layout.HOSTS}/{os.path.basename(host_dir)}/{path.name}"))
    try:
        with open_regular(kept) as handle:
            data = handle.read(PARSED_MAX_BYTES + 1)
        document = json.loads(data) if len(data) <= PARSED_MAX_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("kind") != kind or not isinstance(document.get("result"), dict):
        return None
    return document["result"]
