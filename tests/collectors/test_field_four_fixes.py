"""Regression tests for the misses the fourth field set showed (fixtures/field/gpu-4, serving-4, network-4;
issue "never cry wolf"). Each test is built on the format family the miss belongs to, with outputs written
in that family's several shapes, not on the field file itself:

- a block quoted on the added side of a diff (``+`` on every line, also over a ``> `` quote);
- an nvidia-smi table indented inside a larger report whose other lines are not indented;
- vLLM's 2026 "Starting vLLM server on" ready line;
- SGLang start-up lines next to vLLM's own platform line (SGLang imports vLLM);
- an NCCL verbs call that sets a connection up (``ibv_create_qp``/``ibv_modify_qp``/``ibv_reg_mr``) failing.
"""

from __future__ import annotations

import pytest

from nightowl.collectors.normalise import normalise
from tests.helpers import ROOT, facts_of

HOSTS = ROOT / "fixtures" / "hosts"
TABLE = HOSTS / "preflight-a100-sxm-x4" / "nvidia-smi.out"  # a default table view of four GPUs


# ---- a diff's added side ---------------------------------------------------------------------------------

KERNEL_LINES = (
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics "
    "SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter\n"
    "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, "
    "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005\n"
)


@pytest.mark.parametrize("mark", ["+", "+> ", "+>", "+    "])
def test_kernel_log_on_a_diffs_added_side_reads_as_the_log(mark: str) -> None:
    bare = facts_of("kernel-log", KERNEL_LINES)
    assert bare["xid_codes"] == [13, 109]
    quoted = "".join(mark + line + "\n" for line in KERNEL_LINES.splitlines())
    got = facts_of("kernel-log", quoted)
    assert got["xid_codes"] == bare["xid_codes"]
    assert "diff" in normalise(quoted, "kernel-log").families


@pytest.mark.parametrize("kind", ["nvidia-smi", "kernel-log", "engine-log", "nccl-log"])
def test_recorded_outputs_on_a_diffs_added_side_read_alike(kind: str) -> None:
    for path in sorted(HOSTS.glob(f"*/{kind}.out"))[:6]:
        text = path.read_text(errors="replace")
        if not text.strip():
            continue
        added = "\n".join("+" + line if line.strip() else line for line in text.split("\n"))
        wrapped, bare = facts_of(kind, added), facts_of(kind, text)
        for name in ("coverage", "normalised", "warnings", "truncated", "truncated_bytes"):
            wrapped.pop(name, None)
            bare.pop(name, None)
        assert wrapped == bare, path


def test_a_table_of_borders_alone_is_not_taken_for_a_diff() -> None:
    borders = "+-----------------------------------------------------------------------------+\n" * 3
    assert "diff" not in normalise(borders, "nvidia-smi").families
    # a bare table has "|" rows: its "+" borders never make it a diff either
    table = TABLE.read_text()
    assert "diff" not in normalise(table, "nvidia-smi").families


# ---- an nvidia-smi table indented inside a report ----------------------------------------------------------

REPORT_HEAD = (
    "2023-10-16T07:30:27.737029Z  INFO text_generation_launcher: Runtime environment:\n"
    "Target: x86_64-unknown-linux-gnu\n"
    "nvidia-smi:\n"
)


@pytest.mark.parametrize("indent", ["  ", "   ", "    ", "\t"])
def test_a_table_indented_under_unindented_report_lines_is_read(indent: str) -> None:
    table = TABLE.read_text()
    bare = facts_of("nvidia-smi", table)
    assert bare["gpu_count"] and bare["driver_version"]
    inside = REPORT_HEAD + "".join(indent + line + "\n" if line.strip() else "\n" for line in table.splitlines())
    got = facts_of("nvidia-smi", inside)
    assert (got["gpu_count"], got["driver_version"], got["cuda_version"]) == (
        bare["gpu_count"],
        bare["driver_version"],
        bare["cuda_version"],
    )


def test_an_indented_table_header_alone_gives_versions_and_no_gpu() -> None:
    header = (
        REPORT_HEAD + "   +---------------------------------------------------------------------------------------+\n"
        "   | NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
        "   |-----------------------------------------+----------------------+----------------------+\n"
    )
    got = facts_of("nvidia-smi", header)
    assert (got["driver_version"], got["cuda_version"], got["gpu_count"]) == ("535.104.05", "12.2", 0)


# ---- vLLM's 2026 ready line -------------------------------------------------------------------------------

V1_BEFORE_READY = (
    "(APIServer pid={pid}) INFO 05-06 04:32:55 [api_server.py:598] Supported tasks: ['generate']\n"
    "(APIServer pid={pid}) INFO 05-06 04:33:07 [base.py:233] Readonly multi-modal warmup completed in 5.051s\n"
)


@pytest.mark.parametrize(
    ("pid", "address"), [(1, "http://0.0.0.0:8000"), (188747, "http://127.0.0.1:30001"), (42, "https://[::]:8443")]
)
def test_vllm_starting_server_on_is_ready(pid: int, address: str) -> None:
    before = V1_BEFORE_READY.format(pid=pid)
    assert facts_of("engine-log", before)["last_phase"] != "ready"
    line = f"(APIServer pid={pid}) INFO 05-06 04:33:07 [api_server.py:602] Starting vLLM server on {address}\n"
    ready = before + line
    got = facts_of("engine-log", ready)
    assert (got["engine"], got["last_phase"]) == ("vllm", "ready")


# ---- SGLang beside vLLM's platform line ---------------------------------------------------------------------

PLATFORM = "INFO 04-03 04:46:18 __init__.py:190] Automatically detected platform cuda.\n"
SERVER_ARGS = (
    "[2025-04-03 04:46:21] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
    "tokenizer_mode='auto', tp_size=1, log_requests=False)\n"
)


@pytest.mark.parametrize(
    "text",
    [
        PLATFORM + SERVER_ARGS,
        SERVER_ARGS + PLATFORM,
        "(wei) user@node:~$ " + PLATFORM + SERVER_ARGS.replace("[2025-04-03 04:46:21] ", "[2025-04-03 04:46:21 TP0] "),
    ],
)
def test_sglang_server_args_outvote_vllms_platform_line(text: str) -> None:
    assert facts_of("engine-log", text)["engine"] == "sglang"


def test_vllms_platform_line_is_no_vote_but_its_other_lines_are() -> None:
    assert facts_of("engine-log", PLATFORM)["engine"] is None  # printed by whatever imports vLLM
    own = PLATFORM + "INFO 04-03 04:46:19 [api_server.py:1024] vLLM API server version 0.8.2\n"
    assert facts_of("engine-log", own)["engine"] == "vllm"


# ---- NCCL verbs calls that set a connection up -------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "[2026-03-13 22:26:02] host-01:1234 [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 "
        "Connection timed out, on dev mlx5_3:1, curr state INIT, next state RTR",
        "dgxh100-3:2152176:2152299 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error "
        "Network is unreachable",
        "node-2:195626:198757 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error No such device",
        "hai-a100-3:376586:377441 [2] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed",
        "[1,3]<stdout>:gpu-4:11:12 [3] misc/ibvwrap.cc:120 NCCL WARN Call to ibv_reg_mr failed with error Cannot "
        "allocate memory",
        # NCCL 2.12+'s registration call, with the function name its WARN prefix carries
        "misc/ibvwrap.cc:213 (wrap_ibv_reg_mr_iova2) NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
        "allocate memory",
    ],
)
def test_a_failed_connection_setup_verb_is_an_init_failure(line: str) -> None:
    got = facts_of("nccl-log", line + "\n")
    assert "ibv_failed" in got["error_kinds"]
    assert got["init_failed"] is True


@pytest.mark.parametrize(
    "line",
    [
        "node1:34050:34121 [0] transport/net_ib.cc:1290 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5120> "
        "with error 12, opcode 0, len 0, vendor err 129",
        "node1:34050:34121 [0] misc/ibvwrap.cc:258 NCCL WARN Call to ibv_poll_cq failed with error Input/output error",
        "node1:34050:34121 [0] NCCL WARN NET/IB : Got async event : port error",
    ],
)
def test_errors_on_a_formed_connection_stay_link_errors(line: str) -> None:
    got = facts_of("nccl-log", line + "\n")
    assert got["has_ib_errors"] is True
    assert got["init_failed"] is False
