//! Whether a multipart body splits into the same parts, with the same heads, for every parser
//! a provider could run. Parsers disagree at the edges: busboy and python-multipart read only
//! CRLF line breaks, Werkzeug and Rack's head patterns read bare line feeds too; RFC 2046
//! lets a delimiter line carry trailing blanks, which some skip and some read as content; a
//! boundary may be quoted, escaped or given twice. Where they could disagree, a field one of
//! them reads in a part's head could be content to sdkbox's reading, so such a body is
//! refused (see `overrides.rs`), and the model is told to build it as the SDK does: CRLF
//! line breaks, one plain boundary.

/// Characters of a boundary every parser reads alike: RFC 2046's, but the comma and the space
/// (Rack cuts a boundary at a comma, even quoted).
const BOUNDARY_CHARS: &str = "'()+_-./:=?";

/// The longest boundary RFC 2046 allows.
const MAX_BOUNDARY: usize = 70;

/// Why parsers could split `body`, declared with `content_type` (a `multipart/*` type), into
/// different parts or read different heads; `None` when every parser reads it alike (or it
/// is not declared as multipart).
pub fn ambiguity(content_type: &str, body: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let kind = params.next().unwrap_or_default().trim();
    if !kind.to_ascii_lowercase().starts_with("multipart/") {
        return None;
    }
    let boundaries: Vec<&str> = params
        .filter_map(|param| param.split_once('='))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, value)| value.trim())
        .collect();
    let [boundary] = boundaries[..] else {
        return Some(format!(
            "{} boundary parameters in its content type",
            boundaries.len()
        ));
    };
    let boundary = match boundary.strip_prefix('"').and_then(|b| b.strip_suffix('"')) {
        Some(quoted) => quoted,
        None => boundary,
    };
    let plain = !boundary.is_empty()
        && boundary.len() <= MAX_BOUNDARY
        && !boundary.ends_with(' ')
        && boundary
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || BOUNDARY_CHARS.contains(c));
    if !plain {
        return Some("a boundary parsers read differently (empty, too long, escaped)".into());
    }
    let delimiter = format!("--{boundary}");
    let bytes = body.as_bytes();
    if !body.is_empty() && !body.contains(&delimiter) {
        return Some("no delimiter of its boundary".into());
    }
    for (at, _) in body.match_indices(&delimiter) {
        // Anywhere but at the start of the body or of a CRLF line, a delimiter to some
        // parsers (Rack strips blanks around a line, some read bare line feeds) and content
        // to others.
        if at > 0 && (at < 2 || &bytes[at - 2..at] != b"\r\n") {
            return Some("its boundary where a line does not start with it (after CRLF)".into());
        }
        let rest = &body[at + delimiter.len()..];
        if rest.starts_with("--") {
            continue;
        }
        if !rest.starts_with("\r\n") {
            return Some(
                "a delimiter line with more than CRLF after its boundary (or a bare line feed)"
                    .into(),
            );
        }
        if let Some(why) = head_ambiguity(&rest[2..]) {
            return Some(why.into());
        }
    }
    None
}

/// Why parsers could end a part's head (which starts `part`) at different places, or split
/// its lines differently: a line break that is not CRLF before the head's first CRLF CRLF.
fn head_ambiguity(part: &str) -> Option<&'static str> {
    let end = part
        .strip_prefix("\r\n")
        .map(|_| 0)
        .or_else(|| part.find("\r\n\r\n"))
        .unwrap_or(part.len());
    let head = part.as_bytes().get(..end).unwrap_or_default();
    head.iter()
        .enumerate()
        .any(|(i, b)| match b {
            b'\n' => i == 0 || head[i - 1] != b'\r',
            b'\r' => head.get(i + 1) != Some(&b'\n'),
            _ => false,
        })
        .then_some("a line break in a part's head that is not CRLF")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &str = "multipart/form-data; boundary=b";

    #[test]
    fn bodies_built_as_formdata_builds_them_are_unambiguous() {
        let body = "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nline\nfeeds\n\n\
                    in content\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; \
                    filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\n\nnot - b a \
                    delimiter\r\n--b--\r\n";
        assert_eq!(ambiguity(FORM, body), None);
        assert_eq!(ambiguity("multipart/form-data; boundary=\"b\"", body), None);
        assert_eq!(ambiguity("application/json", "--b\n"), None);
        // An empty head.
        assert_eq!(ambiguity(FORM, "--b\r\n\r\nx\r\n--b--"), None);
    }

    #[test]
    fn what_parsers_split_differently_is_named() {
        let more = [
            (
                FORM,
                "--b\r\n\r\nx\r\n --b\r\nContent-Disposition: x\n\n; name=a\r\n\r\n",
            ),
            (FORM, "--b\r\n\r\nx--b\r\n"),
            (FORM, "Content-Disposition: form-data; name=a\r\n\r\nx"),
            ("multipart/form-data; boundary=\"b, c\"", "--b, c\r\n\r\nx"),
        ];
        for (content_type, body) in more.into_iter().chain([
            (
                FORM,
                "--b\nContent-Disposition: form-data; name=a\n\nx\n--b--\n",
            ),
            (
                FORM,
                "--b\r\nContent-Disposition: form-data; name=a\n\nx\r\n--b--",
            ),
            (
                FORM,
                "--b\r\nContent-Type: text/plain\nContent-Disposition: form-data; name=a\r\n\r\nx",
            ),
            (
                FORM,
                "--b\r\nContent-Disposition: form-data\r; name=a\r\n\r\nx",
            ),
            (
                FORM,
                "--b \r\nContent-Disposition: form-data; name=a\r\n\r\nx",
            ),
            (FORM, "--b\r\n\n\r\n"),
            (
                FORM,
                "--b\r\n\r\nx\n--b\r\nContent-Disposition: form-data; name=a\r\n\r\n",
            ),
            (FORM, "--b\r\n\r\n\n--b and more\r\n"),
            ("multipart/form-data", "--b\r\n\r\nx"),
            (
                "multipart/form-data; boundary=b; boundary=c",
                "--b\r\n\r\nx",
            ),
            ("multipart/form-data; boundary=\"b\\\"c\"", "--b\r\n\r\nx"),
            ("multipart/form-data; boundary=", "--\r\n\r\nx"),
        ]) {
            assert!(
                ambiguity(content_type, body).is_some(),
                "{content_type} {body:?}"
            );
        }
    }
}
