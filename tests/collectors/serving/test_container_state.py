"""container-state collector: real docker inspect / kubectl pod outputs, and the 137 rules."""

from __future__ import annotations

import json

from nightowl.collectors.serving.container_state import COLLECTOR, facts, parse
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"

# docker inspect of an exited webui container, pasted in AbdBarho/stable-diffusion-webui-docker#457
# (the paste is cut after HostsPath, so it is not complete JSON).
DOCKER_INSPECT_CUT = """\
docker inspect c35e838c9646ec13d3120dc96b930068b8afd4f20b9481bbdbddf01cffb4c1ca
[
    {
        "Id": "c35e838c9646ec13d3120dc96b930068b8afd4f20b9481bbdbddf01cffb4c1ca",
        "Created": "2023-05-08T07:32:59.13549732Z",
        "Path": "/docker/entrypoint.sh",
        "Args": [
            "/bin/sh",
            "-c",
            "python -u webui.py --listen --port 7860 ${CLI_ARGS}"
        ],
        "State": {
            "Status": "exited",
            "Running": false,
            "Paused": false,
            "Restarting": false,
            "OOMKilled": false,
            "Dead": false,
            "Pid": 0,
            "ExitCode": 137,
            "Error": "",
            "StartedAt": "2023-05-08T08:03:05.553904873Z",
            "FinishedAt": "2023-05-08T08:05:05.514785974Z"
        },
        "Image": "sha256:5f11d9aad2138498dc34135e99907ee1eb6499f35d57db82e6f4b64acfa88feb",
        "ResolvConfPath": "/var/lib/docker/containers/c35e838c9646ec13d3120dc96b930068b8afd4f20b9481bbdbddf01cffb4c1ca/\
resolv.conf",
"""  # the \ joins the long path back into one line


def test_docker_state_block_exit_137_without_oom_flag() -> None:
    # docker/cli#2665: "OOMKilled": false, "ExitCode": 137, "Status": "exited"
    result = facts(parse((HOSTS / "oom-docker-exit137-no-oom-flag" / "container-state.out").read_text()))
    assert result["source"] == "docker"
    assert (result["oom_killed"], result["exit_code"], result["running"]) == (False, 137, False)
    assert result["sigkilled"] is True and result["external_kill"] is True
    assert result["finished_at"] == "2020-07-31T22:28:17.557863Z"


def test_kubernetes_pod_last_state_oomkilled() -> None:
    # kubeshark worker: lastState.terminated reason OOMKilled, exitCode 137, restartCount 1, running again
    result = facts(parse((HOSTS / "oom-k8s-pod-oomkilled" / "container-state.out").read_text()))
    assert result["source"] == "kubernetes" and result["name"] == "kubeshark-worker"
    assert (result["oom_killed"], result["exit_code"], result["restart_count"]) == (True, 137, 1)
    assert result["reason"] == "OOMKilled" and result["running"] is True
    assert result["external_kill"] is False and result["warnings"] == []


def test_cut_docker_inspect_is_read_field_by_field() -> None:
    result = facts(parse(DOCKER_INSPECT_CUT))
    assert (result["oom_killed"], result["exit_code"], result["reason"]) == (False, 137, "exited")
    assert result["external_kill"] is True
    assert result["warnings"] == ["output is not complete JSON: read field by field"]


def test_full_docker_inspect_array_with_oom_kill() -> None:
    document = [
        {
            "Name": "/vllm",
            "RestartCount": 3,
            "State": {"Status": "exited", "Running": False, "OOMKilled": True, "ExitCode": 137},
        }
    ]
    result = facts(parse(json.dumps(document, indent=4)))
    assert (result["name"], result["oom_killed"], result["restart_count"]) == ("vllm", True, 3)
    assert result["external_kill"] is False and result["sigkilled"] is True


def test_pod_picks_the_container_that_was_killed() -> None:
    pod = {
        "kind": "Pod",
        "status": {
            "containerStatuses": [
                {"name": "sidecar", "restartCount": 0, "state": {"running": {}}},
                {
                    "name": "vllm",
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 137}},
                },
            ]
        },
    }
    result = facts(parse(json.dumps(pod)))
    assert (result["name"], result["exit_code"], result["restart_count"]) == ("vllm", 137, 4)
    assert result["oom_killed"] is False and result["external_kill"] is True
    assert [c["name"] for c in result["containers"]] == ["sidecar", "vllm"]


def test_clean_exit_is_not_a_kill() -> None:
    pod = {
        "status": {
            "containerStatuses": [
                {"name": "a", "restartCount": 0, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}
            ]
        }
    }
    result = facts(parse(json.dumps(pod)))
    assert result["exit_code"] == 0 and result["sigkilled"] is False and result["external_kill"] is False


def test_unreadable_input_never_raises() -> None:
    for text in ("", "Error: No such object: vllm", "{not json", "[1, 2]", '{"items": [null]}'):
        result = facts(parse(text))
        assert result["kind"] == "container-state" and result["oom_killed"] is None


def test_collector_declaration() -> None:
    assert COLLECTOR.kind == "container-state" and COLLECTOR.invasive is False
    assert COLLECTOR.commands[0] == ("docker", "inspect", "--", "{container}")
    assert COLLECTOR.commands[1][:4] == ("kubectl", "get", "pod", "{pod}")
