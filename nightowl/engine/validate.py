"""Load a runbook and validate it in passes, each error naming file, line and node.

Passes (after StackStorm Orquesta): YAML, schema, graph, expressions, facts.
A later pass runs only when the earlier ones found nothing, since e.g. a
graph check on a schema-broken runbook only produces noise.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nightowl.engine import includes
from nightowl.engine.expressions import (
    BUILTIN_NAMES,
    ExpressionError,
    attribute_reads,
    check_condition,
    template_names,
)
from nightowl.engine.node_graph import NodeGraph
from nightowl.engine.params import coerce, declared_type
from nightowl.engine.runbook_data import split_entry
from nightowl.engine.yaml_lines import YamlError, line_of, load_with_lines

if TYPE_CHECKING:  # pydantic is imported by the schema pass only (a cached runbook needs none)
    from nightowl.engine.model import Node, Runbook


@dataclass(frozen=True)
class Issue:
    """One problem found in a runbook, printed as ``FILE:LINE: [node NODE] MESSAGE``."""

    file: str
    line: int | None
    node: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        node = f" [node {self.node}]" if self.node else ""
        return f"{where}:{node} {self.message}"


class RunbookInvalid(Exception):
    """A runbook failed validation; ``issues`` lists every problem of the first pass that found any."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("\n".join(str(i) for i in issues))
        self.issues = issues


@dataclass
class LoadedRunbook:
    """A runbook that passed every validation pass, with what running it needs.

    ``lines`` maps YAML paths to line numbers (errors and traces point at the file), ``graph``
    is the node graph (engine/node_graph.py, acyclic, every node reachable from the entry), and
    ``collected_before`` gives, per node, the namespaces every path to it has collected.
    """

    runbook: Any  # engine/model.py Runbook, or its plain twin (engine/runbook_data.py RunbookData)
    path: Path
    lines: dict[tuple[Any, ...], int]
    graph: Any  # NodeGraph (None until the graph pass)
    collected_before: dict[str, frozenset[str]] = field(default_factory=dict)
    node_files: dict[str, str] = field(default_factory=dict)  # node id -> the fragment file defining it
    text_as_ran: str | None = None  # with fragments: the runbook with their nodes written in (includes.as_ran)

    def file_of(self, node_id: str | None) -> str:
        """The file that defines ``node_id``: a fragment's, or the runbook's own."""
        return self.node_files.get(node_id or "", str(self.path))

    def as_ran(self) -> str:
        """The runbook as it ran, for the bundle: its own text, with any fragments' nodes written in."""
        return self.text_as_ran if self.text_as_ran is not None else self.path.read_text()

    @property
    def id(self) -> str:
        """The runbook's ``id``."""
        return self.runbook.id

    def resolve_params(self, given: dict[str, Any] | None = None) -> dict[str, Any]:
        """The runbook's parameter defaults overlaid with ``given``; an undeclared name is a ValueError."""
        given = given or {}
        declared = self.runbook.parameters
        unknown = sorted(set(given) - set(declared))
        if unknown:
            valid = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"runbook {self.id} has no parameter {', '.join(unknown)} (its parameters: {valid})")
        coerced = {
            name: coerce(name, declared_type(declared[name].type, declared[name].default), v)
            for name, v in given.items()
        }
        return {**{name: p.default for name, p in declared.items()}, **coerced}

    def node_line(self, node_id: str) -> int | None:
        """The line where a node is defined, if known."""
        return line_of(self.lines, ("nodes", node_id))


def load_runbook(
    path: Path,
    known_collectors: Iterable[str] | None = None,
    lookup: Callable[[str], Any] | None = None,
    fragment_dirs: Iterable[Path] = (),
) -> LoadedRunbook:
    """Load and validate; raise RunbookInvalid listing every problem found.

    Passes run in order (YAML, schema, graph, collectors and expressions, facts); a pass runs
    only when the ones before it found nothing. ``known_collectors`` enables the collector and
    fact checks; without it, an unknown kind is not reported. ``lookup`` (kind -> collector, the
    same the runner gets) enables the check of every fact path against the facts each collector
    declares in ``produces``. ``include:`` takes fragments from ``fragments/`` beside the runbook, else
    from ``fragment_dirs`` (engine/includes.py). Reads the files only; runs nothing.
    """
    path = Path(path)
    name = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunbookInvalid([Issue(name, None, None, f"cannot read: {exc.strerror}")]) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        message = f"not UTF-8 text (byte {exc.start}): a runbook is YAML in UTF-8"
        raise RunbookInvalid([Issue(name, line, None, message)]) from None
    try:
        data, lines = load_with_lines(text, unique_keys=True)
    except YamlError as exc:
        raise RunbookInvalid([Issue(name, exc.line, None, exc.message)]) from exc
    fragments, node_files, problems = includes.merge(name, data, lines, path, fragment_dirs)
    if problems:
        raise RunbookInvalid([Issue(*problem) for problem in problems])
    runbook = _schema_pass(name, data, lines, node_files)
    loaded = LoadedRunbook(runbook, path, lines, graph=None, node_files=node_files)
    if fragments:
        loaded.text_as_ran = _as_ran(name, text, data, fragments, lines)
    issues = _parameter_pass(loaded) + _graph_pass(loaded) + _implicates_pass(loaded)
    if not issues:
        issues = _collector_pass(loaded, known_collectors) + _expression_pass(loaded)
    if not issues:
        issues = _facts_pass(loaded, known_collectors)
    if not issues and lookup is not None:
        issues = _declared_facts_pass(loaded, lookup)
    if not issues:
        issues = _hidden_failure_pass(loaded)
    if issues:
        raise RunbookInvalid(issues)
    return loaded


def _as_ran(name: str, text: str, data: dict[str, Any], fragments: list[includes.Fragment], lines: Any) -> str:
    """The text a bundle keeps (includes.as_ran), checked to load to the same runbook."""
    written = includes.as_ran(text, fragments)
    try:
        again, _ = load_with_lines(written)
    except YamlError:
        again = None
    if again != {key: value for key, value in data.items() if key != "include"}:
        message = "the fragments' nodes cannot be written after the runbook's own (indent them as the runbook's)"
        raise RunbookInvalid([Issue(name, line_of(lines, ("include",)), None, message)])
    return written


def _schema_pass(
    name: str, data: Any, lines: dict[tuple[Any, ...], int], node_files: dict[str, str] | None = None
) -> Runbook:
    from pydantic import ValidationError

    from nightowl.engine.model import Runbook

    if not isinstance(data, dict):
        raise RunbookInvalid([Issue(name, 1, None, "a runbook is a mapping with id, title, entry, nodes")])
    try:
        return Runbook.model_validate(data)
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            node = str(loc[1]) if len(loc) > 1 and loc[0] == "nodes" else None
            where = ".".join(str(p) for p in loc)
            file = (node_files or {}).get(node or "", name)
            issues.append(Issue(file, line_of(lines, loc), node, f"{where}: {err['msg']}"))
        raise RunbookInvalid(issues) from exc


def _parameter_pass(loaded: LoadedRunbook) -> list[Issue]:
    """A parameter's default is a value of its declared type (``{default: eight, type: number}`` would
    fail only when the runbook runs without the parameter, and a quoted ``"8"`` of an integer would be
    compared as text)."""
    issues = []
    for name, parameter in loaded.runbook.parameters.items():
        if parameter.type is None or parameter.default is None:
            continue
        try:
            coerce(name, parameter.type, parameter.default)
        except ValueError as exc:
            problem = f"default {parameter.default!r} is not of its type {parameter.type}: {exc}"
        else:
            text = isinstance(parameter.default, str)
            if not (text and parameter.type in ("integer", "number", "boolean")):
                continue
            problem = f"default {parameter.default!r} is text, not {parameter.type}: write it unquoted"
        line = line_of(loaded.lines, ("parameters", name, "default"))
        issues.append(Issue(str(loaded.path), line, None, f"parameter {name}: {problem}"))
    return issues


def _implicates_pass(loaded: LoadedRunbook) -> list[Issue]:
    """Roles in a job come from the runbook, never from names found in a summary: a ``scope: job``
    verdict whose action is not ``none`` declares ``implicates`` (``[]``: the job as a whole); a
    ``scope: host`` verdict has no members to name."""
    issues = []
    job = loaded.runbook.scope == "job"
    for node_id, node in loaded.runbook.nodes.items():
        spec = node.verdict
        if spec is None:
            continue
        if job and spec.action != "none" and spec.implicates is None:
            problem = "a scope: job verdict with an action declares `implicates` (the members it is for; [] = the job)"
        elif not job and spec.implicates is not None:
            problem = "`implicates` names members of a job; this runbook is scope: host"
        else:
            continue
        line = line_of(loaded.lines, ("nodes", node_id, "verdict"))
        issues.append(Issue(loaded.file_of(node_id), line, node_id, problem))
    return issues


def _graph_pass(loaded: LoadedRunbook) -> list[Issue]:
    rb, name = loaded.runbook, str(loaded.path)
    issues: list[Issue] = []
    graph = NodeGraph()
    for node_id, node in rb.nodes.items():
        graph.add_node(node_id, kind=node.kind)
    if rb.entry not in rb.nodes:
        issues.append(Issue(name, line_of(loaded.lines, ("entry",)), None, f"entry {rb.entry!r} is not a node"))
    for node_id, node in rb.nodes.items():
        for target in node.targets():
            if target not in rb.nodes:
                issues.append(
                    Issue(
                        loaded.file_of(node_id),
                        _target_line(loaded, node_id, node, target),
                        node_id,
                        f"target {target!r} does not exist",
                    )
                )
            else:
                graph.add_edge(node_id, target)
    loaded.graph = graph
    if issues:
        return issues
    for cycle_edge in graph.first_cycle():
        issues.append(
            Issue(loaded.file_of(cycle_edge), loaded.node_line(cycle_edge), cycle_edge, "node is part of a cycle")
        )
        break
    reachable = graph.descendants(rb.entry) | {rb.entry}
    for node_id in rb.nodes:
        if node_id not in reachable:
            issues.append(
                Issue(loaded.file_of(node_id), loaded.node_line(node_id), node_id, "node is unreachable from the entry")
            )
    for node_id, node in rb.nodes.items():
        if node.kind not in ("verdict", "cannot_judge") and graph.out_degree(node_id) == 0:
            issues.append(
                Issue(loaded.file_of(node_id), loaded.node_line(node_id), node_id, "path ends here without a verdict")
            )
    return issues


def _target_line(loaded: LoadedRunbook, node_id: str, node: Node, target: str) -> int | None:
    base = ("nodes", node_id)
    if node.next == target:
        return line_of(loaded.lines, (*base, "next"))
    for index, branch in enumerate(node.decide or []):
        if branch.goto == target:
            return line_of(loaded.lines, (*base, "decide", index, "goto"))
    return line_of(loaded.lines, (*base, "default"))


def _collector_pass(loaded: LoadedRunbook, known: Iterable[str] | None) -> list[Issue]:
    if known is None:
        return []
    known_set = set(known)
    issues = []
    for node_id, node in loaded.runbook.nodes.items():
        for index, entry in enumerate(node.collect or []):
            kind = split_entry(entry)[0]
            if kind not in known_set:
                line = line_of(loaded.lines, ("nodes", node_id, "collect", index))
                issues.append(Issue(loaded.file_of(node_id), line, node_id, f"unknown collector {kind!r}"))
    return issues


def _expressions_of(node: Node) -> Iterable[tuple[tuple[Any, ...], str, bool]]:
    """(relative path, source, is_condition) for every expression a node holds."""
    for index, branch in enumerate(node.decide or []):
        yield ("decide", index, "when"), branch.when, True
    if node.cannot_judge is not None:
        yield ("cannot_judge",), node.cannot_judge, False
    if node.verdict is not None:
        yield ("verdict", "summary"), node.verdict.summary, False
        if node.verdict.gpus:
            yield ("verdict", "gpus"), "(" + node.verdict.gpus + ") is not none", True
        if node.verdict.implicates:
            yield ("verdict", "implicates"), "(" + node.verdict.implicates + ") is not none", True
        if node.verdict.next is not None:
            from nightowl.engine.chain import expressions as next_expressions

            for rel, source in next_expressions(node.verdict.next):
                yield ("verdict", "next", *rel), "(" + source + ") is not none", True


def _expression_pass(loaded: LoadedRunbook) -> list[Issue]:
    issues = []
    for node_id, node in loaded.runbook.nodes.items():
        for rel, source, is_condition in _expressions_of(node):
            try:
                check_condition(source) if is_condition else template_names(source)
            except ExpressionError as exc:
                line = line_of(loaded.lines, ("nodes", node_id, *rel))
                issues.append(Issue(loaded.file_of(node_id), line, node_id, f"{rel[-1]}: {exc}"))
    return issues


def _facts_pass(loaded: LoadedRunbook, known: Iterable[str] | None) -> list[Issue]:
    """A condition may read only facts that every path to it has collected."""
    rb, graph = loaded.runbook, loaded.graph
    namespace_of = {entry: split_entry(entry)[1] for node in rb.nodes.values() for entry in node.collect or []}
    all_namespaces = set(namespace_of.values()) | {split_entry(k)[1] for k in (known or [])}
    before: dict[str, frozenset[str]] = {}
    after: dict[str, frozenset[str]] = {}
    for node_id in graph.topological_order():
        preds = list(graph.predecessors(node_id))
        have = frozenset.intersection(*(after[p] for p in preds)) if preds else frozenset()
        before[node_id] = have
        collected = {namespace_of[k] for k in rb.nodes[node_id].collect or []}
        after[node_id] = have | collected
    loaded.collected_before = before
    issues = []
    for node_id, node in rb.nodes.items():
        reads: list[tuple[tuple[Any, ...], frozenset[str]]] = []
        for rel, source, is_condition in _expressions_of(node):
            names = check_condition(source) if is_condition else template_names(source)
            reads.append((rel, names - _only_guarded(source, not is_condition)))
        for index, fact_path in enumerate(node.verdict.evidence if node.verdict else []):
            reads.append((("verdict", "evidence", index), frozenset({fact_path.split(".")[0]})))
        for rel, names in reads:
            for name in sorted(names - BUILTIN_NAMES - before[node_id]):
                problem = (
                    f"reads {name!r}, which not every path to this node collects"
                    " (guard it with `| default(...)` if it may be absent)"
                    if name in all_namespaces
                    else f"reads unknown name {name!r}" + _did_you_mean(name, all_namespaces | BUILTIN_NAMES)
                )
                line = line_of(loaded.lines, ("nodes", node_id, *rel))
                issues.append(Issue(loaded.file_of(node_id), line, node_id, problem))
    return issues


def _only_guarded(source: str, is_template: bool) -> frozenset[str]:
    """Top-level names every read of which is guarded by ``default`` or ``is defined``."""
    reads = attribute_reads(source, is_template)
    roots = {path.split(".")[0] for path, _ in reads}
    return frozenset(r for r in roots if all(guarded for path, guarded in reads if path.split(".")[0] == r))


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _fact_reads(node: Node) -> Iterable[tuple[tuple[Any, ...], str]]:
    """(relative path, dotted fact path) for every fact path a node reads, evidence included."""
    for rel, source, is_condition in _expressions_of(node):
        for dotted, _guarded in attribute_reads(source, not is_condition):
            yield rel, dotted.removeprefix("hosts[].")
    for index, fact_path in enumerate(node.verdict.evidence if node.verdict else []):
        yield ("verdict", "evidence", index), fact_path


def _declared_facts_pass(loaded: LoadedRunbook, lookup: Callable[[str], Any]) -> list[Issue]:
    """Every ``namespace.fact`` a node reads is a fact that namespace's collector declares.

    A collector that declares nothing (``produces`` empty) is not checked: the engine knows
    only what collectors tell it. ``params.NAME`` must be a declared parameter, ``status.NAME``
    a collected namespace.
    """
    rb = loaded.runbook
    kind_of = {split_entry(e)[1]: split_entry(e)[0] for node in rb.nodes.values() for e in node.collect or []}
    declared: dict[str, set[str]] = {}
    for namespace, kind in kind_of.items():
        try:
            names = {fact.name for fact in getattr(lookup(kind), "produces", ()) or ()}
        except Exception:  # noqa: BLE001 - an unknown or unsafe collector is reported by its own check
            continue
        if names:
            declared[namespace] = names
    known = {"params": set(rb.parameters), "status": set(kind_of), **declared}
    issues = []
    for node_id, node in rb.nodes.items():
        for rel, dotted in _fact_reads(node):
            root, _, rest = dotted.partition(".")
            fact = rest.partition(".")[0]
            if root not in known or not fact or fact in known[root]:
                continue
            if root == "params":
                what = f"reads params.{fact}, which is not a parameter of this runbook"
            elif root == "status":
                what = f"reads status.{fact}, which is not a namespace this runbook collects"
            else:
                what = f"reads {root}.{fact}, which collector {kind_of[root]!r} does not produce"
            line = line_of(loaded.lines, ("nodes", node_id, *rel))
            issues.append(Issue(loaded.file_of(node_id), line, node_id, what + _did_you_mean(fact, known[root])))
    return issues


def _hidden_failure_pass(loaded: LoadedRunbook) -> list[Issue]:
    """A condition that reads a collector's fact through a fallback (``| default(...)``, ``is defined``)
    where, that collector failing, the walk can go on to a verdict of action ``none`` with its
    ``status.<namespace>`` checked nowhere on the way.

    A failed collector's facts are empty, so the fallback decides, and the run ends healthy on evidence
    that was never read (xid's per-code step read ``xid_judgement.action | default('none')`` and said
    "informational"). The walk is followed as it would go with that collector's facts empty: a condition
    that reads no other collector is evaluated so (``(kernel_log.xid_codes | default([])) | length > 0``
    is false then), any other may go either way. A check anywhere counts, before the read or after it
    on the way to the verdict (node-health reads Xids with fallbacks, then tests the kernel log's status
    before it calls the node healthy), and so does a healthy verdict whose summary or evidence states the
    status (it tells the reader what was not read)."""
    rb = loaded.runbook
    namespaces = {split_entry(entry)[1] for node in rb.nodes.values() for entry in node.collect or []}
    checkers: dict[str, set[str]] = {ns: set() for ns in namespaces}
    fallbacks: dict[tuple[str, str], list[tuple[tuple[Any, ...], str]]] = {}  # (node, namespace) -> reads
    for node_id, node in rb.nodes.items():
        for rel, source, is_condition in _expressions_of(node):
            for dotted, guarded in attribute_reads(source, not is_condition):
                root, _, rest = dotted.partition(".")
                if root == "status" and rest.partition(".")[0] in checkers:
                    checkers[rest.partition(".")[0]].add(node_id)
                elif guarded and rel[0] == "decide" and root in namespaces:
                    fallbacks.setdefault((node_id, root), []).append((rel, dotted))
        for fact in node.verdict.evidence if node.verdict else []:
            if fact.startswith("status.") and fact.split(".")[1] in checkers:
                checkers[fact.split(".")[1]].add(node_id)
    issues = []
    for (node_id, namespace), reads in fallbacks.items():
        verdict = _healthy_without_check(loaded, node_id, namespace, checkers[namespace])
        for rel, dotted in reads if verdict is not None else []:
            message = (
                f"reads {dotted} through a fallback, and when that collector fails the walk can reach {verdict} "
                f"(action none) with status.{namespace} checked nowhere on the way: test status.{namespace} "
                "before a healthy verdict"
            )
            issues.append(
                Issue(loaded.file_of(node_id), line_of(loaded.lines, ("nodes", node_id, *rel)), node_id, message)
            )
    return list(dict.fromkeys(issues))  # a condition reading one fact twice is one problem


def _healthy_without_check(loaded: LoadedRunbook, start: str, namespace: str, checkers: set[str]) -> str | None:
    """A verdict of action ``none`` the walk can reach from the entry through ``start``, ``namespace``'s
    collector having failed, passing no node of ``checkers``; None when there is none."""
    rb = loaded.runbook
    if start in checkers or rb.entry in checkers:
        return None
    if start != rb.entry and start not in loaded.graph.descendants(rb.entry, blocked=checkers):
        return None
    seen, todo = set(), [start]
    while todo:
        node_id = todo.pop()
        if node_id in seen or node_id in checkers:
            continue
        seen.add(node_id)
        node = rb.nodes[node_id]
        if node.verdict is not None and node.verdict.action == "none":
            return node_id
        todo += _next_when_failed(node, namespace, loaded)
    return None


def _next_when_failed(node: Node, namespace: str, loaded: LoadedRunbook) -> list[str]:
    """Where a node may send the walk when ``namespace``'s facts are empty: a condition reading only that
    namespace (and parameters) is evaluated so; one reading anything else may go either way."""
    if node.decide is None:
        return [node.next] if node.next else []
    targets = []
    for branch in node.decide:
        outcome = _when_failed(branch.when, namespace, loaded)
        if outcome is not False:
            targets.append(branch.goto)
        if outcome is True:
            return targets
    return targets + ([node.default] if node.default else [])


def _when_failed(condition: str, namespace: str, loaded: LoadedRunbook) -> bool | None:
    """The condition's value with ``namespace``'s facts empty and its status ``error``; None when it
    reads another collector's facts or cannot be evaluated so."""
    from nightowl.engine.expressions import evaluate_condition

    roots = {dotted.split(".")[0] for dotted, _guarded in attribute_reads(condition, False)}
    if not roots <= {namespace, "params"}:
        return None
    params = {name: p.default for name, p in loaded.runbook.parameters.items()}
    try:
        return evaluate_condition(condition, {"params": params, "status": {namespace: "error"}, namespace: {}})
    except ExpressionError:
        return None
