"""nightowl imports paramiko without invoke (nightowl/transports/paramiko_import.py), and only that way."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers import ROOT


def _run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout.split()


def test_opening_ssh_imports_paramiko_without_invoke_and_invoke_still_imports() -> None:
    code = (
        "import sys\n"
        "from nightowl.transports.ssh import SSHTransport, _parsed_key\n"
        "from nightowl.transports.paramiko_import import paramiko\n"
        "print(paramiko.config.invoke is None, 'invoke' in sys.modules, 'unittest.mock' in sys.modules)\n"
        "import invoke\n"
        "print(callable(invoke.run))\n"
    )
    assert _run(code) == ["True", "False", "False", "True"]


def test_an_invoke_imported_before_is_left_as_it_is() -> None:
    code = (
        "import invoke\n"
        "from nightowl.transports.paramiko_import import paramiko\n"
        "print(paramiko.config.invoke is invoke)\n"
    )
    assert _run(code) == ["True"]


def test_every_paramiko_import_of_nightowl_goes_through_paramiko_import() -> None:
    direct = re.compile(r"^\s*(?:import paramiko\b|from paramiko[\s.])", re.MULTILINE)
    offenders = []
    for path in sorted((ROOT / "nightowl").rglob("*.py")):
        text = path.read_text()
        if path.name == "paramiko_import.py":
            continue
        for match in direct.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            if "TYPE_CHECKING" not in text[max(0, match.start() - 40) : match.start()]:
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []
