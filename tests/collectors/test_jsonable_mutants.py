"""A parse result comes back from its JSON as the run parsed it (collectors/jsonable.py): every shape of field a
result may hold (a nested result, an optional one, a union of a result and a plain value, lists, tuples, sets,
maps of results), and the error a reader gets for JSON of another shape. The results here are small stand-ins
with those shapes; tests/history/test_network_parse_once.py does the same through fabric and ib-ports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from nightowl.collectors.base import to_jsonable
from nightowl.collectors.jsonable import from_jsonable


@dataclass(frozen=True)
class Port:
    name: str
    up: bool = True


@dataclass(frozen=True)
class Card:
    ports: tuple[Port, ...] = ()
    main: Port | None = None
    either: Port | str = ""
    spare: Port | list[Port] | None = None
    by_name: dict[str, Port] = field(default_factory=dict)
    raw: dict = field(default_factory=dict)  # type: ignore[type-arg]
    loose: dict | int = 0  # type: ignore[type-arg]
    seen: frozenset[int] = frozenset()
    names: list[str] = field(default_factory=list)
    many: int | list[Port] = 0
    counted: int = field(default=0, init=False)


def test_a_result_with_every_shape_comes_back_equal() -> None:
    card = Card(
        ports=(Port("p0"), Port("p1", up=False)),
        main=Port("m"),
        either=Port("e"),
        spare=Port("s"),
        by_name={"a": Port("a")},
        raw={"k": [1, 2]},
        loose={"x": 1},
        seen=frozenset({3, 1}),
        names=["n"],
    )
    back = from_jsonable(Card, {**to_jsonable(card), "seen": [3, 1]})
    assert back == card
    assert type(back.ports) is tuple and type(back.names) is list and type(back.seen) is frozenset
    assert back.by_name["a"] == Port("a") and back.spare == Port("s")


def test_a_union_of_a_result_and_a_plain_value_keeps_the_plain_value() -> None:
    assert from_jsonable(Card, {"either": "text", "loose": 7}) == Card(either="text", loose=7)
    assert from_jsonable(Card, {"spare": {"name": "s"}}).spare == Port("s")


def test_a_union_of_a_plain_value_and_a_list_of_results_reads_the_list() -> None:
    assert from_jsonable(Card, {"many": [{"name": "p"}]}).many == [Port("p")]
    assert from_jsonable(Card, {"many": 3}).many == 3


def test_missing_fields_take_their_defaults_and_unknown_keys_are_left_out() -> None:
    back = from_jsonable(Card, {"names": ["x"], "coverage": {"lines": 3}, "counted": 9, "main": None})
    assert back == Card(names=["x"]) and back.counted == 0


def test_a_result_already_built_is_returned_as_it_is() -> None:
    card = Card(names=["x"])
    assert from_jsonable(Card, card) is card


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], "Card: expected an object, got list"),
        ({"main": "m"}, "Port: expected an object, got str"),
        ({"ports": {"name": "p"}}, "expected a list, got dict"),
        ({"by_name": ["a"]}, "expected an object, got list"),
    ],
)
def test_json_of_another_shape_is_refused_saying_what_it_expected(data: Any, message: str) -> None:
    with pytest.raises(TypeError) as raised:
        from_jsonable(Card, data)
    assert str(raised.value) == message


def test_init_false_fields_are_not_passed() -> None:
    names = [f.name for f in dataclasses.fields(Card) if not f.init]
    assert names == ["counted"]
    assert from_jsonable(Card, {"counted": 1}).counted == 0
