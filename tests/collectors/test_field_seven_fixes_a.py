"""Regression tests for the normaliser's misses the seventh field set showed (fixtures/field/gpu-7; issue "never
cry wolf"), each built on the format family the miss belongs to, in several shapes:

- Ray's and SkyPilot's per-line worker tags (``(RayWorkerWrapper pid=123, ip=10.0.0.2) ``, ``(pid=123) ``,
  ``(raylet) ``, ``(sky-cmd, pid=13008) ``, ``(worker1, rank=1, pid=4243, ip=10.0.0.3) ``) are a launcher's
  wrapper: an nvidia-smi table behind them is a table;
- Open MPI's ``--tag-output`` tag is printed right before the line, so a space after it is the line's own unless
  every tagged line carries one (a paste that wrote ``tag: line``).
"""

from __future__ import annotations

from typing import Any

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.normalise import normalise
from tests.helpers import ROOT

# fixtures/field/gpu-7/nvsmi-table-535-ray-sky-cmd-pid-prefix-h100-hbm3-cut-in-gpu0-skypilot4099.txt, its first
# lines (source: https://github.com/skypilot-org/skypilot/pull/4099), without the tag SkyPilot put on each.
SKYPILOT_TABLE = """\
Thu Oct 17 01:47:13 2024
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.183.06             Driver Version: 535.183.06   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA H100 80GB HBM3          On  | 00000000:04:00.0 Off |                    0 |
| N/A   32C    P0              70W / 700W |      0MiB / 81559MiB |      0%      Default |
"""

# The shapes of the family: Ray's print_worker_logs (ray/_private/worker.py: "(<name> pid=<pid>)" and ", ip=<ip>"
# for another node; "(raylet)" / "(autoscaler +<t>)" for its own processes; docs "ray-logging": "(pid=45601) task",
# "(MyActor pid=480956) actor log message"), SkyPilot's job tags (sky/skylet executor: "(setup pid=<pid>)",
# "(<task>, pid=<pid>)", "(head, rank=0, pid=<pid>)", "(worker1, rank=1, pid=<pid>, ip=<ip>)").
TAGS = [
    "(sky-cmd, pid=13008) ",
    "(pid=45601) ",
    "(pid=45601, ip=10.0.0.2) ",
    "(MyActor pid=480956) ",
    "(RayWorkerWrapper pid=11305, ip=10.164.0.57) ",
    "(ServeReplica:default:Model pid=4242) ",
    "(head, rank=0, pid=17894) ",
    "(worker1, rank=1, pid=15406, ip=10.164.0.57) ",
    "(setup pid=8665, ip=192.168.0.15) ",
    "(raylet) ",
    "(raylet, ip=10.0.0.3) ",
]


def _facts(kind: str, text: str) -> dict[str, Any]:
    collector = get_collector(kind)
    return collector.facts(collector.parse(text))


def _tagged(tag: str, text: str) -> str:
    return "".join(tag + line + "\n" for line in text.splitlines())


def test_the_field_sample_reads_its_versions() -> None:
    path = ROOT / "fixtures/field/gpu-7/nvsmi-table-535-ray-sky-cmd-pid-prefix-h100-hbm3-cut-in-gpu0-skypilot4099.txt"
    facts = _facts("nvidia-smi", path.read_text())
    assert facts["driver_version"] == "535.183.06"
    assert facts["cuda_version"] == "12.2"


@pytest.mark.parametrize("tag", TAGS)
def test_a_table_behind_ray_or_skypilot_tags_reads_as_the_table(tag: str) -> None:
    bare = _facts("nvidia-smi", SKYPILOT_TABLE)
    assert bare["driver_version"] == "535.183.06"
    reading = normalise(_tagged(tag, SKYPILOT_TABLE), "nvidia-smi")
    assert reading.families == ("launcher-prefix",)
    assert reading.text == SKYPILOT_TABLE
    tagged = _facts("nvidia-smi", _tagged(tag, SKYPILOT_TABLE))
    assert {k: v for k, v in tagged.items() if k not in ("coverage", "normalised")} == {
        k: v for k, v in bare.items() if k not in ("coverage", "normalised")
    }


def test_ray_deduplication_tail_goes_with_the_tag() -> None:
    line = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."
    text = f"(RayWorkerWrapper pid=11305) {line} [repeated 3x across cluster]\n"
    assert normalise(text, "kernel-log").text == line + "\n"


def test_a_parenthesis_of_the_output_itself_stays() -> None:
    for text in ("(see below) the table\n", "(pid 4242) exited\n", "(0) first\n(1) second\n(2) third\n"):
        assert "launcher-prefix" not in normalise(text, "nvidia-smi").families
    # a tag on one line of many is part of the output
    mixed = "line one\nline two\n(pid=1) tagged\nline four\nline five\n"
    assert "launcher-prefix" not in normalise(mixed, "kernel-log").families


def test_an_engine_log_keeps_its_worker_tags() -> None:
    """The engine-log reader reads vLLM's "(Worker_TP1 pid=N)" tags itself (a worker's name tells its rank)."""
    text = "(Worker_TP0 pid=104298) INFO 05-01 10:00:00 gpu_worker.py:1] ready\n" * 3
    assert normalise(text, "engine-log").text is text


# ---- Open MPI's tag and the line's own leading space --------------------------------------------------------

# fixtures/hosts/engine-start-tgi-heads-not-divisible/engine-log.out's last lines (source:
# https://github.com/huggingface/text-generation-inference/issues/1354): a continuation line starts with a space.
TGI_TAIL = """\
ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 71 and `num_shards`: 2
 rank=0
2023-12-16T09:36:24.632149Z ERROR text_generation_launcher: Shard 0 failed to start
2023-12-16T09:36:24.632181Z  INFO text_generation_launcher: Shutting down shards
"""


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_open_mpi_tag_leaves_the_lines_own_space(stream: str) -> None:
    tagged = _tagged(f"[1,0]<{stream}>:", TGI_TAIL)
    reading = normalise(tagged, "kernel-log")
    assert reading.families == ("launcher-prefix",)
    assert reading.text == TGI_TAIL


def test_open_mpi_tag_written_with_a_space_on_every_line() -> None:
    tagged = _tagged("[1,0]<stdout>: ", TGI_TAIL)
    assert normalise(tagged, "kernel-log").text == TGI_TAIL
    table = _tagged("[1,0]<stdout>: ", SKYPILOT_TABLE)
    assert _facts("nvidia-smi", table)["cuda_version"] == "12.2"


def test_skypilot_around_open_mpi_unwraps_both() -> None:
    """SkyPilot runs mpirun: its tag outside, Open MPI's inside (skypilot examples, nccl-tests on GKE)."""
    inner = "# nThread 1 nGpus 1 minBytes 1024 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 100\n#\n"
    text = _tagged("(head, rank=0, pid=3808) [1,0]<stdout>:", inner)
    assert normalise(text, "nccl-tests").text == inner
