"""Account linking through the official MCP Python SDK client, signed in to sdkbox (a bearer
token, SDKBOX_TOKEN) as a user who has not linked their provider account yet; prints one JSON
report line: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.

With URL_ELICITATION=1 the client has an elicitation callback (the SDK then declares form and
URL modes): in the handshake era sdkbox shows the link through elicitation/create, the callback
plays the browser (httpx2 with manual redirects and a cookie jar; the test authorization server
consents at once) and accepts, and the same execute call goes on with the user's own token.
Without it, the call fails with an error of kind `link` carrying the link; the script follows
it and runs the code again, as a model would.

Environment: ERA (harness.py; TRANSPORT is http), SDKBOX_URL, SDKBOX_TOKEN, SIGNIN_AS and
SUBJECT (the sign-in issuer and the user: the link's browser signs in there), PROVIDER_AS (the
provider's authorization server: its /test/account picks who consents), ACCOUNT,
URL_ELICITATION.
"""

import asyncio
import os
import sys
from urllib.parse import urljoin

import httpx2
from mcp import Client
from mcp.types import ElicitResult

# harness.py sits next to this script; no __pycache__ is left in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ERA, call, check, register, report, server  # noqa: E402

ACCOUNT = os.environ["ACCOUNT"]
BY_ELICITATION = os.environ.get("URL_ELICITATION") == "1"
LIST = "return (await api.orders.list()).data[0].owner;"
elicited = []


async def follow(link):
    """The browser: follows redirects by hand with a cookie jar; the last page."""
    async with httpx2.AsyncClient(follow_redirects=False) as browser:
        # Who signs in next: at the sign-in issuer (sdkbox checks the link is theirs), at the provider.
        await browser.post(f"{os.environ['SIGNIN_AS']}/test/account", json={"sub": os.environ["SUBJECT"]})
        await browser.post(f"{os.environ['PROVIDER_AS']}/test/account", json={"sub": ACCOUNT})
        jar = {}
        url = link
        for _ in range(20):
            cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
            response = await browser.get(url, headers={"cookie": cookie} if cookie else {})
            for line in response.headers.get_list("set-cookie"):
                name, _, value = line.split(";")[0].partition("=")
                jar[name] = value
            location = response.headers.get("location")
            if location:
                url = urljoin(url, location)
                continue
            return response.status_code, response.text
    raise AssertionError("more than 20 redirects")


async def on_elicit(context, params):
    elicited.append(params.mode)
    if params.mode != "url":
        return ElicitResult(action="decline")
    _, page = await follow(params.url)
    return ElicitResult(action="accept" if "is linked to sdkbox" in page else "cancel")


async def main():
    options = {"elicitation_callback": on_elicit} if BY_ELICITATION else {}
    async with Client(server(), mode=ERA, **options) as client:
        for tool in (await client.list_tools()).tools:
            register(tool)

        async def execute():
            return await call(client, "execute", {"code": LIST}, read_timeout_seconds=120)

        async def links_then_acts_as_the_user():
            result = await execute()
            if BY_ELICITATION and ERA == "legacy":
                assert elicited == ["url"], f"not asked by URL elicitation: {elicited}"
            else:
                error = (result.structured_content or {}).get("error") or {}
                assert result.is_error and error.get("kind") == "link", f"no link error: {result.structured_content}"
                link = next(w for w in error["message"].split() if "/link/start/" in w)
                status, page = await follow(link)
                assert status == 200 and "is linked to sdkbox" in page, f"not linked: {status} {page}"
                result = await execute()
            outcome = result.structured_content or {}
            assert outcome.get("ok") is True and outcome.get("result") == ACCOUNT, f"not acting as {ACCOUNT}: {outcome}"

        async def stays_linked():
            before = len(elicited)
            outcome = (await execute()).structured_content or {}
            assert outcome.get("result") == ACCOUNT and len(elicited) == before, f"{outcome}"

        await check("links_then_acts_as_the_user", links_then_acts_as_the_user)
        await check("stays_linked", stays_linked)
        protocol = client.protocol_version
    report(protocol)


asyncio.run(main())
