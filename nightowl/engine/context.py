"""The state a run is handed, never reached for: built once per command or receiver and passed down.

It used to live in module globals set from elsewhere: the history store a command activated, the readers
the ``gpu-history`` collector found in a list the history package filled, the parse results kept in a
process-wide memo. Two receivers' captures, a test and the command around it then shared them. A
:class:`RunContext` carries them instead (gpud's ``GPUdInstance`` is the model): the caller builds one,
``nightowl.run.run_and_save`` gives each run its own parse results (``for_run``), and the engine hands the
readers to the derived collectors that ask (``inputs["readers"]``), knowing nothing of what they read.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.engine.parse_memo import ParsedOutputs


@dataclass(frozen=True)
class RunContext:
    """What a command (or a receiver) hands every run it starts.

    ``history``: the store the run's bundle is recorded into (None: history off). ``readers``: named
    functions derived collectors may call (the store's rows of a host, a Prometheus's earlier incidents), by
    the name the collector asks for. ``stop``: the caller's own stop (a receiver shutting down). ``parsed``:
    the run's parse results (one per run: ``for_run``), which travel with its result to the history writer
    and the postmortem. The site runbook folders (``--runbook-path``) are not here: runbooks are resolved
    before a run starts (nightowl/library/runbooks.py)."""

    history: Path | None = None
    readers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    stop: threading.Event | None = field(default=None, compare=False)
    parsed: ParsedOutputs = field(default_factory=ParsedOutputs, compare=False)

    def for_run(self, kinds: Iterable[str], to_json: Callable[[Any], Any] | None = None) -> RunContext:
        """This context with parse results of its own for one run, keeping ``kinds`` (those its readers ask for)."""
        return dataclasses.replace(self, parsed=ParsedOutputs(kinds, to_json))
