//! Names a spec's operation ids already are: `repos/list-for-org` (GitHub's octokit names)
//! -> `repos.listForOrg`; `listCustomers` with the tag `customers` -> `customers.list`.

use super::{camel, singular, words};
use crate::spec::model::Operation;

/// Whether `id` names the operation itself: `group/method`, or lowerCamelCase words
/// (`listCustomers`, `getPetById`, `chat.postMessage`). Other ids (`GetCustomersCustomer`,
/// `zone-level-access-applications-list-access-applications`) restate the route or a
/// sentence, and the route names the operation better (`from_path`).
pub(super) fn is_a_name(id: &str) -> bool {
    if id
        .split_once('/')
        .is_some_and(|(g, m)| !g.is_empty() && !m.is_empty() && !m.contains('/'))
    {
        return true;
    }
    // Dotted lowerCamelCase (`chat.postMessage`, `items.get`) too.
    id.split('.').all(|part| {
        part.starts_with(|c: char| c.is_ascii_lowercase())
            && part.chars().all(|c| c.is_ascii_alphanumeric())
    })
}

/// The group (`a.b` when nested) and method of an operation whose id is a name.
pub(super) fn name(op: &Operation, first_path_segment: Option<&str>) -> (String, String) {
    if let Some((group, method)) = op.id.split_once('/') {
        return (camel(&words(group)), camel(&words(method)));
    }
    let group = match (op.tags.first(), first_path_segment) {
        (Some(tag), _) => camel(&words(tag)),
        (None, Some(segment)) => camel(&words(segment)),
        (None, None) => "api".to_owned(),
    };
    let id_words = words(&op.id);
    let group_words = words(&group);
    let is_group_word = |w: &str| group_words.iter().any(|g| g == w || singular(g) == w);
    let rest: Vec<String> = id_words
        .iter()
        .filter(|w| !is_group_word(w))
        .cloned()
        .collect();
    let method = if rest.is_empty() {
        camel(&id_words)
    } else {
        camel(&rest)
    };
    (group, method)
}
