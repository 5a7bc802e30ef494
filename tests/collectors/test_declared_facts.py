"""Every collector declares the facts it produces, and the declarations match what it really returns."""

from __future__ import annotations

from typing import Any

import pytest

from nightowl.collectors import MODULES, get_collector

KINDS = sorted(MODULES)


@pytest.mark.parametrize("kind", KINDS)
def test_every_collector_declares_its_facts_with_a_meaning(kind: str) -> None:
    declared = get_collector(kind).produces
    assert declared, f"{kind} declares no facts"
    for fact in declared:
        assert fact.name and fact.type and fact.meaning.strip(), f"{kind}: {fact} lacks a type or a meaning"


@pytest.mark.parametrize("kind", KINDS)
def test_facts_returned_are_declared_and_declared_facts_are_seen(
    kind: str, recorded_facts: dict[str, list[dict[str, Any]]]
) -> None:
    samples = recorded_facts.get(kind, [])
    assert samples, f"no recorded sample of {kind}"
    declared = {f.name for f in get_collector(kind).produces}
    seen: set[str] = set()
    for facts in samples:
        undeclared = sorted(set(facts) - declared)
        assert not undeclared, f"{kind} returns undeclared facts: {', '.join(undeclared)}"
        seen |= set(facts)
    never = sorted(f.name for f in get_collector(kind).produces if f.name not in seen and not f.optional)
    assert not never, f"{kind} declares facts no sample shows (mark them optional if rare): {', '.join(never)}"
