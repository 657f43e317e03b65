"""sdkbox through LangChain's MCP adapters (langchain-mcp-adapters, pinned in
requirements.txt beside this file), as a LangGraph or LangChain agent gets its tools: through
`MultiServerMCPClient.get_tools()`, each tool a LangChain tool whose results are a model's
content and an artifact. The tools are invoked as a model's tool calls are; no model is
involved. Prints one JSON report line: {"client", "protocol", "checks": {name: "ok" | "FAIL:
why"}}.

Environment:
  TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
"""

import asyncio
import json
import os
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient

# The Python client's harness (checks and their report); no __pycache__ is left.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "py"))
from harness import TRANSPORT, bearer, check, checks, framework_env  # noqa: E402


def connection():
    if TRANSPORT == "stdio":
        args = ["serve", "--demo"]
        return {"command": os.environ["SDKBOX_BIN"], "args": args, "transport": "stdio", "env": framework_env()}
    return {"url": os.environ["SDKBOX_URL"], "transport": "streamable_http", "headers": bearer()}


def text(content):
    """The text LangChain gives the model from a tool's content blocks."""
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))


async def main():
    tools = {t.name: t for t in await MultiServerMCPClient({"sdkbox": connection()}).get_tools()}

    async def called(name, args):
        """A model's tool call, as an agent makes it: a ToolMessage back."""
        return await tools[name].ainvoke({"type": "tool_call", "id": "call_1", "name": name, "args": args})

    async def two_tools():
        assert set(tools) == {"search_docs", "execute"}, sorted(tools)

    async def search():
        message = await called("search_docs", {"query": "refund an order"})
        assert "api.refunds.create" in text(message.content), message

    async def execute_with_the_structured_result_as_artifact():
        message = await called("execute", {"code": "return (await api.orders.list({ limit: 2 })).data.length"})
        assert text(message.content).startswith("2"), message
        structured = (message.artifact or {}).get("structured_content") or {}
        assert structured.get("ok") is True and structured.get("result") == 2, message.artifact

    async def an_error_reaches_the_model_as_text():
        message = await called("execute", {"code": "throw new Error('boom')"})
        assert "error (runtime): boom" in text(message.content), message

    await check("two_tools", two_tools)
    await check("search", search)
    await check("execute_with_the_structured_result_as_artifact", execute_with_the_structured_result_as_artifact)
    await check("an_error_reaches_the_model_as_text", an_error_reaches_the_model_as_text)
    print(json.dumps({"client": "langchain-mcp-adapters", "protocol": TRANSPORT, "checks": checks}), flush=True)


asyncio.run(main())
