"""The status update of a run: what the incident channel needs, in plain text (templates/status-update.md.j2).

Impact (which hosts or replicas, since when, what users see), the current action (the verdict's
first action and who runs it), the business action needed, and the time of the next update, which
is left to the person sending it. Written as ``status-update.md`` into every bundle.
"""

from __future__ import annotations

import functools
import os
import re
import time
from pathlib import Path
from typing import Any

from nightowl import knowledge
from nightowl.engine import layout
from nightowl.engine.job import names_pattern
from nightowl.knowledge import actions
from nightowl.outcome import Outcome, most_severe

FILE_NAME = layout.STATUS_UPDATE
TEMPLATE = "status-update.md.j2"
NEXT_UPDATE = "____ (yours to set: e.g. in 30 minutes, or when the action above is done)"

# What users see when no row of status_words.csv says, by the verdict's severity.
BY_SEVERITY = {
    "critical": "errors or no answer on part of the traffic",
    "warning": "degraded service: slower or failed requests on part of the traffic",
    "info": "nothing yet",
    "ok": "nothing: no fault found",
}


@functools.cache
def status_words() -> dict[str, dict[str, str]]:
    """nightowl/knowledge/status_words.csv by verdict id: what happened and what users see, in the words of
    the incident channel (README.md there)."""
    rows = knowledge.read_csv("status_words.csv", required=("runbook", "verdict", "source"))
    if rows and not {"what", "users_see"} <= rows[0].keys():
        raise knowledge.KnowledgeError("status_words.csv: the header lacks what or users_see")
    return {row["verdict"]: row for row in rows}


def _business(action: str) -> str:
    """What the business side should do, by the verdict's first action (nightowl/knowledge/actions.csv)."""
    row = actions.by_action().get(action)
    return row.business_impact if row else "none yet."


def _who(action: str) -> str:
    row = actions.by_action().get(action)
    return row.who_acts if row else "on-call"


def _affected(hosts: list[dict[str, Any]]) -> list[str]:
    return [h["host"] for h in hosts if (h.get("verdict") or {}).get("action") not in (None, "none")]


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


_IP = re.compile(r"^\d+(\.\d+){3}$")


def short_names(names: list[str]) -> dict[str, str]:
    """Host names as a person writes them in chat: no DNS domain, and no prefix every host shares
    when what is left still reads as a name (``first-look-down-r1`` -> ``r1``; ``gpu-17`` and ``nccl-xid-a`` stay)."""
    bare = {n: n if _IP.match(n) or "." not in n else n.split(".", 1)[0] for n in names}
    values = list(bare.values())
    if len(set(values)) < 2:
        return bare
    prefix = os.path.commonprefix(values)
    cut = max(prefix.rfind("-"), prefix.rfind("_")) + 1
    rests = {n: v[cut:] for n, v in bare.items()}
    # a rest of one character ("nccl-xid-a" -> "a") no longer reads as a host in a sentence ("Pull b from the job")
    readable = all(len(r) >= 2 and re.search(r"[A-Za-z]", r) for r in rests.values())
    if cut and readable and len(set(rests.values())) == len(rests):
        return rests
    return bare


def _plain(text: str, short: dict[str, str]) -> str:
    """A verdict sentence for chat: short host names, no code quoting."""
    text = names_pattern(tuple(sorted(short))).sub(lambda m: short[m.group(0)], text)
    return text.replace("`", "")


def _service(names: list[str], short: dict[str, str]) -> str:
    if len(names) > 1 and all(short[n] != n for n in names):
        prefix = os.path.commonprefix(names)[: -len(short[names[0]])] if names else ""
        shared = prefix.rstrip("-_.")
        if shared and all(n.startswith(prefix) for n in names):
            return f"{shared} ({', '.join(short[n] for n in names)})"
    return ", ".join(short[n] for n in names)


def _next_check(step: dict[str, Any], short: dict[str, str], implicated: list[str] | None = None) -> str | None:
    """The next runbook in words; the exact command (host names, parameters) is in the report. A next step
    with no host is one that needs a node the run did not reach (a replica reached by URL only): said so."""
    if not step.get("runbook"):
        return None
    if not step.get("hosts") and implicated:
        who = ", ".join(short.get(h, h) for h in implicated)
        return f"run the {step['runbook']} runbook on the node serving {who}: it needs the node (--host NODE)"
    named = step.get("hosts") or []
    hosts = ", ".join("this machine (--host local)" if h == "local" else short.get(h, h) for h in named)
    return f"run the {step['runbook']} runbook on {hosts or 'the hosts named'} (exact command in the report)"


def context(summary: dict[str, Any], now: float | None = None, outcome: Outcome | None = None) -> dict[str, Any]:
    """What the template says. ``outcome`` is the run's (nightowl/outcome.py): its verdict and every host's
    no-verdict reason are told as it names them; without one (a summary alone) they are chosen here the same way."""
    hosts = summary.get("hosts") or []
    job = summary.get("job") or {}
    worst = job.get("verdict") or _outcome_verdict(outcome, hosts)
    at = now if now is not None else time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))
    names = [h["host"] for h in hosts]
    short = short_names(names)
    affected = _affected(hosts)
    no_verdict = [short[h["host"]] for h in hosts if not h.get("verdict")]
    checked = f"{len(names)} checked: {', '.join(short[n] for n in names)}"
    cause = summary.get("common_cause") if isinstance(summary.get("common_cause"), dict) else None
    if worst is None:
        reasons = _no_verdict_reasons(hosts, short, outcome)
        impact = f"not known yet: {reasons or 'no verdict for ' + (', '.join(no_verdict) or 'any host')} ({checked})"
        action, users_see = "find out why nightowl got no evidence (see the bundle)", "not known yet"
        business = "none yet."
    else:
        what = status_words().get(worst["id"], {}).get("what") or worst["id"].replace("-", " ")
        impact = f"{what}{_where(worst, job, affected, names, short)} ({checked}{_not_implicated(job, short)})"
        action = f"{worst['action']}: {_plain(_first_sentence(worst['summary']), short)}"
        if cause:  # a storm whose hosts share a failure domain: the domain is checked before any node is acted on
            impact = f"{_cause_line(cause, short)} ({checked})"
            action = _cause_action(cause, action, short)
        users_see = status_words().get(worst["id"], {}).get("users_see") or BY_SEVERITY[worst["severity"]]
        unchecked = _job_fact(job, "not_checked") if worst["severity"] == "ok" else None
        if isinstance(unchecked, list) and unchecked:  # an all-clear vouches only for what was read
            users_see = f"no fault found in what this check read; not checked: {_plain('; '.join(unchecked), short)}"
        business = _business(worst["action"])
    next_step = (worst or {}).get("next") or {}
    return {
        "service": summary.get("service") or _named_service(job, names, short),
        "now": stamp,
        "impact": impact,
        "since": _since(job, short)
        or _onset(summary.get("onset"), short)
        or f"not known: first seen by this check at {time.strftime('%H:%M UTC', time.gmtime(at))}; "
        "the dashboards show when it began",
        "users_see": users_see,
        "action": action,
        "who": _who((worst or {}).get("action", "")),
        # the first action's steps for the host's tenancy (a VM is stopped and started, not power-cycled)
        "steps": actions.steps_line((worst or {}).get("first_step")) if (worst or {}).get("action") != "none" else None,
        "next_command": _next_check(next_step, short, (worst or {}).get("implicated")),
        "also_seen": "; ".join(filter(None, [_also_seen(job, short), _other_gpus(hosts, short)])) or None,
        "business": business,
        "next_update": NEXT_UPDATE,
        "runbook": summary.get("runbook"),
        "run_id": summary.get("run_id"),
        "bundle": summary.get("bundle"),
        # the bundle by its id: a path on the machine that wrote it means nothing in a channel or a PagerDuty note
        "bundle_id": Path(str(summary["bundle"])).name if summary.get("bundle") else "(none written)",
    }


def _cause_line(cause: dict[str, Any], short: dict[str, str]) -> str:
    """ "common cause: rack r12 (rack power, cooling and NVLink trays): check it before reboot-node on 8 nodes (8 of 8
    hosts of the storm in it show gpu-fell-off-bus)": a storm's domain finding (receiver/common_cause.py) first."""
    kind, name, count = cause.get("kind"), cause.get("name"), cause.get("shared_by")
    line = (
        f"common cause: {kind} {name} ({cause.get('suspect') or kind}): check it before "
        f"{cause.get('host_action')} on {count} nodes ({count} of {cause.get('of')} hosts of the storm in it show "
        f"{cause.get('verdict')})"
    )
    primary = cause.get("primary") if isinstance(cause.get("primary"), dict) else None
    if primary and primary.get("host"):
        line += f"; start with {short.get(str(primary['host']), primary['host'])}: {primary.get('why')}"
    return _plain(line, short)


def _cause_action(cause: dict[str, Any], host_action: str, short: dict[str, str]) -> str:
    """The current action of a storm with a common cause: inspect the domain, then act only on the nodes whose
    fault it does not explain (the hosts' own first action follows)."""
    members = [short.get(str(m), str(m)) for m in cause.get("members") or []]
    return (
        f"inspect {cause.get('kind')} {cause.get('name')} before acting on its {cause.get('shared_by')} nodes "
        f"({', '.join(members)}); then, only on those whose fault the {cause.get('kind')} does not explain, "
        f"{host_action}"
    )


def _outcome_verdict(outcome: Outcome | None, hosts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The verdict the run's Outcome names, as the hosts' own (a storm's common cause, which leads the
    outcome's summary, is told here in its own line: the host's summary stays ``host_summary``)."""
    if outcome is None:
        return most_severe(h["verdict"] for h in hosts if h.get("verdict"))
    if not outcome.verdict:
        return None
    verdict = dict(outcome.verdict)
    if "host_summary" in verdict:
        verdict["summary"] = verdict.pop("host_summary")
        verdict.pop("common_cause", None)
    return verdict


def _no_verdict_reasons(hosts: list[dict[str, Any]], short: dict[str, str], outcome: Outcome | None) -> str | None:
    """Every host's reason for giving no verdict, each distinct reason once, with short names: an unreachable
    storm is not told as its first host's error (issue 45 item 9). The Outcome's ``host_error`` says it for a
    run over several hosts; one host's reason is its own error, told in the same words."""
    from types import SimpleNamespace

    from nightowl.outcome import no_verdict_line

    if outcome is not None and len(hosts) > 1:
        line = outcome.host_error
    else:
        runs = [
            SimpleNamespace(host=h["host"], verdict=h.get("verdict"), status=h.get("status"), error=h.get("error"))
            for h in hosts
        ]
        if outcome is not None and runs:  # the one host's status and reason as its Outcome tells them
            runs[0].status, runs[0].error = outcome.host_status, outcome.host_error
        line = no_verdict_line(runs)
    return _plain(line, short) if line and any(h.get("error") for h in hosts) else None


def _job_fact(job: dict[str, Any], name: str) -> Any:
    """The value of the job's own fact ``<namespace>.<name>`` as the verdict cites it (``job.facts``), or
    None: a derived collector (replica-compare's ``since``, ``service``) states it, the report only reads it."""
    for fact in job.get("facts") or []:
        if fact.get("rule") == "job" and str(fact.get("fact", "")).rpartition(".")[2] == name:
            return fact.get("value") or None
    return None


def _also_seen(job: dict[str, Any], short: dict[str, str]) -> str | None:
    """The run's other findings, one clause each ("r3 TTFT x4.0 of its history; r4 restarted ..."), as the
    runbook states them beside its verdict (first-look's ``onset.<finding>.also_seen``); None when none."""
    lines = _job_fact(job, "also_seen")
    return _plain("; ".join(str(line) for line in lines), short) if isinstance(lines, list) and lines else None


def _other_gpus(hosts: list[dict[str, Any]], short: dict[str, str]) -> str | None:
    """Every GPU with a fault of its own besides the one a verdict is about (the verdict's ``other_gpus``,
    issue 45 item 7): "GPU 0000:07:00 on gpu-17: Xid 48, 64 (drain-and-reset)"; None when there is none."""
    told = []
    for h in hosts:
        for other in (h.get("verdict") or {}).get("other_gpus") or []:
            codes = f": Xid {', '.join(map(str, other.get('xids') or []))}" if other.get("xids") else ""
            told.append(f"GPU {other.get('gpu')} on {short.get(h['host'], h['host'])}{codes} ({other.get('action')})")
    return "; ".join(told) or None


def _onset(onset: Any, short: dict[str, str]) -> str | None:
    """ "2026-12-02 11:38 UTC; source: the first fault line on r2 ...": the bundle's onset (the fault line's own
    time, else the alert's startsAt: nightowl/postmortem/onset.py), as the draft's Trigger names it."""
    if not isinstance(onset, dict) or not onset.get("text"):
        return None
    return f"{onset['text']}; source: {_plain(str(onset.get('source') or 'the evidence'), short)}"


def _named_service(job: dict[str, Any], names: list[str], short: dict[str, str]) -> str:
    """The service as /v1/models names it, with its replicas ("Qwen/Qwen2.5-7B (r1, r2)"); else by host names."""
    model = _job_fact(job, "service")
    if not isinstance(model, str):
        return _service(names, short)
    return f"{model} ({', '.join(short[n] for n in names)})" if names else model


def _since(job: dict[str, Any], short: dict[str, str]) -> str | None:
    """ "at or before 2026-01-05 03:12 UTC; source: the first failing answer seen: r2 /health 503 ...": when
    the trouble began as the evidence dates it, with its source; None when the evidence does not show it."""
    since = _job_fact(job, "since")
    passed = _job_fact(job, "last_passing_probe")  # silent-corruption: the answers were right until then
    if isinstance(passed, str) and (job.get("verdict") or {}).get("action") not in (None, "none"):
        return f"some time after {passed}, up to this check; source: the last known-answer probe that passed"
    if not isinstance(since, dict) or not since.get("text"):
        return None
    source = f"; source: {_plain(str(since['source']), short)}" if since.get("source") else ""
    return f"{since['text']}{source}"


def _where(
    verdict: dict[str, Any], job: dict[str, Any], affected: list[str], names: list[str], short: dict[str, str]
) -> str:
    """ " on r2" (the members or hosts the verdict is for), " on the whole job", or nothing for an all-clear.
    A job names the members its runbook declares implicated, never those found in the summary."""
    if verdict["severity"] == "ok" or verdict["id"] == "cannot-judge":
        return ""
    if job and verdict.get("whole_job"):
        return " on the whole job"
    named = verdict.get("implicated") if job and verdict.get("implicated") is not None else None
    if named is None:
        named = _named_hosts(verdict, affected, names)
    return f" on {', '.join(short.get(n, n) for n in named)}" if named else ""


def _not_implicated(job: dict[str, Any], short: dict[str, str]) -> str:
    """ "; not implicated: r1, r3" for a job whose verdict leaves members out of the action."""
    others = (job.get("verdict") or {}).get("not_implicated") or []
    return f"; not implicated: {', '.join(short.get(n, n) for n in others)}" if others else ""


def _named_hosts(verdict: dict[str, Any], affected: list[str], names: list[str]) -> list[str]:
    """The replicas the verdict is about: the next step's hosts, else those named in its summary."""
    hosts = (verdict.get("next") or {}).get("hosts") or []
    if hosts:
        return list(hosts)
    # "r3 fails /health while r1, r2 serve": the hosts before "while" are the ones in trouble
    text = verdict.get("summary", "").split(" while ", 1)[0]
    found = set(names_pattern(tuple(sorted(names))).findall(text))
    mentioned = [n for n in names if n in found]
    return mentioned or affected


def render(summary: dict[str, Any], now: float | None = None, outcome: Outcome | None = None) -> str:
    from nightowl.bundled_templates import environment
    from nightowl.safetext import all_one_line, printable

    # Each value one printable line: an alert title or a replica's text never forges a line or
    # reaches a reader's terminal as an escape sequence.
    page = environment(autoescape=False).get_template(TEMPLATE)  # plain text for chat, never HTML
    return printable(page.render(**all_one_line(context(summary, now, outcome))))


def write(bundle: Path, summary: dict[str, Any], outcome: Outcome | None = None) -> Path:
    """``status-update.md`` in ``bundle``, from the run's summary and its Outcome (``nightowl.run`` hands it)."""
    from nightowl.engine.private_files import write_private
    from nightowl.postmortem.onset import bundle_onset

    path = Path(bundle) / FILE_NAME
    # the onset from the bundle only where the job's runbook did not date it (read only when needed)
    onset = None if _since(summary.get("job") or {}, {}) else bundle_onset(Path(bundle), summary)
    cause = storm_common_cause(outcome) if len(summary.get("hosts") or []) > 1 else None
    # owner-only, as every bundle file
    write_private(path, render({**summary, "onset": onset, "common_cause": cause}, outcome=outcome))
    return path


def storm_common_cause(outcome: Outcome | None) -> dict[str, Any] | None:
    """The common cause of a storm as the run's Outcome carries it (``verdict.common_cause``: the most widely shared
    domain finding, receiver/common_cause.py, which ``outcome_from_run`` put there), or None: no Outcome, no storm,
    no shared domain. Read from the record the run built, not from the manifest again. Only its plain fields are
    kept."""
    first = (outcome.verdict or {}).get("common_cause") if outcome is not None else None
    named = ("kind", "name", "shared_by", "of")
    if not isinstance(first, dict) or not all(isinstance(first.get(k), (str, int)) for k in named):
        return None
    kept = {k: first[k] for k in ("kind", "name", "suspect", "verdict", "host_action", "shared_by", "of") if k in first}
    kept["members"] = [str(m) for m in first.get("members") or [] if isinstance(m, str)]
    primary = first.get("primary")
    if isinstance(primary, dict) and isinstance(primary.get("host"), str):
        kept["primary"] = {"host": primary["host"], "why": str(primary.get("why") or "")}
    return kept
