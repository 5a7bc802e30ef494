"""NCCL RAS status (``ncclras``, NCCL 2.24+): which rank processes are missing, dead or behind.

RAS threads run inside every NCCL process and answer on ``localhost:28028`` (``NCCL_RAS_ADDR``);
the ``ncclras`` client prints a text report (NVIDIA/nccl ``docs/userguide/source/troubleshooting/ras.rst``,
strings from ``src/ras/client_support.cc``):

- header: ``NCCL version 2.26.2 compiled with CUDA 12.6`` / ``CUDA runtime version ..., driver version ...``;
- ``Job summary``: nodes, processes per node, GPUs per process, totals (``The outlier node:`` when uneven);
- ``Communicators... (0.00s)``: one row per group of alike communicators, ``Status`` (NOCOMM, INIT,
  RUNNING, FINALIZE, ABORT; UNKNOWN before 2.26) and ``Errors`` (OK, MISMATCH, ERROR, INCOMPLETE, combined);
- ``Errors``: ``INCOMPLETE`` (job processes that did not answer), ``DEAD`` (unreachable for 60 s),
  ``#g-c (hash) INCOMPLETE`` (missing ranks: ``The missing rank: 21`` up to 2.26,
  ``Rank 1 -- GPU 0 managed by process 60004 on node 10.4.109.13`` after), ``#g-c (hash) ERROR``;
- ``Warnings``: ``TIMEOUT`` and ``#g-c (hash) MISMATCH`` (``N ranks have launched up to operation X``,
  per operation type since 2.26, or ``N ranks have status S``), outlier ranks listed under their group.

Several reports in one text (the members of a job each asked their own RAS thread) merge: a
process, rank or mismatch seen in any report counts once. RAS names nodes by IP address.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from nightowl import knowledge
from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "nccl-ras"

# Communicator status and error words of the summary table (client_support.cc statusStr / errorStr;
# UNKNOWN is what 2.24-2.25 printed where 2.26+ prints NOCOMM, per ras.rst).
STATUS_WORDS = frozenset({"NOCOMM", "UNKNOWN", "INIT", "RUNNING", "FINALIZE", "ABORT"})
ERROR_WORDS = frozenset({"OK", "MISMATCH", "ERROR", "INCOMPLETE"})

# A fixed script (no input reaches it) speaking RAS's text protocol ("VERBOSE STATUS", ras.rst
# "RAS Queries"), for hosts where NCCL came without the ncclras client.
RAS_QUERY_SCRIPT = (
    "import socket,sys;s=socket.create_connection(('localhost',28028),10);s.settimeout(60);"
    "s.sendall(b'VERBOSE STATUS\\n');[sys.stdout.buffer.write(b) for b in iter(lambda:s.recv(65536),b'')]"
)

# The report's lines by the name the reader uses, each regex with its source in
# nightowl/knowledge/nccl_ras_lines.yaml (read once).
LINES_FILE = "nccl_ras_lines.yaml"


@functools.cache
def line_patterns() -> dict[str, re.Pattern[str]]:
    """Name -> compiled regex of every report line the reader knows (tests/collectors/nccl checks that the
    names are exactly those the reader asks ``_match`` for)."""
    document = knowledge.read_yaml(LINES_FILE) or {}
    knowledge.sourced(document, LINES_FILE, required=True)
    return {
        str(name): knowledge.compile_pattern(str(regex), f"{LINES_FILE}: lines.{name}")
        for name, regex in (document.get("lines") or {}).items()
    }


def _match(name: str, line: str) -> re.Match[str] | None:
    pattern = line_patterns().get(name)
    if pattern is None:
        raise knowledge.KnowledgeError(f"{LINES_FILE}: no line named {name!r}")
    return pattern.match(line)


@dataclass(frozen=True)
class RasProcess:
    pid: int
    node: str
    gpus: tuple[int, ...]
    dead: bool


@dataclass(frozen=True)
class RasRank:
    """A rank RAS listed; ``value`` is its operation count or status where the line gives one."""

    rank: int
    gpu: int | None = None
    pid: int | None = None
    node: str | None = None
    value: int | str | None = None


@dataclass(frozen=True)
class CommGroup:
    group: int
    comms: int
    nodes: int
    ranks_per_node: str  # "8" or "7-8"
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: tuple[str, ...]


@dataclass
class Mismatch:
    """One inconsistency of one communicator: ``differs_in`` is ``status`` or an operation type
    (``collective`` when NCCL < 2.26 did not split counts by type)."""

    comm: str
    hash: str
    differs_in: str
    groups: list[tuple[int, int | str]] = field(default_factory=list)  # (ranks, operation count or status)
    ranks: list[RasRank] = field(default_factory=list)


@dataclass(frozen=True)
class RankError:
    comm: str
    hash: str
    phase: str  # init | async
    error: str | None
    count: int
    rank: int | None = None
    gpu: int | None = None
    pid: int | None = None
    node: str | None = None


@dataclass
class RasStatus:
    kind: str = KIND
    reports: int = 0
    nccl_version: str | None = None
    cuda_runtime_version: int | None = None
    cuda_driver_version: int | None = None
    job: dict[str, int] | None = None  # nodes, processes, gpus (+ processes_per_node, gpus_per_process)
    outlier_nodes: list[dict[str, Any]] = field(default_factory=list)
    collection_seconds: float | None = None
    groups: list[CommGroup] = field(default_factory=list)
    missing_process_count: int = 0
    dead_process_count: int = 0
    missing_processes: list[RasProcess] = field(default_factory=list)
    missing_ranks: list[dict[str, Any]] = field(default_factory=list)  # {comm, hash, rank, gpu, pid, node}
    mismatches: list[Mismatch] = field(default_factory=list)
    rank_errors: list[RankError] = field(default_factory=list)
    timeouts: int = 0
    warnings: list[str] = field(default_factory=list)


class _Reader:
    """Line-by-line reader; ``block`` is the Errors/Warnings entry the detail lines belong to."""

    def __init__(self) -> None:
        self.result = RasStatus()
        self.header = ""
        self.block: str | None = None  # INCOMPLETE | DEAD | TIMEOUT | comm-INCOMPLETE | comm-ERROR | comm-MISMATCH
        self.comm = ("", "")
        self.mismatch: Mismatch | None = None
        self.phase = "init"
        self.error: str | None = None
        self.group_value: int | str | None = None

    def feed(self, raw: str) -> None:
        line = raw.strip()
        if not line:
            return
        if self._header(line) or self._summary(line) or self._block_start(line) or self._detail(line):
            return
        if not _match("noise", line):
            self.result.warnings.append(line[:200])

    def _header(self, line: str) -> bool:
        result = self.result
        if m := _match("header", line):
            result.reports += 1
            result.nccl_version = result.nccl_version or m["version"]
            self.block = None
            return True
        if m := _match("cuda", line):
            result.cuda_runtime_version = int(m["runtime"])
            result.cuda_driver_version = int(m["driver"])
            return True
        return False

    def _summary(self, line: str) -> bool:
        result = self.result
        if _match("numbers", line) and self.block is None:
            self._job_row([int(n) for n in line.split()])
            return True
        if m := _match("outlier_node", line):
            result.outlier_nodes.append({"node": m["node"], "pids": [int(p) for p in m["pids"].split(",")]})
            return True
        if m := _match("communicators", line):
            if m["seconds"]:
                result.collection_seconds = float(m["seconds"])
            return True
        if m := _match("group_row", line):
            group = CommGroup(
                int(m["group"]),
                int(m["comms"]),
                int(m["nodes"]),
                m["per_node"],
                int(m["per_comm"]),
                int(m["in_group"]),
                m["status"],
                tuple(m["errors"].split(",")),
            )
            unknown = ({group.status} - STATUS_WORDS) | (set(group.errors) - ERROR_WORDS)
            if unknown:  # a newer NCCL's word: keep the row, say it was not understood
                result.warnings.append(f"unknown RAS status word(s) {', '.join(sorted(unknown))}: {line[:200]}")
            if group not in result.groups:
                result.groups.append(group)
            return True
        if line in ("Errors", "Warnings"):
            self.block = None
        elif not _match("numbers", line):
            self.header = line
        return False

    def _job_row(self, numbers: list[int]) -> None:
        # Totals row: "(total) per node per process (total) (total)" (5 numbers) or
        # "(total) (total) (total)" (3 numbers); per-node distribution rows are left out.
        if len(numbers) == 5 and "(total)" in self.header:
            nodes, per_node, per_process, processes, gpus = numbers
            job = {"nodes": nodes, "processes": processes, "gpus": gpus}
            job |= {"processes_per_node": per_node, "gpus_per_process": per_process}
            self.result.job = self.result.job or job
        elif len(numbers) == 3 and self.header.count("(total)") == 3:
            self.result.job = self.result.job or dict(zip(("nodes", "processes", "gpus"), numbers, strict=True))

    def _block_start(self, line: str) -> bool:
        if line in ("INCOMPLETE", "DEAD", "TIMEOUT"):
            self.block = line
            return True
        if m := _match("comm_block", line):
            self.block = "comm-" + m["what"]
            self.comm = ("#" + m["id"], m["hash"].lower())
            self.mismatch, self.phase, self.error, self.group_value = None, "init", None, None
            return True
        return False

    def _detail(self, line: str) -> bool:
        result = self.result
        if self.block in ("INCOMPLETE", "DEAD"):
            dead = self.block == "DEAD"
            if m := _match("missing_processes", line):
                result.missing_process_count = max(result.missing_process_count, int(m["count"]))
                return True
            if m := _match("dead_count", line):
                result.dead_process_count = max(result.dead_process_count, int(m["count"]))
                return True
            if m := _match("process", line):
                gpus = tuple(int(g) for g in m["gpus"].split(","))
                process = RasProcess(int(m["pid"]), m["node"], gpus, dead)
                _add_process(result.missing_processes, process)
                return True
            return bool(_match("not_found", line))
        if self.block == "TIMEOUT" and (m := _match("timeouts", line)):
            result.timeouts = max(result.timeouts, int(m["count"]))
            return True
        if self.block == "comm-INCOMPLETE":
            return self._missing_rank(line)
        if self.block == "comm-ERROR":
            return self._rank_error(line)
        if self.block == "comm-MISMATCH":
            return self._mismatch(line)
        return False

    def _missing_rank(self, line: str) -> bool:
        comm, comm_hash = self.comm
        if _match("missing_rank_count", line):
            return True
        ranks: list[dict[str, Any]] = []
        if m := _match("the_missing", line):
            ranks = [{"rank": int(r), "gpu": None, "pid": None, "node": None} for r in m["ranks"].split(",")]
        elif m := _match("rank", line):
            ranks = [{"rank": int(m["rank"]), "gpu": _int(m["gpu"]), "pid": _int(m["pid"]), "node": m["node"]}]
        else:
            return False
        for rank in ranks:
            entry = {"comm": comm, "hash": comm_hash, **rank}
            if entry not in self.result.missing_ranks:
                self.result.missing_ranks.append(entry)
        return True

    def _rank_error(self, line: str) -> bool:
        comm, comm_hash = self.comm
        if m := _match("error_phase", line):
            self.phase, self.error = ("init" if m["phase"] == "Initialization" else "async"), None
            return True
        if m := _match("reported", line):
            self.error = m["error"]
            self._add_error(RankError(comm, comm_hash, self.phase, self.error, int(m["count"])))
            return True
        if m := _match("rank", line):
            rank, gpu, pid = int(m["rank"]), _int(m["gpu"]), _int(m["pid"])
            error = m["error"] or self.error
            self._add_error(RankError(comm, comm_hash, self.phase, error, 1, rank, gpu, pid, m["node"]))
            return True
        return False

    def _add_error(self, error: RankError) -> None:
        if error not in self.result.rank_errors:
            self.result.rank_errors.append(error)

    def _mismatch(self, line: str) -> bool:
        comm, comm_hash = self.comm
        counts = _match("different_counts", line)
        if counts or _match("different_status", line):
            self.mismatch = Mismatch(comm, comm_hash, counts["op"] if counts else "status")
            self.result.mismatches.append(self.mismatch)
            self.group_value = None
            return True
        if self.mismatch is None:
            return False
        groups = self.mismatch.groups
        if m := _match("launched", line):
            self.group_value = int(m["operation"])
            groups.append((int(m["count"]), self.group_value))
            return True
        if m := _match("not_launched", line):
            self.group_value = 0
            groups.append((int(m["count"]), 0))
            return True
        if m := _match("have_status", line):
            self.group_value = m["status"]
            groups.append((int(m["count"]), self.group_value))
            return True
        if m := _match("rank", line):
            own: int | str | None = _int(m["operation"]) if m["operation"] else 0 if m["none"] else m["status"]
            if own is not None:
                groups.append((1, own))  # a group of one is printed as its rank line only
            value = own if own is not None else self.group_value
            self.mismatch.ranks.append(RasRank(int(m["rank"]), _int(m["gpu"]), _int(m["pid"]), m["node"], value))
            return True
        return False


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None


def _add_process(processes: list[RasProcess], process: RasProcess) -> None:
    """A process seen missing in one report and dead in another counts once, as dead."""
    for index, known in enumerate(processes):
        if (known.pid, known.node) == (process.pid, process.node):
            if process.dead and not known.dead:
                processes[index] = process
            return
    processes.append(process)


def _merge_mismatches(mismatches: list[Mismatch]) -> list[Mismatch]:
    """The same communicator and field reported alike by several members counts once."""
    merged: list[Mismatch] = []
    for mismatch in mismatches:
        if not any(to_jsonable(mismatch) == to_jsonable(known) for known in merged):
            merged.append(mismatch)
    return merged


def parse(text: str) -> RasStatus:
    if text.lstrip().startswith("{"):
        result = RasStatus()
        result.warnings.append("JSON output (ncclras -f json) is not read: take the text report")
        return result
    reader = _Reader()
    for raw in text.splitlines():
        reader.feed(raw)
    result = reader.result
    result.mismatches = _merge_mismatches(result.mismatches)
    if result.reports == 0 and (result.groups or result.missing_processes or result.mismatches):
        result.reports = 1  # a quoted report without its version header
    return result


def mismatch_signature(result: RasStatus) -> list[str]:
    """What the mismatches look like: equal in two queries ~30 s apart = a stuck communicator (ras.rst)."""
    lines = set()
    for m in result.mismatches:
        ordered = sorted(m.groups, key=lambda g: (g[1] if isinstance(g[1], int) else -1, str(g[1]), g[0]))
        groups = " ".join(f"{count}x{value}" for count, value in ordered)
        lines.add(f"{m.hash} {m.differs_in} {groups}")
    return sorted(lines)


def _behind(result: RasStatus) -> list[dict[str, Any]]:
    """Per operation-count mismatch, the groups of ranks below the highest count (and who they are)."""
    behind = []
    for m in result.mismatches:
        counts = [value for _, value in m.groups if isinstance(value, int)]
        if m.differs_in == "status" or not counts:
            continue
        ahead = max(counts)
        for ranks, value in m.groups:
            if isinstance(value, int) and value < ahead:
                listed = [r.rank for r in m.ranks if r.value == value]
                nodes = sorted({r.node for r in m.ranks if r.value == value and r.node})
                behind.append(
                    {
                        "comm": m.comm,
                        "hash": m.hash,
                        "op": m.differs_in,
                        "operation": value,
                        "ranks": ranks,
                        "ahead": ahead,
                        "listed": listed,
                        "nodes": nodes,
                    }
                )
    return behind


def facts(result: RasStatus) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    data["mismatches"] = [
        {**to_jsonable(m), "groups": [{"ranks": count, "value": value} for count, value in m.groups]}
        for m in result.mismatches
    ]
    flags = {error for group in result.groups for error in group.errors if error != "OK"}
    flags |= {"DEAD"} if result.dead_process_count or any(p.dead for p in result.missing_processes) else set()
    flags |= {"INCOMPLETE"} if result.missing_process_count or result.missing_ranks else set()
    flags |= {"TIMEOUT"} if result.timeouts else set()
    flags |= {"MISMATCH"} if result.mismatches else set()
    flags |= {"ERROR"} if result.rank_errors else set()
    data["error_flags"] = sorted(flags)
    data["statuses"] = sorted({group.status for group in result.groups})
    data["healthy"] = bool(result.reports) and not flags
    nodes = {p.node for p in result.missing_processes} | {r["node"] for r in result.missing_ranks if r["node"]}
    data["missing_hosts"] = sorted(nodes)
    data["dead_hosts"] = sorted({p.node for p in result.missing_processes if p.dead})
    data["mismatch_signature"] = mismatch_signature(result)
    data["behind"] = _behind(result)
    return data


COLLECTOR = Collector(
    **registered(KIND),
    # ncclras -v lists outlier ranks up to half of a communicator (10 at most without it); the
    # fallback asks the same socket directly. Both only read: STATUS is a query (ras.rst).
    commands=(("ncclras", "-v"), ("python3", "-c", RAS_QUERY_SCRIPT)),
    parse=parse,
    facts=facts,
    # RAS waits up to 5 s per leg for unresponsive peers (ncclras -t default); a hung job's report
    # "may take several seconds to generate".
)
