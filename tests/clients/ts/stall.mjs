// A replica that stalls (SIGSTOP: a long pause, a partition from the state store) while a
// run it serves waits for a write's response, long enough for the others to count it gone:
// the official TypeScript client (1.x, handshake era, approving every write) runs, on replica
// VICTIM_URL, a script that sends a held write (`slow-`), carries on past its failure, and
// sends a second one; once the provider has the first, the replica is stopped. The same code
// run again through the balancer takes the stalled run over (the first write may have been
// sent: refused; the second: sent). When the stalled replica resumes, its run must not send
// the second write again. Prints one JSON report line: {"client", "protocol", "checks"}.
//
// With STALL_IN=read, the stall comes earlier, in a held read before the run's first write:
// with nothing to take over, the re-run runs afresh, and the resumed run must not send the
// write the re-run sent.
//
// Environment: VICTIM_URL, VICTIM_PID, BALANCED_URL, SDKBOX_TOKEN, PROVIDER, STALL_IN.

import { assert, check, checks } from "./harness.mjs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const headers = { Authorization: `Bearer ${env("SDKBOX_TOKEN")}` };
const tag = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
const inRead = process.env.STALL_IN === "read";
const [one, two] = [`slow-stall-one-${tag}`, `stall-two-${tag}`];
// The first step: a held write, or a held read (a page after a cursor that says slow-).
const firstStep = inRead
  ? `await api.customers.list({ limit: 1, starting_after: ${JSON.stringify(one)} });`
  : `await api.customers.create({ name: ${JSON.stringify(one)}, email: "s@example.com" });`;
const code = `let first = "sent";
try { ${firstStep} } catch (e) { first = e.message; }
const second = await api.customers.create({ name: ${JSON.stringify(two)}, email: "s@example.com" });
return { first, second: second.name };`;

let asked = 0;
async function client(url, sessionId) {
  const made = new Client({ name: "sdkbox-stall", version: "1" }, { capabilities: { elicitation: { form: {} } } });
  made.setRequestHandler(ElicitRequestSchema, async () => {
    asked += 1;
    return { action: "accept", content: { decision: "approve" } };
  });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, sessionId });
  await made.connect(transport);
  return { made, transport };
}
const writes = async (text) => Number(await (await fetch(`${env("PROVIDER")}/test/writes?text=${encodeURIComponent(text)}`)).text());
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const pid = Number(env("VICTIM_PID"));

const first = await client(env("VICTIM_URL"));
let stalled;

await check("stalled_mid_write", async () => {
  stalled = first.made
    .callTool({ name: "execute", arguments: { code } }, undefined, { timeout: 60000 })
    .then((result) => ({ result }), (error) => ({ error: String(error?.message ?? error) }));
  const started = Date.now();
  while ((await writes(one)) < 1) {
    assert(Date.now() - started < 30000, "the first write never reached the provider");
    await sleep(20);
  }
  process.kill(pid, "SIGSTOP");
  // Longer than the others wait before they count a silent replica gone.
  await sleep(6000);
});

await check("taken_over_elsewhere", async () => {
  const again = await client(env("BALANCED_URL"), first.transport.sessionId);
  const result = await again.made.callTool({ name: "execute", arguments: { code } }, undefined, { timeout: 60000 });
  const outcome = result.structuredContent ?? {};
  assert(outcome.ok === true && outcome.result?.second === two, `re-run: ${JSON.stringify(outcome)}`);
  // A held write was taken over as maybe sent; a held read is simply read again.
  if (!inRead) {
    assert(/sent by an earlier run/.test(outcome.result?.first ?? ""), `the first write: ${JSON.stringify(outcome.result)}`);
  }
  assert((await writes(two)) === 1, `the second write was received ${await writes(two)} times`);
});

await check("the_stalled_run_sends_nothing_more", async () => {
  process.kill(pid, "SIGCONT");
  const ended = await stalled;
  // The provider held the first write's response; give the resumed run time to go on.
  await sleep(6000);
  assert((await writes(two)) === 1, `after the stalled run resumed, the second write was received ${await writes(two)} times: ${JSON.stringify(ended).slice(0, 800)}`);
  if (!inRead) {
    assert((await writes(one)) === 1, `the first write was received ${await writes(one)} times`);
  }
  const writesSent = inRead ? 1 : 2;
  assert(asked === writesSent, `the user was asked ${asked} times, not ${writesSent} (once per write)`);
});

console.log(JSON.stringify({ client: "typescript-v1", protocol: "2025-11-25", checks }));
process.exit(0);
