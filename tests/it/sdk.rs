//! The generated SDK against a real provider on 127.0.0.1: calls go out with the right
//! method, path, query, headers and body encoding; bad calls fail before any request with
//! messages that say how to fix them; pagination follows cursors and Link headers.

use std::sync::Arc;

use sdkbox::egress::EgressLimits;
use sdkbox::sandbox::{ExecLimits, InProcessSandbox, Outcome};
use sdkbox::sdk::Sdk;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::provider::Provider;

const SPEC: &str = r#"
openapi: 3.1.0
info: { title: Echo, version: "1" }
servers: [{ url: "http://127.0.0.1/v1" }]
paths:
  /echo/widgets:
    post:
      operationId: createWidget
      tags: [widgets]
      summary: Create a widget.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name]
              properties:
                name: { type: string }
                size: { type: string, enum: [small, large] }
                tags: { type: array, items: { type: string } }
  /echo/widgets/{widget_id}:
    get:
      operationId: getWidget
      tags: [widgets]
      parameters:
        - { name: widget_id, in: path, required: true, schema: { type: string } }
        - { name: expand, in: query, style: deepObject, schema: { type: array, items: { type: string } } }
        - { name: X-Trace, in: header, schema: { type: string } }
  /charges:
    post:
      operationId: PostCharges
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              properties:
                amount: { type: integer }
                metadata: { type: object, additionalProperties: { type: string } }
                expand: { type: array, items: { type: string } }
                items:
                  type: array
                  items: { type: object, properties: { price: { type: string }, quantity: { type: integer } } }
  /cursor:
    get:
      operationId: GetCursor
      parameters:
        - { name: starting_after, in: query, schema: { type: string } }
        - { name: limit, in: query, schema: { type: integer } }
  /linked:
    get:
      operationId: repos/list-linked
      parameters:
        - { name: page, in: query, schema: { type: integer } }
        - { name: per_page, in: query, schema: { type: integer } }
  /runs:
    get:
      operationId: actions/list-runs
      parameters:
        - { name: page, in: query, schema: { type: integer } }
        - { name: per_page, in: query, schema: { type: integer } }
  /echo/forms:
    post:
      operationId: forms/create
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: { type: object, properties: { amount: { type: integer } } }
  /kv:
    get:
      operationId: kv-keys-list
      tags: [kv]
      parameters:
        - { name: cursor, in: query, schema: { type: string } }
  /selflink:
    get:
      operationId: self/list-linked
      parameters:
        - { name: page, in: query, schema: { type: integer } }
  /zones:
    get:
      operationId: zones-list
      tags: [zones]
      parameters:
        - { name: page, in: query, schema: { type: integer } }
        - { name: per_page, in: query, schema: { type: integer } }
"#;

async fn sandbox(provider: &Provider) -> InProcessSandbox {
    let spec = sdkbox::spec::parse("echo.yaml", SPEC).unwrap();
    assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
    sandbox_for(provider, Arc::new(spec.api))
}

/// A sandbox whose SDK is `api`'s, calling `provider`.
fn sandbox_for(provider: &Provider, api: Arc<sdkbox::spec::Api>) -> InProcessSandbox {
    let sdk = Arc::new(Sdk::new(api));
    let egress = sdkbox::egress::Egress::new(sdkbox::egress::EgressConfig {
        base_url: provider.base.clone(),
        extra_origins: Vec::new(),
        download_origins: Vec::new(),
        credential: None,
        limits: EgressLimits::default(),
    })
    .unwrap();
    InProcessSandbox::new(egress, Some(sdk))
}

async fn run(sandbox: &InProcessSandbox, code: &str) -> Outcome {
    sandbox
        .execute(code, &ExecLimits::default(), CancellationToken::new())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_calls_reach_the_provider_encoded_as_the_spec_says() {
    let provider = Provider::start().await;
    let sandbox = sandbox(&provider).await;
    let code = r#"
const created = await api.widgets.create({ name: "gear", size: "small", tags: ["a", "b"] });
const fetched = await api.widgets.get({ widget_id: "w 1/2", expand: ["owner", "parts"], "X-Trace": "t9" });
const charged = await api.charges.create({
  amount: 500, metadata: { order: "o1" }, expand: ["customer"], items: [{ price: "p1", quantity: 2 }],
});
return { created, fetched, charged };
"#;
    let outcome = run(&sandbox, code).await;
    assert!(outcome.ok, "{outcome:?}");
    let created = &outcome.result["created"];
    assert_eq!(created["method"], "POST");
    assert_eq!(created["path"], "/v1/echo/widgets");
    assert_eq!(created["headers"]["content-type"], "application/json");
    assert_eq!(
        created["body"],
        r#"{"name":"gear","size":"small","tags":["a","b"]}"#
    );
    let fetched = &outcome.result["fetched"];
    assert_eq!(fetched["method"], "GET");
    assert_eq!(fetched["path"], "/v1/echo/widgets/w%201%2F2");
    assert_eq!(fetched["query"], "expand%5B%5D=owner&expand%5B%5D=parts");
    assert_eq!(fetched["headers"]["x-trace"], "t9");
    let charged = &outcome.result["charged"];
    assert_eq!(
        charged["headers"]["content-type"],
        "application/x-www-form-urlencoded"
    );
    assert_eq!(
        charged["body"],
        "amount=500&metadata%5Border%5D=o1&expand%5B%5D=customer&items%5B0%5D%5Bprice%5D=p1&items%5B0%5D%5Bquantity%5D=2"
    );
    let operations: Vec<_> = outcome
        .http
        .iter()
        .map(|c| c.operation.clone().unwrap())
        .collect();
    assert_eq!(operations, ["createWidget", "getWidget", "PostCharges"]);
}

/// A script that keeps calling names that do not exist gets suggestions for its first eight
/// refusals only (each ranks every operation, on the server's threads), then a short error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suggestions_for_names_that_reach_nothing_are_bounded_per_execution() {
    let provider = Provider::start().await;
    let sandbox = sandbox(&provider).await;
    let code = "const said = [];\nfor (let i = 0; i < 50; i++) {\n  try { await api.widgets['creat' + i]({}); } catch (e) { said.push(e.message); }\n}\nreturn said;";
    let outcome = run(&sandbox, code).await;
    let said: Vec<&str> = outcome
        .result
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(said.len(), 50, "{said:?}");
    assert!(
        said[..8]
            .iter()
            .all(|m| m.contains("did you mean api.widgets.create")),
        "{said:?}"
    );
    assert!(
        said[8..]
            .iter()
            .all(|m| m.contains("search the docs for the operation you need")
                && !m.contains("did you mean")),
        "{said:?}"
    );
    assert!(outcome.http.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_fail_before_any_request_with_a_fix() {
    let provider = Provider::start().await;
    let sandbox = sandbox(&provider).await;
    let cases = [
        (
            "api.widgets.creat({ name: 'x' })",
            "no method `api.widgets.creat`; did you mean api.widgets.create (POST /echo/widgets: Create a widget.)? Methods of api.widgets: create, get",
        ),
        (
            "api.widgts.create({ name: 'x' })",
            "no group `api.widgts`; did you mean api.widgets.",
        ),
        (
            "api.widgets.create({ size: 'small' })",
            "`params.name` is required (a string)",
        ),
        (
            "api.widgets.create({ name: 'x', sise: 'small' })",
            "unknown parameter `sise`; did you mean `size`? Parameters: name, size, tags",
        ),
        (
            "api.widgets.create({ name: 'x', size: 'huge' })",
            "`params.size` must be one of \"small\", \"large\"; got \"huge\"",
        ),
        (
            "api.widgets.get({})",
            "missing required parameter `widget_id` (a string)",
        ),
        (
            "api.widgets.get({ widget_id: 'w', expnd: ['a'] })",
            "unknown parameter `expnd`; did you mean `expand`?",
        ),
        (
            "api.charges.create({ amount: '500' })",
            "`params.amount` must be an integer; got string \"500\"",
        ),
        (
            "api.widgets.get('w1')",
            "takes one object of parameters, like { widget_id, expand? }; got string \"w1\"; ids in the path go in the object by name (widget_id)",
        ),
        (
            "api.widgets.get('w1', { expand: ['a'] })",
            "api.widgets.get takes one object of parameters, like api.widgets.get({ widget_id, expand? }); it was given 2 arguments (another SDK's positional form",
        ),
        (
            "api.widgets.create({ name: 'x' }, { idempotencyKey: 'k' })",
            "it was given 2 arguments",
        ),
    ];
    for (call, expected) in cases {
        let code = format!(
            "try {{ await {call}; return 'sent'; }} catch (e) {{ return e.name + ': ' + e.message; }}"
        );
        let outcome = run(&sandbox, &code).await;
        let message = outcome.result.as_str().unwrap_or_default().to_owned();
        assert!(message.starts_with("TypeError: "), "{call}: {message}");
        assert!(
            message.contains(expected),
            "{call}:\n  got {message}\n  want {expected}"
        );
        assert!(outcome.http.is_empty(), "{call} sent a request");
    }
    assert_eq!(
        provider
            .seen
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_follows_cursors_and_link_headers() {
    let provider = Provider::start().await;
    let sandbox = sandbox(&provider).await;
    let code = r#"
const cursor = [];
for await (const item of api.paginate(api.cursor.list, { limit: 3 })) cursor.push(item.id);
const linked = [];
for await (const item of api.paginate(api.repos.listLinked, { per_page: 2 })) linked.push(item.n);
const runs = [];
for await (const run of api.paginate(api.actions.listRuns, { per_page: 2 })) runs.push(run.id);
const zones = [];
for await (const zone of api.paginate(api.zones.list, { per_page: 2 })) zones.push(zone.name);
const named = [];
for await (const run of api.paginate(api.actions.listRuns, { per_page: 2 }, { items: "workflow_runs" })) named.push(run.id);
let wrong;
try { for await (const x of api.paginate(api.actions.listRuns, {}, { items: "nope" })) {} } catch (e) { wrong = e.message; }
const looped = [];
for await (const item of api.paginate(api.self.listLinked, { page: 1 })) looped.push(item.n);
const keys = [];
for await (const key of api.paginate(api.kv.retrieve, {})) keys.push(key.name);
const { peak } = await (await fetch("/v1/zones-peak")).json();
// Stopping early leaves the page asked for ahead unread, and the run goes on.
const firstThree = [];
for await (const zone of api.paginate(api.zones.list, { per_page: 2 })) {
  firstThree.push(zone.name);
  if (firstThree.length === 3) break;
}
return { cursor, linked, runs, zones, named, wrong, looped, keys, overlapped: peak > 1, firstThree };
"#;
    let outcome = run(&sandbox, code).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(
        outcome.result,
        json!({
            "cursor": ["item_0", "item_1", "item_2", "item_3", "item_4", "item_5", "item_6"],
            "linked": [0, 1, 2, 3, 4],
            "runs": [0, 1, 2, 3, 4],
            "zones": ["zone0.example", "zone1.example", "zone2.example", "zone3.example", "zone4.example"],
            "named": [0, 1, 2, 3, 4],
            "looped": [1],
            "keys": ["key0", "key1", "key2", "key3", "key4"],
            "overlapped": true,
            "firstThree": ["zone0.example", "zone1.example", "zone2.example"],
            "wrong": "api.actions.listRuns returned no list under `nope`: its lists are under workflow_runs; say which with api.paginate(method, params, { items: \"workflow_runs\" })"
        })
    );
    assert_eq!(outcome.http.len(), 3 + 3 + 3 + 3 + 3 + 1 + 1 + 3 + 1 + 3);
}

/// What `api.paginate` gives is no array: array habits throw saying what to write, and
/// `Array.fromAsync` collects it; an array method's callback arguments are not another SDK's
/// positional arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_no_array_and_callback_arguments_are_not_positional() {
    let provider = Provider::start().await;
    let sandbox = sandbox(&provider).await;
    let code = r#"
const all = await Array.fromAsync(api.paginate(api.cursor.list, { limit: 3 }));
const misuse = [];
for (const attempt of [
  () => api.paginate(api.cursor.list, {}).filter((x) => x),
  () => api.paginate(api.cursor.list, {}).length,
  () => { for (const x of api.paginate(api.cursor.list, {})) {} },
  () => [...api.paginate(api.cursor.list, {})],
  () => Array.from(api.paginate(api.cursor.list, {})),
]) {
  try { attempt(); misuse.push("no error"); } catch (e) { misuse.push(e instanceof TypeError && e.message.includes("Array.fromAsync(api.paginate(...))")); }
}
const made = await Promise.all([{ name: "a" }, { name: "b" }].map(api.widgets.create));
const bound = await Promise.all([{ name: "c" }, { name: "d" }].map(api.widgets.create.bind(api.widgets)));
const mapped = await Promise.all(Array.from([{ name: "e" }], api.widgets.create));
let called;
try { await api.widgets.create.call(null, { name: "f" }, { idempotencyKey: "k" }); } catch (e) { called = e.message.includes("given 2 arguments"); }
let named;
try { api.paginate(api.cursor.list, {}).length; } catch (e) { named = e.message.startsWith("api.paginate(api.cursor.list, ...)"); }
return { all: all.length, misuse, made: made.length + bound.length + mapped.length, called, named, fn: api.widgets.create };
"#;
    let outcome = run(&sandbox, code).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(
        outcome.result,
        json!({
            "all": 7, "misuse": [true, true, true, true, true], "made": 5, "called": true,
            "named": true, "fn": "[Function: api.widgets.create]"
        })
    );
    assert_eq!(outcome.http.len(), 3 + 5);
}

/// Issue 21: spec names that are also JavaScript's or `api`'s own (`constructor`,
/// `toString`, `then`, `request`, `paginate`) are callable, under the names search shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spec_name_is_callable_under_the_name_search_shows() {
    let groups = [
        "constructor",
        "toString",
        "valueOf",
        "then",
        "request",
        "paginate",
        "__proto__",
    ];
    let mut text = "openapi: 3.0.0\ninfo: {title: Names, version: '1'}\npaths:\n".to_owned();
    for (n, group) in groups.iter().enumerate() {
        for (m, method) in ["constructor", "then", "toString"].iter().enumerate() {
            text.push_str(&format!(
                "  /echo/g{n}m{m}:\n    get:\n      operationId: {group}/{method}\n      \
                 responses: {{'200': {{description: ok}}}}\n"
            ));
        }
    }
    let spec = sdkbox::spec::parse("names.yaml", &text).unwrap();
    let api = Arc::new(spec.api);
    let docs = sdkbox::search::DocsIndex::build(api.clone(), Vec::new()).unwrap();
    let provider = Provider::start().await;
    let sandbox = sandbox_for(&provider, api.clone());
    for op in &api.operations {
        // The name search shows for it is the one the script calls.
        let hits = docs
            .search(
                &op.path.replace('/', " "),
                20,
                sdkbox::search::Detail::Compact,
                &Default::default(),
            )
            .unwrap();
        let shown = format!("api.{}.{}", op.group, op.name);
        assert!(
            hits.hits.iter().any(|h| h.id == shown),
            "{shown} is not among {:?}",
            hits.hits.iter().map(|h| &h.id).collect::<Vec<_>>()
        );
        let code = format!("return (await {shown}({{}})).path;");
        let outcome = run(&sandbox, &code).await;
        assert_eq!(
            outcome.result,
            serde_json::json!(format!("/v1{}", op.path)),
            "{shown}: {outcome:?}"
        );
    }
    let names: Vec<String> = api
        .operations
        .iter()
        .map(|op| format!("{}.{}", op.group, op.name))
        .collect();
    assert!(names.contains(&"then_.then_".to_owned()), "{names:?}");
    assert!(
        names.contains(&"request_.constructor".to_owned()),
        "{names:?}"
    );
    // The helpers are still the helpers.
    let outcome = run(
        &sandbox,
        "return [typeof api.request, typeof api.paginate, api.then];",
    )
    .await;
    assert_eq!(
        outcome.result,
        serde_json::json!(["function", "function", null]),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_request_encodes_like_the_operation_it_reaches() {
    let provider = Provider::start().await;
    let sandbox = sandbox(&provider).await;
    let code = r#"
const form = await api.request("POST", "/charges", { body: { amount: 5, metadata: { k: "v" }, expand: ["x"] } });
const json = await api.request("POST", "/charges", { body: { amount: 5 }, headers: { "content-type": "application/json" } });
const deep = await api.request("GET", "/echo/widgets/w1", { query: { expand: ["a", "b"] } });
const other = await api.request("GET", "/echo/other", { query: { tags: ["a", "b"], meta: { k: "v" } } });
const slash = await api.request("POST", "/echo/forms/", { body: { amount: 7 } });
let huge;
try {
  const wide = {};
  for (let i = 0; i < 4000; i++) wide[i] = 1;
  await api.request("POST", "/charges", { body: { ["k".repeat(200000)]: wide } });
} catch (e) { huge = e.message; }
const pick = (r) => ({ query: r.query, body: r.body, type: r.headers["content-type"] ?? null });
return [...[form, json, deep, other].map(pick), huge, slash.headers["content-type"]];
"#;
    let outcome = run(&sandbox, code).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(
        outcome.result,
        json!([
            {"query": null, "body": "amount=5&metadata%5Bk%5D=v&expand%5B%5D=x", "type": "application/x-www-form-urlencoded"},
            {"query": null, "body": "{\"amount\":5}", "type": "application/json"},
            {"query": "expand%5B%5D=a&expand%5B%5D=b", "body": "", "type": null},
            {"query": "tags=a&tags=b&meta%5Bk%5D=v", "body": "", "type": null},
            "POST /charges: the query and body would take 800042890 bytes or more once encoded, over the 10485760 allowed; send less",
            "application/x-www-form-urlencoded",
        ])
    );
}

/// Issue 22: nested groups, and the spellings an official SDK uses for the same operation,
/// reach it; a group called as a method, or a spelling that fits nothing, is an error that
/// names what exists, before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_names_and_official_spellings_reach_their_operations() {
    let text = r#"
openapi: 3.0.0
info: { title: Nested, version: "1" }
paths:
  /echo/dns_records:
    get: { operationId: dns-records-list-dns-records, responses: { "200": { description: ok } } }
    post: { operationId: dns-records-create-a-record, responses: { "200": { description: ok } } }
  /echo/dns_records/{dns_record_id}:
    parameters: [{ name: dns_record_id, in: path, required: true, schema: { type: string } }]
    get: { operationId: dns-records-record-details, responses: { "200": { description: ok } } }
    patch: { operationId: dns-records-patch-a-record, responses: { "200": { description: ok } } }
    delete: { operationId: dns-records-delete-a-record, responses: { "200": { description: ok } } }
  /echo/dns_records/scan:
    post: { operationId: dns-records-scan, responses: { "200": { description: ok } } }
  /echo/dns_records/export:
    get: { operationId: dns-records-export, responses: { "200": { description: ok } } }
"#;
    let spec = sdkbox::spec::parse("nested.yaml", text).unwrap();
    let api = Arc::new(spec.api);
    let names: Vec<String> = api
        .operations
        .iter()
        .map(|op| format!("{}.{}", op.group, op.name))
        .collect();
    assert_eq!(
        names,
        [
            "echo.dnsRecords.list",
            "echo.dnsRecords.create",
            "echo.dnsRecords.get",
            "echo.dnsRecords.delete",
            "echo.dnsRecords.edit",
            "echo.dnsRecords.scan",
            "echo.dnsRecords.export",
        ]
    );
    let provider = Provider::start().await;
    let sandbox = sandbox_for(&provider, api);
    let code = r#"
        const seen = async (call) => { const r = await call; return `${r.method} ${r.path}`; };
        const failed = async (call) => { try { await call(); return "sent"; } catch (e) { return `${e.name}: ${e.message}`; } };
        return [
            await seen(api.echo.dnsRecords.list()),
            await seen(api.echo.dnsRecords.get({ dns_record_id: "r1" })),
            // Another case, a synonym verb, the plural: the one operation that fits.
            await seen(api.echo.DNSRecords.retrieve({ dns_record_id: "r2" })),
            await seen(api.echo.dnsRecords.update({ dns_record_id: "r3" })),
            await seen(api.echo.dnsRecords.del({ dns_record_id: "r4" })),
            await seen(api.echo.dnsRecord.scan()),
            // An action written as a group with its verb.
            await seen(api.echo.dnsRecords.scan.create()),
            await seen(api.echo.dnsRecords.export.get()),
            // A node is a function to `call` and to string conversion.
            await seen(api.echo.dnsRecords.get.call(null, { dns_record_id: "r5" })),
            await failed(() => api.echo.dnsRecords({})),
            await failed(() => api.echo.dnsRecords.read({})),
            await failed(() => api.echo.dnsRecords.scan.delete()),
            typeof api.echo.dnsRecords.list,
            `${api.echo.dnsRecords.list}`,
        ];
    "#;
    let outcome = run(&sandbox, code).await;
    let result = outcome.result.as_array().cloned().unwrap_or_default();
    assert_eq!(
        result[..9],
        [
            json!("GET /v1/echo/dns_records"),
            json!("GET /v1/echo/dns_records/r1"),
            json!("GET /v1/echo/dns_records/r2"),
            json!("PATCH /v1/echo/dns_records/r3"),
            json!("DELETE /v1/echo/dns_records/r4"),
            json!("POST /v1/echo/dns_records/scan"),
            json!("POST /v1/echo/dns_records/scan"),
            json!("GET /v1/echo/dns_records/export"),
            json!("GET /v1/echo/dns_records/r5"),
        ],
        "{outcome:?}"
    );
    let text = |i: usize| result[i].as_str().unwrap_or_default().to_owned();
    assert!(
        text(9).starts_with("TypeError: api.echo.dnsRecords is a group"),
        "{}",
        text(9)
    );
    assert!(
        text(10).contains("no method `api.echo.dnsRecords.read`")
            && text(10).contains("create, delete, edit, export, get, list, scan"),
        "{}",
        text(10)
    );
    assert!(
        text(11).contains("no group `api.echo.dnsRecords.scan`"),
        "{}",
        text(11)
    );
    assert_eq!(result[12], json!("function"));
    assert_eq!(result[13], json!("api.echo.dnsRecords.list"));
    // Nine calls reached the provider; the three refused ones did not.
    let sent = provider
        .seen
        .requests
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(sent, 9);
}
