"""Parse once (issue 44.4): the verdict, the history rows and the postmortem draft read one parse of an output,
even where redaction changed the stored copy, and a later reader of the bundle sees what the verdict saw.

The line below carries an API key inside a judged Xid 154 line. Scrubbing it also takes the comma that
separates the process from the message, so the scrubbed copy, parsed again, has no recovery action: the
history's row and the draft's first step used to disagree with the verdict's "Node Reboot Required".
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from nightowl import history
from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu.kernel_log.parser import parse
from nightowl.engine.bundle_verify import verify_bundle
from nightowl.engine.context import RunContext
from nightowl.engine.parse_memo import HandedOver, ParsedOutputs
from nightowl.history import extract, store
from nightowl.library import runbooks
from nightowl.postmortem.render import render_bundle
from nightowl.run import RunResult, RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport

SECRET = "sk-abc123"
LINE = (
    "Mar 29 15:38:59 kernel: NVRM: Xid (PCI:0000:01:00): 154, pid=4242, name=train "
    f"--api-key={SECRET},GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)\n"
)
SAW = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"


def _run(tmp_path: Path, redact: bool) -> tuple[RunResult, Path]:
    host = tmp_path / "recorded"
    host.mkdir(exist_ok=True)
    (host / "kernel-log.out").write_text(LINE)
    store_path = tmp_path / f"history-{redact}.sqlite3"
    context = RunContext(history=store_path, readers=history.readers(store_path))
    result = run_and_save(
        runbooks.load("xid"),
        {"gpu-1": lambda: ReplayTransport(host, "gpu-1")},
        tmp_path / f"out-{redact}",
        settings=RunSettings(redact=redact),
        context=context,
    )
    assert result.bundle is not None
    return result, store_path


def _first_steps(draft: str) -> list[str]:
    return [re.sub(r"\[E\d+ ", "[", line) for line in draft.splitlines() if "first step" in line]


def _event_texts(rows: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(row["code"], row["text"]) for row in rows if row["kind"] == "xid"]


def test_a_secret_inside_a_judged_line_leaves_verdict_history_and_draft_agreeing(tmp_path: Path) -> None:
    result, store_path = _run(tmp_path, redact=True)
    plain, plain_store = _run(tmp_path, redact=False)
    assert result.bundle is not None and plain.bundle is not None
    stored_line = (result.bundle / "hosts" / "gpu-1" / "kernel-log.out").read_text()
    assert SECRET not in stored_line
    # the scenario is real: the scrubbed line, parsed again, loses the message the verdict judged
    assert [e["text"] for e in to_jsonable(parse(stored_line))["events"]] != [SAW]

    verdict = result.hosts[0]["verdict"]
    assert verdict["id"] == plain.hosts[0]["verdict"]["id"] == "recovery-node-reboot"
    rows = store.read(store_path, "SELECT * FROM events", ())
    assert _event_texts(rows) == _event_texts(store.read(plain_store, "SELECT * FROM events", ())) == [(154, SAW)]
    draft = (result.bundle / "postmortem.md").read_text()
    assert _first_steps(draft) == _first_steps((plain.bundle / "postmortem.md").read_text())
    assert any("Node Reboot Required" in line for line in _first_steps(draft))

    # a later reader of the bundle alone (history import, a draft rendered again) sees the same
    assert _event_texts(extract.bundle_record(result.bundle)["runs"][0]["events"]) == [(154, SAW)]
    assert _first_steps(render_bundle(result.bundle)) == _first_steps(draft)
    kept = result.bundle / "parsed" / "hosts" / "gpu-1" / "kernel-log.out.json"
    assert kept.is_file() and not (plain.bundle / "parsed").exists()  # only what was stored scrubbed
    assert not verify_bundle(result.bundle)  # listed in the manifest with its sha256
    every_file = "".join(p.read_text(errors="replace") for p in result.bundle.rglob("*") if p.is_file())
    assert SECRET not in every_file
    assert SECRET.encode() not in store_path.read_bytes()  # nor in the history store


def test_the_parse_results_travel_with_the_result_not_a_module() -> None:
    def scrub(value: Any) -> Any:
        return {"events": [event.replace(SECRET, "[REDACTED]") for event in value["events"]]}

    first, second = ParsedOutputs({"kernel-log"}, dict), ParsedOutputs({"kernel-log"}, dict)
    first.scrub_json = second.scrub_json = scrub  # as the bundle writer sets it (keep_for)
    first.remember("kernel-log", f"raw {SECRET}", {"events": [f"seen {SECRET}"]})
    first.alias([f"raw {SECRET}"], ["raw [REDACTED]"], "hosts/h/kernel-log.out", "kernel-log")
    assert first.recall("kernel-log", f"raw {SECRET}") == {"events": [f"seen {SECRET}"]}  # the run's own text
    # the stored copy's text: the run's result, only as JSON and scrubbed; never the object the run judged
    assert first.recall("kernel-log", "raw [REDACTED]") is None
    assert first.recall("kernel-log", "raw [REDACTED]", as_json=True) == {"events": ["seen [REDACTED]"]}
    assert second.recall("kernel-log", "raw [REDACTED]", as_json=True) is None  # another run's are its own
    assert first.scrubbed_results() == {"hosts/h/kernel-log.out": ("kernel-log", {"events": ["seen [REDACTED]"]})}
    first.rename({"hosts/h/kernel-log.out": "hosts/h/kernel-log.1.out"})
    handed = first.hand_over()
    assert isinstance(handed, HandedOver) and first.recall("kernel-log", f"raw {SECRET}") is None
    second.adopt(handed)  # a sweep's parent takes what its worker parsed
    assert second.recall("kernel-log", "raw [REDACTED]", as_json=True) == {"events": ["seen [REDACTED]"]}
    assert list(second.scrubbed_results()) == ["hosts/h/kernel-log.1.out"]


def test_a_kept_parse_of_the_wrong_shape_is_an_unreadable_bundle_not_a_crash(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, redact=True)
    assert result.bundle is not None
    kept = result.bundle / "parsed" / "hosts" / "gpu-1" / "kernel-log.out.json"
    kept.chmod(0o600)
    kept.write_text(json.dumps({"kind": "kernel-log", "file": "hosts/gpu-1/kernel-log.out", "result": {"events": [1]}}))
    with pytest.raises(ValueError, match="not of its kind's shape"):
        extract.bundle_record(result.bundle)
    kept.write_text(json.dumps({"kind": "kernel-log", "result": ["not", "a", "parse"]}))  # ignored: parsed again
    assert _event_texts(extract.bundle_record(result.bundle)["runs"][0]["events"]) == [(154, "")]
