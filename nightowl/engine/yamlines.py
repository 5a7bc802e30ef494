"""Load YAML keeping the line of every key, so errors can name file and line."""

from __future__ import annotations

from typing import Any

import yaml

Path_ = tuple[Any, ...]


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
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise YamlError(f"invalid YAML: {exc.problem or exc}", line) from exc
    except yaml.YAMLError as exc:
        raise YamlError(f"invalid YAML: {exc}", None) from exc
    finally:
        loader.dispose()
    lines: dict[Path_, int] = {}
    if root is not None:
        _record(root, (), lines)
    return data, lines


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
