//! Names from the route's resources, the way the providers' official SDKs name them:
//! nested groups for nested resources and standard verbs for what is done to them.
//!
//! Two styles, told apart by the spec itself:
//! - **Nested** (a spec that updates with PUT or PATCH, like Cloudflare's): every resource
//!   is a group (`/zones/{zone_id}/load_balancers/pools/{id}` -> `loadBalancers.pools`), and
//!   the verb is `list`, `get`, `create`, `update` (PUT), `edit` (PATCH) or `delete`. A
//!   leading scope that parents many resources (`/accounts/{account_id}`) is left out of
//!   the names; its parameter stays a parameter.
//! - **Actions** (a spec that updates with POST, like Stripe's): a top-level resource is
//!   the group (`checkout/sessions` -> `checkout.sessions`) and what lies under one of its
//!   items is a method of it: `customers.createSource`, `customers.listTaxIds`,
//!   `charges.capture`; verbs are `list`, `retrieve`, `create`, `update` and `del`.
//!
//! In both, a route's last segment is an action (`/dns_records/scan`, `/apps/secrets/find`)
//! when it has one method, nothing under it, and siblings like it (or it is a POST right
//! under an item).

use std::collections::{BTreeSet, HashMap};

use super::{camel, singular, words};
use crate::spec::model::{Operation, Shape};

/// A path parameter, whatever its name.
const PARAM: &str = "{}";

/// How many resources a leading `/<scope>/{id}` must parent to be a scope left out of names.
const SCOPE_MIN_CHILDREN: usize = 8;

/// How the spec's routes become names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Nested,
    Actions,
}

/// What is known of one route prefix.
#[derive(Default)]
struct Node {
    /// Methods served at exactly this prefix, with whether each returns a list (`None`
    /// when the spec does not say what it returns).
    methods: Vec<(String, Option<bool>)>,
    /// The next segments of longer routes (`{}` for a parameter).
    children: BTreeSet<String>,
}

/// Every route of a spec, by prefix, for naming its operations.
pub(super) struct Routes {
    nodes: HashMap<Vec<String>, Node>,
    style: Style,
}

/// `/v1/customers/{customer}` -> `["customers", "{}"]`: parameters as `{}`, a leading
/// version (`v1`) left out.
fn segments(path: &str) -> Vec<String> {
    let mut out: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.starts_with('{') {
                PARAM.to_owned()
            } else {
                s.to_owned()
            }
        })
        .collect();
    if out.first().is_some_and(|s| is_version(s)) {
        out.remove(0);
    }
    out
}

/// Whether a segment is a version like `v1` (a prefix, not a resource).
pub(super) fn is_version(segment: &str) -> bool {
    segment.len() <= 3
        && segment.starts_with('v')
        && segment.len() > 1
        && segment[1..].chars().all(|c| c.is_ascii_digit())
}

/// Whether a response is a list: an array, or an object holding its items under `data`,
/// `items` or `result` (the page shapes `api.paginate` reads).
fn is_list(shape: Option<&Shape>) -> bool {
    match shape {
        Some(Shape::Array(_)) => true,
        Some(Shape::Object { fields, .. }) => fields.iter().any(|f| {
            matches!(f.name.as_str(), "data" | "items" | "result")
                && matches!(*f.shape, Shape::Array(_))
        }),
        Some(Shape::OneOf(shapes)) => shapes.iter().any(|s| is_list(Some(s))),
        _ => false,
    }
}

fn is_plural(word: &str) -> bool {
    singular(word) != word
}

impl Routes {
    /// The routes of `operations`, and the style their methods say the spec has.
    pub(super) fn new(operations: &[Operation]) -> Self {
        let mut nodes: HashMap<Vec<String>, Node> = HashMap::new();
        for op in operations {
            let segs = segments(&op.path);
            for len in 0..segs.len() {
                nodes
                    .entry(segs[..len].to_vec())
                    .or_default()
                    .children
                    .insert(segs[len].clone());
            }
            let list = op
                .response
                .as_deref()
                .map(|r| op.method == "GET" && is_list(Some(r)));
            nodes
                .entry(segs)
                .or_default()
                .methods
                .push((op.method.clone(), list));
        }
        let style = match operations
            .iter()
            .any(|o| matches!(o.method.as_str(), "PUT" | "PATCH"))
        {
            true => Style::Nested,
            false => Style::Actions,
        };
        Self { nodes, style }
    }

    fn node(&self, prefix: &[String]) -> Option<&Node> {
        self.nodes.get(prefix)
    }

    fn has_item(&self, prefix: &[String]) -> bool {
        self.node(prefix)
            .is_some_and(|n| n.children.contains(PARAM))
    }

    /// Whether the items under `prefix` answer `method` too (so the collection's own is a
    /// bulk one).
    fn item_serves(&self, prefix: &[String], method: &str) -> bool {
        let mut item = prefix.to_vec();
        item.push(PARAM.to_owned());
        matches!(method, "PUT" | "PATCH" | "DELETE")
            && self
                .node(&item)
                .is_some_and(|n| n.methods.iter().any(|(m, _)| m == method))
    }

    /// Whether a GET here returns a list; when the spec does not say, whether the last
    /// segment is a plural (`/orders`).
    fn returns_list(&self, prefix: &[String]) -> bool {
        let Some(node) = self.node(prefix) else {
            return false;
        };
        let gets = node.methods.iter().filter(|(m, _)| m == "GET");
        let mut known = gets.filter_map(|(_, list)| *list).peekable();
        match known.peek() {
            Some(_) => known.any(|list| list),
            None => prefix
                .last()
                .and_then(|s| words(s).pop())
                .is_some_and(|w| is_plural(&w)),
        }
    }

    /// A GET here that returns one object: a singleton (`/customers/{id}/cash_balance`).
    fn is_singleton(&self, prefix: &[String]) -> bool {
        self.node(prefix)
            .is_some_and(|n| n.methods.iter().any(|(m, _)| m == "GET"))
            && !self.returns_list(prefix)
            && !self.has_item(prefix)
    }

    fn is_leaf(&self, prefix: &[String]) -> bool {
        self.node(prefix)
            .is_some_and(|n| n.children.is_empty() && n.methods.len() == 1)
    }

    /// Static children with one method and nothing under them.
    fn leaf_children(&self, prefix: &[String]) -> usize {
        let Some(node) = self.node(prefix) else {
            return 0;
        };
        node.children
            .iter()
            .filter(|c| *c != PARAM)
            .filter(|c| {
                let mut path = prefix.to_vec();
                path.push((*c).clone());
                self.is_leaf(&path)
            })
            .count()
    }

    /// Whether the route ends in an action: a leaf among leaf siblings under a resource,
    /// or a POST right under an item (Stripe's `/charges/{charge}/capture`).
    fn ends_in_action(&self, segs: &[String], method: &str) -> bool {
        let Some((last, parent)) = segs.split_last() else {
            return false;
        };
        if last == PARAM || parent.is_empty() || !self.is_leaf(segs) {
            return false;
        }
        // A plural leaf in an actions-style spec is a collection created by POST
        // (`/test_helpers/treasury/received_credits`), not an action.
        let last_word = words(last).pop().unwrap_or_default();
        let named_like_action = self.style == Style::Nested || !is_plural(&last_word);
        if parent.last().is_some_and(|p| p == PARAM) {
            return method == "POST" && named_like_action;
        }
        // Beside a collection's items (`/customers/search` next to `/customers/{id}`), or
        // among leaves like it (`/dns_records/export`, `/dns_records/import`).
        named_like_action && (self.has_item(parent) || self.leaf_children(parent) >= 2)
    }

    /// The group (dotted when nested) and method of `op`, or `None` for a route without a
    /// static segment.
    pub(super) fn name(&self, op: &Operation) -> Option<(String, String)> {
        let segs = segments(&op.path);
        if segs.iter().all(|s| s == PARAM) {
            return None;
        }
        // HEAD, OPTIONS, TRACE: named by their method, never taking a verb of the others.
        if !matches!(
            op.method.as_str(),
            "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
        ) {
            let statics: Vec<&String> = segs.iter().filter(|s| *s != PARAM).collect();
            return Some((group_name(&statics), op.method.to_ascii_lowercase()));
        }
        match self.style {
            Style::Nested => Some(self.nested(&segs, &op.method)),
            Style::Actions => Some(self.actions(&segs, &op.method)),
        }
    }

    fn nested(&self, segs: &[String], method: &str) -> (String, String) {
        let scope_children = self
            .node(&segs[..segs.len().min(2)])
            .map_or(0, |n| n.children.iter().filter(|c| *c != PARAM).count());
        let scoped = segs.len() >= 3
            && segs[1] == PARAM
            && segs[2] != PARAM
            && scope_children >= SCOPE_MIN_CHILDREN;
        let named = if scoped { &segs[2..] } else { segs };
        let statics: Vec<&String> = named.iter().filter(|s| *s != PARAM).collect();
        let last_is_param = segs.last().is_some_and(|s| s == PARAM);
        if let Some((last, groups)) = statics.split_last()
            && !last_is_param
            && !groups.is_empty()
            && self.ends_in_action(segs, method)
        {
            return (group_name(groups), camel(&words(last)));
        }
        let verb = match (method, last_is_param) {
            ("GET", true) => "get",
            ("GET", false) if self.returns_list(segs) || self.has_item(segs) => "list",
            ("GET", false) => "get",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "edit",
            _ => "delete",
        };
        // A PUT, PATCH or DELETE of a whole collection whose items have their own.
        if !last_is_param && self.item_serves(segs, method) {
            return (group_name(&statics), verb_and("bulk", words(verb)));
        }
        (group_name(&statics), verb.to_owned())
    }

    fn actions(&self, segs: &[String], method: &str) -> (String, String) {
        let anchor =
            (0..segs.len().saturating_sub(1)).find(|&i| segs[i] != PARAM && segs[i + 1] == PARAM);
        let Some(anchor) = anchor else {
            let statics: Vec<&String> = segs.iter().filter(|s| *s != PARAM).collect();
            if let Some((last, groups)) = statics.split_last()
                && !groups.is_empty()
                && self.ends_in_action(segs, method)
            {
                return (group_name(groups), camel(&words(last)));
            }
            let verb = match method {
                "GET" if self.returns_list(segs) || self.has_item(segs) => "list",
                "GET" => "retrieve",
                "POST" if self.is_singleton(segs) => "update",
                "POST" => "create",
                "DELETE" => "del",
                _ => "update",
            };
            return (group_name(&statics), verb.to_owned());
        };
        let groups: Vec<&String> = segs[..=anchor].iter().filter(|s| *s != PARAM).collect();
        let group = group_name(&groups);
        let rest = &segs[anchor + 2..];
        let item_verb = match method {
            "GET" => "retrieve",
            "DELETE" => "delete",
            _ => "update",
        };
        let method_name = match rest {
            [] => match method {
                "DELETE" => "del".to_owned(),
                _ => item_verb.to_owned(),
            },
            [sub] if sub != PARAM => {
                let sub_words = words(sub);
                if self.ends_in_action(segs, method) {
                    camel(&sub_words)
                } else {
                    let (verb, noun) = match method {
                        "GET" if self.returns_list(segs) || self.has_item(segs) => {
                            ("list", sub_words)
                        }
                        "GET" => ("retrieve", sub_words),
                        "POST" if self.is_singleton(segs) => ("update", sub_words),
                        "POST" => ("create", singular_last(sub_words)),
                        "DELETE" => ("delete", singular_last(sub_words)),
                        _ => ("update", sub_words),
                    };
                    verb_and(verb, noun)
                }
            }
            [sub, param] if sub != PARAM && param == PARAM => {
                verb_and(item_verb, singular_last(words(sub)))
            }
            [sub, param, action] if sub != PARAM && param == PARAM && action != PARAM => {
                let mut all = words(action);
                all.extend(singular_last(words(sub)));
                camel(&all)
            }
            _ => {
                let rest_words: Vec<String> = rest
                    .iter()
                    .filter(|s| *s != PARAM)
                    .flat_map(|s| words(s))
                    .collect();
                verb_and(item_verb, rest_words)
            }
        };
        (group, method_name)
    }
}

/// `["load_balancers", "pools"]` -> `loadBalancers.pools`.
fn group_name(segments: &[&String]) -> String {
    segments
        .iter()
        .map(|s| camel(&words(s)))
        .collect::<Vec<_>>()
        .join(".")
}

fn verb_and(verb: &str, noun: Vec<String>) -> String {
    let mut all = vec![verb.to_owned()];
    all.extend(noun);
    camel(&all)
}

fn singular_last(mut noun: Vec<String>) -> Vec<String> {
    if let Some(last) = noun.last_mut() {
        *last = singular(last);
    }
    noun
}
