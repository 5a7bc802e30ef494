"""The names an expression reads, read off its tree (nightowl/engine/expressions.py ``undeclared_names``),
are Jinja's own ``meta.find_undeclared_variables`` on every expression of every built-in runbook and on
expressions that bind names, use globals or nest."""

from __future__ import annotations

from pathlib import Path

import pytest
from jinja2 import meta

from nightowl.engine import expressions
from nightowl.engine.model import Node, Runbook
from nightowl.engine.validate import _expressions_of
from nightowl.engine.yaml_lines import load_with_lines

RUNBOOKS = sorted((Path(__file__).resolve().parents[2] / "runbooks").glob("*.yaml"))
FRAGMENTS = sorted((Path(__file__).resolve().parents[2] / "runbooks" / "fragments").glob("*.yaml"))


def jinja_names(text: str) -> frozenset[str]:
    return frozenset(meta.find_undeclared_variables(expressions.environment().parse(text)))


def runbook_expressions() -> list[tuple[str, str, bool]]:
    found = []
    for path in RUNBOOKS:
        runbook = Runbook.model_validate(load_with_lines(path.read_text())[0])
        for node in runbook.nodes.values():
            for _rel, source, is_condition in _expressions_of(node):
                found.append((path.stem, source, is_condition))
    for path in FRAGMENTS:  # the nodes runbooks include (engine/includes.py)
        for raw in load_with_lines(path.read_text())[0]["nodes"].values():
            for _rel, source, is_condition in _expressions_of(Node.model_validate(raw)):
                found.append((path.stem, source, is_condition))
    return found


EXPRESSIONS = runbook_expressions()


def test_every_runbook_has_expressions() -> None:
    assert {stem for stem, _, _ in EXPRESSIONS} == {p.stem for p in RUNBOOKS + FRAGMENTS} and FRAGMENTS
    assert len(EXPRESSIONS) > 100


@pytest.mark.parametrize("stem", [p.stem for p in RUNBOOKS + FRAGMENTS])
def test_runbook_expression_names_equal_jinjas(stem: str) -> None:
    differ = []
    for _, source, is_condition in (e for e in EXPRESSIONS if e[0] == stem):
        if is_condition:
            ours, theirs = expressions.check_condition(source), jinja_names("{{ (" + source + ") }}")
        else:
            ours, theirs = expressions.template_names(source), jinja_names(source)
        if ours != theirs:
            differ.append((source, ours, theirs))
    assert differ == []


TEMPLATES = [
    "{{ a.b }} and {{ c | default(d) }}",
    "{{ range(3) | list }} {{ namespace }} {{ dict(x=y) }}",
    "{% for g in gpus %}{{ g.pci }} {{ loop.index }} {{ other }}{% endfor %}",
    "{% set n = hosts | length %}{{ n }} {{ m }}",
    "{% if x %}{{ y }}{% else %}{{ z }}{% endif %}",
    "plain text {# a comment naming q #} {{ w[v] }}",
    "{{ (p if q else r) ~ s.t(u) }}",
    "{{ kernel_log.events | selectattr('kind', 'equalto', k) | list | length }}",
    "{{ self }} {{ super() }} {{ loop }} {{ caller }} {{ varargs }} {{ kwargs }} {{ context }} {{ missing }}",
]
CONDITIONS = [
    "a.b > 0 and c is defined",
    "range(3) | list | length == 3",
    "x in [y, z] or not w",
    "(q | default([])) | select('gt', limit) | list | length > 0",
    "loop is defined",
    "self.x is defined and super is defined",
]


@pytest.mark.parametrize("text", TEMPLATES)
def test_template_names_equal_jinjas(text: str) -> None:
    assert expressions.template_names(text) == jinja_names(text)


@pytest.mark.parametrize("source", CONDITIONS)
def test_condition_names_equal_jinjas(source: str) -> None:
    assert expressions.check_condition(source) == jinja_names("{{ (" + source + ") }}")


def test_a_global_is_not_a_fact_and_a_bound_name_is_not_read() -> None:
    assert expressions.template_names("{{ range(n) }}") == {"n"}
    assert expressions.template_names("{% for g in gpus %}{{ g }}{% endfor %}") == {"gpus"}
