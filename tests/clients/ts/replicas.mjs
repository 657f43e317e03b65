// A replica killed while a write it sent is in flight: an official TypeScript client, which
// approves every write, runs a script creating one customer on replica VICTIM_URL directly;
// once the provider has the write (and holds its response), the script kills that replica
// (VICTIM_PID). The call fails. The client then runs the same code again through the balancer
// (BALANCED_URL), in the same session (handshake era) or as the same caller (2026-07-28): the
// write must not be sent again, the re-run must say so, and nobody is asked again.
// Prints one JSON report line: {"client", "protocol", "checks", "name"}.
//
// Environment: SDK, ERA (as harness.mjs), VICTIM_URL, VICTIM_PID, BALANCED_URL, SDKBOX_TOKEN,
// PROVIDER (the provider's origin, whose /test/writes?text= counts the writes it received),
// SIGNAL (SIGKILL, or SIGTERM for a replica whose shutdown grace runs out first), HELD (the
// provider's mark for how long it holds the write: slow or stuck).

import { assert, check, checks, modules, negotiation, sdk } from "./harness.mjs";

const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const headers = { Authorization: `Bearer ${env("SDKBOX_TOKEN")}` };
const held = process.env.HELD ?? "slow";
const signal = process.env.SIGNAL ?? "SIGKILL";
const name = `${held}-approve-${sdk}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
const code = `return await api.customers.create({ name: ${JSON.stringify(name)}, email: "kill@example.com" });`;

let asked = 0;
function client() {
  const made = new modules.client.Client(
    { name: "sdkbox-replicas", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } }, ...negotiation },
  );
  const approve = async () => {
    asked += 1;
    return { action: "accept", content: { decision: "approve" } };
  };
  if (sdk === "v1") made.setRequestHandler(modules.types.ElicitRequestSchema, approve);
  else made.setRequestHandler("elicitation/create", approve);
  return made;
}
const transport = (url, sessionId) =>
  new modules.http.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, sessionId });
const call = (made, args, options) =>
  sdk === "v1" ? made.callTool({ name: "execute", arguments: args }, undefined, options) : made.callTool({ name: "execute", arguments: args }, options);
const writes = async () => {
  const response = await fetch(`${env("PROVIDER")}/test/writes?text=${encodeURIComponent(name)}`);
  return Number(await response.text());
};

const first = client();
const direct = transport(env("VICTIM_URL"));
await first.connect(direct);

await check("killed_mid_write", async () => {
  const pending = call(first, { code }, { timeout: 15000 }).then(
    (result) => ({ result }),
    (error) => ({ error: String(error?.message ?? error) }),
  );
  const started = Date.now();
  while ((await writes()) < 1) {
    assert(Date.now() - started < 30000, "the write never reached the provider");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  process.kill(Number(env("VICTIM_PID")), signal);
  const ended = await pending;
  assert(ended.error !== undefined || ended.result?.isError, `the call on the killed replica did not fail: ${JSON.stringify(ended)}`);
  assert(asked === 1, `the user was asked ${asked} times before the kill`);
});

await check("rerun_sends_nothing_and_says_so", async () => {
  // The same session through the balancer (handshake era), or the same caller (2026-07-28).
  const again = client();
  await again.connect(transport(env("BALANCED_URL"), direct.sessionId));
  const result = await call(again, { code }, { timeout: 60000 });
  const outcome = result.structuredContent ?? {};
  const message = outcome.error?.message ?? "";
  assert(outcome.ok === false && /sent by an earlier run/.test(message) && /no response came back/.test(message), `re-run: ${JSON.stringify(outcome)}`);
  assert((await writes()) === 1, `the provider received the write ${await writes()} times`);
  assert(asked === 1, `the user was asked ${asked} times in all, not once`);
});

const protocol = typeof first.getNegotiatedProtocolVersion === "function" ? first.getNegotiatedProtocolVersion() : "2025-11-25";
console.log(JSON.stringify({ client: `typescript-${sdk}`, protocol, checks, name }));
process.exit(0);
