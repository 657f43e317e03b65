//! Finding the operation a script names. Exactly first; else by the spellings a model that
//! knows the provider's official SDK writes for the same thing: another case or acronym
//! (`api.secondaryDNS` for `api.secondaryDns`), singular for plural in a group
//! (`api.healthchecks.previews` for `api.healthchecks.preview`), the verbs SDKs spell
//! differently (`get`/`retrieve`, `delete`/`del`, `edit` for a PATCH and `update` for a PUT,
//! POST or PATCH, `list`/`get` of a resource read one way only), and an action written as a
//! group with its verb (`api.ssl.analyze.create` for the POST `api.ssl.analyze`). Every
//! spelling is tried, and a call resolves only when all of them together reach exactly one
//! operation whose HTTP method fits the verb: anything else is an error naming what exists.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::CallError;
use super::validate::did_you_mean;
use crate::spec::{singular, words};

/// Verbs that name the same act in different SDKs.
const SYNONYMS: &[&[&str]] = &[
    &["get", "retrieve"],
    &["update", "edit"],
    &["delete", "del"],
];

/// The verbs that read a resource.
const READS: &[&str] = &["list", "get", "retrieve"];

/// The HTTP methods a verb may stand for, when it is not the operation's own name: `edit`
/// is a partial update and never reaches a PUT that replaces the whole.
fn fits(verb: &str, http_method: &str) -> bool {
    match verb {
        "list" | "get" | "retrieve" => http_method == "GET",
        "create" => http_method == "POST",
        "update" => matches!(http_method, "PUT" | "POST" | "PATCH"),
        "edit" => http_method == "PATCH",
        "delete" | "del" => http_method == "DELETE",
        _ => false,
    }
}

/// The SDK's operations by group (dotted when nested) and method.
pub(super) struct Names {
    groups: BTreeMap<String, BTreeMap<String, usize>>,
    /// Each operation's HTTP method, by index.
    http_methods: Vec<String>,
    /// Operations the provider file renamed, by their spec's `group.method`.
    former: HashMap<String, usize>,
    /// What to suggest for a `group.method` that reaches nothing (`; did you mean ...?`, or
    /// `.`), when something better than spelling is set (see [`Names::suggest_with`]).
    suggest: Option<Suggest>,
    /// The longest name a lookup takes: twice the longest `group.method` there is, and some
    /// room. Anything longer is refused before any lookup, whose work grows with the name.
    longest: usize,
}

/// Words that suggest what a `group.method` that reaches nothing may have meant.
pub(super) type Suggest = Box<dyn Fn(&str) -> String + Send + Sync>;

/// Characters of a refused name repeated in its error.
const NAME_SHOWN: usize = 60;

/// Whether two identifiers are the same words, up to case and plural.
fn same_words(a: &str, b: &str) -> bool {
    let (a, b) = (words(a), words(b));
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| x == y || singular(x) == singular(y))
}

/// Whether two dotted group names are the same groups, up to case and plural.
fn same_group(a: &str, b: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| x.eq_ignore_ascii_case(y) || same_words(x, y))
}

impl Names {
    /// Indexes `(group, method, HTTP method)` triples by their position.
    pub(super) fn new<'a>(names: impl Iterator<Item = (&'a str, &'a str, &'a str)>) -> Self {
        let mut groups: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        let mut http_methods = Vec::new();
        for (index, (group, method, http_method)) in names.enumerate() {
            groups
                .entry(group.to_owned())
                .or_default()
                .insert(method.to_owned(), index);
            http_methods.push(http_method.to_owned());
        }
        let longest = groups
            .iter()
            .flat_map(|(group, methods)| methods.keys().map(move |m| group.len() + 1 + m.len()))
            .max()
            .unwrap_or(0);
        Self {
            groups,
            http_methods,
            former: HashMap::new(),
            suggest: None,
            longest: 2 * longest + 16,
        }
    }

    /// Suggests with `suggest` for a name that reaches nothing, not by spelling alone.
    pub(super) fn suggest_with(&mut self, suggest: Suggest) {
        self.suggest = Some(suggest);
    }

    /// What to say after a name that reaches nothing: `suggest`'s words for it, else the
    /// nearest of `candidates` by spelling.
    fn hint(&self, asked: &str, given: &str, candidates: &[&str]) -> String {
        match &self.suggest {
            Some(suggest) => suggest(asked),
            None => did_you_mean(given, candidates),
        }
    }

    /// Lets each renamed operation be reached by its former names too, where they are no
    /// operation's name now and spell no other one: a rename never breaks a script written
    /// against the spec's names or an earlier file's.
    pub(super) fn remember_former(&mut self, former: impl Iterator<Item = (String, usize)>) {
        for (name, index) in former {
            self.longest = self.longest.max(2 * name.len() + 16);
            self.former.insert(name, index);
        }
    }

    /// Whether `api.<group>` (dotted) reaches a group at run time: a group, or one nested
    /// groups sit under, named so up to case and plural.
    pub(super) fn has_group(&self, group: &str) -> bool {
        let depth = group.split('.').count();
        let former_groups = self
            .former
            .keys()
            .filter_map(|name| Some(name.rsplit_once('.')?.0));
        self.groups
            .keys()
            .map(String::as_str)
            .chain(former_groups)
            .any(|name| {
                let parts: Vec<&str> = name.split('.').collect();
                parts.len() >= depth && same_group(&parts[..depth].join("."), group)
            })
    }

    /// The index of the operation `api.<group>.<method>` names, or an error that says what
    /// exists.
    pub(super) fn find(&self, group: &str, method: &str) -> Result<usize, CallError> {
        self.find_with(group, method, true)
    }

    /// The index of the operation `api.<group>.<method>` names, if one: as [`Names::find`],
    /// without working out what to say when none does (the type check asks this of every
    /// name it judges; suggestions rank every operation).
    pub(super) fn resolve(&self, group: &str, method: &str) -> Option<usize> {
        self.find_with(group, method, false).ok()
    }

    /// [`Names::find`]; what exists and what may have been meant worked out only when
    /// `explain` (else a short error that says to search).
    pub(super) fn find_with(
        &self,
        group: &str,
        method: &str,
        explain: bool,
    ) -> Result<usize, CallError> {
        let length = group.len() + 1 + method.len();
        if length > self.longest {
            let called = format!("{group}.{method}");
            return Err(CallError(format!(
                "`api.{}` is {length} bytes long, longer than any name this SDK has: search the docs for the operation you need and call it by its name",
                crate::egress::cut(&called, NAME_SHOWN)
            )));
        }
        if let Some(index) = self.groups.get(group).and_then(|m| m.get(method)) {
            return Ok(*index);
        }
        let mut found = BTreeSet::new();
        for (_, methods) in self
            .groups
            .iter()
            .filter(|(name, _)| same_group(name, group))
        {
            found.extend(self.spellings(methods, method));
        }
        found.extend(self.verb_moved(group, method));
        let former = self.former.get(&format!("{group}.{method}"));
        let mut found = found.into_iter();
        match (found.next(), found.next()) {
            (Some(index), None) => Ok(index),
            // A spelling of another operation wins over a name the file renamed away, and
            // spellings that could be several stay an error.
            (None, _) if let Some(index) = former => Ok(*index),
            (Some(first), Some(second)) => {
                let all: Vec<String> = [first, second]
                    .into_iter()
                    .chain(found)
                    .map(|i| format!("api.{}", self.name_of(i)))
                    .collect();
                Err(CallError(format!(
                    "`api.{group}.{method}` could be any of {}: call the one you mean by its name",
                    all.join(", ")
                )))
            }
            (None, _) if explain => Err(self.not_found(group, method)),
            (None, _) => Err(CallError(format!(
                "no `api.{}` in this SDK: search the docs for the operation you need",
                crate::egress::cut(&format!("{group}.{method}"), NAME_SHOWN)
            ))),
        }
    }

    /// The methods of one group that `asked` may spell.
    fn spellings(&self, methods: &BTreeMap<String, usize>, asked: &str) -> Vec<usize> {
        let synonyms = SYNONYMS.iter().find(|set| set.contains(&asked));
        let reads: Vec<usize> = methods
            .iter()
            .filter(|(name, _)| READS.contains(&name.as_str()))
            .map(|(_, i)| *i)
            .collect();
        let mut out: Vec<usize> = methods
            .iter()
            .filter(|(name, index)| {
                same_words(name, asked)
                    || (synonyms.is_some_and(|set| set.contains(&name.as_str()))
                        && fits(asked, &self.http_methods[**index]))
            })
            .map(|(_, i)| *i)
            .collect();
        if READS.contains(&asked) && reads.len() == 1 {
            out.extend(reads);
        }
        out
    }

    /// Where one SDK names a resource's action as a method and another as a group with a
    /// verb: `api.ssl.analyze.create(...)` for the POST `api.ssl.analyze(...)`, or
    /// `api.radar.search.global(...)` for the one read of `api.radar.search.global`. The
    /// verb must fit the HTTP method; a group called as a method only reads.
    fn verb_moved(&self, group: &str, method: &str) -> Vec<usize> {
        let mut out = Vec::new();
        if let Some((parent, action)) = group.rsplit_once('.')
            && let Some(index) = self.groups.get(parent).and_then(|m| m.get(action))
            && fits(method, &self.http_methods[*index])
        {
            out.push(*index);
        }
        if let Some(nested) = self.groups.get(&format!("{group}.{method}"))
            && nested.len() == 1
        {
            out.extend(nested.values().filter(|i| self.http_methods[**i] == "GET"));
        }
        out
    }

    /// `group.name` of the operation at `index`.
    fn name_of(&self, index: usize) -> String {
        self.groups
            .iter()
            .find_map(|(group, methods)| {
                methods
                    .iter()
                    .find(|(_, i)| **i == index)
                    .map(|(name, _)| format!("{group}.{name}"))
            })
            .unwrap_or_default()
    }

    /// What to say when nothing fits: the methods of the group, or the groups there are.
    fn not_found(&self, group: &str, method: &str) -> CallError {
        let called = format!("{group}.{method}");
        if let Some(methods) = self.groups.get(&called) {
            let names: Vec<&str> = methods.keys().map(String::as_str).collect();
            return CallError(format!(
                "api.{called} is a group, not a method: call one of its methods ({})",
                names.join(", ")
            ));
        }
        let Some((group_name, methods)) = self
            .groups
            .get_key_value(group)
            .or_else(|| self.groups.iter().find(|(name, _)| same_group(name, group)))
        else {
            return self.no_group(group, method);
        };
        let names: Vec<&str> = methods.keys().map(String::as_str).collect();
        let nested: Vec<&str> = self
            .groups
            .keys()
            .filter_map(|g| g.strip_prefix(group_name.as_str())?.strip_prefix('.'))
            .collect();
        let mut message = format!(
            "no method `api.{group}.{method}`{} Methods of api.{group_name}: {}",
            self.hint(&called, method, &names),
            names.join(", ")
        );
        if !nested.is_empty() {
            message.push_str(&format!("; groups under it: {}", nested.join(", ")));
        }
        CallError(message)
    }

    /// There is no group `group`: the groups beside it, else the top-level ones.
    fn no_group(&self, group: &str, method: &str) -> CallError {
        let all: Vec<&str> = self.groups.keys().map(String::as_str).collect();
        let parent = group.rsplit_once('.').map(|(p, _)| p);
        let beside: Vec<&str> = all
            .iter()
            .copied()
            .filter(|g| {
                parent.is_some_and(|p| g.strip_prefix(p).is_some_and(|rest| rest.starts_with('.')))
            })
            .collect();
        let listed: Vec<&str> = if beside.is_empty() {
            let mut top: Vec<&str> = all
                .iter()
                .map(|g| g.split('.').next().unwrap_or(g))
                .collect();
            top.dedup();
            top
        } else {
            beside
        };
        CallError(format!(
            "no group `api.{group}`{} Search the docs for the operation you need; groups include {}",
            self.hint(&format!("{group}.{method}"), group, &all),
            listed
                .iter()
                .take(20)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ops: &[(&str, &str, &str)]) -> Names {
        Names::new(ops.iter().copied())
    }

    #[test]
    fn finds_exact_names_and_the_spellings_official_sdks_use() {
        let names = names(&[
            ("secondaryDns.incoming", "get", "GET"),
            ("healthchecks.preview", "create", "POST"),
            ("dns.records", "list", "GET"),
            ("dns.records", "get", "GET"),
            ("dns.records", "edit", "PATCH"),
            ("dns.records", "delete", "DELETE"),
            ("managedHeaders", "get", "GET"),
            ("customers", "del", "DELETE"),
            ("customers", "retrieve", "GET"),
            ("ssl", "analyze", "POST"),
            ("radar.search.global", "get", "GET"),
        ]);
        assert_eq!(names.find("dns.records", "list").unwrap(), 2);
        assert_eq!(names.find("secondaryDNS.incoming", "get").unwrap(), 0);
        assert_eq!(names.find("healthchecks.previews", "create").unwrap(), 1);
        assert_eq!(names.find("dns.records", "update").unwrap(), 4);
        assert_eq!(names.find("dns.records", "del").unwrap(), 5);
        assert_eq!(names.find("managedHeaders", "list").unwrap(), 6);
        assert_eq!(names.find("customers", "delete").unwrap(), 7);
        assert_eq!(names.find("customers", "get").unwrap(), 8);
        assert_eq!(names.find("ssl.analyze", "create").unwrap(), 9);
        assert_eq!(names.find("radar.search", "global").unwrap(), 10);
        // A verb that is not the action's HTTP method finds nothing.
        assert!(names.find("ssl.analyze", "delete").is_err());
    }

    #[test]
    fn a_renamed_operation_is_still_reached_by_the_name_the_spec_gave_it() {
        let mut names = names(&[
            ("subscriptions", "cancel", "DELETE"),
            ("subscriptions", "retrieve", "GET"),
            ("workers.scripts.settings", "get", "GET"),
        ]);
        names.remember_former(
            [
                ("subscriptions.del".to_owned(), 0),
                ("workers.scripts.scriptSettings.get".to_owned(), 2),
            ]
            .into_iter(),
        );
        assert_eq!(names.find("subscriptions", "del").unwrap(), 0);
        assert_eq!(names.find("subscriptions", "cancel").unwrap(), 0);
        assert_eq!(
            names.find("workers.scripts.scriptSettings", "get").unwrap(),
            2
        );
        assert!(names.has_group("workers.scripts.scriptSettings"));
        assert!(names.find("subscriptions", "remove").is_err());
    }

    #[test]
    fn a_write_is_reached_only_by_a_verb_that_fits_it_and_nothing_else() {
        let names = names(&[
            ("zones.settings", "update", "PUT"),
            ("testHelpers.refunds", "expire", "POST"),
            ("account", "retrieve", "GET"),
            ("accounts", "list", "GET"),
        ]);
        // `edit` is a partial update: it never reaches a PUT that replaces the whole.
        assert!(names.find("zones.settings", "edit").is_err());
        // A group called as a method reaches its one method only when that reads.
        assert!(names.find("testHelpers", "refunds").is_err());
        // `account.list` could be `account.retrieve` (its one read) or `accounts.list`.
        let error = names.find("account", "list").unwrap_err().0;
        assert!(
            error.contains("could be any of api.account.retrieve, api.accounts.list"),
            "{error}"
        );
    }

    #[test]
    fn a_name_longer_than_any_the_sdk_has_is_refused_at_once_and_cut_in_the_error() {
        let names = names(&[("customers", "list", "GET")]);
        let huge = "zone".repeat(250_000);
        let error = names.find(&huge, "list").unwrap_err().0;
        // Refused by its length, before any lookup: no suggestion was looked for.
        assert!(!error.to_lowercase().contains("did you mean"), "{error}");
        assert!(error.contains("1000005 bytes long"), "{error}");
        assert!(error.len() < 400, "{}", error.len());
        let error = names.find("customers", &huge).unwrap_err().0;
        assert!(error.contains("longer than any name"), "{error}");
        // A name of an ordinary length still gets its did-you-mean.
        let error = names.find("customers", "lsit").unwrap_err().0;
        assert!(error.contains("list"), "{error}");
    }

    #[test]
    fn an_ambiguous_or_unknown_spelling_is_an_error_naming_what_exists() {
        let names = names(&[
            ("dns.records", "list", "GET"),
            ("dns.records", "get", "GET"),
            ("dns.records.exports", "list", "GET"),
        ]);
        // `retrieve` is `get` (its synonym), but `read` is nothing: never a guess between two.
        assert_eq!(names.find("dns.records", "retrieve").unwrap(), 1);
        let error = names.find("dns.records", "read").unwrap_err().0;
        assert!(
            error.contains("Methods of api.dns.records: get, list"),
            "{error}"
        );
        assert!(error.contains("groups under it: exports"), "{error}");
        let error = names.find("dns.recordz", "list").unwrap_err().0;
        assert!(error.contains("did you mean `dns.records`"), "{error}");
        let error = names.find("zones", "list").unwrap_err().0;
        assert!(error.contains("groups include dns"), "{error}");
    }
}
