"""A repeating sweep's memo of parsed outputs (nightowl/engine/same_text.py): the same host's same text is not
parsed again, its facts come as a fresh copy, and nothing is kept outside ``remembering`` or for another host,
another cut, or a parse that failed."""

from __future__ import annotations

from typing import Any

import pytest

from nightowl.engine import same_text
from nightowl.engine.parse_memo import ParsedOutputs
from nightowl.engine.parse_output import parse_output


class Counting:
    """A collector whose parse counts its calls (and fails on "boom")."""

    kind = "counting"

    def __init__(self) -> None:
        self.parses = 0

    def parse(self, text: str) -> dict[str, Any]:
        self.parses += 1
        if "boom" in text:
            raise ValueError("unreadable")
        return {"lines": text.splitlines()}

    def facts(self, parsed: dict[str, Any]) -> dict[str, Any]:
        return {"kind": self.kind, "count": len(parsed["lines"]), "lines": list(parsed["lines"])}


def parse_on(host: str | None, collector: Counting, text: str, cut: int = 0, kept: Any = None) -> dict[str, Any]:
    token = same_text.HOST.set(host)
    try:
        return parse_output(collector, text, None, cut, kept)[0]
    finally:
        same_text.HOST.reset(token)


def test_outside_a_repeating_sweep_every_text_is_parsed() -> None:
    collector = Counting()
    parse_on("gpu-1", collector, "a\nb")
    parse_on("gpu-1", collector, "a\nb")
    assert collector.parses == 2


def test_the_same_hosts_same_text_is_parsed_once_and_its_facts_are_a_fresh_copy() -> None:
    collector = Counting()
    with same_text.remembering() as memo:
        first = parse_on("gpu-1", collector, "a\nb")
        first["lines"].append("added by the run")  # the run adds to its facts
        second = parse_on("gpu-1", collector, "a\nb")
    assert collector.parses == 1 and (memo.hits, memo.misses) == (1, 1)
    assert second == {"kind": "counting", "count": 2, "lines": ["a", "b"], "truncated": False, "truncated_bytes": 0}
    assert same_text._active is None  # noqa: SLF001 - forgotten with the block
    parse_on("gpu-1", collector, "a\nb")
    assert collector.parses == 2


@pytest.mark.parametrize(
    "second",
    [("gpu-2", "a\nb", 0), ("gpu-1", "a\nc", 0), ("gpu-1", "a\nb", 10), (None, "a\nb", 0)],
    ids=["another host", "another text", "another cut", "no host"],
)
def test_anything_else_is_parsed_again(second: tuple[str | None, str, int]) -> None:
    collector = Counting()
    with same_text.remembering():
        parse_on("gpu-1", collector, "a\nb")
        parse_on(second[0], collector, second[1], second[2])
    assert collector.parses == 2


def test_a_parse_that_failed_is_not_kept() -> None:
    collector = Counting()
    with same_text.remembering():
        failed = parse_on("gpu-1", collector, "boom")
        parse_on("gpu-1", collector, "boom")
    assert collector.parses == 2 and "parser failed" in failed["warnings"][0]


def test_a_hit_hands_the_parse_result_to_the_runs_readers() -> None:
    collector = Counting()
    with same_text.remembering():
        parse_on("gpu-1", collector, "a\nb", kept=ParsedOutputs(["counting"]))
        readers = ParsedOutputs(["counting"])  # the next round's run
        parse_on("gpu-1", collector, "a\nb", kept=readers)
    assert collector.parses == 1
    assert readers.recall("counting", "a\nb") == {"lines": ["a", "b"]}


def test_one_slot_per_host_and_collector_the_newest_text_in_it() -> None:
    collector = Counting()
    with same_text.remembering():
        for text in ("1", "2", "1"):  # a text that changes every round replaces the last one
            parse_on("gpu-1", collector, text)
        parse_on("gpu-1", collector, "1")
    assert collector.parses == 3


def test_past_the_budget_the_least_recently_used_host_goes_first() -> None:
    collector = Counting()
    with same_text.remembering(budget=6):
        for host in ("gpu-1", "gpu-2", "gpu-3"):
            parse_on(host, collector, "abc")  # 9 characters kept in all: gpu-1's go
        parse_on("gpu-3", collector, "abc")
        parse_on("gpu-1", collector, "abc")
    assert collector.parses == 4


# A bundle reader's parse of a stored file (engine/readback.py ``read_back``), kept across a repeating sweep's
# rounds by the file's SHA-256: module functions (a stable name), as the history store's reader uses.
FILE_PARSES: list[str] = []


def parse_counted(text: str) -> dict[str, Any]:
    FILE_PARSES.append(text)
    return {"lines": text.splitlines(), "chars": len(text)}


def parse_as_tuple(text: str) -> tuple[str, ...]:
    FILE_PARSES.append(text)
    return tuple(text.splitlines())


def read_text(path: Any) -> str:
    return str(path.read_text())


def read_file_back(path: Any, parse: Any = parse_counted, reader: Any = read_text, as_json: bool = True) -> Any:
    import hashlib

    from nightowl.collectors.base import to_jsonable
    from nightowl.engine.readback import read_back

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    kept = ParsedOutputs((), to_jsonable)  # the run's results: none for this file, as in a steady round's history
    return read_back("counting", parse, path, digest, reader=reader, kept=kept, as_json=as_json)


def test_a_stored_files_bytes_are_parsed_once_across_rounds_and_each_round_gets_its_own_copy(tmp_path: Any) -> None:
    FILE_PARSES.clear()
    first, second, other = tmp_path / "round-1.out", tmp_path / "round-2.out", tmp_path / "other.out"
    first.write_text("a\nb\n")
    second.write_text("a\nb\n")
    other.write_text("a\nc\n")
    with same_text.remembering():
        found = read_file_back(first)
        found["lines"].append("changed by a reader")
        assert read_file_back(second) == {"lines": ["a", "b"], "chars": 4}
        assert read_file_back(other) == {"lines": ["a", "c"], "chars": 4}
        assert FILE_PARSES == ["a\nb\n", "a\nc\n"]
        read_file_back(second, reader=lambda path: path.read_text())  # a reader without a stable name
        read_file_back(second, parse=lambda text: parse_counted(text))  # nor a parser
        assert len(FILE_PARSES) == 4
    read_file_back(second)  # the sweep is over: nothing kept
    assert len(FILE_PARSES) == 5


def test_a_result_is_kept_as_a_reader_takes_it_and_only_what_json_gives_back_as_it_was(tmp_path: Any) -> None:
    FILE_PARSES.clear()
    path = tmp_path / "out"
    path.write_text("x\ny\n")

    def plain(value: Any) -> Any:
        return value

    with same_text.remembering():
        assert read_file_back(path, parse=parse_as_tuple) == ("x", "y")  # this round: the parse itself
        assert read_file_back(path, parse=parse_as_tuple) == ["x", "y"]  # as JSON (to_jsonable's): as kept
        assert len(FILE_PARSES) == 1
        assert read_file_back(path, parse=parse_as_tuple, as_json=False) == ("x", "y")  # a reader of the object
        assert len(FILE_PARSES) == 2
        for n, result in enumerate(({"0": float("nan")}, {"pair": (1, 2)}, {"1": [1.5, None]})):
            same_text.keep_file("counting", f"{n:064x}", parse_counted, read_text, result, plain)
        kept = [same_text.recalled_file("counting", f"{n:064x}", parse_counted, read_text) for n in range(3)]
        assert kept == [None, None, {"1": [1.5, None]}]
        same_text.keep_file("counting", None, parse_counted, read_text, {"no": "digest"}, plain)
        assert same_text.recalled_file("counting", None, parse_counted, read_text) is None


def test_only_a_function_its_module_holds_by_its_name_keys_a_kept_result() -> None:
    """A wrapper that took the name of what it wraps (``functools.wraps``: a collector's normalising parse), a bound
    method or a lambda may differ from the function that name gives: nothing is kept for them."""
    import functools

    @functools.wraps(parse_counted)
    def wrapper(text: str) -> dict[str, Any]:
        return {"wrapped": parse_counted(text)}

    assert same_text._stable_name(parse_counted) == f"{__name__}.parse_counted"
    assert same_text._stable_name(wrapper) is None
    assert same_text._stable_name(Counting().parse) is None
    assert same_text._stable_name(lambda text: text) is None
    assert same_text._stable_name(Counting()) is None  # an object (its class's module, no name of its own)


def test_the_file_results_kept_stay_within_their_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(same_text, "MAX_FILE_RESULTS_CHARS", 36)
    monkeypatch.setattr(same_text, "MAX_FILE_RESULT_CHARS", 25)

    def keep(n: int, text: str) -> None:
        same_text.keep_file("counting", f"{n:064x}", parse_counted, read_text, text, str)

    def kept() -> list[str | None]:
        return [same_text.recalled_file("counting", f"{n:064x}", parse_counted, read_text) for n in range(5)]

    with same_text.remembering():
        for n, text in enumerate(("a" * 10, "é" * 10, "c" * 10)):  # 12 characters of JSON each: 36 in all
            keep(n, text)
        assert kept() == ["a" * 10, "é" * 10, "c" * 10, None, None]
        assert same_text.recalled_file("counting", f"{0:064x}", parse_counted, read_text) == "a" * 10  # used last
        keep(3, "x")  # 3 more: the least recently used goes
        keep(4, "d" * 24)  # 26: over a result's own cap, never kept
        assert kept() == ["a" * 10, None, "c" * 10, "x", None]
        keep(4, "d" * 23)  # 25: at it
        assert kept()[4] == "d" * 23
