//! SDK names from operation ids, deterministically: `api.<group>.<method>`.
//!
//! - `repos/list-for-org` (GitHub) -> `repos.listForOrg`;
//! - `listCustomers` with tag `customers` -> `customers.list`;
//! - `PostCustomersCustomerSources` (Stripe: verb + path words, no tags) ->
//!   `customers.createSource`; `PostChargesChargeCapture` -> `charges.capture`.
//!
//! Groups come from the id's prefix, else the first tag, else the first path segment. Two
//! operations that would share a name keep it in path order; the later ones fall back to
//! their whole id in camelCase.

use std::collections::HashSet;

use super::model::Operation;

const HTTP_VERBS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options"];

/// Group names `api` keeps for itself (its helpers, and what `await` and `JSON` look for):
/// a spec group of that name gets a `_` (`api.request_`), which search hits show.
const RESERVED_GROUPS: &[&str] = &["request", "paginate", "then", "toJSON"];

/// Method names a group keeps for itself (what `await` and `JSON` look for).
const RESERVED_METHODS: &[&str] = &["then", "toJSON"];

/// `name`, with a `_` when it is one of `reserved`.
fn unreserved(name: String, reserved: &[&str]) -> String {
    match reserved.contains(&name.as_str()) {
        true => format!("{name}_"),
        false => name,
    }
}

/// Sets `group` and `name` on every operation.
pub fn assign(operations: &mut [Operation]) {
    let mut taken = HashSet::new();
    let mut order: Vec<usize> = (0..operations.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&operations[a], &operations[b]);
        (&a.path, &a.method).cmp(&(&b.path, &b.method))
    });
    for index in order {
        let op = &mut operations[index];
        op.group = unreserved(group_of(op), RESERVED_GROUPS);
        let mut name = unreserved(name_of(op), RESERVED_METHODS);
        if !taken.insert((op.group.clone(), name.clone())) {
            name = camel(&words(&op.id));
            let mut n = 2;
            while !taken.insert((op.group.clone(), name.clone())) {
                name = format!("{}{n}", camel(&words(&op.id)));
                n += 1;
            }
        }
        op.name = name;
    }
}

fn group_of(op: &Operation) -> String {
    if let Some((group, _)) = op.id.split_once('/') {
        return camel(&words(group));
    }
    if let Some(tag) = op.tags.first() {
        return camel(&words(tag));
    }
    static_segments(&op.path)
        .first()
        .map(|s| camel(&words(s)))
        .unwrap_or_else(|| "api".to_owned())
}

fn name_of(op: &Operation) -> String {
    if let Some((_, method)) = op.id.split_once('/') {
        return camel(&words(method));
    }
    let id_words = words(&op.id);
    let group_words = words(&op.group);
    let is_group_word = |w: &str| group_words.iter().any(|g| g == w || singular(g) == w);
    let Some(first) = id_words.first() else {
        return "call".to_owned();
    };
    // Verb-and-path ids are PascalCase (`GetCustomersCustomer`); camelCase ids
    // (`getCustomer`) are names already.
    let pascal = op.id.starts_with(|c: char| c.is_ascii_uppercase());
    if !(pascal && HTTP_VERBS.contains(&first.as_str())) {
        let rest: Vec<String> = id_words
            .iter()
            .filter(|w| !is_group_word(w))
            .cloned()
            .collect();
        return if rest.is_empty() {
            camel(&id_words)
        } else {
            camel(&rest)
        };
    }
    // Verb + path words, as Stripe writes them: name the action from the path's shape.
    let params: Vec<String> = path_params(&op.path)
        .iter()
        .flat_map(|p| words(p))
        .collect();
    let verb = action(op);
    let verb_words = words(&verb);
    let mut rest: Vec<String> = id_words[1..]
        .iter()
        .filter(|w| !is_group_word(w) && !params.contains(w) && !verb_words.contains(w))
        .cloned()
        .collect();
    if matches!(verb.as_str(), "create" | "retrieve" | "update" | "delete")
        && let Some(last) = rest.last_mut()
    {
        *last = singular(last);
    }
    let mut all = verb_words;
    all.extend(rest);
    camel(&all)
}

/// The verb of a verb-and-path operation id: CRUD from the path's shape, or the path's
/// own action (`/charges/{charge}/capture` -> `capture`).
fn action(op: &Operation) -> String {
    let segments: Vec<&str> = op.path.split('/').filter(|s| !s.is_empty()).collect();
    let ends_with_param = segments.last().is_some_and(|s| s.starts_with('{'));
    let last = segments.last().copied().unwrap_or_default();
    let after_param = segments.len() >= 2 && segments[segments.len() - 2].starts_with('{');
    let method = op.method.as_str();
    if !ends_with_param
        && (last == "search" || (after_param && method == "POST" && !last.ends_with('s')))
    {
        return camel(&words(last));
    }
    match (method, ends_with_param) {
        ("GET", true) => "retrieve",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("DELETE", _) => "delete",
        _ => "update",
    }
    .to_owned()
}

/// Path segments that are neither parameters nor version prefixes like `v1`.
fn static_segments(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|s| !s.is_empty() && !s.starts_with('{'))
        .filter(|s| {
            !(s.len() <= 3 && s.starts_with('v') && s[1..].chars().all(|c| c.is_ascii_digit()))
        })
        .collect()
}

fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}

/// Lower-case words of an identifier: camelCase, PascalCase, snake_case, kebab-case, dots.
pub fn words(identifier: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = identifier.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        let boundary = c.is_uppercase()
            && i > 0
            && (chars[i - 1].is_lowercase()
                || chars[i - 1].is_ascii_digit()
                || (chars[i - 1].is_uppercase()
                    && chars.get(i + 1).is_some_and(|n| n.is_lowercase())));
        if boundary && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Words joined in lowerCamelCase.
pub fn camel(words: &[String]) -> String {
    let mut out = String::new();
    for (i, word) in words.iter().enumerate() {
        if i == 0 {
            out.push_str(word);
        } else {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase());
                out.push_str(chars.as_str());
            }
        }
    }
    out
}

fn singular(word: &str) -> String {
    if let Some(stem) = word.strip_suffix("ies") {
        format!("{stem}y")
    } else if word.ends_with("ses") || word.ends_with("xes") {
        word[..word.len() - 2].to_owned()
    } else if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word[..word.len() - 1].to_owned()
    } else {
        word.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: &str, method: &str, path: &str, tags: &[&str]) -> Operation {
        Operation {
            id: id.into(),
            method: method.into(),
            path: path.into(),
            group: String::new(),
            name: String::new(),
            summary: String::new(),
            description: String::new(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            params: Vec::new(),
            body: None,
            response: None,
            resource: None,
            deprecated: false,
            policy: None,
        }
    }

    fn named(ops: Vec<Operation>) -> Vec<String> {
        let mut ops = ops;
        assign(&mut ops);
        ops.iter()
            .map(|o| format!("{}.{}", o.group, o.name))
            .collect()
    }

    #[test]
    fn splits_identifiers() {
        assert_eq!(words("listForOrg"), ["list", "for", "org"]);
        assert_eq!(
            words("PostCustomersCustomerSources"),
            ["post", "customers", "customer", "sources"]
        );
        assert_eq!(words("list-for-org"), ["list", "for", "org"]);
        assert_eq!(words("payment_intents"), ["payment", "intents"]);
        assert_eq!(words("getHTTPStatus"), ["get", "http", "status"]);
    }

    #[test]
    fn names_github_demo_and_stripe_operations() {
        let github_and_demo = named(vec![
            op("repos/list-for-org", "GET", "/orgs/{org}/repos", &["repos"]),
            op("listCustomers", "GET", "/customers", &["customers"]),
            op("createCustomer", "POST", "/customers", &["customers"]),
            op(
                "cancelOrder",
                "POST",
                "/orders/{order_id}/cancel",
                &["orders"],
            ),
            op("getOrder", "GET", "/orders/{order_id}", &["orders"]),
        ]);
        assert_eq!(
            github_and_demo,
            [
                "repos.listForOrg",
                "customers.list",
                "customers.create",
                "orders.cancel",
                "orders.get"
            ]
        );
        let stripe = named(vec![
            op("PostCustomers", "POST", "/v1/customers", &[]),
            op(
                "GetCustomersCustomer",
                "GET",
                "/v1/customers/{customer}",
                &[],
            ),
            op(
                "PostCustomersCustomerSources",
                "POST",
                "/v1/customers/{customer}/sources",
                &[],
            ),
            op(
                "PostChargesChargeCapture",
                "POST",
                "/v1/charges/{charge}/capture",
                &[],
            ),
            op("GetCustomersSearch", "GET", "/v1/customers/search", &[]),
            op("GetPaymentIntents", "GET", "/v1/payment_intents", &[]),
        ]);
        assert_eq!(
            stripe,
            [
                "customers.create",
                "customers.retrieve",
                "customers.createSource",
                "charges.capture",
                "customers.search",
                "paymentIntents.list",
            ]
        );
    }

    #[test]
    fn collisions_fall_back_to_the_whole_id() {
        let names = named(vec![
            op("widgets/get", "GET", "/b/widgets", &[]),
            op("widgets/get", "GET", "/a/widgets", &[]),
            op("widgets/get", "GET", "/c/widgets", &[]),
        ]);
        assert_eq!(
            names,
            ["widgets.widgetsGet", "widgets.get", "widgets.widgetsGet2"]
        );
    }
}
