"""known-answer collector: the parser on composed vLLM responses, and the probe against loopback replicas."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.gpu.dcgmi_diag import DRAINED_COLLECTOR as DCGM_DRAINED_COLLECTOR
from nightowl.collectors.serving.known_answer import COLLECTOR, facts, parse
from nightowl.engine.runner import RunOptions, collect_on
from nightowl.transports.local import LocalTransport
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"
# Token ids of fixtures/hosts/sdc-good-a/known-answer.out, choice 0 then choice 1, read from the file.
GOLDEN_IDS = [
    [12366, 13, 1102, 374, 1101, 279, 7928, 3363, 304, 9822, 13],
    [220, 16, 11, 220, 16, 11, 220, 17, 11, 220, 18, 11, 220, 20, 11, 220, 23, 11, 220, 1032],
]


def digest_of(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()


def facts_of(text: str) -> dict[str, Any]:
    return facts(parse(text))


def test_golden_answer_digest_is_over_token_ids() -> None:
    result = facts_of((HOSTS / "sdc-good-a" / "known-answer.out").read_text())
    assert result["responses"] == 1
    assert result["models"] == ["meta-llama/Meta-Llama-3-8B-Instruct"]
    assert [a["token_ids"] for a in result["answers"]] == GOLDEN_IDS
    assert result["answers"][0]["text"] == " Paris. It is also the largest city in France."
    assert result["answers"][0]["finish_reason"] == "length"
    assert result["compared_on"] == "token_ids"
    assert result["answer_digest"] == digest_of(GOLDEN_IDS)
    assert result["answered"] is True
    assert result["empty_answers"] == 0


def test_one_different_token_changes_the_digest() -> None:
    diverged = facts_of((HOSTS / "sdc-diverged" / "known-answer.out").read_text())
    changed = [GOLDEN_IDS[0][:9] + [4606, 13], GOLDEN_IDS[1]]  # "in Europe." instead of "in France."
    assert diverged["answer_digest"] == digest_of(changed)
    assert diverged["answer_digest"] != digest_of(GOLDEN_IDS)


def test_error_body_is_no_answer() -> None:
    result = facts_of((HOSTS / "sdc-unanswered" / "known-answer.out").read_text())
    assert result["errors"] == ["The model `meta-llama/Meta-Llama-3-8B` does not exist."]
    assert result["answers"] == []
    assert result["answer_digest"] is None
    assert result["answered"] is False


def test_token_ids_from_logprobs_completions_and_chat() -> None:
    completions = {"choices": [{"index": 0, "text": "ab", "logprobs": {"tokens": ["token_id:7", "token_id:8"]}}]}
    chat = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ab"},
                "logprobs": {"content": [{"token": "token_id:7"}, {"token": "token_id:8"}]},
            }
        ]
    }
    for document in (completions, chat):
        result = facts_of(json.dumps(document))
        assert result["answers"][0]["token_ids"] == [7, 8]
        assert result["answer_digest"] == digest_of([[7, 8]])


def test_text_only_answers_and_several_responses_in_order() -> None:
    # Two isolated requests saved one after the other (JSON lines); no token ids: digest over text.
    first = {"choices": [{"index": 0, "text": " Paris"}]}
    second = {"choices": [{"index": 0, "text": " 4"}]}
    result = facts_of(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    assert result["responses"] == 2
    assert result["compared_on"] == "text"
    assert result["answer_digest"] == digest_of([" Paris", " 4"])
    swapped = facts_of(json.dumps(second) + "\n" + json.dumps(first))
    assert swapped["answer_digest"] != result["answer_digest"]


def test_empty_answer_and_garbage() -> None:
    result = facts_of(json.dumps({"choices": [{"index": 0, "text": "", "token_ids": []}]}))
    assert result["empty_answers"] == 1
    garbage = facts_of("<html>502 Bad Gateway</html>")
    assert garbage["answers"] == [] and garbage["warnings"] and garbage["answered"] is False
    assert facts_of("")["warnings"] == []


def test_collector_declarations() -> None:
    assert COLLECTOR.kind == "known-answer"
    assert not COLLECTOR.invasive
    assert COLLECTOR.commands[0][-2:] == ("@{probe_file}", "{endpoint}")
    assert COLLECTOR.commands[1][-2:] == ("{probe_body}", "{endpoint}")
    assert DCGM_DRAINED_COLLECTOR.invasive
    assert DCGM_DRAINED_COLLECTOR.commands == (("dcgmi", "diag", "-r", "{dcgm_level}", "--json"),)


# -- loopback replicas ---------------------------------------------------------------------------


@dataclass
class Replica:
    """An OpenAI-compatible /v1/completions server; a faulty one flips the last token of each answer."""

    faulty: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


def answer_ids(prompt: str, faulty: bool) -> list[int]:
    ids = [ord(c) for c in prompt[:6]]
    return ids[:-1] + [ids[-1] + 1] if faulty else ids


def _handler(replica: Replica) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            replica.requests.append(body)
            prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            choices = [
                {
                    "index": i,
                    "text": "".join(chr(t) for t in answer_ids(p, replica.faulty)),
                    "token_ids": answer_ids(p, replica.faulty),
                    "finish_reason": "length",
                }
                for i, p in enumerate(prompts)
            ]
            payload = json.dumps({"object": "text_completion", "model": body["model"], "choices": choices})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload.encode())

        def log_message(self, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def replica_servers(faulty: list[bool]) -> Iterator[list[Replica]]:
    replicas, servers = [], []
    for is_faulty in faulty:
        replica = Replica(faulty=is_faulty)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replica))
        replica.url = f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        replicas.append(replica)
        servers.append(server)
    try:
        yield replicas
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


PROBE = {"model": "probe-model", "prompt": ["The capital", "Fibonacci"], "temperature": 0, "max_tokens": 6, "seed": 0}


class NoRecorder:
    def record_command(self, host: str, kind: str, result: Any, keep_output: bool) -> str | None:
        return None


def probe(url: str, **params: Any) -> dict[str, Any]:
    run = collect_on(LocalTransport(), COLLECTOR, NoRecorder(), RunOptions(params={"endpoint": url, **params}))
    assert run.status == "ok", run.reason
    assert run.facts is not None
    return run.facts


def test_probe_against_loopback_replicas_one_answers_differently(tmp_path: Path) -> None:
    body = json.dumps(PROBE)
    with replica_servers([False, False, True]) as replicas:
        results = [probe(r.url, probe_body=body) for r in replicas]
        probe_file = tmp_path / "probe.json"
        probe_file.write_text(body)
        from_file = probe(replicas[0].url, probe_file=str(probe_file))
    good = digest_of([answer_ids("The capital", False), answer_ids("Fibonacci", False)])
    assert [r["answer_digest"] for r in results] == [good, good, results[2]["answer_digest"]]
    assert results[2]["answer_digest"] != good
    assert from_file["answer_digest"] == good
    assert all(req == PROBE for r in replicas for req in r.requests)  # the body arrived unchanged


def test_probe_needs_a_body_and_an_endpoint() -> None:
    run = collect_on(LocalTransport(), COLLECTOR, NoRecorder(), RunOptions(params={"endpoint": "http://x"}))
    assert run.status == "skipped"
    assert "probe_body" in (run.reason or "") and "probe_file" in (run.reason or "")


@pytest.mark.parametrize("endpoint", ["-K/etc/passwd", "--config=x"])
def test_an_endpoint_cannot_become_an_option(endpoint: str) -> None:
    run = collect_on(
        LocalTransport(), COLLECTOR, NoRecorder(), RunOptions(params={"endpoint": endpoint, "probe_body": "{}"})
    )
    assert run.status == "skipped" and not run.attempts
