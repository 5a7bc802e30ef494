"""Facts nightowl judges by, as data files beside this module (see README.md here).

Each file holds one row per fact with its public source. The collectors that use a file load it
once through ``read_csv`` / ``read_yaml`` (cached by their own ``functools.cache`` loaders) and
keep their Python API. A malformed file is a ``KnowledgeError`` naming the file and line.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import marshal
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nightowl.user_cache import read_private, write_private

HERE = Path(__file__).resolve().parent


class KnowledgeError(ValueError):
    """A data file is missing a column or a value, or holds one that cannot be read."""


def path(name: str) -> Path:
    return HERE / name


def read_csv(name: str, required: Iterable[str] = ("source",)) -> list[dict[str, str]]:
    """Rows of ``name`` as dicts (values stripped); every column in ``required`` must be non-empty.

    Lines starting with ``#`` before the header are comments (a generated file says so there).
    """
    file = path(name)
    with file.open(encoding="utf-8", newline="") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    reader = csv.DictReader(lines)
    missing = [column for column in required if column not in (reader.fieldnames or ())]
    if missing:
        raise KnowledgeError(f"{file}: header lacks column(s) {', '.join(missing)}")
    rows = []
    for row in reader:
        values = {key: (value or "").strip() for key, value in row.items() if key is not None}
        empty = [column for column in required if not values.get(column)]
        if empty:
            raise KnowledgeError(f"{file}: line {reader.line_num}: empty {', '.join(empty)}")
        rows.append(values)
    return rows


def read_yaml(name: str) -> Any:
    """The data of the knowledge file ``name`` (see :func:`load_yaml`)."""
    return load_yaml(path(name))


def load_yaml(file: Path) -> Any:
    """A shipped data file's data, read with libyaml (a tenth of the pure-Python loader's CPU: `nightowl
    check` reads several of these files); a file libyaml refuses is read again with the pure-Python loader,
    so the KnowledgeError names file and line exactly as before.

    The data of a file read before comes from the user's cache (nightowl/user_cache.py: marshal bytes
    under the SHA-256 of the file's bytes and the Python version), so a check neither imports nor runs a
    YAML parser; data marshal cannot hold (a YAML timestamp) is parsed every time."""
    raw = file.read_bytes()
    digest = hashlib.sha256(sys.version.encode() + b"\0" + raw).hexdigest()
    key = f"data-{digest}.marshal"
    stored = read_private(key)
    if stored is not None:
        try:
            return marshal.loads(stored)
        except (EOFError, ValueError, TypeError):
            pass  # a corrupt entry: parsed again below, and replaced
    data = _parse_yaml(file, raw.decode("utf-8"))
    with contextlib.suppress(ValueError):  # a value marshal cannot hold: parsed every time
        write_private(key, marshal.dumps(data))
    return data


def _parse_yaml(file: Path, text: str) -> Any:
    import yaml  # lazy: `nightowl --help` must not import it

    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.load(text, Loader=fast)  # noqa: S506 - CSafeLoader is the safe loader in C
        except yaml.YAMLError:
            pass  # the pure-Python loader below words the error
    try:
        with file.open(encoding="utf-8") as handle:  # a stream: its marks name the file
            return yaml.safe_load(handle)
    except yaml.YAMLError as error:
        raise KnowledgeError(f"{file}: {error}") from None


def field(entry: Mapping[str, Any], key: str, where: str) -> Any:
    """``entry[key]``, or a KnowledgeError saying which entry of which file lacks it."""
    if key not in entry:
        raise KnowledgeError(f"{where}: missing '{key}'")
    return entry[key]


def compile_pattern(pattern: str, where: str, ignore_case: bool = False) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as error:
        raise KnowledgeError(f"{where}: bad regex {pattern!r}: {error}") from None


def optional(value: str) -> str | None:
    """CSV has no null: an empty cell is None."""
    return value or None


# The one notation for confidence in every data file: a `confidence` column or key of letters, one per
# part of the source in order, joined by "/" (README.md here): P primary, S secondary, M not yet
# checked, C seen in the real outputs under fixtures/corpus/.
CONFIDENCE = re.compile(r"^[PSMC](?:/[PSMC])*$")


def sourced(entry: Mapping[str, Any], where: str, required: bool = False) -> str:
    """The entry's ``source`` as the readers show it: ``[confidence] source`` (just the source when the
    entry gives no confidence and none is required); a confidence not in the notation is an error."""
    source = str(field(entry, "source", where))
    confidence = entry.get("confidence")
    if confidence is None and not required:
        return source
    if not isinstance(confidence, str) or not CONFIDENCE.match(confidence):
        raise KnowledgeError(f"{where}: confidence {confidence!r} is not P, S, M or C (several joined by /)")
    return f"[{confidence}] {source}"
