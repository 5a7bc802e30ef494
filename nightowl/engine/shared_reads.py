"""One run of an argv that two incremental readers of one host ask in one run (issue 46: read only what changed).

A reader may name argvs it shares, each with the limit every reader runs it under (``shares``: the cheap-first
readers' one ``--query-gpu`` of both their fields, collectors/gpu/nvidia_smi/cheap.py). Where another kind's
reader of the same host asked that argv in this run, its answer is taken instead of running the command again:
on a GPU node each such command starts the driver's management library on every GPU, and a repeated sweep's
steady round asked it twice a host. The first reader to ask runs it; a reader of another kind that asks while
it runs waits for it. Under the same limit, the first run's answer is the one the other's own run would have
had to go by, a timeout by the host's own ``timeout`` included; a run that raised, or one still unanswered
well past the limit, is none, and the other reader runs its own. Each answer is given once to one other kind,
then dropped; a kind that asks again reads again, and a runbook's ``wait:`` drops the host's answers
(``forget``). The engine knows nothing of what the argv reads: only that the readers declared it shareable.

The answer taken is recorded under the taking kind with ``extra["answer_of"]``: the kind whose run it is
(bundle_writer.py writes it to the manifest entry as ``answer_of``), so a bundle says which entry is the run
and which the same run's answer.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from nightowl.transports.base import CommandResult

# What the answers kept for a kind that has not asked yet may hold in all (a runbook with only one of the
# readers leaves each host's answer here until the run ends): past this, an answer is not kept.
KEPT_BYTES_MAX = 16 * 1024 * 1024
# How long past the limit a reader waits for another kind's run of the argv before it runs its own (the run
# ends at the limit on the host; its answer may take a moment more to arrive).
GRACE_SECONDS = 5.0

Key = tuple[str, tuple[str, ...]]  # host, argv


@dataclasses.dataclass
class _Slot:
    kind: str
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: CommandResult | None = None


class SharedReads:
    """The shared argvs' answers of one run, by host and argv. Thread-safe (collectors run side by side)."""

    def __init__(self) -> None:
        self._slots: dict[Key, _Slot] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def run(
        self, host: str, kind: str, argv: tuple[str, ...], timeout: float, run: Callable[[], CommandResult]
    ) -> CommandResult:
        """``run()``'s answer, or another kind's answer to the same argv on ``host`` in this run."""
        key = (host, argv)
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(kind)
                mine = True
            else:
                mine = False
        if mine:
            return self._run_for(key, slot, run)
        if slot.kind == kind or not slot.done.wait(max(0.0, timeout) + GRACE_SECONDS):
            return run()  # the same kind asks again (a fresh read), or the other run is stuck past its limit
        with self._lock:
            if self._slots.get(key) is slot:
                del self._slots[key]
                self._bytes -= _size(slot.result)
        if slot.result is None:  # the other read raised: this one runs its own
            return run()
        return dataclasses.replace(slot.result, extra={**slot.result.extra, "answer_of": slot.kind})

    def _run_for(self, key: Key, slot: _Slot, run: Callable[[], CommandResult]) -> CommandResult:
        try:
            result = run()
        except BaseException:
            self._drop(key, slot)
            slot.done.set()
            raise
        with self._lock:
            if self._slots.get(key) is slot and self._bytes + _size(result) <= KEPT_BYTES_MAX:
                slot.result = result
                self._bytes += _size(result)
            elif self._slots.get(key) is slot:
                del self._slots[key]
        slot.done.set()
        return result

    def forget(self, host: str) -> None:
        """No later ask takes an answer read before now on ``host`` (the walk waits: engine/runner.py)."""
        with self._lock:
            for key in [key for key in self._slots if key[0] == host]:
                self._bytes -= _size(self._slots.pop(key).result)

    def _drop(self, key: Key, slot: _Slot) -> None:
        with self._lock:
            if self._slots.get(key) is slot:
                del self._slots[key]


def _size(result: CommandResult | None) -> int:
    return 0 if result is None else len(result.stdout) + len(result.stderr)
