"""Runs one execute through the official MCP Python SDK client, approving every write it is
asked about, and prints the call's structuredContent as one JSON line: the traffic behind one
trace (tests/it/traces.rs reads the spans sdkbox exported for it).

Environment (read by harness.py): ERA, TRANSPORT, SDKBOX_URL, SDKBOX_TOKEN; CODE, the script.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.types import ElicitResult

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ERA, server  # noqa: E402


async def approve(context, params):
    return ElicitResult(action="accept", content={"decision": "approve"})


async def main():
    async with Client(server(), mode=ERA, elicitation_callback=approve) as client:
        result = await client.call_tool("execute", {"code": os.environ["CODE"]}, read_timeout_seconds=120)
        print(json.dumps(result.structured_content), flush=True)


asyncio.run(main())
