"""Drives the real sdkbox binary with the official MCP Python SDK client and prints one JSON
report line: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}. Run by
tests/it/clients.rs, which asserts every check ran and passed. The setup it shares with
approvals.py (environment, server, checks, validation, the report) is in harness.py.

Environment (read by harness.py):
  ERA        legacy (initialize), auto (server/discover, then fallback) or 2026-07-28 (pinned)
  TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
"""

import asyncio
import base64
import json
import os
import sys
import time

import anyio
from mcp import Client, MCPError

# harness.py sits next to this script; no __pycache__ is left in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ERA, TRANSPORT, check, register, report, server, text  # noqa: E402
from harness import call as validated_call  # noqa: E402


async def main():
    async with Client(server(), mode=ERA) as client:

        async def call(name, arguments):
            return await validated_call(client, name, arguments)

        async def tools():
            listed = (await client.list_tools()).tools
            names = sorted(t.name for t in listed)
            assert names == ["execute", "search_docs"], names
            for tool in listed:
                register(tool)
            size = len(json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in listed]))
            assert size / 4 < 1000, f"tools/list is about {size // 4} tokens"

        async def search_hits():
            result = await call("search_docs", {"query": "refund an order"})
            assert result.structured_content["hits"][0]["id"] == "api.refunds.create", result.structured_content
            assert "POST /refunds" in text(result), text(result)

        async def search_no_hits():
            result = await call("search_docs", {"query": "zzqx wvvy"})
            assert result.structured_content["hits"] == [], result.structured_content
            assert isinstance(result.structured_content["hint"], str), result.structured_content

        async def search_hint():
            result = await call("search_docs", {"query": "list", "group": "ordrs"})
            assert "did you mean `orders`" in result.structured_content["hint"], result.structured_content

        async def search_empty_filters():
            # As the OpenAI Agents SDK's strict schemas make a model send them: every optional
            # property present, the filters it did not mean empty.
            args = {"query": "refund an order", "limit": 5, "detail": "compact", "method": "", "group": ""}
            result = await call("search_docs", args)
            assert result.structured_content["hits"][0]["id"] == "api.refunds.create", result.structured_content

        async def execute_ok():
            code = (
                "const paid = [];\n"
                "for await (const o of api.paginate(api.orders.list, { status: 'paid', limit: 4 })) paid.push(o.id);\n"
                "return { count: paid.length, first: paid[0] };"
            )
            result = await call("execute", {"code": code})
            assert not result.is_error, text(result)
            outcome = result.structured_content
            assert outcome["ok"] and outcome["result"] == {"count": 10, "first": "ord_001"}, outcome
            assert len(outcome["http"]) == 3, f"pages of 4: {outcome['http']}"

        async def execute_script_error():
            result = await call("execute", {"code": "const a = 1;\nreturn a.b.c;"})
            assert result.is_error, "a script error is a tool error"
            assert result.structured_content["error"]["kind"] == "runtime", result.structured_content
            assert "error (runtime)" in text(result) and "2 | return a.b.c;" in text(result), text(result)

        async def execute_syntax_error():
            result = await call("execute", {"code": "return (1 +;"})
            assert result.is_error and result.structured_content["error"]["kind"] == "syntax", result.structured_content

        async def execute_truncated():
            code = "return Array.from({ length: 5000 }, (_, i) => ({ i, s: 'x'.repeat(20) }));"
            outcome = (await call("execute", {"code": code})).structured_content
            cut = outcome.get("truncated") or {}
            assert outcome["ok"] and cut.get("original_chars", 0) > cut.get("limit_chars", 0), cut
            assert isinstance(outcome["result"], list) and len(outcome["result"]) < 5000, "the result is cut structurally"

        async def execute_cancelled():
            # The script would create a customer after 4 s; cancelled at 0.3 s, it must not (the
            # margin is for a loaded machine).
            marker = f"cancelled-py-{ERA}-{TRANSPORT}-{time.time_ns()}@example.com"
            code = (
                "await new Promise((r) => setTimeout(r, 4000)); "
                f"await api.customers.create({{ email: {json.dumps(marker)} }}); return 'not cancelled';"
            )
            with anyio.move_on_after(0.3) as scope:
                await client.call_tool("execute", {"code": code})
            assert scope.cancelled_caught, "the call resolved although it was cancelled"
            await anyio.sleep(5)
            find = (
                "const all = []; for await (const c of api.paginate(api.customers.list, { limit: 100 })) all.push(c.email); "
                f"return all.includes({json.dumps(marker)});"
            )
            after = await call("execute", {"code": find})
            assert after.structured_content["result"] is False, "the cancelled script went on and created the customer"

        async def execute_files():
            # Files returned to the client: the demo's PNG as image content, a CSV as an
            # embedded resource, and a file too large to go inline as a resource link read
            # back byte for byte.
            code = "\n".join([
                'const picture = await api.products.getImage({ product_id: "prod_001" });',
                'const csv = sdkbox.file("id,total\\nord_001,4999\\n", { name: "orders.csv", type: "text/csv" });',
                'const big = sdkbox.file(new Uint8Array(300000).map((_, i) => i % 251), { name: "big.bin" });',
                'return { picture: sdkbox.file(picture, { name: "anvil.png" }), csv, big };',
            ])
            result = await call("execute", {"code": code})
            assert not result.is_error, text(result)
            kinds = [c.type for c in result.content]
            image = next(c for c in result.content if c.type == "image")
            assert image.mime_type == "image/png" and base64.b64decode(image.data)[1:4] == b"PNG", kinds
            embedded = next(c for c in result.content if c.type == "resource")
            assert embedded.resource.mime_type == "text/csv", kinds
            assert embedded.resource.text == "id,total\nord_001,4999\n", embedded.resource
            link = next(c for c in result.content if c.type == "resource_link")
            assert link.name == "big.bin" and link.size == 300000, link
            read = await client.read_resource(str(link.uri))
            data = base64.b64decode(read.contents[0].blob)
            assert data == bytes(i % 251 for i in range(300000)), f"read back {len(data)} bytes"
            names = [f["name"] for f in result.structured_content["files"]]
            assert names == ["anvil.png", "orders.csv", "big.bin"], names

        async def argument_error():
            result = await call("execute", {"code": 42})
            assert result.is_error, "a wrong argument is a tool error"
            assert "`code`: invalid type: integer `42`, expected a string" in text(result), text(result)
            unknown = await call("search_docs", {"query": "orders", "limt": 3})
            assert unknown.is_error and "unknown field `limt`" in text(unknown), text(unknown)

        async def unknown_tool():
            message = ""
            try:
                result = await client.call_tool("delete_everything", {})
                message = text(result) if result.is_error else ""
            except MCPError as error:
                message = str(error)
            assert "delete_everything" in message, f"the error should name the tool: {message}"

        async def malformed_request():
            # `arguments` must be an object; the dispatcher sends what the typed API would refuse.
            message = ""
            try:
                await client.session._dispatcher.send_raw_request(
                    "tools/call", {"name": "execute", "arguments": "return 1"}, {}
                )
            except MCPError as error:
                message = str(error)
            assert message, "a malformed tools/call must be refused"

        async def still_serving():
            result = await call("execute", {"code": "return 'still serving'"})
            assert result.structured_content["result"] == "still serving", result.structured_content

        for name, body in [
            ("tools", tools),
            ("search_hits", search_hits),
            ("search_no_hits", search_no_hits),
            ("search_hint", search_hint),
            ("search_empty_filters", search_empty_filters),
            ("execute_ok", execute_ok),
            ("execute_script_error", execute_script_error),
            ("execute_syntax_error", execute_syntax_error),
            ("execute_truncated", execute_truncated),
            ("execute_cancelled", execute_cancelled),
            ("execute_files", execute_files),
            ("argument_error", argument_error),
            ("unknown_tool", unknown_tool),
            ("malformed_request", malformed_request),
            ("still_serving", still_serving),
        ]:
            await check(name, body)
        protocol = client.protocol_version
    report(protocol)


asyncio.run(main())
