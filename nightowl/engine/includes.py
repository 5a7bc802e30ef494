"""Runbook fragments: ``include: [NAME]`` takes the nodes of ``fragments/NAME.yaml`` beside the runbook.

A fragment is a named file of nodes two runbooks share (``fragment: NAME``, ``description:``, ``nodes:``).
Its nodes join the runbook's own before any validation pass, so they are validated in the same passes as
any node (schema, graph, expressions, facts), and an error in one names the fragment's file and line. A
node id may be defined once: a fragment node with the id of a runbook node, or of another fragment's, is
an error naming both places. A fragment's nodes may go to nodes the runbook defines (a decision shared,
its verdicts each runbook's own); the graph pass checks every target after the merge.

The bundle keeps "the runbook as it ran" (``as_ran``): the runbook's text with the fragments' nodes
written after its own, so a bundle's ``runbook.yaml`` stands alone, as it did before includes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightowl.engine.file_trust import unsafe_reason
from nightowl.engine.yaml_lines import YamlError, load_with_lines

FOLDER = "fragments"  # beside the runbook: runbooks/fragments/NAME.yaml
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
FRAGMENT_KEYS = ("fragment", "description", "nodes")

Path_ = tuple[Any, ...]
Problem = tuple[str, int | None, str | None, str]  # file, line, node, message (engine/validate.py Issue)


@dataclass(frozen=True)
class Fragment:
    """One included fragment: its name, file, text, nodes (as parsed) and their lines."""

    name: str
    path: Path
    text: str
    nodes: dict[str, Any]
    lines: dict[Path_, int]


def search_dirs(runbook_path: Path, fallback: Iterable[Path] = ()) -> tuple[Path, ...]:
    """Where a runbook's fragments are looked for: ``fragments/`` beside it, then ``fallback`` (the caller's:
    nightowl's own fragments, so a site copy of a built-in runbook still finds the fragments it names)."""
    folders = (Path(runbook_path).parent / FOLDER, *fallback)
    return tuple(dict.fromkeys(folders))  # each once


def fragment_path(name: str, folders: Iterable[Path]) -> Path | None:
    """The first ``NAME.yaml`` of ``folders``; None when none holds it."""
    return next((folder / f"{name}.yaml" for folder in folders if (folder / f"{name}.yaml").is_file()), None)


def fragment_files(runbook_path: Path, fallback: Iterable[Path] = ()) -> dict[str, Path]:
    """Every fragment a runbook could include, by ``fragment:PATH`` (what a cache key hashes with the runbook)."""
    found: dict[str, Path] = {}
    for folder in search_dirs(runbook_path, fallback):
        try:
            found.update({f"fragment:{p}": p for p in sorted(folder.glob("*.yaml"))})
        except OSError:
            continue
    return found


def unsafe(path: Path) -> str | None:
    """Why a fragment may not supply nodes: it or its folder may be written by someone else
    (engine/file_trust.py: the rule a site runbook is held to)."""
    for item in (path.parent, path):
        problem = unsafe_reason(item)
        if problem is not None:
            return problem
    return None


def _line(lines: dict[Path_, int], path: Path_) -> int | None:
    return lines.get(path)


def read_fragment(
    runbook_file: str, runbook_lines: dict[Path_, int], index: int, name: Any, folders: tuple[Path, ...]
) -> tuple[Fragment | None, list[Problem]]:
    """The fragment ``include[index]`` names, checked (name, file, YAML, its three keys), or the problems."""
    at = _line(runbook_lines, ("include", index)) or _line(runbook_lines, ("include",))
    if not isinstance(name, str) or not NAME.match(name):
        return None, [(runbook_file, at, None, f"include: {name!r} is not a fragment name (a-z, 0-9, -)")]
    path = fragment_path(name, folders)
    if path is None:
        where = ", ".join(str(folder) for folder in folders)
        return None, [(runbook_file, at, None, f"include: no fragment {name}.yaml in {where}")]
    problem = unsafe(path)
    if problem:
        return None, [(runbook_file, at, None, f"include: {name}: refused: {problem}")]
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        return None, [(runbook_file, at, None, f"include: {name}: cannot read {path} ({why})")]
    try:
        data, lines = load_with_lines(text, unique_keys=True)
    except YamlError as exc:
        return None, [(str(path), exc.line, None, exc.message)]
    if not isinstance(data, dict):
        return None, [(str(path), 1, None, "a fragment is a mapping with fragment, description, nodes")]
    problems: list[Problem] = [
        (str(path), _line(lines, (key,)), None, f"unknown key {key!r} (a fragment has {', '.join(FRAGMENT_KEYS)})")
        for key in data
        if key not in FRAGMENT_KEYS
    ]
    if data.get("fragment") != name:
        problems.append(
            (str(path), _line(lines, ("fragment",)) or 1, None, f"fragment: must be {name!r}, its file's name")
        )
    nodes = data.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        problems.append((str(path), _line(lines, ("nodes",)) or 1, None, "nodes: a mapping of node id -> node"))
    elif _last_key(lines, data) != "nodes":
        problems.append((str(path), _line(lines, ("nodes",)), None, "nodes: must be the fragment's last key"))
    if problems or not isinstance(nodes, dict):
        return None, problems
    return Fragment(name, path, text, dict(nodes), lines), []


def _last_key(lines: dict[Path_, int], data: dict[str, Any]) -> str | None:
    """The top-level key written last (the one whose block ends the file)."""
    written = [(lines.get((key,)) or 0, key) for key in data]
    return max(written)[1] if written else None


def merge(
    runbook_file: str, data: Any, lines: dict[Path_, int], runbook_path: Path, fallback: Iterable[Path] = ()
) -> tuple[list[Fragment], dict[str, str], list[Problem]]:
    """Add the included fragments' nodes (and their lines) to ``data`` and ``lines`` in place; fragments are
    looked for beside the runbook, then in ``fallback`` (``search_dirs``).

    Returns the fragments, node id -> the file that defines it (fragment nodes only), and the problems.
    """
    if not isinstance(data, dict) or "include" not in data:
        return [], {}, []
    names = data["include"]
    if not isinstance(names, list):
        return [], {}, [(runbook_file, _line(lines, ("include",)), None, "include: a list of fragment names")]
    nodes = data.get("nodes")
    if not isinstance(nodes, dict):
        return [], {}, []  # the schema pass reports the missing nodes
    if _last_key(lines, data) != "nodes":
        return (
            [],
            {},
            [
                (
                    runbook_file,
                    _line(lines, ("nodes",)),
                    None,
                    "nodes: must be the last key of a runbook that includes fragments",
                )
            ],
        )
    fragments: list[Fragment] = []
    node_files: dict[str, str] = {}
    problems: list[Problem] = []
    for index, name in enumerate(names):
        if name in [f.name for f in fragments]:
            problems.append((runbook_file, _line(lines, ("include", index)), None, f"include: {name} is named twice"))
            continue
        fragment, found = read_fragment(runbook_file, lines, index, name, search_dirs(runbook_path, fallback))
        problems += found
        if fragment is None:
            continue
        fragments.append(fragment)
        for node_id, node in fragment.nodes.items():
            if node_id in nodes:
                other = node_files.get(node_id, runbook_file)
                other_line = lines.get(("nodes", node_id))
                problems.append(
                    (str(fragment.path), fragment.lines.get(("nodes", node_id)), str(node_id),
                     f"node {node_id!r} of fragment {name} is also defined at {other}:{other_line}")
                )  # fmt: skip
                continue
            nodes[node_id] = node
            node_files[node_id] = str(fragment.path)
            lines.update({path: line for path, line in fragment.lines.items() if path[:2] == ("nodes", node_id)})
    return fragments, node_files, problems


def as_ran(runbook_text: str, fragments: list[Fragment]) -> str:
    """The runbook as it ran: its text, the ``include:`` key turned into a comment, each fragment's nodes
    written after the runbook's own (``nodes:`` is the last key of both). Loads to the merged runbook."""
    if not fragments:
        return runbook_text
    out: list[str] = []
    in_include = False
    for line in runbook_text.splitlines():
        if line.startswith("include:"):
            in_include = True
            out.append("# " + line + "  (the fragments' nodes are written after the runbook's own, below)")
            continue
        if in_include and (line.startswith((" ", "-", "#")) or not line.strip()):
            out.append("# " + line if line.strip() else line)
            continue
        in_include = False
        out.append(line)
    for fragment in fragments:
        body = fragment.text.splitlines()
        start = next(i for i, line in enumerate(body) if line.startswith("nodes:"))
        out.append("")
        out.append(f"  # ---- fragment {fragment.name} ({FOLDER}/{fragment.name}.yaml), included ----")
        out.extend(body[start + 1 :])
    return "\n".join(out) + "\n"
