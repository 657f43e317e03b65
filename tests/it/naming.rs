//! sdkbox's names against the official SDKs' (issue 22): for Stripe and Cloudflare, the share
//! of operations whose sdkbox call (`api.dns.records.list`) equals the official SDK's call
//! (`client.dns.records.list`) for the same method and route. The official maps come from
//! the pinned npm packages in tests/providers/official-sdks (`routes.cjs` instantiates each
//! SDK and records the route of every method without sending anything).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use sdkbox::sdk::Sdk;

/// `/v1/customers/{customer}` -> `/v1/customers/{}`: the SDKs and the spec name parameters
/// differently.
fn route_key(method: &str, path: &str) -> String {
    let segments: Vec<&str> = path
        .split('/')
        .map(|s| if s.starts_with('{') { "{}" } else { s })
        .collect();
    format!("{} {}", method.to_ascii_uppercase(), segments.join("/"))
}

/// The official SDK's calls by route, or `None` (a skip CI refuses) without its package.
fn official(sdk: &str) -> Option<BTreeMap<String, BTreeSet<String>>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/providers/official-sdks");
    let installed = dir.join("node_modules").join(sdk).exists();
    if !crate::support::requirement_met(
        installed,
        &format!("npm {sdk} is not installed (scripts/test-deps)"),
    ) {
        return None;
    }
    let out = Command::new("node")
        .arg("routes.cjs")
        .arg(sdk)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut routes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let route: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = route_key(
            route["method"].as_str().unwrap(),
            route["path"].as_str().unwrap(),
        );
        routes
            .entry(key)
            .or_default()
            .insert(route["call"].as_str().unwrap().to_owned());
    }
    Some(routes)
}

/// How sdkbox's names compare with the official SDK's on the routes both have.
struct Share {
    compared: usize,
    /// sdkbox's own name is the official SDK's.
    equal: usize,
    /// The official SDK's call, written against sdkbox, reaches the same operation (by its
    /// own name or by a spelling sdkbox accepts for it).
    reached: usize,
    /// Route, sdkbox's call, the official calls: where the names differ.
    differ: Vec<(String, String, Vec<String>)>,
    /// Official calls that reach another resource in sdkbox through a spelling sdkbox
    /// accepts for it (not its own name): the official call, where it went. None may.
    wrong: Vec<(String, String)>,
}

/// The `[names]` table of a shipped provider file.
fn shipped_names(file: &str) -> BTreeMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let parsed: toml::Table = toml::from_str(&text).unwrap();
    parsed
        .get("names")
        .and_then(toml::Value::as_table)
        .map(|t| {
            t.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

async fn share(spec_file: &str, sdk: &str, names: &BTreeMap<String, String>) -> Option<Share> {
    let path = crate::support::shared_spec(spec_file)?;
    let routes = official(sdk)?;
    let mut spec = sdkbox::spec::load(path.to_str().unwrap()).await.unwrap();
    sdkbox::spec::apply_names(&mut spec.api.operations, names).unwrap();
    let sdk = Sdk::new(Arc::new(spec.api));
    let mut share = Share {
        compared: 0,
        equal: 0,
        reached: 0,
        differ: Vec::new(),
        wrong: Vec::new(),
    };
    for op in &sdk.api().operations {
        let Some(calls) = routes.get(&route_key(&op.method, &op.path)) else {
            continue;
        };
        share.compared += 1;
        let ours = format!("{}.{}", op.group, op.name);
        let reaches = |call: &String| {
            let (group, method) = call.rsplit_once('.').unwrap();
            sdk.operation(group, method)
                .is_ok_and(|found| std::ptr::eq(found, op))
        };
        if calls.iter().any(reaches) {
            share.reached += 1;
        }
        for call in calls {
            let (group, method) = call.rsplit_once('.').unwrap();
            if let Ok(found) = sdk.operation(group, method)
                && route_key(&found.method, &found.path) != route_key(&op.method, &op.path)
                && !calls_of_route(&routes, found).contains(call)
                && format!("{}.{}", found.group, found.name) != *call
                && statics(&found.method, &found.path) != statics(&op.method, &op.path)
            {
                share
                    .wrong
                    .push((call.clone(), format!("{} {}", found.method, found.path)));
            }
        }
        if calls.contains(&ours) {
            share.equal += 1;
        } else {
            share.differ.push((
                format!("{} {}", op.method, op.path),
                ours,
                calls.iter().cloned().collect(),
            ));
        }
    }
    Some(share)
}

/// A route without its parameters: the official SDKs give one method to routes that differ
/// by an optional id (`/devices/policy/exclude` and `/devices/policy/{id}/exclude`).
fn statics(method: &str, path: &str) -> String {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.starts_with('{')).collect();
    format!("{method} {}", segments.join("/"))
}

/// The official calls of the route `op` is at.
fn calls_of_route<'a>(
    routes: &'a BTreeMap<String, BTreeSet<String>>,
    op: &sdkbox::spec::Operation,
) -> BTreeSet<&'a String> {
    routes
        .get(&route_key(&op.method, &op.path))
        .map(|c| c.iter().collect())
        .unwrap_or_default()
}

/// Prints the figures and every difference; returns the two shares in percent.
fn report(provider: &str, share: &Share) -> (f64, f64) {
    let percent = |n: usize| 100.0 * n as f64 / share.compared as f64;
    let (equal, reached) = (percent(share.equal), percent(share.reached));
    eprintln!(
        "{provider}: of {} operations the official SDK has, {} are named as it names them ({equal:.1}%), \
         and its call reaches {} ({reached:.1}%)",
        share.compared, share.equal, share.reached
    );
    for (route, ours, theirs) in &share.differ {
        eprintln!("  {route}: api.{ours} vs {}", theirs.join(" | "));
    }
    for (call, went) in &share.wrong {
        eprintln!("  wrong: the official {call}, a spelling sdkbox accepts, reaches {went}");
    }
    (equal, reached)
}

/// Reports `share` and asserts its floors: enough routes compared, no spelling reaching
/// another resource, and the two shares at or above `equal_floor` and `reached_floor`.
fn holds(provider: &str, share: &Share, compared: usize, equal_floor: f64, reached_floor: f64) {
    let (equal, reached) = report(provider, share);
    assert!(
        share.compared > compared,
        "{provider}: only {} routes compared",
        share.compared
    );
    assert!(share.wrong.is_empty(), "{provider}: {:?}", share.wrong);
    assert!(
        equal >= equal_floor && reached >= reached_floor,
        "{provider}: {equal:.1}% named alike, {reached:.1}% reached"
    );
}

#[tokio::test]
async fn stripe_names_match_the_official_sdk() {
    let Some(alone) = share("stripe-spec3.json", "stripe", &BTreeMap::new()).await else {
        return;
    };
    holds("Stripe, from the spec alone", &alone, 400, 90.0, 92.0);
    let names = shipped_names("stripe.toml");
    let Some(shipped) = share("stripe-spec3.json", "stripe", &names).await else {
        return;
    };
    holds(
        "Stripe, with examples/stripe.toml's [names]",
        &shipped,
        400,
        95.0,
        95.0,
    );
}

/// Cloudflare's routes alone, and with the `[names]` of the shipped examples/cloudflare.toml
/// (its official SDK's layout where the spec does not say it).
#[tokio::test]
async fn cloudflare_names_match_the_official_sdk() {
    let spec = "cloudflare-openapi.json";
    let Some(alone) = share(spec, "cloudflare", &BTreeMap::new()).await else {
        return;
    };
    holds(
        "Cloudflare, from the routes alone",
        &alone,
        1000,
        45.0,
        55.0,
    );
    let names = shipped_names("cloudflare.toml");
    let Some(shipped) = share(spec, "cloudflare", &names).await else {
        return;
    };
    holds(
        "Cloudflare, with examples/cloudflare.toml's [names]",
        &shipped,
        1000,
        90.0,
        95.0,
    );
}
