"""The HolmesGPT toolset installs as its README says (issue 45 item 8), checked without HolmesGPT or a network.

`pip install holmesgpt==0.45.0 'nightowl[mcp]'` cannot resolve (the MCP SDK pins below never meet), so the
README installs each in its own virtualenv and HolmesGPT starts nightowl's executable over stdio. Here:
the pins really exclude one environment, the recipe's commands agree with toolset.yaml and mcp.yaml, the
toolset has only keys HolmesGPT's toolset model takes (it refuses others) with the guidance where HolmesGPT
shows it to the model, and nightowl's server answers the handshake HolmesGPT's MCP client sends.
integrations/holmesgpt/check_toolset.py repeats the whole path with a real HolmesGPT.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
HOLMES = ROOT / "integrations" / "holmesgpt"

# HolmesGPT 0.45.0 as published (https://pypi.org/project/holmesgpt/0.45.0/, the wheel's METADATA and source).
HOLMESGPT_VERSION = "0.45.0"
HOLMESGPT_MCP_REQUIREMENT = "mcp==1.28.1"  # METADATA: `Requires-Dist: mcp (==1.28.1)`
# holmes/core/tools.py `class Toolset(BaseModel)`, `model_config = ConfigDict(extra="forbid")`: its fields.
TOOLSET_FIELDS = frozenset(
    {
        "experimental",
        "enabled",
        "name",
        "description",
        "docs_url",
        "icon_url",
        "installation_instructions",
        "prerequisites",
        "tools",
        "tags",
        "config",
        "llm_instructions",
        "transformers",
        "approval_required_tools",
        "expose_remotely",
        "status_refresh_interval_seconds",
        "type",
        "path",
        "status",
        "error",
        "meta",
        "subtype",
    }
)
# holmes/plugins/toolsets/mcp/toolset_mcp.py `class StdioMCPConfig(ToolsetConfig)`.
STDIO_CONFIG_FIELDS = frozenset({"mode", "command", "args", "env", "icon_url", "health_check_tool"})
# mcp 1.28.1 (HolmesGPT's client): mcp/types.py LATEST_PROTOCOL_VERSION, mcp/shared/version.py
# SUPPORTED_PROTOCOL_VERSIONS.
CLIENT_PROTOCOL_VERSION = "2025-11-25"
CLIENT_SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def server() -> dict:
    return yaml.safe_load((HOLMES / "toolset.yaml").read_text())["mcp_servers"]["nightowl"]


def recipe() -> list[str]:
    """The README's install commands: the lines of its ```sh blocks, comments cut."""
    blocks = re.findall(r"```sh\n(.*?)```", (HOLMES / "README.md").read_text(), re.S)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


def test_one_environment_cannot_hold_both_so_the_readme_keeps_two() -> None:
    extra = re.search(r"^mcp = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)  # nightowl[mcp]
    assert extra is not None
    ours = next(Requirement(r) for r in re.findall(r'"([^"]+)"', extra.group(1)) if Requirement(r).name == "mcp")
    theirs = Requirement(HOLMESGPT_MCP_REQUIREMENT)
    (pinned,) = [Version(s.version) for s in theirs.specifier if s.operator == "=="]
    assert pinned not in ours.specifier  # HolmesGPT's only mcp is one nightowl[mcp] refuses: unresolvable
    commands = recipe()
    venvs = [line.split()[-1] for line in commands if re.search(r"python3 -m venv ", line)]
    assert len(venvs) == 2 and len(set(venvs)) == 2
    pip_installs = [line.split() for line in commands if "/bin/pip install " in line]
    by_package = {words[-1]: words[-3].removesuffix("/bin/pip") for words in pip_installs}
    assert set(by_package) == {"'nightowl[mcp]'", f"holmesgpt=={HOLMESGPT_VERSION}"}  # one package per install
    nightowl_env, holmes_env = by_package["'nightowl[mcp]'"], by_package[f"holmesgpt=={HOLMESGPT_VERSION}"]
    assert sorted(venvs) == sorted([nightowl_env, holmes_env])  # each into its own virtualenv
    # HolmesGPT starts the nightowl of nightowl's environment, with the config the recipe installs
    config = server()["config"]
    assert config["command"] == f"{nightowl_env}/bin/nightowl"
    assert any(line.startswith(config["command"]) and " mcp " in f"{line} " for line in commands)
    (placed,) = [line.split()[-1] for line in commands if re.search(r"install -D .*mcp\.yaml ", line)]
    assert config["args"] == ["mcp", "--config", placed]
    asks = [line for line in commands if re.search(r"holmes ask ", line)]
    assert asks and all(line.startswith(f"{holmes_env}/bin/holmes ask -t toolset.yaml ") for line in asks)


def test_the_toolset_has_only_keys_holmesgpt_takes_and_the_guidance_in_llm_instructions() -> None:
    entry = server()
    assert set(entry) <= TOOLSET_FIELDS, set(entry) - TOOLSET_FIELDS
    assert entry["config"]["mode"] == "stdio" and set(entry["config"]) <= STDIO_CONFIG_FIELDS
    assert all(isinstance(a, str) for a in entry["config"]["args"])
    guidance = entry["llm_instructions"]
    for needed in ("Never replace", "bundle_id", "bundle_sha256", "exactly as nightowl gave them", "invasive"):
        assert needed in guidance, needed
    assert "{{" not in guidance and "{%" not in guidance  # HolmesGPT renders instructions as a Jinja template
    # `description` is what the model sees only for a disabled or failed toolset: what it is, no guidance
    assert not re.search(r"never|report|cite", entry["description"], re.I)


def test_the_instructions_name_every_tool_the_server_has() -> None:
    from nightowl.mcp.tools import Toolbox

    found = re.search(r"nightowl's tools \(([^)]*)\)", server()["llm_instructions"])
    assert found is not None
    assert sorted(found.group(1).split(", ")) == sorted(Toolbox(lambda request: {}).tools())


def test_nightowl_answers_the_handshake_holmesgpts_mcp_client_sends(tmp_path: Path) -> None:
    """HolmesGPT's client (mcp 1.28.1) offers its latest protocol version; nightowl's server (mcp 2.x) must
    agree on one that client supports, list its tools and answer a call over plain stdio."""
    from tests.mcp.test_mcp import raw_session

    answers = raw_session(False, CLIENT_PROTOCOL_VERSION, tmp_path)
    assert [a.get("id") for a in answers] == [1, 2, 3, 4], answers
    assert answers[0]["result"]["protocolVersion"] in CLIENT_SUPPORTED_VERSIONS
    listed = {tool["name"] for tool in answers[1]["result"]["tools"]}
    assert {"list_runbooks", "explain_xid", "triage", "read_bundle", "history", "parse", "plan"} <= listed
    assert not answers[3]["result"].get("isError") and "GPU_HAS_FALLEN_OFF_THE_BUS" in str(answers[3]["result"])
