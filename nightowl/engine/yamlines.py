"""Load YAML keeping the line of every key, so errors can name file and line."""

from __future__ import annotations

from typing import Any

import yaml

Path_ = tuple[Any, ...]

# A runbook or inventory is a few hundred nodes. Aliases let a few hundred bytes stand for billions of
# nodes ("billion laughs"), so the tree is measured as it would be expanded, before it is built or walked.
MAX_EXPANDED_NODES = 100_000


class YamlError(Exception):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def load_with_lines(text: str) -> tuple[Any, dict[Path_, int]]:
    """Parse ``text`` once; return the data and a map from key path to 1-based line."""
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present
    loader = loader_class(text)
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
    """Refuse a tree whose aliases expand past MAX_EXPANDED_NODES, or that contains itself.

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
        if total > MAX_EXPANDED_NODES:
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
