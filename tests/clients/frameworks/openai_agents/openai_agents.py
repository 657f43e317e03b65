"""sdkbox through the OpenAI Agents SDK's MCP integration (openai-agents, pinned in
requirements.txt beside this file) with strict schemas (`convert_schemas_to_strict=True`), as
an agent built on it gives the tools to a model. Strict mode makes every optional property
required, so a model sends each one: empty strings for filters and 0 for numbers it does not
mean. The tools are called through the SDK's own function tools (`MCPUtil.to_function_tool`,
`on_invoke_tool`), with arguments such a model sends; no model is involved. Prints one JSON
report line: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.

Environment:
  TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
"""

import asyncio
import json
import os
import sys

from agents.mcp import MCPServerStdio, MCPServerStreamableHttp, MCPUtil
from agents.tool_context import ToolContext

# The Python client's harness (checks and their report), next door; no __pycache__ is left.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "py"))
from harness import TRANSPORT, bearer, check, checks, framework_env  # noqa: E402


def server():
    if TRANSPORT == "stdio":
        params = {"command": os.environ["SDKBOX_BIN"], "args": ["serve", "--demo"], "env": framework_env()}
        return MCPServerStdio(params=params, cache_tools_list=True)
    params = {"url": os.environ["SDKBOX_URL"], "headers": bearer()}
    return MCPServerStreamableHttp(params=params, cache_tools_list=True)


def text_of(output):
    """What the SDK hands the model: the tool's text."""
    if isinstance(output, dict):
        return output.get("text", "")
    return str(output)


async def main():
    async with server() as mcp:
        tools = {t.name: MCPUtil.to_function_tool(t, mcp, True) for t in await mcp.list_tools()}

        async def call(name, arguments):
            raw = json.dumps(arguments)
            context = ToolContext(context=None, tool_name=name, tool_call_id="call_1", tool_arguments=raw)
            return text_of(await tools[name].on_invoke_tool(context, raw))

        async def strict_schemas():
            assert set(tools) == {"search_docs", "execute"}, sorted(tools)
            for name, tool in tools.items():
                assert tool.strict_json_schema, f"{name}: the SDK could not make its schema strict"
                schema = tool.params_json_schema
                assert sorted(schema["required"]) == sorted(schema["properties"]), f"{name}: {schema}"

        async def search_with_every_field_sent():
            # Filters the model does not mean, sent empty, as strict mode has it send them.
            text = await call("search_docs", {"query": "refund an order", "limit": 5, "detail": "compact", "method": "", "group": ""})
            assert "api.refunds.create" in text, text

        async def execute_with_every_field_sent():
            # A number the model does not mean, sent as 0: the server's time limit.
            text = await call("execute", {"code": "return (await api.orders.list({ limit: 2 })).data.length", "timeout_ms": 0, "dry_run": False})
            assert text.startswith("2"), text

        async def an_error_reaches_the_model_as_text():
            text = await call("execute", {"code": "throw new Error('boom')", "timeout_ms": 0, "dry_run": False})
            assert "boom" in text and "error" in text.lower(), text

        await check("strict_schemas", strict_schemas)
        await check("search_with_every_field_sent", search_with_every_field_sent)
        await check("execute_with_every_field_sent", execute_with_every_field_sent)
        await check("an_error_reaches_the_model_as_text", an_error_reaches_the_model_as_text)
    print(json.dumps({"client": "openai-agents", "protocol": TRANSPORT, "checks": checks}), flush=True)


asyncio.run(main())
