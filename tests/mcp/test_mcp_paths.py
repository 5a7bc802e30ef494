"""Issue "trust, round four", item 3: with ``read_roots`` set, no runbook parameter makes the MCP server read
a file outside them. Every ``path`` parameter of every runbook (and the ``:``-lists a command splits) is
refused outside the roots on ``local``, through ``..`` or a symlink inside a root, allowed inside, and refused
on a remote host; ``parse`` echoes no text of a file outside them. In-process, with a run hook that records
the request instead of running it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from nightowl.mcp.config import ServerConfig
from nightowl.mcp.hooks import RunRequest, ToolError
from nightowl.mcp.paths import check_path_params, host_read, path_params
from nightowl.mcp.schemas import runbook_parameters
from nightowl.mcp.tools import Toolbox, upload_params

ROOT = Path(__file__).resolve().parents[2]
XID79 = ROOT / "fixtures" / "hosts" / "xid79-fallen-off-bus"
RUNBOOKS = runbook_parameters()
# (runbook, parameter) for every parameter a runbook declares that names a file
PATH_PARAMS = sorted((rb, name) for rb, info in RUNBOOKS.items() for name in path_params(info["parameters"], RUNBOOKS))
REMOTE = "ssh://root@gpu-17:22"


class Recorder:
    def __init__(self) -> None:
        self.requests: list[RunRequest] = []

    def __call__(self, request: RunRequest) -> dict[str, Any]:
        self.requests.append(request)
        return {"runbook": request.loaded.id, "run_id": "r", "bundle": None, "hosts": []}


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "inside.log").write_text("NCCL INFO fine\n")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "shadow").write_text("root:$6$HASHED-SECRET-LINE:19000:0:99999:7:::\n")
    os.symlink(secret / "shadow", allowed / "link-out.log")
    return {"allowed": allowed, "secret": secret / "shadow", "out": tmp_path / "bundles"}


def toolbox(tree: dict[str, Path], hosts: tuple[str, ...] = ("local",)) -> tuple[Toolbox, Recorder]:
    recorder = Recorder()
    config = ServerConfig(hosts=hosts, read_roots=(tree["allowed"],))
    return Toolbox(recorder, config, out_dir=tree["out"]), recorder


def triage(box: Toolbox, runbook: str, params: dict[str, Any], hosts: list[str]) -> dict[str, Any]:
    return box.call("triage", {"runbook": runbook, "hosts": hosts, "params": params})


def test_the_path_parameters_are_found_from_the_declarations() -> None:
    found = {name for _, name in PATH_PARAMS}
    # the ones issue 42 names, found without a list of them here
    assert {"engine_log_file", "nccl_log", "nccl_tests_file", "model_config", "xid_policy", "space_path"} <= found
    assert "space_paths" in found  # a ":"-list of paths the free-space script reads
    # a parameter a runbook newly declares `type: path` is held to the roots with no change to the server
    assert ("first-look", "engine_log_file") in PATH_PARAMS  # declared `yaml` there (a file, or host -> file)
    config = ServerConfig(hosts=("local",), read_roots=(ROOT / "runbooks",))
    declared = {"brand-new": {"parameters": {"brand_new_log": {"type": "path", "default": None, "description": ""}}}}
    assert path_params(declared["brand-new"]["parameters"], declared) == {"brand_new_log"}
    with pytest.raises(ToolError, match="brand_new_log.*outside the folders"):
        check_path_params(config, declared, "brand-new", {"brand_new_log": "/etc/hostname"}, ["local"], None)


# Programs of the read-only shapes that read the file named after "--"; sh scripts that hand their arguments
# to one of them; "@file" (curl's data from a file).
FILE_READERS = frozenset({"cat", "tail", "head", "df", "stat", "grep", "zcat", "less", "wc", "od", "xxd"})
_READS_IN_SCRIPT = re.compile(r"(?<![-\w])(cat|tail|head|df|stat|grep)\s")


def file_operands() -> set[str]:
    from nightowl.collectors.readonly import ALLOWED

    found: set[str] = set()
    for shape in ALLOWED:
        names = [re.findall(r"\{(\w+)\}", element) for element in shape]
        found |= {n for element, ns in zip(shape, names, strict=True) if element.startswith("@") for n in ns}
        if shape[0] in FILE_READERS and "--" in shape:
            found |= {n for ns in names[shape.index("--") + 1 :] for n in ns}
        if shape[:2] == ("sh", "-c") and _READS_IN_SCRIPT.search(shape[2]) and "docker logs" not in shape[2]:
            found |= {n for ns in names[3:] for n in ns}
    return found


def test_every_file_a_command_shape_reads_from_a_parameter_is_a_path_parameter() -> None:
    """A new collector command reading a file named by a parameter fails here until that parameter is declared
    `type: path` (or is a ':'-list the server splits): else a model could point it anywhere."""
    operands = file_operands()
    assert {"engine_log_file", "nccl_log", "space_paths", "probe_file"} <= operands  # the scan finds them
    assert operands <= host_read()
    for runbook, info in RUNBOOKS.items():
        declared = set(info["parameters"])
        missing = (operands & declared) - path_params(info["parameters"], RUNBOOKS)
        assert not missing, f"{runbook}: {sorted(missing)} read as files by a command but not checked"


@pytest.mark.parametrize(("runbook", "name"), PATH_PARAMS)
def test_a_path_parameter_outside_the_roots_is_refused_inside_allowed(
    tree: dict[str, Path], runbook: str, name: str
) -> None:
    box, recorder = toolbox(tree)
    allowed = tree["allowed"]
    outside = [
        str(tree["secret"]),
        f"{allowed}/../secret/shadow",  # ".." normalised
        str(allowed / "link-out.log"),  # a symlink inside a root, pointing out
    ]
    if name in ("space_path", "space_paths"):
        outside.append(f"{allowed}:{tree['secret'].parent}")  # the free-space script splits on ":"
    for value in outside:
        with pytest.raises(ToolError, match=f"parameter {name}: .*outside the folders"):
            triage(box, runbook, {name: value}, ["local"])
    assert not recorder.requests, "a refused call reached the run path"
    inside = str(allowed / "inside.log")
    if name in upload_params():
        with pytest.raises(ToolError, match="refused on live hosts"):  # sent to a URL: refused wherever it is
            triage(box, runbook, {name: inside}, ["local"])
        return
    triage(box, runbook, {name: inside}, ["local"])
    assert recorder.requests[-1].params[name] == inside


@pytest.mark.parametrize(("runbook", "name"), PATH_PARAMS)
def test_on_a_remote_host_a_file_the_host_reads_is_refused(tree: dict[str, Path], runbook: str, name: str) -> None:
    """nightowl cannot resolve a path on another machine against the roots: a file a collector reads there
    is refused; a file nightowl reads itself (a policy, a model config) is held to the roots as on local."""
    box, recorder = toolbox(tree, hosts=(REMOTE,))
    inside = str(tree["allowed"] / "inside.log")
    if name in host_read():
        with pytest.raises(ToolError, match=f"parameter {name} names a file on the live host"):
            triage(box, runbook, {name: inside}, [REMOTE])
        assert not recorder.requests
        return
    triage(box, runbook, {name: inside}, [REMOTE])
    with pytest.raises(ToolError, match="outside the folders"):
        triage(box, runbook, {name: str(tree["secret"])}, [REMOTE])


def test_a_file_nightowl_reads_itself_is_held_to_the_roots_on_a_replay_too(tree: dict[str, Path]) -> None:
    box, recorder = toolbox(tree)
    replay = tree["allowed"] / "host"
    replay.mkdir()
    arguments = {"runbook": "xid", "replay": [str(replay)], "params": {"xid_policy": str(tree["secret"])}}
    with pytest.raises(ToolError, match="parameter xid_policy: .*outside the folders"):
        box.call("triage", arguments)
    # a file only a live host's command would read is not read from a replay: nothing to refuse
    log = {"runbook": "engine-start", "replay": [str(replay)], "params": {"engine_log_file": str(tree["secret"])}}
    box.call("triage", log)
    assert recorder.requests[-1].replays == (replay,)


def test_without_read_roots_the_documented_default_holds(tree: dict[str, Path]) -> None:
    recorder = Recorder()
    box = Toolbox(recorder, ServerConfig(hosts=("local", REMOTE)), out_dir=tree["out"])
    params = {"engine_log_file": str(tree["secret"])}
    box.call("triage", {"runbook": "engine-start", "hosts": ["local", REMOTE], "params": params})
    assert recorder.requests[-1].params == params


def test_parse_echoes_no_text_of_a_file_outside_the_roots(tree: dict[str, Path]) -> None:
    box, _ = toolbox(tree)
    for path in (tree["secret"], tree["allowed"] / "link-out.log", tree["allowed"] / ".." / "secret" / "shadow"):
        for kind in ("kernel-log", "engine-log", "nccl-log"):
            with pytest.raises(ToolError) as caught:
                box.call("parse", {"kind": kind, "path": str(path)})
            assert "HASHED-SECRET" not in str(caught.value)
    answer = box.call("parse", {"kind": "nccl-log", "path": str(tree["allowed"] / "inside.log")})
    assert answer["result"]["kind"] == "nccl-log"


def test_parse_holds_what_it_opened_to_the_roots(tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder on the way swapped for a symlink out between the check and the open: what was opened is
    checked again by its real name."""
    box, _ = toolbox(tree)
    swap = tree["allowed"] / "swap"
    swap.mkdir()
    (swap / "shadow").write_text("inside\n")
    real_check = Toolbox._readable
    checks: list[str] = []

    def check_then_swap(self: Toolbox, given: str) -> Path:
        checks.append(given)
        found = real_check(self, given)
        if len(checks) == 1:  # after the first check, before the open
            swap.rename(swap.with_name("gone"))
            os.symlink(tree["secret"].parent, swap)
        return found

    monkeypatch.setattr(Toolbox, "_readable", check_then_swap)
    with pytest.raises(ToolError, match="outside the folders") as caught:
        box.call("parse", {"kind": "kernel-log", "path": str(swap / "shadow")})
    assert "HASHED-SECRET" not in str(caught.value) and len(checks) == 2


def test_a_replayed_bundle_whose_host_folder_leads_out_is_refused(tree: dict[str, Path]) -> None:
    box, recorder = toolbox(tree)
    bundle = tree["allowed"] / "bundle"
    (bundle / "hosts").mkdir(parents=True)
    (bundle / "hosts" / "gpu-01").mkdir()
    box.call("triage", {"runbook": "xid", "replay": [str(bundle)]})
    os.symlink(tree["secret"].parent, bundle / "hosts" / "gpu-02")  # recordings read from outside the roots
    with pytest.raises(ToolError, match="outside the folders"):
        box.call("triage", {"runbook": "xid", "replay": [str(bundle)]})
    other = tree["allowed"] / "other"
    other.mkdir()
    os.symlink(tree["secret"].parent, other / "hosts")
    with pytest.raises(ToolError, match="outside the folders"):
        box.call("triage", {"runbook": "xid", "replay": [str(other)]})
    assert len(recorder.requests) == 1
