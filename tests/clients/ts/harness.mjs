// What the TypeScript client scripts (conformance.mjs, approvals.mjs) share: the environment,
// the SDK's modules, the transport, version negotiation, checks, outputSchema validation and
// the one JSON report line on stdout: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.
//
// Environment:
//   SDK        v1 (@modelcontextprotocol/sdk, handshake era only) or v2 (@modelcontextprotocol/client)
//   ERA        legacy (initialize), auto (server/discover, then fallback) or 2026-07-28 (pinned)
//   TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
//   SDKBOX_ARGS  for stdio, the arguments as a JSON array instead of serve --demo (a container
//              started by `podman run -i ...`, as a desktop client would)

import Ajv2020 from "ajv/dist/2020.js";

export const sdk = process.env.SDK ?? "v1";
export const era = process.env.ERA ?? "legacy";
export const transportKind = process.env.TRANSPORT ?? "stdio";

export const modules =
  sdk === "v1"
    ? {
        client: await import("@modelcontextprotocol/sdk/client/index.js"),
        stdio: await import("@modelcontextprotocol/sdk/client/stdio.js"),
        http: await import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
        types: await import("@modelcontextprotocol/sdk/types.js"),
      }
    : {
        client: await import("@modelcontextprotocol/client"),
        stdio: await import("@modelcontextprotocol/client/stdio"),
        http: await import("@modelcontextprotocol/client"),
        types: {},
      };

if (sdk === "v1" && era !== "legacy") {
  throw new Error("@modelcontextprotocol/sdk 1.x speaks only the handshake era");
}

export function transport() {
  if (transportKind === "stdio") {
    // The README's Claude Desktop entry: { "command": "/path/to/sdkbox", "args": ["serve", "--demo"] }
    return new modules.stdio.StdioClientTransport({
      command: process.env.SDKBOX_BIN,
      args: process.env.SDKBOX_ARGS ? JSON.parse(process.env.SDKBOX_ARGS) : ["serve", "--demo"],
      // The client's default environment, plus the type-check setting the test gives.
      env: {
        ...modules.stdio.getDefaultEnvironment(),
        ...(process.env.SDKBOX_TYPECHECK ? { SDKBOX_TYPECHECK: process.env.SDKBOX_TYPECHECK } : {}),
      },
      stderr: "ignore",
    });
  }
  // The README's remote entry: the MCP URL with `Authorization: Bearer $SDKBOX_TOKEN`.
  return new modules.http.StreamableHTTPClientTransport(new URL(process.env.SDKBOX_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.SDKBOX_TOKEN}` } },
  });
}

// The Client options for ERA: none for the handshake era, else auto or a pinned version.
export const negotiation = era === "legacy" ? {} : { versionNegotiation: { mode: era === "auto" ? "auto" : { pin: era } } };

export const checks = {};
export async function check(name, body) {
  try {
    await body();
    checks[name] = "ok";
  } catch (error) {
    checks[name] = `FAIL: ${error?.message ?? error}`;
  }
}
export function assert(condition, message) {
  if (!condition) throw new Error(message);
}

const ajv = new Ajv2020({ strict: false });
const validators = {};
// Compiles the outputSchema a tool declares in tools/list; validate() checks against it.
export function register(tool) {
  assert(tool.outputSchema, `${tool.name} declares no outputSchema`);
  validators[tool.name] = ajv.compile(tool.outputSchema);
}
export const registered = (name) => validators[name] !== undefined;
// What the SDK does for results without isError, done for every result that has
// structuredContent (errors too), against the schema tools/list declared.
export function validate(tool, result) {
  if (result.structuredContent === undefined) {
    assert(result.isError === true, `${tool}: a result without isError must carry structuredContent`);
    return;
  }
  const valid = validators[tool](result.structuredContent);
  assert(valid, `${tool}: structuredContent does not match outputSchema: ${ajv.errorsText(validators[tool].errors)}`);
}
export const text = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

// tools/call, validated. v2's callTool takes (params, options); v1's takes (params, resultSchema, options).
export async function callTool(client, name, args, requestOptions) {
  const result =
    sdk === "v1"
      ? await client.callTool({ name, arguments: args }, undefined, requestOptions)
      : await client.callTool({ name, arguments: args }, requestOptions);
  validate(name, result);
  return result;
}

// Prints the report line (v1 has no negotiation, so its protocol is the handshake era's),
// closes the client and exits.
export async function report(client) {
  const protocol = typeof client.getNegotiatedProtocolVersion === "function" ? client.getNegotiatedProtocolVersion() : "2025-11-25";
  console.log(JSON.stringify({ client: `typescript-${sdk}`, protocol, checks }));
  await client.close();
  process.exit(0);
}
