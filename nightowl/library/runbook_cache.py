"""A cache of validated runbooks, so `nightowl check` does not validate an unchanged runbook every run.

Validating a runbook (nightowl/engine/validate.py: schema, graph, expressions, facts) and compiling its
Jinja expressions cost about half a second of CPU, every run, for a file that changes a few times a year.
An entry holds the loaded runbook and the Python code Jinja generated for each of its expressions that
runs have evaluated (a run adds what it compiled at exit: library/runbooks.py), under a key made of: the
runbook file's bytes and path (sha256), the bytes of every other runbook a name reaches (a verdict's
``next`` is checked against the runbook it names), nightowl's version, the Python, pydantic
and Jinja versions, the bytes of the validator's own modules, and the size and modification time of every
other file of the package (collectors declare the facts validation checks). Any change is a miss.

Where: nightowl/user_cache.py's folder, ``$NIGHTOWL_CACHE_DIR``, else ``$XDG_CACHE_HOME/nightowl``, else
``~/.cache/nightowl`` (mode 0700); ``NIGHTOWL_CACHE=off`` turns it off (docs/reference.md#the-runbook-cache).
A cache that is missing, corrupt, unreadable, written by another version or not writable is never an
error: the runbook is validated as if there were none, and a runbook that fails validation is never stored, so its error
(file and line) is reported every time.

Entries are pickles. Unpickling runs code named by the file, so an entry is read only from a folder and
a file the user running nightowl owns, that no one else may write (the folder 0700, the file 0600,
opened without following a symlink); anything else is ignored. Whoever can write such a file can already
run code as that user (``~/.bashrc``), so the cache gives no one a power they did not have.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import nightowl
from nightowl.user_cache import read_private, write_private

FORMAT = 2  # bump when the layout of an entry changes
_PACKAGE = Path(nightowl.__file__).resolve().parent
# Validation's own code and data, hashed by content: a change here changes what validation says.
_VALIDATOR_FILES = (
    "engine/validate.py",
    "engine/expressions.py",
    "engine/model.py",
    "engine/runbook_data.py",
    "engine/limits.py",
    "engine/members.py",
    "engine/node_graph.py",
    "engine/chain.py",
    "engine/params.py",
    "engine/background.py",
    "engine/yaml_lines.py",
    "library/runbooks.py",
    "library/runbook_cache.py",
    "user_cache.py",
    "knowledge/actions.csv",
    "collectors/readonly_commands.yaml",
)


# cache: the installed package's code does not change while the process runs.
_CODE_KEY: list[bytes] = []  # the package's part of the key, computed once per process


def _code_key() -> bytes:
    if not _CODE_KEY:
        digest = hashlib.sha256()
        for name in _VALIDATOR_FILES:
            digest.update(name.encode() + b"\0" + (_PACKAGE / name).read_bytes())
        for folder, dirs, files in os.walk(_PACKAGE):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for file in sorted(files):
                info = os.stat(os.path.join(folder, file))
                digest.update(f"{folder}/{file}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
        import jinja2

        versions = f"{FORMAT} {nightowl.__version__} {sys.version} {jinja2.__version__}"
        digest.update(versions.encode() + _pydantic_version())
        _CODE_KEY.append(digest.digest())
    return _CODE_KEY[0]


def _pydantic_version() -> bytes:
    """pydantic's version.py, read, not imported: a run whose runbook is cached never imports pydantic."""
    spec = importlib.util.find_spec("pydantic")
    if spec is None or spec.origin is None:
        return b"no pydantic"
    try:
        return (Path(spec.origin).parent / "version.py").read_bytes()
    except OSError:
        return b"pydantic version unknown"


def entry_key(path: Path, raw: bytes, others: dict[str, Path]) -> str:
    """The key of ``path`` holding ``raw``, with ``others`` (name -> path: every runbook a name reaches)."""
    digest = hashlib.sha256(_code_key())
    digest.update(str(path).encode() + b"\0" + hashlib.sha256(raw).digest())
    for name, other in sorted(others.items()):
        try:
            body = other.read_bytes()
        except OSError:
            body = b"\0unreadable"
        digest.update(f"{name}\0{other}\0".encode() + hashlib.sha256(body).digest())
    return digest.hexdigest()


def get(key: str) -> dict[str, Any] | None:
    """The entry stored under ``key``, or None (no cache, no entry, or one not safe or fit to use)."""
    raw = read_private(f"runbook-{key}.pickle")
    if raw is None:
        return None
    try:
        entry = pickle.loads(raw)  # noqa: S301 - a private file of the user's own (module docstring)
    except Exception:  # noqa: BLE001 - a corrupt or foreign entry is a miss, never an error
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or entry.get("format") != FORMAT:
        return None
    return entry


def put(key: str, entry: dict[str, Any], folder: Path | None = None) -> None:
    """Store ``entry`` under ``key`` (in ``folder``, else the cache folder of now)."""
    try:
        data = pickle.dumps({**entry, "key": key, "format": FORMAT}, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - something pickle cannot hold: no entry, and no error
        return
    write_private(f"runbook-{key}.pickle", data, folder)


def add_code(key: str, entry: dict[str, Any], folder: Path, expressions: set[str], templates: set[str]) -> None:
    """Store ``entry`` again under ``key`` in ``folder`` (one that still exists) with the code this process
    compiled for those of ``expressions`` and ``templates`` it lacks; nothing new, nothing written. Run at
    exit (library/runbooks.py): like every use of the cache, it never fails."""
    from nightowl.engine.expressions import compiled_here

    try:
        new_expressions = compiled_here("expression", expressions - set(entry["expressions"]))
        new_templates = compiled_here("template", templates - set(entry["templates"]))
        if not (new_expressions or new_templates) or not folder.is_dir():
            return
        merged = {
            **entry,
            "expressions": {**entry["expressions"], **marshal_codes(new_expressions)},
            "templates": {**entry["templates"], **marshal_codes(new_templates)},
        }
    except Exception:  # noqa: BLE001 - an entry of an unexpected shape: left as it is
        return
    put(key, merged, folder)


def marshal_codes(codes: dict[str, Any]) -> dict[str, bytes]:
    """Code objects as marshal bytes (valid for this Python only: its version is in the key)."""
    out = {}
    for source, code in codes.items():
        try:
            out[source] = marshal.dumps(code)
        except ValueError:  # a constant marshal cannot hold: that expression is compiled when used
            continue
    return out
