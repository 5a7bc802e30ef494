"""A notify target is named once (notify.TARGET_KEYS); the `notify` section accepts exactly the targets
and its own settings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nightowl.receiver.notify import NOTIFY_KEYS, TARGET_KEYS, parse_notify

ROOT = Path(__file__).resolve().parents[2]


def test_every_target_is_a_key_of_the_notify_section() -> None:
    assert set(TARGET_KEYS) <= NOTIFY_KEYS
    assert NOTIFY_KEYS - set(TARGET_KEYS) == {"link_base", "attempts", "backoff", "timeout", "queue"}


def test_an_unknown_target_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="teams"):
        parse_notify({"teams": {"url": "https://example.invalid/hook"}}, "serve.yaml")


TEAMS = """
from nightowl.receiver.targets.base import Target, headline

KIND = "teams"
RANK = 9
KEYS = frozenset({"url"})


def parse(doc, where):
    return Target(KIND, str(doc["url"]))


def request(target, outcome, link):
    return target.url, {}, {"text": headline(outcome), "findings": list(outcome.findings)}
"""


def test_a_new_target_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module dropped into the targets folder is read by the `notify` section and posted to: nothing else
    names it (receiver/targets/base.py says what it holds)."""
    from nightowl.receiver import targets
    from nightowl.receiver.notify import request_for
    from tests.receiver.outcomes import outcome_of

    (tmp_path / "teams.py").write_text(TEAMS)
    monkeypatch.setattr(targets, "__path__", [*targets.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "nightowl.receiver.targets.teams", raising=False)
    targets.registry.cache_clear()
    try:
        config = parse_notify({"teams": {"url": "https://teams.example/hook"}, "chat": {"url": "https://c/x"}}, "s")
        assert [t.kind for t in config.targets] == ["chat", "teams"]  # in RANK order
        outcome = outcome_of({"alert": "A", "host": "h", "verdict": {"id": "v", "action": "reboot-node"}}, "v")
        url, _, body = request_for(config.targets[1], outcome, None)
        assert url == "https://teams.example/hook" and body["findings"] == ["First action: reboot-node"]
        with pytest.raises(ValueError, match="notify.teams: unknown key"):
            parse_notify({"teams": {"url": "https://t/x", "channel": "#x"}}, "s")
    finally:
        monkeypatch.undo()
        targets.registry.cache_clear()
        sys.modules.pop("nightowl.receiver.targets.teams", None)
    with pytest.raises(ValueError, match="teams"):
        parse_notify({"teams": {"url": "https://teams.example/hook"}}, "s")


@pytest.mark.parametrize("kind", list(TARGET_KEYS))
def test_every_target_has_its_module_its_fixture_and_its_doc_line(kind: str) -> None:
    from nightowl.receiver.targets import registry

    module = registry()[kind]
    assert module.__name__ == f"nightowl.receiver.targets.{kind}" and TARGET_KEYS[kind] == module.KEYS
    assert f"  {kind}:" in (ROOT / "fixtures" / "alerts" / "serve.yaml").read_text()
    assert f"`{kind}.py`" in (ROOT / "docs" / "receiver.md").read_text()
