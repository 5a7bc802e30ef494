"""A notify target is named once (notify.TARGET_KEYS); the `notify` section accepts exactly the targets
and its own settings."""

from __future__ import annotations

import pytest

from nightowl.receiver.notify import NOTIFY_KEYS, TARGET_KEYS, parse_notify


def test_every_target_is_a_key_of_the_notify_section() -> None:
    assert set(TARGET_KEYS) <= NOTIFY_KEYS
    assert NOTIFY_KEYS - set(TARGET_KEYS) == {"link_base", "attempts", "backoff", "timeout", "queue"}


def test_an_unknown_target_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="teams"):
        parse_notify({"teams": {"url": "https://example.invalid/hook"}}, "serve.yaml")
