"""Secrets never enter a bundle; `--redact` leaves no host name, IP, serial or GPU UUID in a draft."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.postmortem_cmd import postmortem
from nightowl.engine.bundle_writer import BundleWriter
from nightowl.receiver.payload import parse_payload
from nightowl.redact import MASK, Redactor, scrub_secrets
from tests.postmortem.bundles import ALERTS, HOSTS, make_bundle
from tests.postmortem.test_serving_draft import serving_bundle

SECRET_CASES = [
    (
        "curl -H 'Authorization: Bearer eyJhbGciOi.abc.def' http://10.0.0.1/metrics",
        "curl -H 'Authorization: [REDACTED]' http://10.0.0.1/metrics",
    ),
    ('{"Authorization": "Basic dXNlcjpwYXNz"}', '{"Authorization": "[REDACTED]"}'),
    ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "HF_TOKEN=[REDACTED]"),
    ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AWS_ACCESS_KEY_ID=[REDACTED]"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=[REDACTED]"),
    (
        "vllm serve meta-llama/Llama-3.1-8B --api-key sk-local-1234 --port 8000",
        "vllm serve meta-llama/Llama-3.1-8B --api-key [REDACTED] --port 8000",
    ),
    ("text-generation-launcher --api-key=abc123", "text-generation-launcher --api-key=[REDACTED]"),
    ("postgres://svc:hunter2@db:5432/x password=hunter2", "postgres://svc:[REDACTED]@db:5432/x password=[REDACTED]"),
    (
        "non-default args: {'api_key': 'abc123', 'model': 'x'}",
        "non-default args: {'api_key': '[REDACTED]', 'model': 'x'}",
    ),
    ("DB_PASSWORD: 'p@ss word'", "DB_PASSWORD: '[REDACTED]'"),
    ("password=[hunter2]", "password=[REDACTED]"),  # whole, no stray "]"
    ("opts: {password=[hunter2], user=x}", "opts: {password=[REDACTED], user=x}"),
    # pod env (kubectl get pod -o json / -o yaml), either field order
    ('{"name": "API_KEY", "value": "abc123"}', '{"name": "API_KEY", "value": "[REDACTED]"}'),
    (
        '"env": [\n  {\n    "name": "HF_TOKEN",\n    "value": "hf_notAshape"\n  }\n]',
        '"env": [\n  {\n    "name": "HF_TOKEN",\n    "value": "[REDACTED]"\n  }\n]',
    ),
    ("env:\n- name: DB_PASSWORD\n  value: hunter2\n", "env:\n- name: DB_PASSWORD\n  value: [REDACTED]\n"),
    ('{"value": "abc123", "name": "WANDB_API_KEY"}', '{"value": "[REDACTED]", "name": "WANDB_API_KEY"}'),
    # argv lists (pod args, container inspect), JSON or YAML
    ('"args": ["--api-key", "abc123", "--port", "8000"]', '"args": ["--api-key", "[REDACTED]", "--port", "8000"]'),
    ("['--hf-token', 'abc123']", "['--hf-token', '[REDACTED]']"),
    ("args:\n- --api-key\n- abc123\n- --port\n", "args:\n- --api-key\n- [REDACTED]\n- --port\n"),
]
KEPT = [
    "Maximum concurrency for 4096 tokens per request: 12.5x",
    "max_num_batched_tokens=8192, tokenizer_mode=auto",
    "PWD=/root\nHOME=/root",
    "api_key=None",  # says no key is set; nothing to hide
    "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    '{"name": "MODEL_NAME", "value": "meta-llama/Llama-3.1-8B"}',  # not a secret's name
    '"args": ["--port", "8000", "--max-num-batched-tokens", "8192"]',
]


@pytest.mark.parametrize(("raw", "scrubbed"), SECRET_CASES)
def test_scrub_secrets(raw: str, scrubbed: str) -> None:
    assert scrub_secrets(raw) == scrubbed
    assert scrub_secrets(scrubbed) == scrubbed  # idempotent


@pytest.mark.parametrize("text", KEPT)
def test_scrub_keeps_what_is_not_a_secret(text: str) -> None:
    assert scrub_secrets(text) == text


def test_bundle_outputs_are_scrubbed(tmp_path: Path) -> None:
    host = tmp_path / "hosts" / "leaky"
    host.mkdir(parents=True)
    (host / "kernel-log.out").write_text(
        (HOSTS / "xid79-fallen-off-bus" / "kernel-log.out").read_text()
        + "Apr 5 21:30:00 leaky sudo: HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345\n"
    )
    bundle = make_bundle(tmp_path / "out", ["leaky"], host_root=tmp_path / "hosts")
    stored = (bundle / "hosts" / "leaky" / "kernel-log.out").read_text()
    assert "hf_AbCd" not in stored and f"HF_TOKEN={MASK}" in stored and "Xid (PCI:0000:a1:00): 79" in stored


@pytest.mark.parametrize(("raw", "scrubbed"), SECRET_CASES)
def test_a_document_holding_a_secret_anywhere_is_scrubbed(raw: str, scrubbed: str, tmp_path: Path) -> None:
    document = {"hosts": [{"facts": {"lines": ['say "hi"\n\t' + raw + " \u00e9"]}}]}
    writer = BundleWriter(tmp_path, "r", redact=scrub_secrets)
    writer._write_json("doc.json", document)
    stored = json.loads((writer.tmp_path / "doc.json").read_text())
    assert stored["hosts"][0]["facts"]["lines"][0] == scrub_secrets(document["hosts"][0]["facts"]["lines"][0])
    assert MASK in stored["hosts"][0]["facts"]["lines"][0]


@pytest.mark.parametrize("text", KEPT)
def test_every_string_of_a_document_is_scrubbed_and_a_clean_one_kept(text: str, tmp_path: Path) -> None:
    """No prefilter decides that a document is clean: every string goes through ``redact``, one without a secret
    comes out as it was."""
    seen: list[str] = []

    def spy(value: str) -> str:
        seen.append(value)
        return scrub_secrets(value)

    writer = BundleWriter(tmp_path, "r", redact=spy)
    writer._write_json("doc.json", {"line": text, "n": 1})
    assert json.loads((writer.tmp_path / "doc.json").read_text()) == {"line": text, "n": 1}
    assert seen == [text]


def test_redactor_is_consistent_and_leaves_pci_and_times() -> None:
    redactor = Redactor()
    redactor.learn_hosts(["ssh://root@gpu-17.corp.internal:22"])
    text = (
        "Dec  2 11:38:27 worker4 kernel: NVRM: GPU 0000:0a:00.0 at 10.1.2.3 and fe80::1%eth0\n"
        "gpu-17 gpu-17.corp.internal worker4 10.1.2.3 GPU-979426f2-893a-7cbb-c4cf-81472f89a462\n"
        "GPU Board Serial Number: 1653723052734 at 21:29:39\n"
    )
    out = redactor.apply(text)
    for original in ("worker4", "gpu-17", "10.1.2.3", "fe80::1", "979426f2", "1653723052734"):
        assert original not in out
    assert out.count(redactor.mapping["worker4"]) == 2 and out.count(redactor.mapping["10.1.2.3"]) == 2
    assert "0000:0a:00.0" in out and "21:29:39" in out and "11:38:27" in out
    assert redactor.apply("again worker4") == f"again {redactor.mapping['worker4']}"  # same placeholder later


def test_redacted_drafts_name_no_host_ip_or_serial(tmp_path: Path) -> None:
    alert = parse_payload(json.loads((ALERTS / "alertmanager-xid-firing.json").read_text()))[0].record()
    alert.update(
        received_at=time.time(),
        rule="gpu-xid",
        runbook="xid",
        host="xid79-fallen-off-bus",
        host_spec="ssh://root@xid79-fallen-off-bus",
    )
    hosts = ["xid79-fallen-off-bus", "xid48-xid64-dbe", "xid94-contained", "xid79-sxid20034"]
    gpu_bundle = make_bundle(tmp_path / "gpu", hosts, extra_manifest={"alert": alert})
    serving = serving_bundle(tmp_path / "serving")
    originals = [
        *hosts,
        "tgi-node-3",
        "10.42.3.17",
        "10.42.7.4",
        "10.20.0.8",
        "worker4",
        "node4",
        "1653723052734",
        "979426f2-893a-7cbb-c4cf-81472f89a462",
        "b6c3b2be-c55b-d076-fa0e-d464e4c7e08b",
        "prometheus-0.monitoring.svc",
        "alertmanager.monitoring.svc",
    ]
    for bundle in (gpu_bundle, serving):
        plain = CliRunner().invoke(postmortem, [str(bundle)]).output
        assert any(o in plain for o in originals)  # there was something to hide
        for fmt in ("md", "html"):
            redacted = CliRunner().invoke(postmortem, [str(bundle), "--redact", "--format", fmt]).output
            leaks = [o for o in originals if o.lower() in redacted.lower()]
            assert leaks == [], f"{fmt}: {leaks}"
            assert re.search(r"\bhost-\d+\b", redacted)
    redacted = CliRunner().invoke(postmortem, [str(gpu_bundle), "--redact"]).output
    plain = CliRunner().invoke(postmortem, [str(gpu_bundle)]).output
    # Same host, same placeholder: every mention of the first host became one placeholder.
    first = re.search(r"- \*\*(host-\d+)\*\*", redacted).group(1)  # type: ignore[union-attr]
    assert redacted.count(first) >= plain.count("xid79-fallen-off-bus") > 3
    assert "10.42.3.17" in plain and "ip-" in redacted
