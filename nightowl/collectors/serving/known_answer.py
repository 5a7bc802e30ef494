"""The known-answer probe (``known-answer``): one replica's answer to a fixed greedy prompt set.

The same prompts, with ``temperature: 0`` and a fixed ``max_tokens`` and ``seed``, are sent to every
replica's OpenAI-compatible endpoint (vLLM, SGLang, TGI's ``/v1`` routes); the answers are reduced to
one digest that a runbook compares with the golden digest and with the other replicas
(docs/sources.md#silent-corruption). The digest is over token ids when the server returns them
(vLLM ``"return_token_ids": true`` -> ``choices[].token_ids``, or ``"return_tokens_as_token_ids":
true`` with logprobs -> ``"token_id:N"`` tokens), else over the text.

Bitwise-stable output is not a given: vLLM's results depend on batch composition unless batch
invariance is on (``VLLM_BATCH_INVARIANT=1``, compute capability >= 8.0) or the probe runs as an
isolated single request with the same engine config, TP layout, versions and seed
(vllm docs/features/batch_invariance.md). A probe that mixes with live traffic can differ on a
healthy replica; probe a drained replica, or in batch-invariant mode.

The command is curl with runbook parameters: ``endpoint`` (the full URL, e.g.
``http://127.0.0.1:8000/v1/completions``) and either ``probe_file`` (a JSON request body on the host)
or ``probe_body`` (the JSON body itself). The parser also reads several JSON responses one after
another (JSON lines, or the saved answers of several isolated requests).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "known-answer"
TOKEN_ID = re.compile(r"^token_id:(-?\d+)$")  # vLLM --return-tokens-as-token-ids
MAX_ERROR_TEXT = 300

# The probe: curl with no shell; "-" never starts a parameter (resolve_argv), "--" is not needed
# because the URL is the last element and curl reads @file itself.
CURL = ("curl", "-sS", "--max-time", "120", "-H", "Content-Type: application/json")
COMMANDS: tuple[tuple[str, ...], ...] = (
    (*CURL, "--data-binary", "@{probe_file}", "{endpoint}"),
    (*CURL, "--data-binary", "{probe_body}", "{endpoint}"),
)


@dataclass
class Answer:
    response: int  # which JSON response (0-based) it came from
    index: int
    text: str | None
    token_ids: list[int] | None
    finish_reason: str | None


@dataclass
class KnownAnswerResult:
    kind: str = KIND
    responses: int = 0
    models: list[str] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _token_ids_from_logprobs(logprobs: Any) -> list[int] | None:
    """``token_id:N`` tokens of completions (``tokens``) or chat (``content[].token``) logprobs."""
    if not isinstance(logprobs, dict):
        return None
    tokens = logprobs.get("tokens")
    if not isinstance(tokens, list):
        content = logprobs.get("content")
        content = content if isinstance(content, list) else []
        tokens = [c.get("token") for c in content if isinstance(c, dict)]
    if not tokens:
        return None
    ids = []
    for token in tokens:
        match = TOKEN_ID.match(token) if isinstance(token, str) else None
        if match is None:
            return None
        ids.append(int(match.group(1)))
    return ids


def _token_ids(choice: dict[str, Any]) -> list[int] | None:
    ids = choice.get("token_ids")
    if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return list(ids)
    return _token_ids_from_logprobs(choice.get("logprobs"))


def _text(choice: dict[str, Any]) -> str | None:
    if isinstance(choice.get("text"), str):
        return str(choice["text"])
    message = choice.get("message")
    if isinstance(message, dict) and isinstance(message.get("content"), str):
        return str(message["content"])
    return None


def _error_text(document: dict[str, Any]) -> str | None:
    """OpenAI ``{"error": {...}}``, vLLM ``{"object": "error", "message": ...}``, TGI ``{"error": "..."}``."""
    error = document.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)[:MAX_ERROR_TEXT]
    if isinstance(error, str):
        return error[:MAX_ERROR_TEXT]
    if document.get("object") == "error":
        return str(document.get("message") or document)[:MAX_ERROR_TEXT]
    return None


def _documents(text: str, result: KnownAnswerResult) -> list[Any]:
    """Every JSON value in the text, one after another; anything else becomes a warning."""
    decoder = json.JSONDecoder()
    documents: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return documents
        try:
            value, position = decoder.raw_decode(text, position)
        except ValueError:
            rest = text[position:].strip()
            result.warnings.append(f"not JSON: {rest[:200]}")
            return documents
        documents.append(value)


def parse(text: str) -> KnownAnswerResult:
    result = KnownAnswerResult()
    for document in _documents(text.replace("\x00", ""), result):
        if not isinstance(document, dict):
            result.warnings.append(f"unexpected JSON value: {str(document)[:200]}")
            continue
        error = _error_text(document)
        if error is not None:
            result.errors.append(error)
            continue
        choices = document.get("choices")
        if not isinstance(choices, list):
            result.warnings.append(f"response without choices: {json.dumps(document)[:200]}")
            continue
        response = result.responses
        result.responses += 1
        model = document.get("model")
        if isinstance(model, str) and model not in result.models:
            result.models.append(model)
        for position, choice in enumerate(c for c in choices if isinstance(c, dict)):
            index, finish = choice.get("index"), choice.get("finish_reason")
            result.answers.append(
                Answer(
                    response=response,
                    index=index if isinstance(index, int) else position,
                    text=_text(choice),
                    token_ids=_token_ids(choice),
                    finish_reason=finish if isinstance(finish, str) else None,
                )
            )
    if text.strip() and not result.answers and not result.errors and not result.warnings:
        result.warnings.append("no answer found")
    return result


def _canonical(answers: list[Answer], on_token_ids: bool) -> list[Any]:
    ordered = sorted(answers, key=lambda a: (a.response, a.index))
    return [a.token_ids if on_token_ids else a.text for a in ordered]


def answer_digest(answers: list[Answer]) -> tuple[str | None, str | None]:
    """(sha256 of the answers in request order, what it was computed on: ``token_ids`` or ``text``)."""
    if not answers:
        return None, None
    on_token_ids = all(a.token_ids is not None for a in answers)
    if not on_token_ids and any(a.text is None for a in answers):
        return None, None
    payload = json.dumps(_canonical(answers, on_token_ids), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest(), "token_ids" if on_token_ids else "text"


def _is_empty(answer: Answer) -> bool:
    """No token and no text: a replica that answers nothing to a prompt that has an answer."""
    if answer.token_ids is not None:
        return not answer.token_ids
    return not (answer.text or "").strip()


def facts(result: KnownAnswerResult) -> dict[str, Any]:
    """Contract-style JSON plus ``answer_digest``, ``compared_on``, ``answered``, ``empty_answers``."""
    data: dict[str, Any] = to_jsonable(result)
    digest, compared_on = answer_digest(result.answers)
    data["answer_digest"] = digest
    data["compared_on"] = compared_on
    data["answered"] = bool(result.answers) and not result.errors and digest is not None
    data["empty_answers"] = sum(1 for a in result.answers if _is_empty(a))
    return data


COLLECTOR = Collector(**registered(KIND), commands=COMMANDS, parse=parse, facts=facts)
