"""Signs in to sdkbox's OAuth resource server with the official MCP Python SDK client, headlessly,
and then uses it; prints one JSON report line:
  {"client", "protocol", "flow", "subject", "scope", "write_result", "checks": {name: "ok" | "FAIL: why"}}

FLOW=code: authorization code + PKCE + dynamic client registration + `resource`, with
`mcp.client.auth.OAuthClientProvider` (an httpx2.Auth): the first request is refused (401), the
SDK discovers the protected resource metadata and the authorization server, registers a client
and hands the authorization URL to redirect_handler; callback_handler plays the browser (httpx2
with manual redirects and a cookie jar through the test authorization server's auto-approved
login and consent) up to the redirect URI and returns AuthorizationCodeResult(code, state, iss).
All of it happens inside the first connect. The scope is the one the SDK derives from the
server's challenge: nothing here names it.
FLOW=client_credentials: `ClientCredentialsOAuthProvider` fetches a token by itself on the first
401 (CLIENT_ID, CLIENT_SECRET, SCOPE).

Environment:
  ERA          as for conformance.py (read by harness.py); TRANSPORT is always http here
  SDKBOX_URL   the MCP URL (sdkbox serve --http ... --oauth-issuer ... --public-url SDKBOX_URL)
  FLOW         code (default) or client_credentials
  CLIENT_ID, CLIENT_SECRET, SCOPE   for client_credentials
  ISSUER       the authorization server the client credentials belong to (default: the first one
               the resource metadata names, looked up before the SDK starts)
"""

import asyncio
import base64
import json
import os
import sys
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientMetadata

# harness.py sits next to this script; no __pycache__ is left in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ERA, check, checks, register, text  # noqa: E402
from harness import call as validated_call  # noqa: E402

FLOW = os.environ.get("FLOW", "code")
SERVER_URL = os.environ["SDKBOX_URL"]
REDIRECT_URL = "http://127.0.0.1:9/sdkbox-signin/callback"  # never fetched: the browser stops there
assert FLOW in ("code", "client_credentials"), f"FLOW must be code or client_credentials, not {FLOW}"


class MemoryStorage:
    """An in-memory TokenStorage."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


storage = MemoryStorage()
# Every HTTP exchange the SDK makes (MCP and OAuth, auth-flow requests included), in order.
exchanges = []
authorization_urls = []
callbacks = []


async def record(response):
    exchanges.append({"method": response.request.method, "url": str(response.request.url), "status": response.status_code})


async def redirect_handler(url):
    authorization_urls.append(url)


async def callback_handler():
    """The browser: follows redirects by hand, keeping cookies (oidc-provider keeps the interaction
    and the session in them), until a Location points at the redirect URI; returns its query."""
    url = authorization_urls[-1]
    async with httpx2.AsyncClient(follow_redirects=False) as browser:
        for _ in range(20):
            response = await browser.get(url)
            location = response.headers.get("location")
            if not (300 <= response.status_code < 400) or not location:
                raise RuntimeError(f"the browser stopped at {url} with HTTP {response.status_code}: {response.text[:300]}")
            url = urljoin(url, location)
            parts = urlsplit(url)
            if f"{parts.scheme}://{parts.netloc}{parts.path}" == REDIRECT_URL:
                query = {name: values[0] for name, values in parse_qs(parts.query).items()}
                callbacks.append(query)
                if "code" not in query:
                    raise RuntimeError(f"no code in the callback: {query}")
                return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
    raise RuntimeError("more than 20 redirects before the redirect URI")


def jwt_payload(token):
    try:
        part = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except Exception:  # an opaque token
        return None


async def first_issuer():
    parts = urlsplit(SERVER_URL)
    async with httpx2.AsyncClient() as http:
        response = await http.get(f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}")
        return response.json()["authorization_servers"][0]


async def provider():
    if FLOW == "code":
        metadata = OAuthClientMetadata(
            client_name="sdkbox signin test (python)",
            redirect_uris=[REDIRECT_URL],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )
        return OAuthClientProvider(SERVER_URL, metadata, storage, redirect_handler, callback_handler)
    return ClientCredentialsOAuthProvider(
        SERVER_URL,
        storage,
        client_id=os.environ["CLIENT_ID"],
        client_secret=os.environ["CLIENT_SECRET"],
        scope=os.environ.get("SCOPE"),
        issuer=os.environ.get("ISSUER") or await first_issuer(),
    )


def describe(error):
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}"


async def main():
    http = create_mcp_http_client(auth=await provider())
    http.event_hooks = {"request": [], "response": [record]}
    state = {"client": None, "listed": None, "error": None, "protocol": "not connected", "write_result": None}
    is_mcp = lambda e: e["url"] == SERVER_URL  # noqa: E731

    def token_claims():
        return jwt_payload(storage.tokens.access_token if storage.tokens else "") or {}

    async def unauthorized_first():
        first = exchanges[0] if exchanges else None
        assert first and is_mcp(first) and first["status"] == 401, f"the first request was not refused with 401: {first}"
        token = next((i for i, e in enumerate(exchanges) if e["method"] == "POST" and e["url"].endswith("/token") and e["status"] == 200), -1)
        retried = next((i for i, e in enumerate(exchanges) if i > token and is_mcp(e) and e["status"] == 200), -1)
        assert token > 0 and retried > token, f"no token request between the 401 and a successful retry: {exchanges}"
        if FLOW == "code":
            assert authorization_urls, "the SDK did not start the authorization flow"
            registered = storage.client_info.client_id if storage.client_info else None
            assert registered and any(
                e["method"] == "POST" and urlsplit(e["url"]).path == "/reg" and e["status"] == 201 for e in exchanges
            ), "no dynamic client registration"
            p = {name: values[0] for name, values in parse_qs(urlsplit(authorization_urls[0]).query).items()}
            assert p.get("client_id") == registered, f"client_id {p.get('client_id')} is not the registered {registered}"
            assert p.get("response_type") == "code" and p.get("code_challenge_method") == "S256" and p.get("code_challenge"), (
                f"not code + PKCE S256: {authorization_urls[0]}"
            )
            assert p.get("resource") == SERVER_URL, f"resource {p.get('resource')} is not {SERVER_URL}"
            scopes = p.get("scope", "").split()
            assert "sdkbox:read" in scopes and "sdkbox:write" in scopes, f"scope {p.get('scope')} is not the challenged sdkbox:read sdkbox:write"
            assert callbacks and callbacks[-1].get("iss"), f"no iss in the callback: {callbacks}"
        else:
            assert storage.tokens and storage.tokens.access_token, "the provider holds no token"

    async def connected():
        assert state["client"] is not None, f"connect failed: {describe(state['error'])}"

    def need_client():
        assert state["client"] is not None, "not connected"
        return state["client"]

    async def tools():
        need_client()
        names = sorted(t.name for t in state["listed"])
        assert names == ["execute", "search_docs"], names
        for tool in state["listed"]:
            register(tool)

    async def search():
        result = await validated_call(need_client(), "search_docs", {"query": "list customers"})
        hits = (result.structured_content or {}).get("hits", [])
        assert hits, f"no hit: {result.structured_content}"
        assert any("customers" in str(h.get("id")) for h in hits), f"no customers hit: {[h.get('id') for h in hits]}"

    async def execute_read():
        code = "return (await api.customers.list({limit: 2})).data.length"
        result = await validated_call(need_client(), "execute", {"code": code})
        assert not result.is_error, text(result)
        assert result.structured_content["result"] == 2, result.structured_content

    async def write_scope():
        client = need_client()
        claims = token_claims()
        token_scopes = str(claims.get("scope") or (storage.tokens.scope if storage.tokens else "") or "").split()
        code = 'try { await api.customers.create({name: "Signin Test", email: "s@example.com"}); return "sent" } catch (e) { return String(e) }'
        result = await validated_call(client, "execute", {"code": code})
        state["write_result"] = (result.structured_content or {}).get("result", text(result))
        said = f"{json.dumps(result.structured_content)} {text(result)}"
        challenges = (result.meta or {}).get("mcp/www_authenticate")
        if "sdkbox:write" in token_scopes:
            assert "sdkbox:write" not in said, f"a token with sdkbox:write was refused for its scope: {said}"
            # The demo's rule for writes is approve, and this client offers no channel: the
            # write reached the approval rules, which asked for the user's approval on the page.
            assert "needs the user's approval" in str(state["write_result"]), f"the write did not reach the approval rules: {said}"
            assert challenges is None, f"a challenge although the token has sdkbox:write: {challenges}"
        else:
            assert "sdkbox:write" in str(state["write_result"]), f"the refusal does not name sdkbox:write: {said}"
            assert isinstance(challenges, list) and len(challenges) == 1 and isinstance(challenges[0], str), (
                f'_meta["mcp/www_authenticate"]: {result.meta}'
            )
            assert "insufficient_scope" in challenges[0], f"the challenge is not insufficient_scope: {challenges[0]}"

    async def run_checks():
        for name, body in [
            ("unauthorized_first", unauthorized_first),
            ("connected", connected),
            ("tools", tools),
            ("search", search),
            ("execute_read", execute_read),
            ("write_scope", write_scope),
        ]:
            await check(name, body)

    try:
        async with Client(streamable_http_client(SERVER_URL, http_client=http), mode=ERA) as client:
            # A pinned 2026-07-28 client sends nothing on connect: its first request is this one.
            state["listed"] = (await client.list_tools()).tools
            state["client"] = client
            await run_checks()
            state["protocol"] = client.protocol_version
    except (Exception, BaseExceptionGroup) as error:  # reported by the checks
        state["error"] = error
    if state["client"] is None:
        await run_checks()  # the connect failed: every check says why
    claims = token_claims()
    report = {
        "client": "python",
        "protocol": state["protocol"],
        "flow": FLOW,
        "subject": claims.get("sub"),
        "scope": claims.get("scope") or (storage.tokens.scope if storage.tokens else None),
        "write_result": state["write_result"],
        "checks": checks,
    }
    print(json.dumps(report), flush=True)
    if os.environ.get("DEBUG"):
        print(json.dumps(exchanges, indent=1), file=sys.stderr)


asyncio.run(main())
