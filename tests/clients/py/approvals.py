"""Drives the real sdkbox binary's approval gate with the official MCP Python SDK client and
prints one JSON report line: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.

The client declares form elicitation (the SDK does so for an elicitation_callback) and answers
every approval from the request's message (which carries the request body, and so the
customer's name):
  "approve-all-" -> accept {decision: "approve_all"}    "approve-" -> accept {decision: "approve"}
  "decline-"     -> decline                             "cancel-"  -> cancel
In the handshake era the server asks with elicitation/create while the execution waits; in
the 2026-07-28 era tools/call answers `input_required` and the SDK fulfils the embedded
elicitation/create through the same callback and retries the call by itself. The setup it
shares with conformance.py (environment, server, checks, validation, the report) is in
harness.py.

Environment (read by harness.py):
  ERA        legacy (initialize), auto (server/discover, then fallback) or 2026-07-28 (pinned)
  TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
"""

import asyncio
import json
import os
import random
import re
import sys
import time

from mcp import Client
from mcp.types import ElicitResult, InputRequiredResult

# harness.py sits next to this script; no __pycache__ is left in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ERA, TRANSPORT, call, check, register, report, server, text, validators  # noqa: E402


# The "user": decides from the message, counts how often it was asked.
asked = {"count": 0}
wire = {"input_required": 0}


async def decide(context, params):
    asked["count"] += 1
    message = params.message or ""
    if "approve-all-" in message:
        return ElicitResult(action="accept", content={"decision": "approve_all"})
    if "approve-" in message:
        return ElicitResult(action="accept", content={"decision": "approve"})
    if "decline-" in message:
        return ElicitResult(action="decline")
    if "cancel-" in message:
        return ElicitResult(action="cancel")
    return ElicitResult(action="decline")


async def main():
    sfx = f"py-{ERA}-{TRANSPORT}-{time.time_ns()}-{random.randrange(1 << 30):x}"

    async with Client(server(), mode=ERA, elicitation_callback=decide) as client:
        # A tap on the session's tools/call: how many answers were `input_required` (the
        # Client drives the retries through it).
        session_call = client.session.call_tool

        async def tapped_call(*args, **kwargs):
            result = await session_call(*args, **kwargs)
            if isinstance(result, InputRequiredResult):
                wire["input_required"] += 1
            return result

        client.session.call_tool = tapped_call

        async def execute(code, **extra):
            return await call(client, "execute", {"code": code, **extra}, read_timeout_seconds=120)

        async def run(code, **extra):
            """Runs `code`: its result, outcome and how often the user was asked meanwhile."""
            before = asked["count"]
            result = await execute(code, **extra)
            return result, result.structured_content or {}, asked["count"] - before

        async def customer_names():
            result = await execute(
                "const all = []; for await (const c of api.paginate(api.customers.list, {})) all.push(c.name); return all;"
            )
            outcome = result.structured_content
            assert outcome and outcome["ok"] and isinstance(outcome["result"], list), f"list: {outcome}"
            return outcome["result"]

        def last_post(outcome):
            posts = [h for h in outcome.get("http", []) if str(h.get("method", "")).upper() == "POST"]
            return posts[-1] if posts else {}

        def create(name, email):
            return f"return await api.customers.create({{ name: {json.dumps(name)}, email: {json.dumps(email)} }})"

        async def tools():
            for tool in (await client.list_tools()).tools:
                register(tool)
            assert "execute" in validators, "no execute tool"

        async def approved_write():
            name = f"approve-{sfx}"
            result, outcome, asks = await run(create(name, f"a{sfx}@example.com"))
            assert not result.is_error, f"isError: {outcome or text(result)}"
            assert outcome.get("ok") is True and isinstance((outcome.get("result") or {}).get("id"), str), outcome
            assert asks >= 1, f"the user was asked {asks} times"
            policy = last_post(outcome).get("policy") or {}
            assert policy.get("rule") == "approve" and policy.get("decision") == "approved", outcome.get("http")
            assert name in await customer_names(), f"{name} is not in the list"

        async def declined_write():
            name = f"decline-{sfx}"
            result, outcome, asks = await run(create(name, f"b{sfx}@example.com"))
            message = (outcome.get("error") or {}).get("message", "")
            assert outcome.get("ok") is False and re.search("denied", message, re.I), outcome or text(result)
            assert asks >= 1, f"the user was asked {asks} times"
            assert (last_post(outcome).get("policy") or {}).get("decision") == "denied", outcome.get("http")
            assert name not in await customer_names(), f"{name} was created"

        async def cancelled_write():
            name = f"cancel-{sfx}"
            result, outcome, asks = await run(create(name, f"x{sfx}@example.com"))
            assert outcome.get("ok") is False, outcome or text(result)
            assert asks >= 1, f"the user was asked {asks} times"
            assert name not in await customer_names(), f"{name} was created"

        async def caught_policy_error():
            name = f"decline-c{sfx}"
            code = (
                f"try {{ await api.customers.create({{ name: {json.dumps(name)}, email: \"c{sfx}@example.com\" }}); "
                'return "sent"; } catch (e) { return { name: e.name, kind: e.kind }; }'
            )
            result, outcome, _ = await run(code)
            assert outcome.get("ok") is True, outcome or text(result)
            assert outcome.get("result") == {"name": "PolicyError", "kind": "policy"}, outcome.get("result")

        async def raw_fetch_gated():
            name = f"decline-f{sfx}"
            body = f"JSON.stringify({{ name: {json.dumps(name)}, email: \"f{sfx}@example.com\" }})"
            code = (
                'const r = await fetch("/v1/customers", { method: "POST", '
                f'headers: {{"content-type": "application/json"}}, body: {body} }}); return r.status;'
            )
            result, outcome, asks = await run(code)
            error = outcome.get("error") or {}
            assert outcome.get("ok") is False and error.get("name") == "PolicyError", outcome or text(result)
            assert (last_post(outcome).get("policy") or {}).get("decision") == "denied", outcome.get("http")
            assert asks >= 1, f"the user was asked {asks} times"
            assert name not in await customer_names(), f"{name} was created"

        def two_creates(names, tag):
            # One script creating two customers, one after the other.
            return (
                f"const a = await api.customers.create({{ name: {json.dumps(names[0])}, email: \"{tag}1{sfx}@example.com\" }});\n"
                f"const b = await api.customers.create({{ name: {json.dumps(names[1])}, email: \"{tag}2{sfx}@example.com\" }});\n"
                "return [a.id, b.id];"
            )

        async def approve_all():
            names = [f"approve-all-1-{sfx}", f"approve-all-2-{sfx}"]
            result, outcome, asks = await run(two_creates(names, "e"))
            assert outcome.get("ok") is True, outcome or text(result)
            assert asks == 1, f"the user was asked {asks} times, not once"
            listed = await customer_names()
            for name in names:
                assert name in listed, f"{name} is not in the list"

        async def each_once(code, names):
            """Runs `code`, which creates the customers `names`, each approved on its own: the
            user is asked once per write and each is created once."""
            result, outcome, asks = await run(code)
            assert outcome.get("ok") is True, outcome or text(result)
            assert asks == len(names), f"the user was asked {asks} times, not {len(names)}"
            listed = await customer_names()
            for name in names:
                count = listed.count(name)
                assert count == 1, f"{name} is in the list {count} times"

        # Two writes, each approved on its own: in the 2026-07-28 era that is three rounds, and
        # the first write, sent in the second round, must not be sent again in the third.
        async def two_approvals():
            names = [f"approve-two-1-{sfx}", f"approve-two-2-{sfx}"]
            await each_once(two_creates(names, "t"), names)

        # Four writes (in the 2026-07-28 era, five rounds).
        async def four_approvals():
            names = [f"approve-four-{n}-{sfx}" for n in range(1, 5)]
            code = "const ids = [];\n" + "".join(
                f"ids.push((await api.customers.create({{ name: {json.dumps(name)}, email: \"f{n}{sfx}@example.com\" }})).id);\n"
                for n, name in enumerate(names)
            ) + "return ids;"
            await each_once(code, names)

        # Writes at once (`Promise.all`), each approved on its own: matched to their
        # approvals and the journal by what they are, not by the order they arrive in.
        async def parallel_writes():
            for n in (2, 3, 5, 6):
                names = [f"approve-par{n}-{i}-{sfx}" for i in range(n)]
                code = (
                    f"return await Promise.all({json.dumps(names)}.map((name, i) => api.customers.create("
                    f"{{ name, email: \"p{n}x\" + i + \"{sfx}@example.com\" }})));"
                )
                await each_once(code, names)
            name = f"approve-same-{sfx}"
            code = (
                f"return await Promise.all([0, 1, 2].map(() => api.customers.create({{ name: {json.dumps(name)}, "
                f"email: \"same{sfx}@example.com\" }})));"
            )
            result, outcome, _ = await run(code)
            assert outcome.get("ok") is True and len(outcome.get("result") or []) == 3, outcome or text(result)
            count = (await customer_names()).count(name)
            assert count == 3, f"{name} is in the list {count} times, not 3"

        # The shape models write: a declared main that the script also calls itself.
        async def entry_called_by_the_script():
            name = f"approve-entry-{sfx}"
            code = (
                f"async function main() {{ return await api.customers.create({{ name: {json.dumps(name)}, "
                f"email: \"m{sfx}@example.com\" }}); }}\nconst r = await main();\nconsole.log(r.id);"
            )
            result, outcome, asks = await run(code)
            assert outcome.get("ok") is True, outcome or text(result)
            assert isinstance((outcome.get("result") or {}).get("id"), str), outcome.get("result")
            assert asks == 1, f"the user was asked {asks} times, not once"
            count = (await customer_names()).count(name)
            assert count == 1, f"{name} is in the list {count} times"

        # A question as large as a human is shown is asked, whole, within one answer's bound; a
        # larger one is refused without asking.
        async def large_question():
            name = f"approve-large-{sfx}"
            pad = "p" * 14000
            code = (
                f"return await api.customers.create({{ name: {json.dumps(name)}, email: \"l{sfx}@example.com\", "
                f"metadata: {{ pad: \"{pad}\" }} }});"
            )
            result, outcome, asks = await run(code)
            assert outcome.get("ok") is True, str(outcome)[:500]
            assert asks == 1, f"the user was asked {asks} times"
            over = code.replace(pad, "p" * 30000).replace(name, f"{name}-over")
            result, outcome, asks = await run(over)
            message = (outcome.get("error") or {}).get("message", "")
            assert outcome.get("ok") is False and "too large" in message, str(outcome)[:500]
            assert asks == 0, f"the user was asked {asks} times about a question too large"

        async def dry_run():
            name = f"dry-{sfx}"
            result, outcome, asks = await run(create(name, f"d{sfx}@example.com"), dry_run=True)
            assert outcome.get("ok") is True, outcome or text(result)
            plan = outcome.get("plan") or []
            assert len(plan) == 1 and plan[0].get("method") == "POST" and plan[0].get("policy") == "approve", plan
            assert asks == 0, f"the user was asked {asks} times in a dry run"
            assert name not in await customer_names(), f"{name} was created by a dry run"

        async def channel():
            # Handshake era: elicitation/create while the execution waits (no input_required);
            # 2026-07-28: input_required results, fulfilled through the same callback.
            if ERA == "legacy":
                assert wire["input_required"] == 0 and asked["count"] > 0, (wire, asked)
            else:
                assert wire["input_required"] > 0, (wire, asked)

        for name, body in [
            ("tools", tools),
            ("approved_write", approved_write),
            ("declined_write", declined_write),
            ("cancelled_write", cancelled_write),
            ("caught_policy_error", caught_policy_error),
            ("raw_fetch_gated", raw_fetch_gated),
            ("approve_all", approve_all),
            ("two_approvals", two_approvals),
            ("four_approvals", four_approvals),
            ("parallel_writes", parallel_writes),
            ("entry_called_by_the_script", entry_called_by_the_script),
            ("large_question", large_question),
            ("dry_run", dry_run),
            ("channel", channel),
        ]:
            await check(name, body)
        protocol = client.protocol_version
    report(protocol)


asyncio.run(main())
