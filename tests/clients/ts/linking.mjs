// Account linking through an official MCP TypeScript client, signed in to sdkbox (a bearer
// token, SDKBOX_TOKEN) as a user who has not linked their provider account yet. With
// URL_ELICITATION=1 the client declares URL-mode elicitation: sdkbox shows the link through
// elicitation/create, this script plays the browser (following the provider's redirects with
// a cookie jar; the test authorization server consents at once) and accepts, and the same
// execute call goes on with the user's own token. Without it, the call fails with an error of
// kind `link` carrying the link; the script follows it and runs the code again, as a model
// would. One JSON report line, as harness.mjs prints.
//
// Environment: SDK, ERA (harness.mjs; TRANSPORT is http), SDKBOX_URL, SDKBOX_TOKEN,
// SIGNIN_AS and SUBJECT (the sign-in issuer and the user: the link's browser signs in there),
// PROVIDER_AS (the provider's authorization server: its /test/account picks who consents),
// ACCOUNT (that account), URL_ELICITATION.

import { assert, callTool as call, check, modules, negotiation, register, report, sdk, transport } from "./harness.mjs";

const byElicitation = process.env.URL_ELICITATION === "1";
const account = process.env.ACCOUNT;
const capabilities = byElicitation ? { elicitation: { url: {} } } : {};
const client = new modules.client.Client({ name: `sdkbox-linking-${sdk}`, version: "1.0.0" }, { capabilities, ...negotiation });

// The browser: follows redirects by hand with a cookie jar; returns the last page.
async function follow(link) {
  // Who signs in next: at the sign-in issuer (sdkbox checks the link is theirs), at the provider.
  for (const [server, sub] of [[process.env.SIGNIN_AS, process.env.SUBJECT], [process.env.PROVIDER_AS, account]]) {
    await fetch(`${server}/test/account`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ sub }) });
  }
  const jar = new Map();
  let url = new URL(link);
  for (let i = 0; i < 20; i++) {
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join("; ");
    const response = await fetch(url, { redirect: "manual", headers: cookie ? { cookie } : {} });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const at = pair.indexOf("=");
      jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    const location = response.headers.get("location");
    if (location) {
      url = new URL(location, url);
      continue;
    }
    return { status: response.status, body: await response.text() };
  }
  throw new Error("more than 20 redirects");
}

const elicited = [];
async function onElicit(request) {
  const params = request.params;
  elicited.push(params.mode);
  if (params.mode !== "url") return { action: "decline" };
  const page = await follow(params.url);
  return { action: page.body.includes("is linked to sdkbox") ? "accept" : "cancel" };
}
if (byElicitation) {
  if (sdk === "v1") client.setRequestHandler(modules.types.ElicitRequestSchema, onElicit);
  else client.setRequestHandler("elicitation/create", onElicit);
}

await client.connect(transport());
const { tools } = await client.listTools();
for (const tool of tools) register(tool);
const callTool = (name, args) => call(client, name, args, { timeout: 120000 });
const LIST = "return (await api.orders.list()).data[0].owner;";

await check("links_then_acts_as_the_user", async () => {
  let result = await callTool("execute", { code: LIST });
  if (byElicitation) {
    assert(elicited.length === 1 && elicited[0] === "url", `not asked by URL elicitation: ${JSON.stringify(elicited)}`);
  } else {
    const error = result.structuredContent?.error;
    assert(result.isError === true && error?.kind === "link", `no link error: ${JSON.stringify(result.structuredContent)}`);
    const link = error.message.split(/\s+/).find((w) => w.includes("/link/start/"));
    const page = await follow(link);
    assert(page.status === 200 && page.body.includes("is linked to sdkbox"), `not linked: ${page.status} ${page.body}`);
    result = await callTool("execute", { code: LIST });
  }
  assert(result.structuredContent?.ok === true && result.structuredContent.result === account, `not acting as ${account}: ${JSON.stringify(result.structuredContent)}`);
});

await check("stays_linked", async () => {
  const before = elicited.length;
  const result = await callTool("execute", { code: LIST });
  assert(result.structuredContent?.result === account && elicited.length === before, JSON.stringify(result.structuredContent));
});

await report(client);
