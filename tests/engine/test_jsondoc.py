"""A JSON document is indented up to 16 hosts and compact past them, with the same content (jsondoc)."""

from __future__ import annotations

import json

from nightowl.cli.render import json_report
from nightowl.engine.jsondoc import COMPACT_AFTER_HOSTS, dumps


def _summary(hosts: int) -> dict[str, object]:
    return {
        "runbook": "node-health",
        "hosts": [{"host": f"gpu-{i}", "status": "ok", "path": ["a", "b"]} for i in range(hosts)],
    }


def test_sixteen_hosts_are_indented_and_seventeen_compact() -> None:
    assert COMPACT_AFTER_HOSTS == 16
    small, large = json_report(_summary(16)), json_report(_summary(17))
    assert small == json.dumps(_summary(16), indent=2)
    assert large == json.dumps(_summary(17)) and "\n" not in large
    assert json.loads(large) == _summary(17)


def test_values_json_cannot_hold_are_written_as_text() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd"

    assert json.loads(dumps({"value": Odd()}, hosts=1)) == {"value": "odd"}
    assert json.loads(dumps({"value": Odd()}, hosts=100)) == {"value": "odd"}


def test_a_report_without_hosts_is_indented() -> None:
    assert json_report({"runbook": "x", "hosts": None}) == json.dumps({"runbook": "x", "hosts": None}, indent=2)
