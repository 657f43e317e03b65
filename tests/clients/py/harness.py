"""What the Python client scripts (conformance.py, approvals.py) share: the environment, the
server to connect to, checks, outputSchema validation and the one JSON report line on stdout:
{"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.

Environment:
  ERA        legacy (initialize), auto (server/discover, then fallback) or 2026-07-28 (pinned)
  TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
"""

import json
import os

from jsonschema import Draft202012Validator
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ERA = os.environ.get("ERA", "legacy")
TRANSPORT = os.environ.get("TRANSPORT", "stdio")


def server():
    if TRANSPORT == "stdio":
        # The README's Claude Desktop entry: {"command": "/path/to/sdkbox", "args": ["serve", "--demo"]}
        # The client's default environment, plus the type-check setting the test gives.
        env = get_default_environment()
        if os.environ.get("SDKBOX_TYPECHECK"):
            env["SDKBOX_TYPECHECK"] = os.environ["SDKBOX_TYPECHECK"]
        return StdioServerParameters(command=os.environ["SDKBOX_BIN"], args=["serve", "--demo"], env=env)
    # The README's remote entry: the MCP URL with `Authorization: Bearer $SDKBOX_TOKEN`.
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {os.environ['SDKBOX_TOKEN']}"})
    return streamable_http_client(os.environ["SDKBOX_URL"], http_client=http)


def framework_env():
    """The environment an agent framework starts `sdkbox serve --demo` with over stdio: PATH,
    no model download, and the type-check setting the test gives."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SDKBOX_NO_MODEL": "1"}
    if os.environ.get("SDKBOX_TYPECHECK"):
        env["SDKBOX_TYPECHECK"] = os.environ["SDKBOX_TYPECHECK"]
    return env


def bearer():
    """The README's remote entry's header: `Authorization: Bearer $SDKBOX_TOKEN`."""
    return {"Authorization": f"Bearer {os.environ['SDKBOX_TOKEN']}"}


def text(result):
    return "\n".join(c.text for c in result.content if c.type == "text")


checks = {}
validators = {}


async def check(name, body):
    try:
        await body()
        checks[name] = "ok"
    except Exception as error:  # every failure is reported, none ends the run
        checks[name] = f"FAIL: {type(error).__name__}: {error}"


def register(tool):
    """Keeps a validator for the outputSchema a tool declares in tools/list."""
    assert tool.output_schema, f"{tool.name} declares no outputSchema"
    Draft202012Validator.check_schema(tool.output_schema)
    validators[tool.name] = Draft202012Validator(tool.output_schema)


def validate(tool, result):
    # What the SDK does for results without isError, done for every result that has
    # structuredContent (errors too), against the schema tools/list declared.
    if result.structured_content is None:
        assert result.is_error, f"{tool}: a result without isError must carry structuredContent"
        return
    errors = [f"{e.message} at {list(e.path)}" for e in validators[tool].iter_errors(result.structured_content)]
    assert not errors, f"{tool}: structuredContent does not match outputSchema: {errors}"


async def call(client, name, arguments, **options):
    """tools/call, validated."""
    result = await client.call_tool(name, arguments, **options)
    validate(name, result)
    return result


def report(protocol):
    print(json.dumps({"client": "python", "protocol": protocol, "checks": checks}), flush=True)
