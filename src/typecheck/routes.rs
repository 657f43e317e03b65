//! Raw requests checked against the spec's routes: `api.request("POST", "/v1/refund", ...)`
//! with a literal method and a literal path (a template's substitution stands for one
//! segment or more, slashes included: an empty one would leave an empty segment no route
//! has) reaches no operation whatever the code computes, so it is as certain a mistake as a
//! misspelled SDK method. The compiler cannot see it (`request` takes any string), so the
//! check finds such calls in the code and matches them itself. `fetch` is not judged: its
//! paths are relative to the provider's origin, which the check does not know.

use crate::spec::Operation;

/// One part of a literal path: written text, or a template's substitution (any text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text as written.
    Text(String),
    /// `${...}`: any text, slashes included.
    Any,
}

/// An `api.request` call with a literal method and path, and where its path is (0-based line
/// and UTF-16 character in the checked text).
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// The method, upper case.
    pub method: String,
    /// The path, relative to the API's base URL, its query cut off.
    pub path: Vec<Part>,
    /// Where the path argument starts.
    pub line: u32,
    /// Where the path argument starts.
    pub character: u32,
}

/// Why `request` reaches no operation of `operations`, with the nearest ones, or `None` when
/// one fits (or may: a substitution can be any one or more segments).
pub fn unknown(request: &RawRequest, operations: &[Operation]) -> Option<String> {
    let same_method = |op: &&Operation| op.method.eq_ignore_ascii_case(&request.method);
    if operations
        .iter()
        .filter(same_method)
        .any(|op| fits(&request.path, &op.path, 1))
    {
        return None;
    }
    let written: String = request
        .path
        .iter()
        .map(|part| match part {
            Part::Text(text) => text.as_str(),
            Part::Any => "${...}",
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
    let hint = if !other_methods.is_empty() {
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
    Some(format!(
        "No operation of the API is {} {written}: {hint}. Use the SDK method search_docs shows, \
         or its method and path",
        request.method
    ))
}

/// Whether a path written with `parts` can reach the operation template `template`
/// (`/v1/customers/{customer}`): each written segment equal to the template's where it is
/// text alone (a parameter takes any segment, `{name}.zip` one with that text around), and a
/// segment holding a substitution at least `least` of the template's segments, any number
/// more (it may hold slashes; with `least` 0, nothing).
fn fits(parts: &[Part], template: &str, least: usize) -> bool {
    let written = segments(parts);
    let template: Vec<&str> = template.split('/').filter(|s| !s.is_empty()).collect();
    let (n, m) = (written.len(), template.len());
    // reach[i][j]: the first i written segments can reach the first j of the template.
    let mut reach = vec![vec![false; m + 1]; n + 1];
    reach[0][0] = true;
    for i in 0..n {
        for j in 0..=m {
            match &written[i] {
                // At least `least` template segments, from any reached point before.
                None => {
                    reach[i + 1][j] |= j >= least && (0..=j - least).any(|k| reach[i][k]);
                }
                Some(got) => {
                    if reach[i][j] && j < m && crate::sdk::Sdk::segment_fits(template[j], got) {
                        reach[i + 1][j + 1] = true;
                    }
                }
            }
        }
    }
    reach[n][m]
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
                None => want.starts_with('{') && want.ends_with('}'),
                Some(got) => crate::sdk::Sdk::segment_fits(want, got),
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

/// A written path's segments: their text, or `None` for one holding a substitution; empty
/// segments (leading, trailing or doubled slashes) left out, as no template has them.
fn segments(parts: &[Part]) -> Vec<Option<String>> {
    let mut written: Vec<Option<String>> = vec![Some(String::new())];
    for part in parts {
        match part {
            Part::Any => {
                if let Some(last) = written.last_mut() {
                    *last = None;
                }
            }
            Part::Text(text) => {
                let mut pieces = text.split('/');
                if let (Some(first), Some(Some(last))) = (pieces.next(), written.last_mut()) {
                    last.push_str(first);
                }
                written.extend(pieces.map(|piece| Some(piece.to_owned())));
            }
        }
    }
    written
        .into_iter()
        .filter(|segment| segment.as_deref() != Some(""))
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
    }
}
