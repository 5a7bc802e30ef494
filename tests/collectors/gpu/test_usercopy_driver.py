"""A kernel whose hardened usercopy refuses the NVIDIA driver's own memory (mm/usercopy.c's warning and its BUG
form): the driver cannot run on this kernel (field kernel-log's void-packages#1231 sample was called healthy).
Lines in the kernel's own wording (torvalds/linux mm/usercopy.c usercopy_warn/usercopy_abort)."""

from __future__ import annotations

import pytest

from nightowl.collectors.gpu.kernel_log import parse

LOAD = "[   14.762771] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  390.67\n"


@pytest.mark.parametrize(
    "line",
    [
        "[   33.916409] Bad or missing usercopy whitelist? Kernel memory exposure attempt detected from SLUB object"
        " 'nvidia_stack_cache' (offset 11440, size 3)!",
        "[  120.1] usercopy: Kernel memory overwrite attempt detected to SLAB object 'nvidia_pte_cache' (offset 0,"
        " size 64)!",
    ],
)
def test_usercopy_refusing_the_drivers_memory_is_a_driver_that_cannot_run_here(line: str) -> None:
    failures = parse(LOAD + line + "\n").driver_load_failures
    assert [f["id"] for f in failures] == ["usercopy_nvidia_object"]


def test_usercopy_refusing_another_modules_memory_is_not_the_drivers() -> None:
    line = (
        "[   76.03] usercopy: Kernel memory overwrite attempt detected to SLUB object 'fusion_user_ll_request'"
        " (offset 0, size 3960)!"
    )
    assert parse(LOAD + line + "\n").driver_load_failures == []
