"""Built-in runbooks (``runbooks/*.yaml``) and loading by name or path."""

from __future__ import annotations

from pathlib import Path

from nightowl.paths import data_dir


def builtin_dir() -> Path:
    return data_dir("runbooks")


def builtin_paths() -> dict[str, Path]:
    return {p.stem: p for p in sorted(builtin_dir().glob("*.yaml"))}


def resolve(name_or_path: str) -> Path:
    """A built-in runbook name (``xid``) or a path to a YAML file."""
    builtins = builtin_paths()
    if name_or_path in builtins:
        return builtins[name_or_path]
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    known = ", ".join(builtins) or "none"
    raise FileNotFoundError(f"no runbook named {name_or_path!r} (built-in: {known})")


def load(name_or_path: str):  # noqa: ANN201 - LoadedRunbook, imported lazily
    from nightowl.collectors import MODULES, get_collector  # noqa: F401
    from nightowl.engine.validate import load_runbook

    return load_runbook(resolve(name_or_path), known_collectors=MODULES)
