"""`nightowl triage first-look --replica NAME=URL`: replicas read by URL from this machine, no SSH and no
curl, against loopback stand-ins serving vLLM /metrics (tests/runbooks/firstlook_standins.py: the bucket
bounds and starting counts of recorded vLLM scrapes, fixtures/corpus/serving). Each done-when case of
issue 27 item 3 reaches its verdict; an unprobed stream is "not checked", never an all-clear on it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.runbooks.firstlook_standins import Replica, Window, replicas
from tests.runbooks.record_firstlook_url import FreshReplica

NAMES = ("r1", "r2", "r3")


def healthy() -> dict[str, Replica]:
    return {n: Replica() for n in NAMES}


def first_look(specs: dict[str, Replica], tmp_path: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    with replicas(specs):
        argv = ["triage", "first-look", *[a for n, r in specs.items() for a in ("--replica", f"{n}={r.url}")]]
        argv += ["--param", "window_seconds=0", "--out", str(tmp_path), "--format", "json", *extra]
        result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1, 3), result.output
    return result, json.loads(result.output[: result.output.rindex("}") + 1])


def verdict_of(document: dict[str, Any]) -> dict[str, Any]:
    verdicts = {json.dumps(h["verdict"], sort_keys=True) for h in document["hosts"]}
    assert len(verdicts) == 1  # one verdict for the job
    return document["hosts"][0]["verdict"]


def test_one_down_by_url_only(tmp_path: Path) -> None:
    specs = healthy()
    specs["r2"].health_status = 503
    result, document = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    assert verdict["id"] == "partial-down" and result.exit_code == 1
    assert "r2: 503" in verdict["summary"]
    # xid reads the node: over a URL it is not a command that can run, so no URL's name is a host there
    assert verdict["next"]["runbook"] == "xid" and verdict["next"]["hosts"] == []
    assert "--host r2" not in verdict["next"]["command"] and "--host NODE" in verdict["summary"]
    # what needs the node was not read, and says so; the service is named from /v1/models
    assert (
        "the node of any replica (container state, engine log, GPUs: reached by URL only; add --host)"
        in verdict["summary"]
    )
    assert "image on any replica" not in verdict["summary"]  # no parameter would name it without the node
    assert "Service: Qwen/Qwen2.5-Coder-32B-Instruct" in verdict["summary"]
    bundle = Path(document["bundle"])
    assert (bundle / "hosts" / "r2" / "replica-health.out").read_text().count("nightowl-probe") == 2


def test_replica_refusing_connections_is_down_not_unreachable(tmp_path: Path) -> None:
    specs = healthy()
    with replicas(specs):
        urls = {n: r.url for n, r in specs.items()}
    # the stand-ins are shut down: every connection is refused (curl's exit 7, status 000)
    argv = ["triage", "first-look", *[a for n, u in urls.items() for a in ("--replica", f"{n}={u}")]]
    result = CliRunner().invoke(
        main, [*argv, "--param", "window_seconds=0", "--out", str(tmp_path), "--format", "json"]
    )
    document = json.loads(result.output[: result.output.rindex("}") + 1])
    verdict = verdict_of(document)
    assert verdict["id"] == "all-down" and "r1: connection refused" in verdict["summary"]
    assert all(h["status"] == "ok" for h in document["hosts"])


def test_all_down_after_a_deploy_dates_it_from_the_start_times(tmp_path: Path) -> None:
    specs: dict[str, Replica] = {n: FreshReplica(240, health_status=503) for n in NAMES}
    _, document = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    assert verdict["id"] == "all-down-after-change" and verdict["action"] == "reconfigure"
    assert "restarted: r1, r2, r3" in verdict["summary"]
    started = min(r.started for r in specs.values())  # type: ignore[attr-defined]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    assert f"Since {stamp} (the engine process on r1" in verdict["summary"]
    assert "process_start_time_seconds in /metrics" in verdict["summary"]


def test_restart_before_the_first_scrape_is_seen(tmp_path: Path) -> None:
    specs = healthy()
    specs["r3"] = FreshReplica(90)
    _, document = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    assert verdict["id"] == "replica-restarted" and verdict["next"]["hosts"] == []  # engine-start needs the node
    assert "r3 was reached by URL only: run it with --host NODE" in verdict["summary"]
    assert "its engine process started just before the look: r3 1.5 min ago" in verdict["summary"]
    assert "Since " in verdict["summary"] and "the engine process on r3 started then" in verdict["summary"]
    # an old start is no restart: the same replicas with a day-old process give the all-clear
    specs = healthy()
    specs["r3"] = FreshReplica(86_400)
    _, document = first_look(specs, tmp_path)
    assert verdict_of(document)["id"] == "all-clear"


def test_kv_cache_full(tmp_path: Path) -> None:
    specs = healthy()
    specs["r2"].windows = [
        Window(),
        Window(kv=0.95, preemptions=4, waiting=6),
        Window(kv=0.98, preemptions=9, waiting=14),
    ]
    _, document = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    assert verdict["id"] == "kv-full" and "r2 KV 98%, 13 preemptions, 14 waiting" in verdict["summary"]


def test_latency_up_on_flat_traffic(tmp_path: Path) -> None:
    specs = healthy()
    specs["r3"].windows = [Window(), Window(), Window(itl=0.3)]
    _, document = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    # p99-regression reads /metrics only: from this machine, at r3's own URL (r3 has no node to run on)
    assert verdict["id"] == "latency-up-flat-traffic" and verdict["next"]["hosts"] == ["local"]
    assert verdict["next"]["params"]["metrics_url"] == f"{specs['r3'].url}/metrics"


def test_traffic_surge(tmp_path: Path) -> None:
    specs = healthy()
    for replica in specs.values():
        replica.windows = [Window(), Window(requests=20), Window(requests=70, waiting=25, ttft=0.06)]
    _, document = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    assert verdict["id"] == "traffic-surge" and "210 requests in the last window against 60" in verdict["summary"]


def test_stream_without_done_probed(tmp_path: Path) -> None:
    specs = healthy()
    specs["r1"].stream_done = False
    _, document = first_look(specs, tmp_path, "--param", "stream_probe=true")
    verdict = verdict_of(document)
    assert verdict["id"] == "stream-broken" and "on r1 never ended" in verdict["summary"]
    assert "streamed answers (no stream probe" not in verdict["summary"]
    assert document["hosts"][0]["path"][:2] == ["stream-gate", "alive-and-stream"]  # probed with the first scrape


def test_unprobed_stream_is_not_checked_in_verdict_and_status_update(tmp_path: Path) -> None:
    specs = healthy()
    specs["r1"].stream_done = False  # broken, but no probe was sent: the look must not vouch for it
    result, document = first_look(specs, tmp_path, "--status-update")
    verdict = verdict_of(document)
    assert verdict["id"] == "all-clear"
    first_sentence = verdict["summary"].split(". ")[0]
    assert "streamed answers not checked" in first_sentence
    assert "Not checked: streamed answers (no stream probe: pass --param stream_probe=true)" in verdict["summary"]
    update = (Path(document["bundle"]) / "status-update.md").read_text()
    assert "streamed answers not checked" in update


def test_only_get_and_only_the_replicas_own_urls(tmp_path: Path) -> None:
    """The transport refuses what the serving collectors do not send: another program, another host,
    a body from anything but the stream probe."""
    from nightowl.transports.http import HttpTransport

    specs = healthy()
    with replicas(specs):
        transport = HttpTransport("r1", specs["r1"].url)
        ok = transport.run(("curl", "-sS", "--fail", "--max-time", "5", "--", f"{specs['r1'].url}/v1/models"), 5)
        other = transport.run(("curl", "-sS", "--", f"{specs['r2'].url}/metrics"), 5)
        post = transport.run(("curl", "-sS", "--data-binary", "{}", "--", f"{specs['r1'].url}/v1/completions"), 5)
        shell = transport.run(("docker", "inspect", "vllm"), 5)
        local = transport.run(("curl", "-sS", "--data-binary", "@/etc/passwd", "--", f"{specs['r1'].url}/x"), 5)
    assert ok.ok and json.loads(ok.stdout)["data"][0]["id"] == "Qwen/Qwen2.5-Coder-32B-Instruct"
    for refused in (other, post, shell, local):
        assert refused.rc is None and refused.error and refused.error.startswith("refused over --replica")
    assert "needs the node" in (shell.error or "")


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "gopher://x", "http://", "ftp://h/x", "http://h/ x", "http://u:secret@h:8000"]
)
def test_replica_urls_are_checked(tmp_path: Path, url: str) -> None:
    result = CliRunner().invoke(main, ["triage", "first-look", "--replica", f"r1={url}", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "r1" in result.output


def test_replicas_from_an_inventory_group(tmp_path: Path) -> None:
    """An Ansible group whose hosts carry a url (nightowl_labels); hosts of other groups are left out."""
    specs = healthy()
    specs["r2"].health_status = 503
    with replicas(specs):
        inventory = tmp_path / "replicas.yaml"
        lines = ["serving:", "  hosts:"]
        lines += [f"    {n}: {{nightowl_labels: {{url: '{r.url}'}}}}" for n, r in specs.items()]
        lines += ["batch:", "  hosts:", "    b1: {nightowl_labels: {url: 'http://127.0.0.1:9'}}"]
        inventory.write_text("\n".join(lines) + "\n")
        argv = ["triage", "first-look", "--replica-inventory", str(inventory), "--replica-group", "serving"]
        argv += ["--param", "window_seconds=0"]
        result = CliRunner().invoke(main, [*argv, "--out", str(tmp_path), "--format", "json"])
    document = json.loads(result.output[: result.output.rindex("}") + 1])
    assert [h["host"] for h in document["hosts"]] == list(NAMES)
    assert verdict_of(document)["id"] == "partial-down"
