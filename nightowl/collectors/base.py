"""What a collector is: the commands it may run, and a pure parser of their output.

Parsing never runs commands and running never parses, so a live run, a replay
of a saved bundle and a unit test all go through the same ``parse``.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from nightowl.collectors.normalise import normalise

T = TypeVar("T")


def to_jsonable(value: Any) -> Any:
    """Turn a parse result (dataclasses, tuples, dicts) into plain JSON types."""
    kind = type(value)
    if kind in _SCALARS:  # most values of a result: nothing to turn, so no test below is paid for them
        return value
    names = _DATACLASS_FIELDS.get(kind)
    if names is None:
        names = _DATACLASS_FIELDS.setdefault(kind, _field_names(kind))
    # Items that are scalars are taken as they are, sparing a call for each (most fields and list items).
    if names:
        fields = {}
        for name in names:
            item = getattr(value, name)
            fields[name] = item if type(item) in _SCALARS else to_jsonable(item)
        return fields
    if isinstance(value, dict):
        return {str(k): v if type(v) in _SCALARS else to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _SCALARS else to_jsonable(v) for v in value]
    return value


_SCALARS = frozenset({str, int, float, bool, type(None)})
# Per class, the names ``dataclasses.fields`` gives (asked once per class, not once per object: a
# real-size nvlink result is 144 link objects); () for a class that is no dataclass.
# cache: keyed by the class, whose fields never change while the process runs.
_DATACLASS_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    if not dataclasses.is_dataclass(kind):
        return ()
    return tuple(field.name for field in dataclasses.fields(kind))


def number(text: str) -> int | float | None:
    """A number as printed by a tool: ``1,024`` -> 1024, ``0.5`` -> 0.5, ``inf`` -> inf; else None."""
    cleaned = text.replace(",", "")
    try:
        return int(cleaned)
    except ValueError:
        try:
            return float(cleaned)
        except ValueError:
            return None


@dataclass(frozen=True)
class Fact:
    """One fact a collector produces: its name under the collector's namespace, its type, what it means.

    ``optional`` marks a fact that only some outputs carry (a field of one tool version, an error
    path), so that no recorded sample is required to show it.
    """

    name: str
    type: str
    meaning: str
    optional: bool = False


# Every collector's facts carry these two, also when its parser failed (the engine records the failure).
COMMON_FACTS = (
    Fact("kind", "str", "the collector kind that produced these facts"),
    # optional: a derived collector may return none of its own; a failed one always carries it
    Fact("warnings", "list[str]", "what the parser could not read or found odd, in words", optional=True),
    # set by the engine on every command output it parsed (a derived collector has none)
    Fact("truncated", "bool", "the output passed the transport's cap and its middle was cut", optional=True),
    Fact("truncated_bytes", "int", "how many bytes were cut (head and tail kept); 0 when none", optional=True),
    # set by the engine on every command output it parsed (collectors/coverage.py, collectors/normalise.py)
    Fact(
        "coverage",
        "dict",
        "lines with text, lines read as known structure, whether the parse found what it needs (understood)"
        " and the first unrecognised lines",
        optional=True,
    ),
    Fact(
        "normalised",
        "list[str]",
        "the normaliser's families applied before parsing (indent, prefixes ...)",
        optional=True,
    ),
)


def declare(*rows: tuple[str, str, str] | Fact) -> tuple[Fact, ...]:
    """The facts a collector produces: ``kind`` and ``warnings``, then ``(name, type, meaning)`` rows."""
    facts = COMMON_FACTS + tuple(row if isinstance(row, Fact) else Fact(*row) for row in rows)
    names = [f.name for f in facts]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"facts declared twice: {', '.join(duplicates)}")
    return facts


def optional(name: str, type_: str, meaning: str) -> Fact:
    """A fact only some outputs carry (see ``Fact.optional``)."""
    return Fact(name, type_, meaning, optional=True)


# Each domain folder's facts.yaml (gpu/, host/, network/, nccl/, serving/) declares its kinds: the facts, description
# and timeout of each. The module (file = kind) keeps what runs and what parses: commands, parse, facts.
FACTS_FILE = "facts.yaml"


class RegistrationError(ValueError):
    """A facts.yaml entry is malformed, names a kind twice, or a module asks for a kind none declares."""


@functools.cache
def _entries() -> dict[str, tuple[Path, dict[str, Any]]]:
    from nightowl.knowledge import KnowledgeError, load_yaml

    entries: dict[str, tuple[Path, dict[str, Any]]] = {}
    for file in sorted(Path(__file__).resolve().parent.glob(f"*/{FACTS_FILE}")):
        try:
            data = load_yaml(file) or {}
        except KnowledgeError as error:
            raise RegistrationError(str(error)) from None
        for kind, entry in data.items():
            if kind in entries:
                raise RegistrationError(f"{file}: kind {kind!r} is also declared in {entries[kind][0]}")
            if not isinstance(entry, dict):
                raise RegistrationError(f"{file}: {kind}: expected a mapping (description, timeout, facts)")
            entries[kind] = (file, entry)
    return entries


def _fact(file: Path, kind: str, name: str, row: Any) -> Fact:
    # a row is [type, meaning] or [type, meaning, optional]
    if not (isinstance(row, list) and len(row) in (2, 3) and all(isinstance(v, str) for v in row)):
        raise RegistrationError(f"{file}: {kind}.facts.{name}: expected [type, meaning] or [type, meaning, optional]")
    if len(row) == 3 and row[2] != "optional":
        raise RegistrationError(f"{file}: {kind}.facts.{name}: the third item can only be 'optional'")
    return Fact(name, row[0], row[1], optional=len(row) == 3)


def _own_facts(kind: str, seen: tuple[str, ...] = ()) -> tuple[Fact, ...]:
    file, entry = _entry(kind)
    if kind in seen:
        raise RegistrationError(f"{file}: {kind}: includes itself ({' -> '.join((*seen, kind))})")
    # `includes: other-kind` first takes that kind's facts (a companion collector, a superset of another)
    included = _own_facts(entry["includes"], (*seen, kind)) if "includes" in entry else ()
    rows = entry.get("facts") or {}
    return included + tuple(_fact(file, kind, name, row) for name, row in rows.items())


def _entry(kind: str) -> tuple[Path, dict[str, Any]]:
    found = _entries().get(kind)
    if found is None:
        raise RegistrationError(f"no collectors/*/{FACTS_FILE} declares kind {kind!r}")
    return found


@functools.cache
def _registered(kind: str) -> tuple[tuple[str, Any], ...]:
    file, entry = _entry(kind)
    unknown = sorted(set(entry) - {"description", "timeout", "facts", "includes"})
    if unknown:
        raise RegistrationError(f"{file}: {kind}: unknown key(s) {', '.join(unknown)}")
    try:
        produces = declare(*_own_facts(kind))
    except ValueError as error:
        raise RegistrationError(f"{file}: {kind}: {error}") from None
    fields: list[tuple[str, Any]] = [("kind", kind), ("produces", produces)]
    if "description" in entry:
        fields.append(("description", str(entry["description"])))
    if "timeout" in entry:
        fields.append(("timeout", float(entry["timeout"])))
    return tuple(fields)


def registered(kind: str) -> dict[str, Any]:
    """``kind``, ``produces``, ``description`` and ``timeout`` of a kind as its domain's facts.yaml declares
    them: keyword arguments for ``Collector``/``DerivedCollector`` (read once, on the first registration)."""
    return dict(_registered(kind))


def _plain_facts(result: Any) -> dict[str, Any]:
    facts = to_jsonable(result)
    return facts if isinstance(facts, dict) else {"value": facts}


def parsed_once(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse``, handing out its last result again (per thread) for the very same text object.

    The engine asks a collector's ``shows_nothing`` and then parses the same output; a ``shows_nothing``
    that parses (an 8-GPU ``nvidia-smi -q`` is 80 KB, ~20 ms a parse) would parse it twice. Only for parse
    results nobody changes (frozen or only read)."""
    memo = threading.local()

    @functools.wraps(parse)
    def parse_once(text: str) -> T:
        last = getattr(memo, "last", None)
        if last is not None and last[0] is text:
            return last[1]  # type: ignore[no-any-return]
        result = parse(text)
        memo.last = (text, result)
        return result

    return parse_once


def _normalising(parse: Callable[[str], Any], kind: str) -> Callable[[str], Any]:
    """``parse`` reading the text as the normaliser unwraps it for ``kind`` (collectors/normalise.py)."""

    def unwrapped(text: str) -> str:
        return normalise(text, kind).text

    @functools.wraps(parse)
    def parse_normalised(text: str) -> Any:
        return parse(unwrapped(text))

    parse_normalised.strips_escapes = True  # type: ignore[attr-defined]
    parse_normalised.strip = unwrapped  # type: ignore[attr-defined]  # what the parser reads of a text
    return parse_normalised


@dataclass(frozen=True)
class Collector:
    """One kind of evidence.

    ``commands`` is both what runs and the declaration of everything this
    collector may ever run: alternatives tried in order until one exits 0
    (``journalctl -k`` then ``dmesg -T``). The engine refuses any other argv, and a
    collector that needs root says so in its argv (``sudo -n -- dmesg -T``).
    ``facts`` turns the parse result into the facts runbook conditions read:
    the contract JSON plus derived, named conveniences.

    The contract a collector keeps: ``parse`` is pure (text in, typed result out; it runs
    nothing and reads no file); odd output becomes a warning in the result rather than an
    exception (and an exception is recorded by the engine as a parse error, never a crash);
    an empty or unreadable output never parses into facts that look healthy. ``timeout``
    bounds each command; an ``invasive`` collector (load on GPUs or the network) runs only
    when the run allows it.
    """

    kind: str
    commands: tuple[tuple[str, ...], ...]
    parse: Callable[[str], Any]
    facts: Callable[[Any], dict[str, Any]] = _plain_facts
    timeout: float = 15.0
    invasive: bool = False
    description: str = ""
    # Checks the runbook parameters this collector reads, before anything runs: the reasons they are unusable.
    check_params: Callable[[Mapping[str, Any]], list[str]] | None = None
    # Whether an output that exited 0 shows nothing at all (no_data, never "clean"); default: blank text.
    shows_nothing: Callable[[str], bool] | None = None
    # Every fact ``facts`` may return (docs/reference.md#kinds); runbook validation checks reads against it.
    produces: tuple[Fact, ...] = ()
    # Reads only what the source added since the last read, where a run keeps positions (engine/incremental.py).
    cursor: Any = None

    def __post_init__(self) -> None:
        # The one place every output passes before its parser (live, replay, `nightowl parse`, the
        # postmortem): the normaliser unwraps what a paste, a page or a launcher added (terminal escapes,
        # entities, prefixes, indentation: collectors/normalise.py), so no parser sees them.
        if not getattr(self.parse, "strips_escapes", False):
            object.__setattr__(self, "parse", _normalising(self.parse, self.kind))
        # ``shows_nothing`` is asked before the parse, of the same output: it reads the text as the parser does
        # (a table quoted with "> " is a table, not "nothing to read").
        check = self.shows_nothing
        if check is not None and not getattr(check, "strips_escapes", False):
            object.__setattr__(self, "shows_nothing", _normalising(check, self.kind))

    def assess(self, text: str, facts: dict[str, Any] | None) -> dict[str, Any]:
        """``coverage`` and ``normalised`` of one output and the facts parsed from it (collectors/coverage.py)."""
        from nightowl.collectors.coverage import assess

        return assess(self.kind, text, facts)

    def check_argv(self, argv: tuple[str, ...]) -> str | None:
        """Why a resolved argv (parameters filled in) may not run, or None: the engine asks before running it,
        so a parameter value can never turn an allowed read-only shape into another command."""
        from nightowl.collectors.readonly import allowed_shape

        if allowed_shape(tuple(argv), resolved=True) is None:
            return "is not one of the read-only command shapes nightowl allows once its parameters are filled in"
        return None


@dataclass(frozen=True)
class DerivedCollector:
    """A collector computed from other collectors' facts (and the run's parameters), not a command.

    The engine runs it after the collectors of its node and hands ``derive`` the facts of the
    namespaces in ``inputs``, plus ``"hosts"``: each host's own facts (one host, or every member of
    a job). It never touches a host.
    """

    kind: str
    inputs: tuple[str, ...]
    derive: Callable[[Mapping[str, Mapping[str, Any]], Mapping[str, Any]], dict[str, Any]]
    commands: tuple[tuple[str, ...], ...] = ()
    timeout: float = 0.0
    invasive: bool = False
    description: str = ""
    check_params: Callable[[Mapping[str, Any]], list[str]] | None = None
    # Namespaces read when collected and handed over empty ({}) when not: evidence that sharpens the
    # judgement (nvidia-smi's GPU addresses) but whose absence must not skip it.
    optional_inputs: tuple[str, ...] = ()
    produces: tuple[Fact, ...] = ()

    def parse(self, text: str) -> Any:
        """Always raises: a derived collector has no command output to parse."""
        raise TypeError(f"{self.kind} is derived from {', '.join(self.inputs)}; it parses no output")

    def facts(self, result: Any) -> dict[str, Any]:
        """The derived facts as they are (``derive`` already returns facts)."""
        return dict(result)


def parse_document(collector: Any, text: str) -> dict[str, Any]:
    """What ``nightowl parse`` and the MCP ``parse`` tool answer: the contract JSON of the parse, with its
    ``coverage`` and ``normalised`` (contract section 7); a parser that raises becomes a warning."""
    try:
        parsed = collector.parse(text)
        result = to_jsonable(parsed)
        assess = getattr(collector, "assess", None)
        if assess is not None and isinstance(result, dict):
            result.update(assess(text, collector.facts(parsed)))
    except Exception as exc:  # noqa: BLE001 - the contract promises JSON whenever the file was read
        result = {"kind": collector.kind, "warnings": [f"parser failed: {type(exc).__name__}: {exc}"]}
    return result  # type: ignore[no-any-return]
