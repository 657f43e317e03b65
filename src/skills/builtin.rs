//! The provider's own skill, written from its spec and guides: how to call it from
//! `execute` (the SDK's naming and groups, authentication, its pagination style, errors,
//! writes and approvals, long runs) and the common tasks its guides describe.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::search::GuideSection;
use crate::spec::{Api, AuthHint, Location, Operation, Shape};

/// Groups the skill lists by name, at most (the rest are counted).
const MAX_GROUPS: usize = 60;

/// Guide sections the skill names as common tasks, at most.
const MAX_TASKS: usize = 40;

/// The skill's name for a provider called `provider`: its words in lowercase joined by
/// hyphens, then `-api` (`Acme Shop` -> `acme-shop-api`); within the 64 characters a name
/// may have.
pub fn skill_name(provider: &str) -> String {
    let words: Vec<String> = provider
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let mut name = words.join("-");
    name.truncate(56);
    let name = name.trim_end_matches('-');
    match name {
        "" => "provider-api".to_owned(),
        name if name == "api" || name.ends_with("-api") => name.to_owned(),
        name => format!("{name}-api"),
    }
}

/// The skill's description: what a host shows a model before it reads the skill.
pub fn description(provider: &str) -> String {
    format!(
        "How to call the {provider} API from sdkbox's execute tool: the SDK's names, \
         authentication, pagination, errors, writes and approvals, long runs, and the common \
         tasks of its guides. Read it before writing a script against {provider}."
    )
}

/// The skill's `SKILL.md` body (after its frontmatter).
pub fn body(provider: &str, api: &Api, guides: &[GuideSection]) -> String {
    let mut out = format!("# Calling {provider} from `execute`\n\n");
    out.push_str(
        "## How a call looks\n\n\
         Scripts are TypeScript run by the `execute` tool. Every operation of the API is a \
         method of `api`: `await api.<group>.<method>({ ...params })`, with path, query, header \
         and body parameters side by side in one object. `search_docs` gives the exact call for \
         a task (ask it in the API's own words; `detail: \"full\"` adds the TypeScript \
         signature and the response's shape). Filter, join and count in the script and return \
         only what is needed: the result is what reaches the conversation. Scripts also have \
         `fetch` to the API's origins and the web platform (URL, Blob, FormData, crypto).\n\n",
    );
    groups(&mut out, api);
    auth(&mut out, api);
    pagination(&mut out, api);
    out.push_str(
        "## Errors\n\n\
         A response of 400 or more throws an `ApiError` carrying `status` and `body` (the \
         provider's answer, parsed); its message says what the provider said, with a hint for 401 and 403. \
         Catch it where the script can go on (`try { ... } catch (e) { if (e.status === 404) \
         ... }`). A call that does not match the spec (a missing required parameter, a wrong \
         type, a misspelled name) is refused before anything is sent, with the names that were \
         meant.\n\n\
         ## Writes\n\n\
         Writes follow the server's rules: some are sent at once, some wait for a human's \
         approval (the user sees the exact request), some are refused. A denied or refused \
         write throws. Running the same code again after an approval never sends a write \
         twice: writes it already sent are answered from the first run. Use `dry_run: true` \
         on `execute` to see which writes a script would send without sending them.\n\n\
         ## Long runs\n\n\
         A script may walk many pages or objects: with a client that supports MCP tasks, a \
         call that runs long becomes a task with a longer limit and a larger request budget, \
         and its progress (requests made, pages read) is reported. Without tasks, keep each \
         call within the plain time limit: split the work, and return a cursor to continue \
         from.\n\n",
    );
    tasks(&mut out, guides);
    out
}

/// The SDK's groups and their methods.
fn groups(out: &mut String, api: &Api) {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for op in api.operations.iter().filter(|op| !op.deprecated) {
        groups.entry(&op.group).or_default().push(&op.name);
    }
    let _ = writeln!(
        out,
        "## The SDK's groups\n\n{} operations in {} groups.\n",
        api.operations.len(),
        groups.len()
    );
    for (group, methods) in groups.iter().take(MAX_GROUPS) {
        let shown: Vec<&str> = methods.iter().take(12).copied().collect();
        let more = match methods.len().saturating_sub(shown.len()) {
            0 => String::new(),
            n => format!(", and {n} more"),
        };
        let _ = writeln!(out, "- `api.{group}`: {}{more}", shown.join(", "));
    }
    if groups.len() > MAX_GROUPS {
        let _ = writeln!(
            out,
            "- and {} more groups: search_docs finds them",
            groups.len() - MAX_GROUPS
        );
    }
    out.push('\n');
}

/// How the credential reaches the API.
fn auth(out: &mut String, api: &Api) {
    let how = match api.auth.first() {
        Some(AuthHint::Bearer) => "an `Authorization: Bearer` header".to_owned(),
        Some(AuthHint::Basic) => "HTTP Basic authentication".to_owned(),
        Some(AuthHint::Header(name)) => format!("the `{name}` header"),
        Some(AuthHint::Query(name)) => format!("the `{name}` query parameter"),
        None => "the way the server is configured".to_owned(),
    };
    let _ = write!(
        out,
        "## Authentication\n\n\
         sdkbox adds the credential to every request itself, as {how}, outside the sandbox: \
         scripts never see it and never send one (credential headers a script sets are \
         dropped). A 401 means the server's key (or the user's linked account) is wrong or \
         expired, not the script.\n\n"
    );
}

/// A pagination style, as the list operations' parameters and responses show it.
struct Style {
    name: &'static str,
    how: &'static str,
    example: &'static str,
    count: usize,
    operation: String,
}

/// The API's pagination styles, most common first.
fn pagination(out: &mut String, api: &Api) {
    let mut styles: Vec<Style> = Vec::new();
    for op in api.operations.iter().filter(|op| op.method == "GET") {
        let Some((name, how, example)) = style_of(op) else {
            continue;
        };
        match styles.iter_mut().find(|s| s.name == name) {
            Some(style) => style.count += 1,
            None => styles.push(Style {
                name,
                how,
                example,
                count: 1,
                operation: format!("api.{}.{}", op.group, op.name),
            }),
        }
    }
    styles.sort_by_key(|style| std::cmp::Reverse(style.count));
    out.push_str("## Pagination\n\n");
    if styles.is_empty() {
        out.push_str(
            "No list operation of the spec takes a paging parameter: a list answers whole. \
             Check a list's response (search_docs with `detail: \"full\"`) before relying on \
             it.\n\n",
        );
        return;
    }
    for style in &styles {
        let _ = writeln!(
            out,
            "- {} ({} operations, e.g. `{}`): {}",
            style.name, style.count, style.operation, style.how
        );
    }
    let _ = write!(
        out,
        "\nA loop over every page, in the most common style:\n\n```ts\n{}\n```\n\n",
        styles[0].example.replace("OP", &styles[0].operation)
    );
}

/// The pagination style of one read, if it has one: its name, how it works, an example.
fn style_of(op: &Operation) -> Option<(&'static str, &'static str, &'static str)> {
    let query = |names: &[&str]| {
        op.params
            .iter()
            .any(|p| p.location == Location::Query && names.contains(&p.name.as_str()))
    };
    let returns = |names: &[&str]| {
        matches!(op.response.as_deref(), Some(Shape::Object { fields, .. })
            if fields.iter().any(|f| names.contains(&f.name.as_str())))
    };
    if query(&["starting_after"]) {
        return Some((
            "cursor after the last item",
            "pass `limit` and, for the next page, `starting_after` with the last item's `id`; \
             stop when `has_more` is false",
            "let after: string | undefined;\nconst all = [];\ndo {\n  const page = await OP({ limit: 100, ...(after ? { starting_after: after } : {}) });\n  all.push(...page.data);\n  after = page.data.at(-1)?.id;\n  if (!page.has_more) break;\n} while (after);",
        ));
    }
    if query(&[
        "cursor",
        "page_token",
        "pageToken",
        "next_token",
        "continuation_token",
    ]) || returns(&["next_cursor", "next_page_token", "nextPageToken", "cursor"])
    {
        return Some((
            "opaque cursor",
            "pass the cursor (or page token) the previous page returned; stop when none is \
             returned",
            "let cursor: string | undefined;\nconst all = [];\ndo {\n  const page: any = await OP({ ...(cursor ? { cursor } : {}) });\n  all.push(...(page.data ?? page.items ?? []));\n  cursor = page.next_cursor ?? page.cursor ?? page.next_page_token;\n} while (cursor);",
        ));
    }
    if query(&["page"]) {
        return Some((
            "page numbers",
            "pass `page` (and `per_page` or `page_size` where the operation takes it); stop at \
             a short or empty page",
            "const all = [];\nfor (let page = 1; ; page++) {\n  const items: any[] = await OP({ page, per_page: 100 });\n  all.push(...items);\n  if (items.length < 100) break;\n}",
        ));
    }
    if query(&["offset"]) {
        return Some((
            "offsets",
            "pass `offset` and `limit`; stop at a short or empty page",
            "const all = [];\nfor (let offset = 0; ; offset += 100) {\n  const page: any = await OP({ offset, limit: 100 });\n  const items = page.data ?? page.items ?? page;\n  all.push(...items);\n  if (items.length < 100) break;\n}",
        ));
    }
    None
}

/// The common tasks the guides describe.
fn tasks(out: &mut String, guides: &[GuideSection]) {
    if guides.is_empty() {
        return;
    }
    out.push_str(
        "## Common tasks in the guides\n\nsearch_docs finds each of these guide sections by \
         its words:\n\n",
    );
    for section in guides.iter().take(MAX_TASKS) {
        let _ = writeln!(out, "- {} › {}", section.guide, section.title);
    }
    if guides.len() > MAX_TASKS {
        let _ = writeln!(out, "- and {} more sections", guides.len() - MAX_TASKS);
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_name_becomes_a_valid_skill_name() {
        assert_eq!(skill_name("Acme Shop"), "acme-shop-api");
        assert_eq!(skill_name("Stripe API!"), "stripe-api");
        assert_eq!(skill_name("--"), "provider-api");
        assert!(skill_name(&"x".repeat(200)).len() <= 64);
    }
}
