"""The bundle writer's walk over a JSON document (``bundle_writer._scrub``) answers leaves inline: it must
give what the plain recursive walk gives, value for value and type for type."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

from nightowl.engine.bundle_writer import _scrub
from nightowl.redact import scrub_secrets

ROOT = Path(__file__).resolve().parents[2]


def _reference(value: Any, redact: Any) -> Any:
    """The walk as it was: every value through the same three tests."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _reference(item, redact) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_reference(item, redact) for item in value]
    return value


class Colour(str, enum.Enum):
    RED = "token=abc123def456"


class Count(int):
    pass


def _same(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right) or (left != left and right != right)  # NaN


def test_the_walk_gives_what_the_plain_walk_gives() -> None:
    documents: list[Any] = [
        json.loads(path.read_text()) for path in sorted((ROOT / "fixtures").rglob("*.json"))[:40] if path.stat().st_size
    ]
    documents.append(
        {
            "a": ["password=hunter2", ("x", 1, 2.5, True, None), {"k": Colour.RED}],
            "n": Count(3),
            "f": float("nan"),
            "s": Colour.RED,
            "nested": [[["Authorization: Bearer abcdefghijklmnop"]]],
            "set": frozenset({1}),
        }
    )
    for document in documents:
        assert _same(_scrub(document, scrub_secrets), _reference(document, scrub_secrets))


def test_a_container_met_again_is_scrubbed_once_and_read_the_same_everywhere() -> None:
    """The same list in three places (a verdict's evidence and two condition reads cite one fact): scrubbed once,
    and each place reads what the plain walk gives; an equal list that is another object is walked itself."""
    gpus = [{"uuid": "GPU-1", "note": "token=abc123def456"}, {"uuid": "GPU-2", "note": "fine"}]
    twin = [dict(gpu) for gpu in gpus]
    document = {"evidence": [{"value": gpus}], "trace": [{"reads": {"gpus": gpus}}, {"reads": {"gpus": gpus}}]}
    document["other"] = twin
    calls: list[str] = []

    def counting(text: str) -> str:
        calls.append(text)
        return scrub_secrets(text)

    scrubbed = _scrub(document, counting)
    assert _same(scrubbed, _reference(document, scrub_secrets))
    assert "abc123def456" not in json.dumps(scrubbed)
    assert calls.count("token=abc123def456") == 2  # the shared list once, its equal twin once
