"""Conditions and summaries: Jinja2 in an immutable sandbox with strict undefined."""

from __future__ import annotations

import marshal
from collections.abc import Iterable
from functools import lru_cache
from types import CodeType
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, meta, nodes
from jinja2.environment import TemplateExpression
from jinja2.parser import Parser

from nightowl.engine.limits import LimitedSandbox, budget, render_capped

# Names every expression may read besides collector namespaces.
BUILTIN_NAMES = frozenset(
    {"status", "params", "host", "hosts", "unreachable_hosts", "true", "false", "none", "True", "False", "None"}
)

# Node types whose value is a bool by construction; anything else could yield a list or a string.
_BOOLEAN_ROOTS = (nodes.Compare, nodes.Not, nodes.Test)


class ExpressionError(Exception):
    pass


@lru_cache(maxsize=1)
def environment() -> LimitedSandbox:
    return LimitedSandbox(undefined=StrictUndefined, autoescape=False)


@lru_cache(maxsize=2048)  # validation reads every expression in two passes; rehearsals load runbooks often
def check_condition(source: str) -> frozenset[str]:
    """Validate a condition statically; return the top-level names it reads."""
    if "{{" in source or "{%" in source:
        raise ExpressionError("a condition is a bare expression: remove the {{ }} / {% %}")
    text = "{{ (" + source + ") }}"
    try:
        tree = _parsed(text)
    except TemplateSyntaxError as exc:
        raise ExpressionError(f"syntax error: {exc.message}") from exc
    root = _expression_root(tree)
    if not _is_boolean(root):
        raise ExpressionError("condition does not yield a bool: compare it (e.g. `| length > 0`, `== 'ok'`, `in`)")
    return undeclared_names(text)


@lru_cache(maxsize=1024)
def template_names(source: str) -> frozenset[str]:
    try:
        _parsed(source)
    except TemplateSyntaxError as exc:
        raise ExpressionError(f"template syntax error: {exc.message}") from exc
    return undeclared_names(source)


@lru_cache(maxsize=4096)
def _parsed(text: str) -> nodes.Template:
    """One parse per text: validation asks for a condition's names, its reads and its guards, and the
    trace for its fact paths, each of the same text. Callers only read the tree (find_all)."""
    return environment().parse(text)


def undeclared_names(text: str) -> frozenset[str]:
    """What ``jinja2.meta.find_undeclared_variables`` returns, without compiling the tree to Python.

    A tree of ``{{ }}`` outputs only (every condition, most summaries) binds no name, so every name it
    loads that is not a global of the environment is undeclared: read off the tree. A template with
    statements (``{% for %}``, ``{% set %}``) may bind names, and one reading ``self`` gets it bound by
    Jinja: both go to Jinja's own analysis, on a tree of their own (the code generator is not ours to
    trust with a shared one).
    tests/engine/test_expressions_fast_names.py compares both on every runbook's expressions.
    """
    tree = _parsed(text)
    if all(isinstance(node, nodes.Output) for node in tree.body):
        globals_ = environment().globals
        names = {name.name for name in tree.find_all(nodes.Name) if name.ctx == "load" and name.name not in globals_}
        if "self" not in names:  # Jinja's code generator declares ``self`` (the template) when it is read
            return frozenset(names)
    return frozenset(meta.find_undeclared_variables(environment().parse(text)))


def _expression_root(tree: nodes.Template) -> nodes.Node:
    output = tree.body[0]
    assert isinstance(output, nodes.Output)
    return output.nodes[0]


def _is_boolean(node: nodes.Node) -> bool:
    if isinstance(node, _BOOLEAN_ROOTS):
        return True
    if isinstance(node, (nodes.And, nodes.Or)):
        return _is_boolean(node.left) and _is_boolean(node.right)
    if isinstance(node, nodes.Const):
        return isinstance(node.value, bool)
    return False


# Code Jinja generated in an earlier run (nightowl/library/runbook_cache.py), by (kind, source): loading it
# skips lexing, parsing and code generation, the cost of an expression's first use in a process.
# cache: keyed by (kind, source), the code of that exact text; filled from the runbook cache's entries.
_PRECOMPILED: dict[tuple[str, str], bytes] = {}
# cache: keyed by the expression's source text, whose fact paths that text alone decides.
_KNOWN_FACT_PATHS: dict[str, tuple[str, ...]] = {}
# Code compiled in this process, by (kind, source): an entry stores only the code of expressions a run
# evaluated, so a cold run compiles only those, once.
# cache: keyed by (kind, source): the same text always compiles to the same code.
_COMPILED_HERE: dict[tuple[str, str], CodeType] = {}


def expression_code(source: str) -> CodeType:
    """The code ``compile_expression`` generates for ``source`` (its steps, keeping the code object)."""
    env = environment()
    parser = Parser(env, source, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        raise TemplateSyntaxError("chunk after expression", parser.stream.current.lineno, None, None)
    expr.set_environment(env)
    body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
    return env.compile(nodes.Template(body, lineno=1))


def template_code(source: str) -> CodeType:
    """The code ``from_string`` generates for ``source``."""
    return environment().compile(source)


def install_precompiled(
    expressions: dict[str, bytes], templates: dict[str, bytes], known_fact_paths: dict[str, tuple[str, ...]]
) -> None:
    """Use this code (marshal bytes of ``expression_code`` / ``template_code``) and these ``fact_paths``
    instead of compiling: the same code the same Jinja generates, run in the same sandbox environment."""
    _PRECOMPILED.update({("expression", s): c for s, c in expressions.items()})
    _PRECOMPILED.update({("template", s): c for s, c in templates.items()})
    _KNOWN_FACT_PATHS.update(known_fact_paths)


def compiled_here(kind: str, sources: Iterable[str]) -> dict[str, CodeType]:
    """The code this process compiled (not loaded from stored code) for those of ``sources`` it compiled,
    ``kind`` "expression" or "template": what the runbook cache adds to an entry (library/runbooks.py)."""
    return {source: _COMPILED_HERE[(kind, source)] for source in sources if (kind, source) in _COMPILED_HERE}


def _template_of(code: CodeType) -> Any:
    """The template of compiled code, as ``from_string`` and ``compile_expression`` make it, its globals a
    plain dict (the environment's, which nothing changes once made): every call copies them into its context,
    and copying Jinja's ``ChainMap`` of them was a quarter of a condition's evaluation."""
    env = environment()
    return env.template_class.from_code(env, code, dict(env.make_globals(None)), None)


def _from_code(kind: str, source: str) -> Any:
    """The template of stored code, or None (none stored, or it does not load: then it is compiled)."""
    stored = _PRECOMPILED.get((kind, source))
    if stored is None:
        return None
    try:
        return _template_of(marshal.loads(stored))
    except Exception:  # noqa: BLE001 - stored code that does not load is compiled afresh
        return None


@lru_cache(maxsize=1024)
def _compiled(source: str) -> Any:
    """``compile_expression(source, undefined_to_none=False)``, from stored code when there is some, its
    code kept otherwise (``compiled_here``)."""
    template = _from_code("expression", source)
    if template is None:
        try:
            code = expression_code(source)
        except Exception:  # noqa: BLE001 - Jinja's own call raises it as Jinja words it (source attached)
            return environment().compile_expression(source, undefined_to_none=False)
        _COMPILED_HERE[("expression", source)] = code
        template = _template_of(code)
    return TemplateExpression(template, undefined_to_none=False)


@lru_cache(maxsize=512)
def _template(source: str) -> Any:
    """``from_string(source)``, from stored code when there is some, its code kept otherwise."""
    template = _from_code("template", source)
    if template is None:
        code = template_code(source)  # ``from_string``'s compile step: it raises as from_string does
        _COMPILED_HERE[("template", source)] = code
        template = _template_of(code)
    return template


def evaluate_condition(source: str, context: dict[str, Any]) -> bool:
    """Evaluate a condition; raises ExpressionError for missing facts or a non-bool."""
    try:
        with budget():
            value = _compiled(source)(**context)
    except ExpressionError:
        raise
    except Exception as exc:  # noqa: BLE001 - undefined facts, type errors in user expressions
        raise ExpressionError(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(value, bool):
        raise ExpressionError(f"condition yielded {type(value).__name__}, not bool")
    return value


def evaluate_value(source: str, context: dict[str, Any]) -> Any:
    """Evaluate an expression to a value; an undefined result is an error, never a value to print."""
    try:
        with budget():
            value = _compiled(source)(**context)
    except Exception as exc:  # noqa: BLE001
        raise ExpressionError(f"{type(exc).__name__}: {exc}") from exc
    if isinstance(value, Undefined):
        try:
            str(value)  # StrictUndefined says which name is missing when touched
        except Exception as exc:  # noqa: BLE001
            raise ExpressionError(f"{type(exc).__name__}: {exc}") from exc
        raise ExpressionError(f"{source} is undefined")
    return value


def render(source: str, context: dict[str, Any]) -> str:
    try:
        with budget():
            return render_capped(_template(source), context)
    except Exception as exc:  # noqa: BLE001
        raise ExpressionError(f"{type(exc).__name__}: {exc}") from exc


def fact_paths(source: str) -> tuple[str, ...]:
    """Dotted fact paths an expression reads (``kernel_log.xid_codes``), for the trace."""
    known = _KNOWN_FACT_PATHS.get(source)
    return known if known is not None else _fact_paths(source)


@lru_cache(maxsize=1024)  # asked for every condition on every host: parse each source once
def _fact_paths(source: str) -> tuple[str, ...]:
    try:
        tree = _parsed("{{ (" + source + ") }}")
    except TemplateSyntaxError:
        return ()
    paths: list[str] = []
    methods = {id(call.node) for call in tree.find_all(nodes.Call) if isinstance(call.node, nodes.Getattr)}
    for node in tree.find_all((nodes.Getattr, nodes.Name)):
        if id(node) in methods:  # ``x.split('.')`` reads x, not a fact named split
            continue
        dotted = _dotted(node)
        if dotted and not any(p.startswith(dotted + ".") or p == dotted for p in paths):
            paths = [p for p in paths if not dotted.startswith(p + ".")] + [dotted]
    return tuple(paths)


@lru_cache(maxsize=2048)
def attribute_reads(source: str, is_template: bool) -> tuple[tuple[str, bool], ...]:
    """Each dotted path an expression or template reads, with whether it is guarded.

    A path is guarded when it (or a shorter path it starts with) sits under ``| default(...)``
    or an ``is defined`` test: reading it when absent is not an error. ``hosts[h].ns.fact``
    reads as ``hosts[].ns.fact``. Validation uses this to check each fact against the facts
    its collector declares.
    """
    try:
        tree = _parsed(source if is_template else "{{ (" + source + ") }}")
    except TemplateSyntaxError:
        return ()
    guarded: set[int] = set()
    for check in tree.find_all((nodes.Filter, nodes.Test)):
        if check.name in ("default", "d", "defined", "undefined") and check.node is not None:
            guarded |= {id(inner) for inner in _chain(check.node)}
    inner_ids = {id(n.node) for n in tree.find_all(nodes.Getattr)}
    reads: list[tuple[str, bool]] = []
    for access in tree.find_all(nodes.Getattr):
        if id(access) in inner_ids:
            continue  # only the longest path of a chain
        dotted = _dotted(access, through_hosts=True)
        if dotted:
            reads.append((dotted, any(id(n) in guarded for n in _chain(access))))
    return tuple(reads)


def _chain(node: nodes.Node) -> list[nodes.Node]:
    """The node and the attribute/item accesses it is built on (``a.b.c`` -> ``a.b.c``, ``a.b``, ``a``)."""
    chain = [node]
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        node = node.node
        chain.append(node)
    return chain


def _dotted(node: nodes.Node, through_hosts: bool = False) -> str | None:
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        inner = _dotted(node.node, through_hosts)
        return f"{inner}.{node.attr}" if inner else None
    if through_hosts and isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name):
        return f"{node.node.name}[]" if node.node.name == "hosts" else None
    return None


def resolve_path(path: str, context: dict[str, Any]) -> Any:
    """Value at a dotted path, or None when any step is missing."""
    value: Any = context
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value
