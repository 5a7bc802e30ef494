"""The pattern tables of the ``nccl-log`` parser (nightowl/collectors/nccl/nccl_log.py): NCCL's line
formats per era, the transports, IB completion statuses and the failure wordings, each with its source.

Line formats are from NVIDIA/nccl @v2.30.7 (init.cc, transport/*.cc, net_ib) and from real logs
(fixtures/corpus/nccl/INDEX.md); see docs/sources.md#nccl-logs.
"""

from __future__ import annotations

import re

# --------------------------------------------------------------------------------------------
# Pattern tables
# --------------------------------------------------------------------------------------------

# Wrappers that launchers put in front of every line; removed repeatedly from the line start.
# (name, pattern); a named group "rank" gives the rank the launcher tagged the line with.
LINE_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("indent", re.compile(r"^\s+")),
    # OpenMPI --tag-output: [jobid,rank]<stdout>: (corpus nccl_300, nccl-tests v2.18 sample)
    ("openmpi", re.compile(r"^\[\d+,(?P<rank>\d+)\]<std(?:out|err)>:")),
    # torchrun --tee / log prefix: [rank3]: (corpus torch_* samples)
    ("torchrun", re.compile(r"^\[(?:default)?rank(?P<rank>\d+)\]:")),
    # torchx role prefix: trainer/0 [0]: (corpus torch_flight_recorder_*)
    ("torchx", re.compile(r"^[\w.-]+/\d+ \[(?P<rank>\d+)\]:")),
    # log-viewer line numbers in front of a bracketed line: [80746] [rank0]: (corpus llamafactory_7396)
    ("line_number", re.compile(r"^\[\d+\]\s+(?=\[)")),
    # Ray actor prefix: (RayWorkerWrapper pid=11305) (corpus vllm_ray_pynccl_*)
    ("ray", re.compile(r"^\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s*")),
    # srun --label: "0: " [M]
    ("srun", re.compile(r"^(?P<rank>\d+): (?=\S)")),
    # pdsh / clush "host: " before an NCCL line [M]
    ("pdsh", re.compile(r"^[\w.-]+: (?=\S+:\d+:\d+ \[\d+\])")),
    # --- every era's wrappers (issue 13; samples in fixtures/corpus-extra/nccl-log/SOURCE.md) ---
    # a log collector's ISO time in front: "2019-06-02T16:13:44.884Z: [1,12]<stdout>:" (nccl #230)
    ("iso_time", re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?:? ?(?=\S)")),
    # CloudWatch export: "  | 2025-05-16T16:39:51.208-07:00 | host:..." (aws-ofi-nccl #889)
    ("cloudwatch", re.compile(r"^\|\s*(?=\d{4}-)")),
    ("cloudwatch_bar", re.compile(r"^\|\s+")),
    # torchx role: "[trainer3]:", "[trainer0|0]:" (nccl #1837)
    ("torchx_role", re.compile(r"^\[[A-Za-z][\w.-]*(?:\|(?P<rank>\d+))?\]:")),
)

# host:pid:tid [cudaDev] [file:line] [NCCL] LEVEL message. NCCL <= 2.2 had no "NCCL" tag (corpus
# nccl_2.2_legacy_*); WARN lines carry the source file:line since 2.3 (src/debug.cc).
NCCL_LINE = re.compile(
    r"(?:^|\s)(?P<host>[^\s:]\S*?)?:(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<src>\S+:\d+) )?(?:NCCL )?(?P<level>INFO|WARN|TRACE|ABORT)(?: (?P<msg>.*))?$"
)
# Without "host:pid:tid": "[0] misc/socket.cc:71 NCCL WARN ..." (nccl #1612), "NCCL WARN Cuda failure ..."
# pasted alone (NVIDIA forum 360195), NCCL 2.2-2.4 "include/socket.h:344 WARN ..." without the tag (nccl #210).
NCCL_BARE_LINE = re.compile(
    r"^(?:\[(?P<dev>\d+)\] )?(?:(?P<src>[\w./-]+:\d+) )?(?P<tag>NCCL )?(?P<level>INFO|WARN|ABORT)(?: (?P<msg>.*))?$"
)
RETURN_CHAIN = re.compile(r"^\S+:\d+ -> \d+")  # "init.cc:1263 -> 2": a return-code trace, no new fact

VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)")
# "Using network IB|Socket|<plugin name>" (init.cc); NCCL 2.2: "Using internal Network Socket".
USING_NETWORK = re.compile(r"^Using (?:internal )?[Nn]etwork (?P<network>.+?)\s*$")
# A net transport's own lines ("NET/IB : Got completion from peer ...", "NET/Socket : ..."; transport/net_ib.cc,
# net_socket.cc): the net that printed them, where no "Using network" line survived.
NET_TAG = re.compile(r"^NET/(?P<net>IB|IBext|Socket|OFI)\b\s?:")
# An error's return chain through a net transport's own source file ("transport/net_socket.cc:368 -> 6").
NET_FILE = re.compile(r"^transport/net_(?P<net>socket|ib)\.cc:\d+ -> ")
NET_PLUGIN_LOADED = re.compile(r"NET/Plugin\s*: ?Loaded net plugin (?P<name>.+?)\s*$")
IB_NO_DEVICE = re.compile(r"NET/IB\s*: No device found")
IB_USING = re.compile(r"^NET/IB\s*: Using (?P<devices>\[.*?)(?:\s*;\s*OOB (?P<oob>\S+))?\s*$")
IB_DEVICE = re.compile(r"\[(?P<index>\d+)\](?P<name>[\w.\-]+):(?P<port>\d+)/(?P<link>\w+)")
IB_SIDEBAND = re.compile(r"^NET/IB\s*: Using interface (?P<name>\S+) for sideband")
BOOTSTRAP_USING = re.compile(r"^Bootstrap\s*: Using (?P<list>.+)$")
SOCKET_USING = re.compile(r"^NET/Socket\s*: Using (?P<list>\[.+)$")
LEGACY_NET_USING = re.compile(r"^NET\s*: Using interface (?P<list>\S+)")
INTERFACE = re.compile(r"(?:\[\d+\])?(?P<name>[A-Za-z][\w.\-@]*):(?P<address>[^\s<]+)<\d+>")
CHANNEL_VIA = re.compile(r"^(?:Channel|Ring|Tree)\b.*?\bvia (?P<via>.+?)\s*$")
# "comm 0x.. rank 0 nranks 8 cudaDev 0 ..." (Init START/COMPLETE lines); NCCL 2.2x's topology summary writes
# "comm 0x.. rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0" (src/init.cc; field accelerate#3240).
COMM_LINE = re.compile(r"\bcomm (?P<ptr>0x[0-9a-fA-F]+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)(?P<rest>.*)$")
COMM_FIELDS = {
    "cuda_dev": re.compile(r"\bcudaDev (\d+)"),
    "nvml_dev": re.compile(r"\bnvmlDev (\d+)"),
    "bus_id": re.compile(r"\bbusId ([0-9a-fA-F]+)"),
    "comm_id": re.compile(r"\bcommId (0x[0-9a-fA-F]+)"),
}
INIT_COMPLETE = re.compile(r"- (?:Init )?COMPLETE\b")
# "NCCL_IB_GID_INDEX set by environment to 3." (src/misc/param.cc; corpus nccl_1814, nccl_1332)
ENV_SETTING = re.compile(r"^(?P<name>NCCL_\w+) set by environment to (?P<value>.*?)\.?\s*$")

# Transport strings after "via" -> normalised name (transport/p2p.cc, shm.cc, net.cc @v2.30.7;
# 2.4-era "via direct shared memory" from corpus nccl_367). First match wins.
TRANSPORTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^P2P/(?P<kind>[A-Za-z]+)"), "P2P/{kind}"),
    (re.compile(r"^SHM\b"), "SHM"),
    (re.compile(r"^direct shared memory"), "SHM"),
    (re.compile(r"^NET/(?P<net>[^/]+?)/\d+(?P<gdr>/GDRDMA)?"), "NET/{net}{gdr}"),
    (re.compile(r"^NET/(?P<net>[^/\s]+)"), "NET/{net}"),
    (re.compile(r"^(?P<other>[A-Za-z]+)"), "{other}"),
)

# "Got completion ..." in its four generations: old (no peer), 2.1x "from peer X with error N",
# 2.19 "with status=N ... vendor err N", 2.2x "with status=NAME(N) opcode=NAME(N) vendor_err=N ... hca D".
IB_COMPLETION = re.compile(
    r"Got completion (?:from peer (?P<peer>\S+) )?"
    r"with (?:error (?P<error>\d+)|status=(?:[A-Z_]+\()?(?P<status>\d+)\)?)"
    r"[,\s]*opcode[= ](?:[A-Z_]+\()?(?P<opcode>\d+)\)?.*?vendor[ _]err[= ]?(?P<vendor>\d+)"
    r"(?:.*?\bhca (?P<hca>[\w.\-]+))?"
)
# enum ibv_wc_status, rdma-core libibverbs/verbs.h (values 0..21).
IBV_WC_STATUS = (
    "SUCCESS",
    "LOC_LEN_ERR",
    "LOC_QP_OP_ERR",
    "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",
    "WR_FLUSH_ERR",
    "MW_BIND_ERR",
    "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",
    "REM_INV_REQ_ERR",
    "REM_ACCESS_ERR",
    "REM_OP_ERR",
    "RETRY_EXC_ERR",
    "RNR_RETRY_EXC_ERR",
    "LOC_RDD_VIOL_ERR",
    "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",
    "INV_EECN_ERR",
    "INV_EEC_STATE_ERR",
    "FATAL_ERR",
    "RESP_TIMEOUT_ERR",
    "GENERAL_ERR",
)

# Failure classification. A line gets at most one "cause" (the first match) and one "wrapper"
# (the error code NCCL/PyTorch reports on top of it). Sources: NCCL misc/socket.cc, ibvwrap.cc,
# proxy.cc, net_ib; PyTorch ProcessGroupNCCL.cpp messages; corpus samples named per row.
CAUSE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ib_completion",
        re.compile(r"Got completion (?:from peer \S+ )?with (?:error|status)"),
    ),  # nccl-tests_24, alpaca_207
    ("ibv_failed", re.compile(r"Call to ibv_\w+ failed|\bibv_\w+ failed")),  # nccl_562
    ("ibverbs_missing", re.compile(r"Failed to open libibverbs")),  # nccl_857
    # The CUDA runtime's own words for a GPU hardware fault (cudaGetErrorString of cudaErrorECCUncorrectable and
    # cudaErrorNvlinkUncorrectable, CUDA Runtime API "Data types", cudaError), raised in a rank: its GPU faulted.
    (
        "gpu_hardware_error",
        re.compile(r"uncorrectable ECC error encountered|uncorrectable NVLink error detected"),
    ),  # sd-scripts#1434 (field set 8)
    ("no_route", re.compile(r"No route to host")),  # sglang_3820
    ("connection_refused", re.compile(r"Connection refused")),  # horovod_584
    ("connection_reset", re.compile(r"Connection reset by peer|Broken pipe")),  # nccl_2076, nccl_795
    ("connection_aborted", re.compile(r"Software caused connection abort")),  # nccl-tests_166
    ("connection_closed", re.compile(r"Connection closed by (?:remote )?peer")),  # nccl-tests_15, _166
    (
        "connect_timeout",
        re.compile(r"Connection timed out|[Cc]onnect timeout"),
    ),  # nccl-tests_15, oneflow_3586
    ("net_plugin_error", re.compile(r"NET/\w+ Request \S+ completed with error")),  # nccl_1928 (aws-ofi-nccl)
    ("proxy_failed", re.compile(r"\[Proxy Service \d+\] Failed to execute operation")),  # nccl_795
    ("socket_recv_failed", re.compile(r"Socket recv failed|Call to recv from \S+ failed")),  # nccl-tests_166
    ("cuda_failure", re.compile(r"Cuda failure")),  # NCCL WARN "Cuda failure 'x'" [M]
)
# Verbs calls that set a connection up (QP creation and its state changes, memory registration, the device
# context): their failure means the connections never formed - a GID index, rail, route, memlock limit or device
# setting (nccl #2013: ibv_modify_qp ETIMEDOUT INIT->RTR across rails, fixed by NCCL_CROSS_NIC=0; nccl-tests
# #185: "Network is unreachable"; nccl #925: "No such device"; nccl #562: ibv_create_qp under a memlock limit;
# NCCL 2.12+ registers with ibv_reg_mr_iova2: "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"
# under a memlock limit) - an init failure, not a link that failed under traffic (a completion error,
# ibv_poll_cq, an async event).
IBV_SETUP_CALL = re.compile(
    r"\bibv_(?:create_qp|modify_qp|reg_mr(?:_iova2)?|reg_dmabuf_mr|create_cq|alloc_pd|open_device)\b"
)
WRAPPER_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("remote_error", re.compile(r"remote process exited or there was a network error|ncclRemoteError")),
    ("unhandled_system_error", re.compile(r"unhandled system error")),  # nccl_1332
    ("unhandled_cuda_error", re.compile(r"unhandled cuda error")),  # vllm_7896
    ("internal_error", re.compile(r"internal error - please report")),  # ncclInternalError text [M]
    ("invalid_usage", re.compile(r"invalid usage")),  # ncclInvalidUsage text [M]
    ("process_down", re.compile(r"taking the entire process down")),  # ProcessGroupNCCL.cpp
)

# --- every era's failure wordings (issue 13; samples in fixtures/corpus-extra/nccl-log/SOURCE.md) ------
# Checked after CAUSE_PATTERNS / WRAPPER_PATTERNS, with the same one-cause / one-wrapper rule.
ERA_CAUSE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # "NET/IB : Got async event : port error | local catastrophic error" (net_ib.cc/.cu, nccl #230, lit-llama
    # #380); 2.2x "mlx5_1:1 async fatal event on QP (0x..): invalid request local work queue error" (#1919)
    ("ib_async_event", re.compile(r"Got async event : |async fatal event on ")),
    # bootstrap has no usable interface: NCCL_SOCKET_IFNAME names none, a container without networking,
    # IPv6/IPv4 mismatch (MambaTree #14, nccl #1837, nccl #210)
    (
        "no_socket_interface",
        re.compile(
            r"no socket interface found|neither AF_INET\(2\) nor AF_INET6|Socket creation failed : Address family"
            r"|No usable listening interface|Could not find interface"
        ),
    ),
    # libfabric finds no EFA/verbs provider in the container (aws-ofi-nccl #889)
    (
        "ofi_no_provider",
        re.compile(r"fi_getinfo: provider \S+ output empty list|NET/OFI .*(?:[Nn]o (?:eligible )?provider)"),
    ),
    # "communicator encountered a fatal error (detected in ncclIbTest)" (nccl #1905)
    ("comm_fatal_error", re.compile(r"communicator encountered a fatal error")),
)
ERA_WRAPPER_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # "ncclInternalError: Internal check failed." / "internal error, NCCL version 2.14.3" (MambaTree #14)
    ("internal_error", re.compile(r"ncclInternalError|internal error, NCCL version")),
)
# Where an error chain ("file.cc:line -> 6") passed: through bootstrap or init, it is an init failure
# (NCCL src/bootstrap.cc, init.cc), not slowness.
INIT_CHAIN = re.compile(r"^(?:\S*/)?(?P<file>bootstrap|init|socket)\.(?:cc|cu):\d+ -> (?P<code>\d+)")
CONNECTED_GDR = re.compile(r"Connected all rings\b.*?\bGDR (?P<gdr>[01])\b")
# NCCL's IB transport says per HCA whether it will use GPUDirect RDMA (src/transport/net_ib.cc ncclIbGdrSupport):
# "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'" (older: "... Disabled for GPU 3[3] / HCA 0 ...").
HCA_GDR = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for (?:GPU \S+ / )?HCA \d+")
P2P_PLUGIN = re.compile(r"^P2P plugin (?P<name>\S+)")  # HPC-X nccl-rdma-sharp-plugins: "P2P plugin IBext_v8"
OFI_PLUGIN = re.compile(r"^NET/OFI ")  # aws-ofi-nccl, which names its network "AWS Libfabric"
ASYNC_EVENT = re.compile(r"(?:Got async event : |async fatal event on \S+ \([^)]*\): )(?P<event>.*\S)")

MAX_ITEMS = 500  # distinct errors / WARN texts kept; a storm of unique messages must not flood the facts
