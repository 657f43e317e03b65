"""sdkbox through pydantic-ai's MCP toolset (pydantic-ai-slim[mcp], pinned in requirements.txt
beside this file), as a pydantic-ai agent calls its tools: `MCPToolset.direct_call_tool`, the
path an agent's tool calls take, which hands the model the result's `structuredContent` (all
of it when the content is text) and turns a tool error into a `ModelRetry` for the model to
correct. No model is involved. Prints one JSON report line: {"client", "protocol", "checks":
{name: "ok" | "FAIL: why"}}.

Environment:
  TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
"""

import asyncio
import json
import os
import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.mcp import MCPToolset

# The Python client's harness (checks and their report); no __pycache__ is left.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "py"))
from harness import TRANSPORT, bearer, check, checks, framework_env  # noqa: E402


def toolset():
    if TRANSPORT == "stdio":
        return MCPToolset(StdioTransport(command=os.environ["SDKBOX_BIN"], args=["serve", "--demo"], env=framework_env()))
    return MCPToolset(os.environ["SDKBOX_URL"], headers=bearer())


async def main():
    async with toolset() as tools:

        async def search_gives_the_structured_hits():
            result = await tools.direct_call_tool("search_docs", {"query": "refund an order"})
            ids = [hit.get("id") for hit in result.get("hits", [])]
            assert "api.refunds.create" in ids, result

        async def execute_gives_the_structured_outcome():
            result = await tools.direct_call_tool("execute", {"code": "return (await api.orders.list({ limit: 2 })).data.length"})
            assert result.get("ok") is True and result.get("result") == 2, result

        async def an_error_is_a_retry_for_the_model():
            try:
                result = await tools.direct_call_tool("execute", {"code": "throw new Error('boom')"})
            except ModelRetry as retry:
                outcome = json.loads(str(retry))
                assert outcome["error"]["kind"] == "runtime" and outcome["error"]["message"] == "boom", outcome
            else:
                raise AssertionError(f"no ModelRetry: {result}")

        await check("search_gives_the_structured_hits", search_gives_the_structured_hits)
        await check("execute_gives_the_structured_outcome", execute_gives_the_structured_outcome)
        await check("an_error_is_a_retry_for_the_model", an_error_is_a_retry_for_the_model)
    print(json.dumps({"client": "pydantic-ai", "protocol": TRANSPORT, "checks": checks}), flush=True)


asyncio.run(main())
