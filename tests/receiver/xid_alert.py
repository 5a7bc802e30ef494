"""A one-off `nightowl triage --alert` setup: the recorded Alertmanager Xid alert and a rules file that sends it
to the xid runbook on the replayed host its `Hostname` label names. One setup for the tests of that command."""

from __future__ import annotations

from pathlib import Path

from nightowl.paths import data_dir

HOSTS = data_dir("fixtures") / "hosts"
# Alertmanager's webhook of three firing alerts: two Xid hosts and a filesystem alert no rule matches.
XID_ALERT = data_dir("fixtures") / "alerts" / "alertmanager-xid-firing.json"


def xid_rules(tmp_path: Path) -> Path:
    """``tmp_path/serve.yaml`` with the one rule `gpu-xid` and no token (that guards `serve`'s endpoint, not a
    one-off triage)."""
    config = tmp_path / "serve.yaml"
    config.write_text(
        "rules:\n"
        "  - name: gpu-xid\n"
        '    match: ["alertname=GpuXidErrors"]\n'
        "    runbook: xid\n"
        f'    host: "replay:{HOSTS}/{{{{ labels.Hostname }}}}"\n'
    )
    return config
