// The type check through an official MCP TypeScript client: sdkbox on stdio serving the demo
// with TypeScript 7 (SDKBOX_ARGS: serve --demo --tsc PATH --writes allow). Mistakes in SDK
// calls are refused before the provider receives anything, though the check runs while the
// script does (its requests wait for the verdict); a syntax error is kind syntax; a correct
// write runs; an undeclared response property is a warning, not a refusal; the compiler
// killed mid-session is replaced and the next execute is checked. One JSON report line, as harness.mjs prints.

import { execFileSync } from "node:child_process";
import { assert, callTool as call, check, modules, negotiation, register, report, sdk, text, transport } from "./harness.mjs";

const client = new modules.client.Client({ name: `sdkbox-typecheck-${sdk}`, version: "1.0.0" }, { ...negotiation });
const wire = transport();
await client.connect(wire);
const callTool = (name, args) => call(client, name, args);
const { tools } = await client.listTools();
for (const tool of tools) register(tool);

// What the demo provider holds, read through a script the check lets through.
async function count(what, name) {
  const code = `let n = 0; for await (const x of api.paginate(api.${what}.list, {})) if (${name ? `x.customer === ${JSON.stringify(name)} || (x as any).name === ${JSON.stringify(name)}` : "true"}) n++; return n;`;
  const result = await callTool("execute", { code });
  assert(result.structuredContent?.ok === true, text(result));
  return result.structuredContent.result;
}

async function refused(code, words) {
  const result = await callTool("execute", { code });
  const outcome = result.structuredContent;
  assert(result.isError === true && outcome.error?.kind === "type", `not refused by the check: ${text(result)}`);
  assert(outcome.http.length === 0, `requests were made: ${JSON.stringify(outcome.http)}`);
  for (const word of words) assert(outcome.error.message.includes(word), `"${word}" not in: ${outcome.error.message}`);
  assert(typeof outcome.error.line === "number" && outcome.error.excerpt?.includes("^"), JSON.stringify(outcome.error));
  return outcome;
}

await check("misspelled_method", async () => {
  const customers = await count("customers");
  await refused("await api.customers.create({ email: 'tc@example.com', name: 'tc-first' });\nreturn await api.customers.lst({ limit: 2 });", ["TS2551", "did you mean api.customers.list (GET /customers"]);
  assert((await count("customers")) === customers, "the write before the mistake was sent");
});

await check("wrong_parameter", async () => {
  const orders = await count("orders");
  await refused("return api.orders.create({ customer: 'cus_001', items: [{ product: 'prod_001', quantity: '2' }] });", ["TS2322", "number"]);
  assert((await count("orders")) === orders, "an order was placed");
});

await check("missing_required", async () => {
  await refused("return api.customers.create({ name: 'no email' });", ["TS2741", "email"]);
});

// Code that takes the compiler a while (hundreds of lines): its verdict comes well after the
// script's first request would have left.
const padding = Array.from({ length: 600 }, (_, i) => `const v${i} = [${i}, 2, 3].map((a) => a * 2).filter((b) => b > 1);`).join("\n");

await check("raw_write_held_for_the_verdict", async () => {
  // The check runs while the script does: the raw write before the mistake waits for the
  // verdict, which stops the script, so it never leaves.
  const customers = await count("customers");
  await refused(`await api.request('POST', '/customers', { body: { email: 'raw@example.com', name: 'tc-raw' } });\n${padding}\nreturn api.orders.lst();`, ["TS2551"]);
  assert((await count("customers")) === customers, "the raw write before the mistake was sent");
});

await check("busy_script_stopped_by_the_verdict", async () => {
  // A script that never sends anything is still ended by a stopping verdict, not by its
  // 30 s deadline (a hang guard, not a timing: the verdict comes in milliseconds).
  const started = Date.now();
  const outcome = await refused("while (true) {}\nreturn api.orders.lst();", ["TS2551"]);
  assert(outcome.error.kind === "type", JSON.stringify(outcome.error));
  assert(Date.now() - started < 15000, `the loop ran ${Date.now() - started} ms: the verdict did not end it`);
});

await check("syntax_error_is_syntax", async () => {
  const result = await callTool("execute", { code: "return api.orders.list({ status: );" });
  const outcome = result.structuredContent;
  assert(result.isError === true && outcome.error?.kind === "syntax", `not a syntax error: ${text(result)}`);
  assert(outcome.http.length === 0, JSON.stringify(outcome.http));
});

await check("correct_write_runs", async () => {
  const result = await callTool("execute", { code: "const c = await api.customers.create({ email: 'ok@example.com', name: 'tc-ok' });\nreturn c.id;" });
  assert(result.structuredContent?.ok === true, text(result));
  assert(result.structuredContent.warnings === undefined, JSON.stringify(result.structuredContent.warnings));
});

await check("undeclared_property_warns", async () => {
  const result = await callTool("execute", { code: "const l = await api.customers.list({ limit: 1 });\nreturn (l as any).total ?? l.dataa;" });
  const outcome = result.structuredContent;
  assert(outcome?.ok === true && outcome.http.length === 1, text(result));
  assert(outcome.warnings?.some((w) => w.includes("dataa") && w.includes("Did you mean 'data'?")), JSON.stringify(outcome.warnings));
  assert(text(result).includes("type check warnings"), text(result));
});

await check("checker_replaced", async () => {
  // The compiler is the server's child: kill it, then the next execute is checked by a new one.
  const children = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(wire.pid)]).toString();
  const line = children.split("\n").find((l) => l.includes("--lsp"));
  assert(line, `no compiler among the server's children:\n${children}`);
  process.kill(Number(line.trim().split(/\s+/)[0]), "SIGKILL");
  await new Promise((r) => setTimeout(r, 300));
  await refused("return api.orders.lst();", ["TS2551"]);
});

await report(client);
