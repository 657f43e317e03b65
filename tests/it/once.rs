//! Writes exactly once, as approved (issue 20), against the demo provider's own state: the
//! entry shapes models write, each of which must create one customer and ask one question.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sdkbox::approval::Answer;
use sdkbox::config::ApprovalArgs;

use crate::approvals::{demo, human};

/// One write in a declared entry, then the ways scripts call it themselves (and ways that
/// hide the call from any reading of the code).
fn shapes(name: &str) -> Vec<(&'static str, String)> {
    let create = format!(
        "return await api.customers.create({{ name: \"{name}\", email: \"{name}@example.com\" }});"
    );
    let main = format!("async function main() {{ {create} }}");
    let run = format!("async function run(api) {{ {create} }}");
    vec![
        ("declared only", main.clone()),
        (
            "const r = await main()",
            format!("{main}\nconst r = await main();\nconsole.log(r);"),
        ),
        (
            "try { await main() }",
            format!("{main}\ntry {{ await main() }} catch (e) {{ console.error(e) }}"),
        ),
        (
            "async IIFE",
            format!("{main}\n(async () => {{ const r = await main(); console.log(r.id); }})();"),
        ),
        (
            "Promise.all([main()])",
            format!("{main}\nconst [r] = await Promise.all([main()]);"),
        ),
        (
            "conditional call",
            format!("{main}\nif (typeof main === 'function') {{ await main(); }}"),
        ),
        (
            "loop call",
            format!("{main}\nlet done = false;\nwhile (!done) {{ await main(); done = true; }}"),
        ),
        (
            "called three times",
            format!(
                "{main}\nfor (let i = 0; i < 3; i++) {{ try {{ await main(); }} catch (e) {{ console.log(e.message); }} }}"
            ),
        ),
        (
            "arrow main",
            format!("const main = async () => {{ {create} }};\nconst r = await main();"),
        ),
        (
            "expression arrow main",
            format!(
                "const main = async () => api.customers.create({{ name: \"{name}\", email: \"{name}@example.com\" }});\nconsole.log((await main()).id);"
            ),
        ),
        (
            "run.call(null, api)",
            format!("{run}\nawait run.call(null, api);"),
        ),
        (
            "export default + await main(api)",
            format!("export default async function main(api) {{ {create} }}\nawait main(api);"),
        ),
        (
            "export default only",
            format!("export default async function main(api) {{ {create} }}"),
        ),
        (
            "hidden from the reader: eval",
            format!("{main}\nawait eval('ma' + 'in')();"),
        ),
        (
            "hidden from the reader: a self-import",
            format!(
                "export {main}\nimport * as me from 'file:///code.ts';\nawait me['ma' + 'in']();"
            ),
        ),
        (
            "main().then",
            format!("{main}\nmain().then((r) => console.log(r.id));"),
        ),
        (
            "hidden from the reader: a late second call",
            format!(
                "{main}\nsetTimeout(() => eval('ma' + 'in')().catch((e) => console.log(e.message)), 20);"
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_shape_creates_one_customer_and_asks_once() {
    let demo = demo("", ApprovalArgs::default()).await;
    let mut failures = Vec::new();
    for (n, (shape, code)) in shapes("entry-shape").into_iter().enumerate() {
        let name = format!("entry-shape-{n}");
        let code = code.replace("entry-shape", &name);
        let yes = human(
            Answer::Approve {
                by: "the user".into(),
            },
            Duration::ZERO,
        );
        let outcome = demo.run_with(&code, Some(yes.clone()), false).await;
        let created = demo.customers_named(&name).await;
        let asked = yes.asked.load(Ordering::SeqCst);
        if created != 1 || asked != 1 || !outcome.ok {
            failures.push(format!(
                "{shape}: {created} created, asked {asked} times, ok {}: {:?} {}",
                outcome.ok, outcome.error, outcome.result
            ));
        }
        // Whoever ran the entry, its result is the execution's.
        if outcome.ok && !outcome.result["id"].is_string() {
            failures.push(format!("{shape}: the result is {}", outcome.result));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
