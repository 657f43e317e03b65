//! How much to trust an operation's text score for a query. Text alone cannot tell apart
//! operations that share their words: `repos.listForOrg` and `repos.listForAuthenticatedUser`,
//! `pulls.requestReviewers` and `pulls.listRequestedReviewers`. What the query asks (its
//! action, its verb, the scope it names) can, and so can what each operation does, read once
//! when the index is built.

use std::collections::{HashMap, HashSet};

use super::intent::{self, Action, Intent, Scope};
use super::tokenize;
use crate::spec::{Api, Operation, words};

/// How much a matching action multiplies an operation's score.
const ACTION_MATCH: f32 = 1.2;
/// How much a different action multiplies it.
const ACTION_MISMATCH: f32 = 0.9;
/// For operations named by a verb of their own ("lock", "capture"), when the query asks with
/// that verb.
const VERB_MATCH: f32 = 1.25;
/// A scoped variant ("forAuthenticatedUser") whose scope the query names ("my"), when other
/// variants exist.
const SCOPE_MATCH: f32 = 1.3;
/// A scoped variant ("forOrg") the query does not name, when other variants exist.
const SCOPE_MISMATCH: f32 = 0.7;
/// An operation whose SDK group the query names ("pulls" for "pull requests").
const GROUP_MATCH: f32 = 1.2;
/// Deprecated operations.
const DEPRECATED: f32 = 0.5;
/// Each path segment past the first lowers the score by this share: nested resources are
/// meant less often than top-level ones.
const DEPTH: f32 = 0.08;

/// What an operation does, read once per index.
pub struct Traits {
    action: Action,
    special_verb: Option<String>,
    /// Scopes that set it apart from operations doing the same thing elsewhere; test helpers
    /// and enterprise variants always, as they are seldom what a query means.
    scopes: Vec<Scope>,
    deprecated: bool,
    depth: usize,
    /// The analyzed words of its SDK group ("pulls" -> pull).
    group: Vec<String>,
}

/// The traits of every operation of `api`, in order.
pub fn traits(api: &Api) -> Vec<Traits> {
    let families: Vec<String> = api.operations.iter().map(family).collect();
    let mut sizes: HashMap<&str, usize> = HashMap::new();
    for f in &families {
        *sizes.entry(f).or_default() += 1;
    }
    api.operations
        .iter()
        .zip(&families)
        .map(|(op, own)| {
            let contested = sizes[own.as_str()] > 1;
            Traits {
                action: intent::of_operation(&op.name, &op.method, &op.path),
                special_verb: intent::special_verb(&op.name, &op.method, &op.path),
                scopes: intent::scopes_of(&op.group, &op.name)
                    .into_iter()
                    .filter(|scope| contested || matches!(scope, Scope::Test | Scope::Enterprise))
                    .collect(),
                group: tokenize::terms(&op.group),
                deprecated: op.deprecated,
                depth: op
                    .path
                    .split('/')
                    .filter(|s| !s.is_empty() && !s.starts_with('{'))
                    .count(),
            }
        })
        .collect()
}

/// An operation's group and name without its scope words: `repos.listForOrg` and
/// `repos.listForUser` are both `repos list`.
fn family(op: &Operation) -> String {
    const SCOPE_WORDS: &[&str] = &[
        "for",
        "in",
        "by",
        "org",
        "orgs",
        "organization",
        "enterprise",
        "enterprises",
        "authenticated",
        "user",
        "repo",
        "test",
    ];
    let mut out = op.group.clone();
    for word in words(&op.name) {
        if !SCOPE_WORDS.contains(&word.as_str()) {
            out.push(' ');
            out.push_str(&word);
        }
    }
    out
}

/// The factor for an operation's text score under `intent`.
pub fn weight(traits: &Traits, intent: &Intent) -> f32 {
    let mut weight = 1.0;
    match intent.action {
        Some(wanted) if wanted == traits.action => weight *= ACTION_MATCH,
        Some(_) => weight *= ACTION_MISMATCH,
        None => {}
    }
    if traits
        .special_verb
        .as_ref()
        .is_some_and(|verb| intent.asks_to(verb))
    {
        weight *= VERB_MATCH;
    }
    for scope in &traits.scopes {
        weight *= if intent.scopes.contains(scope) {
            SCOPE_MATCH
        } else {
            SCOPE_MISMATCH
        };
    }
    if !traits.group.is_empty() && traits.group.iter().all(|t| intent.terms.contains(t)) {
        weight *= GROUP_MATCH;
    }
    if traits.deprecated {
        weight *= DEPRECATED;
    }
    weight / (1.0 + DEPTH * traits.depth.saturating_sub(1) as f32)
}

/// The analyzed verbs the API names operations by, for reading queries.
pub fn verbs(traits: &[Traits]) -> HashSet<String> {
    traits
        .iter()
        .filter_map(|t| t.special_verb.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Operation;

    fn op(group: &str, name: &str, method: &str, path: &str) -> Operation {
        crate::testing::operation(&format!("{group}/{name}"), method, path, group, name)
    }

    fn weights(query: &str) -> Vec<f32> {
        let api = Api {
            title: String::new(),
            version: String::new(),
            servers: Vec::new(),
            auth: Vec::new(),
            operations: vec![
                op("repos", "listForOrg", "GET", "/orgs/{org}/repos"),
                op("repos", "listForAuthenticatedUser", "GET", "/user/repos"),
                op(
                    "activity",
                    "starRepoForAuthenticatedUser",
                    "PUT",
                    "/user/starred/{owner}/{repo}",
                ),
                op(
                    "issues",
                    "lock",
                    "PUT",
                    "/repos/{owner}/{repo}/issues/{n}/lock",
                ),
                op(
                    "issues",
                    "update",
                    "PATCH",
                    "/repos/{owner}/{repo}/issues/{n}",
                ),
            ],
            schemas: Vec::new(),
        };
        let traits = traits(&api);
        let vocabulary = intent::Vocabulary {
            api_verbs: verbs(&traits),
            synonyms: Vec::new(),
        };
        let intent = Intent::read(query, &vocabulary);
        traits.iter().map(|t| weight(t, &intent)).collect()
    }

    #[test]
    fn scoped_variants_give_way_unless_the_query_names_their_scope() {
        let org = weights("list the repositories of an organization");
        assert!(org[0] > org[1], "{org:?}");
        let mine = weights("list my repositories");
        assert!(mine[1] > mine[0], "{mine:?}");
        // The only operation that stars is not penalised for its scope.
        let star = weights("star a repository");
        assert!(star[2] > 1.0, "{star:?}");
    }

    #[test]
    fn operations_named_by_a_verb_are_found_by_it() {
        let lock = weights("lock an issue");
        assert!(lock[3] > lock[4], "{lock:?}");
        let edit = weights("edit an issue");
        assert!(edit[4] > edit[3], "{edit:?}");
    }
}
