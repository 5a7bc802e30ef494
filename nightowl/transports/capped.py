"""An output buffer with a cap that keeps the head and the tail, and counts what it cut from the middle.

A collector's newest lines are usually its last ones (``journalctl -k -b`` and engine logs print oldest
first), so a cap that kept only the first bytes would drop the Xid that raised the alert. The cut is
made on line boundaries where the output has lines, so every kept line is one the host printed.
"""

from __future__ import annotations

# The share of the cap given to the head; the rest keeps the tail.
HEAD_SHARE = 4


class CappedOutput:
    """Keeps at most ``cap`` bytes: the first ``cap // HEAD_SHARE`` and the last of the rest.

    ``total`` counts every byte added, ``read`` too (callers measure progress with it); only the head
    and a tail window are ever held, so memory stays bounded by about twice the cap.
    """

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.head_cap = self.cap // HEAD_SHARE
        self.tail_cap = self.cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data or self.tail_cap == 0:
            return
        self.tail += data
        if len(self.tail) > 2 * self.tail_cap:  # trim in bulk: amortised linear, never a copy per chunk
            del self.tail[: len(self.tail) - self.tail_cap]

    def skip(self, count: int) -> None:
        """Count ``count`` bytes past the head that are known to be cut (a file read from both ends)."""
        self.total += max(0, count)

    @property
    def overflowed(self) -> bool:
        return self.total > self.cap

    def value(self) -> tuple[bytes, int, int | None]:
        """(kept bytes, bytes cut, offset of the cut in the kept bytes or None when nothing was cut)."""
        if not self.overflowed:
            return b"".join((self.head, self.tail)), 0, None  # one copy (``bytes(head + tail)`` made two)
        head = _to_last_newline(bytes(self.head))
        tail = _past_first_newline(bytes(self.tail[-self.tail_cap :]) if self.tail_cap else b"")
        return head + tail, self.total - len(head) - len(tail), len(head)

    def text(self) -> tuple[str, int, int | None]:
        """``value`` decoded; an output that fits the head is decoded where it lies, without a copy first
        (a real-size node's outputs are megabytes, read once per command)."""
        if not self.overflowed and not self.tail:
            return self.head.decode("utf-8", errors="replace"), 0, None
        kept, cut, at = self.value()
        return kept.decode("utf-8", errors="replace"), cut, at


def _to_last_newline(head: bytes) -> bytes:
    """The head up to its last complete line (all of it when it holds no newline)."""
    end = head.rfind(b"\n")
    return head[: end + 1] if end >= 0 else head


def _past_first_newline(tail: bytes) -> bytes:
    """The tail from its first complete line (all of it when only its last byte is a newline)."""
    start = tail.find(b"\n")
    return tail[start + 1 :] if 0 <= start < len(tail) - 1 else tail


def cut_extra(stdout_cut_at: int | None, stderr_cut: int) -> dict[str, str]:
    """What a result's ``extra`` says of a cut: where stdout's kept head ends, how much stderr lost."""
    extra: dict[str, str] = {}
    if stdout_cut_at is not None:
        extra["stdout_cut_at_byte"] = str(stdout_cut_at)
    if stderr_cut:
        extra["stderr_truncated_bytes"] = str(stderr_cut)
    return extra
