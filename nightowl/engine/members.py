"""Filters that pick members of a job by their own facts, for a verdict's ``implicates``.

``hosts`` in a job's context maps each reachable member to its facts (``{namespace: facts}``). A
verdict names the members its action is for from those facts (``hosts | members_with('kernel_log.xid_codes')``),
never by finding host names in its summary prose. Each filter returns member names in sorted order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any


def _value(facts: Any, path: str) -> Any:
    value = facts
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _items(value: Any, attribute: str | None) -> list[Any]:
    items = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
    if attribute is not None:
        items = [i.get(attribute) for i in items if isinstance(i, Mapping)]
    return [i for i in items if i is not None]


def _matches(value: Any, wanted: Any, attribute: str | None) -> bool:
    if wanted is None and attribute is None:
        return bool(value) and value is not False
    found = _items(value, attribute)
    if wanted is None:
        return bool(found)
    wanted_items = list(wanted) if isinstance(wanted, (list, tuple, set, frozenset)) else [wanted]
    return any(f in wanted_items for f in found)


def members_with(hosts: Mapping[str, Any], path: str, wanted: Any = None, attribute: str | None = None) -> list[str]:
    """Members whose fact at ``path`` is set: truthy when ``wanted`` is None; else holding (or equal to) one
    of ``wanted``. ``attribute`` reads that key of each entry of a list of objects first."""
    return sorted(h for h, facts in hosts.items() if _matches(_value(facts, path), wanted, attribute))


def members_other_than(hosts: Mapping[str, Any], path: str, expected: Any) -> list[str]:
    """Members that have a value at ``path`` and it is not ``expected`` (a digest that is not the golden one)."""
    return sorted(h for h, f in hosts.items() if (v := _value(f, path)) is not None and v != expected)


def members_in_minority(hosts: Mapping[str, Any], path: str) -> list[str]:
    """Members whose value at ``path`` fewer than half of the members with a value hold (no majority: none)."""
    values = {h: v for h, f in hosts.items() if isinstance(v := _value(f, path), (str, int, float, bool))}
    counts = Counter(values.values())
    return sorted(h for h, v in values.items() if counts[v] * 2 < len(values))


def members_lacking(hosts: Mapping[str, Any], path: str) -> list[str]:
    """Members whose collector (the path's first part) was read and whose fact at ``path`` is empty: a log
    without a single Init COMPLETE. A member whose collector failed is not picked: nothing was read."""
    namespace = path.split(".")[0]
    return sorted(h for h, f in hosts.items() if _value(f, namespace) and not _value(f, path))


def only_members(names: Iterable[Any], hosts: Mapping[str, Any]) -> list[str]:
    """The names that are members of the job (a list of host names some fact gives), sorted, once each."""
    return sorted({str(n) for n in names if str(n) in hosts})


FILTERS = {
    "members_with": members_with,
    "members_other_than": members_other_than,
    "members_in_minority": members_in_minority,
    "members_lacking": members_lacking,
    "only_members": only_members,
}
