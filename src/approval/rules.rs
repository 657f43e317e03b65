//! The approval rules: which rule, `allow`, `approve` or `deny`, applies to a request, and
//! why. Built once from the spec, the provider file's `[policy]` and the command line; asked
//! once per request, in egress, before the request leaves.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Deserialize;
use url::Url;

pub use crate::egress::Rule;
use crate::sdk::did_you_mean;
use crate::spec::Api;

/// The `[policy]` table of a provider file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// The rule for writes (POST, PUT, PATCH, DELETE) that no other rule names; default
    /// `approve`.
    pub writes: Option<Rule>,
    /// Rules by SDK name (`customers.create`) or glob (`refunds.*`, `*.delete`); the exact
    /// name wins, then the longest glob.
    #[serde(default)]
    pub operations: BTreeMap<String, Rule>,
    /// The header the provider takes idempotency keys in (Stripe: `Idempotency-Key`); found
    /// in the spec when an operation declares it, else none.
    pub idempotency_header: Option<String>,
}

/// What the command line puts over the provider file.
#[derive(Debug, Default, Clone, Copy)]
pub struct PolicyOverrides {
    /// `--read-only`: every write is denied, whatever else says.
    pub read_only: bool,
    /// `--writes MODE`: the rule for writes no other rule names.
    pub writes: Option<Rule>,
}

/// A rule found for a request, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// The spec operation the request calls (`customers.create`), if one matched.
    pub operation: Option<String>,
    /// Its index in the spec's operations.
    pub index: Option<usize>,
    /// The rule.
    pub rule: Rule,
    /// Where the rule comes from, for the human and the log: `--read-only`,
    /// `[policy.operations] "refunds.*"`, `x-sdkbox-policy`, `writes (default)`, ...
    pub because: String,
}

/// One path template, split for matching.
struct Route {
    method: String,
    segments: Vec<Option<String>>,
    operation: usize,
    /// The server its operation is served from, when not the base URL.
    server: Option<Url>,
}

/// The rules of one provider.
pub struct Rules {
    api: Option<Arc<Api>>,
    /// The rule of each operation, by index.
    of: Vec<(Rule, String)>,
    routes: Vec<Route>,
    base: Url,
    /// What a write that matches no operation gets: the strictest rule any write has.
    unmatched_write: (Rule, String),
    /// What a read that matches no operation gets: the strictest rule any read has, so that
    /// a read under a rule cannot dodge it by spelling its path another way.
    unmatched_read: (Rule, String),
    /// Operations by SDK name, for search hits.
    by_name: HashMap<String, usize>,
    /// The header the provider takes idempotency keys in, if it takes them: for every write
    /// (`[policy] idempotency_header`), or for the operations that declare it (by index).
    idempotency_header: Option<String>,
    keyed_operations: Vec<usize>,
}

impl Rules {
    /// Builds the rules; a rule naming no operation of the spec, or a spec extension that
    /// is not a rule, is an error that says what would fit.
    pub fn build(
        api: Option<Arc<Api>>,
        base: Url,
        file: &PolicyFile,
        overrides: PolicyOverrides,
    ) -> Result<Self, String> {
        let writes = overrides.writes.or(file.writes).unwrap_or(Rule::Approve);
        let writes_because = match (overrides.writes, file.writes) {
            (Some(_), _) => "--writes",
            (None, Some(_)) => "[policy] writes",
            (None, None) => "writes need approval by default",
        };
        let operations = api.as_deref().map_or(&[][..], |api| &api.operations[..]);
        let names: Vec<String> = operations
            .iter()
            .map(|op| format!("{}.{}", op.group, op.name))
            .collect();
        // A rule may name an operation by a name `[names]` renamed away (`subscriptions.del`
        // for `subscriptions.cancel`): it still holds, but only to make the operation's rule
        // stricter, so that renaming never loosens a rule (a glob of its former group,
        // `storage.*` for `kv.namespaces.delete`, never allows what its own name does not),
        // and never over a rule naming the operation exactly as it is now.
        let every_name = |index: usize| {
            std::iter::once(names[index].as_str())
                .chain(operations[index].former.iter().map(String::as_str))
        };
        for pattern in file.operations.keys() {
            if !(0..operations.len()).any(|i| every_name(i).any(|name| glob(pattern, name))) {
                let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
                return Err(format!(
                    "[policy.operations] \"{pattern}\" names no operation of the spec{} \
                     Use an SDK name (`customers.create`) or a glob (`refunds.*`).",
                    did_you_mean(pattern, &candidates)
                ));
            }
        }
        let mut of = Vec::with_capacity(operations.len());
        // Rules that decided some operation's rule, by a name it has now or had.
        let mut deciding: std::collections::HashSet<String> = std::collections::HashSet::new();
        for (op, name) in operations.iter().zip(&names) {
            let write = crate::egress::is_write(&op.method);
            // The rule its own name gets; a stricter one a former name gets, unless a rule
            // names it exactly.
            let former = op
                .former
                .iter()
                .filter(|_| !file.operations.contains_key(name))
                .filter_map(|name| best_rule(&file.operations, name))
                .max_by_key(|(_, rule)| *rule);
            if let Some((pattern, _)) = best_rule(&file.operations, name) {
                deciding.insert(pattern.to_owned());
            }
            let rule = if overrides.read_only && write {
                (Rule::Deny, "--read-only".to_owned())
            } else if let Some((pattern, rule)) = best_rule(&file.operations, name) {
                (rule, format!("[policy.operations] \"{pattern}\""))
            } else if let Some(text) = &op.policy {
                let rule = text.parse::<Rule>().map_err(|e| {
                    format!("x-sdkbox-policy on {} {} ({name}): {e}", op.method, op.path)
                })?;
                (rule, "the spec's x-sdkbox-policy".to_owned())
            } else if write {
                (writes, writes_because.to_owned())
            } else {
                (Rule::Allow, "reads are allowed".to_owned())
            };
            let rule = match former {
                Some((pattern, stricter)) if stricter > rule.0 => {
                    deciding.insert(pattern.to_owned());
                    (
                        stricter,
                        format!("[policy.operations] \"{pattern}\" (a name it had before [names])"),
                    )
                }
                _ => rule,
            };
            of.push(rule);
        }
        // A rule that names operations only by former names and makes none stricter would
        // be read as a rule and do nothing: said at start, with their names now.
        for pattern in file.operations.keys() {
            let now = names.iter().any(|name| glob(pattern, name));
            if !now && !deciding.contains(pattern) {
                let renamed: Vec<&str> = operations
                    .iter()
                    .zip(&names)
                    .filter(|(op, _)| op.former.iter().any(|f| glob(pattern, f)))
                    .map(|(_, name)| name.as_str())
                    .take(5)
                    .collect();
                return Err(format!(
                    "[policy.operations] \"{pattern}\" names only operations [names] renamed \
                     (now {}): a rule on a former name only makes a rule stricter, and this one \
                     makes none stricter. Name them as they are now.",
                    renamed.join(", ")
                ));
            }
        }
        let unmatched_write = if overrides.read_only {
            (Rule::Deny, "--read-only".to_owned())
        } else {
            let strictest = operations
                .iter()
                .zip(&of)
                .filter(|(op, _)| crate::egress::is_write(&op.method))
                .map(|(_, (rule, _))| *rule)
                .max()
                .unwrap_or(writes)
                .max(writes);
            let because = if strictest == writes {
                writes_because.to_owned()
            } else {
                "a write that matches no operation of the spec gets the strictest rule any write \
                 has"
                .to_owned()
            };
            (strictest, because)
        };
        let strictest_read = operations
            .iter()
            .zip(&of)
            .filter(|(op, _)| !crate::egress::is_write(&op.method))
            .map(|(_, (rule, _))| *rule)
            .max()
            .unwrap_or(Rule::Allow);
        let unmatched_read = match strictest_read {
            Rule::Allow => (Rule::Allow, "reads are allowed".to_owned()),
            rule => (
                rule,
                "a read that matches no operation of the spec gets the strictest rule any read has"
                    .to_owned(),
            ),
        };
        let routes = operations
            .iter()
            .enumerate()
            .map(|(operation, op)| Route {
                method: op.method.clone(),
                segments: segments(&op.path)
                    .map(|s| (!s.contains('{')).then(|| s.to_owned()))
                    .collect(),
                operation,
                server: op.server.as_deref().and_then(|s| Url::parse(s).ok()),
            })
            .collect();
        let declared = |op: &crate::spec::Operation| {
            op.params
                .iter()
                .find(|p| {
                    p.location == crate::spec::Location::Header
                        && p.name.eq_ignore_ascii_case("idempotency-key")
                })
                .map(|p| p.name.clone())
        };
        let keyed_operations: Vec<usize> = operations
            .iter()
            .enumerate()
            .filter(|(_, op)| declared(op).is_some())
            .map(|(i, _)| i)
            .collect();
        let idempotency_header = file
            .idempotency_header
            .clone()
            .or_else(|| operations.iter().find_map(declared));
        if let Some(header) = &idempotency_header
            && reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err()
        {
            return Err(format!(
                "[policy] idempotency_header \"{header}\" is not a header name"
            ));
        }
        Ok(Self {
            api,
            of,
            routes,
            base,
            unmatched_write,
            unmatched_read,
            keyed_operations: match file.idempotency_header {
                Some(_) => Vec::new(),
                None => keyed_operations,
            },
            idempotency_header,
            by_name: names
                .into_iter()
                .enumerate()
                .map(|(i, name)| (name, i))
                .collect(),
        })
    }

    /// Rules with no spec: reads allowed, writes under `overrides` or approved.
    pub fn without_spec(base: Url, overrides: PolicyOverrides) -> Self {
        let unmatched_write = match (overrides.read_only, overrides.writes) {
            (true, _) => (Rule::Deny, "--read-only"),
            (false, Some(rule)) => (rule, "--writes"),
            (false, None) => (Rule::Approve, "writes need approval by default"),
        };
        Self {
            api: None,
            of: Vec::new(),
            routes: Vec::new(),
            base,
            unmatched_write: (unmatched_write.0, unmatched_write.1.to_owned()),
            unmatched_read: (Rule::Allow, "reads are allowed".to_owned()),
            by_name: HashMap::new(),
            idempotency_header: None,
            keyed_operations: Vec::new(),
        }
    }

    /// The header the provider takes idempotency keys in for a write to the operation with
    /// this index (`None`: one that matches no operation), if it takes them there: every
    /// write when the provider file says so; else the operations whose spec declares it.
    pub fn idempotency_header(&self, operation: Option<usize>) -> Option<&str> {
        let header = self.idempotency_header.as_deref()?;
        match self.keyed_operations.is_empty() {
            true => Some(header),
            false => operation
                .filter(|i| self.keyed_operations.contains(i))
                .map(|_| header),
        }
    }

    /// The rule for a request, from what is sent: its method and final URL matched to the
    /// spec's path templates. An SDK call is classified the same way: what it names does not
    /// count, only where it goes. A path the provider's framework could read in more than one
    /// way (percent-encoded letters, another case, `;` parameters, `\\` for `/`, encoded dot
    /// segments) is matched in each reading, and the strictest rule among them applies.
    pub fn classify(&self, method: &str, url: &Url) -> Classified {
        let mut strictest: Option<Option<usize>> = None;
        for reading in readings(url.path()) {
            let matched = self.route(method, url, &reading);
            // Where the readings disagree, the strictest of them decides.
            let stricter = match strictest {
                None => true,
                Some(kept) => self.rule_of(method, matched) > self.rule_of(method, kept),
            };
            if stricter {
                strictest = Some(matched);
            }
        }
        let index = strictest.flatten();
        match index {
            Some(i) => {
                let (rule, because) = &self.of[i];
                Classified {
                    operation: self.name(i),
                    index: Some(i),
                    rule: *rule,
                    because: because.clone(),
                }
            }
            None => {
                let (rule, because) = self.unmatched(method);
                Classified {
                    operation: None,
                    index: None,
                    rule: *rule,
                    because: because.clone(),
                }
            }
        }
    }

    /// The rule a match (or no match) gives a request with `method`.
    fn rule_of(&self, method: &str, matched: Option<usize>) -> Rule {
        match matched {
            Some(i) => self.of[i].0,
            None => self.unmatched(method).0,
        }
    }

    /// The rule of a request that matches no operation: the strictest of its kind.
    fn unmatched(&self, method: &str) -> &(Rule, String) {
        if crate::egress::is_write(method) {
            &self.unmatched_write
        } else {
            &self.unmatched_read
        }
    }

    /// The rule of the operation with this SDK name (`customers.create`), for search hits.
    pub fn of_name(&self, name: &str) -> Option<Rule> {
        let index = self.by_name.get(name)?;
        self.of.get(*index).map(|(rule, _)| *rule)
    }

    /// The operation at `index` of the spec, if there is a spec.
    pub fn operation(&self, index: usize) -> Option<&crate::spec::Operation> {
        self.api.as_deref()?.operations.get(index)
    }

    fn name(&self, index: usize) -> Option<String> {
        let op = self.operation(index)?;
        Some(format!("{}.{}", op.group, op.name))
    }

    /// The operation whose template matches one reading of the request's path: same origin
    /// as the base URL, under its path, same method, each literal segment equal (in any case
    /// when the reading folds case); a segment that would still reach another path
    /// (`%2F`, `%5C`, dots) matches no template. Among matches, the one with the most literal
    /// segments (`/customers/search` over `/customers/{id}`); among templates as specific as
    /// each other (`/a/{x}` and `/a/{y}`), the one with the strictest rule.
    fn route(&self, method: &str, url: &Url, reading: &Reading) -> Option<usize> {
        let same = |a: &str, b: &str| match reading.fold_case {
            true => a == b || folded(a) == folded(b),
            false => a == b,
        };
        // The segments after a server's own path (the base URL's, or an operation's server),
        // compared one by one in the reading's case; `None` off that server.
        let under = |server: &Url| -> Option<Vec<&str>> {
            if url.origin() != server.origin() {
                return None;
            }
            let base: Vec<&str> = segments(server.path()).collect();
            let mut all = segments(&reading.path);
            let prefix: Vec<&str> = all.by_ref().take(base.len()).collect();
            let base_ok = prefix.len() == base.len()
                && prefix.iter().zip(&base).all(|(got, want)| same(want, got));
            if !base_ok {
                return None;
            }
            let given: Vec<&str> = all.collect();
            let suspicious = |s: &str| {
                let lower = s.to_ascii_lowercase();
                lower.contains("%2f") || lower.contains("%5c") || lower.contains("%2e") || s == ".."
            };
            (!given.iter().any(|s| suspicious(s))).then_some(given)
        };
        let on_base = under(&self.base);
        self.routes
            .iter()
            .filter_map(|route| {
                // HEAD runs the GET handler in most frameworks.
                let same = route.method == method || (method == "HEAD" && route.method == "GET");
                let given = match &route.server {
                    None => on_base.clone()?,
                    Some(server) => under(server)?,
                };
                (same && route.segments.len() == given.len()).then_some((route, given))
            })
            .filter(|(route, given)| {
                route
                    .segments
                    .iter()
                    .zip(given)
                    .all(|(want, got)| match want {
                        Some(literal) => same(literal, got),
                        None => !got.is_empty(),
                    })
            })
            .max_by_key(|(route, _)| {
                let literal = route.segments.iter().filter(|s| s.is_some()).count();
                (literal, self.of[route.operation].0)
            })
            .map(|(route, _)| route.operation)
    }
}

/// One way a framework could read a request's path.
struct Reading {
    path: String,
    fold_case: bool,
}

/// The ways a provider's framework could read `path`: as sent; percent-decoded once or twice
/// (`\\` as `/`, dot segments resolved); that without `;` parameters, and without a format
/// suffix on the last segment (`close.json`, as Rails and Spring route it); and those in any
/// case, as Unicode folds it (`ſ` is `s`).
fn readings(path: &str) -> Vec<Reading> {
    let decoded = |text: &str| resolve_dots(&percent_decoded(text).replace('\\', "/"));
    let once = decoded(path);
    let twice = decoded(&percent_decoded(path));
    let mut paths = vec![path.to_owned(), once.clone()];
    for decoded in [once, twice] {
        let plain: String = decoded
            .split('/')
            .map(|segment| segment.split(';').next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("/");
        let unsuffixed = match plain.rsplit_once('/') {
            Some((head, last)) => match last.rsplit_once('.') {
                Some((name, _)) if !name.is_empty() => format!("{head}/{name}"),
                _ => plain.clone(),
            },
            None => plain.clone(),
        };
        paths.extend([plain, unsuffixed]);
    }
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .flat_map(|path| {
            [
                Reading {
                    path: path.clone(),
                    fold_case: false,
                },
                Reading {
                    path,
                    fold_case: true,
                },
            ]
        })
        .collect()
}

/// `text` as Unicode case-folds it for a case-insensitive comparison.
fn folded(text: &str) -> String {
    text.chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// `text` with `%XX` sequences decoded once (invalid UTF-8 replaced).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A path with `.` and `..` segments resolved, as a server would before routing.
fn resolve_dots(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "." => {}
            ".." => {
                kept.pop();
            }
            other => kept.push(other),
        }
    }
    let joined = kept.join("/");
    match joined.starts_with('/') {
        true => joined,
        false => format!("/{joined}"),
    }
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

/// The rule of the exact name, else of the longest matching glob.
fn best_rule<'a>(rules: &'a BTreeMap<String, Rule>, name: &str) -> Option<(&'a str, Rule)> {
    if let Some(rule) = rules.get(name) {
        return Some((name_of(rules, name), *rule));
    }
    rules
        .iter()
        .filter(|(pattern, _)| pattern.contains('*') && glob(pattern, name))
        .max_by_key(|(pattern, _)| pattern.replace('*', "").len())
        .map(|(pattern, rule)| (pattern.as_str(), *rule))
}

fn name_of<'a>(rules: &'a BTreeMap<String, Rule>, name: &str) -> &'a str {
    rules
        .get_key_value(name)
        .map_or("", |(key, _)| key.as_str())
}

/// Whether `name` matches `pattern`, where `*` stands for any characters.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> Arc<Api> {
        let spec = crate::spec::parse("demo", crate::demo::SPEC).unwrap();
        Arc::new(spec.api)
    }

    fn rules(file: &str, overrides: PolicyOverrides) -> Result<Rules, String> {
        let file: PolicyFile = toml::from_str(file).unwrap();
        let base = Url::parse("http://127.0.0.1:9/v1").unwrap();
        Rules::build(Some(api()), base, &file, overrides)
    }

    fn url(path: &str) -> Url {
        Url::parse(&format!("http://127.0.0.1:9/v1{path}")).unwrap()
    }

    /// An operation served from a server of its own (Stripe's file uploads) is classified
    /// there, under that server's path, and nowhere else; the SDK knows the server.
    #[test]
    fn an_operation_on_a_server_of_its_own_is_classified_there() {
        let spec = r#"
openapi: 3.0.0
info: { title: t, version: "1" }
servers: [{ url: "http://127.0.0.1:9/v1" }]
paths:
  /files:
    post:
      operationId: files.create
      servers: [{ url: "http://127.0.0.1:8/v1" }]
      x-sdkbox-policy: deny
      requestBody: { content: { multipart/form-data: { schema: { type: object, properties: { file: { type: string, format: binary } } } } } }
      responses: { "200": { description: ok } }
"#;
        let api = Arc::new(crate::spec::parse("t", spec).unwrap().api);
        let file: PolicyFile = toml::from_str("writes = \"allow\"").unwrap();
        let base = Url::parse("http://127.0.0.1:9/v1").unwrap();
        let rules =
            Rules::build(Some(api.clone()), base, &file, PolicyOverrides::default()).unwrap();
        let on = |url: &str| rules.classify("POST", &Url::parse(url).unwrap());
        let there = on("http://127.0.0.1:8/v1/files");
        assert_eq!(
            (there.rule, there.operation.as_deref()),
            (Rule::Deny, Some("files.create"))
        );
        assert_eq!(on("http://127.0.0.1:8/v1/%66iles").rule, Rule::Deny);
        // Not on the base URL, nor on the server under another path.
        assert_eq!(on("http://127.0.0.1:9/v1/files").operation, None);
        assert_eq!(on("http://127.0.0.1:8/files").operation, None);
        let sdk = crate::sdk::Sdk::new(api);
        assert_eq!(sdk.server_of("files.create"), Some("http://127.0.0.1:8/v1"));
    }

    #[test]
    fn globs_match_like_shell_stars() {
        assert!(glob("refunds.*", "refunds.create"));
        assert!(glob("*.delete", "customers.delete"));
        assert!(glob("*", "x.y"));
        assert!(glob("c*s.l*t", "customers.list"));
        assert!(!glob("refunds.*", "customers.create"));
        assert!(!glob("a*a", "a"));
    }

    #[test]
    fn a_rule_naming_an_operation_by_a_name_renamed_away_still_holds() {
        let renamed = || {
            let mut spec = crate::spec::parse("demo", crate::demo::SPEC).unwrap();
            let names = [("customers.delete", "customers.remove")]
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .into();
            crate::spec::apply_names(&mut spec.api.operations, &names).unwrap();
            Arc::new(spec.api)
        };
        let build = |file: &str| {
            let file: PolicyFile = toml::from_str(file).unwrap();
            let base = Url::parse("http://127.0.0.1:9/v1").unwrap();
            Rules::build(Some(renamed()), base, &file, PolicyOverrides::default())
        };
        let delete = |rules: Rules| rules.classify("DELETE", &url("/customers/cus_1")).rule;
        let file = "writes = \"allow\"\n[operations]\n\"*.delete\" = \"deny\"";
        assert_eq!(delete(build(file).unwrap()), Rule::Deny);
        let file = "writes = \"allow\"\n[operations]\n\"customers.delete\" = \"deny\"";
        assert_eq!(delete(build(file).unwrap()), Rule::Deny);
        // Only ever stricter: a glob of its own name denying wins over a former name's allow.
        let file =
            "writes = \"deny\"\n[operations]\n\"customers.*\" = \"deny\"\n\"*.delete\" = \"allow\"";
        let error = build(file).err().unwrap();
        assert!(
            error.contains(
                "\"*.delete\" names only operations [names] renamed (now customers.remove)"
            ),
            "{error}"
        );
        // A rule naming it exactly as it is now wins over any rule of a former name.
        let file = "[operations]\n\"*.delete\" = \"deny\"\n\"customers.remove\" = \"allow\"";
        let error = build(file).err().unwrap();
        assert!(error.contains("makes none stricter"), "{error}");
        let file = "[operations]\n\"customers.*\" = \"deny\"\n\"customers.remove\" = \"allow\"";
        assert_eq!(delete(build(file).unwrap()), Rule::Allow);
        // A rule that could only loosen, by a former name, is refused at start.
        let file = "[operations]\n\"customers.delete\" = \"allow\"";
        let error = build(file).err().unwrap();
        assert!(error.contains("Name them as they are now"), "{error}");
    }

    #[test]
    fn reads_are_allowed_and_writes_approved_by_default() {
        let rules = rules("", PolicyOverrides::default()).unwrap();
        let read = rules.classify("GET", &url("/customers"));
        assert_eq!(read.rule, Rule::Allow);
        assert_eq!(read.operation.as_deref(), Some("customers.list"));
        let write = rules.classify("POST", &url("/customers"));
        assert_eq!(write.rule, Rule::Approve);
        assert_eq!(write.operation.as_deref(), Some("customers.create"));
    }

    #[test]
    fn the_exact_name_wins_then_the_longest_glob_and_read_only_beats_all() {
        let file = r#"
            writes = "allow"
            [operations]
            "*" = "approve"
            "customers.*" = "deny"
            "customers.create" = "allow"
        "#;
        let rules = rules(file, PolicyOverrides::default()).unwrap();
        let create = rules.classify("POST", &url("/customers"));
        assert_eq!(
            (create.rule, create.because.as_str()),
            (Rule::Allow, "[policy.operations] \"customers.create\"")
        );
        assert_eq!(rules.classify("GET", &url("/customers")).rule, Rule::Deny);
        assert_eq!(rules.classify("GET", &url("/orders")).rule, Rule::Approve);
        let read_only = PolicyOverrides {
            read_only: true,
            writes: None,
        };
        let rules = super::tests::rules(file, read_only).unwrap();
        assert_eq!(rules.classify("POST", &url("/customers")).rule, Rule::Deny);
    }

    #[test]
    fn a_write_that_matches_nothing_gets_the_strictest_write_rule() {
        let file = "writes = \"allow\"\n[operations]\n\"customers.create\" = \"deny\"\n";
        let rules = rules(file, PolicyOverrides::default()).unwrap();
        for path in [
            "/Customers",
            "/customers/",
            "/customers%2F..%2Fx/y",
            "/nowhere",
        ] {
            let found = rules.classify("POST", &url(path));
            if found.operation.is_none() {
                assert_eq!(found.rule, Rule::Deny, "{path}");
            }
        }
        let other = Url::parse("http://127.0.0.1:10/v1/customers").unwrap();
        assert_eq!(rules.classify("POST", &other).rule, Rule::Deny);
    }

    #[test]
    fn a_read_under_a_rule_cannot_dodge_it_by_spelling_or_by_head() {
        let file = "[operations]\n\"refunds.*\" = \"deny\"\n";
        let rules = rules(file, PolicyOverrides::default()).unwrap();
        for path in ["/refunds", "/%72efunds", "/Refunds", "/refunds;x"] {
            assert_eq!(rules.classify("GET", &url(path)).rule, Rule::Deny, "{path}");
        }
        assert_eq!(rules.classify("HEAD", &url("/refunds")).rule, Rule::Deny);
        let open = super::tests::rules("", PolicyOverrides::default()).unwrap();
        assert_eq!(open.classify("GET", &url("/nowhere")).rule, Rule::Allow);
    }

    #[test]
    fn unknown_operations_and_bad_rules_are_errors_that_help() {
        let error = rules(
            "[operations]\n\"customer.create\" = \"deny\"\n",
            PolicyOverrides::default(),
        )
        .err()
        .unwrap();
        assert!(error.contains("did you mean `customers.create`"), "{error}");
        let bad: Result<PolicyFile, _> = toml::from_str("writes = \"maybe\"");
        assert!(bad.is_err());
    }

    #[test]
    fn a_path_read_another_way_meets_the_strictest_rule_it_could_reach() {
        // `accounts.close` (a literal segment, denied) beside `accounts.update` (`{id}`,
        // allowed): a spelling of `close` that only the template matches as written is still
        // denied, as the provider's framework may read it as `close`.
        let spec = r#"
openapi: 3.0.0
info: { title: t, version: "1" }
paths:
  /accounts/{account_id}:
    post: { operationId: accounts.update, responses: { "200": { description: ok } } }
  /accounts/close:
    post: { operationId: accounts.close, x-sdkbox-policy: deny, responses: { "200": { description: ok } } }
"#;
        let api = Arc::new(crate::spec::parse("t", spec).unwrap().api);
        let file: PolicyFile = toml::from_str("writes = \"allow\"").unwrap();
        let base = Url::parse("http://127.0.0.1:9/v1").unwrap();
        let rules = Rules::build(Some(api), base, &file, PolicyOverrides::default()).unwrap();
        assert_eq!(
            rules.classify("POST", &url("/accounts/close")).rule,
            Rule::Deny
        );
        for path in [
            "/accounts/%63lose",
            "/accounts/CLOSE",
            "/accounts/close;x=1",
            "/accounts/x/..%2Fclose",
            "/accounts/x%2F..%2Fclose",
            "/%61ccounts/close",
            "/V1/accounts/close",
            "/accounts\\close",
            "/accounts/close.json",
            "/accounts/clo%C5%BFe",
            "/accounts/%2563lose",
        ] {
            let found = rules.classify("POST", &url(path));
            assert_eq!(found.rule, Rule::Deny, "{path}: {found:?}");
        }
        // Another base path is no operation of the spec.
        let other = Url::parse("http://127.0.0.1:9/v1x/accounts/acct_1").unwrap();
        assert_eq!(rules.classify("POST", &other).operation, None);
        // An ordinary id is the template's operation, in every reading.
        for path in ["/accounts/acct_1", "/accounts/Ann%20Lee"] {
            let found = rules.classify("POST", &url(path));
            assert_eq!(
                (found.operation.as_deref(), found.rule),
                (Some("accounts.update"), Rule::Allow),
                "{path}"
            );
        }
    }
}
