//! SDK names, deterministically: `api.<group>.<method>`, groups nested where the provider's
//! resources nest (`api.dns.records.list`).
//!
//! - Ids that are names already keep them (`from_id`): `repos/list-for-org` (GitHub) ->
//!   `repos.listForOrg`; `listCustomers` with tag `customers` -> `customers.list`.
//! - Other ids restate the route (`PostCustomersCustomerSources`) or a sentence, and the
//!   route names the operation the way official SDKs do (`from_path`):
//!   `customers.createSource`, `checkout.sessions.list`, `loadBalancers.pools.update`.
//!
//! Two operations that would share a name keep it in path order; the later ones fall back
//! to their whole id in camelCase.

mod from_id;
mod from_path;
mod renames;

pub use renames::apply_names;

use std::collections::HashSet;

use super::model::Operation;

/// Group names `api` keeps for itself (its helpers, and what `await` and `JSON` look for):
/// a spec group of that name gets a `_` (`api.request_`), which search hits show.
const RESERVED_GROUPS: &[&str] = &["request", "paginate", "then", "toJSON"];

/// Method names a group keeps for itself: what `await` and `JSON` look for, and what a
/// function is called or bound with (`api.customers.list.call(...)` is the function's).
const RESERVED_METHODS: &[&str] = &["then", "toJSON", "call", "apply", "bind"];

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
    // The routes are read only for a spec whose ids are not all names already (GitHub's are).
    let routes = operations
        .iter()
        .any(|op| !from_id::is_a_name(&op.id))
        .then(|| from_path::Routes::new(operations));
    for index in order {
        let op = &operations[index];
        // The group of a named id without tags: its first resource, not a version (`v1`).
        let first_segment = op
            .path
            .split('/')
            .find(|s| !s.is_empty() && !s.starts_with('{') && !from_path::is_version(s));
        let (group, name) = match from_id::is_a_name(&op.id) {
            true => from_id::name(op, first_segment),
            false => routes
                .as_ref()
                .and_then(|routes| routes.name(op))
                .unwrap_or_else(|| from_id::name(op, first_segment)),
        };
        let parts: Vec<String> = group
            .split('.')
            .filter(|part| !part.is_empty())
            .enumerate()
            .map(|(i, part)| match i {
                0 => unreserved(identifier(part), RESERVED_GROUPS),
                _ => unreserved(identifier(part), RESERVED_METHODS),
            })
            .collect();
        let group = match parts.is_empty() {
            true => "api".to_owned(),
            false => parts.join("."),
        };
        let mut name = unreserved(identifier(&name), RESERVED_METHODS);
        if !taken.insert((group.clone(), name.clone())) {
            let whole = unreserved(identifier(&camel(&words(&op.id))), RESERVED_METHODS);
            name = whole.clone();
            let mut n = 2;
            while !taken.insert((group.clone(), name.clone())) {
                name = format!("{whole}{n}");
                n += 1;
            }
        }
        let op = &mut operations[index];
        op.group = group;
        op.name = name;
    }
}

/// `name` as a JavaScript identifier a script can write after a dot: `_` before a leading
/// digit (`/2010-04-01/...` -> `_20100401`), `_` for nothing at all.
fn identifier(name: &str) -> String {
    match name.chars().next() {
        None => "_".to_owned(),
        Some(c) if c.is_ascii_digit() => format!("_{name}"),
        Some(_) => name.to_owned(),
    }
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

/// A plural English word's singular, by the usual endings (`policies` -> `policy`, `ids` -> `id`).
pub fn singular(word: &str) -> String {
    if word == "ids" {
        "id".to_owned()
    } else if let Some(stem) = word.strip_suffix("ies") {
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
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..crate::testing::operation(id, method, path, "", "")
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
            op(
                "GetPaymentIntentsIntent",
                "GET",
                "/v1/payment_intents/{intent}",
                &[],
            ),
            op(
                "GetCheckoutSessionsSessionLineItems",
                "GET",
                "/v1/checkout/sessions/{session}/line_items",
                &[],
            ),
            op(
                "DeleteCustomersCustomer",
                "DELETE",
                "/v1/customers/{customer}",
                &[],
            ),
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
                "paymentIntents.retrieve",
                "checkout.sessions.listLineItems",
                "customers.del",
            ]
        );
    }

    #[test]
    fn a_named_id_without_tags_is_grouped_by_its_first_resource_not_a_version() {
        let names = named(vec![op("listWidgets", "GET", "/v1/widgets", &[])]);
        assert_eq!(names, ["widgets.list"]);
    }

    #[test]
    fn names_nested_resources_like_official_nested_sdks() {
        let mut ops = vec![op(
            "zones-0",
            "PUT",
            "/zones/{zone_id}/hold",
            &["Zone Hold"],
        )];
        // Enough resources under /zones/{zone_id} for it to be a scope.
        for (i, resource) in ["a", "b", "c", "d", "e", "f", "g"].iter().enumerate() {
            ops.push(op(
                &format!("other-{i}"),
                "GET",
                &format!("/zones/{{zone_id}}/{resource}"),
                &[],
            ));
        }
        ops.extend([
            op(
                "dns-records-for-a-zone-list-dns-records",
                "GET",
                "/zones/{zone_id}/dns_records",
                &[],
            ),
            op(
                "dns-records-for-a-zone-create",
                "POST",
                "/zones/{zone_id}/dns_records",
                &[],
            ),
            op(
                "dns-records-get",
                "GET",
                "/zones/{zone_id}/dns_records/{dns_record_id}",
                &[],
            ),
            op(
                "dns-records-patch",
                "PATCH",
                "/zones/{zone_id}/dns_records/{dns_record_id}",
                &[],
            ),
            op(
                "dns-records-put",
                "PUT",
                "/zones/{zone_id}/dns_records/{dns_record_id}",
                &[],
            ),
            op(
                "dns-records-export",
                "GET",
                "/zones/{zone_id}/dns_records/export",
                &[],
            ),
            op(
                "dns-records-scan",
                "POST",
                "/zones/{zone_id}/dns_records/scan",
                &[],
            ),
            op("zones-get", "GET", "/zones/{zone_id}", &[]),
            op("zones-list", "GET", "/zones", &[]),
            op(
                "pools-list",
                "GET",
                "/accounts/{account_id}/load_balancers/pools",
                &[],
            ),
        ]);
        let names = named(ops);
        assert_eq!(
            &names[8..],
            [
                "dnsRecords.list",
                "dnsRecords.create",
                "dnsRecords.get",
                "dnsRecords.edit",
                "dnsRecords.update",
                "dnsRecords.export",
                "dnsRecords.scan",
                "zones.get",
                "zones.list",
                // /accounts/{account_id} parents one resource here: not a scope.
                "accounts.loadBalancers.pools.list",
            ]
        );
        assert_eq!(names[0], "hold.update");
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
