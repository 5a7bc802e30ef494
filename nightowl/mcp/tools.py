"""The read-only tools, as plain functions from JSON arguments to a JSON answer (no MCP SDK here).

Every answer carries ``bundle_id`` and ``bundle_sha256`` (null when the tool reads no bundle), so a
model cites hashed evidence. Nothing here can run an invasive collector or a command of the model's
choosing: tools name runbooks and parameters, never commands; runbooks name collectors, whose commands
are the read-only shapes of collectors/readonly.py; the run path is always asked with invasive
collectors refused; live hosts are only those the server's config lists.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightowl.mcp import schemas
from nightowl.mcp.config import ConfigError, ServerConfig
from nightowl.mcp.hooks import RunHook, RunRequest, ToolError, host_history
from nightowl.mcp.paths import check_path_params

# progress(done, total, message): callable from any thread.
Progress = Callable[[float, float | None, str | None], None]
MAX_PARSE_BYTES = 64 * 1024 * 1024
NO_BUNDLE = {"bundle_id": None, "bundle_sha256": None}
_STRINGS = {"type": "array", "items": {"type": "string"}}
VERDICT_NOTE = "verdicts are nightowl's, decided by the runbook from the hashed evidence in the bundle"


@dataclass(frozen=True)
class Tool:
    """One tool: its name, what it does, the JSON Schema of its arguments and its handler."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Callable[[dict[str, Any], Progress], dict[str, Any]]


class Toolbox:
    """The server's tools, built once from the runbooks the server can reach."""

    def __init__(
        self,
        run: RunHook,
        config: ServerConfig | None = None,
        out_dir: Path | None = None,
        library: Any = None,
        history: Path | None = None,
    ) -> None:
        from nightowl.library.runbooks import RunbookLibrary

        self._run = run
        self.library: RunbookLibrary = library or RunbookLibrary()  # the starting command's runbook folders
        self.history = history  # the starting command's history store (None: off)
        self.config = config or ServerConfig()
        self._out_dir = out_dir or self.config.out
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] | None = None
        self._runbooks: dict[str, dict[str, Any]] | None = None

    def runbooks(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if self._runbooks is None:
                self._runbooks = schemas.runbook_parameters(self.library)
            return self._runbooks

    def tools(self) -> dict[str, Tool]:
        """Every tool by name (computed on the first call)."""
        if self._tools is None:
            self._tools = {t.name: t for t in self._build()}
        return self._tools

    def call(self, name: str, arguments: dict[str, Any] | None, progress: Progress | None = None) -> dict[str, Any]:
        """Run tool ``name``; ToolError carries the message of a refusal or failure."""
        tool = self.tools().get(name)
        if tool is None:
            raise ToolError(f"no tool named {name!r} (tools: {', '.join(self.tools())})")
        arguments = arguments or {}
        try:
            schemas.check_arguments(name, tool.input_schema, arguments)
        except ValueError as exc:
            raise ToolError(scrubbed(str(exc))) from None
        told = progress or (lambda done, total, message: None)
        try:
            answer = tool.handler(arguments, lambda done, total, message: told(done, total, scrubbed(message)))
        except ToolError as exc:
            # An error may quote what was read (a policy's YAML, a log line): scrubbed as an answer is.
            raise ToolError(scrubbed(str(exc))) from None
        # Every answer through the bundle scrubber: an agent is handed no secret a bundle would not keep
        # (issue "trust, round four", item 8).
        return scrubbed(answer)  # type: ignore[no-any-return]

    # --- the tools -------------------------------------------------------------------------------

    def _build(self) -> list[Tool]:
        return [*self._running_tools(), *self._reading_tools()]

    def _running_tools(self) -> list[Tool]:
        """The tools that name a runbook: list them, plan one, run one."""
        runbook, params = schemas.runbook_argument(self.runbooks())
        allowed = list(self.config.hosts)
        hosts = {
            **_STRINGS,
            "items": {"type": "string", "enum": allowed} if allowed else {"type": "string"},
            "description": "live hosts to triage, only those the server's config allows: "
            + (", ".join(allowed) if allowed else "none (this server allows no live host; use replay)"),
        }
        replay = {**_STRINGS, "description": "recorded host folders (one file per collector output) or bundle folders"}
        return [
            Tool(
                "list_runbooks",
                "The runbooks nightowl can run, what each decides, and its parameters (name, type, default).",
                schemas.object_schema({}),
                self._list_runbooks,
            ),
            Tool(
                "plan",
                "Dry run: every read-only command a runbook would run per collect node, parameters filled in. "
                "Connects to nothing. Invasive collectors are listed as skipped: this server never runs them.",
                schemas.object_schema({"runbook": runbook, "params": params}, required=["runbook"]),
                self._plan,
            ),
            Tool(
                "triage",
                "Run a runbook, read-only, on recorded hosts or bundles (replay) or on live hosts the server "
                "allows (hosts). Returns per host the status, the verdict (id, severity, action, summary, "
                "evidence citing bundle files) and the path, with the bundle id and sha256. " + VERDICT_NOTE + ".",
                schemas.object_schema(
                    {"runbook": runbook, "replay": replay, "hosts": hosts, "params": params}, required=["runbook"]
                ),
                self._triage,
            ),
        ]

    def _reading_tools(self) -> list[Tool]:
        """The tools that read what is given or kept: an output, Xid codes, a bundle, the history."""
        return [
            Tool(
                "parse",
                "Parse a saved command output into JSON, as `nightowl parse KIND FILE` (kinds: nvidia-smi, "
                "kernel-log, nccl-log, nccl-tests, metrics, engine-log, ...). Give the text, or a file path.",
                schemas.object_schema(
                    {
                        "kind": {"type": "string", "enum": _kinds(), "description": "collector kind"},
                        "text": {"type": "string", "description": "the saved output"},
                        "path": {"type": "string", "description": "a file holding the saved output"},
                    },
                    required=["kind"],
                ),
                self._parse,
            ),
            Tool(
                "explain_xid",
                "What NVIDIA Xid or SXid codes mean and NVIDIA's documented first action, as `nightowl xid`; "
                "give codes, or a kernel log (dmesg, journalctl -k) to explain each event in it.",
                schemas.object_schema(
                    {
                        "codes": {"type": "array", "items": {"type": "integer"}, "description": "Xid/SXid codes"},
                        "kind": {"type": "string", "enum": ["xid", "sxid"], "description": "default xid"},
                        "log": {"type": "string", "description": "kernel log text"},
                    }
                ),
                self._explain_xid,
            ),
            Tool(
                "read_bundle",
                "Read an evidence bundle: verdicts with their evidence (each citing the file it came from and "
                "that file's sha256), the commands run, the postmortem draft, every file's sha256, and whether "
                "the bundle still matches its manifest. " + VERDICT_NOTE + ".",
                schemas.object_schema({"bundle": {"type": "string", "description": "the bundle folder"}}, ["bundle"]),
                self._read_bundle,
            ),
            Tool(
                "history",
                "Past events nightowl recorded for a host (Xids, verdicts), each naming its bundle.",
                schemas.object_schema(
                    {
                        "host": {"type": "string"},
                        "gpu": {"type": "string", "description": "PCI bus id, e.g. 0000:a1:00"},
                        "since": {"type": "string", "description": "age, e.g. 7d, 12h"},
                    },
                    required=["host"],
                ),
                self._history,
            ),
        ]

    def _list_runbooks(self, arguments: dict[str, Any], progress: Progress) -> dict[str, Any]:
        listed = [{"name": name, **info} for name, info in sorted(self.runbooks().items())]
        return {"runbooks": listed, **NO_BUNDLE}

    def _plan(self, arguments: dict[str, Any], progress: Progress) -> dict[str, Any]:
        from nightowl.collectors import get_collector
        from nightowl.engine.session import plan

        loaded, params = self._runbook_and_params(arguments)
        try:
            steps = plan(loaded, get_collector, allow_invasive=False, params=params)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return {"runbook": loaded.id, "steps": steps, **NO_BUNDLE}

    def _triage(self, arguments: dict[str, Any], progress: Progress) -> dict[str, Any]:
        from nightowl.engine.bundle_summary import host_entry
        from nightowl.paths import default_out_dir

        loaded, params = self._runbook_and_params(arguments)
        out_dir = self._out_dir or default_out_dir()
        replays = tuple(self._readable(p) for p in arguments.get("replay") or [])
        hosts = tuple(dict.fromkeys(arguments.get("hosts") or []))
        refused = [h for h in hosts if h not in self.config.hosts]
        if refused:
            allowed = ", ".join(self.config.hosts) or "none"
            raise ToolError(f"host {refused[0]!r} is not allowed by the server's config (allowed: {allowed})")
        missing = [str(p) for p in replays if not p.is_dir()]
        if missing:
            raise ToolError(f"replay: {missing[0]!r} is not a recorded host or bundle folder")
        if not replays and not hosts:
            raise ToolError("give at least one host or replay path")
        for replay in replays:  # a bundle's host folders are read as recordings: a symlink may not lead out
            self._readable_hosts(replay)
        # every file a path parameter makes nightowl read, inside read_roots (issue "trust, round four", item 3)
        check_path_params(self.config, self.runbooks(), arguments["runbook"], params, hosts, out_dir)
        uploads = sorted(set(params) & upload_params()) if hosts else []
        if uploads:
            raise ToolError(
                f"parameter {uploads[0]} is refused on live hosts over MCP: a collector would send the file it "
                "names to a URL (run it from the CLI, or give the body as text where the runbook allows)"
            )
        total = float(len(hosts) + len(replays))  # a bundle may hold several hosts: the total grows then
        done: list[str] = []

        def host_done(run: Any) -> None:
            done.append(run.host)
            verdict = (host_entry(run).get("verdict") or {}).get("id")
            progress(float(len(done)), max(total, float(len(done))), f"{run.host}: {run.status} {verdict or ''}")

        progress(0.0, total, f"running {loaded.id}")
        request = RunRequest(
            loaded=loaded,
            replays=replays,
            hosts=hosts,
            params=params,
            out_dir=out_dir,
            ssh=self._ssh(),
            on_host_done=host_done,
        )
        summary = self._run(request)
        told = summary.pop("outcome", None) or {}  # the run's Outcome (nightowl/outcome.py), as JSON
        return {
            **summary,
            "bundle_id": told.get("run_id") or summary.get("run_id"),
            "bundle_sha256": told.get("sha256"),
            "verdicts_by": "nightowl",
        }

    def _readable(self, given: str) -> Path:
        from nightowl.paths import default_out_dir

        try:
            return self.config.readable(given, also=self._out_dir or default_out_dir())
        except ConfigError as exc:
            raise ToolError(str(exc)) from None

    def _readable_hosts(self, replay: Path) -> None:
        from nightowl.engine import layout

        folder = replay / layout.HOSTS
        if self.config.read_roots and folder.is_dir():
            self._readable(str(folder))
            for host in folder.iterdir():
                self._readable(str(host))

    def _ssh(self) -> dict[str, Any]:
        config = self.config
        return {
            "known_hosts": config.known_hosts,
            "ssh_config": config.ssh_config,
            "identity_files": config.identity,
        }

    def _runbook_and_params(self, arguments: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The named runbook, loaded and validated, and the model's parameters checked against it."""
        from nightowl.engine.validate import RunbookInvalid

        name = arguments["runbook"]
        known = self.runbooks()
        if name not in known:
            raise ToolError(f"no runbook named {name!r} (known: {', '.join(sorted(known)) or 'none'})")
        try:
            loaded = self.library.load(name)
        except FileNotFoundError as exc:
            raise ToolError(str(exc)) from None
        except RunbookInvalid as exc:
            raise ToolError(f"invalid runbook:\n{exc}") from None
        params = dict(arguments.get("params") or {})
        try:
            schemas.check_param_values(loaded.id, known[name]["parameters"], params)
            loaded.resolve_params(params)  # an undeclared name or a value of the wrong type: the CLI's message
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return loaded, params

    def _parse(self, arguments: dict[str, Any], progress: Progress) -> dict[str, Any]:
        from nightowl.collectors import UnknownCollector, available_kinds, get_collector
        from nightowl.collectors.base import parse_document

        kind = arguments["kind"]
        if arguments.get("path") is not None:
            self._readable(arguments["path"])
        text = _text_or_file(arguments, self._readable)
        try:
            collector = get_collector(kind)
        except (UnknownCollector, ModuleNotFoundError):
            raise ToolError(f"unknown kind {kind!r}; one of: {', '.join(available_kinds())}") from None
        # as `nightowl parse`; call() puts the answer through the bundle scrubber
        return {"result": parse_document(collector, text), **NO_BUNDLE}

    def _explain_xid(self, arguments: dict[str, Any], progress: Progress) -> dict[str, Any]:
        from nightowl.collectors.base import to_jsonable
        from nightowl.collectors.gpu import kernel_log, kernel_patterns, xid_catalog

        codes, log = arguments.get("codes") or [], arguments.get("log")
        if not codes and log is None:
            raise ToolError("give codes or a kernel log")
        kind = arguments.get("kind") or "xid"
        rows = [xid_catalog.explain({"kind": kind, "code": code}) for code in codes]
        warnings: list[str] = []
        if log is not None:
            result = to_jsonable(kernel_log.parse(log))
            rows += [xid_catalog.event_row(e) for e in kernel_patterns.judged_events(result)]
            warnings = result["warnings"]
        return {"events": rows, "warnings": warnings, **NO_BUNDLE}

    def _read_bundle(self, arguments: dict[str, Any], progress: Progress) -> dict[str, Any]:
        from nightowl.mcp.bundles import read_bundle

        return read_bundle(str(self._readable(arguments["bundle"])))

    def _history(self, arguments: dict[str, Any], progress: Progress) -> dict[str, Any]:
        answer = host_history(arguments["host"], arguments.get("gpu"), arguments.get("since"), self.history)
        return {"host": arguments["host"], **answer, **NO_BUNDLE}  # each timeline row names its bundle


def upload_params() -> frozenset[str]:
    """Parameters a collector command reads as a file to send (curl's ``@{name}``): a model that could
    set one on a live host could make the host post any file it can read to any URL."""
    import re

    from nightowl.collectors.readonly import ALLOWED

    return frozenset(m for shape in ALLOWED for element in shape for m in re.findall(r"^@\{(\w+)\}$", element))


def _kinds() -> list[str]:
    from nightowl.collectors import available_kinds

    return sorted(available_kinds())


def scrubbed(value: Any) -> Any:
    """``value`` with every string (keys too) through ``redact.scrub_secrets``: what a bundle keeps of an output."""
    from nightowl.redact import scrub_secrets

    if isinstance(value, str):
        return scrub_secrets(value)
    if isinstance(value, dict):
        return {scrubbed(key): scrubbed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrubbed(item) for item in value]
    return value


def _text_or_file(arguments: dict[str, Any], readable: Callable[[str], Path]) -> str:
    if (arguments.get("text") is None) == (arguments.get("path") is None):
        raise ToolError("give either text or path")
    if arguments.get("text") is not None:
        return str(arguments["text"])
    path = Path(arguments["path"]).expanduser()
    try:
        # Regular files only, opened without blocking: a FIFO or a device would hold a worker for good
        # (issue "trust, round four", item 8).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ToolError(f"cannot read {arguments['path']!r}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"cannot read {arguments['path']!r}: not a regular file")
        # What was opened, by its real name: a folder on the way swapped for a symlink after the check is
        # still held to read_roots, so no text from outside them reaches the answer (its warnings included).
        if os.path.isdir("/proc/self/fd"):
            readable(os.readlink(f"/proc/self/fd/{fd}"))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_PARSE_BYTES)
    except OSError as exc:
        raise ToolError(f"cannot read {arguments['path']!r}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")
