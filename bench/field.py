"""The field corpus scored: how nightowl reads real outputs from sources its parsers were not built on
(fixtures/field/, issue "Never cry wolf").

Each sample in a ``fixtures/field/*/INDEX.yaml`` carries a label written before nightowl ran on it: its
parse kind, whether it is healthy, the facts plainly visible in it, the first action an expert would take
and every action they would accept. This script parses each sample as ``nightowl parse`` does (the
normaliser, the parser, the coverage), compares the labelled facts, and for the kinds a runbook judges
replays the sample as a recorded host beside healthy companions (fixtures/hosts/healthy-l40s, or
ib-healthy-ndr for the network kinds) through that runbook, as ``nightowl triage --replay`` does.

    .venv/bin/python bench/field.py [--kind KIND] [--folder NAME] [--misses] [--json] [--code DIR] [--holdout]

Per kind it prints: samples, facts right, actions right (in the acceptable list), exactly the expected
action, ``unreadable`` answers, crashes, false alarms (a healthy sample given an action other than none or
cannot-judge) and faults judged healthy. ``--misses`` lists every sample that missed, with why.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

FIELD = ROOT / "fixtures" / "field"
HOSTS = ROOT / "fixtures" / "hosts"
CANNOT_JUDGE = "cannot-judge"

# Which runbook judges a kind, the healthy recorded host its sample is put in, and the files it replaces.
RUNBOOK_OF: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "nvidia-smi": ("node-health", "healthy-l40s", ("nvidia-smi.out",)),
    "kernel-log": ("xid", "healthy-l40s", ("kernel-log.out",)),
    "ib-ports": ("node-health", "ib-healthy-ndr", ("ib-ports.1.out", "ib-ports.2.out")),
    "fabric-manager": ("node-health", "ib-healthy-ndr", ("fabric-manager.out",)),
    "engine-log": ("engine-start", "", ("engine-log.out",)),
    "nccl-log": ("nccl-hang", "nccl-healthy-ib", ("nccl-log.out",)),
}
# Parameters a runbook needs to read the sample at all (the NCCL log's path).
PARAMS_OF = {"nccl-hang": ["--param", "nccl_log=/var/log/nccl.log"]}


def _fact(kind: str, name: str, facts: dict[str, Any]) -> Any:
    """The value of a label's fact, read from the facts nightowl derived (the label's vocabulary)."""
    if name == "ready":
        return facts.get("last_phase") == "ready"
    if name == "oom":  # the label's "a CUDA/GPU out-of-memory error": not a KV admission refusal or a host kill
        return facts.get("oom_kind") in ("cuda-oom", "engine-oom")
    if name == "ports_down":  # the label's "not Active": nightowl's down ports and its unused ones
        down = facts.get("ports_down")
        return len(down) + len(facts.get("unused_ports") or []) if isinstance(down, list) else down
    if name == "passed":  # pass or fail; an output that stops before the verdict passed nothing and failed nothing
        overall = facts.get("overall")
        return {"pass": True, "fail": False}.get(str(overall))
    if name == "healthy" and kind == "fabric-manager":
        return facts.get("healthy")
    if name == "collective" and kind == "nccl-tests":
        names = facts.get("collectives") or ([facts["collective"]] if facts.get("collective") else [])
        return names[0] if names else None
    if name == "nranks" and kind == "nccl-tests":
        return facts.get("nranks") or facts.get("ngpus")
    if name in ("xid_codes", "sxid_codes"):
        return sorted(set(facts.get(name) or []))
    return facts.get(name)


def _same(expected: Any, got: Any) -> bool:
    if isinstance(expected, (int, float)) and not isinstance(expected, bool) and isinstance(got, (int, float)):
        return float(expected) == float(got)
    if isinstance(expected, str) and got is not None:
        return expected.strip().lower() == str(got).strip().lower()
    return bool(expected == got)


@dataclass
class Score:
    """One sample's outcome."""

    file: str
    kind: str
    healthy: bool
    facts_total: int = 0
    facts_right: int = 0
    action: str | None = None
    action_right: bool | None = None
    action_exact: bool | None = None
    unreadable: bool = False
    crashed: bool = False
    why: list[str] = field(default_factory=list)

    @property
    def false_alarm(self) -> bool:
        return self.healthy and self.action not in (None, "none", CANNOT_JUDGE)

    @property
    def fault_called_healthy(self) -> bool:
        return not self.healthy and self.action == "none" and not self.action_right


HOLDOUT = "holdout"  # gathered after the last parser change and kept unseen until scored: --holdout


def samples(kind: str | None = None, holdout: bool = False) -> list[tuple[Path, dict[str, Any]]]:
    """Every labelled sample (its file and its index entry), in folder and index order: the held-out
    folder alone with ``holdout``, every other folder without it."""
    found = []
    for index in sorted(FIELD.glob("*/INDEX.yaml")):
        if (index.parent.name == HOLDOUT) != holdout:
            continue
        for entry in yaml.safe_load(index.read_text()) or []:
            if kind is None or entry.get("kind") == kind:
                found.append((index.parent / entry["file"], entry))
    return found


def score(path: Path, entry: dict[str, Any], work: Path) -> Score:
    """Parse, compare the facts, replay through the kind's runbook."""
    from nightowl.collectors import get_collector

    kind = entry["kind"]
    result = Score(file=f"{path.parent.name}/{path.name}", kind=kind, healthy=bool(entry.get("healthy")))
    text = path.read_text(errors="replace")
    try:
        collector = get_collector(kind)
        facts = collector.facts(collector.parse(text))
        if hasattr(collector, "assess"):  # an older nightowl (--code) measures no coverage
            facts.update(collector.assess(text, facts))
    except Exception as exc:  # noqa: BLE001 - a crash is a finding
        result.crashed = True
        result.why.append(f"crash: {type(exc).__name__}: {exc}")
        return result
    result.unreadable = facts.get("coverage", {}).get("understood") is False
    for name, expected in (entry.get("facts") or {}).items():
        got = _fact(kind, name, facts)
        result.facts_total += 1
        if _same(expected, got):
            result.facts_right += 1
        else:
            result.why.append(f"fact {name}: labelled {expected!r}, read {got!r}")
    if kind in RUNBOOK_OF:
        result.action = _replay(kind, path, work)
        acceptable = set(entry.get("acceptable_actions") or []) | {entry.get("expected_action")}
        result.action_right = result.action in acceptable
        result.action_exact = result.action == entry.get("expected_action")
        if not result.action_right:
            result.why.append(f"action {result.action}, labelled {entry.get('expected_action')} ({sorted(acceptable)})")
    return result


def _replay(kind: str, path: Path, work: Path) -> str:
    """The first action the kind's runbook gives the sample as a recorded host (cannot-judge: no verdict)."""
    from click.testing import CliRunner

    from nightowl.cli.main import main

    runbook, base, names = RUNBOOK_OF[kind]
    host = work / "host"
    shutil.rmtree(host, ignore_errors=True)
    if base:
        shutil.copytree(HOSTS / base, host)
    else:
        host.mkdir(parents=True)
    for name in names:
        shutil.copyfile(path, host / name)
    answer = CliRunner().invoke(
        main,
        [
            "triage",
            runbook,
            "--replay",
            str(host),
            *PARAMS_OF.get(runbook, []),
            "--format",
            "json",
            "--out",
            str(work / "bundles"),
        ],
    )
    try:
        summary = json.loads(answer.output)
    except ValueError:
        return f"error (exit {answer.exit_code})"
    verdict = summary["hosts"][0].get("verdict")
    return verdict["action"] if verdict else CANNOT_JUDGE


def table(scores: list[Score]) -> list[dict[str, Any]]:
    """Rows per kind and overall."""
    rows = []
    kinds = sorted({s.kind for s in scores})
    for kind in [*kinds, "all"]:
        group = [s for s in scores if kind in ("all", s.kind)]
        judged = [s for s in group if s.action_right is not None]
        rows.append(
            {
                "kind": kind,
                "samples": len(group),
                "healthy": sum(s.healthy for s in group),
                "facts": f"{sum(s.facts_right for s in group)}/{sum(s.facts_total for s in group)}",
                "actions_right": f"{sum(bool(s.action_right) for s in judged)}/{len(judged)}",
                "exact": f"{sum(bool(s.action_exact) for s in judged)}/{len(judged)}",
                "unreadable": sum(s.unreadable for s in group),
                "crashes": sum(s.crashed for s in group),
                "false_alarms": sum(s.false_alarm for s in group),
                "faults_called_healthy": sum(s.fault_called_healthy for s in group),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", help="only the samples of this parse kind")
    parser.add_argument("--misses", action="store_true", help="list each sample that missed, and why")
    parser.add_argument("--json", action="store_true", help="the rows and every sample's outcome as JSON")
    parser.add_argument("--holdout", action="store_true", help="score the held-out samples (fixtures/field/holdout)")
    parser.add_argument("--code", type=Path, help="score another checkout's nightowl (e.g. a commit before a fix)")
    parser.add_argument("--folder", action="append", help="only this folder of fixtures/field (repeatable)")
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, str(args.code.resolve()))
    with tempfile.TemporaryDirectory(prefix="nightowl-field-") as tmp:
        everything = samples(args.kind, args.holdout)
        chosen = [(p, e) for p, e in everything if not args.folder or p.parent.name in args.folder]
        scores = [score(path, entry, Path(tmp)) for path, entry in chosen]
    rows = table(scores)
    if args.json:
        print(json.dumps({"rows": rows, "samples": [s.__dict__ for s in scores]}, indent=2))
        return 0
    columns = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(str(row[c]).ljust(w) for c, w in zip(columns, widths, strict=True)))
    if args.misses:
        for s in scores:
            if s.why or s.false_alarm or s.fault_called_healthy:
                print(f"\n{s.file} [{s.kind}, {'healthy' if s.healthy else 'fault'}] action={s.action}")
                for why in s.why:
                    print(f"    {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
