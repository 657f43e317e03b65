//! What to suggest for an SDK name that reaches nothing, ranked by what the name means
//! before how it is spelled: `api.pullRequests.list` is GitHub's `api.pulls.list` (whose
//! operations say "pull request"), not `api.pullRequestStacks`; `api.customers.remove` is
//! `api.customers.del` (the DELETE), not a method spelled alike. Each operation is scored by
//! the written name's nouns found in its group, name and summary, how much of its group's
//! name those nouns are, its verb's act against the operation's HTTP method, and then
//! spelling.

use crate::spec::{Operation, singular, words};

/// Everyday verbs a model writes in a method's name, and the HTTP methods they mean.
const VERBS: &[(&[&str], &[&str])] = &[
    (
        &[
            "list", "all", "search", "find", "get", "retrieve", "fetch", "read", "show", "view",
        ],
        &["GET"],
    ),
    (
        &[
            "create", "add", "new", "make", "post", "insert", "open", "send", "submit",
        ],
        &["POST"],
    ),
    (
        &[
            "update", "edit", "modify", "change", "set", "patch", "put", "replace", "rename",
        ],
        &["PATCH", "PUT", "POST"],
    ),
    (
        &["delete", "del", "remove", "destroy", "erase", "drop"],
        &["DELETE"],
    ),
    (&["cancel", "close", "revoke", "void"], &["POST", "DELETE"]),
];

/// How many suggestions a message names.
const SHOWN: usize = 3;

/// The words of an operation that say what it is about, each singular and lower case.
pub(super) struct Described {
    words: Vec<String>,
    group: Vec<String>,
    /// The groups of its former names (before the provider file's `[names]`), lower case.
    former_groups: Vec<String>,
}

impl Described {
    /// What each of `operations` is about, in their order.
    pub(super) fn all(operations: &[Operation]) -> Vec<Self> {
        operations.iter().map(Self::of).collect()
    }

    /// The words of `op`'s group, name and summary.
    pub(super) fn of(op: &Operation) -> Self {
        let singulars = |text: &str| -> Vec<String> {
            words(text)
                .iter()
                .map(|w| singular(&w.to_lowercase()))
                .collect()
        };
        let group: Vec<String> = op.group.split('.').flat_map(singulars).collect();
        let mut all = group.clone();
        all.extend(singulars(&op.name));
        all.extend(singulars(&op.summary));
        all.sort_unstable();
        all.dedup();
        let former_groups = op
            .former
            .iter()
            .filter_map(|name| Some(name.rsplit_once('.')?.0.to_ascii_lowercase()))
            .collect();
        Self {
            words: all,
            group,
            former_groups,
        }
    }
}

/// Up to three operations `asked` (`group.method`, dotted, after `api.`) may have meant,
/// best first; none when nothing it says is in any operation and no name is spelled near it.
pub(super) fn ranked<'a>(
    asked: &str,
    operations: &'a [Operation],
    described: &[Described],
) -> Vec<&'a Operation> {
    let mut written: Vec<String> = asked
        .split('.')
        .flat_map(words)
        .map(|w| singular(&w.to_lowercase()))
        .collect();
    let verb = written
        .last()
        .and_then(|last| {
            VERBS
                .iter()
                .find(|(verbs, _)| verbs.contains(&last.as_str()))
        })
        .map(|(_, methods)| *methods);
    if verb.is_some() {
        written.pop();
    }
    let nouns: Vec<&String> = written.iter().filter(|w| w.len() > 1).collect();
    let asked_lower = asked.to_ascii_lowercase();
    // A group the provider file renamed away (`customNs`): its operations, by their names now.
    let asked_group = asked_lower
        .rsplit_once('.')
        .map_or(asked_lower.as_str(), |(g, _)| g);
    let mut scored: Vec<(f64, &Operation)> = operations
        .iter()
        .zip(described)
        .filter_map(|(op, about)| {
            let found = nouns
                .iter()
                .filter(|noun| about.words.binary_search(noun).is_ok())
                .count();
            // The nouns it says, and how much of the group's name is what it says (a group
            // named with more words than asked is about something narrower).
            let coverage = found as f64 / nouns.len().max(1) as f64;
            let in_group = about
                .group
                .iter()
                .filter(|word| nouns.contains(word))
                .count();
            let precision = in_group as f64 / about.group.len().max(1) as f64;
            let renamed_from = about.former_groups.iter().any(|g| g == asked_group);
            let meaning = if renamed_from {
                1.0
            } else {
                (coverage + precision) / 2.0
            };
            let acts = match verb {
                Some(methods) => f64::from(u8::from(methods.contains(&op.method.as_str()))),
                None => 0.5,
            };
            // Spelling, of the group and the method each: a shared group would make every
            // method of it look alike.
            let spelling = match asked_lower.rsplit_once('.') {
                Some((group, method)) => {
                    let group_alike = strsim::jaro_winkler(group, &op.group.to_ascii_lowercase());
                    let method_alike = strsim::jaro_winkler(method, &op.name.to_ascii_lowercase());
                    (group_alike + method_alike) / 2.0
                }
                None => strsim::jaro_winkler(&asked_lower, &op.group.to_ascii_lowercase()),
            };
            (meaning > 0.0 || spelling > 0.9).then_some((2.0 * meaning + acts + spelling, op))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    // Only those near the best: a clear match is said alone.
    let best = scored.first().map_or(0.0, |(score, _)| *score);
    scored
        .into_iter()
        .take_while(|(score, _)| *score >= best - 0.15)
        .take(SHOWN)
        .map(|(_, op)| op)
        .collect()
}

/// `; did you mean api.pulls.list (GET /repos/{owner}/{repo}/pulls: List pull requests)?`
/// for the operations `ranked` found, else `.`.
pub(super) fn said(found: &[&Operation]) -> String {
    if found.is_empty() {
        return ".".to_owned();
    }
    let named: Vec<String> = found
        .iter()
        .map(|op| {
            let summary = crate::spec::shorten(&op.summary, 60);
            match summary.is_empty() {
                true => format!("api.{}.{} ({} {})", op.group, op.name, op.method, op.path),
                false => format!(
                    "api.{}.{} ({} {}: {summary})",
                    op.group, op.name, op.method, op.path
                ),
            }
        })
        .collect();
    format!("; did you mean {}?", named.join(", or "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(group: &str, name: &str, method: &str, summary: &str) -> Operation {
        Operation {
            summary: summary.into(),
            ..crate::testing::operation(name, method, &format!("/{group}/{name}"), group, name)
        }
    }

    fn first(asked: &str, ops: &[Operation]) -> String {
        let found = ranked(asked, ops, &Described::all(ops));
        found
            .first()
            .map(|op| format!("{}.{}", op.group, op.name))
            .unwrap_or_default()
    }

    #[test]
    fn a_name_is_matched_by_what_it_means_before_how_it_is_spelled() {
        let ops = [
            op("pulls", "list", "GET", "List pull requests"),
            op("pulls", "create", "POST", "Create a pull request"),
            op("pullRequestStacks", "get", "GET", "Get a stack"),
            op("customers", "del", "DELETE", "Delete a customer"),
            op("customers", "retrieve", "GET", "Retrieve a customer"),
            op("customers", "update", "POST", "Update a customer"),
            op("reviews", "remind", "POST", "Remind a reviewer"),
        ];
        assert_eq!(first("pullRequests.list", &ops), "pulls.list");
        assert_eq!(first("pullRequests.create", &ops), "pulls.create");
        assert_eq!(first("customers.remove", &ops), "customers.del");
        assert_eq!(first("customers.fetch", &ops), "customers.retrieve");
        // A plain misspelling still finds its name.
        assert_eq!(first("customers.retreive", &ops), "customers.retrieve");
        assert!(ranked("zzz.qqq", &ops, &Described::all(&ops)).is_empty());
        assert_eq!(said(&[]), ".");
    }
}
