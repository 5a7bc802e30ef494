"""The HolmesGPT toolset starts the server this repository ships, with a config the server accepts."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HOLMES = ROOT / "integrations" / "holmesgpt"


def test_the_holmesgpt_toolset_starts_nightowl_mcp_with_its_example_config() -> None:
    from nightowl.mcp.config import load_config

    server = yaml.safe_load((HOLMES / "toolset.yaml").read_text())["mcp_servers"]["nightowl"]
    assert server["config"]["mode"] == "stdio"
    # nightowl's own virtualenv's executable (HolmesGPT lives in another: tests/deploy/test_holmes_toolset.py)
    assert [Path(server["config"]["command"]).name, *server["config"]["args"][:1]] == ["nightowl", "mcp"]
    assert server["config"]["args"][1:] == ["--config", "/etc/nightowl/mcp.yaml"]
    assert load_config(HOLMES / "mcp.yaml").hosts == ("local",)


def test_the_skill_names_only_tools_the_server_has() -> None:
    import re

    from nightowl.mcp.tools import Toolbox

    text = (HOLMES / "skill.md").read_text()
    named = set(re.findall(r"^\d\. `(\w+)`|`(\w+)` gives|`(\w+)` on|`(\w+)` shows|^\d\. `(\w+)` the", text, re.M))
    steps = {name for group in named for name in group if name}
    assert steps == {"list_runbooks", "explain_xid", "triage", "read_bundle", "history"}
    assert steps <= set(Toolbox(lambda request: {}).tools())
