"""Every recorded sample's facts, per collector kind: what the declared facts are checked against.

Samples are the parse cases (tests/collectors/cases/<kind>/*.json), every recorded output of
fixtures/hosts/<host>/<kind>[.N].out, and every rehearsal of every built-in runbook replayed with
each collector's ``facts``/``derive`` recorded (derived collectors and job-merged facts included).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tests.helpers import CASES, ROOT

# Kinds that share a parser with another kind read that kind's samples too.
SAME_PARSER = {"nvlink-errors": "nvlink", "dcgmi-diag-drained": "dcgmi-diag", "nccl-tests-run": "nccl-tests"}


def _recording(collector: Any, seen: dict[str, list[dict[str, Any]]]) -> Any:
    if hasattr(collector, "derive"):
        derive = collector.derive

        def recorded_derive(*args: Any) -> dict[str, Any]:
            facts = derive(*args)
            seen[collector.kind].append(facts)
            return facts

        return dataclasses.replace(collector, derive=recorded_derive)
    facts_of = collector.facts

    def recorded_facts(result: Any) -> dict[str, Any]:
        facts = facts_of(result)
        seen[collector.kind].append(facts)
        return facts

    return dataclasses.replace(collector, facts=recorded_facts)


def _parse_samples(kind: str, get_collector: Callable[[str], Any], seen: dict[str, list[dict[str, Any]]]) -> None:
    collector = get_collector(kind)
    if getattr(collector, "inputs", None):
        return
    source_kind = SAME_PARSER.get(kind, kind)
    texts = [
        (ROOT / json.loads(p.read_text())["input"]).read_text(errors="replace")
        for p in (CASES / source_kind).glob("*.json")
    ]
    for name in (source_kind, kind):
        for path in sorted((ROOT / "fixtures" / "hosts").glob(f"*/{name}.out")) + sorted(
            (ROOT / "fixtures" / "hosts").glob(f"*/{name}.[0-9].out")
        ):
            texts.append(path.read_text(errors="replace"))
    for text in texts:
        seen[kind].append(collector.facts(collector.parse(text)))


def sample_facts() -> dict[str, list[dict[str, Any]]]:
    """kind -> the facts of every sample of it (built once per session: the ``recorded_facts`` fixture)."""
    from nightowl.collectors import MODULES, get_collector
    from nightowl.library import rehearse
    from nightowl.library.runbooks import builtin_paths

    seen: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for kind in MODULES:
        _parse_samples(kind, get_collector, seen)
    import nightowl.collectors as collectors

    original = collectors.get_collector
    collectors.get_collector = lambda kind: _recording(original(kind), seen)  # type: ignore[assignment]
    try:
        for runbook in builtin_paths():
            for case in rehearse.rehearsal_cases(runbook):
                rehearse.replay_case(runbook, case)
    finally:
        collectors.get_collector = original  # type: ignore[assignment]
    return dict(seen)
