"""Rehearsals (after Orquesta's orquesta-rehearse): recorded hosts in, expected path and verdict out.

``fixtures/rehearsals/<runbook>.yaml`` (for a site runbook, ``rehearsals/<runbook>.yaml`` in its folder)
holds a list of cases::

    - name: xid79 node from akash-network/support#209
      host: xid79-fallen-off-bus          # a folder of fixtures/hosts/
      params: {expected_gpus: 8}
      expect: {verdict: gpu-fell-off-bus, action: reboot-node, path: [collect, gpu-visible, gpu-fell-off-bus]}
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from nightowl.engine import layout
from nightowl.paths import data_dir

if TYPE_CHECKING:
    from nightowl.library.runbooks import RunbookLibrary


@dataclass(frozen=True)
class RehearsalResult:
    runbook: str
    name: str
    passed: bool
    problems: tuple[str, ...]
    verdict: str | None
    path: tuple[str, ...]


def rehearsal_file(runbook_id: str, given: Path | None = None, library: RunbookLibrary | None = None) -> Path | None:
    """Where a runbook's rehearsals are: ``given`` (a file, or a folder holding ``<runbook>.yaml``);
    else ``rehearsals/<runbook>.yaml`` beside a site runbook (of ``library``'s folders); else the built-in
    ``fixtures/rehearsals/<runbook>.yaml``. None when there is none."""
    from nightowl.library.runbooks import RunbookLibrary

    if given is not None:
        chosen = given / f"{runbook_id}.yaml" if given.is_dir() else given
        return chosen if chosen.is_file() else None
    candidates = []
    site = (library or RunbookLibrary()).site_paths().get(runbook_id)
    if site is not None:
        candidates += [site.parent / "rehearsals" / f"{runbook_id}{suffix}" for suffix in (".yaml", ".yml")]
    candidates.append(data_dir("fixtures") / "rehearsals" / f"{runbook_id}.yaml")
    return next((path for path in candidates if path.is_file()), None)


class RehearsalFileError(ValueError):
    """A rehearsal file that cannot be read as a list of cases: its path and line say where."""


def rehearsal_cases(
    runbook_id: str, given: Path | None = None, library: RunbookLibrary | None = None
) -> list[dict[str, Any]]:
    """The cases of ``runbook_id``'s rehearsal file (none when it has none); RehearsalFileError when that
    file is unreadable, is not YAML, or is not a list of mappings."""
    path = rehearsal_file(runbook_id, given, library)
    if path is None:
        return []
    try:
        text = path.read_text(encoding="utf-8")
        cases = _with_libyaml(text)
        if cases is _REFUSED:  # the pure-Python loader words the error (its problem and line)
            cases = yaml.safe_load(text)
        cases = cases or []
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise RehearsalFileError(f"{where}: not YAML: {exc.problem or exc}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RehearsalFileError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(cases, list) or not all(isinstance(case, dict) for case in cases):
        raise RehearsalFileError(f"{path}: a rehearsal file is a list of cases (mappings with name, host, expect)")
    return cases


_REFUSED = object()


def _with_libyaml(text: str) -> Any:
    """``text`` read by libyaml when PyYAML has it (a tenth of the pure-Python loader's CPU: the test suite
    reads every rehearsal file dozens of times), else ``_REFUSED``, as for a text libyaml refuses."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is None:
        return _REFUSED
    try:
        return yaml.load(text, Loader=fast)  # noqa: S506 - CSafeLoader is the safe loader in C
    except yaml.YAMLError:
        return _REFUSED


def case_hosts(case: dict[str, Any]) -> list[str]:
    return list(case["hosts"]) if "hosts" in case else [case["host"]]


def replay_case(
    runbook_id: str,
    case: dict[str, Any],
    host_dirs: dict[str, Path] | None = None,
    out_dir: Path | None = None,
    library: RunbookLibrary | None = None,
) -> list[Any]:
    """Run a rehearsal case as triage runs it (``nightowl.run``: the same parameter checks, redaction),
    without the drafts, the status update and the history store, which no rehearsal reads; ``host_dirs``
    replaces where a host's recording is read from. A case whose parameters are refused raises ``RunRefused``."""
    from nightowl.library.runbooks import RunbookLibrary
    from nightowl.run import RunSettings, run_and_save
    from nightowl.transports.replay import ReplayTransport

    loaded = (library or RunbookLibrary()).load(runbook_id)
    hosts_dir = data_dir("fixtures") / "hosts"
    dirs = {h: (host_dirs or {}).get(h, hosts_dir / h) for h in case_hosts(case)}
    transports = {h: (lambda d=d, n=h: ReplayTransport(d, n)) for h, d in dirs.items()}
    with tempfile.TemporaryDirectory() as tmp:
        result = run_and_save(
            loaded,
            transports,
            out_dir or Path(tmp),
            params=case.get("params", {}),
            settings=RunSettings(
                allow_invasive=case.get("allow_invasive", False), drafts=False, status_update=False, history=False
            ),
        )
    return result.runs


def rehearse(
    runbook_id: str, case: dict[str, Any], out_dir: Path | None = None, library: RunbookLibrary | None = None
) -> RehearsalResult:
    from nightowl.run import RunRefused

    hosts = case_hosts(case)
    name = case.get("name", hosts[0])
    try:
        runs = replay_case(runbook_id, case, out_dir=out_dir, library=library)
    except RunRefused as exc:  # the case's parameters: a failed rehearsal, as triage would refuse them
        return RehearsalResult(runbook_id, name, False, (f"parameters refused: {exc}",), None, ())
    expect = case.get("expect", {})
    run = runs[0]
    verdict = run.verdict or {}
    problems = []
    if "verdict" in expect and verdict.get("id") != expect["verdict"]:
        problems.append(f"verdict {verdict.get('id')!r} != expected {expect['verdict']!r}")
    if "action" in expect and verdict.get("action") != expect["action"]:
        problems.append(f"action {verdict.get('action')!r} != expected {expect['action']!r}")
    if "path" in expect and run.path != list(expect["path"]):
        problems.append(f"path {run.path} != expected {expect['path']}")
    if "status" in expect and run.status != expect["status"]:
        problems.append(f"status {run.status!r} != expected {expect['status']!r}")
    for gpu in expect.get("gpus", []):
        if gpu not in (verdict.get("gpus") or []):
            problems.append(f"gpu {gpu} not named in verdict gpus {verdict.get('gpus')}")
    return RehearsalResult(
        runbook_id,
        name,
        not problems,
        tuple(problems),
        verdict.get("id"),
        tuple(run.path),
    )


@dataclass(frozen=True)
class AblationFinding:
    runbook: str
    case: str
    host: str
    output: str  # the recorded file taken away
    mode: str  # removed | emptied
    problem: str


def _recorded_outputs(host_dir: Path) -> list[Path]:
    return sorted(p for p in host_dir.glob("*" + layout.OUT) if p.is_file())


def _ablated_copy(host_dir: Path, output: Path, mode: str, into: Path) -> Path:
    """A copy of the recording with one output removed (its .err/.rc/.timeout too) or emptied (exit 0, no text)."""
    copy = into / host_dir.name
    shutil.copytree(host_dir, copy)
    stem = output.name[: -len(layout.OUT)]
    for suffix in (layout.ERR, layout.RC, layout.TIMEOUT):
        (copy / f"{stem}{suffix}").unlink(missing_ok=True)
    if mode == "removed":
        (copy / output.name).unlink()
    else:
        (copy / output.name).write_text("")
    return copy


def _already_empty(output: Path) -> bool:
    """An output recorded empty, exit 0, no stderr, not timed out: emptied, it is the full recording again
    (the replay above), so that run would only repeat it."""
    stem = output.parent / output.name[: -len(layout.OUT)]
    rc, err = Path(f"{stem}{layout.RC}"), Path(f"{stem}{layout.ERR}")
    if output.stat().st_size or Path(f"{stem}{layout.TIMEOUT}").exists() or (err.exists() and err.stat().st_size):
        return False
    return not rc.exists() or rc.read_text().strip() == "0"


def _judge(full: Any, ablated: Any, rested_on: bool) -> str | None:
    """Whether an ablated run came back healthier than the full recording (None: it did not)."""
    verdict, before = ablated.verdict, full.verdict
    if before is None or verdict is None:
        return None  # no verdict is "cannot judge": never healthier
    if before["action"] != "none" and verdict["action"] == "none":
        return f"needs {before['action']} with the whole recording, action none without this output ({verdict['id']})"
    if before["severity"] == "ok" and verdict["severity"] == "ok" and rested_on:
        return f"still severity ok ({verdict['id']}) without an output the verdict rests on"
    return None


def _rested_on(run: Any) -> set[str]:
    """Kinds whose output was read (status ok) and named by a condition evaluated on the path or by the
    verdict's evidence; a derived collector so named stands on its inputs too."""
    texts = [c["when"] for visit in run.visits for c in visit.conditions]
    texts += [e["fact"] for e in (run.verdict or {}).get("evidence", [])]
    blob = " ".join(texts)
    named = {c.namespace for c in run.collections.values() if c.namespace in blob}
    for c in list(run.collections.values()):
        if c.namespace in named:
            named |= set(getattr(_collector(c.kind), "inputs", ()))
    return {c.kind for c in run.collections.values() if c.status == "ok" and c.namespace in named}


def _collector(kind: str) -> Any:
    from nightowl.collectors import get_collector

    return get_collector(kind)


def ablate(
    runbook_id: str, case: dict[str, Any], library: RunbookLibrary | None = None
) -> tuple[int, list[AblationFinding]]:
    """Replay a case once with each recorded output removed and once emptied; report any run healthier
    than the full recording, or any crash. Returns (ablated runs, findings)."""
    name = case.get("name", case_hosts(case)[0])
    full_runs = replay_case(runbook_id, case, library=library)
    hosts_dir = data_dir("fixtures") / "hosts"
    count, findings = 0, []
    for index, host in enumerate(case_hosts(case)):
        full = full_runs[index]
        collected = _rested_on(full)
        for output in _recorded_outputs(hosts_dir / host):
            kind = output.name.split(".")[0]
            for mode in ("removed", "emptied") if not _already_empty(output) else ("removed",):
                count += 1
                with tempfile.TemporaryDirectory() as tmp:
                    copy = _ablated_copy(hosts_dir / host, output, mode, Path(tmp))
                    try:
                        runs = replay_case(runbook_id, case, {host: copy}, Path(tmp) / "bundles", library)
                    except Exception as exc:  # noqa: BLE001 - a crash is a finding
                        problem: str | None = f"crashed: {type(exc).__name__}: {exc}"
                    else:
                        problem = _judge(full, runs[index], kind in collected)
                if problem:
                    findings.append(AblationFinding(runbook_id, name, host, output.name, mode, problem))
    return count, findings


def ablate_cases(
    runbook_ids: list[str],
    given: Path | None = None,
    pool: Executor | None = None,
    library: RunbookLibrary | None = None,
) -> tuple[int, list[AblationFinding]]:
    """Ablate every rehearsal of these runbooks: (ablated runs, findings), in case order. With ``pool``
    (``ablation_pool``) the cases are spread over its processes: each replay is pure CPU and independent.
    Each job carries ``library`` (the command's runbook folders): a worker resolves names as the caller does."""
    jobs = [
        (runbook_id, case, library)
        for runbook_id in runbook_ids
        for case in rehearsal_cases(runbook_id, given, library)
    ]
    results = list(pool.map(_ablate_job, jobs)) if pool is not None else [_ablate_job(job) for job in jobs]
    return sum(count for count, _ in results), [f for _, found in results for f in found]


def ablation_pool(workers: int) -> Executor:
    """``workers`` fresh processes; the runbook folders travel with each job (``ablate_cases``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: the caller (pytest, the CLI) may hold threads and locks a forked child would copy.
    # A fresh process has the environment ($NIGHTOWL_RUNBOOK_PATH); --runbook-path's folders come with the jobs.
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(workers, context)


def _ablate_job(job: tuple[str, dict[str, Any], RunbookLibrary | None]) -> tuple[int, list[AblationFinding]]:
    return ablate(*job)
