//! Files and bytes end to end (issue 36): the web platform a script expects (every global,
//! scored on the frozen blind set `tests/eval/web-globals.json`), bytes sent byte for byte
//! (a file uploaded to the demo and read back, a raw body echoed), bytes received (the demo's
//! PNG as a Blob), bytes that carry the secret withheld whole, and files returned to the
//! client.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sdkbox::egress::{AuthScheme, EgressLimits};
use sdkbox::sandbox::{ExecLimits, Outcome};
use serde_json::{Value, json};
use sha2::Digest;

use crate::approvals::demo;
use crate::hostile_provider::{BINARY_FORMS, HostileProvider};
use crate::provider::Provider as TestProvider;
use crate::support::{self, CANARY, run};

/// Every case of the blind set (written by a helper from the web standards and Node's
/// answers, without seeing the sandbox) gives Node's answer, whatever global it tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_web_global_answers_as_the_standard_says() {
    let cases: Vec<Value> = serde_json::from_str(include_str!("../eval/web-globals.json")).unwrap();
    let sandbox = support::offline();
    let mut by_global: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut wrong = Vec::new();
    for case in &cases {
        let outcome = run(
            &sandbox,
            case["script"].as_str().unwrap(),
            &support::quick(10_000),
        )
        .await;
        let entry = by_global
            .entry(case["global"].as_str().unwrap().to_owned())
            .or_default();
        entry.1 += 1;
        if outcome.ok && outcome.result == case["expected"] {
            entry.0 += 1;
        } else {
            wrong.push(format!(
                "{}: expected {}, got {} {:?}",
                case["id"], case["expected"], outcome.result, outcome.error
            ));
        }
    }
    println!("web globals, cases answered as the standard says: {by_global:?}");
    // Each global the issue names has cases of its own.
    for global in [
        "URL",
        "URLSearchParams",
        "TextEncoder",
        "TextDecoder",
        "Blob",
        "File",
        "FormData",
        "Request",
        "Response",
        "Headers",
        "crypto",
        "structuredClone",
        "AbortController",
    ] {
        assert!(by_global.contains_key(global), "no case for {global}");
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The loopback test provider, and a sandbox for it with the canary as its bearer token.
async fn provider_sandbox() -> (TestProvider, sdkbox::sandbox::InProcessSandbox) {
    let provider = TestProvider::start().await;
    let sandbox = support::sandbox(
        &provider.base,
        Some(AuthScheme::Bearer),
        EgressLimits::default(),
    );
    (provider, sandbox)
}

/// A sandbox for `base` with the canary as its bearer token, other allowed and download
/// origins, and an SDK.
fn sandbox_with(
    base: &url::Url,
    extra: Vec<url::Url>,
    downloads: Vec<url::Url>,
    sdk: Option<std::sync::Arc<sdkbox::sdk::Sdk>>,
) -> sdkbox::sandbox::InProcessSandbox {
    use sdkbox::egress::{Credential, Egress, EgressConfig, Secret};
    let egress = Egress::new(EgressConfig {
        base_url: base.clone(),
        extra_origins: extra,
        download_origins: downloads,
        credential: Some(Credential {
            scheme: AuthScheme::Bearer,
            secret: Secret::new(CANARY.to_owned()),
        }),
        limits: EgressLimits::default(),
    })
    .unwrap();
    sdkbox::sandbox::InProcessSandbox::new(egress, sdk)
}

/// A fetch aborted before it leaves sends nothing; one aborted while in flight rejects at
/// once with the signal's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_fetch_rejects_with_its_reason_and_an_early_one_sends_nothing() {
    let (provider, sandbox) = provider_sandbox().await;
    let code = r#"
        const early = new AbortController();
        early.abort();
        let first = "sent";
        try { await fetch("/v1/echo", { signal: early.signal }); } catch (e) { first = e.name; }
        const late = new AbortController();
        const pending = fetch("/v1/slow", { signal: late.signal });
        setTimeout(() => late.abort(new Error("enough")), 50);
        let second = "answered";
        try { await pending; } catch (e) { second = e.message; }
        return { first, second };
    "#;
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(
        outcome.result,
        json!({"first": "AbortError", "second": "enough"})
    );
    // Rejected at once: the run was over before the provider answered (it answers `/slow`
    // after 3 s), an order of events, not a timing.
    assert_eq!(
        provider
            .seen
            .slow_finished
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the script waited for the answer"
    );
    // Only the slow request left.
    assert_eq!(outcome.http.len(), 1, "{:?}", outcome.http);
    assert!(outcome.http[0].url.ends_with("/v1/slow"));
}

/// A raw body of bytes leaves byte for byte, every value 0 to 255 included (not as UTF-8),
/// from `Uint8Array`, `ArrayBuffer` and `Blob` alike, with a Blob's type, else declared as
/// bytes (so that one starting like a UTF-16 byte order mark is no text to refuse).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_bodies_of_bytes_leave_byte_for_byte() {
    let (_provider, sandbox) = provider_sandbox().await;
    let code = r#"
        const bytes = new Uint8Array(256).map((_, i) => 255 - i);
        const echoed = async (body: any) => (await fetch("/v1/echo", { method: "POST", body })).json();
        const a = await echoed(bytes);
        const b = await echoed(bytes.buffer);
        const c = await echoed(new Blob([bytes], { type: "application/pdf" }));
        const d = await api.request("PUT", "/echo", { body: bytes, headers: { "content-type": "application/octet-stream" } });
        return [a, b, c, d].map((e) => [e.body_base64, e.headers["content-type"] ?? null]);
    "#;
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let expected = STANDARD.encode((0..=255u8).rev().collect::<Vec<u8>>());
    assert_eq!(
        outcome.result,
        json!([
            [expected, "application/octet-stream"],
            [expected, "application/octet-stream"],
            [expected, "application/pdf"],
            [expected, "application/octet-stream"]
        ])
    );
}

/// A file uploaded through the SDK (multipart, a `File` with its name and type) is stored
/// byte for byte: the demo's digest of what it received is the script's digest of what it
/// sent, and the download gives the same bytes back as a Blob. FormData by `api.request`
/// and `fetch`, and a File in an `api.request` body left to sdkbox, upload the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_uploaded_is_read_back_byte_for_byte() {
    let demo = demo("[policy]\nwrites = \"allow\"\n", Default::default()).await;
    let code = r#"
        const bytes = new Uint8Array(3000).map((_, i) => (i * 7 + 3) % 256);
        const hex = (b: ArrayBuffer) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
        const digest = hex(await crypto.subtle.digest("SHA-256", bytes));
        const file = new File([bytes], "all bytes.bin", { type: "application/octet-stream" });
        const stored = await api.files.upload({ file, purpose: "other" });
        const back = await api.files.download({ file_id: stored.id });
        const got = await back.bytes();
        const same = got.length === bytes.length && got.every((b, i) => b === bytes[i]);

        const form = new FormData();
        form.append("file", new Blob(["id,total\n1,2\n"], { type: "text/csv" }), "rows.csv");
        form.append("purpose", "receipt");
        const viaForm = await api.request("POST", "/files", { body: form });
        const viaFetch = await (await fetch("/v1/files", { method: "POST", body: form })).json();
        const viaLeft = await api.request("POST", "/files", { body: { file: new File(["x"], "x.txt", { type: "text/plain" }) } });
        const csv = await api.files.download({ file_id: viaForm.id });
        return {
            stored, digest, same, isBlob: back instanceof Blob, type: back.type,
            viaForm: [viaForm.filename, viaForm.type, viaForm.purpose, viaForm.size],
            viaFetch: [viaFetch.filename, viaFetch.sha256 === viaForm.sha256],
            viaLeft: [viaLeft.filename, viaLeft.type, viaLeft.size],
            csv: typeof csv === "string" ? csv : await csv.text(),
        };
    "#;
    let outcome = run(&demo.sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let r = &outcome.result;
    let bytes: Vec<u8> = (0..3000u32).map(|i| ((i * 7 + 3) % 256) as u8).collect();
    let digest: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(r["digest"], json!(digest), "the script's own SHA-256");
    assert_eq!(
        r["stored"]["sha256"],
        json!(digest),
        "what the demo received"
    );
    assert_eq!(r["stored"]["size"], json!(3000));
    assert_eq!(r["stored"]["filename"], json!("all bytes.bin"));
    assert_eq!(r["stored"]["type"], json!("application/octet-stream"));
    assert_eq!(r["same"], json!(true));
    assert_eq!(r["isBlob"], json!(true));
    assert_eq!(r["type"], json!("application/octet-stream"));
    assert_eq!(r["viaForm"], json!(["rows.csv", "text/csv", "receipt", 13]));
    assert_eq!(r["viaFetch"], json!(["rows.csv", true]));
    assert_eq!(r["viaLeft"], json!(["x.txt", "text/plain", 1]));
    assert_eq!(r["csv"], json!("id,total\n1,2\n"));
}

/// Bytes where the spec takes none, and a file mark that names no file, are refused with
/// what to do; nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_where_the_spec_takes_none_are_refused_with_what_to_do() {
    let demo = demo("[policy]\nwrites = \"allow\"\n", Default::default()).await;
    let code = r#"
        const out: string[] = [];
        try { await api.customers.create({ email: "a@b.c", name: new Blob(["x"]) as any }); } catch (e) { out.push(e.message); }
        try { await api.files.upload({ file: { $sdkbox_file: 3 } as any }); } catch (e) { out.push(e.message); }
        try { await api.request("POST", "/customers", { body: { email: "a@b.c", name: new Blob(["x"]) } }); } catch (e) { out.push(e.message); }
        return out;
    "#;
    let outcome = run(&demo.sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let messages: Vec<String> = serde_json::from_value(outcome.result.clone()).unwrap();
    assert!(
        messages[0].contains("must be a string; got a file"),
        "{messages:?}"
    );
    assert!(messages[1].contains("did not hand over"), "{messages:?}");
    assert!(
        messages[2].contains("cannot go in a application/json body"),
        "{messages:?}"
    );
    assert!(outcome.http.is_empty(), "{:?}", outcome.http);
}

/// The demo's PNG reaches the script as a Blob of type image/png through the SDK, as bytes
/// through fetch, and goes back to the caller as a file: `sdkbox.file` or a Blob returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_png_comes_in_as_a_blob_and_goes_back_as_a_file() {
    let demo = demo("", Default::default()).await;
    let code = r#"
        const image = await api.products.getImage({ product_id: "prod_001" });
        const fetched = new Uint8Array(await (await fetch("/v1/products/prod_001/image")).arrayBuffer());
        const csv = sdkbox.file("id,name\nprod_001,Anvil\n", { name: "products.csv", type: "text/csv" });
        return {
            picture: sdkbox.file(image, { name: "anvil.png" }),
            again: image,
            csv,
            type: image.type,
            same: fetched.length === image.size,
            signature: Array.from(fetched.slice(0, 4)),
        };
    "#;
    let outcome = run(&demo.sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let r = &outcome.result;
    assert_eq!(r["type"], json!("image/png"));
    assert_eq!(r["same"], json!(true));
    assert_eq!(r["signature"], json!([0x89, b'P', b'N', b'G']));
    assert_eq!(r["picture"]["sdkbox_file"], json!("anvil.png"));
    assert_eq!(r["picture"]["type"], json!("image/png"));
    assert_eq!(r["again"]["sdkbox_file"], json!("file-2"));
    assert_eq!(
        r["csv"],
        json!({"sdkbox_file": "products.csv", "type": "text/csv", "size": 23})
    );
    let names: Vec<&str> = outcome.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["anvil.png", "file-2", "products.csv"]);
    assert!(outcome.files[0].bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert_eq!(outcome.files[0].bytes, outcome.files[1].bytes);
    assert_eq!(outcome.files[2].bytes, b"id,name\nprod_001,Anvil\n");
    let listed = serde_json::to_value(&outcome).unwrap()["files"].clone();
    assert_eq!(
        listed[2],
        json!({"name": "products.csv", "type": "text/csv", "size": 23})
    );
}

/// Bytes that carry the secret in any form (as they are, UTF-16, base64, reversed, hex) are
/// withheld whole, never handed over cut; bytes that carry nothing pass byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_that_carry_the_secret_are_withheld_whole() {
    let provider = HostileProvider::start().await;
    let sandbox = support::sandbox(
        &provider.base,
        Some(AuthScheme::Bearer),
        EgressLimits::default(),
    );
    for form in BINARY_FORMS {
        let code = format!(
            r#"const r = await fetch("/v1/leak-binary/{form}");
            const b = new Uint8Array(await r.arrayBuffer());
            return {{ size: b.length, head: Array.from(b.slice(0, 8)), text: new TextDecoder().decode(b).slice(0, 40), file: sdkbox.file(b, {{ name: "f.bin" }}) }};"#
        );
        let outcome: Outcome = run(&sandbox, &code, &ExecLimits::default()).await;
        assert!(outcome.ok, "{form}: {outcome:?}");
        let shown = format!("{} {:?}", support::text(&outcome), outcome.files);
        assert!(!shown.contains(CANARY), "{form}: {shown}");
        let file = &outcome.files[0].bytes;
        assert!(
            !String::from_utf8_lossy(file).contains(CANARY),
            "{form}: the returned file"
        );
        if *form == "clean" {
            let head = json!([0x89, b'P', b'N', b'G', 0x00, 0xff, 0xfe, 0x80]);
            assert_eq!(outcome.result["head"], head, "{form}");
            assert_eq!(outcome.result["size"], json!(8 + 14 + 256));
            assert_eq!(file.len(), 8 + 14 + 256);
        } else {
            let text = outcome.result["text"].as_str().unwrap();
            assert!(text.starts_with("[withheld by sdkbox"), "{form}: {text}");
        }
    }
}

/// A read redirected to a download origin is followed there without the credential (the
/// provider's signed URL is the permission), with none of the script's headers but `Accept`
/// and `Range`; the script may read a download origin itself, never write to it; without
/// the origin in `download_origins` the redirect is refused as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_follow_redirects_to_download_origins_without_the_credential() {
    use axum::http::HeaderMap;
    use axum::routing::get;
    // Where the files are: it says what it was sent.
    let storage = support::serve_on_loopback(
        axum::Router::new().route(
            "/blob/{name}",
            get(|headers: HeaderMap| async move {
                let sent: Vec<String> = headers.keys().map(|k| k.to_string()).collect();
                let body = [
                    &[0x50, 0x4b, 0x03, 0x04, 0xff][..],
                    sent.join(",").as_bytes(),
                ]
                .concat();
                ([("content-type", "application/zip")], body)
            })
            .post(|| async { "written" }),
        ),
    )
    .await;
    let storage_origin = url::Url::parse(&storage.origin().ascii_serialization()).unwrap();
    let target = format!("{storage_origin}blob/artifact.zip?sig=signed");
    let api = support::serve_on_loopback(axum::Router::new().route(
        "/v1/artifacts/1/zip",
        get(move || {
            let target = target.clone();
            async move { (axum::http::StatusCode::FOUND, [("location", target)]) }
        }),
    ))
    .await;
    let sandbox = |downloads: Vec<url::Url>| sandbox_with(&api, Vec::new(), downloads, None);
    let code = format!(
        r#"const r = await api.request("GET", "/artifacts/1/zip", {{ headers: {{ "x-trace": "1", accept: "application/zip" }} }});
        const bytes = new Uint8Array(await r.arrayBuffer());
        const direct = await fetch("{storage_origin}blob/other.zip");
        let write = "sent";
        try {{ await fetch("{storage_origin}blob/x", {{ method: "POST", body: "x" }}); }} catch (e) {{ write = e.message; }}
        return {{ zip: Array.from(bytes.slice(0, 4)), sent: new TextDecoder().decode(bytes.slice(5)), direct: direct.status, write }};"#
    );
    let allowed = run(
        &sandbox(vec![storage_origin.clone()]),
        &code,
        &ExecLimits::default(),
    )
    .await;
    assert!(allowed.ok, "{allowed:?}");
    let r = &allowed.result;
    assert_eq!(r["zip"], json!([0x50, 0x4b, 0x03, 0x04]));
    let sent = r["sent"].as_str().unwrap();
    assert!(
        !sent.contains("authorization") && !sent.contains("x-trace"),
        "{sent}"
    );
    assert!(sent.contains("accept"), "{sent}");
    assert_eq!(r["direct"], json!(200));
    assert!(
        r["write"].as_str().unwrap().contains("download origin"),
        "{r}"
    );
    // The redirect, its hop, the direct read, the refused write.
    assert_eq!(allowed.http.len(), 4, "{:?}", allowed.http);
    // Not a download origin: the redirect is refused, as any to another origin.
    let refused = run(&sandbox(Vec::new()), &code, &ExecLimits::default()).await;
    let error = refused.error.expect("refused");
    assert!(error.message.contains("redirect to"), "{}", error.message);
}

/// An operation whose spec names a server of its own (Stripe's file uploads on
/// files.stripe.com) is sent there when the provider file lets scripts reach that origin,
/// else to the base URL as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_goes_to_its_own_server_when_it_may() {
    use axum::routing::post;
    let answering = |who: &'static str| {
        axum::Router::new().route(
            "/v1/files",
            post(move || async move { axum::Json(json!({ "served_by": who })) }),
        )
    };
    let api_base = support::serve_on_loopback(answering("api")).await;
    let files_base = support::serve_on_loopback(answering("files")).await;
    let spec = format!(
        "openapi: 3.0.0\ninfo: {{ title: t, version: '1' }}\nservers: [{{ url: '{api_base}' }}]\npaths:\n  /files:\n    post:\n      operationId: files/create\n      servers: [{{ url: '{files_base}' }}]\n      requestBody: {{ content: {{ multipart/form-data: {{ schema: {{ type: object, properties: {{ file: {{ type: string, format: binary }} }} }} }} }} }}\n      responses: {{ '200': {{ description: ok }} }}\n"
    );
    let api = std::sync::Arc::new(sdkbox::spec::parse("t", &spec).unwrap().api);
    let sdk = std::sync::Arc::new(sdkbox::sdk::Sdk::new(api));
    let sandbox =
        |extra: Vec<url::Url>| sandbox_with(&api_base, extra, Vec::new(), Some(sdk.clone()));
    let code = "return (await api.files.create({ file: new File(['x'], 'x.txt') })).served_by;";
    let files_origin = url::Url::parse(&files_base.origin().ascii_serialization()).unwrap();
    let allowed = run(&sandbox(vec![files_origin]), code, &ExecLimits::default()).await;
    assert_eq!(allowed.result, json!("files"), "{allowed:?}");
    let not_listed = run(&sandbox(Vec::new()), code, &ExecLimits::default()).await;
    assert_eq!(not_listed.result, json!("api"), "{not_listed:?}");
}
