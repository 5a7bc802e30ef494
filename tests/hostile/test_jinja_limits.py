"""Issue 14 item 4: runbook Jinja has a time budget and an output cap for every expression and template."""

from __future__ import annotations

import pytest

from nightowl.engine import limits
from nightowl.engine.expressions import ExpressionError, evaluate_condition, render
from tests.hostile.watchdog import watchdog

HOSTILE_TEMPLATES = [
    "{{ 'x'|center(2000000000) }}",
    "{{ 'x' * 2000000000 }}",
    "{{ [1, 2] * 1000000000 }}",
    "{{ 2 ** 1000000000 }}",
    "{{ '{:>2000000000}'.format(1) }}",
    "{{ '%2000000000d' % 1 }}",
    "{{ 'x'.ljust(2000000000) }}",
    "{{ 'abc'|indent(width=2000000000, first=True) }}",
    "{{ range(10)|batch(2000000000)|list }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}",
    "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
]


@pytest.mark.parametrize("source", HOSTILE_TEMPLATES)
def test_hostile_template_is_an_expression_error(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BUDGET_SECONDS", 0.5)
    with watchdog(), pytest.raises(ExpressionError):
        render(source, {})


@pytest.mark.parametrize(
    "source",
    [
        "('x'|center(2000000000)) == 'x'",
        "(range(100000)|map('string')|join * 100000)|length > 0",
        "'%.2000000000f'|format(1.0) == ''",
    ],
)
def test_hostile_condition_is_an_expression_error(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BUDGET_SECONDS", 0.5)
    with watchdog(), pytest.raises(ExpressionError):
        evaluate_condition(source, {})


def test_the_budget_stops_a_long_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BUDGET_SECONDS", 0.2)
    with watchdog(), pytest.raises(ExpressionError, match="budget"):
        render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {})


def test_ordinary_templates_still_work() -> None:
    assert (
        render("{{ 'ok'|center(6) }}|{{ 'ab' * 3 }}|{{ 2 ** 10 }}|{{ '{:>4}'.format(7) }}", {})
        == "  ok  |ababab|1024|   7"
    )
    assert render("{% for i in range(3) %}{{ i }}{% endfor %} {{ range(5)|length }}", {}) == "012 5"
    assert evaluate_condition("(kernel_log.xid_codes | length) > 0", {"kernel_log": {"xid_codes": [79]}})
    assert render("{{ '%5.1f'|format(3.14159) }} {{ '%d GPUs' % 8 }}", {}) == "  3.1 8 GPUs"
