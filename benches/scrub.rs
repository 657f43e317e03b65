//! Scrubber benchmark: what checking a reply for the provider secret costs, in time and in
//! the work the execution's budget counts, for replies of the shapes providers send (the
//! real specs in ../shared/specs as JSON, lists, HTML, base64 files) and for replies crafted
//! to cost the most. Run with `cargo bench --bench scrub`; the committed figures are in
//! docs/BENCHMARKS.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sdkbox::egress::{Scrubber, WORK_PER_RECEIVED_BYTE};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "sk_test_51HqLyjWDarjtT1zdp7dcXbfJ0X";

/// A list page as Stripe sends it: ids, URLs with escapes, prose with quotes and lines.
fn list(items: usize) -> String {
    let data: Vec<serde_json::Value> = (0..items)
        .map(|i| {
            serde_json::json!({
                "id": format!("cus_{i:014}"),
                "object": "customer",
                "url": format!("https://api.example.com/v1/customers/cus_{i}?expand%5B%5D=sources&limit=10"),
                "description": format!("Customer {i}: \"gold\" plan,\nrenews on 2026-12-{:02} & pays by card", i % 28 + 1),
                "metadata": {"order": i, "note": "<b>vip</b> &amp; friends"},
            })
        })
        .collect();
    serde_json::to_string(&serde_json::json!({"object": "list", "data": data})).unwrap()
}

/// A file as GitHub's contents API sends it: base64 wrapped at 60, in JSON.
fn contents(source: &str) -> String {
    let encoded = STANDARD.encode(source);
    let wrapped: Vec<&str> = encoded
        .as_bytes()
        .chunks(60)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    serde_json::to_string(&serde_json::json!({
        "type": "file", "encoding": "base64", "content": wrapped.join("\n"),
    }))
    .unwrap()
}

/// Pseudo-random bytes (an attachment).
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// The replies crafted to cost the most that the review and this benchmark found.
fn crafted(len: usize) -> Vec<(&'static str, String)> {
    let fill = |unit: String| unit.repeat(len / unit.len() + 1);
    vec![
        (
            "nested base64, every escape",
            fill(format!(
                "{}%41&#65;=41\\u0041 ",
                STANDARD.encode(STANDARD.encode("A".repeat(60)))
            )),
        ),
        ("one base64 run of A", "A".repeat(len)),
        (
            "base64 of text of escapes",
            STANDARD.encode(fill("%41\\u0042&#67;=44&amp;\\n".to_owned())),
        ),
        (
            "runs just long enough",
            fill(format!("{}!", "QUJD".repeat(12))),
        ),
        ("escapes only", fill("\\u0041%42&#x43;=44\\x45".to_owned())),
        ("a run of backslashes", "\\".repeat(len)),
        ("escape marks only", fill("\\%=&".to_owned())),
        ("JSON in JSON, six deep", {
            let mut nested =
                serde_json::json!({"a": fill("\"x\\/\u{1}".to_owned())[..len / 64].to_owned()});
            for _ in 0..6 {
                nested = serde_json::json!({"a": nested.to_string()});
            }
            nested.to_string()
        }),
        (
            "HTML references only",
            fill("&amp;&lowbar;&#0000065;&CounterClockwiseContourIntegral;&notin".to_owned()),
        ),
    ]
}

struct Row {
    name: String,
    bytes: usize,
    times: Vec<Duration>,
    work: usize,
    outcome: &'static str,
}

fn measure(scrubber: &Scrubber, name: &str, text: &str, runs: usize) -> Row {
    let mut times = Vec::new();
    let mut work = 0;
    let mut outcome = "";
    for _ in 0..runs {
        let bounded = scrubber.bounded(usize::MAX / 2, CancellationToken::new());
        let started = Instant::now();
        let clean = bounded.scrub(text);
        times.push(started.elapsed());
        work = bounded.used().unwrap_or_default();
        outcome = match clean {
            std::borrow::Cow::Borrowed(_) => "clean",
            std::borrow::Cow::Owned(ref s) if s.starts_with("[withheld") => "withheld",
            std::borrow::Cow::Owned(_) => "cut",
        };
    }
    times.sort();
    Row {
        name: name.to_owned(),
        bytes: text.len(),
        times,
        work,
        outcome,
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scrubber = Scrubber::for_secret(SECRET);
    let mut replies: Vec<(String, String)> = vec![
        ("Stripe list, 1,000 customers".into(), list(1_000)),
        (
            "GitHub file (this crate's lib sources), base64".into(),
            contents(&std::fs::read_to_string(root.join("src/egress/session.rs")).unwrap()),
        ),
        (
            "HTML page with entities".into(),
            "<p>Caf&eacute; &amp; bar &#8212; 100% = fine, <a href=\"/a?b=1&amp;c=%2F\">link</a></p>\n"
                .repeat(12_000),
        ),
        ("attachment, base64 of 1 MB".into(), STANDARD.encode(noise(1 << 20))),
    ];
    for spec in [
        "stripe-spec3.json",
        "github-api.github.com.json",
        "cloudflare-openapi.json",
    ] {
        let path = root.join("../shared/specs").join(spec);
        if let Ok(text) = std::fs::read_to_string(&path) {
            replies.push((format!("{spec} as a reply"), text));
        }
    }
    let mut rows: Vec<Row> = replies
        .iter()
        .map(|(name, text)| measure(&scrubber, name, text, 5))
        .collect();
    let crafted_rows: Vec<Row> = crafted(1 << 20)
        .iter()
        .map(|(name, text)| measure(&scrubber, &format!("crafted: {name}"), text, 3))
        .collect();
    rows.extend(crafted_rows);

    println!(
        "secret of {} characters; budget: {WORK_PER_RECEIVED_BYTE} x the execution's response budget\n",
        SECRET.len()
    );
    println!("| reply | bytes | work (x bytes) | median | MB/s | ns per work byte | result |");
    println!("|---|---|---|---|---|---|---|");
    for row in &rows {
        let median = row.times[row.times.len() / 2];
        let mb_s = row.bytes as f64 / median.as_secs_f64() / 1e6;
        let ns_per_work = median.as_nanos() as f64 / row.work.max(1) as f64;
        println!(
            "| {} | {} | {:.1} | {:.1} ms | {:.0} | {:.2} | {} |",
            row.name,
            row.bytes,
            row.work as f64 / row.bytes as f64,
            median.as_secs_f64() * 1e3,
            mb_s,
            ns_per_work,
            row.outcome,
        );
    }
    let slowest = rows
        .iter()
        .map(|r| r.times[r.times.len() / 2].as_nanos() as f64 / r.work.max(1) as f64)
        .fold(0.0, f64::max);
    let budget =
        sdkbox::egress::EgressLimits::default().max_total_response_bytes * WORK_PER_RECEIVED_BYTE;
    println!(
        "\nAt the slowest rate above, the default budget ({} MiB of work) is {:.2} s of one core.",
        budget >> 20,
        budget as f64 * slowest / 1e9
    );
    // What making a scrubber costs (once per credential; per session with a key a client
    // sends), by the secret's length.
    let jwt = format!(
        "eyJhbGciOiJSUzI1NiJ9.{}.{}",
        "eyJzdWIiOiIx".repeat(90),
        "Zm9vYmFy".repeat(43)
    );
    for secret in [
        SECRET.to_owned(),
        "k".repeat(64) + "x",
        SECRET.repeat(40),
        jwt,
    ] {
        let started = Instant::now();
        let built = Scrubber::for_secret(&secret);
        let took = started.elapsed();
        assert!(!built.scrub(&secret).contains(&secret));
        println!(
            "a scrubber for a secret of {} characters: made in {:.1} ms",
            secret.len(),
            took.as_secs_f64() * 1000.0
        );
    }
}
