"""Regression tests for the misses the fifth field set showed (fixtures/field/gpu-5, serving-5, network-5;
issue "never cry wolf"). Each test is built on the format family the miss belongs to, in several shapes:

- a collector's "shows nothing" check reads the output as its parser does (through the normaliser), so a
  table quoted with ``> `` is a table, not "nothing to read";
- NCCL's IB async-event warnings that report subnet management (client reregistration, LID/SM/P_Key/GID
  changes, port active) are no failure; a port error or a catastrophic error still is;
- NVML's "GPU access blocked by the operating system" (WSL 2 / Hyper-V) is the host's configuration,
  not a node to reboot;
- an engine that cannot split the model over its tensor-parallel size (heads not divisible) is a
  configuration error;
- a port in the Init/Armed state has its physical link up even where the tool prints no physical state
  (``ibv_devinfo`` without ``-v``), so it reads as "not configured by the SM", not as a cable fault;
- a ``--query-gpu`` CSV sampled in a loop without a header counts each GPU once (its bus id or UUID cell).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.collectors import get_collector
from tests.helpers import ROOT, facts_of

HOSTS = ROOT / "fixtures" / "hosts"
TABLE = HOSTS / "preflight-a100-sxm-x4" / "nvidia-smi.out"  # a default table view of four GPUs


def _verdict(tmp_path: Path, runbook: str, base: str, files: dict[str, str], *params: str) -> dict[str, object]:
    host = tmp_path / "host"
    if base:
        shutil.copytree(HOSTS / base, host)
    else:
        host.mkdir()
    for name, text in files.items():
        (host / name).write_text(text)
    args = ["triage", runbook, "--replay", str(host), "--format", "json", "--out", str(tmp_path / "out")]
    for param in params:
        args += ["--param", param]
    result = CliRunner().invoke(main, args)
    (entry,) = json.loads(result.output)["hosts"]
    return entry.get("verdict") or {"action": "cannot-judge", "error": entry.get("error")}


# ---- "shows nothing" reads the normalised output ---------------------------------------------------------


@pytest.mark.parametrize("mark", ["> ", ">", "    ", "# "])
def test_a_quoted_or_indented_table_is_not_an_empty_output(mark: str) -> None:
    text = TABLE.read_text()
    wrapped = "".join(mark + line + "\n" for line in text.splitlines())
    collector = get_collector("nvidia-smi")
    assert collector.shows_nothing is not None
    assert not collector.shows_nothing(text)
    assert not collector.shows_nothing(wrapped)
    assert facts_of("nvidia-smi", wrapped)["gpu_count"] == facts_of("nvidia-smi", text)["gpu_count"] == 4


def test_a_quoted_table_is_judged_by_node_health_not_cannot_judge(tmp_path: Path) -> None:
    quoted = "".join("> " + line + "\n" for line in TABLE.read_text().splitlines())
    verdict = _verdict(tmp_path, "node-health", "healthy-l40s", {"nvidia-smi.out": quoted})
    assert verdict["action"] != "cannot-judge", verdict


def test_every_shows_nothing_reads_through_the_normaliser() -> None:
    from nightowl.collectors import available_kinds

    collectors = [get_collector(kind) for kind in available_kinds()]
    checks = [c for c in collectors if getattr(c, "shows_nothing", None) is not None]
    assert checks and all(getattr(c.shows_nothing, "strips_escapes", False) for c in checks)


# ---- NCCL: IB subnet events are no failure ---------------------------------------------------------------

INIT = (
    "gpu1:5022:5377 [1] NCCL INFO comm 0x4438f540 rank 1 nranks 2 cudaDev 1 busId 52000 - Init COMPLETE\n"
    "gpu1:5021:5376 [0] NCCL INFO comm 0x453b9880 rank 0 nranks 2 cudaDev 0 busId 4f000 - Init COMPLETE\n\n"
)


@pytest.mark.parametrize(
    "event", ["client reregistration", "LID change", "SM change", "P_key change", "GID table change", "port active"]
)
def test_an_ib_subnet_event_warning_is_no_failure(event: str) -> None:
    log = INIT + f"gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : {event}\n"
    got = facts_of("nccl-log", log)
    assert got["error_kinds"] == [] and got["warnings_unexplained"] == []
    assert got["has_ib_errors"] is False


@pytest.mark.parametrize("event", ["port error", "local catastrophic error"])
def test_an_ib_port_or_device_error_event_stays_a_failure(event: str) -> None:
    log = INIT + f"gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : {event}\n"
    got = facts_of("nccl-log", log)
    assert "ib_async_event" in got["error_kinds"] and got["has_ib_errors"] is True


def test_a_healthy_init_with_a_reregistration_is_no_alarm(tmp_path: Path) -> None:
    log = (
        INIT + "gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : client reregistration\n"
    )
    verdict = _verdict(tmp_path, "nccl-hang", "nccl-healthy-ib", {"nccl-log.out": log}, "nccl_log=/var/log/nccl.log")
    assert verdict["action"] in ("none", "cannot-judge"), verdict


# ---- NVML blocked by the host ----------------------------------------------------------------------------

BLOCKED = (
    "Failed to initialize NVML: GPU access blocked by the operating system\n"
    "Failed to properly shut down NVML: GPU access blocked by the operating system\n"
)


@pytest.mark.parametrize("prompt", ["", "$ nvidia-smi\n", "~> nvidia-smi\n"])
def test_nvml_blocked_by_the_operating_system_is_reconfigure_not_reboot(tmp_path: Path, prompt: str) -> None:
    verdict = _verdict(tmp_path, "node-health", "healthy-l40s", {"nvidia-smi.out": prompt + BLOCKED})
    assert verdict["action"] == "reconfigure" and verdict["id"] == "gpu-access-blocked", verdict


def test_another_nvml_failure_still_reads_as_unreadable_gpus(tmp_path: Path) -> None:
    text = "Unable to determine the device handle for GPU 0000:81:00.0: Unknown Error\n"
    verdict = _verdict(tmp_path, "node-health", "healthy-l40s", {"nvidia-smi.out": text})
    assert verdict["action"] == "reboot-node", verdict


# ---- engines: a model the tensor-parallel size cannot split ----------------------------------------------

TGI = (
    "ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 71 and `num_shards`: 2\n"
    " rank=0\n"
    "2023-12-16T09:36:24.632149Z ERROR text_generation_launcher: Shard 0 failed to start\n"
    "Error: ShardCannotStart\n"
)
VLLM = (
    "ERROR 05-02 10:11:12 engine.py:400] ValueError: Total number of attention heads (40) must be divisible by "
    "tensor parallel size (3).\n"
)


@pytest.mark.parametrize("log", [TGI, VLLM])
def test_heads_not_divisible_by_the_parallel_size_is_a_configuration_error(tmp_path: Path, log: str) -> None:
    assert "parallel-size" in facts_of("engine-log", log)["error_kinds"]
    verdict = _verdict(tmp_path, "engine-start", "", {"engine-log.out": log})
    assert verdict["action"] == "reconfigure" and verdict["id"] == "parallel-size-mismatch", verdict


def test_another_shard_failure_is_not_a_parallel_size_error() -> None:
    log = (
        "ValueError: unsupported dtype\n2023-12-16T09:36:24Z ERROR text_generation_launcher: Shard 0 failed to start\n"
    )
    assert "parallel-size" not in facts_of("engine-log", log)["error_kinds"]


# ---- InfiniBand: Init means the link is up ---------------------------------------------------------------

DEVINFO = (
    "hca_id: mlx5_7\n"
    "        transport:                      InfiniBand (0)\n"
    "        phys_port_cnt:                  1\n"
    "                port:   1\n"
    "                        state:                  {state}\n"
    "                        sm_lid:                 4\n"
    "                        port_lid:               65535\n"
    "                        link_layer:             InfiniBand\n"
)


@pytest.mark.parametrize("state", ["PORT_INIT (2)", "PORT_ARMED (3)"])
def test_an_init_port_without_a_physical_state_has_its_link_up(tmp_path: Path, state: str) -> None:
    got = facts_of("ib-ports", DEVINFO.format(state=state))
    (down,) = got["ports_down"]
    assert down["phys_state"] == "LinkUp"
    verdict = _verdict(tmp_path, "node-health", "ib-healthy-ndr", {"ib-ports.1.out": DEVINFO.format(state=state)})
    assert verdict["action"] == "reconfigure" and verdict["id"] == "ib-port-unconfigured", verdict


def test_a_down_port_without_a_physical_state_is_not_called_link_up() -> None:
    got = facts_of("ib-ports", DEVINFO.format(state="PORT_DOWN (1)"))
    (down,) = got["ports_down"] or got["unused_ports"]
    assert down["phys_state"] is None


# ---- --query-gpu sampled in a loop, no header ------------------------------------------------------------

ROW = "NVIDIA RTX A6000, {bus}, 550.54.15, P8, 44, 0 %, 1 MiB, No, [N/A], 8.6, {watts} W, 300.00 W\n"


def test_a_headerless_looped_query_counts_each_gpu_once() -> None:
    text = ROW.format(bus="00000000:01:00.0", watts="18.51") + ROW.format(bus="00000000:01:00.0", watts="18.60")
    assert facts_of("nvidia-smi-query", text)["gpu_count"] == 1
    two = text + ROW.format(bus="00000000:02:00.0", watts="19.00") + ROW.format(bus="00000000:02:00.0", watts="19.1")
    assert facts_of("nvidia-smi-query", two)["gpu_count"] == 2


def test_headerless_rows_named_by_uuid_count_once() -> None:
    row = "Tesla T4, GPU-3d6b9c1e-1111-2222-3333-444455556666, {temp}\n"
    text = row.format(temp=40) + row.format(temp=41)
    assert facts_of("nvidia-smi-query", text)["gpu_count"] == 1
