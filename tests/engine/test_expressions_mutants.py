"""engine/expressions.py on its own (issue 30 mutation figures): what a condition may be, what each
evaluation returns or refuses, and which fact paths an expression reads."""

from __future__ import annotations

import pytest

from nightowl.engine.expressions import (
    BUILTIN_NAMES,
    ExpressionError,
    attribute_reads,
    check_condition,
    evaluate_condition,
    evaluate_value,
    fact_paths,
    render,
    resolve_path,
    template_names,
)

NOT_BOOL = "condition does not yield a bool"


@pytest.mark.parametrize(
    "source",
    [
        "x == 1 and kernel_log.xid_codes",  # the right side of `and` is a list
        "kernel_log.xid_codes or x == 1",  # the left side of `or` is a list
        "1",
        "'ok'",
        "kernel_log.xid_codes",
        "kernel_log.xid_codes | length",
    ],
)
def test_a_condition_that_is_not_a_boolean_is_refused(source: str) -> None:
    with pytest.raises(ExpressionError, match=NOT_BOOL):
        check_condition(source)


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("true", set()),
        ("False", set()),
        ("a > 1", {"a"}),
        ("not a", {"a"}),
        ("a is defined", {"a"}),
        ("True and (a > 1 or not b)", {"a", "b"}),
        ("kernel_log.xid_codes | length > 0 and status.kernel_log == 'ok'", {"kernel_log", "status"}),
    ],
)
def test_a_boolean_condition_passes_and_names_what_it_reads(source: str, names: set[str]) -> None:
    assert check_condition(source) == frozenset(names)


@pytest.mark.parametrize("source", ["{{ a }}", "{% if a %}x{% endif %}", "a == '{{'", "a == '{%'"])
def test_a_condition_is_a_bare_expression(source: str) -> None:
    with pytest.raises(ExpressionError, match=r"a condition is a bare expression: remove the \{\{ \}\}"):
        check_condition(source)


def test_a_condition_with_a_syntax_error_says_so() -> None:
    with pytest.raises(ExpressionError, match="^syntax error: "):
        check_condition("a ==")


def test_template_names_and_syntax_errors() -> None:
    assert template_names("{{ a.b }} and {{ c | default('x') }}") == frozenset({"a", "c"})
    assert template_names("no names") == frozenset()
    with pytest.raises(ExpressionError, match="^template syntax error: "):
        template_names("{{ a ")


def test_evaluate_condition_returns_the_boolean() -> None:
    assert evaluate_condition("a > 1", {"a": 2}) is True
    assert evaluate_condition("a > 1", {"a": 1}) is False
    assert evaluate_condition("a >= 1", {"a": 1}) is True


def test_evaluate_condition_refuses_what_is_not_a_boolean_and_missing_facts() -> None:
    with pytest.raises(ExpressionError, match="^condition yielded int, not bool$"):
        evaluate_condition("a", {"a": 2})
    with pytest.raises(ExpressionError, match="^UndefinedError: 'a' is undefined$"):
        evaluate_condition("a > 1", {})


def test_evaluate_value_returns_the_value_and_names_what_is_missing() -> None:
    assert evaluate_value("a.b", {"a": {"b": 3}}) == 3
    assert evaluate_value("a.b", {"a": {"b": 0}}) == 0
    with pytest.raises(ExpressionError, match="^UndefinedError: 'dict object' has no attribute 'c'$"):
        evaluate_value("a.c", {"a": {"b": 3}})
    with pytest.raises(ExpressionError, match="^UndefinedError: 'a' is undefined$"):
        evaluate_value("a", {})
    with pytest.raises(ExpressionError, match="^TemplateSyntaxError: "):
        evaluate_value("a +", {})


def test_render_fills_the_template_or_names_the_missing_fact() -> None:
    assert render("x={{ a }}", {"a": 1}) == "x=1"
    assert render("{{ a }}", {"a": "<b> & 'c'"}) == "<b> & 'c'"  # plain text: nothing is HTML-escaped
    with pytest.raises(ExpressionError, match="^UndefinedError: 'a' is undefined$"):
        render("x={{ a }}", {})


def test_fact_paths_keep_the_longest_path_and_skip_method_names() -> None:
    assert fact_paths("a.b and a and a.b.c") == ("a.b.c",)
    assert fact_paths("a.b.c and a.b") == ("a.b.c",)
    assert fact_paths("host.name.split('.')[0] == 'g'") == ("host.name",)
    assert fact_paths("x.y | length > 0 and z > 1") == ("x.y", "z")
    assert fact_paths("a ==") == ()


def test_attribute_reads_say_which_reads_are_guarded() -> None:
    reads = attribute_reads("a.b | default(1) and hosts[h].ns.fact and c.d is defined and e.f", False)
    assert reads == (("a.b", True), ("hosts[].ns.fact", False), ("c.d", True), ("e.f", False))
    template = attribute_reads("{{ a.b.c }} {{ x.y | d }} {{ z.w is undefined }}", True)
    assert template == (("a.b.c", False), ("x.y", True), ("z.w", True))
    # Only `hosts[...]` reads through an index; any other indexed name is not a fact path.
    assert attribute_reads("things[0].x and hosts.a", False) == (("hosts.a", False),)
    assert attribute_reads("a.b.c | default(0) > 1", False) == (("a.b.c", True),)
    assert attribute_reads("a ==", False) == ()


def test_resolve_path_finds_the_value_or_none() -> None:
    context = {"a": {"b": 0, "c": {"d": "x"}}}
    assert resolve_path("a.b", context) == 0
    assert resolve_path("a.c.d", context) == "x"
    assert resolve_path("a.z", context) is None
    assert resolve_path("a.b.c", context) is None


def test_the_builtin_names() -> None:
    assert {"status", "params", "host", "hosts", "unreachable_hosts", "true", "false", "none"} <= BUILTIN_NAMES
    assert {"True", "False", "None"} <= BUILTIN_NAMES
    assert "kernel_log" not in BUILTIN_NAMES
