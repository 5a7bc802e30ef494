"""Hostile deliveries to the receiver (issue 14, items 10, 11, 12, 14, 15 and 19): labels name a host
and nothing else, the route decides format and verification, a delivery is bounded, and a capture
that failed or never ran is never a duplicate, across a SIGTERM of the real `nightowl serve`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.receiver.capture import Capture, run_capture
from nightowl.receiver.config import ConfigError, load_config
from nightowl.receiver.payload import MAX_ALERTS, parse_alertmanager, sign_pagerduty
from nightowl.receiver.queue import JOURNAL, Receiver
from nightowl.receiver.rules import check_host_name, render_host, split_host_template
from tests.postmortem.bundles import ALERTS, HOSTS
from tests.receiver.test_serve import (
    SECRET,
    TOKEN,
    bundles,
    local_rule_config,
    payload,
    serve_factory,
    write_config,
)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    yield from serve_factory(tmp_path)


JUMP_LABEL = "gpu-17?jump=attacker.example&identity=/etc/ssh/ssh_host_ed25519_key"


def ssh_config(tmp_path: Path, host: str = "ssh://root@{{ labels.Hostname }}") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "ssh-serve.yaml"
    path.write_text(
        f"out: {tmp_path / 'bundles'}\ntoken: {TOKEN}\nrules:\n"
        f"  - {{name: gpu-xid, match: [alertname=GpuXidErrors], runbook: xid, host: {json.dumps(host)}}}\n"
    )
    return path


def alert_with(hostname: str, fingerprint: str = "f00d") -> dict[str, Any]:
    body = payload("alertmanager-xid-firing.json")
    body["alerts"] = [
        {
            **body["alerts"][0],
            "fingerprint": fingerprint,
            "labels": {**body["alerts"][0]["labels"], "Hostname": hostname},
        }
    ]
    return body


def journal(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "bundles" / JOURNAL
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def never_run(capture: Capture, config: Any) -> Capture:
    raise AssertionError(f"nothing may be dialled for {capture.host_spec}")


# --- item 10: a label fills a host name, never a query, port, user or jump ------------------------
def test_a_label_cannot_add_a_jump_host_or_identity(tmp_path: Path) -> None:
    config = load_config(ssh_config(tmp_path))
    alert = parse_alertmanager(alert_with(JUMP_LABEL))[0]
    with pytest.raises(ValueError, match="RFC 1123"):
        render_host(config.rules[0], alert)
    receiver = Receiver(config, run=never_run)
    [capture] = receiver.submit([alert])
    assert capture.status == "not_captured" and "RFC 1123" in str(capture.reason)
    assert capture.host_spec is None and receiver.waiting() == 0
    good = parse_alertmanager(alert_with("gpu-17.corp.example"))[0]
    assert render_host(config.rules[0], good) == "ssh://root@gpu-17.corp.example"


@pytest.mark.parametrize(
    "label", ["gpu-17:2200", "admin@gpu-17", "gpu-17/x", "gpu-17#", "gpu 17", "gpu_17", "-oProxyCommand=x", "local"]
)
def test_a_label_is_a_host_name_only(tmp_path: Path, label: str) -> None:
    config = load_config(ssh_config(tmp_path, "{{ labels.Hostname }}"))  # bare: an ssh_config alias
    with pytest.raises(ValueError):
        render_host(config.rules[0], parse_alertmanager(alert_with(label))[0])


def test_the_template_owns_user_port_and_jump(tmp_path: Path) -> None:
    template = "ssh://ops@{{ labels.Hostname }}.corp.example:2222?jump=bastion.corp.example"
    config = load_config(ssh_config(tmp_path, template))
    rendered = render_host(config.rules[0], parse_alertmanager(alert_with("gpu-17"))[0])
    assert rendered == "ssh://ops@gpu-17.corp.example:2222?jump=bastion.corp.example"
    assert split_host_template(template).suffix == ":2222?jump=bastion.corp.example"
    for outside in (
        "ssh://{{ labels.user }}@gpu-17",
        "ssh://root@gpu-17?jump={{ labels.Hostname }}",
        "ssh://root@gpu-17?identity={{ labels.key }}",
        "replay:/srv/{{ labels.dir }}/gpu-17",
        "ssh://root@{% if true %}gpu-17{% endif %}",
    ):
        with pytest.raises(ConfigError, match="ssh-serve.yaml: rules\\[0\\]"):
            load_config(ssh_config(tmp_path, outside))


def test_ipv6_in_a_url_needs_brackets_around_the_slot(tmp_path: Path) -> None:
    bare = load_config(ssh_config(tmp_path / "a", "ssh://root@{{ labels.Hostname }}")).rules[0]
    # Unbracketed, the last group would read as a port: ssh://root@::1:22 -> host ::1, port 22.
    with pytest.raises(ValueError, match="IPv6"):
        render_host(bare, parse_alertmanager(alert_with("::1:22"))[0])
    bracketed = load_config(ssh_config(tmp_path / "b", "ssh://root@[{{ labels.Hostname }}]:22")).rules[0]
    assert render_host(bracketed, parse_alertmanager(alert_with("fe80::1"))[0]) == "ssh://root@[fe80::1]:22"


# --- item 15: a bad host name is that capture's refusal, never the receiver's crash ----------------
@pytest.mark.parametrize("name", ["gpu-17..corp", ".", "a" * 300, "x" * 64 + ".corp", "gpu-17.", ""])
def test_bad_host_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        check_host_name(name)


def test_bad_host_names_in_one_delivery_leave_the_others_captured(serve: Any, tmp_path: Path) -> None:
    running = serve()
    body = payload("alertmanager-xid-firing.json")
    good = body["alerts"][0]
    bad = [
        {**good, "fingerprint": f"bad{i}", "labels": {**good["labels"], "Hostname": name}}
        for i, name in enumerate(["gpu-17..corp", ".", "a" * 300, JUMP_LABEL])
    ]
    body["alerts"] = [*bad, good]
    status, answer = running.request("POST", "/alertmanager", body)
    assert status == 200 and answer["statuses"] == ["not_captured"] * 4 + ["queued"]
    running.wait_idle()
    assert running.request("GET", "/healthz", token=None)[0] == 200
    refused = [c for c in running.receiver.captures() if c["status"] == "not_captured"]
    assert len(refused) == 4 and all("cannot name the host" in c["reason"] for c in refused)
    assert all(len(c["reason"]) < 400 for c in refused)  # the 300-character label is shortened
    assert len(bundles(tmp_path)) == 1


# --- item 11: the route decides the format and the verification ---------------------------------
def test_an_unsigned_pagerduty_body_on_the_alertmanager_route_is_refused(serve: Any, tmp_path: Path) -> None:
    running = serve()
    raw = (ALERTS / "pagerduty-incident-triggered.json").read_bytes()
    status, answer = running.request("POST", "/alertmanager", raw)  # valid token, no signature
    assert status == 400 and "not an Alertmanager webhook payload" in answer["error"]
    # The other way round: a signed Alertmanager body is not a PagerDuty event either.
    am = json.dumps(payload("alertmanager-xid-firing.json")).encode()
    signed = {"X-PagerDuty-Signature": sign_pagerduty(am, SECRET)}
    assert running.request("POST", "/pagerduty", am, headers=signed)[0] == 400
    assert running.receiver.captures() == [] and bundles(tmp_path) == []


# --- item 12: a delivery is bounded; empty alerts are refused; the answer is counts -----------------
def test_a_megabyte_of_empty_alerts_is_refused_without_a_journal(serve: Any, tmp_path: Path) -> None:
    running = serve()
    raw = b'{"version": "4", "alerts": [' + b",".join([b"{}"] * 300_000) + b"]}"
    assert len(raw) < 1 << 20
    status, answer = running.request("POST", "/alertmanager", raw)
    assert status == 400 and "at most" in answer["error"] and len(json.dumps(answer)) < 400
    few = b'{"version": "4", "alerts": [{}, {"labels": {}}]}'
    status, answer = running.request("POST", "/alertmanager", few)
    assert status == 400 and "alerts[0] is not an alert" in answer["error"]
    assert journal(tmp_path) == [] and running.receiver.captures() == []


def test_the_answer_to_a_full_delivery_is_small(serve: Any, tmp_path: Path) -> None:
    running = serve()
    body = payload("alertmanager-xid-firing.json")
    noise = body["alerts"][2]  # NodeFilesystemAlmostFull: no rule matches it
    big = "x" * 1500  # labels the answer must not echo
    body["alerts"] = [
        {**noise, "fingerprint": f"n{i}", "labels": {**noise["labels"], "big": big}} for i in range(MAX_ALERTS)
    ]
    status, answer = running.request("POST", "/alertmanager", body)
    assert status == 200 and answer["received"] == MAX_ALERTS and answer["counts"] == {"ignored": MAX_ALERTS}
    assert big not in json.dumps(answer) and len(json.dumps(answer)) < 16 * MAX_ALERTS
    assert len(journal(tmp_path)) == MAX_ALERTS
    assert (tmp_path / "bundles" / JOURNAL).stat().st_size < 1500 * MAX_ALERTS  # no label echoed there either
    body["alerts"].append(body["alerts"][0])
    assert running.request("POST", "/alertmanager", body)[0] == 400


# --- item 14: a failed or unfinished capture is never a duplicate -----------------------------------
def test_a_failed_capture_is_not_a_duplicate(serve: Any, tmp_path: Path) -> None:
    attempts: list[str] = []

    def flaky(capture: Capture, config: Any) -> Capture:
        attempts.append(capture.alert.fingerprint)
        if len(attempts) == 1:
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")
        return run_capture(capture, config)

    running = serve(run=flaky)
    body = alert_with("xid79-fallen-off-bus")
    assert running.request("POST", "/alertmanager", body)[1]["statuses"] == ["queued"]
    running.wait_idle()
    assert running.request("POST", "/alertmanager", body)[1]["statuses"] == ["queued"]  # not a duplicate
    running.wait_idle()
    assert [e["status"] for e in journal(tmp_path)] == ["queued", "failed", "queued", "captured"]
    # A restarted receiver reads the journal the same way: captured is a duplicate from now on.
    running.receiver.stop(timeout=5)  # one receiver owns a journal folder at a time
    again = serve(write_config(tmp_path))
    assert again.request("POST", "/alertmanager", body)[1]["statuses"] == ["duplicate"]


def test_queued_captures_survive_a_stop_and_resume(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, workers=1))
    stopped = Receiver(config, run=never_run)  # never started: every admitted capture stays queued
    body = payload("alertmanager-xid-firing.json")
    alerts = parse_alertmanager(body)
    assert [c.status for c in stopped.submit(alerts)] == ["queued", "queued", "ignored"]
    assert stopped.stop(timeout=0.1) == 2
    resumed = Receiver(config)
    resumed.start()
    try:
        assert [c.status for c in resumed.submit(alerts[:2])] == ["duplicate", "duplicate"]  # already queued
        deadline = time.monotonic() + 30
        while len([e for e in journal(tmp_path) if e["status"] == "captured"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        resumed.stop(timeout=10)
    states = {e["id"]: e["status"] for e in journal(tmp_path)}
    assert sorted(states.values()) == ["captured", "captured", "duplicate", "duplicate", "ignored"]
    assert len(bundles(tmp_path)) == 2


SLOW_RUNBOOK = """\
id: slow-capture
title: A capture that takes two seconds (the pause is what SIGTERM interrupts)
entry: collect
nodes:
  collect:
    collect: [dev-shm]
    wait: 2
    next: done
  done:
    verdict: {id: collected, severity: info, action: none, summary: collected}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _post(port: int, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/alertmanager", data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=20) as response:
        return dict(json.loads(response.read()))


def _start_serve(config: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from nightowl.cli.main import main; main()",
            "serve",
            "--config",
            str(config),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
            return process
        except (urllib.error.URLError, OSError):
            if process.poll() is not None:
                raise AssertionError(log.read_text()) from None
            time.sleep(0.1)
    process.kill()
    raise AssertionError("serve did not start: " + log.read_text())


def test_sigterm_keeps_queued_captures_and_a_restart_captures_them(tmp_path: Path) -> None:
    config = local_rule_config(tmp_path, "slow", "slow-capture.yaml", SLOW_RUNBOOK, "workers: 1\nqueue: 8\n")
    body = payload("alertmanager-xid-firing.json")
    body["alerts"] = [{**body["alerts"][0], "fingerprint": f"sig{i}"} for i in range(4)]
    log, port = tmp_path / "serve.log", _free_port()
    first = _start_serve(config, port, log)
    try:
        assert _post(port, body)["statuses"] == ["queued"] * 4
        time.sleep(0.5)  # the one worker is inside the first capture's pause
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=25) == 0
    finally:
        first.kill()
    stderr = log.read_text()
    assert "cannot schedule new futures" not in stderr and "Traceback" not in stderr
    assert "3 capture(s) left queued" in stderr
    last = {e["id"]: e for e in journal(tmp_path)}
    assert sorted(e["status"] for e in last.values()) == ["captured", "queued", "queued", "queued"]  # none lost
    assert len(bundles(tmp_path)) == 1

    second = _start_serve(config, port, log)
    try:
        redelivered = _post(port, body)["statuses"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            last = {e["id"]: e for e in journal(tmp_path) if e["status"] != "duplicate"}
            if [e["status"] for e in last.values()] == ["captured"] * 4:
                break
            time.sleep(0.2)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=25)
    assert [e["status"] for e in last.values()] == ["captured"] * 4, last
    assert sorted(e["fingerprint"] for e in last.values()) == ["sig0", "sig1", "sig2", "sig3"]
    assert len(bundles(tmp_path)) == 4  # each alert captured exactly once, nothing failed
    # The redelivery ran nothing twice: each alert was captured already or is queued from the journal.
    assert redelivered == ["duplicate"] * 4
    assert not [e for e in journal(tmp_path) if e["status"] == "failed"]


# --- item 19: triage --alert is never a false OK ---------------------------------------------------
def test_triage_alert_exits_3_when_a_capture_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "rules.yaml"
    config.write_text(
        "rules:\n  - {name: gpu-xid, match: [alertname=GpuXidErrors], runbook: xid, "
        'host: "ssh://root@{{ labels.Hostname }}"}\n'
    )
    alert = tmp_path / "alert.json"
    alert.write_text(json.dumps(alert_with(JUMP_LABEL)))
    args = ["triage", "--alert", str(alert), "--config", str(config), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, [*args, "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 3
    assert json.loads(result.stdout)["captures"][0]["status"] == "not_captured"
    assert "not_captured" in result.stderr and "RFC 1123" in result.stderr
    only_noise = payload("alertmanager-xid-firing.json")
    only_noise["alerts"] = only_noise["alerts"][2:]  # no rule matches: nothing judged, not healthy
    alert.write_text(json.dumps(only_noise))
    assert CliRunner().invoke(main, args).exit_code == 3


def test_triage_alert_exits_3_when_a_capture_fails_or_its_host_is_unreachable(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: broken\nentry: [unclosed\n")  # found at load, fails when the capture runs
    alert = tmp_path / "alert.json"
    alert.write_text(json.dumps(alert_with("xid79-fallen-off-bus")))
    for runbook, host, status in (
        (broken, f"replay:{HOSTS}/{{{{ labels.Hostname }}}}", "failed"),
        ("xid", f"replay:{tmp_path / 'gone'}/{{{{ labels.Hostname }}}}", "captured"),  # no verdict
        ("xid", f"replay:{HOSTS}/{{{{ labels.Hostname }}}}", "captured"),  # judged: reboot-node
    ):
        config = tmp_path / "rules.yaml"
        config.write_text(
            "rules:\n  - {name: gpu-xid, match: [alertname=GpuXidErrors], "
            f"runbook: {runbook}, host: {json.dumps(host)}}}\n"
        )
        args = ["triage", "--alert", str(alert), "--config", str(config), "--out", str(tmp_path / "out")]
        result = CliRunner().invoke(main, [*args, "--format", "json"], catch_exceptions=False)
        [capture] = json.loads(result.stdout)["captures"]
        assert capture["status"] == status, capture
        expected = 1 if capture.get("verdict") else 3
        assert result.exit_code == expected, result.output
    assert expected == 1  # the last one, on the recorded host, is judged


# --- issue 30, item 17: a label-filled param stays in its template's directory; URLs need consent ----
def _param_rule(params: dict[str, Any], label_urls: tuple[str, ...] = ()) -> Any:
    from nightowl.receiver.rules import Matcher, Rule

    return Rule("r", (Matcher("alertname", "=", "GpuXidErrors"),), "xid", "h", params, False, label_urls)


def _with(**labels: str) -> Any:
    from nightowl.receiver.payload import Alert

    return Alert("alertmanager", "firing", {"alertname": "GpuXidErrors", **labels}, {}, None, None, "f")


@pytest.mark.parametrize(
    "model",
    ["../../etc/shadow", "../../../root/.ssh/id_ed25519", "x/../../../etc/passwd", "../shadow", "a/..\\\\..\\\\b"],
)
def test_a_label_cannot_climb_out_of_a_path_template(model: str) -> None:
    from nightowl.receiver.rules import render_params

    rule = _param_rule({"engine_log_file": "/var/log/{{ labels.model }}.log"})
    with pytest.raises(ValueError, match="engine_log_file"):
        render_params(rule, _with(model=model))


def test_a_label_fills_a_path_inside_the_template_and_a_fixed_url_path() -> None:
    from nightowl.receiver.rules import render_params

    rule = _param_rule(
        {
            "engine_log_file": "/var/log/{{ labels.model }}.log",
            "metrics": "http://gpu-metrics.corp:9400/{{ labels.job }}",
            "since": "-2h",
        }
    )
    got = render_params(rule, _with(model="meta-llama/Llama-3", job="vllm"))
    assert got == {
        "engine_log_file": "/var/log/meta-llama/Llama-3.log",
        "metrics": "http://gpu-metrics.corp:9400/vllm",
        "since": "-2h",
    }
    with pytest.raises(ValueError, match="absolute path"):
        render_params(_param_rule({"engine_log_file": "{{ labels.f }}"}), _with(f="/etc/shadow"))


def test_an_endpoint_comes_from_a_label_only_when_the_rule_allows_it(tmp_path: Path) -> None:
    from nightowl.receiver.rules import render_params

    params = {"endpoint": "{{ labels.endpoint }}"}
    alert = _with(endpoint="http://attacker.example/collect")
    with pytest.raises(ValueError, match="label_urls"):
        render_params(_param_rule(params), alert)
    with pytest.raises(ValueError, match="label_urls"):
        render_params(_param_rule({"endpoint": "http://{{ labels.h }}/v1"}), _with(h="attacker.example"))
    assert render_params(_param_rule(params, ("endpoint",)), alert) == {"endpoint": "http://attacker.example/collect"}
    # Through the receiver: that alert is not captured, with the reason, and the others still are.
    path = ssh_config(tmp_path)
    path.write_text(path.read_text().rstrip("}\n") + ", params: {probe_url: '{{ labels.endpoint }}'}}\n")
    receiver = Receiver(load_config(path), run=never_run)
    [capture] = receiver.submit([_with(Hostname="gpu-17", endpoint="http://attacker.example/")])
    assert capture.status == "not_captured" and "cannot fill the parameters" in str(capture.reason)
    path.write_text(path.read_text().replace("'}}\n", "'}, label_urls: [nope]}\n"))
    with pytest.raises(ConfigError, match="label_urls"):
        load_config(path)
