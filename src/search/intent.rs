//! What a query asks for, read once per search: the action (list, get, create, update or
//! delete), the words it uses for API nouns and verbs, and the scope it names (an
//! organization, an enterprise, the caller's own account). Agents ask with everyday words
//! ("remove the webhook", "my repositories", "which teams..."); specs say DELETE, `repos`,
//! `for-authenticated-user` and GET on a collection.

use std::collections::HashSet;

use super::lexicon::{
    GENERIC_NAME_VERBS, ORG_WORDS, PREAMBLE, QUESTION_WORDS, SELF_WORDS, SYNONYMS, VERBS,
};
use super::tokenize;
use crate::spec::words;

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

/// A scope an operation can be limited to, which its name says ("listForOrg").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// An organization.
    Org,
    /// An enterprise.
    Enterprise,
    /// The caller's own account.
    Own,
    /// Test helpers, not the live API.
    Test,
}

/// The words a query is read with: the verbs the API names operations by, and what people
/// say (words or phrases) with the API's words for it, the provider's own before the built-in
/// ones.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    /// Analyzed verbs of the API ("lock", "request").
    pub api_verbs: HashSet<String>,
    /// Provider synonyms, lower-case: (what people say, the API's words).
    pub synonyms: Vec<(String, String)>,
}

impl Vocabulary {
    /// The API's words for `said`, if the provider or the built-in lexicon knows it.
    fn meaning(&self, said: &str) -> Option<String> {
        self.synonyms
            .iter()
            .find(|(w, _)| w == said)
            .map(|(_, m)| m.clone())
            .or_else(|| {
                SYNONYMS
                    .iter()
                    .find(|(w, _)| *w == said)
                    .map(|(_, m)| (*m).to_owned())
            })
    }

    /// The most words a known phrase has.
    fn longest_phrase(&self) -> usize {
        self.synonyms
            .iter()
            .map(|(w, _)| w.as_str())
            .chain(SYNONYMS.iter().map(|(w, _)| *w))
            .map(|w| w.split(' ').count())
            .max()
            .unwrap_or(1)
    }
}

/// What a query asks for.
#[derive(Debug, Clone)]
pub struct Intent {
    /// The action asked for, if the query says or implies one.
    pub action: Option<Action>,
    /// The query's analyzed terms, and those of the spec's words for what it says.
    pub terms: Vec<String>,
    /// Scopes the query names.
    pub scopes: Vec<Scope>,
    /// The query's leading verb and its synonyms, analyzed ("request reviewers" -> request).
    pub verbs: Vec<String>,
}

impl Intent {
    /// Reads `query` with `vocabulary`: its API verbs make "request reviewers" a request, not
    /// a list; its synonyms add the API's words for what the query says.
    pub fn read(query: &str, vocabulary: &Vocabulary) -> Self {
        let plain = plain_words(query);
        let said = rewrite(&plain, vocabulary);
        let meaning = said
            .iter()
            .filter_map(|word| word.meaning.as_deref())
            .collect::<Vec<_>>()
            .join(" ");
        let mut terms = tokenize::terms(query);
        for term in tokenize::terms(&meaning) {
            if !terms.contains(&term) {
                terms.push(term);
            }
        }
        let scopes = scopes_named(&plain, &terms);
        let verbs = leading_verb(&said)
            .map(|word| {
                let meaning = word.meaning.as_deref().unwrap_or_default();
                tokenize::terms(&format!("{} {meaning}", word.text))
            })
            .unwrap_or_default();
        Self {
            action: action_of(&said, &vocabulary.api_verbs),
            terms,
            scopes,
            verbs,
        }
    }

    /// Whether the query's leading verb, itself or through a synonym, is `verb` (analyzed,
    /// as [`special_verb`] gives it).
    pub fn asks_to(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// A text's words, lower-case, as queries and synonyms are matched.
pub fn plain_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The scopes a query names: "in our org", "my repositories", "the authenticated user".
fn scopes_named(plain: &[String], terms: &[String]) -> Vec<Scope> {
    let says = |test: &dyn Fn(&str) -> bool| plain.iter().any(|w| test(w));
    let mut scopes = Vec::new();
    if says(&|w| ORG_WORDS.contains(&w)) {
        scopes.push(Scope::Org);
    }
    if says(&|w| w.starts_with("enterprise")) {
        scopes.push(Scope::Enterprise);
    }
    if says(&|w| SELF_WORDS.contains(&w)) || terms.iter().any(|t| t == "authent") {
        scopes.push(Scope::Own);
    }
    if says(&|w| w.starts_with("test")) {
        scopes.push(Scope::Test);
    }
    scopes
}

/// A word or phrase of the query, and the spec's words for it if the lexicon knows them.
struct Said {
    text: String,
    meaning: Option<String>,
}

/// The query as words and known phrases, longest phrase first: "set up a repo" is
/// [set up (create), a, repo].
fn rewrite(plain: &[String], vocabulary: &Vocabulary) -> Vec<Said> {
    let longest = vocabulary.longest_phrase();
    let mut out = Vec::new();
    let mut at = 0;
    while at < plain.len() {
        let phrase = (1..=longest).rev().find_map(|n| {
            let words = plain.get(at..at + n)?.join(" ");
            let meaning = vocabulary.meaning(&words)?;
            Some((n, words, meaning))
        });
        let (n, text, meaning) = match phrase {
            Some((n, text, meaning)) => (n, text, Some(meaning)),
            None => (1, plain[at].clone(), None),
        };
        out.push(Said { text, meaning });
        at += n;
    }
    out
}

/// The query's first word after any preamble, the verb of a request ("lock an issue").
fn leading_verb(said: &[Said]) -> Option<&Said> {
    said.iter().find(|w| !PREAMBLE.contains(&w.text.as_str()))
}

/// The action of the query's first verb (a phrase's meaning counts: "set up" creates);
/// without one, a question about many things or a plural noun asks for a list.
fn action_of(said: &[Said], api_verbs: &HashSet<String>) -> Option<Action> {
    let verb_of = |word: &str| VERBS.iter().find(|(v, _)| *v == word).map(|(_, a)| *a);
    if let Some(leading) = leading_verb(said)
        && verb_of(&leading.text).is_none()
        && tokenize::terms(&leading.text)
            .first()
            .is_some_and(|stem| api_verbs.contains(stem))
    {
        return None;
    }
    for (i, word) in said.iter().enumerate() {
        let meaning_verb = || {
            word.meaning
                .as_deref()
                .and_then(|m| m.split(' ').find_map(verb_of))
        };
        let Some(action) = verb_of(&word.text).or_else(meaning_verb) else {
            continue;
        };
        // "open pull requests" describes; "open an issue" acts.
        if word.text == "open"
            && !said
                .get(i + 1)
                .is_some_and(|n| n.text == "a" || n.text == "an")
        {
            continue;
        }
        return Some(action);
    }
    let asks_many = said
        .iter()
        .any(|w| QUESTION_WORDS.contains(&w.text.as_str()))
        || said.iter().any(|w| is_plural(&w.text));
    asks_many.then_some(Action::List)
}

/// A rough English plural: "webhooks", "branches", but not "status" or "access".
fn is_plural(word: &str) -> bool {
    word.len() > 3
        && word.ends_with('s')
        && !["ss", "us", "is"].iter().any(|end| word.ends_with(end))
}

/// What an operation does, from its method, path and SDK name.
pub fn of_operation(name: &str, method: &str, path: &str) -> Action {
    let name = words(name);
    if let Some(first) = name.first()
        && let Some((_, action)) = VERBS.iter().find(|(verb, _)| verb == first)
    {
        return *action;
    }
    let item = path.trim_end_matches('/').ends_with('}');
    match (method, item) {
        ("GET", false) => Action::List,
        ("GET", true) => Action::Get,
        ("POST", false) | ("PUT", false) => Action::Create,
        ("DELETE", _) => Action::Delete,
        _ => Action::Update,
    }
}

/// The verb an operation is named by, analyzed, when it is not one of the everyday CRUD
/// verbs ("lock", "captur", "star"): such operations are asked for by that verb. The name's
/// first word counts only for an operation that changes something and when its path says it
/// too (`POST .../issues/{n}/lock`), so nouns leading a name (`secretsFind`) do not.
pub fn special_verb(name: &str, method: &str, path: &str) -> Option<String> {
    let first = words(name).into_iter().next()?;
    let generic = VERBS.iter().any(|(verb, _)| *verb == first)
        || GENERIC_NAME_VERBS.contains(&first.as_str());
    if generic || method == "GET" {
        return None;
    }
    let stem = tokenize::terms(&first).pop()?;
    tokenize::terms(path).contains(&stem).then_some(stem)
}

/// The scopes an operation's group and name limit it to.
pub fn scopes_of(group: &str, name: &str) -> Vec<Scope> {
    let name: Vec<String> = words(group).into_iter().chain(words(name)).collect();
    let has = |w: &str| name.iter().any(|n| n == w);
    let mut scopes = Vec::new();
    if has("org") || has("orgs") || has("organization") {
        scopes.push(Scope::Org);
    }
    if has("enterprise") || has("enterprises") {
        scopes.push(Scope::Enterprise);
    }
    if has("authenticated") {
        scopes.push(Scope::Own);
    }
    if has("test") {
        scopes.push(Scope::Test);
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(query: &str) -> Intent {
        let vocabulary = Vocabulary {
            api_verbs: HashSet::from(["request".to_owned()]),
            synonyms: vec![
                ("zorp".into(), "refund".into()),
                ("abort".into(), "halt".into()),
            ],
        };
        Intent::read(query, &vocabulary)
    }

    fn action(query: &str) -> Option<Action> {
        read(query).action
    }

    #[test]
    fn queries_say_or_imply_what_they_want_done() {
        assert_eq!(action("remove a webhook"), Some(Action::Delete));
        assert_eq!(action("Open a new issue"), Some(Action::Create));
        assert_eq!(action("which webhooks are configured"), Some(Action::List));
        assert_eq!(action("open pull requests"), Some(Action::List));
        assert_eq!(action("CI status of a commit"), None);
        assert_eq!(action("set up a milestone"), Some(Action::Create));
        assert_eq!(action("stop a workflow run"), Some(Action::Delete));
    }

    #[test]
    fn synonyms_and_scopes_are_read() {
        let intent = read("stop a workflow run in my org");
        assert!(intent.asks_to("cancel"));
        assert!(!read("create a pull request").asks_to("request"));
        assert_eq!(read("request reviewers for a pull request").action, None);
        assert!(intent.scopes.contains(&Scope::Org));
        assert!(intent.scopes.contains(&Scope::Own));
        assert!(!intent.scopes.contains(&Scope::Enterprise));
        // The provider's synonyms come first, and add words the lexicon does not know.
        assert!(read("zorp an order").terms.contains(&"refund".to_owned()));
        assert!(read("abort a run").asks_to("halt"));
        assert!(!read("abort a run").asks_to("cancel"));
    }

    #[test]
    fn operations_say_what_they_do() {
        assert_eq!(
            of_operation("listForOrg", "GET", "/orgs/{org}/repos"),
            Action::List
        );
        let lock = special_verb("lock", "PUT", "/repos/{owner}/{repo}/issues/{n}/lock");
        assert_eq!(lock, Some("lock".into()));
        assert_eq!(
            special_verb("secretsFind", "GET", "/v1/apps/secrets/find"),
            None
        );
        assert_eq!(
            special_verb("createForOrg", "POST", "/orgs/{org}/repos"),
            None
        );
        assert_eq!(
            scopes_of("repos", "listForAuthenticatedUser"),
            vec![Scope::Own]
        );
        assert_eq!(scopes_of("enterpriseTeams", "add"), vec![Scope::Enterprise]);
    }
}
