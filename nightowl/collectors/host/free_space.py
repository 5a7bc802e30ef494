"""``free-space``: free bytes and free inodes of the filesystems holding the paths of interest, read-only.

Why: "No space left on device" (ENOSPC) stops an engine mid-download of its weights, a container runtime
mid-pull, and nightowl itself mid-bundle; it comes from either limit, and a filesystem can run out of inodes
with most of its bytes free (moby/moby#37077: ``/`` at 100% IUse% while builds fail). Typical paths: the model
cache (``$HF_HOME``, by default ``~/.cache/huggingface``), ``/var/lib/docker`` (images, container layers), the
bundle folder.

One run checks every path at once: ``space_paths`` (one argument, paths separated by ``:`` as in ``$PATH``,
a leading ``~/`` meaning the remote user's home) and, where the runbook also has it, the single ``space_path``;
a small fixed script drops the paths that do not exist (one ``nightowl-free-space: not found: PATH`` line each:
missing, or not reachable by this user) and hands the rest to one ``df -B1 --output=file,...`` (df takes
several operands; ``file`` names the operand of each row), or ``stat -f`` where that df fails before printing.
A path not found is listed in ``missing_paths``: neither a failure of the others nor room to spare. A runbook
with only ``space_path`` gets the single-path commands, as before.

Read in any form operators paste: ``df -B1 --output=size,used,avail,itotal,iused,iavail,target`` (what the
collector runs, GNU coreutils), ``df -P``/``-k``/``-h`` (bytes only), ``df -i`` (inodes only) and both pasted
one after the other (rows joined by mount point); ``stat -f -c '%S %b %f %a %c %d %n'`` (the fallback where df
has no ``--output``, e.g. BusyBox) gives both.

"Full" follows the kubelet's hard-eviction defaults, which stop a node before ENOSPC does: less than 10%
of the bytes free (``nodefs.available<10%``) or less than 5% of the inodes free (``nodefs.inodesFree<5%``),
https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.host.dev_shm import BLOCK_HEADERS, _human_bytes

KIND = "free-space"
# Arguments: colon-separated path lists ($PATH style; "~/" is the user's home). Paths that do not exist are
# named and left out; the rest go to one df (one row per operand, `file` first), or to stat -f when that df
# fails before printing a row (BusyBox: no --output). Exit 0 when every path was missing: the lines say so.
# Written out again in collectors/readonly.py, which holds every command shape nightowl may run.
SCRIPT = (
    'n=$#; for a do IFS=:; set -f; for p in $a; do [ -n "$p" ] || continue; case $p in "~/"*) p=$HOME/${p#"~/"};; '
    'esac; if [ -e "$p" ]; then set -- "$@" "$p"; else printf \'nightowl-free-space: not found: %s\\n\' "$p"; fi; '
    'done; unset IFS; set +f; done; shift "$n"; [ "$#" -gt 0 ] || exit 0; '
    'if out=$(df -B1 --output=file,size,used,avail,itotal,iused,iavail,target -- "$@"); then printf \'%s\\n\' "$out"; '
    'exit 0; fi; [ -z "$out" ] || { printf \'%s\\n\' "$out"; exit 1; }; '
    "exec stat -f -c '%S %b %f %a %c %d %n' -- \"$@\""
)
GIB = 2**30
FULL_BYTES_FREE_PCT = 10.0  # kubelet nodefs.available<10%
FULL_INODES_FREE_PCT = 5.0  # kubelet nodefs.inodesFree<5%
# "%S %b %f %a %c %d %n": fundamental block size, total blocks, free blocks, blocks free to non-root,
# total inodes, free inodes, name (coreutils and BusyBox stat -f).
_STAT_LINE = re.compile(r"^(\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (.+)$", re.ASCII)
# A pasted shell prompt with the command ("root@host:/x# df -i", "$ stat -f /"), not output.
_PROMPT = re.compile(r"(?:^\s*|[#$>]\s*)(?:sudo\s+)?(?:df|stat)(?:\s|$)")
# Header words of df's columns -> the field they fill.
_WORDS = {
    "used": "used",
    "avail": "avail",
    "available": "avail",
    "inodes": "inodes",
    "itotal": "inodes",
    "iused": "iused",
    "ifree": "ifree",
    "iavail": "ifree",
    "file": "path",  # df --output=file: the operand as given (absent from plain df; "Filesystem" is the device)
}
_NUMBER = re.compile(r"\d+|-", re.ASCII)  # a df -B1 cell: a count, or "-" where the filesystem has none
# The script's line for a path that does not exist (the runner filters them out before df sees them).
_NOT_FOUND = re.compile(r"^nightowl-free-space: not found: (.*)$")


@dataclass(frozen=True)
class Filesystem:
    mounted_on: str | None = None  # stat -f prints no mount point: there it is the path asked, as before
    path: str | None = None  # the path asked (df's File column, stat's %n); None in pasted df output
    size_bytes: int | None = None
    used_bytes: int | None = None
    avail_bytes: int | None = None
    inodes: int | None = None
    inodes_used: int | None = None
    inodes_free: int | None = None


@dataclass(frozen=True)
class FreeSpace:
    kind: str = KIND
    filesystems: tuple[Filesystem, ...] = ()
    missing_paths: tuple[str, ...] = ()  # paths asked that do not exist on the host (the script's not-found lines)
    warnings: tuple[str, ...] = ()


def _header(line: str) -> tuple[dict[int, str], int | None] | None:
    """Column position -> field, and the byte unit of the size column; None when not a df header."""
    words = line.lower().replace("mounted on", "mounted_on").split()
    columns: dict[int, str] = {}
    unit = None
    for position, word in enumerate(words):
        if word in BLOCK_HEADERS or word == "size":
            columns[position], unit = "size", BLOCK_HEADERS.get(word)
        elif word in _WORDS:
            columns[position] = _WORDS[word]
        elif word == "mounted_on":
            columns[position] = "mounted_on"
        elif word == "file" and position == 0:  # --output=file first, as the collector runs it
            columns[position] = "path"
    return (columns, unit) if ("size" in columns.values() or "inodes" in columns.values()) else None


def _count(text: str) -> int | None:
    """An inode count: a number (``df -i``), or with a suffix (``df -ih``: 1.3M, powers of 1024 in GNU df);
    ``-`` is no count."""
    if text.isascii() and text.isdigit():
        return int(text)
    return _human_bytes(text, None)


def _file_row(cells: list[str], numbers: int) -> list[str] | None:
    """``df --output=file,...,target``: the path asked (first) and the mount point (last) may hold spaces, the
    ``numbers`` columns between them do not; None when no run of that many numbers sits between two names."""
    for start in range(1, len(cells) - numbers):
        if all(_NUMBER.fullmatch(cell) for cell in cells[start : start + numbers]):
            end = start + numbers
            return [" ".join(cells[:start]), *cells[start:end], " ".join(cells[end:])]
    return None


def _row(cells: list[str], columns: dict[int, str], unit: int | None) -> Filesystem | None:
    mount_at = next((p for p, f in columns.items() if f == "mounted_on"), None)
    if columns.get(0) == "path" and mount_at == len(columns) - 1:
        split = _file_row(cells, len(columns) - 2)
        if split is None:
            return None
        cells = split
    elif mount_at is not None and len(cells) > mount_at:
        cells = cells[:mount_at] + [" ".join(cells[mount_at:])]  # a mount point with a space in it
    values: dict[str, Any] = {}
    for position, field in columns.items():
        if position >= len(cells):
            return None
        cell = cells[position]
        if field in ("mounted_on", "path"):
            values[field] = cell
        elif field in ("size", "used", "avail"):
            values[f"{field}_bytes"] = _human_bytes(cell, unit)
        else:
            values[{"inodes": "inodes", "iused": "inodes_used", "ifree": "inodes_free"}[field]] = _count(cell)
    return Filesystem(**values)


def _merge(found: list[Filesystem], fs: Filesystem) -> None:
    """A row for a mount point already read (df -h, then df -i pasted) fills what the first left unset; rows
    of different paths asked stay apart even on one filesystem (the model cache and the bundles both on /)."""
    for index, known in enumerate(found):
        if known.mounted_on is not None and (known.mounted_on, known.path) == (fs.mounted_on, fs.path):
            filled = {k: v for k, v in vars(fs).items() if v is not None and getattr(known, k) is None}
            found[index] = replace(known, **filled)
            return
    found.append(fs)


def parse(text: str) -> FreeSpace:
    """df or stat -f output -> one entry per filesystem shown (null where the output does not say)."""
    lines = [line for line in text.splitlines() if line.strip() and not _PROMPT.search(line)]
    found: list[Filesystem] = []
    missing: list[str] = []
    warnings: list[str] = []
    header: tuple[dict[int, str], int | None] | None = None
    for line in lines:
        if (not_found := _NOT_FOUND.match(line.strip())) is not None:
            missing.append(not_found.group(1))
            continue
        stat = _STAT_LINE.match(line.strip()) if header is None else None  # under a df header, a df row
        if stat:
            block, total, _free, avail, inodes, ifree = (int(g) for g in stat.groups()[:6])
            fs = Filesystem(stat.group(7), stat.group(7), block * total, block * (total - _free), block * avail,
                            inodes, inodes - ifree, ifree)  # fmt: skip
            _merge(found, fs)
            continue
        if (parsed := _header(line)) is not None:
            header = parsed
            continue
        if header is None:
            warnings.append(f"not a df or stat -f line: {line.strip()[:120]}")
            continue
        row = _row(line.split(), *header)
        if row is None:
            warnings.append(f"df row shorter than its header: {line.strip()[:120]}")
        else:
            _merge(found, row)
    if text.strip() and not found and not warnings and not missing:
        warnings.append("df printed a header but no row")
    return FreeSpace(filesystems=tuple(found), missing_paths=tuple(dict.fromkeys(missing)), warnings=tuple(warnings))


def _pct(part: int | None, whole: int | None) -> float | None:
    return round(100.0 * part / whole, 2) if part is not None and whole else None


def facts(result: FreeSpace) -> dict[str, Any]:
    """Contract JSON plus, per filesystem, the free share of bytes and inodes and whether it is full, and the
    mount points that are full (``full_paths``) or whose limits were not shown (``unjudged_paths``)."""
    data: dict[str, Any] = to_jsonable(result)
    full, unjudged = [], []
    for entry, fs in zip(data["filesystems"], result.filesystems, strict=True):
        size = fs.size_bytes if fs.size_bytes is not None else None
        bytes_free = _pct(fs.avail_bytes, size)
        inodes_free = _pct(fs.inodes_free, fs.inodes)  # 0 inodes (vfat, btrfs) is no inode limit: None
        entry["bytes_free_pct"], entry["inodes_free_pct"] = bytes_free, inodes_free
        entry["avail_gib"] = round(fs.avail_bytes / GIB, 3) if fs.avail_bytes is not None else None
        is_full = (bytes_free is not None and bytes_free < FULL_BYTES_FREE_PCT) or (
            inodes_free is not None and inodes_free < FULL_INODES_FREE_PCT
        )
        entry["full"] = is_full
        if is_full:
            full.append(fs.mounted_on)
        elif bytes_free is None:
            unjudged.append(fs.mounted_on)
    data["full_paths"], data["unjudged_paths"] = list(dict.fromkeys(full)), list(dict.fromkeys(unjudged))
    data["paths"] = _per_path(data["filesystems"], result.missing_paths)
    frees = [e["bytes_free_pct"] for e in data["filesystems"] if e["bytes_free_pct"] is not None]
    ifrees = [e["inodes_free_pct"] for e in data["filesystems"] if e["inodes_free_pct"] is not None]
    data["bytes_free_pct_min"] = min(frees) if frees else None
    data["inodes_free_pct_min"] = min(ifrees) if ifrees else None
    return data


def _per_path(filesystems: list[dict[str, Any]], missing: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each path asked -> its filesystem's mount point, free shares and whether it is full; a path not found
    has ``found`` false and nothing else (no share, no ``full``: nothing is known of it)."""
    paths: dict[str, dict[str, Any]] = {}
    for entry in filesystems:
        if entry.get("path") is not None:
            keys = ("mounted_on", "avail_gib", "bytes_free_pct", "inodes_free_pct", "full")
            paths[entry["path"]] = {"found": True, **{k: entry.get(k) for k in keys}}
    for path in missing:
        paths.setdefault(path, {"found": False})
    return paths


COLLECTOR = Collector(
    **registered(KIND),
    commands=(
        ("sh", "-c", SCRIPT, KIND, "{space_path}", "{space_paths}"),
        ("sh", "-c", SCRIPT, KIND, "{space_paths}"),
        ("df", "-B1", "--output=size,used,avail,itotal,iused,iavail,target", "--", "{space_path}"),
        ("stat", "-f", "-c", "%S %b %f %a %c %d %n", "--", "{space_path}"),
    ),
    parse=parse,
    facts=facts,
)
