//! The type check of `execute` scored on the frozen blind set `tests/eval/typecheck.json`
//! (173 scripts over the demo and the three real specs, written by a helper who never saw
//! the checker): the share of mistakes the SDK's types can see that are stopped before
//! anything runs, and correct scripts wrongly stopped. Prints the table committed to
//! docs/BENCHMARKS.md; asserts that no correct script is stopped and a floor on the rest.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sdkbox::typecheck::{Mode, TypeCheck, Verdict};
use serde_json::Value;

use crate::support::shared_spec;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blind_set_is_stopped_where_types_see_it_and_correct_code_runs() {
    let Some(tsc) = crate::types::tsc() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let entries: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/eval/typecheck.json")).unwrap(),
    )
    .unwrap();
    let specs = [
        ("demo", Some(root.join("docs-index/demo/openapi.yaml"))),
        ("stripe", shared_spec("stripe-spec3.json")),
        ("github", shared_spec("github-api.github.com.json")),
        ("cloudflare", shared_spec("cloudflare-openapi.json")),
    ];
    // (spec) -> [visible mistakes, stopped; invisible mistakes, stopped; correct, stopped;
    // visible mistakes stopped or warned about]
    let mut table: BTreeMap<&str, [usize; 7]> = BTreeMap::new();
    let mut wrongly_stopped = Vec::new();
    let mut missed = Vec::new();
    for (name, path) in specs {
        let Some(path) = path else { return };
        let spec = sdkbox::spec::load(path.to_str().unwrap()).await.unwrap();
        let sdk = Arc::new(sdkbox::sdk::Sdk::new(Arc::new(spec.api)));
        let check = checker(&tsc, sdk).await;
        let row = table.entry(name).or_default();
        for entry in entries.iter().filter(|e| e["spec"] == name) {
            let code = entry["code"].as_str().unwrap();
            let (stopped, warned) =
                match check.verdict(code, &sdkbox::fair::Principal::stdio()).await {
                    Verdict::Stop(error) => (Some(error.message), false),
                    Verdict::Run(warnings) => (None, !warnings.is_empty()),
                };
            let column = match (entry["kind"].as_str(), entry["types_can_see"].as_bool()) {
                (Some("correct"), _) => 4,
                (_, Some(true)) => 0,
                _ => 2,
            };
            row[column] += 1;
            if stopped.is_some() {
                row[column + 1] += 1;
            }
            if column == 0 && (stopped.is_some() || warned) {
                row[6] += 1;
            }
            match (column, stopped) {
                (4, Some(why)) => wrongly_stopped.push(format!("{}: {why}", entry["id"])),
                (0, None) => missed.push(format!("{} ({})", entry["id"], entry["class"])),
                _ => {}
            }
        }
    }
    let mut totals = [0usize; 7];
    println!(
        "| spec | mistakes types can see: stopped | stopped or warned | other mistakes: stopped | correct: wrongly stopped |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, row) in &table {
        for (total, n) in totals.iter_mut().zip(row) {
            *total += n;
        }
        println!(
            "| {name} | {}/{} | {}/{} | {}/{} | {}/{} |",
            row[1], row[0], row[6], row[0], row[3], row[2], row[5], row[4]
        );
    }
    println!(
        "| all | {}/{} ({:.0}%) | {}/{} ({:.0}%) | {}/{} | {}/{} |",
        totals[1],
        totals[0],
        100.0 * totals[1] as f64 / totals[0].max(1) as f64,
        totals[6],
        totals[0],
        100.0 * totals[6] as f64 / totals[0].max(1) as f64,
        totals[3],
        totals[2],
        totals[5],
        totals[4]
    );
    println!("not stopped: {missed:?}");
    assert!(
        wrongly_stopped.is_empty(),
        "correct scripts stopped:\n{}",
        wrongly_stopped.join("\n")
    );
    assert!(totals[0] >= 60 && totals[4] >= 60, "{totals:?}");
    // Floor: 55/76 stopped, 0/81 wrongly (2026-12-02, after the review narrowed what blocks
    // to what the SDK refuses whatever the code computes; the first score, 59, also blocked
    // valid code outside this set). The misses are response fields (warnings by design),
    // values computed at run time, and spellings the SDK resolves.
    assert!(totals[1] >= 55, "{totals:?}");
}

/// The second blind set, `tests/eval/typecheck-blind2.json` (issue 35: 164 scripts, every
/// mistake after a write, Cloudflare under the shipped example's names), scored by class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_blind_set_by_class() {
    let Some(all) = by_class("typecheck-blind2.json", Names::Shipped).await else {
        return;
    };
    assert!(all[0] >= 80, "{all:?}");
}

/// The third blind set, `tests/eval/typecheck-blind3.json` (issue 35, item 9: 193 scripts,
/// 117 mistakes of ten classes each after a write), scored by class. It was written against
/// the shipped Cloudflare file's group renames, before its operation renames (which make
/// some of its "mistakes", like `api.cache.purge`, the official names), so it is scored
/// under those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_third_blind_set_by_class() {
    let Some(all) = by_class("typecheck-blind3.json", Names::ShippedGroups).await else {
        return;
    };
    assert!(all[0] >= 110, "{all:?}");
}

/// `text`'s first `n` characters.
fn cut(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

/// The fourth blind set, `tests/eval/typecheck-blind4.json` (issue 35, item 9: 170 scripts,
/// 100 mistakes of ten classes each after a write), written against the shipped Stripe and
/// Cloudflare names, scored by class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fourth_blind_set_by_class() {
    let Some(all) = by_class("typecheck-blind4.json", Names::Both).await else {
        return;
    };
    assert!(all[0] >= 90, "{all:?}");
}

/// What adversarial reviews of issue 35's rules found, `tests/eval/typecheck-review.json`:
/// correct code the rules stopped (Stripe's expandable fields, `Record` parameters, GitHub's
/// directory contents, GraphQL and paths with slashes by `fetch`), each run, and the misses,
/// each stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_reviews_found_runs_or_stops() {
    let Some(all) = by_class("typecheck-review.json", Names::Both).await else {
        return;
    };
    assert_eq!(all[1], all[0], "{all:?}");
}

/// The names a blind set is scored under.
enum Names {
    /// `examples/cloudflare.toml`'s `[names]`; Stripe's spec as it is.
    Shipped,
    /// Its group renames alone (keys that name a group of the spec).
    ShippedGroups,
    /// The `[names]` of both `examples/cloudflare.toml` and `examples/stripe.toml`.
    Both,
}

/// Scores the blind set `tests/eval/<file>` by class: how many mistakes are stopped before
/// anything is sent, warned about, or missed, and how many correct scripts are stopped or
/// warned. Prints the table committed to docs/BENCHMARKS.md, asserts no correct script is
/// stopped, and returns the mistakes' [count, stopped, warned] (`None` without the compiler
/// or the specs).
async fn by_class(file: &str, names: Names) -> Option<[usize; 3]> {
    let tsc = crate::types::tsc()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let entries: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(root.join("tests/eval").join(file)).unwrap())
            .unwrap();
    let shipped = |provider: &str| -> BTreeMap<String, String> {
        let file: toml::Value = toml::from_str(
            &std::fs::read_to_string(root.join(format!("examples/{provider}.toml"))).unwrap(),
        )
        .unwrap();
        file["names"]
            .as_table()
            .unwrap()
            .iter()
            .map(|(from, to)| (from.clone(), to.as_str().unwrap().to_owned()))
            .collect()
    };
    let specs = [
        ("demo", Some(root.join("docs-index/demo/openapi.yaml"))),
        ("stripe", shared_spec("stripe-spec3.json")),
        ("github", shared_spec("github-api.github.com.json")),
        ("cloudflare", shared_spec("cloudflare-openapi.json")),
    ];
    // (class) -> [mistakes, stopped, warned]; correct: [scripts, stopped, warned]
    let mut by_class: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut correct = [0usize; 3];
    let mut wrongly_stopped = Vec::new();
    let mut missed = Vec::new();
    for (name, path) in specs {
        let path = path?;
        let mut spec = sdkbox::spec::load(path.to_str().unwrap()).await.unwrap();
        if name == "cloudflare" {
            let groups: std::collections::HashSet<&str> = spec
                .api
                .operations
                .iter()
                .flat_map(|op| {
                    op.group
                        .match_indices('.')
                        .map(|(at, _)| &op.group[..at])
                        .chain([op.group.as_str()])
                })
                .collect();
            let chosen: BTreeMap<String, String> = shipped("cloudflare")
                .into_iter()
                .filter(|(from, _)| {
                    !matches!(names, Names::ShippedGroups) || groups.contains(from.as_str())
                })
                .collect();
            sdkbox::spec::apply_names(&mut spec.api.operations, &chosen).unwrap();
        }
        if name == "stripe" && matches!(names, Names::Both) {
            sdkbox::spec::apply_names(&mut spec.api.operations, &shipped("stripe")).unwrap();
        }
        let sdk = Arc::new(sdkbox::sdk::Sdk::new(Arc::new(spec.api)));
        let check = checker(&tsc, sdk).await;
        for entry in entries.iter().filter(|e| e["spec"] == name) {
            let code = entry["code"].as_str().unwrap();
            let verdict = check.verdict(code, &sdkbox::fair::Principal::stdio()).await;
            let (stopped, warned) = match &verdict {
                Verdict::Stop(_) => (true, false),
                Verdict::Run(warnings) => (false, !warnings.is_empty()),
            };
            let row = match entry["kind"].as_str() {
                Some("correct") => &mut correct,
                _ => by_class
                    .entry(entry["class"].as_str().unwrap().to_owned())
                    .or_default(),
            };
            row[0] += 1;
            row[1] += usize::from(stopped);
            row[2] += usize::from(warned);
            if let (Some("correct"), Verdict::Stop(error)) = (entry["kind"].as_str(), &verdict) {
                wrongly_stopped.push(format!("{}: {}", entry["id"], error.message));
            }
            if entry["kind"] != "correct"
                && let Verdict::Run(warnings) = &verdict
            {
                let how = match warnings.first() {
                    Some(warning) => format!("warned: {}", cut(warning, 200)),
                    None => "missed".to_owned(),
                };
                missed.push(format!("{} ({}, {how})", entry["id"], entry["class"]));
            }
        }
    }
    println!("{file}");
    println!("| class | mistakes | stopped | warned | missed |");
    println!("|---|---:|---:|---:|---:|");
    let mut all = [0usize; 3];
    for (class, [n, stopped, warned]) in &by_class {
        println!(
            "| {class} | {n} | {stopped} | {warned} | {} |",
            n - stopped - warned
        );
        all = [all[0] + n, all[1] + stopped, all[2] + warned];
    }
    println!(
        "| all mistakes | {} | {} ({:.0}%) | {} | {} |",
        all[0],
        all[1],
        100.0 * all[1] as f64 / all[0].max(1) as f64,
        all[2],
        all[0] - all[1] - all[2]
    );
    println!(
        "| correct scripts | {} | {} | {} | |",
        correct[0], correct[1], correct[2]
    );
    println!("not stopped: {missed:#?}");
    assert!(
        wrongly_stopped.is_empty(),
        "correct scripts stopped: {wrongly_stopped:#?}"
    );
    Some(all)
}

/// Through the official TypeScript clients (1.x, and 2.x in both eras): mistakes refused
/// before the demo provider receives anything, a correct write run, a warning for an
/// undeclared response property, a killed compiler replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_sees_mistakes_refused_before_anything_is_sent() {
    let Some(tsc) = crate::types::tsc() else {
        return;
    };
    let Some(dir) = crate::clients::node_client() else {
        return;
    };
    let args = serde_json::json!(["serve", "--demo", "--writes", "allow", "--tsc", tsc]);
    for (sdk, era) in [("v1", "legacy"), ("v2", "legacy"), ("v2", "2026-07-28")] {
        let output = tokio::process::Command::new("node")
            .arg("typecheck.mjs")
            .current_dir(&dir)
            .env("SDK", sdk)
            .env("ERA", era)
            .env("TRANSPORT", "stdio")
            .env("SDKBOX_BIN", env!("CARGO_BIN_EXE_sdkbox"))
            .env("SDKBOX_ARGS", args.to_string())
            .env("SDKBOX_NO_MODEL", "1")
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let report = crate::clients::client_report(&output);
        crate::clients::assert_checks_passed(&report, &format!("{sdk} {era}"));
        let checks = report["checks"].as_object().unwrap();
        assert_eq!(checks.len(), 9, "{report}");
        assert_eq!(report["protocol"], crate::clients::expected_protocol(era));
    }
}

/// Review findings: valid code the check once stopped runs; the compiler reads no file a
/// script names, and checks cannot see each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_code_is_never_stopped_and_scripts_cannot_read_files_through_the_compiler() {
    let Some(check) = demo_checker().await else {
        return;
    };
    let valid = [
        "const filter = { status: \"paid\" }; return api.orders.list(filter);",
        "const out = []; for (const status of [\"paid\", \"pending\"]) out.push(await api.orders.list({ status })); return out;",
        "try { return await api.orders.get({ order_id: \"ord_001\" }); } catch (e: ApiError) { return e.message; }",
        "async function count(): number { return 1 }\nreturn api.customers.list(null);",
        "return api.orders.retrieve({ order_id: \"ord_001\" });",
        "const half = \"2\"; return api.customers.list({ limit: parseInt(half) });",
        "import { api } from \"sdkbox\" // the typed SDK\nfor (const x of [1]) {\n  console.log(x);\n}\nreturn 1;",
        "const py = `\nimport os\nprint(1)`;\nreturn py;",
    ];
    for code in valid {
        assert!(
            matches!(
                check.verdict(code, &sdkbox::fair::Principal::stdio()).await,
                Verdict::Run(_)
            ),
            "stopped: {code}"
        );
    }
    let secret = tempfile::tempdir().unwrap();
    let file = secret.path().join("config.ts");
    std::fs::write(&file, "export const API_KEY = \"sk_live_SECRET123\";").unwrap();
    let path = file.to_str().unwrap().trim_end_matches(".ts");
    for code in [
        format!(
            "const m = await import(\"{path}\"); const k: typeof m.API_KEY = m.API_KEY; return api.orders.list({{ status: k }});"
        ),
        format!(
            "type T = typeof import(\"{path}\"); const x: number = null as unknown as T[\"API_KEY\"]; return x;"
        ),
        format!("/// <reference path=\"{}\" />\nreturn 1;", file.display()),
    ] {
        let said = format!(
            "{:?}",
            check
                .verdict(&code, &sdkbox::fair::Principal::stdio())
                .await
        );
        assert!(!said.contains("SECRET123"), "{code}: {said}");
    }
    // Entry functions take the SDK as a parameter: it is checked as the SDK, and positions
    // are the model's own.
    let module = "export default async function main(api) {\n  return api.customers.lst();\n}";
    let Verdict::Stop(error) = check
        .verdict(module, &sdkbox::fair::Principal::stdio())
        .await
    else {
        panic!("an entry function's api went unchecked");
    };
    let column = module.lines().nth(1).unwrap().find("lst").unwrap() as u32 + 1;
    assert_eq!(
        (error.line, error.column),
        (Some(2), Some(column)),
        "{error:?}"
    );
    let valid_entry = "async function run(api) { return api.orders.list({ status: \"paid\" }); }";
    assert_eq!(
        check
            .verdict(valid_entry, &sdkbox::fair::Principal::stdio())
            .await,
        Verdict::Run(Vec::new())
    );
    // A document checked before is closed and unguessable: nothing of it reaches another.
    let _ = check
        .verdict(
            "return { note: \"private note 4242\" };",
            &sdkbox::fair::Principal::stdio(),
        )
        .await;
    let probe = "return api.customers.list(null as unknown as Awaited<ReturnType<typeof import(\"./check_0\")[\"default\"]>>);";
    let said = format!(
        "{:?}",
        check
            .verdict(probe, &sdkbox::fair::Principal::stdio())
            .await
    );
    assert!(!said.contains("4242"), "{said}");
}

/// Certain however the SDK is reached: a misspelled name through an alias, destructuring, an
/// optional chain or a helper's parameter stops the run, as written from `api`; a name the
/// SDK resolves stays fine whichever way it is reached; and a method called on a value parsed
/// from JSON that its type lacks (a list object's `.filter`) always throws, so it stops too,
/// as does a fraction written where the SDK takes an integer; reading an undeclared field
/// stays a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_reached_any_way_and_methods_json_lacks_are_certain() {
    let Some(check) = demo_checker().await else {
        return;
    };
    let who = sdkbox::fair::Principal::stdio();
    let stopped = [
        "const shop = api;\nawait shop.refunds.crete({ order: \"ord_001\" });",
        "const { orders } = api;\nreturn orders.gett({ order_id: \"ord_001\" });",
        "return api.orders?.gett({ order_id: \"ord_001\" });",
        "const { refundz } = api;\nreturn refundz;",
        "async function refund(o: typeof api.refunds) { return o.crete({ order: \"ord_001\" }); }\nreturn refund(api.refunds);",
        "const page = await api.orders.list({ status: \"paid\" });\nconst big = page.filter((o) => o.amount > 100);\nreturn big;",
        "const page = await api.orders.list();\nreturn page?.map((o) => o.id);",
        "const order = await api.orders.get({ order_id: \"ord_001\" });\nreturn order.json();",
        // A fraction where the SDK takes integers (amounts in cents).
        "await api.customers.create({ email: \"a@example.com\" });\nreturn api.refunds.create({ order: \"ord_001\", amount: 19.99 });",
    ];
    assert_verdicts(&check, &stopped, &[]).await;
    let valid = [
        "const shop = api;\nreturn shop.orders.list({ status: \"paid\" });",
        "const { orders } = api;\nreturn orders.retrieve({ order_id: \"ord_001\" });",
        "return api.orders?.get({ order_id: \"ord_001\" });",
        "const page = await api.orders.list();\nreturn page.data.filter((o) => o.amount > 100).map((o) => o.id.toUpperCase());",
        "const order = await api.orders.get({ order_id: \"ord_001\" });\nreturn Object.keys(order).concat(order.items.map((i) => i.product));",
        "return api.refunds.create({ order: \"ord_001\", amount: 1999 });",
        "const fix = { amount: 1999 };\nreturn api.refunds.create({ order: \"ord_001\", amount: 19.99, ...fix });",
    ];
    assert_verdicts(&check, &[], &valid).await;
    // An undeclared field read is a warning, not a stop.
    let read =
        "const order = await api.orders.get({ order_id: \"ord_001\" });\nreturn order.customer_id;";
    let Verdict::Run(warnings) = check.verdict(read, &who).await else {
        panic!("an undeclared field read stopped the run");
    };
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

/// Issue 35, items 2 and 4: another SDK's positional form and pages used as an array are
/// certain (the SDK refuses them, or they throw, whatever the values), and say sdkbox's form;
/// a doubt about a value stops the run when the value reaches a write (written in its
/// arguments or through names bound from it, raw requests typed by their route), and stays a
/// warning when it reaches only a read or the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_sdks_shapes_misused_pages_and_doubts_reaching_writes_are_stopped() {
    let Some(check) = demo_checker().await else {
        return;
    };
    let who = sdkbox::fair::Principal::stdio();
    let positional = "await api.refunds.create({ order: \"ord_001\" });\n\
                      await api.customers.update(\"cus_001\", { name: \"Ana\" });";
    let Verdict::Stop(error) = check.verdict(positional, &who).await else {
        panic!("the positional form ran");
    };
    assert!(
        error
            .message
            .contains("api.customers.update takes one object of parameters, like api.customers.update({ customer_id")
            && error.message.contains("given 2 arguments")
            && !error.message.contains("TS2554"),
        "{}",
        error.message
    );
    let flows = "const o = await api.orders.get({ order_id: \"ord_001\" });\n\
                 await api.customers.update({ customer_id: o.customer_id, name: \"x\" });";
    let Verdict::Stop(error) = check.verdict(flows, &who).await else {
        panic!("an undeclared field reaching a write ran");
    };
    assert!(
        error
            .message
            .contains("flows into api.customers.update, a write"),
        "{}",
        error.message
    );
    let stopped = [
        // Positional forms and scalars where the parameters object goes.
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nawait api.refunds.create(o.id, { amount: 100 });",
        "const id: string = \"ord_001\";\nreturn api.orders.get(id);",
        "const owner = \"a\", n = 2;\nawait api.customers.update(owner, \"b\", n, { name: \"x\" });",
        "await api.customers.create({ email: \"a@example.com\" }, { idempotencyKey: \"k1\" });",
        // Pages used as an array.
        "const paid = api.paginate(api.orders.list, { status: \"paid\" }).filter((o) => o.amount > 0);\nreturn paid;",
        "for (const o of api.paginate(api.orders.list, {})) await api.orders.cancel({ order_id: o.id });",
        "return [...api.paginate(api.orders.list, {})].length;",
        "return Array.from(api.paginate(api.orders.list, {})).map((o) => o.id);",
        "const all = await api.paginate(api.orders.list, {});\nreturn all.map((o) => o.id);",
        "return api.paginate(api.orders.list, {}).length;",
        // Doubts reaching writes: through names, list indexing, typed raw requests, a template.
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nconst id = o.customer_id;\nconst { c } = { c: id };\nawait api.customers.update({ customer_id: c });",
        "const list = await api.customers.list({ limit: 1 });\nconst first = list[0];\nawait api.customers.update({ customer_id: first.id, name: \"x\" });",
        "const o = await api.request(\"GET\", \"/orders/ord_001\");\nawait api.customers.update({ customer_id: o.customer_id });",
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nawait api.request(\"POST\", `/orders/${o.order_idd}/cancel`);",
        "const r = await api.refunds.list({});\nfor (const x of r.data) await api.orders.cancel({ order_id: x.order_id });",
        // A write inside a test still receives what is written in it.
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nconst ok = (await api.orders.cancel({ order_id: o.order_idd })).status === \"cancelled\";\nreturn ok;",
    ];
    assert_verdicts(&check, &stopped, &[]).await;
    let chain = format!("const x = {{}} as any;\nreturn x{};", ".a".repeat(20_000));
    let valid = [
        "return Promise.all([{ email: \"a@example.com\" }, { email: \"b@example.com\" }].map(api.customers.create));",
        "const all = await Array.fromAsync(api.paginate(api.orders.list, { status: \"paid\" }));\nreturn all.map((o) => o.id);",
        "const ids = [];\nfor await (const o of api.paginate(api.orders.list, {})) ids.push(o.id);\nreturn ids;",
        "const o = await api.request(\"GET\", \"/orders/ord_001\");\nawait api.customers.update({ customer_id: o.customer, name: \"x\" });",
        "return api.customers.list(undefined);",
        // Review findings: none of these is refused at run time, or sends a doubt.
        "const plan = [{ c: \"usd\" }];\nfor (const p of plan) await api.orders.create({ customer: \"cus_1\", items: [], currency: p.c });",
        "const n = 5;\nawait api.refunds.create({ order: \"ord_001\", amount: parseInt(n) });",
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nconst c = o.customer_email;\nconsole.log(c);\nconst list = await api.customers.list({});\nawait Promise.all(list.data.map((c) => api.customers.update({ customer_id: c.id, name: \"x\" })));",
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nconst email = o.email_address ?? \"a@example.com\";\nawait api.customers.update({ customer_id: \"cus_001\", email });",
        "const { value } = await api.paginate(api.orders.list, {}).next();\nreturn value;",
        "const text = await api.request(\"GET\", \"/orders/ord_001\", { headers: { accept: \"text/plain\" } });\nreturn text.split(\"\\n\");",
        "const n = 1\napi.request(\"POST\", \"/orders/ord_001/cancel\").then((x) => x)\nreturn n",
        "const rows = [{ email: \"a@example.com\" }];\nreturn Promise.all(rows.map(api.customers.create.bind(api.customers)));",
        // Second review: a field tested before it is sent, a predicate's body, a long chain.
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nif (o.customer_idd) await api.customers.update({ customer_id: o.customer_idd });",
        "const list = await api.orders.list({});\nconst due = list.data.filter((o) => o.due_soonn);\nfor (const o of due) await api.orders.cancel({ order_id: o.id });",
        chain.as_str(),
    ];
    assert_verdicts(&check, &[], &valid).await;
    // The same doubts reaching only a read or the result stay warnings.
    for code in [
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nconst c = await api.customers.get({ customer_id: o.customer_id });\nreturn c;",
        "const o = await api.orders.get({ order_id: \"ord_001\" });\nawait api.customers.update({ customer_id: \"cus_001\", name: \"x\" });\nreturn o.customer_id;",
        "const list = await api.customers.list({ limit: 1 });\nreturn list[0];",
    ] {
        let Verdict::Run(warnings) = check.verdict(code, &who).await else {
            panic!("a doubt that reaches no write stopped the run: {code}");
        };
        assert!(!warnings.is_empty(), "{code}");
    }
    // The body wrapper the SDK takes (issue 35, item 5) is no warning.
    let wrapped =
        "return api.customers.update({ customer_id: \"cus_001\", body: { name: \"Ana\" } });";
    assert_eq!(check.verdict(wrapped, &who).await, Verdict::Run(Vec::new()));
}

/// Review findings on Stripe's SDK: a group spelling the SDK resolves, a group named like a
/// schema, the code's own methods on an object, and a type the code declares with a group's
/// name are not stopped; a method only a nested group of the same last name has, an array's
/// missing method and a union's are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certainty_on_stripe_holds_for_shared_names_and_the_codes_own_types() {
    let (Some(tsc), Some(path)) = (crate::types::tsc(), shared_spec("stripe-spec3.json")) else {
        return;
    };
    let spec = sdkbox::spec::load(path.to_str().unwrap()).await.unwrap();
    let sdk = Arc::new(sdkbox::sdk::Sdk::new(Arc::new(spec.api)));
    let check = checker(&tsc, sdk).await;
    let stopped = [
        "await api.refunds.create({ charge: \"ch_1\" });\nreturn api.refunds.expire({ refund: \"re_1\" });",
        "const list = await api.customers.list();\nreturn list.data.toArray();",
        "const c = await api.customers.retrieve({ customer: \"cus_1\" });\nreturn c.json();",
        "const r = api.refunds;\nreturn r.crete({ charge: \"ch_1\" });",
    ];
    assert_verdicts(&check, &stopped, &[]).await;
    let valid = [
        "const stripe = api;\nreturn stripe.customer.create({ email: \"a@example.com\" });",
        "const { balance } = api;\nreturn balance.get();",
        "const stats = { count: 0, sum: 0 };\nstats.avg = function () { return this.count ? this.sum / this.count : 0; };\nreturn stats.avg();",
        "const c = await api.customers.retrieve({ customer: \"cus_1\" });\nObject.assign(c, { total() { return 1; } });\nreturn c.total();",
        "interface customers { email: string; spent: number }\nconst rows: customers[] = [];\nfor (const r of rows) r.vip = r.spent > 1000;\nreturn rows;",
    ];
    assert_verdicts(&check, &[], &valid).await;
    // A group named like a schema (`balance`, `account`) no longer shadows the object its
    // methods return (issue 35, item 5): its fields read without a warning.
    let shadowed = "const b = await api.balance.retrieve();\nconst a = await api.account.retrieve();\nreturn [b.available.map((x) => x.amount), a.id, a.charges_enabled];";
    assert_eq!(
        check
            .verdict(shadowed, &sdkbox::fair::Principal::stdio())
            .await,
        Verdict::Run(Vec::new())
    );
}

/// A raw request with a literal method and path reaches an operation or is certainly wrong:
/// `api.request` to no route of the API stops the run with the nearest routes; a template's
/// substitutions may be anything (slashes included), so a path with one is stopped only when
/// no route could fit; a path not from the API's root is not judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_requests_to_no_route_are_certain() {
    let Some(check) = demo_checker().await else {
        return;
    };
    let who = sdkbox::fair::Principal::stdio();
    let stopped = [
        (
            "await api.customers.create({ email: \"a@example.com\" });\nreturn api.request(\"POST\", \"/refund\", { body: { order: \"ord_001\" } });",
            "POST /refunds",
        ),
        (
            "return api.request(\"DELETE\", `/orders/${\"ord_001\"}`);",
            "GET /orders/{order_id} (api.orders.get)",
        ),
        (
            "const id = \"ord_001\";\nreturn api.request(\"POST\", `/orders/${id}/cancell`);",
            "/orders/{order_id}/cancel",
        ),
    ];
    for (code, hint) in stopped {
        let Verdict::Stop(error) = check.verdict(code, &who).await else {
            panic!("not stopped: {code}");
        };
        assert!(error.message.contains(hint), "{code}: {}", error.message);
        assert!(
            error.message.contains("sdkbox: No operation"),
            "{}",
            error.message
        );
    }
    let valid = [
        "return api.request(\"GET\", \"/orders?status=paid\");",
        "const id = \"ord_001\";\nreturn api.request(\"post\", `/orders/${id}/cancel`);",
        "const path = \"orders\";\nreturn api.request(\"GET\", `/${path}`);",
        "return api.request(\"GET\", \"orders\");",
        "return api.request(\"GET\", `${\"/orders\"}/ord_001`);",
    ];
    assert_verdicts(&check, &[], &valid).await;
}

/// Issue 35: in a write's arguments, a value of another kind than the scalar the SDK takes
/// (the object where its id goes, a string where a number goes), an enum value the code may
/// give that the SDK lacks, a number computed with a fraction where it takes an integer, and
/// parameters built before the call without a required field stop the run; a list object
/// iterated, destructured or measured as an array is certain; a helper's parameter every call
/// hands `api` is the SDK; `fetch` is judged as the API path it resolves to, a raw request's
/// body written out as the operation's; a substitution naming an id stands for one segment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_of_another_kind_lists_iterated_and_fetched_paths_are_stopped() {
    let Some(check) = demo_checker().await else {
        return;
    };
    let who = sdkbox::fair::Principal::stdio();
    let items = "items: [{ product: \"prod_1\", quantity: 1 }]";
    let stopped = [
        (
            format!(
                "const c = await api.customers.create({{ email: \"a@example.com\" }});\nawait api.orders.create({{ customer: c, {items} }});"
            ),
            "Type 'Customer' is not assignable to type 'string'",
        ),
        (
            "const quantity = \"2\";\nawait api.orders.create({ customer: \"cus_1\", items: [{ product: \"prod_1\", quantity }] });".to_owned(),
            "Type 'string' is not assignable to type 'number'",
        ),
        (
            "const params = { customer: \"cus_1\" };\nawait api.orders.create(params);".to_owned(),
            "Property 'items' is missing",
        ),
        (
            "const list = await api.orders.list({ status: \"paid\" });\nfor (const o of list) await api.orders.cancel({ order_id: o.id });".to_owned(),
            "[Symbol.iterator]",
        ),
        (
            "const [first] = await api.customers.list();\nreturn first;".to_owned(),
            "TS2488",
        ),
        (
            "await api.customers.create({ email: \"a@example.com\" });\nawait fetch(\"/orders\", { method: \"POST\", body: \"{}\" });".to_owned(),
            "outside the API's base URL http://127.0.0.1:8080/v1",
        ),
        (
            "await fetch(\"/v1/refund\", { method: \"POST\", body: \"{}\" });".to_owned(),
            "No operation of the API is POST /refund",
        ),
        (
            "await fetch(\"http://127.0.0.1:8080/v1/orderz\");".to_owned(),
            "No operation of the API is GET /orderz",
        ),
        (
            "const order_id = \"ord_1\";\nawait api.request(\"POST\", `/orders/${order_id}`);".to_owned(),
            "No operation of the API is POST /orders/ord_1",
        ),
        (
            "const reason = Math.random() > 0.5 ? \"fraud\" : \"duplicate\";\nawait api.refunds.create({ order: \"ord_1\", reason });".to_owned(),
            "in the arguments of api.refunds.create, a write",
        ),
        (
            "const list = await api.orders.list();\nif (list.length === 0) await api.customers.create({ email: \"a@example.com\" });".to_owned(),
            "Property 'length' does not exist on type 'OrderList'",
        ),
        (
            "async function cancel(client, id) {\n  return client.orders.cancell({ order_id: id });\n}\nawait api.customers.create({ email: \"a@example.com\" });\nawait cancel(api, \"ord_1\");".to_owned(),
            "Property 'cancell' does not exist",
        ),
        (
            "await api.request(\"POST\", \"/refunds\", { body: { order: \"ord_1\", amount_cents: 100 } });".to_owned(),
            "the body has no field `amount_cents`",
        ),
        (
            "await api.request(\"POST\", \"/refunds\", { body: { order: \"ord_1\", amount: 10.5 } });".to_owned(),
            "`amount`",
        ),
        (
            "const o = await api.orders.get({ order_id: \"ord_1\" });\nawait api.refunds.create({ order: o.id, amount: o.amount * 0.15 });".to_owned(),
            "`amount` is computed with a fraction",
        ),
        (
            "const o = await api.orders.get({ order_id: \"ord_1\" });\nconst part = o.amount / 3;\nawait api.refunds.create({ order: o.id, amount: part });".to_owned(),
            "`amount` is computed with a fraction",
        ),
    ];
    for (code, said) in &stopped {
        let Verdict::Stop(error) = check.verdict(code, &who).await else {
            panic!("not stopped: {code}");
        };
        assert!(error.message.contains(said), "{code}: {}", error.message);
    }
    let valid = [
        format!(
            "const c = await api.customers.create({{ email: \"a@example.com\" }});\nawait api.orders.create({{ customer: c.id, {items} }});"
        ),
        // A widened string given to an enum is the same kind: the SDK judges its value.
        "const reason = [\"duplicate\", \"fraudulent\"][0];\nawait api.refunds.create({ order: \"ord_1\", reason });".to_owned(),
        format!(
            "const params = {{ customer: \"cus_1\" }};\nObject.assign(params, {{ {items} }});\nawait api.orders.create(params);"
        ),
        "for await (const o of api.paginate(api.orders.list, { status: \"paid\" })) await api.orders.cancel({ order_id: o.id });".to_owned(),
        "const list = await api.orders.list({ status: \"paid\" });\nfor (const o of list.data) await api.orders.cancel({ order_id: o.id });".to_owned(),
        "await fetch(\"https://example.com/hook\", { method: \"POST\", body: \"{}\" });".to_owned(),
        "const url = \"/orders\";\nawait fetch(url, { method: \"POST\" });".to_owned(),
        "const r = await fetch(\"/v1/orders?status=paid\");\nreturn r.status;".to_owned(),
        "const id = \"ord_1\";\nawait fetch(`/v1/orders/${id}/cancel`, { method: \"POST\" });".to_owned(),
        "const path = \"ord_1/cancel\";\nawait api.request(\"POST\", `/orders/${path}`);".to_owned(),
        "const reason = Math.random() > 0.5 ? \"fraudulent\" : \"duplicate\";\nawait api.refunds.create({ order: \"ord_1\", reason });".to_owned(),
        "const list = await api.orders.list();\nif (list.data.length === 0) await api.customers.create({ email: \"a@example.com\" });".to_owned(),
        "async function cancel(client, id) {\n  return client.orders.cancel({ order_id: id });\n}\nfunction label(x) {\n  return x.name;\n}\nlabel({ name: \"a\" });\nawait cancel(api, \"ord_1\");".to_owned(),
        "await api.request(\"POST\", \"/refunds\", { body: { order: \"ord_1\", amount: 100 } });".to_owned(),
        "const o = await api.orders.get({ order_id: \"ord_1\" });\nawait api.refunds.create({ order: o.id, amount: Math.round(o.amount * 0.15) });".to_owned(),
        "const o = await api.orders.get({ order_id: \"ord_1\" });\nconst part = Math.floor(o.amount / 3);\nawait api.refunds.create({ order: o.id, amount: part });".to_owned(),
    ];
    let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
    assert_verdicts(&check, &[], &valid).await;
}

/// Asserts that each of `stopped` is stopped and each of `valid` runs.
async fn assert_verdicts(check: &TypeCheck, stopped: &[&str], valid: &[&str]) {
    let who = sdkbox::fair::Principal::stdio();
    for code in stopped {
        let verdict = check.verdict(code, &who).await;
        assert!(
            matches!(verdict, Verdict::Stop(_)),
            "not stopped: {code}\n{verdict:?}"
        );
    }
    for code in valid {
        let verdict = check.verdict(code, &who).await;
        assert!(
            matches!(verdict, Verdict::Run(_)),
            "stopped: {code}\n{verdict:?}"
        );
    }
}

/// The type check of the demo's SDK, if the compiler is installed.
pub async fn demo_checker() -> Option<TypeCheck> {
    let tsc = crate::types::tsc()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = sdkbox::spec::load(root.join("docs-index/demo/openapi.yaml").to_str().unwrap())
        .await
        .unwrap();
    let sdk = Arc::new(sdkbox::sdk::Sdk::new(Arc::new(spec.api)));
    Some(checker(&tsc, sdk).await)
}

/// The type check in block mode with `tsc`, as a server with many callers starts it.
pub async fn checker(tsc: &std::path::Path, sdk: Arc<sdkbox::sdk::Sdk>) -> TypeCheck {
    // `fetch` paths resolve against the spec's server, as the provider files' base URLs are.
    let base_url = url::Url::parse(&sdk.api().servers[0]).unwrap();
    TypeCheck::start(
        Mode::Block,
        Some(tsc),
        sdk,
        base_url,
        &sdkbox::fair::Fairness::default(),
    )
    .await
    .expect("the checker starts")
}
