"""What a knowledge loader says about a table written in a test: one way to write the file, point the loader
at it and catch its error, for the tests that check a bad row is refused with its file and place."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nightowl import knowledge


def load_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, loader: Callable[[], Any], where: str
) -> str:
    """Write ``text`` as the knowledge file ``name`` in ``tmp_path``, run ``loader`` (the uncached one, so the
    shipped tables stay cached) and return its KnowledgeError's message, which must name ``name: where``."""
    (tmp_path / name).write_text(text)
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    with pytest.raises(knowledge.KnowledgeError, match=re.escape(f"{name}: {where}")) as raised:
        loader()
    return str(raised.value)
