//! Method overrides against a real framework (issue 20): Express 5 behind the common
//! method-override middleware (`tests/providers/express/`), where each request of
//! `attacks.json`, sent raw, runs the DELETE handler although its method is POST. Sent
//! through sdkbox, with DELETE denied and updates allowed, none may reach it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use sdkbox::config::{ApprovalArgs, Embedded, ProviderFile};
use sdkbox::egress::Egress;
use sdkbox::sandbox::{ExecLimits, InProcessSandbox};
use sdkbox::sdk::Sdk;
use serde_json::Value;

use crate::support::run;

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/providers/express")
}

/// The Express provider, running until dropped (it ends when its stdin closes).
struct Express {
    _child: tokio::process::Child,
    base: String,
}

impl Express {
    async fn start() -> Option<Self> {
        let (child, line) = crate::support::node_provider(&folder(), "method-override").await?;
        let port = serde_json::from_str::<Value>(&line).unwrap()["port"]
            .as_u64()
            .unwrap();
        Some(Self {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
        })
    }

    /// The methods the handlers saw since the last call, which it then forgets.
    async fn seen(&self) -> Vec<String> {
        let client = reqwest::Client::new();
        let log: Vec<Value> = client
            .get(format!("{}/__log", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        client
            .delete(format!("{}/__log", self.base))
            .send()
            .await
            .unwrap();
        log.iter()
            .map(|entry| entry["method"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// sdkbox in front of the provider: DELETE denied, every other write allowed.
async fn sandbox(express: &Express) -> InProcessSandbox {
    let policy = "[policy]\nwrites = \"allow\"\n[policy.operations]\n\"items.delete\" = \"deny\"\n";
    let mut file: ProviderFile = toml::from_str(policy).unwrap();
    file.base_url = Some(format!("{}/v1", express.base).parse().unwrap());
    file.approval = ApprovalArgs::default();
    let spec = std::fs::read_to_string(folder().join("openapi.json")).unwrap();
    let embedded = Embedded {
        name: "express",
        spec: Box::leak(spec.into_boxed_str()),
        guides: Vec::new(),
    };
    let loaded = file
        .load(Some(embedded), Some("test-key".into()))
        .await
        .unwrap();
    let sdk = Arc::new(Sdk::new(loaded.api.clone().unwrap()));
    InProcessSandbox::new(Egress::new(loaded.egress_config).unwrap(), Some(sdk))
        .with_approvals(loaded.approvals)
}

/// The script that sends `entry` with `fetch`, or `None` when its body is bytes no script can
/// send (request bodies are strings, sent as UTF-8).
fn script(entry: &Value) -> Option<String> {
    let body = match (&entry["body"], &entry["bodyBase64"]) {
        (Value::String(body), _) => body.clone(),
        (_, Value::String(encoded)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap();
            String::from_utf8(bytes).ok()?
        }
        _ => String::new(),
    };
    let mut headers = Vec::new();
    for (name, value) in entry["headers"].as_object().unwrap() {
        let values = match value {
            Value::Array(values) => values.clone(),
            one => vec![one.clone()],
        };
        for value in values {
            headers.push(serde_json::json!([name, value]));
        }
    }
    let body = match body.is_empty() {
        true => Value::Null,
        false => Value::String(body),
    };
    let init = serde_json::json!({
        "method": entry["method"],
        "headers": headers,
        "body": body,
    });
    Some(format!(
        "const r = await fetch({}, {init}); return r.status;",
        entry["path"]
    ))
}

fn entries(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(folder().join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_method_override_reaches_a_handler_behind_express_method_override() {
    let Some(express) = Express::start().await else {
        return;
    };
    // The middleware is real: the first attack, sent raw, runs the DELETE handler.
    let attacks = entries("attacks.json");
    let first = &attacks[0];
    let raw = reqwest::Client::new()
        .request(
            first["method"].as_str().unwrap().parse().unwrap(),
            format!("{}{}", express.base, first["path"].as_str().unwrap()),
        )
        .bearer_auth("test-key")
        .send()
        .await
        .unwrap();
    assert!(raw.status().is_success(), "{raw:?}");
    assert_eq!(
        express.seen().await,
        ["DELETE"],
        "the raw attack did not reach DELETE"
    );
    let sandbox = sandbox(&express).await;
    let mut unsendable = Vec::new();
    let mut sent = Vec::new();
    for entry in &attacks {
        let name = entry["name"].as_str().unwrap();
        let Some(code) = script(entry) else {
            unsendable.push(name.to_owned());
            continue;
        };
        let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
        let seen = express.seen().await;
        assert!(
            !seen.iter().any(|method| method == "DELETE"),
            "{name} reached the DELETE handler through sdkbox: {outcome:?}"
        );
        // Refused before it left, with an error that says where the override was.
        if !seen.is_empty() || outcome.error.is_none() {
            sent.push(format!("{name}: {seen:?} {:?}", outcome.error));
        }
    }
    assert!(sent.is_empty(), "attacks sent: {sent:#?}");
    // Bytes that are not UTF-8 (gzip, UTF-16 with a high byte) cannot be sent by any script.
    assert!(unsendable.len() <= 10, "{unsendable:?}");
    // Spellings the middleware does not honour do not reach DELETE either, sent or refused.
    let near = entries("near-misses.json");
    let mut refused = 0;
    for entry in &near {
        let Some(code) = script(entry) else {
            continue;
        };
        let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
        refused += usize::from(outcome.error.is_some());
        let seen = express.seen().await;
        assert!(
            !seen.iter().any(|method| method == "DELETE"),
            "{}: {outcome:?}",
            entry["name"]
        );
    }
    eprintln!(
        "{} attacks refused, {} not sendable by a script; of {} near-misses, {refused} refused",
        attacks.len() - unsendable.len(),
        unsendable.len(),
        near.len()
    );
    // And the denied operation itself is refused, while an update goes out as one.
    let outcome = run(
        &sandbox,
        "await api.items.delete({ id: 'it_2' });",
        &ExecLimits::default(),
    )
    .await;
    assert_eq!(outcome.error.unwrap().name.as_deref(), Some("PolicyError"));
    let outcome = run(
        &sandbox,
        "return (await api.items.update({ id: 'it_2', name: 'renamed' })).name;",
        &ExecLimits::default(),
    )
    .await;
    assert_eq!(outcome.result, "renamed", "{outcome:?}");
    assert_eq!(express.seen().await, ["POST"]);
}

/// The ways a multipart part's head can name the part, `{K}` for the name and `{E}` for the
/// line ending: read by the book, and as loosely as some parser reads them (Rack searches its
/// head for `Content-Disposition:` anywhere, takes `Content-ID:` as a name, folds lines).
const HEADS: [&str; 26] = [
    "Content-Disposition: form-data; name=\"{K}\"",
    "content-disposition: form-data; name={K}",
    "X-Content-Disposition: form-data; name=\"{K}\"",
    " Content-Disposition: form-data; name=\"{K}\"",
    "Content-Type: text/plain{E} Content-Disposition: form-data; name=\"{K}\"",
    "Content-ID: {K}",
    "Content-ID: <{K}>",
    "Content-Disposition: form-data;name={K}",
    "Content-Disposition: form-data  name={K}",
    "Content-Disposition: form-data; filename=\"a.txt\"; name=\"{K}\"",
    "Content-Disposition: attachment; name=\"{K}\"",
    "Foo: bar; Content-Disposition: form-data; name=\"{K}\"",
    "Content-Disposition:{E} form-data; name=\"{K}\"",
    "Content-Type: text/plain; Content-Disposition: form-data; name={K}",
    // Across line breaks: Rack's patterns read past them.
    "Content-Disposition: form-data{E}; name={K}",
    "Content-Disposition: form-data;{E}name={K}",
    "Content-Disposition: form-data{E}X-Foo; name={K}",
    "Content-Type: text/plain{E}Content-Disposition:{E};name={K}",
    "Content-ID:{E}{K}",
    // A blank line of bare line feeds, which ends the head only for parsers that read them.
    "Content-Disposition: form-data\n\n; name=\"{K}\"",
    "Content-Disposition: form-data;\n\nname={K}",
    "Content-Disposition: form-data; name=\"n\"\n\nContent-Disposition: form-data; name={K}",
    // A value Rack cuts at a special character, a word that once cut the parameters short,
    // blanks around `=` (python-multipart and Bottle read past them).
    "Content-Disposition: form-data; name={K},x",
    "Content-Disposition: form-data; name={K}/x",
    "Content-Disposition: form-data; x=content-id; name={K}",
    "Content-Disposition: form-data; name = \"{K}\"",
];

/// Every multipart spelling of `_method` the generator makes that Rack 2.2 (Debian's
/// ruby-rack, behind `Rack::MethodOverride` as Rails and Sinatra mount it) runs as DELETE, or
/// that busboy (multer's parser, for Express), Werkzeug (Flask), python-multipart (Starlette,
/// FastAPI) or multipart (Bottle's) reads a `_method` field in, is refused by sdkbox before
/// it leaves; and bodies built as the SDK builds them pass. The parsers are the oracles: they
/// read each spelling first. Line breaks in the heads and at their ends are CRLF, bare line
/// feeds, or mixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_multipart_spelling_rack_runs_as_another_method_is_refused() {
    let oracle = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/providers/rack/oracle.rb");
    let rack = std::process::Command::new("ruby")
        .args(["-e", "require 'rack'"])
        .status()
        .is_ok_and(|status| status.success());
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/providers/python");
    if !crate::support::requirement_met(rack, "Ruby and Debian's ruby-rack are not installed")
        || !crate::support::requirement_met(
            folder().join("node_modules/busboy").exists(),
            "busboy is not installed (scripts/test-deps)",
        )
        || !crate::support::requirement_met(
            python.join(".venv/bin/python").exists(),
            "the Python parsers are not installed (scripts/test-deps)",
        )
    {
        return;
    }
    let mut cases = Vec::new();
    for head in HEADS {
        // Line breaks in the head, and the one of the blank line that ends it.
        for (ending, blank) in [
            ("\r\n", "\r\n"),
            ("\n", "\n"),
            ("\r\n", "\n"),
            ("\n", "\r\n"),
        ] {
            for before in [
                "",
                "--b{E}Content-Disposition: form-data; name=\"n\"{E}{E}x{E}",
                // A delimiter line Rack reads after stripping its blanks.
                "--b{E}Content-Disposition: form-data; name=\"n\"{E}{E}x{E} ",
            ] {
                let head = head.replace("{K}", "_method");
                let body = format!("{before}--b{{E}}{head}{{E}}{{B}}DELETE{{E}}--b--{{E}}")
                    .replace("{E}", ending)
                    .replace("{B}", blank);
                cases.push(body);
            }
        }
    }
    let input: String = cases
        .iter()
        .map(|body| {
            serde_json::json!({
                "method": "POST",
                "path": "/v1/items/it_1",
                "content_type": "multipart/form-data; boundary=b",
                "body": body,
            })
            .to_string()
                + "\n"
        })
        .collect();
    let read: Vec<String> = ask("ruby", &[oracle.to_str().unwrap()], &folder(), &input)
        .iter()
        .map(|answer| answer["method"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(read.len(), cases.len(), "Rack answered {read:?}");
    // busboy, as multer hands Express apps their fields (method-override reads `_method`).
    let busboy: Vec<bool> = ask("node", &["busboy-oracle.mjs"], &folder(), &input)
        .iter()
        .map(|answer| {
            answer["names"]
                .as_array()
                .is_some_and(|names| names.iter().any(|n| n == "_method"))
        })
        .collect();
    assert_eq!(busboy.len(), cases.len(), "busboy answered {busboy:?}");
    let pythons: Vec<Vec<&str>> = ask(
        python.join(".venv/bin/python").to_str().unwrap(),
        &["oracle.py"],
        &python,
        &input,
    )
    .iter()
    .map(|answer| {
        ["werkzeug", "python-multipart", "multipart"]
            .into_iter()
            .filter(|parser| {
                answer[parser]
                    .as_array()
                    .is_some_and(|names| names.iter().any(|n| n == "_method"))
            })
            .collect()
    })
    .collect();
    assert_eq!(pythons.len(), cases.len(), "Python answered {pythons:?}");
    let sandbox = crate::support::offline();
    let mut overridden = 0;
    let mut by_busboy = 0;
    let mut by_python = std::collections::BTreeMap::<&str, usize>::new();
    let mut sent = Vec::new();
    for (((body, rack), busboy), python) in cases.iter().zip(&read).zip(&busboy).zip(&pythons) {
        by_busboy += usize::from(*busboy);
        for parser in python {
            *by_python.entry(parser).or_default() += 1;
        }
        if rack != "DELETE" && !busboy && python.is_empty() {
            continue;
        }
        overridden += 1;
        let init = serde_json::json!({
            "method": "POST",
            "headers": {"content-type": "multipart/form-data; boundary=b"},
            "body": body,
        });
        let code = format!("const r = await fetch('/v1/items/it_1', {init}); return r.status;");
        let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
        let refused = outcome
            .error
            .as_ref()
            .is_some_and(|e| e.message.contains("web frameworks"));
        if !refused {
            sent.push(format!("{body:?}: {:?}", outcome.error));
        }
    }
    eprintln!(
        "{} spellings; a parser read {overridden} as overriding (busboy {by_busboy}, \
         Python {by_python:?}); sdkbox sent {}",
        cases.len(),
        sent.len()
    );
    assert!(by_busboy >= 4, "{busboy:?}");
    for parser in ["werkzeug", "python-multipart", "multipart"] {
        assert!(by_python.get(parser) >= Some(&4), "{parser}: {by_python:?}");
    }
    // The oracle is alive: the spelling by the book, at least, overrides.
    assert!(overridden >= 4, "{read:?}");
    assert!(
        sent.is_empty(),
        "sent although a parser reads `_method` in them: {sent:#?}"
    );
    // A body as the SDK builds it, file content with bare line feeds included, is sent.
    let init = serde_json::json!({
        "method": "POST",
        "headers": {"content-type": "multipart/form-data; boundary=b"},
        "body": "--b\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\nx\n\ny\r\n--b--\r\n",
    });
    let code = format!("const r = await fetch('/v1/items/it_1', {init}); return r.status;");
    let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
    assert!(
        !format!("{:?}", outcome.error).contains("web frameworks"),
        "{outcome:?}"
    );
}

/// The JSON lines a parser oracle (`program args...` run in `dir`) answers to `input`.
fn ask(program: &str, args: &[&str], dir: &Path, input: &str) -> Vec<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}
