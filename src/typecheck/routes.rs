//! Raw requests checked against the spec's routes: `api.request("POST", "/v1/refund", ...)`
//! with a literal method and a literal path (a template's substitution stands for one
//! segment or more, slashes included: an empty one would leave an empty segment no route
//! has; one made for a segment or naming an id, `${zone_id}`, for exactly one) reaches no
//! operation whatever the code computes, so it is as certain a mistake as a
//! misspelled SDK method. The compiler cannot see it (`request` takes any string), so the
//! check finds such calls in the code and matches them itself. `fetch` is not judged: its
//! paths are relative to the provider's origin, which the check does not know.

use crate::spec::Operation;

/// The longest raw path, in bytes, judged against the routes.
const MAX_JUDGED_PATH: usize = 2_048;

/// One part of a literal path: written text, or a template's substitution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text as written.
    Text(String),
    /// `${...}`: any text, slashes included.
    Any,
    /// `${zone_id}`, `${encodeURIComponent(name)}`: any text without a slash.
    One,
}

/// One segment of a written path: its text, or what a substitution in it may stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(String),
    /// Exactly one segment of any text.
    One,
    /// One segment or more.
    Many,
}

/// An `api.request` call with a literal method and path, and where its path is (0-based line
/// and UTF-16 character in the checked text).
#[derive(Debug, Clone, Default)]
pub struct RawRequest {
    /// The method, upper case.
    pub method: String,
    /// The path, relative to the API's base URL, its query cut off.
    pub path: Vec<Part>,
    /// Where the path argument starts.
    pub line: u32,
    /// Where the path argument starts.
    pub character: u32,
    /// The fields of a `body: { ... }` written out in its options: each key, its value when
    /// it is a literal, and where the key is (line and UTF-16 character).
    pub body: Vec<(String, Option<serde_json::Value>, u32, u32)>,
}

/// Why the operation `op` refuses the fields of a raw request's body written out, each with
/// where it is: a field its closed body schema has not, or a literal of the wrong type (at
/// most a few, as the other judged literals).
pub fn refused_body(request: &RawRequest, op: &Operation) -> Vec<(String, u32, u32)> {
    request
        .body
        .iter()
        .filter_map(|(key, value, line, character)| {
            let refused = crate::sdk::Sdk::body_refuses(op, key, value.as_ref())?;
            Some((
                format!(
                    "api.request(\"{}\", \"{}\"): {refused} (the body of api.{}.{}; the SDK method \
                     checks all of it for you)",
                    request.method, op.path, op.group, op.name
                ),
                *line,
                *character,
            ))
        })
        .take(8)
        .collect()
}

/// Why `request` reaches no operation of `operations`, with the nearest ones, or `None` when
/// one fits (or may: a substitution can be any one or more segments).
pub fn unknown(request: &RawRequest, operations: &[Operation]) -> Option<String> {
    // Matching costs the written segments times each template's: a path longer than any a
    // provider serves is not judged, rather than make one check's work grow with it.
    let written_length: usize = request
        .path
        .iter()
        .map(|part| match part {
            Part::Text(text) => text.len(),
            Part::Any | Part::One => 1,
        })
        .sum();
    if written_length > MAX_JUDGED_PATH || !covered(&request.path, operations) {
        return None;
    }
    let same_method = |op: &&Operation| op.method.eq_ignore_ascii_case(&request.method);
    let strictly = |op: &&Operation| fits_with(&request.path, &op.path, 1, false, false);
    if operations
        .iter()
        .filter(same_method)
        .any(|op| strictly(&op))
    {
        return None;
    }
    // Reached only through a last parameter that holds slashes (`commits/{ref}` taking
    // `abc/checkruns`): fine, unless a longer route is written nearly so
    // (`commits/{ref}/check-runs`).
    let length = |op: &Operation| op.path.split('/').filter(|s| !s.is_empty()).count();
    let open = operations
        .iter()
        .filter(same_method)
        .filter(|op| fits(&request.path, &op.path, 1))
        .map(length)
        .min();
    let near: Vec<&Operation> = operations
        .iter()
        .filter(same_method)
        .filter(|op| open.is_none_or(|shortest| length(op) > shortest))
        .filter(|op| fits_with(&request.path, &op.path, 1, false, true))
        .take(3)
        .collect();
    if near.is_empty() && open.is_some() {
        return None;
    }
    let written: String = request
        .path
        .iter()
        .map(|part| match part {
            Part::Text(text) => text.as_str(),
            Part::Any | Part::One => "${...}",
        })
        .collect();
    // The same path under another method (a substitution one segment at least), else the
    // nearest paths under this one.
    let other_methods: Vec<String> = operations
        .iter()
        .filter(|op| fits(&request.path, &op.path, 1))
        .take(4)
        .map(|op| format!("{} {} (api.{}.{})", op.method, op.path, op.group, op.name))
        .collect();
    let hint = if !near.is_empty() {
        let listed: Vec<String> = near
            .iter()
            .map(|op| format!("{} {} (api.{}.{})", op.method, op.path, op.group, op.name))
            .collect();
        format!("did you mean {}?", listed.join(", or "))
    } else if !other_methods.is_empty() {
        format!("that path takes {}", other_methods.join(", "))
    } else {
        let mut near: Vec<(usize, &Operation)> = operations
            .iter()
            .filter(same_method)
            .map(|op| (distance(&written, &op.path), op))
            .collect();
        near.sort_by_key(|(d, op)| (*d, op.path.len()));
        let listed: Vec<String> = near
            .iter()
            .take(3)
            .map(|(_, op)| format!("{} {} (api.{}.{})", op.method, op.path, op.group, op.name))
            .collect();
        match listed.is_empty() {
            true => format!("the API has no {} operation", request.method),
            false => format!("did you mean {}?", listed.join(", or ")),
        }
    };
    let stop = if hint.ends_with('?') { "" } else { "." };
    Some(format!(
        "No operation of the API is {} {written}: {hint}{stop} Use the SDK method search_docs \
         shows, or its method and path",
        request.method
    ))
}

/// A `fetch` call as the API path it requests, for [`unknown`]: `Ok(None)` when it is not
/// judged (another origin, a host or a leading part the code computes, a path relative to
/// the page), an error when it resolves on the API's origin but outside its base path
/// (`fetch("/zones")` under `https://api.cloudflare.com/client/v4` asks for
/// `https://api.cloudflare.com/zones`).
pub fn fetched(request: &RawRequest, base: &url::Url) -> Result<Option<RawRequest>, String> {
    let Some(Part::Text(first)) = request.path.first() else {
        return Ok(None);
    };
    let path_start = if let Some(after) = first
        .strip_prefix("https://")
        .or_else(|| first.strip_prefix("http://"))
    {
        // The origin must be written out in full and be the API's.
        let Some(slash) = after.find('/') else {
            return Ok(None);
        };
        let origin = &first[..first.len() - after.len() + slash];
        match url::Url::parse(origin) {
            Ok(url) if url.origin() == base.origin() => first.len() - after.len() + slash,
            _ => return Ok(None),
        }
    } else if first.starts_with('/') && !first.starts_with("//") {
        0
    } else {
        return Ok(None);
    };
    let mut path = request.path.clone();
    path[0] = Part::Text(first[path_start..].to_owned());
    let base_path = base.path().trim_end_matches('/');
    let Part::Text(written) = &path[0] else {
        return Ok(None);
    };
    let under = written
        .strip_prefix(base_path)
        .filter(|rest| rest.is_empty() || rest.starts_with('/'));
    match under {
        Some(rest) => {
            path[0] = Part::Text(rest.to_owned());
            Ok(Some(RawRequest {
                method: request.method.clone(),
                path,
                line: request.line,
                character: request.character,
                body: Vec::new(),
            }))
        }
        // Shorter than the base path, and a substitution follows: it may complete it.
        None if base_path.starts_with(written.as_str()) && path.len() > 1 => Ok(None),
        None => Err(format!(
            "fetch(\"{written}...\") asks for {}{written}, outside the API's base URL {}: fetch \
             resolves a path from the origin, as a browser does. Write the path under \
             {base_path}/, or use api.request(\"{}\", path, ...), whose paths start at the base \
             URL",
            base.origin().ascii_serialization(),
            base.as_str().trim_end_matches('/'),
            request.method
        )),
    }
}

/// Why an `api.request` path that starts with the API's base path (`/client/v4/zones` under
/// `https://api.cloudflare.com/client/v4`) reaches nothing: its paths start at the base URL,
/// so that one asks for `/client/v4/client/v4/zones`. `None` for any other path, or a base
/// URL without a path.
pub fn doubled_base(request: &RawRequest, base: &url::Url) -> Option<String> {
    let base_path = base.path().trim_end_matches('/');
    let Some(Part::Text(first)) = request.path.first() else {
        return None;
    };
    let rest = first.strip_prefix(base_path)?;
    (!base_path.is_empty() && rest.starts_with('/')).then(|| {
        format!(
            "api.request(\"{}\", \"{first}...\") asks for {}{first}...: its paths start at the \
             base URL {}, so write \"{rest}...\" without {base_path}",
            request.method,
            base.as_str().trim_end_matches('/'),
            base.as_str().trim_end_matches('/'),
        )
    })
}

/// Whether the spec describes the part of the API a written path is in: its first segment
/// after a version one (`v1`) is, or is near, one an operation's path has there (`/refund`
/// by `/refunds`; `/invoiceitems` without Stripe's `/v1` too), and a version it writes is
/// one the spec has. What the spec does not cover (GitHub's `/graphql`, Stripe's `/v2/...`)
/// is not judged: the provider may serve it.
fn covered(parts: &[Part], operations: &[Operation]) -> bool {
    let version = |s: &str| {
        s.strip_prefix('v')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    let written = segments(parts);
    let mut written = written.iter().peekable();
    let written_version = match written.peek() {
        Some(Segment::Text(first)) if version(first) => written.next(),
        _ => None,
    };
    let Some(Segment::Text(resource)) = written.next() else {
        return true;
    };
    operations.iter().any(|op| {
        let mut theirs = op.path.split('/').filter(|s| !s.is_empty()).peekable();
        let their_version = theirs.next_if(|s| version(s));
        if let Some(Segment::Text(wanted)) = written_version
            && their_version != Some(wanted.as_str())
        {
            return false;
        }
        theirs.next().is_some_and(|their| {
            their == resource
                || (their.starts_with('{') && their.ends_with('}'))
                || crate::spec::singular(their) == crate::spec::singular(resource)
                || distance(their, resource) <= 2
        })
    })
}

/// Whether a path written with `parts` can reach the operation template `template`
/// (`/v1/customers/{customer}`): each written segment equal to the template's where it is
/// text alone (a parameter takes any segment, `{name}.zip` one with that text around), and a
/// segment holding a substitution at least `least` of the template's segments, any number
/// more (it may hold slashes; with `least` 0, nothing).
fn fits(parts: &[Part], template: &str, least: usize) -> bool {
    fits_with(parts, template, least, true, false)
}

/// [`fits`], with a last parameter that holds slashes taking several segments only when
/// `open`, and written text within two edits of the template's taken for it when `near`.
fn fits_with(parts: &[Part], template: &str, least: usize, open: bool, near: bool) -> bool {
    let written = segments(parts);
    let template: Vec<&str> = template.split('/').filter(|s| !s.is_empty()).collect();
    let (n, m) = (written.len(), template.len());
    // The last segment, when a parameter alone whose values hold slashes, may be several: a
    // file's path in GitHub's `contents/{path}`, a ref or a branch (`heads/main`,
    // `feature/login`), a model in Cloudflare's `ai/run/{model_name}`, a key's name.
    let open_end = open
        && template.last().is_some_and(|last| {
            last.strip_prefix('{')
                .and_then(|name| name.strip_suffix('}'))
                .is_some_and(|name| {
                    name.contains("path")
                        || matches!(
                            name,
                            "ref" | "basehead" | "branch" | "key_name" | "model_name" | "filename"
                        )
                })
        });
    // reach[i][j]: the first i written segments can reach the first j of the template.
    let mut reach = vec![vec![false; m + 1]; n + 1];
    reach[0][0] = true;
    for i in 0..n {
        if open_end && reach[i][m] && i > 0 {
            reach[i + 1][m] = true;
        }
        for j in 0..=m {
            match &written[i] {
                // At least `least` template segments, from any reached point before.
                Segment::Many => {
                    reach[i + 1][j] |= j >= least && (0..=j - least).any(|k| reach[i][k]);
                }
                // An id is a parameter's value, never a word of the route
                // (`pulls/${pull_number}/merge` is not `pulls/comments/{comment_id}`).
                Segment::One => {
                    if reach[i][j] && j < m && template[j].contains('{') {
                        reach[i + 1][j + 1] = true;
                    }
                }
                Segment::Text(got) => {
                    let close =
                        |want: &str| near && !want.contains('{') && distance(want, got) <= 2;
                    if reach[i][j]
                        && j < m
                        && (crate::sdk::Sdk::segment_fits(template[j], got) || close(template[j]))
                    {
                        reach[i + 1][j + 1] = true;
                    }
                }
            }
        }
    }
    // An open last parameter may be empty too: `contents/` is the root folder.
    reach[n][m] || (open_end && m > 0 && reach[n][m - 1])
}

/// The operation a raw request surely calls, to type what it returns: the one whose path the
/// written one fits segment for segment, each substitution standing for one parameter
/// segment, and the fewest parameters among them (`/invoices/upcoming` is that operation,
/// not `/invoices/{invoice}`); `None` when none fits, or several equally.
pub fn operation<'a>(
    method: &str,
    parts: &[Part],
    operations: &'a [Operation],
) -> Option<&'a Operation> {
    let written = segments(parts);
    let fitting = operations.iter().filter(|op| {
        let template: Vec<&str> = op.path.split('/').filter(|s| !s.is_empty()).collect();
        op.method.eq_ignore_ascii_case(method)
            && template.len() == written.len()
            && written.iter().zip(&template).all(|(got, want)| match got {
                Segment::One | Segment::Many => want.starts_with('{') && want.ends_with('}'),
                Segment::Text(got) => crate::sdk::Sdk::segment_fits(want, got),
            })
    });
    let parameters = |op: &Operation| op.path.matches('{').count();
    let mut best: Option<(&Operation, bool)> = None;
    for op in fitting {
        best = match best {
            Some((known, tied)) if parameters(known) < parameters(op) => Some((known, tied)),
            Some((known, _)) if parameters(known) == parameters(op) => Some((known, true)),
            _ => Some((op, false)),
        };
    }
    best.and_then(|(op, tied)| (!tied).then_some(op))
}

/// A written path's segments: their text, or what a substitution in one may stand for (a
/// segment holding one that may hold slashes is one or more); empty segments (leading,
/// trailing or doubled slashes) left out, as no template has them.
fn segments(parts: &[Part]) -> Vec<Segment> {
    let mut written: Vec<Segment> = vec![Segment::Text(String::new())];
    for part in parts {
        match part {
            Part::Any => {
                if let Some(last) = written.last_mut() {
                    *last = Segment::Many;
                }
            }
            Part::One => {
                if let Some(last @ Segment::Text(_)) = written.last_mut() {
                    *last = Segment::One;
                }
            }
            Part::Text(text) => {
                let mut pieces = text.split('/');
                if let (Some(first), Some(Segment::Text(last))) =
                    (pieces.next(), written.last_mut())
                {
                    last.push_str(first);
                }
                written.extend(pieces.map(|piece| Segment::Text(piece.to_owned())));
            }
        }
    }
    written
        .into_iter()
        .filter(|segment| *segment != Segment::Text(String::new()))
        .collect()
}

/// Edit distance between two short texts, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            previous = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Part {
        Part::Text(t.into())
    }

    #[test]
    fn only_paths_in_the_part_of_the_api_the_spec_covers_are_judged() {
        let ops = [
            crate::testing::operation("a", "GET", "/v1/customers", "customers", "list"),
            crate::testing::operation("b", "POST", "/v1/refunds", "refunds", "create"),
        ];
        let request = |method: &str, path: &str| RawRequest {
            method: method.into(),
            path: vec![text(path)],
            ..RawRequest::default()
        };
        assert!(unknown(&request("POST", "/v1/refund"), &ops).is_some());
        assert!(unknown(&request("POST", "/v2/core/event_destinations"), &ops).is_none());
        assert!(unknown(&request("POST", "/graphql"), &ops).is_none());
        assert!(unknown(&request("GET", "/v1/customers"), &ops).is_none());
        // A path longer than any route is not judged (its matching would grow with it).
        let long = format!("/v1/refund{}", "/x".repeat(2_000));
        assert!(unknown(&request("POST", &long), &ops).is_none());
        // Stripe's `/v1` forgotten is in the part the spec covers.
        assert!(unknown(&request("POST", "/refunds"), &ops).is_some());
        // A typo after a last parameter that holds slashes is no part of it.
        let github = [
            crate::testing::operation(
                "c",
                "GET",
                "/repos/{owner}/{repo}/commits/{ref}",
                "repos",
                "getCommit",
            ),
            crate::testing::operation(
                "r",
                "GET",
                "/repos/{owner}/{repo}/commits/{ref}/check-runs",
                "checks",
                "listForRef",
            ),
            crate::testing::operation(
                "f",
                "GET",
                "/repos/{owner}/{repo}/contents/{path}",
                "repos",
                "getContent",
            ),
            crate::testing::operation(
                "m",
                "GET",
                "/repos/{owner}/{repo}/comments",
                "repos",
                "listComments",
            ),
        ];
        let typo = unknown(&request("GET", "/repos/o/r/commits/abc/checkruns"), &github).unwrap();
        assert!(
            typo.contains("did you mean GET /repos/{owner}/{repo}/commits/{ref}/check-runs"),
            "{typo}"
        );
        assert!(unknown(&request("GET", "/repos/o/r/commits/feature/x"), &github).is_none());
        assert!(unknown(&request("GET", "/repos/o/r/contents/"), &github).is_none());
        assert!(unknown(&request("GET", "/repos/o/r/contents/docs/a.md"), &github).is_none());
    }

    #[test]
    fn a_fetch_is_judged_as_the_api_path_it_resolves_to_on_the_apis_origin_only() {
        let base = url::Url::parse("https://api.cloudflare.com/client/v4").unwrap();
        let request = |path: Vec<Part>| RawRequest {
            method: "GET".into(),
            path,
            ..RawRequest::default()
        };
        let path_of = |parts: Vec<Part>| fetched(&request(parts), &base).map(|r| r.map(|r| r.path));
        assert_eq!(
            path_of(vec![text("/client/v4/zones/"), Part::One]),
            Ok(Some(vec![text("/zones/"), Part::One]))
        );
        assert_eq!(
            path_of(vec![text(
                "https://api.cloudflare.com/client/v4/zones?page=2"
            )]),
            Ok(Some(vec![text("/zones?page=2")]))
        );
        // Another origin, a host the code computes, a path relative to the page: not judged.
        for parts in [
            vec![text("https://example.com/client/v4/zones")],
            vec![text("https://"), Part::Any, text("/zones")],
            vec![Part::Any, text("/zones")],
            vec![text("zones")],
            vec![text("/client/"), Part::Any],
        ] {
            assert_eq!(path_of(parts.clone()), Ok(None), "{parts:?}");
        }
        let outside = path_of(vec![text("/zones")]).unwrap_err();
        assert!(
            outside.contains("asks for https://api.cloudflare.com/zones, outside the API's base URL https://api.cloudflare.com/client/v4"),
            "{outside}"
        );
    }

    #[test]
    fn a_path_fits_a_template_where_written_parameters_and_substitutions_allow() {
        assert!(fits(&[text("/v1/customers")], "/v1/customers", 0));
        assert!(fits(&[text("/v1/customers/")], "/v1/customers", 0));
        assert!(fits(
            &[text("/v1/customers/cus_1")],
            "/v1/customers/{customer}",
            0
        ));
        assert!(!fits(
            &[text("/v1/customers/cus_1/x")],
            "/v1/customers/{customer}",
            0
        ));
        assert!(!fits(&[text("/v1/refund")], "/v1/refunds", 0));
        assert!(fits(
            &[text("/v1/customers/"), Part::Any, text("/sources")],
            "/v1/customers/{customer}/sources",
            0
        ));
        // A substitution may hold slashes (`owner/repo`).
        assert!(fits(
            &[text("/repos/"), Part::Any, text("/pulls")],
            "/repos/{owner}/{repo}/pulls",
            0
        ));
        assert!(fits(
            &[text("/zones/"), Part::Any],
            "/zones/{zone_id}/dns_records",
            0
        ));
        assert!(!fits(
            &[text("/repos/"), Part::Any, text("/pull")],
            "/repos/{owner}/{repo}/pulls",
            0
        ));
        assert!(fits(
            &[text("/files/"), Part::Any, text(".zip")],
            "/files/{name}.zip",
            0
        ));
        assert!(fits(&[Part::Any], "/anything/{at}/all", 0));
        // At least one segment for a substitution: `/orders/${id}/cancell` is not `GET
        // /orders/{id}` with an empty id.
        let cancell = [text("/orders/"), Part::Any, text("/cancell")];
        assert!(fits(&cancell, "/orders/{order_id}", 0));
        assert!(!fits(&cancell, "/orders/{order_id}", 1));
        // A substitution naming an id is one segment: `/zones/${zone_id}/dns_record` is not
        // `/zones/{zone_id}/dns_records/{dns_record_id}` with the id spanning two.
        let singular = [text("/zones/"), Part::Any, text("/dns_record")];
        let template = "/zones/{zone_id}/dns_records/{dns_record_id}";
        assert!(fits(&singular, template, 1));
        let singular = [text("/zones/"), Part::One, text("/dns_record")];
        assert!(!fits(&singular, template, 1));
        let record = [text("/zones/"), Part::One, text("/dns_records/"), Part::One];
        assert!(fits(&record, template, 1));
        let merge = [text("/repos/o/r/pulls/"), Part::One, text("/merge")];
        assert!(!fits(
            &merge,
            "/repos/{owner}/{repo}/pulls/comments/{comment_id}",
            1
        ));
        assert!(fits(
            &[text("/files/"), Part::One, text(".zip")],
            "/files/{name}.zip",
            1
        ));
        // A last parameter whose values hold slashes takes several segments; another does
        // not.
        let file = [text("/repos/o/r/contents/docs/README.md")];
        assert!(fits(&file, "/repos/{owner}/{repo}/contents/{path}", 1));
        let reference = [text("/repos/o/r/git/ref/heads/main")];
        assert!(fits(&reference, "/repos/{owner}/{repo}/git/ref/{ref}", 1));
        let root = [text("/repos/o/r/contents/")];
        assert!(fits(&root, "/repos/{owner}/{repo}/contents/{path}", 1));
        let more = [text("/v1/customers/cus_1/sourcez")];
        assert!(!fits(&more, "/v1/customers/{customer}", 1));
    }
}
