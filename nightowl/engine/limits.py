"""Resource limits for runbook Jinja: every expression and template gets a time budget and an output cap.

Jinja's sandbox stops escapes but not exhaustion: nested ``range`` loops, ``'x'|center(2000000000)``,
``'x' * 10**10`` or ``2 ** 10**9`` in a summary hang a triage or take gigabytes. The sandbox's hooks
(``call``, ``call_binop``, attribute and item access, ``range``, every filter) check a per-thread
deadline and refuse sizes above ``MAX_OUTPUT`` before they are allocated.
See https://jinja.palletsprojects.com/en/stable/sandbox/ (operator intercepting, ``call``).
"""

from __future__ import annotations

import functools
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from nightowl.engine.members import FILTERS

MAX_OUTPUT = 1_000_000  # characters (or items) any one value or rendered template may hold
BUDGET_SECONDS = 5.0  # per expression or template; a real one takes microseconds
_MAX_POWER_BITS = 100_000
# A width or precision of 7+ digits in a format spec: "{:>2000000000}", "%.2000000000f".
_HUGE_FORMAT_BRACE = re.compile(r"\{[^{}]*\d{7,}[^{}]*\}")
_HUGE_FORMAT_PERCENT = re.compile(r"%[-#0 +*]*(?:\d{7,}|\d*\.\d{7,})")


class LimitExceeded(Exception):
    """An expression or template went past its time budget or output cap."""


_state = threading.local()


@contextmanager
def budget(seconds: float | None = None) -> Iterator[None]:
    """Give the expression or template evaluated inside this block a deadline."""
    previous = getattr(_state, "deadline", None)
    _state.deadline = time.monotonic() + (BUDGET_SECONDS if seconds is None else seconds)
    try:
        yield
    finally:
        _state.deadline = previous


def check_deadline() -> None:
    deadline = getattr(_state, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise LimitExceeded(f"evaluation took longer than its {BUDGET_SECONDS:g} s budget")


def check_size(value: Any) -> Any:
    if isinstance(value, (str, bytes, list, tuple, dict, set)) and len(value) > MAX_OUTPUT:
        raise LimitExceeded(f"a value of {len(value)} items is larger than the {MAX_OUTPUT} cap")
    return value


def _check_size_args(args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """A width, count or length argument above the cap would allocate that much: refuse it first."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_OUTPUT:
            raise LimitExceeded(f"argument {value} is larger than the {MAX_OUTPUT} cap")


def _check_format(template: Any) -> None:
    if isinstance(template, str) and (_HUGE_FORMAT_BRACE.search(template) or _HUGE_FORMAT_PERCENT.search(template)):
        raise LimitExceeded("a format width or precision larger than the cap")


class BudgetedRange(Sequence[int]):
    """``range`` for templates: the sandbox's size cap, plus the deadline checked while iterating."""

    def __init__(self, *args: int) -> None:
        self._range = safe_range(*args)

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, index: Any) -> Any:
        return self._range[index]

    def __iter__(self) -> Iterator[int]:
        for count, value in enumerate(self._range):
            if count % 256 == 0:
                check_deadline()
            yield value


def _guard_filter(function: Callable[..., Any]) -> Callable[..., Any]:
    # Arguments after the piped value (and after the environment or context, for filters that take it).
    first_argument = 2 if getattr(function, "jinja_pass_arg", None) is not None else 1
    is_format = getattr(function, "__name__", "") == "do_format"

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        check_deadline()
        _check_size_args(args[first_argument:], kwargs)
        if is_format and args:
            _check_format(args[0])  # `x|format(...)` applies x as a %-format
        return check_size(function(*args, **kwargs))

    return guarded


class LimitedSandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = BudgetedRange
        self.globals.pop("lipsum", None)
        # a job's members picked by their own facts (a verdict's `implicates`) join Jinja's filters
        self.filters = {name: _guard_filter(f) for name, f in {**self.filters, **FILTERS}.items()}

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        check_deadline()
        if operator == "*":
            _check_repeat(left, right)
            _check_repeat(right, left)
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
            if right * math.log2(abs(left)) > _MAX_POWER_BITS:
                raise LimitExceeded(f"{left} ** {right} is larger than the cap")
        elif operator == "%":
            _check_format(left)
        return check_size(super().call_binop(context, operator, left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        check_deadline()
        _check_size_args(args, kwargs)
        return check_size(super().call(__context, __obj, *args, **kwargs))

    def getattr(self, obj: Any, attribute: str) -> Any:
        check_deadline()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        check_deadline()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format(value.__self__)
        return wrapped


def _check_repeat(sequence: Any, count: Any) -> None:
    if (
        isinstance(sequence, (str, bytes, list, tuple))
        and isinstance(count, int)
        and len(sequence) * count > MAX_OUTPUT
    ):
        raise LimitExceeded(f"repeating {len(sequence)} items {count} times is larger than the cap")


def render_capped(template: Any, context: dict[str, Any]) -> str:
    """Render chunk by chunk, stopping at the output cap or the deadline."""
    pieces: list[str] = []
    size = 0
    for piece in template.generate(**context):
        size += len(piece)
        if size > MAX_OUTPUT:
            raise LimitExceeded(f"template output larger than the {MAX_OUTPUT} character cap")
        check_deadline()
        pieces.append(piece)
    return "".join(pieces)
