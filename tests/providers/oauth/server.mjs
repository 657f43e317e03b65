// A real OAuth 2.1 authorization server (npm oidc-provider) for sdkbox's resource-server tests.
// FOR TESTS ONLY: it logs anyone in without a password, grants every consent at once, and has
// unauthenticated /test/* endpoints that pick the user, mint arbitrary tokens and rotate keys.
//
//   node server.mjs [--port N]      N = 0 or absent: a free port
//
// Environment: RESOURCE_SCOPES (default "sdkbox:read sdkbox:write other:scope") and
// ACCESS_TOKEN_TTL (seconds, default 600), so that a second instance can play a provider's own
// authorization server (account linking: tests/it/linking.rs).
//
// Listens on 127.0.0.1 with issuer http://127.0.0.1:PORT and prints exactly one line to stdout,
// `listening http://127.0.0.1:PORT`; everything else goes to stderr. When stdin is a pipe (a
// test harness holding it), the server exits as soon as that pipe closes, so a harness that dies
// leaves no server behind; with a terminal or /dev/null as stdin it runs until killed.
import * as crypto from "node:crypto";
import { fstatSync } from "node:fs";
import http from "node:http";

const port = portArgument(process.argv.slice(2));

// oidc-provider prints its NOTICEs with console.info, i.e. to stdout, where the harness expects
// only the listening line: send all console output to stderr before the library loads.
console.log = console.info = console.debug = console.error;
const { default: Provider, errors } = await import("oidc-provider");
// jose is oidc-provider's own dependency (pinned by package-lock.json, hoisted to node_modules/).
const { SignJWT } = await import("jose");
// oidc-provider's in-memory store, which it otherwise creates per instance: one store shared by
// every instance keeps state across /test/rotate. A deep import, fine with the exact pin.
const { createMemoryAdapter } = await import("oidc-provider/lib/adapters/memory_adapter.js");

const RESOURCE_SCOPES = process.env.RESOURCE_SCOPES || "sdkbox:read sdkbox:write other:scope";
const ACCESS_TOKEN_TTL = Number(process.env.ACCESS_TOKEN_TTL || 600);
const LOOPBACK_RESOURCE = /^http:\/\/(127\.0\.0\.1|localhost):/;

// Mutable test state, set through /test/*.
let account = "alice"; // the subject the next login uses
let jwksFetches = 0;
let signingKey = newSigningKey();
// State and cookie keys outlive key rotation: clients, sessions, grants and tokens issued before
// a rotation stay valid (only JWTs signed with the old key no longer verify).
const adapter = createMemoryAdapter();
const cookieKeys = [crypto.randomBytes(32).toString("base64url")];

const server = http.createServer((req, res) => {
  dispatch(req, res).catch((err) => {
    console.error("oauth test server:", err);
    if (!res.headersSent) json(res, err.statusCode ?? 500, { error: err.error ?? "server_error", error_description: err.error_description ?? err.message });
    else res.end();
  });
});
await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
// The instance requests go to; /test/rotate replaces it, as oidc-provider's keys are fixed at
// construction.
let provider = buildProvider(signingKey);
let handle = provider.callback();
process.stdout.write(`listening ${issuer}\n`);

if (stdinIsPipe()) {
  process.stdin.on("end", () => process.exit(0));
  process.stdin.on("error", () => process.exit(0));
  process.stdin.resume();
}

async function dispatch(req, res) {
  const { pathname } = new URL(req.url, issuer);
  if (pathname.startsWith("/test/")) return control(req, res, pathname);
  if (pathname.startsWith("/interaction/")) return interact(provider, req, res);
  if (pathname === "/jwks") jwksFetches += 1;
  return handle(req, res);
}

// Headless interactions: every prompt is answered at once, as if the user had signed in and
// clicked "allow", so a client following redirects with a cookie jar reaches its redirect_uri.
async function interact(current, req, res) {
  const details = await current.interactionDetails(req, res);
  const { prompt, params, session } = details;
  if (prompt.name === "login") {
    return current.interactionFinished(req, res, { login: { accountId: account } }, { mergeWithLastSubmission: false });
  }
  if (prompt.name !== "consent") throw new Error(`unexpected prompt ${prompt.name}`);

  // Grant exactly what was asked for (and nothing more), so tokens carry the requested scopes.
  const grant = details.grantId
    ? await current.Grant.find(details.grantId)
    : new current.Grant({ accountId: session.accountId, clientId: params.client_id });
  const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(" "));
  if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(" "));
  }
  const grantId = await grant.save();
  const consent = details.grantId ? {} : { grantId };
  return current.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
}

// Test-only control endpoints.
async function control(req, res, pathname) {
  const route = `${req.method} ${pathname}`;
  if (route === "POST /test/account") {
    const { sub } = await jsonBody(req);
    if (typeof sub !== "string" || !sub) return json(res, 400, { error: "sub must be a non-empty string" });
    account = sub;
    return json(res, 200, { sub });
  }
  if (route === "POST /test/mint") {
    // The test chooses every claim; nothing is added. Header members override the defaults, and
    // a member set to null is removed (e.g. {"kid": null} for a token without a kid).
    const { claims, header = {} } = await jsonBody(req);
    if (!isObject(claims) || !isObject(header)) return json(res, 400, { error: "claims (and header, if given) must be objects" });
    const protectedHeader = { alg: "RS256", typ: "at+jwt", kid: signingKey.jwk.kid, ...header };
    for (const [name, value] of Object.entries(protectedHeader)) if (value === null) delete protectedHeader[name];
    try {
      const token = await new SignJWT(claims).setProtectedHeader(protectedHeader).sign(signingKey.object);
      return json(res, 200, { token });
    } catch (err) {
      return json(res, 400, { error: err.message });
    }
  }
  if (route === "POST /test/rotate") {
    const key = newSigningKey();
    provider = buildProvider(key);
    handle = provider.callback();
    signingKey = key;
    return json(res, 200, { kid: key.jwk.kid });
  }
  if (route === "GET /test/jwks-fetches") return json(res, 200, { count: jwksFetches });
  return json(res, 404, { error: `no test endpoint ${route}` });
}

function buildProvider(key) {
  const instance = new Provider(issuer, {
    adapter,
    jwks: { keys: [key.jwk] },
    cookies: { keys: cookieKeys },
    scopes: ["openid", "offline_access", ...RESOURCE_SCOPES.split(" ")],
    responseTypes: ["code"],
    pkce: { required: () => true },
    // OAuth 2.1 lets a client with one registered redirect_uri leave it out (the default here).
    allowOmittingSingleRegisteredRedirectUri: true,
    // MCP clients often rely on refresh tokens without asking for offline_access (which is also
    // dropped unless prompt=consent): issue one whenever the client may use the grant.
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed("refresh_token"),
    findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    clients: [
      m2m("m2m-rw", "secret-rw", "sdkbox:read sdkbox:write"),
      m2m("m2m-ro", "secret-ro", "sdkbox:read"),
      m2m("m2m-other", "secret-other", "other:scope"),
      // A resource server's own credentials: it only calls the introspection endpoint.
      {
        client_id: "introspector",
        client_secret: "secret-introspector",
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ],
    interactions: { url: async (ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true }, // open: no initial access token
      clientCredentials: { enabled: true },
      introspection: {
        enabled: true,
        // The default lets any confidential client introspect any token; be explicit: the
        // introspector sees every token, any other client only its own.
        allowedPolicy: async (ctx, client, token) => client.clientId === "introspector" || token.clientId === client.clientId,
      },
      revocation: {
        enabled: true,
        allowedPolicy: async (ctx, client, token) => token.clientId === client.clientId,
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => undefined,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (ctx, resourceIndicator) => {
          if (!LOOPBACK_RESOURCE.test(resourceIndicator)) {
            throw new errors.InvalidTarget("this test server only issues tokens for loopback resources");
          }
          return {
            scope: RESOURCE_SCOPES,
            audience: resourceIndicator,
            accessTokenTTL: ACCESS_TOKEN_TTL,
            // A path containing /opaque asks for opaque tokens, to exercise introspection.
            accessTokenFormat: resourceIndicator.includes("/opaque") ? "opaque" : "jwt",
            jwt: { sign: { alg: "RS256" } },
          };
        },
      },
    },
    // Explicit values for the defaults oidc-provider otherwise announces it "SHOULD" change.
    ttl: {
      AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 24 * 3600,
      Interaction: 600,
      Session: 24 * 3600,
      Grant: 24 * 3600,
    },
    clientBasedCORS: () => true, // no browsers here
    // Errors as JSON even when the client prefers HTML: the tests read them.
    renderError: async (ctx, out) => {
      ctx.type = "json";
      ctx.body = out;
    },
  });
  instance.on("server_error", (ctx, err) => console.error("oauth test server: server_error", err));
  return instance;
}

function m2m(clientId, secret, scope) {
  return {
    client_id: clientId,
    client_secret: secret,
    token_endpoint_auth_method: "client_secret_basic",
    grant_types: ["client_credentials"],
    response_types: [],
    redirect_uris: [],
    scope,
  };
}

// A fresh RSA 2048 signing key with a random kid, as a private JWK (for oidc-provider's jwks
// config, which publishes its public part) and a KeyObject (for minting).
function newSigningKey() {
  const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: "jwk" }), kid: crypto.randomBytes(9).toString("base64url"), alg: "RS256", use: "sig" };
  return { jwk, object: privateKey };
}

function portArgument(args) {
  const at = args.findIndex((a) => a === "--port" || a.startsWith("--port="));
  if (at === -1) return 0;
  const value = args[at].includes("=") ? args[at].split("=")[1] : args[at + 1];
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    console.error(`usage: node server.mjs [--port N]  (bad port ${value})`);
    process.exit(2);
  }
  return n;
}

function stdinIsPipe() {
  try {
    const stat = fstatSync(0);
    return stat.isFIFO() || stat.isSocket(); // Node's own child pipes are socket pairs
  } catch {
    return false;
  }
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

async function jsonBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    const value = text ? JSON.parse(text) : {};
    if (!isObject(value)) throw new Error("not an object");
    return value;
  } catch {
    throw Object.assign(new Error("the body must be a JSON object"), { statusCode: 400, error: "invalid_request" });
  }
}

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store" });
  res.end(text);
}
