"""One postmortem per incident: a job bundle (``scope: job``) is told once, not once per member.

The members share one verdict; the draft states it once, names the members the runbook declared
implicated (the verdict's ``implicated``, engine/job.py) and those that are not, proposes actions only
for the implicated ones, and keeps a timeline lane per member. Each Summary bullet cites a few lines;
the rest are under Root causes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nightowl.postmortem.bundle_reader import Bundle

SUMMARY_CITES = 4  # citations on a Summary bullet; every one is under Root causes
SUPPORT_CITES = 3  # citations per evidence line under Root causes
# A verdict citing this fact bounds the answers that may have been wrong (silent-corruption runbook).
WINDOW_FACT = "params.last_passing_probe"


@dataclass(frozen=True)
class JobView:
    members: list[str]
    verdict: dict[str, Any] | None
    implicated: list[str]
    not_implicated: list[str]
    whole_job: bool
    without_verdict: list[str]
    declared: bool = True  # False: a bundle written before verdicts recorded the members they implicate

    @property
    def targets(self) -> str:
        """Whom the action is for, as the draft writes it."""
        if self.implicated:
            return ", ".join(self.implicated)
        if self.whole_job:
            return f"the whole job ({len(self.members)} members)"
        return "no member of the job" if self.declared else "the members the summary names (not recorded)"

    @property
    def label(self) -> str:
        """The Summary's one subject: the job, its implicated members and those not implicated."""
        parts = [f"{len(self.members)} members"]
        if self.implicated:
            parts.append(f"implicated: {', '.join(self.implicated)}")
        elif self.whole_job:
            parts.append("the action is for the whole job")
        if self.not_implicated:
            parts.append(f"not implicated: {', '.join(self.not_implicated)}")
        if self.without_verdict:
            parts.append(f"no verdict: {', '.join(self.without_verdict)}")
        return f"The job ({'; '.join(parts)})"


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def job_of(data: Bundle) -> JobView | None:
    """The job of a ``scope: job`` bundle, or None for a bundle of separate hosts."""
    job = data.verdicts.get("job")
    if not isinstance(job, dict) or not isinstance(job.get("members"), list):
        return None
    members = [m["host"] for m in job["members"] if isinstance(m, dict) and isinstance(m.get("host"), str)]
    verdict = next((h["verdict"] for h in data.verdicts.get("hosts", []) if h.get("verdict")), None)
    return JobView(
        members=members,
        verdict=verdict,
        implicated=[h for h in _names((verdict or {}).get("implicated")) if h in members],
        not_implicated=[h for h in _names((verdict or {}).get("not_implicated")) if h in members],
        whole_job=bool((verdict or {}).get("whole_job")),
        without_verdict=[h["host"] for h in data.verdicts.get("hosts", []) if not h.get("verdict")],
        declared="implicated" in (verdict or {}),
    )


def summary_entries(job: JobView, found: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Summary's one bullet for the job and its (bounded) citations."""
    cites = found[0]["cites"][:SUMMARY_CITES] if found else []
    status = "ok" if job.verdict else "incomplete"
    entry = {"host": job.label, "verdict": job.verdict, "status": status, "error": None}
    return [entry], {job.label: cites}


def one_candidate(job: JobView, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The members' identical candidates as one, for the implicated members, with the Xid catalog rows
    of their kernel logs (all members' when the verdict is for the whole job)."""
    if not found:
        return []
    first = dict(found[0])
    catalog: list[dict[str, Any]] = []
    shown = set(job.implicated) if job.implicated else set(job.members)
    for c in found:
        if c["host"] in shown:  # each member's candidate read that member's kernel log
            catalog += [row for row in c["catalog"] if row["text"] not in {r["text"] for r in catalog}]
    first["catalog"] = catalog[:8]
    first["host"] = job.targets
    first["verdict_cites"] = first["verdict_cites"][:1]  # the job's verdict, written once per member
    first["support"] = [{**s, "cites": s["cites"][:SUPPORT_CITES]} for s in first["support"]]
    return [first]


def impact_sentence(job: JobView, data: Bundle, fault_window: str | None) -> str:
    """The job in one sentence: what its verdict needs and from whom, when the faults were, and for a
    verdict that bounds wrong answers, the window of responses that may be wrong."""
    verdict = job.verdict or {}
    gpus = sorted({str(g) for g in (verdict.get("gpus") or [])})
    on_gpus = f" (GPU(s) {', '.join(gpus)})" if gpus else ""
    if not verdict:
        parts = [f"no verdict for the job of {len(job.members)} member(s) ({', '.join(job.members)})"]
    elif verdict.get("action") in (None, "none") and not job.implicated:
        parts = [f"the job of {len(job.members)} member(s) needs no action by the evidence"]
    else:
        parts = [
            f"the job of {len(job.members)} member(s) ({', '.join(job.members)}) needs "
            f"{verdict.get('action')} on {job.targets}{on_gpus}"
        ]
        if job.not_implicated:
            parts.append(f"not implicated: {', '.join(job.not_implicated)}")
    if fault_window:
        parts.append(f"the evidence shows faults {fault_window}")
    window = wrong_answers_window(job, data)
    if window:
        parts.append(window)
    text = "; ".join(parts) + "."
    return text[:1].upper() + text[1:]


def wrong_answers_window(job: JobView, data: Bundle) -> str | None:
    """ "responses served by X from <last passing probe> to <capture> may be wrong", when the verdict cites
    the last passing probe (a silent-corruption verdict); the start is said to be unknown when not given."""
    evidence = (job.verdict or {}).get("evidence") or []
    item = next((e for e in evidence if e.get("fact") == WINDOW_FACT), None)
    if item is None or (job.verdict or {}).get("action") in (None, "none") and not job.implicated:
        return None
    from nightowl.postmortem.clocks import stamp

    start = item.get("value") or "the last passing probe (its time was not given: --param last_passing_probe)"
    end = stamp(data.manifest.get("finished") or data.manifest.get("started"))
    who = ", ".join(job.implicated) if job.implicated else "every replica of the job"
    return f"responses served by {who} from {start} to this capture ({end}) may be wrong and are to be reviewed"


def impact_numbers(job: JobView) -> str:
    return (
        f"{len(job.members)} member(s) of one job examined; {len(job.implicated)} implicated"
        f"{' (' + ', '.join(job.implicated) + ')' if job.implicated else ''}; "
        f"{len(job.not_implicated)} not implicated"
        f"{' (' + ', '.join(job.not_implicated) + ')' if job.not_implicated else ''}; "
        f"{len(job.without_verdict)} without a verdict."
    )


def first_actions(job: JobView) -> list[dict[str, Any]]:
    verdict = job.verdict or {}
    if not verdict or verdict.get("action") == "none":
        return []
    others = f"; not implicated: {', '.join(job.not_implicated)}" if job.not_implicated else ""
    return [{"host": f"the job (on {job.targets}{others})", "action": verdict.get("action"), "id": verdict.get("id")}]


def one_path(paths: list[dict[str, Any]], job: JobView) -> list[dict[str, Any]]:
    """The members walked one path together: shown once, each step's collectors with every member's status."""
    if not paths:
        return []
    first = dict(paths[0])
    steps = []
    for index, step in enumerate(first["steps"]):
        statuses: dict[str, dict[str, str]] = {}
        for path in paths:
            if index < len(path["steps"]):
                for kind, status in (path["steps"][index].get("collectors") or {}).items():
                    statuses.setdefault(kind, {})[path["host"]] = str(status)
        collectors = {
            kind: next(iter(set(by.values()))) if len(set(by.values())) == 1 else _per_member(by)
            for kind, by in statuses.items()
        }
        steps.append({**step, "collectors": collectors})
    first["steps"] = steps
    first["host"] = f"the job ({', '.join(job.members)})"
    return [first]


def _per_member(by_member: dict[str, str]) -> str:
    return "; ".join(f"{status} on {host}" for host, status in by_member.items())
