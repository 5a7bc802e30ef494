"""Check toolset.yaml with a real HolmesGPT: run it with HolmesGPT's own Python (README.md here, step 2).

    ~/.venvs/holmes/bin/python check_toolset.py [--command /opt/nightowl/bin/nightowl] [--config /etc/nightowl/mcp.yaml]

HolmesGPT loads the toolset as its config would (an ``mcp_servers`` entry), starts nightowl's MCP server
over stdio from nightowl's own environment, lists its tools, calls ``explain_xid`` for Xid 79, and renders
the toolsets part of its system prompt; exits 1 when any step fails. It uses HolmesGPT internals
(``ToolsetManager``, the ``_toolsets_instructions.jinja2`` prompt) as of 0.45.0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from unittest.mock import MagicMock

import yaml
from holmes.core.tools import ToolInvokeContext, ToolsetStatusEnum
from holmes.core.toolset_manager import ToolsetManager
from holmes.plugins.prompts import load_and_render_prompt

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command", help="nightowl's executable (default: the toolset's)")
    parser.add_argument("--config", help="the MCP server's config (default: the toolset's)")
    args = parser.parse_args()
    servers = yaml.safe_load((HERE / "toolset.yaml").read_text())["mcp_servers"]
    config = servers["nightowl"]["config"]
    if args.command:
        config["command"] = args.command
    if args.config:
        config["args"] = [*config["args"][:-1], args.config]
    toolsets = ToolsetManager(mcp_servers=servers)._list_all_toolsets(check_prerequisites=True)
    toolset = next(t for t in toolsets if t.name == "nightowl")
    tools = sorted(t.name for t in toolset.tools)
    print(f"status: {toolset.status.value}{f' ({toolset.error})' if toolset.error else ''}; tools: {tools}")
    if toolset.status != ToolsetStatusEnum.ENABLED or "explain_xid" not in tools:
        return 1
    tool = next(t for t in toolset.tools if t.name == "explain_xid")
    context = ToolInvokeContext.model_construct(
        llm=MagicMock(), max_token_count=100_000, tool_call_id="check", tool_name="explain_xid"
    )
    answer = tool._invoke({"codes": [79]}, context)
    print(f"explain_xid 79: {answer.status.value}: {str(answer.data)[:120]}")
    prompt = load_and_render_prompt("builtin://_toolsets_instructions.jinja2", {"toolsets": [toolset]})
    shown = bool(toolset.llm_instructions) and str(toolset.llm_instructions) in prompt
    print(f"llm_instructions in the model's prompt: {shown}")
    return 0 if shown and "GPU_HAS_FALLEN_OFF_THE_BUS" in str(answer.data) else 1


if __name__ == "__main__":
    sys.exit(main())
