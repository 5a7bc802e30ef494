"""Load YAML keeping the line of every key, so errors can name file and line.

A plain document (most runbooks and inventories) is built in one pass over the parser's events; any
other goes through PyYAML's node tree, as before, and every error is the node tree's, with its line.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

Path_ = tuple[Any, ...]

# Aliases let a few hundred bytes stand for billions of nodes ("billion laughs"), so the tree is
# measured as it would be expanded, before it is built or walked: past MAX_EXPANDED_NODES, a tree its
# aliases make over ALIAS_EXPANSION times larger than it is written is refused. A big document written
# out in full (a 10,000-host inventory) costs no more than its text and is read.
MAX_EXPANDED_NODES = 100_000
ALIAS_EXPANSION = 10
# Deeper documents take the node path, which says "nested too deeply" where Python's recursion ends.
MAX_PLAIN_DEPTH = 64

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present
_STR_TAG = "tag:yaml.org,2002:str"
# Scalars the fast path builds with SafeLoader's own constructors; any other tag (timestamp, the merge
# key `<<`, the value key `=`) sends the document to the node path.
_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float"))


class YamlError(Exception):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def load_with_lines(text: str, unique_keys: bool = False) -> tuple[Any, dict[Path_, int]]:
    """Parse ``text``; return the data and a map from key path to 1-based line (a key's own line).

    ``unique_keys``: a key written twice in one mapping is a YamlError naming both lines (YAML lets the
    second silently replace the first: a runbook's second ``when:`` or ``default:`` would hide the first).
    """
    loaded = _load_plain(text)
    data, lines = loaded if loaded is not None else _load_nodes(text)
    if unique_keys:
        _check_unique_keys(text)
    return data, lines


def _check_unique_keys(text: str) -> None:
    """Raise YamlError at the first key a mapping holds twice (the text parsed already: no errors left)."""
    loader = _LOADER(text)
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()
    todo = [root] if root is not None else []
    seen: set[int] = set()  # an alias is the same node again: each is read once
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = (key_node.tag, key_node.value) if isinstance(key_node, ScalarNode) else id(key_node)
                line = key_node.start_mark.line + 1
                if key in first:
                    raise YamlError(
                        f"duplicate key {key_node.value!r} (first on line {first[key]}): "
                        "the second would silently replace the first",
                        line,
                    )
                first[key] = line
                todo.append(value_node)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)


# ---------------------------------------------------------------------------- the fast path
# Composing the node tree, constructing it with PyYAML's generic constructor, measuring it and walking
# it again for lines cost 50 to 100 us per host of an inventory (10,000 hosts: 1 s of CPU). A plain
# document (no anchor, alias, explicit tag, merge key, timestamp or non-scalar key, not too deep, and
# no more nodes than MAX_EXPANDED_NODES) is built here in one pass over the parser's events, with the
# same resolver and scalar constructors and the lines recorded in the order _record writes them: data
# and lines are identical. Anything else, and any error, goes to _load_nodes, which reports it.


class _NotPlain(Exception):
    """The document needs the node path."""


class _Open:
    """A mapping or sequence being filled: its path and, in a mapping, the key waiting for its value."""

    __slots__ = ("value", "path", "is_mapping", "key", "key_path", "key_line")

    def __init__(self, value: dict[Any, Any] | list[Any], path: Path_) -> None:
        self.value = value
        self.path = path
        self.is_mapping = isinstance(value, dict)
        self.key: Any = None
        self.key_path: Path_ | None = None  # set between a key and the end of its value
        self.key_line = 0

    def child_path(self) -> Path_:
        if self.is_mapping:
            assert self.key_path is not None
            return self.key_path
        return self.path + (len(self.value),)

    def add(self, value: Any) -> None:
        if self.is_mapping:
            self.value[self.key] = value  # type: ignore[call-overload]  # a later duplicate key wins, as in PyYAML
        else:
            self.value.append(value)  # type: ignore[union-attr]

    def close_value(self, lines: dict[Path_, int]) -> None:
        """The value under the current key is complete: the key path gets the key's line, as _record does."""
        if self.is_mapping:
            assert self.key_path is not None
            lines[self.key_path] = self.key_line
            self.key_path = None


def _load_plain(text: str) -> tuple[Any, dict[Path_, int]] | None:
    """Data and lines of a plain document, or None when it needs the node path."""
    loader = _LOADER(text)
    try:
        return _PlainBuilder(loader).document()
    # ValueError: a scalar PyYAML's own constructor fails on (`0b_`); the node path raises it again.
    except (_NotPlain, yaml.YAMLError, ValueError):
        return None
    finally:
        loader.dispose()


class _PlainBuilder:
    """One pass over the events of a single document: its data, and the line of every path."""

    def __init__(self, loader: Any) -> None:
        self.get_event = loader.get_event
        self.scalar = _Scalars(loader)
        self.lines: dict[Path_, int] = {}
        self.stack: list[_Open] = []  # the mappings and sequences open around the next event

    def document(self) -> tuple[Any, dict[Path_, int]]:
        get, stack = self.get_event, self.stack
        get()  # StreamStartEvent
        if type(get()) is StreamEndEvent:  # no document at all (empty, or only comments)
            return None, {}
        event = get()  # the one after DocumentStartEvent: the root
        _check_plain(event, 1, 0)
        root = self.node(event)
        nodes = 1
        while stack:
            event = get()
            kind = type(event)
            if kind is MappingEndEvent or kind is SequenceEndEvent:
                stack.pop()
                if stack:
                    stack[-1].close_value(self.lines)
                continue
            nodes += 1
            _check_plain(event, nodes, len(stack))
            if stack[-1].is_mapping and stack[-1].key_path is None:
                self.key(stack[-1], event)
            else:
                self.node(event)
        if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
            raise _NotPlain  # a second document: the node path refuses it
        return root, self.lines

    def key(self, mapping: _Open, event: Any) -> None:
        if type(event) is not ScalarEvent:  # a mapping or sequence as a key: unhashable, reported by the node path
            raise _NotPlain
        mapping.key = self.scalar(event)
        mapping.key_path = mapping.path + (event.value,)  # the key as written, as _record names it
        mapping.key_line = event.start_mark.line + 1

    def node(self, event: Any) -> Any:
        """The value an event starts, added to the open mapping or sequence (if any) and, when it
        is a mapping or sequence, opened to receive what follows."""
        parent = self.stack[-1] if self.stack else None
        path = parent.child_path() if parent is not None else ()
        self.lines[path] = event.start_mark.line + 1
        kind = type(event)
        value: Any
        if kind is ScalarEvent:
            value = self.scalar(event)
        elif kind is MappingStartEvent:
            value = {}
        elif kind is SequenceStartEvent:
            value = []
        else:
            raise _NotPlain
        if parent is not None:
            parent.add(value)
        if kind is not ScalarEvent:
            self.stack.append(_Open(value, path))
        elif parent is not None:
            parent.close_value(self.lines)
        return value


def _check_plain(event: Any, nodes: int, depth: int) -> None:
    """Send the document to the node path at an anchor, alias or tag, or deeper than MAX_PLAIN_DEPTH
    (without aliases a document expands to nothing more than it is written: no size to check)."""
    # An alias has an anchor (and no tag attribute): the anchor is tested first.
    if event.anchor is not None or event.tag is not None or depth > MAX_PLAIN_DEPTH:
        raise _NotPlain


class _Scalars:
    """What SafeLoader would construct from an untagged scalar (same resolver, same constructors),
    remembered per text: keys and many values (``port: 22``, ``user: root``) repeat on every host."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.known: dict[tuple[str, tuple[bool, bool]], Any] = {}

    def __call__(self, event: ScalarEvent) -> Any:
        key = (event.value, event.implicit)
        if key in self.known:
            return self.known[key]
        tag = self.loader.resolve(ScalarNode, event.value, event.implicit)
        if tag == _STR_TAG:
            value = event.value
        elif tag in _PLAIN_TAGS:
            node = ScalarNode(tag, event.value, event.start_mark, event.end_mark)
            value = self.loader.yaml_constructors[tag](self.loader, node)
        else:
            raise _NotPlain
        self.known[key] = value
        return value


# ---------------------------------------------------------------------------- the node path


def _load_nodes(text: str) -> tuple[Any, dict[Path_, int]]:
    """Any YAML: compose the node tree, measure it, construct it, then walk it for lines. Its
    errors are the ones reported (with their line), so every document the fast path declines comes here."""
    loader = _LOADER(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _check_expanded_size(root)
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise YamlError(f"invalid YAML: {exc.problem or exc}", line) from exc
    except yaml.YAMLError as exc:
        raise YamlError(f"invalid YAML: {exc}", None) from exc
    except RecursionError:
        raise YamlError("invalid YAML: nested too deeply", None) from None
    finally:
        loader.dispose()
    lines: dict[Path_, int] = {}
    if root is not None:
        try:
            _record(root, (), lines)
        except RecursionError:
            raise YamlError("invalid YAML: nested too deeply", None) from None
    return data, lines


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a tree whose aliases expand it past MAX_EXPANDED_NODES nodes and ALIAS_EXPANSION times its
    written size, or that contains itself.

    Counts each distinct node once (memoised), so the check is linear in the document's size.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise YamlError("invalid YAML: a recursive alias (a node that contains itself)", node.start_mark.line + 1)
        on_path.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        on_path.discard(key)
        # Distinct nodes met so far (each written once): a tree made of them can only be this big by aliases.
        if total > MAX_EXPANDED_NODES and total > ALIAS_EXPANSION * (len(sizes) + len(on_path) + 1):
            raise YamlError(
                f"invalid YAML: aliases expand to more than {MAX_EXPANDED_NODES} nodes (an alias bomb?)",
                node.start_mark.line + 1,
            )
        sizes[key] = total
        return total

    size(root)


def _record(node: yaml.Node, path: Path_, lines: dict[Path_, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            key_path = path + (key,)
            _record(value_node, key_path, lines)
            lines[key_path] = key_node.start_mark.line + 1  # a key's line, not its value's
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record(item, path + (index,), lines)


def line_of(lines: dict[Path_, int], path: Path_) -> int | None:
    """Line of the longest known prefix of ``path``."""
    for end in range(len(path), -1, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None:
            return line
    return None
