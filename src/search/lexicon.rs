//! The everyday words agents use when they search API docs, and what they mean in the words
//! specs use. General API vocabulary only (payments, source hosting, accounts), never a fix
//! for one query: every entry is a way people commonly say something an API names otherwise.

use super::intent::Action;

/// Everyday verbs and the action they ask for.
pub const VERBS: &[(&str, Action)] = &[
    ("list", Action::List),
    ("find", Action::List),
    ("search", Action::List),
    ("browse", Action::List),
    ("enumerate", Action::List),
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
    ("publish", Action::Create),
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
    ("cancel", Action::Delete),
    ("unstar", Action::Delete),
];

/// Name words that are CRUD verbs in spec terms, though no query verb maps to them.
pub const GENERIC_NAME_VERBS: &[&str] = &["check", "replace", "put"];

/// Words that ask about many things when the query has no verb: "which webhooks...".
pub const QUESTION_WORDS: &[&str] = &["which", "what", "who", "all", "every", "any"];

/// Words before the verb of a request: "how do I ...", "please ...".
pub const PREAMBLE: &[&str] = &[
    "how", "do", "does", "i", "we", "can", "to", "please", "want", "need", "should", "the",
];

/// Words that name an organization.
pub const ORG_WORDS: &[&str] = &["org", "orgs", "organization", "organizations", "company"];

/// Words that say the caller means their own account: specs say "authenticated user".
pub const SELF_WORDS: &[&str] = &["me", "my", "mine", "myself"];

/// What people say (one word or a phrase) and the spec's words for it. Phrases are read
/// before the query's verb, so "set up a repo" asks to create; the spec's words are added to
/// the query's terms.
pub const SYNONYMS: &[(&str, &str)] = &[
    // Spellings and abbreviations.
    ("repository", "repo"),
    ("repositories", "repos"),
    ("organization", "org"),
    ("organizations", "orgs"),
    ("pr", "pull request"),
    ("prs", "pull requests"),
    ("webhook", "hook"),
    ("webhooks", "hooks"),
    // Verbs.
    ("remove", "delete"),
    ("fetch", "get"),
    ("retrieve", "get"),
    ("set up", "create"),
    ("sign up", "create"),
    ("spin up", "create"),
    ("look up", "get search"),
    ("take off", "remove"),
    ("stop", "cancel"),
    ("abort", "cancel"),
    ("abandon", "cancel"),
    ("halt", "cancel"),
    ("terminate", "cancel"),
    ("kick", "remove"),
    ("expel", "remove"),
    ("trigger", "dispatch create"),
    ("kick off", "dispatch create"),
    ("bookmark", "star"),
    ("favorite", "star"),
    ("favourite", "star"),
    ("react", "reaction"),
    ("diff", "compare"),
    ("history", "list"),
    // The caller.
    ("logged in", "authenticated"),
    ("signed in", "authenticated"),
    ("current user", "authenticated"),
    // Payments.
    ("money back", "refund"),
    ("reimburse", "refund"),
    ("withdraw", "payout"),
    ("cash out", "payout"),
    ("pay out", "payout"),
    ("chargeback", "dispute"),
    ("chargebacks", "disputes"),
    ("vat", "tax id"),
    ("gst", "tax id"),
    ("seller", "account"),
    ("merchant", "account"),
    // Source hosting.
    ("branch", "ref"),
    ("emoji", "reaction"),
    ("heart", "reaction"),
    ("thumbs up", "reaction"),
    ("credentials", "secret"),
    ("leaked", "secret scanning"),
    ("quota", "rate limit"),
    ("requests left", "rate limit"),
];
