"""Fixes the tenth field set called for in the GPU readers (issue "Never cry wolf"): nvidia-drm failing to register
its device (aritger/eglstreams-kms-example#1) was a healthy log, and Fabric Manager's start script refusing an
argument (NVIDIA/gpu-operator#1595) was no error at all."""

from __future__ import annotations

import pytest

from tests.helpers import facts_of

DRM = "[   64.24{n}] [drm:{fn} [nvidia_drm]] *ERROR* [nvidia-drm] [GPU ID 0x00000100] Failed to {what}\n"


@pytest.mark.parametrize(
    ("fn", "what"),
    [("nvidia_drm_load", "allocate NvKmsKapiDevice"), ("nvidia_drm_probe_devices", "register device")],
)
def test_nvidia_drm_failing_to_attach_is_a_driver_load_failure(fn: str, what: str) -> None:
    facts = facts_of("kernel-log", DRM.format(n=6966, fn=fn, what=what))
    assert [f["id"] for f in facts["driver_load_failures"]] == ["nvidia_drm_register_failed"]


def test_other_nvidia_drm_errors_are_not() -> None:
    line = DRM.format(n=6966, fn="nv_drm_master_set", what="grab modeset ownership")
    assert facts_of("kernel-log", line)["driver_load_failures"] == []


def test_the_start_scripts_unknown_option_is_a_configuration_error() -> None:
    text = (
        "Starting NVIDIA fabric manager daemon for NVLink5+...\n"
        "Unknown option: /usr/share/nvidia/nvswitch/fabricmanager.cfg\n"
        "NVIDIA Fabric Manager Start Script\n"
    )
    (error,) = facts_of("fabric-manager", text)["errors"]
    assert error["action"] == "reconfigure"
