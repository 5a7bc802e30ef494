"""`replica-models`: what a serving replica serves, from its OpenAI-compatible ``GET /v1/models``.

vLLM lists each served model as ``{"id", "root", "max_model_len", "parent"}`` (``root`` is the
path or repository the weights came from, ``max_model_len`` the context the engine admits; vllm
vllm/entrypoints/openai/protocol.py ``ModelCard``); SGLang and TGI give ``id`` and ``owned_by``.
Comparing these across replicas names a replica that serves other weights or another context
length than its peers (drift).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "replica-models"
COMMANDS: tuple[tuple[str, ...], ...] = (("curl", "-sS", "--fail", "--max-time", "5", "--", "{base_url}/v1/models"),)


@dataclass(frozen=True)
class ServedModel:
    id: str
    root: str | None
    max_model_len: int | None


@dataclass(frozen=True)
class ReplicaModels:
    kind: str = KIND
    models: tuple[ServedModel, ...] = ()
    warnings: tuple[str, ...] = ()


def _model(entry: dict[str, Any]) -> ServedModel | None:
    model_id = entry.get("id")
    if not isinstance(model_id, str):
        return None
    root = entry.get("root")
    length = entry.get("max_model_len")
    return ServedModel(
        model_id,
        root if isinstance(root, str) else None,
        length if isinstance(length, int) and not isinstance(length, bool) else None,
    )


def parse(text: str) -> ReplicaModels:
    if not text.strip():
        return ReplicaModels()
    try:
        document = json.loads(text)
    except ValueError:
        return ReplicaModels(warnings=(f"not JSON: {text.strip()[:200]}",))
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, list):
        return ReplicaModels(warnings=(f"no model list (data): {text.strip()[:200]}",))
    models = [m for e in data if isinstance(e, dict) and (m := _model(e)) is not None]
    skipped = len(data) - len(models)
    return ReplicaModels(models=tuple(models), warnings=(f"{skipped} entries without an id",) if skipped else ())


def facts(result: ReplicaModels) -> dict[str, Any]:
    """Contract-style JSON plus the first model's ``model_id``, ``model_root``, ``max_model_len``."""
    out: dict[str, Any] = to_jsonable(result)
    first = result.models[0] if result.models else None
    out["model_id"] = first.id if first else None
    out["model_root"] = first.root if first else None
    out["max_model_len"] = first.max_model_len if first else None
    return out


COLLECTOR = Collector(**registered(KIND), commands=COMMANDS, parse=parse, facts=facts)
