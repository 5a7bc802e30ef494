"""A site runbook and the isolated site folder that holds it, for the tests of site runbook folders.

One text and one fixture body, so the tests of handed-in folders and of site rehearsals cannot drift apart
on what a site runbook looks like or on which operator folders are kept out of reach."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl import paths

# Counts the GPUs nvidia-smi lists: `ok` when it lists any, `no-gpus` when none.
_GPU_CHECK = """\
id: {runbook_id}
title: {title}
entry: collect
nodes:
  collect:
    collect: [nvidia-smi]
    next: judge
  judge:
    decide:
      - when: "(nvidia_smi.gpus | default([])) | length > 0"
        goto: ok
    default: no-gpus
  ok:
    verdict: {{id: ok, severity: ok, action: none, summary: nvidia-smi lists GPUs}}
  no-gpus:
    verdict: {{id: no-gpus, severity: critical, action: escalate, summary: nvidia-smi lists no GPU}}
"""


def gpu_check(runbook_id: str, title: str) -> str:
    """The site runbook's text under ``runbook_id`` and ``title``."""
    return _GPU_CHECK.format(runbook_id=runbook_id, title=title)


def site_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runbook_id: str, title: str) -> Path:
    """``tmp_path/team`` holding ``RUNBOOK_ID.yaml``, a folder only a handed-in ``--runbook-path`` reaches: no
    environment variable, XDG folder or system folder names it."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("NIGHTOWL_RUNBOOK_PATH", raising=False)
    monkeypatch.setattr(paths, "SITE_CONFIG_DIR", tmp_path / "etc")
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / f"{runbook_id}.yaml").write_text(gpu_check(runbook_id, title))
    return folder
