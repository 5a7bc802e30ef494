"""Runbooks by name (site folders, then the built-ins in ``runbooks/*.yaml``) or by path, and loading.

A team adds its own runbooks without forking: a ``NAME.yaml`` in a site folder (nightowl/paths.py
``runbook_dirs``: ``--runbook-path``, ``$NIGHTOWL_RUNBOOK_PATH``, ``$XDG_CONFIG_HOME/nightowl/runbooks``,
``/etc/nightowl/runbooks``) is found by ``NAME``; the first folder holding a name wins, so a site copy
of a built-in replaces it. A site folder or file that others than its owner or root may write is
refused with the reason (whoever can write it would choose what nightowl, often root, runs).

The ``--runbook-path`` folders are handed in, never kept here: each function takes them as ``dirs`` (none:
only the environment's and the built-in folders), and a :class:`RunbookLibrary` holds them for a command,
a receiver or a worker to pass down.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightowl.engine.file_trust import unsafe_reason  # the one rule, fragments' too
from nightowl.paths import data_dir, runbook_dirs

Dirs = Iterable[Path]


def builtin_dir() -> Path:
    return data_dir("runbooks")


def _fragment_stats(path: Path) -> tuple[tuple[str, int, int], ...]:
    """Each fragment the runbook could include, with its version: a fragment edited while serve runs is read again."""
    from nightowl.engine.includes import fragment_files

    found = []
    for fragment in fragment_files(path, fragment_dirs()).values():
        with contextlib.suppress(OSError):
            info = fragment.stat()
            found.append((str(fragment), info.st_mtime_ns, info.st_size))
    return tuple(found)


def fragment_dirs() -> tuple[Path, ...]:
    """Where ``include:`` looks after the runbook's own folder: nightowl's fragments (engine/includes.py)."""
    return (builtin_dir() / "fragments",)


def builtin_paths() -> dict[str, Path]:
    return {p.stem: p for p in sorted(builtin_dir().glob("*.yaml"))}


class UnsafeSitePath(FileNotFoundError):
    """A site runbook that others than its owner or root may write (a FileNotFoundError, so every
    caller that reports an unknown runbook reports this too, exit 2)."""


def site_paths(dirs: Dirs = ()) -> dict[str, Path]:
    """Runbooks of the site folders (``dirs`` first) by name, the first folder holding a name winning (a
    refused one too: it is named and refused, never silently replaced by the next folder's or the built-in)."""
    return _site_scan(dirs)[0]


def refused(dirs: Dirs = ()) -> dict[str, str]:
    """Site runbook name -> why it is refused (someone else may write it or its folder), as of now: a
    value computed from the folders each time, never a list a scan left behind for another caller."""
    return _site_scan(dirs)[1]


def _site_scan(dirs: Dirs = ()) -> tuple[dict[str, Path], dict[str, str]]:
    """The site folders' runbooks by name, and why those that may not supply one are refused."""
    found: dict[str, Path] = {}
    refusals: dict[str, str] = {}
    for folder in runbook_dirs(tuple(dirs)):
        if folder.is_dir():
            folder_problem = unsafe_reason(folder)
            for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
                if path.stem in found:
                    continue
                found[path.stem] = path
                problem = folder_problem or unsafe_reason(path)
                if problem:
                    refusals[path.stem] = problem
    return found, refusals


def all_paths(dirs: Dirs = ()) -> dict[str, Path]:
    """Every runbook a name can reach: site runbooks first, then the built-ins they do not replace."""
    return {**builtin_paths(), **site_paths(dirs)}


def resolve(name_or_path: str, dirs: Dirs = ()) -> Path:
    """A runbook name (``xid``; site folders, ``dirs`` first, then built-in) or a path to a YAML file."""
    site, refusals = _site_scan(dirs)
    known = {**builtin_paths(), **site}
    if name_or_path in refusals:
        raise UnsafeSitePath(
            f"site runbook {known[name_or_path]} refused: {refusals[name_or_path]}; whoever can write it "
            "would choose what nightowl runs (chmod go-w, chown root, or remove it)"
        )
    if name_or_path in known:
        return known[name_or_path]
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    names = ", ".join(known) or "none"
    searched = ", ".join(str(d) for d in runbook_dirs(tuple(dirs)))
    raise FileNotFoundError(f"no runbook named {name_or_path!r} (known: {names}; site folders searched: {searched})")


# Draft-07: the newest draft editors' YAML language servers fully support (redhat-developer/vscode-yaml
# README, "Associating schemas"). pydantic's output uses nothing newer: ``$defs`` is reached by JSON pointer.
SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"


def json_schema() -> dict[str, Any]:
    """The runbook JSON Schema (draft-07), generated from the pydantic model that loading checks.

    It covers the schema pass: keys, types, severities and actions. The graph, expression and
    fact checks need ``nightowl runbook validate``. docs/runbook-schema.md shows how to point an
    editor at it.
    """
    from nightowl.engine.model import Runbook

    return {"$schema": SCHEMA_DIALECT, **Runbook.model_json_schema()}


@dataclass(frozen=True)
class RunbookLibrary:
    """The runbooks a command reaches: its ``--runbook-path`` folders, searched before the environment's and
    the built-ins. Built once by the command (nightowl/cli/main.py) and handed to what it starts (a receiver,
    ``watch``, the MCP server, rehearsal workers), so two callers in one process never share folders."""

    dirs: tuple[Path, ...] = ()

    def resolve(self, name_or_path: str) -> Path:
        return resolve(name_or_path, self.dirs)

    def load(self, name_or_path: str):  # noqa: ANN201 - LoadedRunbook, imported lazily
        return load(name_or_path, self.dirs)

    def all_paths(self) -> dict[str, Path]:
        return all_paths(self.dirs)

    def site_paths(self) -> dict[str, Path]:
        return site_paths(self.dirs)

    def refused(self) -> dict[str, str]:
        return refused(self.dirs)


# cache: keyed by the file's path, version (mtime, size), its fragments' versions and the folders searched
# (which decide the names a `next:` may reach): an edit is a new key.
_LOADED: dict[tuple[str, int, int, tuple[tuple[str, int, int], ...], tuple[Path, ...]], object] = {}


def load(name_or_path: str, dirs: Dirs = ()):  # noqa: ANN201 - LoadedRunbook, imported lazily
    """Load and validate once per file version (rehearsals and serve load the same runbook often)."""
    folders = tuple(dirs)
    path = resolve(name_or_path, folders)
    try:
        stat = path.stat()
    except OSError:
        return _load(path, folders)
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, _fragment_stats(path), folders)
    if key not in _LOADED:
        _LOADED[key] = _load(path, folders)
    return _LOADED[key]


def _load(path: Path, dirs: tuple[Path, ...] = ()):  # noqa: ANN202
    """The validated runbook from the cache (nightowl/library/runbook_cache.py) when its entry fits,
    else validated, then stored. Either way its ``runbook`` is the plain copy (engine/runbook_data.py), so
    a run does not depend on where it came from, and the code of the expressions this process compiles is
    added to the entry at exit (``_store_new_code_at_exit``)."""
    from dataclasses import replace

    from nightowl.engine import expressions
    from nightowl.engine.includes import fragment_files  # a fragment's bytes are part of the runbook's key
    from nightowl.engine.runbook_data import RunbookData, as_data
    from nightowl.engine.validate import LoadedRunbook
    from nightowl.library import runbook_cache

    try:
        raw: bytes | None = path.read_bytes()
    except OSError:
        raw = None  # validation reports it
    others = {**all_paths(dirs), **fragment_files(path, fragment_dirs())}
    key = runbook_cache.entry_key(path, raw, others) if raw is not None else None
    entry = runbook_cache.get(key) if key is not None else None
    cached = entry.get("loaded") if entry is not None else None
    if (
        key is not None
        and entry is not None
        and isinstance(cached, LoadedRunbook)
        and isinstance(cached.runbook, RunbookData)
    ):
        # an entry without usable code: its expressions are compiled when used
        with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
            expressions.install_precompiled(entry["expressions"], entry["templates"], entry["fact_paths"])
            _store_new_code_at_exit(key, entry, cached)
        return replace(cached, path=path)
    validated = _validate(path, dirs)
    loaded = replace(validated, runbook=as_data(validated.runbook))
    try:
        unchanged = key is not None and path.read_bytes() == raw
    except OSError:
        unchanged = False
    if unchanged and key is not None:
        conditions = expression_sources(loaded)[0]
        entry = {"loaded": loaded, "expressions": {}, "templates": {}, "fact_paths": _fact_paths(conditions)}
        runbook_cache.put(key, entry)
        _store_new_code_at_exit(key, entry, loaded)
    return loaded


def expression_sources(loaded) -> tuple[set[str], set[str], set[str]]:  # noqa: ANN001 - LoadedRunbook
    """The conditions, value expressions and templates a walk of ``loaded`` may evaluate."""
    conditions, values, templates = set(), set(), set()
    for node in loaded.runbook.nodes.values():
        conditions |= {branch.when for branch in node.decide or []}
        if node.cannot_judge is not None:
            templates.add(node.cannot_judge)
        spec = node.verdict
        if spec is None:
            continue
        templates.add(spec.summary)
        values |= {source for source in (spec.gpus, spec.implicates) if source}
        if spec.next is not None:
            values.add(spec.next.hosts)
            values |= {source for source in spec.next.params.values() if isinstance(source, str)}
    return conditions, values, templates


def _fact_paths(conditions: set[str]) -> dict[str, tuple[str, ...]]:
    """The trace's fact paths of each condition (parsed already by validation)."""
    from nightowl.engine.expressions import fact_paths

    return {source: fact_paths(source) for source in conditions}


# The cache entries this process loaded, whose new code is stored at exit, by key: one each however often a
# long-running process (``nightowl serve``, the MCP server) loads the same runbook, with one exit hook for all.
# cache: keyed by the cache entry's key (the runbook file's content); only adds code, read once at exit.
_PENDING_CODE: dict[str, tuple[dict[str, Any], Path, Any]] = {}


def _store_new_code_at_exit(key: str, entry: dict[str, Any], loaded) -> None:  # noqa: ANN001 - LoadedRunbook
    """At exit, add to the cache entry ``key`` holds the code of the runbook's expressions this process
    compiled and the entry lacks. Compiling all of them (node-health: about 120) when the entry is made
    cost a fifth of a cold `nightowl check`; a run compiles those on its path anyway (and validation those
    it evaluates), and a later run down another path adds its own. The folder is the one of now (a test's
    or a caller's may be gone by then: then nothing is written)."""
    from nightowl.user_cache import cache_dir

    folder = cache_dir()
    if folder is None:
        return
    if not _PENDING_CODE:
        import atexit

        atexit.register(store_pending_code)
    _PENDING_CODE[key] = (entry, folder, loaded)


def store_pending_code() -> None:
    """Add the code this process compiled to each entry ``_store_new_code_at_exit`` noted (the exit hook);
    like every use of the cache, it never fails."""
    from nightowl.library import runbook_cache

    while _PENDING_CODE:
        key, (entry, folder, loaded) = _PENDING_CODE.popitem()
        try:
            conditions, values, templates = expression_sources(loaded)
        except Exception:  # noqa: BLE001 - a runbook of an unexpected shape: its entry is left as it is
            continue
        runbook_cache.add_code(key, entry, folder, conditions | values, templates)


def _validate(path: Path, dirs: tuple[Path, ...] = ()):  # noqa: ANN202
    """Validate; every collector it names must also load as read-only, before anything connects."""
    from nightowl.collectors import MODULES, UnsafeCollector, get_collector
    from nightowl.engine.runbook_data import split_entry
    from nightowl.engine.validate import Issue, RunbookInvalid, load_runbook

    loaded = load_runbook(path, known_collectors=MODULES, lookup=get_collector, fragment_dirs=fragment_dirs())
    issues = []
    for node_id, node in loaded.runbook.nodes.items():
        here = {split_entry(entry)[1] for entry in node.collect or []}
        for entry in node.collect or []:
            try:
                collector = get_collector(split_entry(entry)[0])
            except UnsafeCollector as exc:
                issues.append(Issue(loaded.file_of(node_id), loaded.node_line(node_id), node_id, str(exc)))
                continue
            # a derived collector reads other collectors' facts: they must be collected by then
            missing = set(getattr(collector, "inputs", ())) - set(loaded.collected_before[node_id]) - here
            if missing:
                problem = f"{entry} derives from {', '.join(sorted(missing))}, which not every path here collects"
                issues.append(Issue(loaded.file_of(node_id), loaded.node_line(node_id), node_id, problem))
    issues += _chain_issues(loaded, dirs)
    if issues:
        raise RunbookInvalid(issues)
    return loaded


def declared_params(name: str, dirs: Dirs = ()) -> list[str] | None:
    """Parameter names of the runbook ``name`` reaches (site or built-in), read, not validated (chains
    may point both ways), with the same guarded YAML loader as every runbook."""
    from nightowl.engine.yaml_lines import YamlError, load_with_lines

    path = all_paths(dirs).get(name)
    if path is None:
        return None
    try:
        data = load_with_lines(path.read_text())[0] or {}
    except (OSError, UnicodeDecodeError, YamlError):
        return None
    return list((data.get("parameters") or {}) if isinstance(data, dict) else {})


def _chain_issues(loaded, dirs: tuple[Path, ...] = ()):  # noqa: ANN001, ANN202 - LoadedRunbook, Issue: imported lazily
    """A verdict's ``next`` names a built-in runbook and only parameters it takes."""
    from nightowl.engine.chain import check
    from nightowl.engine.validate import Issue
    from nightowl.engine.yaml_lines import line_of

    issues = []
    for node_id, node in loaded.runbook.nodes.items():
        if node.verdict is None or node.verdict.next is None:
            continue
        for rel, problem in check(node.verdict.next, lambda name: declared_params(name, dirs)):
            line = line_of(loaded.lines, ("nodes", node_id, "verdict", "next", *rel)) or loaded.node_line(node_id)
            issues.append(Issue(loaded.file_of(node_id), line, node_id, f"next: {problem}"))
    return issues
