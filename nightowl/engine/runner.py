"""Walk a runbook on one host: collect lazily, decide, conclude, and trace it all.

The engine knows nothing about GPUs: collectors arrive through ``lookup``
(kind -> object with kind, commands, parse, facts, timeout, invasive)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

import nightowl.knowledge.actions as actions  # the verdict's first steps by tenancy (data only, no GPU code)
from nightowl.engine import incremental, layout, same_text
from nightowl.engine.background import Background, wait_seconds
from nightowl.engine.expressions import (
    ExpressionError,
    evaluate_condition,
    evaluate_value,
    fact_paths,
    render,
    resolve_path,
)
from nightowl.engine.gpu_findings import with_other_gpus  # every GPU with a fault of its own (issue 45.7)
from nightowl.engine.inflight import InFlight as InFlight  # re-exported: its home until it moved
from nightowl.engine.output_status import is_blank, output_status, shows_nothing
from nightowl.engine.parse_output import mark_cut as mark_cut  # re-exported: their home until they moved
from nightowl.engine.parse_output import parse_output as parse_output
from nightowl.engine.runbook_data import NodeData, split_entry  # not engine.model: no pydantic to run
from nightowl.engine.unread import nothing_status, unread_facts, unread_reasons, unreadable, unreadable_reason
from nightowl.engine.validate import LoadedRunbook
from nightowl.transports.base import CommandResult, Transport, TransportError, is_recorded

TRACE_LIST_CAP = 25  # values recorded in the trace are trimmed; the raw output is in the bundle


class CollectorLike(Protocol):
    """What the engine needs of a collector (read-only, so frozen dataclasses fit).

    The engine's only view of evidence: it runs ``commands`` and hands the output to ``parse``
    then ``facts``, and never learns what the evidence means. ``nightowl.collectors.base.Collector``
    is the implementation every built-in kind uses; a test can pass any object with these members."""

    @property
    def kind(self) -> str:
        """The name runbooks use in ``collect:`` (``nvidia-smi``); unique in a lookup."""
        ...

    @property
    def commands(self) -> tuple[tuple[str, ...], ...]:
        """Every argv this collector may run, alternatives in order; nothing else is ever run for it."""
        ...

    @property
    def timeout(self) -> float:
        """Seconds one command may take before it is killed and recorded as timed out."""
        ...

    @property
    def invasive(self) -> bool:
        """True when running it loads GPUs or the network; skipped unless the run allows invasive collectors."""
        ...

    @property
    def parse(self) -> Callable[[str], Any]:
        """Pure function from a command's stdout to a typed result; may raise (recorded, never fatal)."""
        ...

    @property
    def facts(self) -> Callable[[Any], dict[str, Any]]:
        """Turns the parse result into the JSON-able facts conditions read under the collector's namespace."""
        ...


class Recorder(Protocol):
    """Where the runner sends every command it ran, kept or not: the bundle writer, or a test double.

    Called from several threads at once (collectors of one node run side by side); an
    implementation must be thread-safe."""

    def record_command(self, host: str, kind: str, result: CommandResult, keep_output: bool) -> str | None:
        """Store one command's output; return its path inside the bundle when kept."""


@dataclass
class CollectorRun:
    """One collector's outcome on one host (or, merged, on a job): status, facts and where the output is.

    ``status`` is ``ok``, ``timed_out``, ``error``, ``no_data``, ``unreadable`` (text, but not in a form the
    parser reads: collectors/coverage.py), ``skipped`` or ``late`` (nightowl read the
    output after its deadline: it says nothing about the host, which then gets no verdict); anything but ``ok``
    carries a ``reason`` a person can act on. ``facts`` is None when nothing could be parsed, so a
    condition never reads an empty output as healthy. ``file`` is the bundle path of the kept output."""

    kind: str
    namespace: str
    status: str  # ok | timed_out | error | no_data | unreadable | skipped | late
    reason: str | None = None
    facts: dict[str, Any] | None = None
    parse_error: str | None = None
    file: str | None = None
    attempts: list[CommandResult] = field(default_factory=list)
    text: str = field(default="", repr=False)


@dataclass
class NodeVisit:
    """One node on the path taken, as the trace records it: what was collected, each condition tried
    (with the fact values it read) and where the walk went next."""

    node: str
    kind: str
    status: str
    started: float
    duration: float = 0.0
    collectors: dict[str, str] = field(default_factory=dict)
    conditions: list[dict[str, Any]] = field(default_factory=list)
    next: str | None = None


@dataclass
class HostRun:
    """Everything one host's run produced: status, verdict, the path and its visits, every collection.

    ``status`` is ``ok``, ``unreachable`` (never connected: no verdict) or ``incomplete`` (every
    collector failed: no verdict unless a branch judged that failure). ``verdict`` is None when the
    run could not judge, never a guessed healthy one."""

    host: str
    status: str = "ok"  # ok | unreachable | incomplete
    verdict: dict[str, Any] | None = None
    path: list[str] = field(default_factory=list)
    visits: list[NodeVisit] = field(default_factory=list)
    collections: dict[str, CollectorRun] = field(default_factory=dict)
    error: str | None = None
    started: float = 0.0
    duration: float = 0.0
    # scope: job only: the members, each one's role and the facts that differ between them (engine/job.py)
    job: dict[str, Any] | None = None
    replayed: bool = False  # evidence from a recording: its capture time is the replay's (manifest replayed_hosts)


class CannotJudge(Exception):
    """A condition on the path could not be evaluated: the host gets no verdict."""

    def __init__(self, node: str, condition: str, error: str) -> None:
        super().__init__(f"node {node}: condition `{condition}` could not be evaluated: {error}")

    @classmethod
    def because(cls, node: str, reason: str) -> CannotJudge:
        """The runbook itself says the evidence is too thin (a ``cannot_judge`` node)."""
        exc = cls.__new__(cls)
        Exception.__init__(exc, f"cannot judge ({node}): {reason}")
        return exc


class Overloaded(CannotJudge):
    """nightowl read a command's output after the command's deadline because nightowl itself was behind:
    the host is not at fault, and no rule may read the missing answer as a hung command or a clean one."""

    def __init__(self, late: list[CollectorRun]) -> None:
        Exception.__init__(self, "cannot judge: " + "; ".join(f"{run.reason} ({run.kind})" for run in late))


@dataclass(frozen=True)
class RunOptions:
    """How to run: parameter values, whether invasive collectors may run, concurrency and deadlines.

    ``command_timeout`` only ever shortens a collector's own timeout; ``host_timeout`` bounds one
    host's whole walk, and collectors still waiting when it runs out are skipped with that reason."""

    params: dict[str, Any] = field(default_factory=dict)
    allow_invasive: bool = False
    concurrency: int = 4  # collectors of one node run side by side
    command_timeout: float | None = None  # caps every collector's own timeout
    host_timeout: float | None = None  # the whole host; collectors left when it runs out are skipped
    # Set on SIGINT/SIGTERM (engine.session.close_live_transports): a `wait:` in progress ends at once and
    # no further node starts, in whichever thread the walk runs.
    stop: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)
    # Threads shared by every host of a run, started ahead (engine.session.run_runbook): a node's collectors
    # run there, ``concurrency`` at a time. None: each node starts its own (a thread started while other
    # hosts' SSH key exchanges hold the GIL waits its turn: hundreds of milliseconds in a wide sweep).
    collect_pool: Executor | None = field(default=None, compare=False, repr=False)
    # Set when the program running this is being stopped while the run itself may still finish (a
    # receiver's SIGTERM gives running captures a grace): a command that then dies of a signal was killed
    # by that stop (systemd signals the whole cgroup), so its output is not evidence and the run is partial.
    stopping: threading.Event | None = field(default=None, compare=False, repr=False)
    # Set by the session while it writes the bundle's closing files: a signal then waits for the save.
    saving: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)
    # Collectors and hosts still running: an interrupt waits (briefly) for them to record what they ran.
    inflight: InFlight = field(default_factory=lambda: InFlight(), compare=False, repr=False)
    cursors: Any = field(default=None, compare=False, repr=False)  # read positions (engine/incremental.py)
    # The run's parse results (engine/parse_memo.ParsedOutputs) for its bundle's readers; None: none kept.
    parsed: Any = field(default=None, compare=False, repr=False)
    # Named functions derived collectors may call (engine/context.RunContext.readers), as ``inputs["readers"]``.
    readers: Mapping[str, Callable[..., Any]] = field(default_factory=dict, compare=False, repr=False)
    # The pace the caller's last run ended at (engine/flow.FlowMemory: a repeated sweep's); None: start afresh.
    flow_memory: Any = field(default=None, compare=False, repr=False)


# After a command died of a signal, how long to wait for the stop that may have sent it (the program's
# own signal handler runs a moment later, in the main thread). Only paid by a signalled command.
SIGNALLED_GRACE_SECONDS = 2.0


def is_derived(lookup: Callable[[str], CollectorLike], entry: str) -> bool:
    """Whether a ``collect:`` entry is a derived collector (it reads other facts and runs no command)."""
    return bool(getattr(lookup(split_entry(entry)[0]), "inputs", None))


class HostRunner:
    """Walks one runbook on one host: from the entry, collect what a node asks, decide, conclude.

    Collectors run lazily (only those on the path taken), each once per entry, with the
    collectors of one node side by side. Every command goes to the recorder the moment it
    returns; a failing collector or a failing condition is recorded, never raised, so the walk
    always ends in a verdict or in an honest "cannot judge" (``HostRun.status``)."""

    def __init__(
        self,
        loaded: LoadedRunbook,
        transport: Transport,
        lookup: Callable[[str], CollectorLike],
        recorder: Recorder,
        options: RunOptions,
    ) -> None:
        self.loaded = loaded
        self.transport = transport
        self.lookup = lookup
        self.recorder = recorder
        self.options = options
        # "replay" hosts hold one recording per kind: no fallback commands to try.
        self.single_attempt = is_recorded(transport)
        self.run = HostRun(host=transport.host, replayed=self.single_attempt)
        self.deadline = time.monotonic() + options.host_timeout if options.host_timeout else None
        self.background = Background(lambda entry: is_derived(lookup, entry), options.stop)

    # -- collecting -----------------------------------------------------------------
    def _collect_one(self, entry: str) -> CollectorRun:
        kind, namespace = split_entry(entry)
        run = collect_on(
            self.transport, self.lookup(kind), self.recorder, self.options, self.single_attempt, deadline=self.deadline
        )
        run.namespace = namespace
        return run

    def _collect(self, entries: list[str]) -> None:
        todo = [e for e in dict.fromkeys(entries) if e not in self.run.collections]
        if not todo:
            return
        derived = [e for e in todo if is_derived(self.lookup, e)]
        commands = [e for e in todo if e not in derived]
        for wave in incremental.waves(commands, self.lookup, self.options):
            self._collect_wave(wave)
        late = [self.run.collections[e] for e in commands if self.run.collections[e].status == "late"]
        if late:
            raise Overloaded(late)
        for entry in derived:  # after the collectors whose facts they read
            self.run.collections[entry] = self._derive_one(entry)

    def _collect_wave(self, commands: list[str]) -> None:
        if commands and self.options.collect_pool is not None:
            self._collect_shared(commands, self.options.collect_pool)
        elif commands:
            workers = max(1, min(self.options.concurrency, len(commands)))
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="collect")
            try:
                for entry, run in zip(commands, pool.map(self._collect_one, commands), strict=True):
                    self.run.collections[entry] = run
            except BaseException:  # on an interrupt, do not wait for collectors whose transports are being closed
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown(wait=True)

    def _collect_shared(self, commands: list[str], pool: Executor) -> None:
        """The node's collectors on the run's shared threads, ``concurrency`` of them at a time: as many tasks,
        each taking the next collector when it is done with one. (One task a collector, each waiting for a turn
        while it held a thread, let a few hosts' waiting collectors take every thread the pool has for all the
        hosts in flight: the other hosts' collectors, their reads included, waited for a thread.)"""
        todo, taking, done, abandoned = iter(commands), threading.Lock(), {}, threading.Event()

        def drain() -> None:
            while not (self.options.stop.is_set() or abandoned.is_set()):
                with taking:
                    entry = next(todo, None)
                if entry is None:
                    return
                done[entry] = self._collect_one(entry)

        futures = [pool.submit(drain) for _ in range(max(1, min(self.options.concurrency, len(commands))))]
        try:
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in [*finished, *futures]:  # a failure first, without waiting for the others
                future.result()
        except BaseException:  # an interrupt or a failure: what has not started yet never will
            abandoned.set()
            for future in futures:
                future.cancel()
            raise
        finally:
            self.run.collections.update((entry, done[entry]) for entry in commands if entry in done)
        if len(done) < len(commands):  # stopped before every collector ran: the walk goes no further
            self._check_stop()

    def _derive_one(self, entry: str) -> CollectorRun:
        """A derived collector runs no command: it computes facts from namespaces collected before."""
        kind, namespace = split_entry(entry)
        collector: Any = self.lookup(kind)
        run = CollectorRun(kind=kind, namespace=namespace, status="ok")
        by_namespace = {c.namespace: c for c in self.run.collections.values()}
        missing = [n for n in collector.inputs if not (by_namespace.get(n) and by_namespace[n].facts)]
        if missing:
            run.status, run.reason = "skipped", "needs facts from: " + ", ".join(missing)
            return run
        try:
            inputs: dict[str, Any] = {n: by_namespace[n].facts for n in collector.inputs}
            for name in getattr(collector, "optional_inputs", ()):
                found = by_namespace.get(name)
                inputs[name] = found.facts if found is not None and found.status == "ok" and found.facts else {}
            inputs["hosts"] = self.context().get("hosts") or {self.run.host: {n: inputs[n] for n in collector.inputs}}
            inputs["readers"] = self.options.readers  # what the caller hands derived collectors (RunContext)
            run.facts = collector.derive(inputs, dict(self.options.params))
        except Exception as exc:  # noqa: BLE001 - a derivation bug is evidence, not a crash
            run.status = "error"
            run.reason = run.parse_error = f"{kind} failed: {type(exc).__name__}: {exc}"
            run.facts = {"kind": kind, "warnings": [run.reason]}
        return run

    def _wait(self, wait: float | str | None) -> None:
        """Pause between two takes (a scrape window); recorded hosts replay without waiting."""
        if wait is None or self.single_attempt:
            return
        seconds = wait_seconds(wait, self.options.params)
        if seconds is not None and seconds > 0:
            for transport in getattr(self, "members", None) or [self.transport]:  # a job: every member's
                forget = getattr(transport, "forget_batched", None)  # a read after the pause is read after it
                if callable(forget):
                    forget()
                shared = getattr(self.options.cursors, "shared", None)  # nor does a reader take an answer from before
                if shared is not None:
                    shared.forget(transport.host)
            if self.deadline is not None:  # --host-timeout bounds the pause too
                seconds = min(float(seconds), max(0.0, self.deadline - time.monotonic()))
            self.options.stop.wait(min(float(seconds), 3600.0))
        self._check_stop()

    def _check_stop(self) -> None:
        """An interrupted run starts nothing new; the caller saves the partial bundle (run_runbook)."""
        if self.options.stop.is_set():
            raise KeyboardInterrupt

    # -- deciding -------------------------------------------------------------------
    def context(self) -> dict[str, Any]:
        """What conditions and templates see: ``params``, ``host``, ``status`` and one namespace per collection."""
        ctx: dict[str, Any] = {
            "params": dict(self.options.params),
            "host": self.run.host,
            "status": {c.namespace: c.status for c in self.run.collections.values()},
        }
        for c in self.run.collections.values():
            ctx[c.namespace] = c.facts if c.facts is not None else {}
        return ctx

    def _decide(self, node: NodeData, visit: NodeVisit) -> str:
        ctx = self.context()
        for branch in node.decide or []:
            record: dict[str, Any] = {
                "when": branch.when,
                "goto": branch.goto,
                "reads": {p: _trim(resolve_path(p, ctx)) for p in fact_paths(branch.when)},
            }
            try:
                record["value"] = evaluate_condition(branch.when, ctx)
            except ExpressionError as exc:
                record["value"], record["error"] = None, str(exc)
                visit.conditions.append(record)
                raise CannotJudge(visit.node, branch.when, str(exc)) from None
            visit.conditions.append(record)
            if record["value"]:
                return branch.goto
        assert node.default is not None
        return node.default

    def _conclude(self, node_id: str, node: NodeData) -> dict[str, Any]:
        spec = node.verdict
        assert spec is not None
        ctx = self.context()
        try:
            summary = render(spec.summary, ctx).strip()
        except ExpressionError as exc:
            summary = f"{spec.id}: {spec.action} (the summary could not be filled in: {exc})"
        unavailable: dict[str, str] = {}
        gpus: Any = None
        if spec.gpus:
            try:
                gpus = evaluate_value(spec.gpus, ctx)
            except ExpressionError as exc:
                unavailable["gpus"] = f"{spec.gpus} could not be evaluated: {exc}"
        try:
            evidence = self._evidence(spec.evidence, ctx)
        except Exception as exc:  # noqa: BLE001 - the verdict stands without its evidence list
            evidence, unavailable["evidence"] = [], f"could not be gathered: {type(exc).__name__}: {exc}"
        verdict = {
            "id": spec.id,
            "severity": spec.severity,
            "action": spec.action,
            "summary": " ".join(summary.split()),
            "evidence": evidence,
            "gpus": list(gpus) if isinstance(gpus, (list, tuple)) else gpus,
            "node": node_id,
            "first_step": actions.first_steps(spec.action, ctx, ctx["params"].get("tenancy"), self.transport.host),
        }
        caveats, verdict = cut_caveats(list(self.run.collections.values())), with_other_gpus(verdict, ctx)
        if caveats:  # a "no X" on a cut log says so, in the summary every reader sees
            verdict["caveats"] = caveats
            verdict["summary"] = f"{verdict['summary']} Caveat: {'; '.join(caveats)}."
        if unavailable:
            verdict["unavailable"] = unavailable  # which part of the verdict is missing, and why
        if spec.next is not None:
            from nightowl.engine.chain import resolve as resolve_next

            verdict["next"] = resolve_next(spec.next, ctx)
        return verdict

    def _reason(self, template: str) -> str:
        try:
            return " ".join(render(template, self.context()).split())
        except ExpressionError as exc:
            return f"{' '.join(template.split())} (could not be filled in: {exc})"

    def _evidence(self, declared: list[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
        items = []
        for path in declared:
            value = resolve_path(path, ctx)
            item = {"fact": path, "value": _trim(value), "source": self._source(path)}
            reason = self._status_reason(path) or (self._missing_reason(path) if value is None else None)
            if reason:
                item["reason"] = reason  # "error" alone does not say that nvidia-smi was not found
            items.append(item)
        for visit in self.run.visits:
            for cond in visit.conditions:
                if cond.get("value"):
                    sources = sorted({s for p in cond["reads"] if (s := self._source(p))})
                    items.append(
                        {
                            "fact": f"{visit.node}: {cond['when']}",
                            "value": cond["reads"],
                            "source": ", ".join(sources) or None,
                        }
                    )
        return items

    def _status_reason(self, fact_path: str) -> str | None:
        head, _, rest = fact_path.partition(".")
        if head != "status":
            return None
        namespace = rest.partition(".")[0]
        return next((c.reason for c in self.run.collections.values() if c.namespace == namespace), None)

    def _missing_reason(self, fact_path: str) -> str:
        """Why a fact has no value: its collector failed, was not run, or its output lacks it."""
        namespace = fact_path.partition(".")[0]
        run = next((c for c in self.run.collections.values() if c.namespace == namespace), None)
        if run is None:
            return "not collected on this path"
        if run.status != "ok":
            return f"{run.kind} {run.status}" + (f": {run.reason}" if run.reason else "")
        return f"not in the {run.kind} output"

    def _source(self, fact_path: str) -> str | None:
        head, _, rest = fact_path.partition(".")
        if head == "status":
            head = rest.partition(".")[0]
        for c in self.run.collections.values():
            if c.namespace == head:
                return c.file or layout.MANIFEST
        return None

    # -- walking --------------------------------------------------------------------
    def execute(self) -> HostRun:
        """Connect, walk, close; always returns the HostRun (``unreachable`` when connecting failed)."""
        run = self.run
        run.started = time.time()
        t0 = time.monotonic()
        try:
            self.transport.connect()
        except TransportError as exc:
            run.status, run.error = "unreachable", str(exc)
            run.duration = time.monotonic() - t0
            return run
        try:
            self._walk()
        finally:
            self.transport.close()
            run.duration = time.monotonic() - t0
        return run

    def _walk(self) -> None:
        try:
            self._walk_nodes()
        except CannotJudge as exc:
            # A rule that cannot be evaluated is not false: taking the other branch could say "healthy".
            self.run.status, self.run.error, self.run.verdict = "incomplete", str(exc), None
            self.run.visits[-1].status = "error"
        finally:
            self.background.close()  # a background node still running when the walk ends early
        self._check_evidence()

    def _walk_nodes(self) -> None:
        nodes = self.loaded.runbook.nodes
        node_id: str | None = self.loaded.runbook.entry
        while node_id is not None:
            node = nodes[node_id]
            visit = NodeVisit(node=node_id, kind=node.kind, status="ok", started=time.time())
            self.run.path.append(node_id)
            self.run.visits.append(visit)
            t0 = time.monotonic()
            next_id: str | None = None
            if self.background.needed_by(node.collect):  # engine/background.py: joined before facts are read
                self._collect(self.background.join(self.run.collections, worst_status))
            if node.collect is not None and node.background:  # the stop is checked by its collectors
                self.background.start(self._collect, node.collect, visit)
                next_id = node.next
            elif node.collect is not None:
                self._check_stop()
                self._wait(node.wait)
                self._collect(node.collect)
                visit.collectors = {k: self.run.collections[k].status for k in node.collect}
                statuses = set(visit.collectors.values())
                visit.status = "ok" if statuses <= {"ok"} else worst_status(statuses)
                next_id = node.next
            elif node.decide is not None:
                next_id = self._decide(node, visit)
                if any("error" in c for c in visit.conditions):
                    visit.status = "error"
            elif node.cannot_judge is not None:
                raise CannotJudge.because(node_id, self._reason(node.cannot_judge))
            else:
                unread = unread_reasons(self.run, node.verdict.action if node.verdict else "none")
                if unread:  # no verdict rests on what nightowl could not read (engine/unread.py)
                    raise CannotJudge.because(node_id, unread)
                self.run.verdict = self._conclude(node_id, node)
            visit.next = next_id
            visit.duration = time.monotonic() - t0
            node_id = next_id

    def _check_evidence(self) -> None:
        if any(c.status == "late" for c in self.run.collections.values()):
            return  # the run says nightowl was behind; "every collector failed" would blame the host
        collected = self.run.collections.values()
        if collected and not any(c.facts for c in collected):
            self.run.status = "incomplete"
            failures = "every collector failed: " + "; ".join(f"{c.kind}: {c.reason}" for c in collected)
            if not self._decided_on_failure():  # a verdict on empty facts would be a guess: exit 3, and it says so
                self.run.verdict, failures = None, f"cannot judge: no collector returned evidence ({failures})"
            self.run.error = failures + (f" ({self.run.error})" if self.run.error else "")

    def _decided_on_failure(self) -> bool:
        """Whether a branch taken on the path judged a command that hung (a hung nvidia-smi is evidence about the
        node); one that failed, was skipped or printed nothing says nothing about the node."""
        return any(
            cond.get("value") and any(p.startswith("status.") and v == "timed_out" for p, v in cond["reads"].items())
            for visit in self.run.visits
            for cond in visit.conditions
        )


_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


def placeholders(argv: tuple[str, ...]) -> list[str]:
    """The ``{name}`` parameters an argv template names, in order."""
    return [m.group(1) for element in argv for m in _PLACEHOLDER.finditer(element)]


def resolve_argv(argv: tuple[str, ...], params: dict[str, Any]) -> tuple[str, ...] | None:
    """Fill ``{name}`` placeholders from runbook parameters; None if one is unset.

    A value fills exactly the argv element it stands in (no shell ever sees it); a value that
    is a whole element may not start with "-", so a parameter can never smuggle in an option
    such as ``-r`` (inside ``--since={since}`` it is only ever the option's value)."""
    filled = []
    for element in argv:
        names = _PLACEHOLDER.findall(element)
        whole = bool(_PLACEHOLDER.fullmatch(element))
        for name in names:
            value = params.get(name)
            if value is None or (whole and str(value).startswith("-")):
                return None
        filled.append(_PLACEHOLDER.sub(lambda m: str(params[m.group(1)]), element) if names else element)
    return tuple(filled)


def collect_on(
    transport: Transport,
    collector: CollectorLike,
    recorder: Recorder,
    options: RunOptions,
    single_attempt: bool = False,
    keep_text: bool = False,
    deadline: float | None = None,
) -> CollectorRun:
    """Run one collector on one host: fallbacks in order, every attempt recorded, output parsed."""
    kind = collector.kind
    run = CollectorRun(kind=kind, namespace=split_entry(kind)[1], status="error")
    if collector.invasive and not options.allow_invasive:
        run.status, run.reason = "skipped", "invasive collector: needs --allow-invasive"
        return run
    from nightowl.engine.chain import params_for_host

    params = params_for_host(options.params, transport.host)
    resolved = [argv for t in collector.commands if (argv := resolve_argv(t, params)) is not None]
    if not resolved:
        needs = ", ".join(sorted({n for t in collector.commands for n in placeholders(t)}))
        run.status, run.reason = "skipped", f"needs runbook parameter(s): {needs}"
        return run
    refused = _refused(collector, resolved)
    if refused:
        run.status, run.reason = "error", "refused to run " + "; ".join(refused)
        return run
    commands = resolved[:1] if single_attempt else resolved
    host = same_text.HOST.set(transport.host)  # whose output a repeating sweep's memo keeps (engine/same_text.py)
    try:
        with options.inflight:  # a collector with a cursor may read only what is new (engine/incremental.py)
            read = None if keep_text else incremental.collect(transport, collector, recorder, options, _PARTS, deadline)
            return read or _attempt(transport, collector, recorder, options, run, commands, keep_text, deadline)
    finally:
        same_text.HOST.reset(host)


def _attempt(
    transport: Transport,
    collector: CollectorLike,
    recorder: Recorder,
    options: RunOptions,
    run: CollectorRun,
    commands: list[tuple[str, ...]],
    keep_text: bool,
    deadline: float | None,
) -> CollectorRun:
    """Run the commands in order until one answers; record every attempt; parse the chosen output.

    Once a stop was asked nothing more starts (no fallback), and a command it cut is recorded as
    interrupted, with its elapsed time, before the interrupt goes on up to the session."""
    kind = collector.kind
    chosen: CommandResult | None = None
    blank: CommandResult | None = None  # exited 0 but showed nothing: the next command may do better
    for argv in commands:
        if options.stop.is_set():
            _record_all(transport, kind, recorder, run, run.attempts[-1] if run.attempts else None)
            raise KeyboardInterrupt
        timeout = _timeout_for(collector, options, deadline)
        if timeout <= 0:
            if not run.attempts:
                run.status, run.reason = "skipped", "the host's deadline ran out before this collector"
                return run
            break
        result = transport.run(argv, timeout, kind=kind)
        if _cut_by_stop(result, options):
            run.attempts.append(_interrupted(result, options))
            _record_all(transport, kind, recorder, run, run.attempts[-1])
            raise KeyboardInterrupt
        run.attempts.append(result)
        if result.ok and shows_nothing(collector, result.stdout):
            blank = blank or result
            continue
        if result.ok or result.timed_out or result.late:
            chosen = result  # a late answer is no failure of the command: no fallback for it
            break
        if chosen is None and not is_blank(result.stdout):
            chosen = result  # a failing nvidia-smi still prints why
    chosen = chosen or blank or run.attempts[-1]
    _record_all(transport, kind, recorder, run, chosen)
    run.status, run.reason = output_status(chosen)
    if chosen is blank:  # only an answer that showed nothing is ever kept as "blank"
        # No output is not "output showing nothing wrong": no facts, so no rule can read it as clean.
        run.status, run.reason, coverage = nothing_status(collector, chosen.stdout)
        if coverage is not None:
            run.facts = {"kind": kind, "coverage": coverage}
    if keep_text:
        run.text = chosen.stdout
    if not is_blank(chosen.stdout) and run.status not in ("no_data", "late"):
        budget = max(0.0, _timeout_for(collector, options, deadline))  # parsing counts against the deadline
        cut = chosen.stdout_truncated_bytes
        run.facts, run.parse_error = parse_output(collector, chosen.stdout, budget, cut, options.parsed)
        if run.parse_error and run.status == "ok":
            run.status, run.reason = "error", run.parse_error
        elif run.status == "ok" and unreadable(run.facts):
            assert run.facts is not None
            run.status, run.reason = "unreadable", unreadable_reason(kind, run.facts["coverage"])
            run.facts = unread_facts(run.facts)
    return run


def _record_all(
    transport: Transport, kind: str, recorder: Recorder, run: CollectorRun, chosen: CommandResult | None
) -> None:
    """Every attempt goes to the recorder; only the chosen one's output is kept as ``<kind>.out``."""
    for attempt in run.attempts:
        run.file = recorder.record_command(transport.host, kind, attempt, attempt is chosen) or run.file


def _cut_by_stop(result: CommandResult, options: RunOptions) -> bool:
    """Whether a command that did not answer was ended by nightowl being stopped, not by the host.

    After an interrupt (``stop``) any unanswered command was cut by it. While the program is being stopped
    (``stopping``: systemd's TERM reaches every process of the unit at once) a command that died of a
    signal died of that stop; the program's own handler may set the event a moment after the command is
    seen to die, hence the short wait, paid only by a command killed by a signal."""
    if result.ok:
        return False
    if options.stop.is_set():
        return True
    signalled = result.rc is not None and result.rc < 0
    return signalled and options.stopping is not None and options.stopping.wait(SIGNALLED_GRACE_SECONDS)


def _interrupted(result: CommandResult, options: RunOptions) -> CommandResult:
    """The cut command as the manifest records it: what it printed, its elapsed time, and why it ended."""
    import dataclasses

    how = f"killed by signal {-result.rc}" if result.rc is not None and result.rc < 0 else "ended"
    why = "interrupted" if options.stop.is_set() else "stopped with nightowl"
    return dataclasses.replace(result, error=f"{why}: {how} after {result.duration:.1f}s, as nightowl was stopping")


def cut_caveats(collections: list[CollectorRun]) -> list[str]:
    """One sentence per collection whose output was cut: what a verdict on it cannot have seen."""
    return [
        f"the {run.kind} output was cut at the transport's cap ({run.facts['truncated_bytes']} bytes from its"
        " middle not kept), so what it does not show may be in the cut"
        for run in collections
        if run.facts and run.facts.get("truncated")
    ]


def _refused(collector: CollectorLike, commands: list[tuple[str, ...]]) -> list[str]:
    """The resolved commands the collector's own check refuses (``check_argv``, given by the collector
    lookup: the engine knows no command shapes), each with the reason."""
    check = getattr(collector, "check_argv", None)
    if check is None:
        return []
    return [f"`{' '.join(argv)}` {why}" for argv in commands if (why := check(argv))]


def _timeout_for(collector: CollectorLike, options: RunOptions, deadline: float | None) -> float:
    timeout = collector.timeout
    if options.command_timeout is not None:
        timeout = min(timeout, options.command_timeout)
    if deadline is not None:
        timeout = min(timeout, deadline - time.monotonic())
    return timeout


_SEVERITY = ["ok", "skipped", "no_data", "unreadable", "error", "timed_out", "late"]


def worst_status(statuses: set[str]) -> str:
    """The most severe of collector statuses (ok < skipped < no_data < unreadable < error < timed_out < late)."""
    return max(statuses, key=lambda s: _SEVERITY.index(s) if s in _SEVERITY else 0)


def _trim(value: Any) -> Any:
    if isinstance(value, list) and len(value) > TRACE_LIST_CAP:
        return [*value[:TRACE_LIST_CAP], f"... {len(value) - TRACE_LIST_CAP} more"]
    return value


# What an incremental read needs of this module (engine/incremental.py cannot import it: it is imported here).
_PARTS = incremental.EngineParts(CollectorRun, parse_output, _timeout_for, resolve_argv)
