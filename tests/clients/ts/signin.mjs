// Signs in to sdkbox's OAuth resource server with an official MCP TypeScript client, headlessly,
// and then uses it; prints one JSON report line:
//   {"client", "protocol", "flow", "subject", "scope", "write_result", "checks": {name: "ok" | "FAIL: why"}}
//
// FLOW=code: authorization code + PKCE + dynamic client registration + `resource`. The first
// connect is refused (401), the SDK discovers the protected resource metadata and the
// authorization server, registers a client and hands over the authorization URL; this script
// plays the browser (fetch with manual redirects and a cookie jar through the test
// authorization server's auto-approved login and consent) up to the redirect URI, gives the
// callback to finishAuth and connects again. The scope is the one the SDK derives from the
// server's challenge: nothing here names it.
// FLOW=client_credentials: the SDK's ClientCredentialsProvider fetches a token by itself on the
// first 401 (CLIENT_ID, CLIENT_SECRET, SCOPE).
//
// Environment:
//   SDK, ERA     as for conformance.mjs (read by harness.mjs); TRANSPORT is always http here
//   SDKBOX_URL   the MCP URL (sdkbox serve --http ... --oauth-issuer ... --public-url SDKBOX_URL)
//   FLOW         code (default) or client_credentials
//   CLIENT_ID, CLIENT_SECRET, SCOPE   for client_credentials
//   ISSUER       the authorization server the client credentials belong to (default: the first
//                one the resource metadata names, looked up before the SDK starts)

import { assert, callTool as call, check, checks, modules, negotiation, register, sdk, text } from "./harness.mjs";

const auth =
  sdk === "v1"
    ? {
        ...(await import("@modelcontextprotocol/sdk/client/auth.js")),
        ...(await import("@modelcontextprotocol/sdk/client/auth-extensions.js")),
      }
    : modules.http; // @modelcontextprotocol/client exports UnauthorizedError and ClientCredentialsProvider

const flow = process.env.FLOW ?? "code";
const serverUrl = new URL(process.env.SDKBOX_URL);
assert(flow === "code" || flow === "client_credentials", `FLOW must be code or client_credentials, not ${flow}`);

// Every HTTP exchange the SDK makes (MCP and OAuth), to show what happened in which order.
const exchanges = [];
async function recordingFetch(input, init) {
  const response = await fetch(input, init);
  exchanges.push({ method: init?.method ?? "GET", url: String(input instanceof Request ? input.url : input), status: response.status });
  return response;
}

// An in-memory OAuthClientProvider for the authorization code flow: a public client (no secret)
// registered dynamically; redirectToAuthorization only records the URL, the "browser" below
// follows it.
const REDIRECT_URL = "http://127.0.0.1:9/sdkbox-signin/callback"; // never fetched: the browser stops there
class MemoryProvider {
  client = undefined;
  saved = undefined;
  verifier = undefined;
  authorizationUrl = undefined;
  discovery = undefined;
  get redirectUrl() {
    return REDIRECT_URL;
  }
  get clientMetadata() {
    return {
      client_name: `sdkbox signin test (typescript-${sdk})`,
      redirect_uris: [REDIRECT_URL],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(information) {
    this.client = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url) {
    this.authorizationUrl = new URL(url);
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    assert(this.verifier, "no code verifier saved");
    return this.verifier;
  }
  // Kept with the code verifier: v2 checks on the callback leg that the code goes to the
  // authorization server the flow started with (SEP-2352).
  saveDiscoveryState(state) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

// The browser: follows redirects by hand with a cookie jar (oidc-provider keeps the interaction
// and the session in cookies) until a Location points at the redirect URI; returns its query.
async function browse(start) {
  const jar = new Map();
  let url = new URL(start);
  for (let hop = 0; hop < 20; hop += 1) {
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join("; ");
    const response = await fetch(url, { redirect: "manual", headers: cookie ? { cookie } : {} });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";");
      const at = pair.indexOf("=");
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split("=")[1]) < Date.now()));
      if (expired || value === "") jar.delete(name);
      else jar.set(name, value);
    }
    const location = response.headers.get("location");
    if (response.status < 300 || response.status >= 400 || !location) {
      throw new Error(`the browser stopped at ${url} with HTTP ${response.status}: ${(await response.text()).slice(0, 300)}`);
    }
    await response.body?.cancel();
    const next = new URL(location, url);
    if (`${next.origin}${next.pathname}` === REDIRECT_URL) return next.searchParams;
    url = next;
  }
  throw new Error("more than 20 redirects before the redirect URI");
}

function jwtPayload(token) {
  try {
    return JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString("utf8"));
  } catch {
    return undefined; // an opaque token
  }
}

async function firstIssuer() {
  const metadata = await (await fetch(new URL(`/.well-known/oauth-protected-resource${serverUrl.pathname}`, serverUrl))).json();
  return metadata.authorization_servers[0];
}

const provider =
  flow === "code"
    ? new MemoryProvider()
    : new auth.ClientCredentialsProvider({
        clientId: process.env.CLIENT_ID,
        clientSecret: process.env.CLIENT_SECRET,
        scope: process.env.SCOPE,
        expectedIssuer: process.env.ISSUER ?? (await firstIssuer()),
      });
const newTransport = () => new modules.http.StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
const newClient = () => new modules.client.Client({ name: `sdkbox-signin-${sdk}`, version: "1.0.0" }, { ...negotiation });

let client;
let firstError;
const firstTransport = newTransport();
{
  const attempt = newClient();
  try {
    await attempt.connect(firstTransport);
    client = attempt;
  } catch (error) {
    firstError = error;
  }
}
const isMcp = (e) => e.url === serverUrl.href;

await check("unauthorized_first", async () => {
  const first = exchanges[0];
  assert(first && isMcp(first) && first.status === 401, `the first request was not refused with 401: ${JSON.stringify(first)}`);
  if (flow === "code") {
    assert(!client, "connected without signing in");
    assert(firstError instanceof auth.UnauthorizedError, `connect failed with ${firstError?.name}: ${firstError?.message}`);
    const url = provider.authorizationUrl;
    assert(url, "the SDK did not start the authorization flow");
    const registered = provider.clientInformation()?.client_id;
    assert(registered && exchanges.some((e) => e.method === "POST" && /\/reg$/.test(new URL(e.url).pathname) && e.status === 201), "no dynamic client registration");
    const p = url.searchParams;
    assert(p.get("client_id") === registered, `client_id ${p.get("client_id")} is not the registered ${registered}`);
    assert(p.get("response_type") === "code" && p.get("code_challenge_method") === "S256" && p.get("code_challenge"), `not code + PKCE S256: ${url}`);
    assert(p.get("resource") === serverUrl.href, `resource ${p.get("resource")} is not ${serverUrl.href}`);
    const scopes = (p.get("scope") ?? "").split(" ");
    assert(scopes.includes("sdkbox:read") && scopes.includes("sdkbox:write"), `scope ${p.get("scope")} is not the challenged sdkbox:read sdkbox:write`);
  } else {
    assert(client, `connect failed: ${firstError?.name}: ${firstError?.message}`);
    assert(provider.tokens()?.access_token, "the provider holds no token");
    const token = exchanges.findIndex((e) => e.method === "POST" && e.url.endsWith("/token") && e.status === 200);
    const retried = exchanges.findIndex((e, i) => i > token && isMcp(e) && e.status === 200);
    assert(token > 0 && retried > token, `no token request between the 401 and a successful retry: ${JSON.stringify(exchanges)}`);
  }
});

await check("connected", async () => {
  if (flow === "code") {
    assert(provider.authorizationUrl, "no authorization URL to follow");
    const callback = await browse(provider.authorizationUrl);
    assert(callback.get("code"), `no code in the callback: ${callback}`);
    // v1 takes the code; v2 takes the whole callback and checks its RFC 9207 `iss`.
    if (sdk === "v1") await firstTransport.finishAuth(callback.get("code"));
    else {
      assert(callback.get("iss"), `no iss in the callback: ${callback}`);
      await firstTransport.finishAuth(callback);
    }
    assert(provider.tokens()?.access_token, "finishAuth saved no token");
    const attempt = newClient();
    await attempt.connect(newTransport());
    client = attempt;
  }
  assert(client, "not connected");
});

const connected = () => assert(client, "not connected");

await check("tools", async () => {
  connected();
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert(JSON.stringify(names) === '["execute","search_docs"]', `tools: ${names}`);
  for (const tool of tools) register(tool);
});

await check("search", async () => {
  connected();
  const result = await call(client, "search_docs", { query: "list customers" });
  const hits = result.structuredContent?.hits ?? [];
  assert(hits.length > 0, `no hit: ${JSON.stringify(result.structuredContent)}`);
  assert(hits.some((h) => String(h.id).includes("customers")), `no customers hit: ${JSON.stringify(hits.map((h) => h.id))}`);
});

await check("execute_read", async () => {
  connected();
  const result = await call(client, "execute", { code: "return (await api.customers.list({limit: 2})).data.length" });
  assert(result.isError !== true, text(result));
  assert(result.structuredContent.result === 2, JSON.stringify(result.structuredContent));
});

const claims = jwtPayload(provider.tokens()?.access_token ?? "") ?? {};
const tokenScopes = String(claims.scope ?? provider.tokens()?.scope ?? "").split(" ");
let writeResult;

await check("write_scope", async () => {
  connected();
  const code = 'try { await api.customers.create({name: "Signin Test", email: "s@example.com"}); return "sent" } catch (e) { return String(e) }';
  const result = await call(client, "execute", { code });
  writeResult = result.structuredContent?.result ?? text(result);
  const said = `${JSON.stringify(result.structuredContent)} ${text(result)}`;
  const challenges = result._meta?.["mcp/www_authenticate"];
  if (tokenScopes.includes("sdkbox:write")) {
    assert(!said.includes("sdkbox:write"), `a token with sdkbox:write was refused for its scope: ${said}`);
    // The demo's rule for writes is approve, and this client offers no channel: the write
    // reached the approval rules, which asked for the user's approval on the page.
    assert(String(writeResult).includes("needs the user's approval"), `the write did not reach the approval rules: ${said}`);
    assert(challenges === undefined, `a challenge although the token has sdkbox:write: ${JSON.stringify(challenges)}`);
  } else {
    assert(String(writeResult).includes("sdkbox:write"), `the refusal does not name sdkbox:write: ${said}`);
    assert(Array.isArray(challenges) && challenges.length === 1 && typeof challenges[0] === "string", `_meta["mcp/www_authenticate"]: ${JSON.stringify(result._meta)}`);
    assert(challenges[0].includes("insufficient_scope"), `the challenge is not insufficient_scope: ${challenges[0]}`);
  }
});

const protocol = !client ? "not connected" : typeof client.getNegotiatedProtocolVersion === "function" ? client.getNegotiatedProtocolVersion() : "2025-11-25";
console.log(
  JSON.stringify({
    client: `typescript-${sdk}`,
    protocol,
    flow,
    subject: claims.sub,
    scope: claims.scope ?? provider.tokens()?.scope,
    write_result: writeResult,
    checks,
  }),
);
if (process.env.DEBUG) console.error(JSON.stringify(exchanges, null, 1));
await client?.close();
process.exit(0);
