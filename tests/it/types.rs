//! The SDK's TypeScript declarations (`sdkbox types`) against TypeScript 7's own compiler
//! (npm `typescript` 7.0.2, pinned in `tests/tools/typescript`, installed by
//! `scripts/test-deps`): the declarations of the demo and of the three real specs compile
//! cleanly, code a model would write passes, and the mistakes a model makes are caught with
//! the compiler's own codes (and its "did you mean").

use std::path::{Path, PathBuf};

use crate::support::{requirement_met, sdkbox, shared_spec};

/// The compiler, or `None` (a skip, which CI refuses) when it is not installed.
pub fn tsc() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tools/typescript/node_modules/@typescript/typescript-linux-x64/lib/tsc");
    requirement_met(
        path.exists(),
        "TypeScript 7 is not installed (scripts/test-deps)",
    )
    .then_some(path)
}

/// `sdkbox types --spec SPEC`.
fn declarations(spec: &Path) -> String {
    let output = sdkbox()
        .args(["types", "--spec", spec.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// What the compiler says of `scripts` (name, text) against `declarations`, one diagnostic
/// a line: `name(line,column): error TSxxxx: message`.
fn check(tsc: &Path, declarations: &str, scripts: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sdk.d.ts"), declarations).unwrap();
    let mut command = std::process::Command::new(tsc);
    command
        .current_dir(dir.path())
        .args([
            "--noEmit", "--strict", "--target", "es2022", "--lib", "es2022",
        ])
        .args(["--types", "", "--pretty", "false", "sdk.d.ts"]);
    for (name, text) in scripts {
        // Each script is a module of its own, as the sandbox runs it.
        std::fs::write(
            dir.path().join(format!("{name}.ts")),
            format!("export {{}};\n{text}"),
        )
        .unwrap();
        command.arg(format!("{name}.ts"));
    }
    let output = command.output().unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn demo_spec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs-index/demo/openapi.yaml")
}

#[test]
fn model_code_passes_and_model_mistakes_are_caught_on_the_demo() {
    let Some(tsc) = tsc() else { return };
    let types = declarations(&demo_spec());
    let correct = [
        (
            "paginate",
            "async function main() { const paid = []; for await (const o of api.paginate(api.orders.list, { status: \"paid\" })) paid.push({ id: o.id, amount: o.amount, first: o.items[0]?.product }); return paid; }",
        ),
        (
            "create",
            "async function main() { const c = await api.customers.create({ email: \"a@example.com\", name: \"A\", metadata: { tier: \"gold\" } }); return c.id; }",
        ),
        (
            "order",
            "async function main() { return api.orders.create({ customer: \"cus_1\", items: [{ product: \"prod_1\", quantity: 2 }], currency: \"eur\" }); }",
        ),
        (
            "nullable",
            "async function main() { const c = await api.customers.get({ customer_id: \"cus_1\" }); return c.name?.toUpperCase() ?? \"none\"; }",
        ),
        (
            "request",
            "async function main() { const r = await api.request(\"GET\", \"/customers\", { query: { limit: 1 } }); const f = await fetch(\"/v1/products\"); console.log(f.status, r.data); return (await f.json()).data; }",
        ),
        (
            "errors",
            "async function main() { try { await api.refunds.create({ order: \"ord_1\", amount: 5, reason: \"duplicate\" }); } catch (e) { if (e instanceof PolicyError || e instanceof ApiError) return e.message; throw e; } }",
        ),
    ];
    let said = check(&tsc, &types, &correct);
    assert_eq!(said, "", "correct code was flagged");
    let mistakes = [
        (
            "misspelled_method",
            "async function main() { return api.customers.lst({ limit: 2 }); }",
            "TS2551",
            "Did you mean 'list'?",
        ),
        (
            "unknown_group",
            "async function main() { return api.custmers.list(); }",
            "TS2551",
            "Did you mean 'customers'?",
        ),
        (
            "wrong_type",
            "async function main() { return api.orders.create({ customer: \"c\", items: [{ product: \"p\", quantity: \"1\" }] }); }",
            "TS2322",
            "not assignable to type 'number'",
        ),
        (
            "bad_enum",
            "async function main() { return api.orders.list({ status: \"payed\" }); }",
            "TS2322",
            "OrderStatus",
        ),
        (
            "missing_required",
            "async function main() { return api.customers.create({ name: \"x\" }); }",
            "TS2741",
            "'email' is missing",
        ),
        (
            "unknown_param",
            "async function main() { return api.customers.create({ email: \"e\", nmae: \"x\" }); }",
            "TS2353",
            "'nmae' does not exist",
        ),
        (
            "wrong_field",
            "async function main() { const l = await api.customers.list(); return l.dataa.length; }",
            "TS2551",
            "Did you mean 'data'?",
        ),
        (
            "not_a_function",
            "async function main() { return api.customers(); }",
            "TS2349",
            "not callable",
        ),
        (
            "paginate_misuse",
            "async function main() { for await (const c of api.paginate(api.customers.list, { limt: 5 })) console.log(c.email); }",
            "TS2561",
            "Did you mean to write 'limit'?",
        ),
    ];
    let scripts: Vec<(&str, &str)> = mistakes.iter().map(|(n, t, _, _)| (*n, *t)).collect();
    let said = check(&tsc, &types, &scripts);
    for (name, _, code, words) in mistakes {
        let line = said
            .lines()
            .find(|l| l.starts_with(&format!("{name}.ts(")))
            .unwrap_or_else(|| panic!("{name}: not caught:\n{said}"));
        assert!(
            line.contains(code) && line.contains(words),
            "{name}: {line}"
        );
    }
}

#[test]
fn the_real_specs_declarations_compile_and_type_real_calls() {
    let Some(tsc) = tsc() else { return };
    let cases = [
        (
            "stripe-spec3.json",
            "async function main() { const s = await api.checkout.sessions.create({ mode: \"payment\", success_url: \"https://example.com\", line_items: [{ price: \"price_1\", quantity: 1 }] }); const c = await api.customers.list({ limit: 3 }); return [s.id, c.data.map((x) => x.email)]; }",
            "async function main() { return api.checkout.sessions.create({ mode: \"paymnt\", success_url: \"https://example.com\" }); }",
        ),
        (
            "github-api.github.com.json",
            "async function main() { const issues = await api.issues.listForRepo({ owner: \"o\", repo: \"r\", state: \"open\", per_page: 5 }); return issues.map((i) => i.title); }",
            "async function main() { return api.issues.listForRepo({ owner: \"o\", state: \"open\" }); }",
        ),
        (
            "cloudflare-openapi.json",
            "async function main() { const r = await api.dnsRecords.list({ zone_id: \"z\" }); return r; }",
            "async function main() { return api.dnsRecords.lst({ zone_id: \"z\" }); }",
        ),
    ];
    for (file, correct, wrong) in cases {
        let Some(spec) = shared_spec(file) else {
            return;
        };
        let types = declarations(&spec);
        let said = check(&tsc, &types, &[("correct", correct)]);
        assert_eq!(
            said, "",
            "{file}: the declarations or a correct call were flagged"
        );
        let said = check(&tsc, &types, &[("wrong", wrong)]);
        assert!(
            said.starts_with("wrong.ts("),
            "{file}: a mistake passed: {said}"
        );
    }
}
