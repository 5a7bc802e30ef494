"""A count of hosts says "1 host" or "8 hosts", never "host(s)": the draft's title (a storm's too), its impact
and timeline lines, and every template (nightowl/outcome.py ``counted``, the drafts' ``counted`` filter)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.outcome import counted
from nightowl.postmortem import sre

ROOT = Path(__file__).resolve().parents[2]
VERDICT = {"id": "gpu-fell-off-bus", "action": "reboot-node", "severity": "critical", "summary": "gone"}


def _bundle(count: int, verdict: dict[str, Any] | None = VERDICT) -> Any:
    hosts = [{"host": f"gpu-{n}", "status": "ok", "verdict": verdict} for n in range(count)]
    return SimpleNamespace(verdicts={"hosts": hosts}, outcome=None)


@pytest.mark.parametrize(
    ("count", "word", "said"),
    [(1, "host", "1 host"), (8, "host", "8 hosts"), (0, "host", "0 hosts"), (1, "other host", "1 other host")],
)
def test_a_count_takes_its_nouns_number(count: int, word: str, said: str) -> None:
    assert counted(count, word) == said


def test_the_drafts_title_counts_the_other_hosts() -> None:
    assert sre.title(_bundle(2)) == "gpu-fell-off-bus on gpu-0 and 1 other host"
    assert sre.title(_bundle(3)) == "gpu-fell-off-bus on gpu-0 and 2 other hosts"
    assert sre.title(_bundle(1, None)) == "no verdict on 1 host"
    assert sre.title(_bundle(4, None)) == "no verdict on 4 hosts"


def test_the_impact_sentence_counts_the_hosts() -> None:
    """One host needing no action reads "none of 1 host", not "none of 1 host(s)"."""
    quiet = {"id": "healthy", "action": "none", "severity": "ok", "summary": "fine"}
    data = _bundle(1, quiet)
    data.host_files, data.manifest = (lambda host, kind: []), {}
    sentence = sre.impact_sentence(data, [])
    assert "none of 1 host needs action" in sentence and "(s)" not in sentence


@pytest.mark.parametrize(("count", "said"), [(1, "on 1 host after"), (8, "on 8 hosts after")])
def test_the_templates_counted_filter(count: int, said: str) -> None:
    """The storm title's words, through the filter the drafts' templates use."""
    from nightowl.postmortem.render import _shared_environment

    env = _shared_environment((str(ROOT / "templates"),))
    assert env.from_string('on {{ n | counted("host") }} after').render(n=count) == said


def test_no_host_s_is_left_in_code_or_templates() -> None:
    """Every user-facing count of hosts goes through ``counted`` (or says the noun's number itself)."""
    files = [*sorted((ROOT / "nightowl").rglob("*.py")), *sorted((ROOT / "templates").glob("*.j2"))]
    left = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "host(s)" in line and "``host(s)``" not in line  # the helper's own docstring names what it replaced
    ]
    assert not left, left
