//! What a query asks to do, and what an operation does: list, get, create, update or delete.
//! Agents ask with verbs ("remove the webhook", "open an issue"); specs say DELETE and POST.
//! When the query's verb matches an operation's action, that operation is preferred.

use crate::spec::{Operation, words};

/// The kind of action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read many.
    List,
    /// Read one.
    Get,
    /// Make a new one.
    Create,
    /// Change one.
    Update,
    /// Remove one.
    Delete,
}

const VERBS: &[(&str, Action)] = &[
    ("list", Action::List),
    ("find", Action::List),
    ("search", Action::List),
    ("browse", Action::List),
    ("get", Action::Get),
    ("retrieve", Action::Get),
    ("fetch", Action::Get),
    ("show", Action::Get),
    ("read", Action::Get),
    ("view", Action::Get),
    ("look", Action::Get),
    ("download", Action::Get),
    ("create", Action::Create),
    ("add", Action::Create),
    ("new", Action::Create),
    ("make", Action::Create),
    ("register", Action::Create),
    ("open", Action::Create),
    ("start", Action::Create),
    ("issue", Action::Create),
    ("submit", Action::Create),
    ("send", Action::Create),
    ("place", Action::Create),
    ("post", Action::Create),
    ("generate", Action::Create),
    ("invite", Action::Create),
    ("upload", Action::Create),
    ("update", Action::Update),
    ("edit", Action::Update),
    ("modify", Action::Update),
    ("change", Action::Update),
    ("set", Action::Update),
    ("rename", Action::Update),
    ("archive", Action::Update),
    ("close", Action::Update),
    ("delete", Action::Delete),
    ("remove", Action::Delete),
    ("revoke", Action::Delete),
    ("destroy", Action::Delete),
    ("drop", Action::Delete),
    ("unstar", Action::Delete),
];

/// The action the query's first verb asks for, if it has one.
pub fn of_query(query: &str) -> Option<Action> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .find_map(|word| {
            let lower = word.to_ascii_lowercase();
            VERBS
                .iter()
                .find(|(verb, _)| *verb == lower)
                .map(|(_, action)| *action)
        })
}

/// What an operation does, from its method, path and SDK name.
pub fn of_operation(op: &Operation) -> Action {
    let name = words(&op.name);
    if let Some(first) = name.first()
        && let Some((_, action)) = VERBS.iter().find(|(verb, _)| verb == first)
    {
        return *action;
    }
    let item = op.path.trim_end_matches('/').ends_with('}');
    match (op.method.as_str(), item) {
        ("GET", false) => Action::List,
        ("GET", true) => Action::Get,
        ("POST", false) | ("PUT", false) => Action::Create,
        ("DELETE", _) => Action::Delete,
        _ => Action::Update,
    }
}

/// Words people use for an API's nouns, added to a query: specs abbreviate ("repos",
/// "org") where people do not, and the other way round.
pub fn expand(query: &str) -> String {
    const SYNONYMS: &[(&str, &str)] = &[
        ("repository", "repo"),
        ("repositories", "repos"),
        ("organization", "org"),
        ("organizations", "orgs"),
        ("pr", "pull request"),
        ("prs", "pull requests"),
        ("webhook", "hook"),
        ("webhooks", "hooks"),
        ("remove", "delete"),
        ("fetch", "get"),
        ("retrieve", "get"),
        ("me", "authenticated user"),
        ("card", "payment method"),
        ("cards", "payment methods"),
    ];
    let mut out = query.to_owned();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        let lower = word.to_ascii_lowercase();
        if let Some((_, extra)) = SYNONYMS.iter().find(|(w, _)| *w == lower) {
            out.push(' ');
            out.push_str(extra);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_say_what_they_want_done() {
        assert_eq!(of_query("remove a webhook"), Some(Action::Delete));
        assert_eq!(of_query("Open a new issue"), Some(Action::Create));
        assert_eq!(of_query("which webhooks are configured"), None);
        assert_eq!(expand("get a repository"), "get a repository repo");
    }
}
