//! Reading a spec from a file or an `https://` URL, as JSON or YAML, and checking that it is
//! an OpenAPI 3.x document.

use serde_json::Value;

use super::SpecError;

/// Reads and parses the spec at `source` (a path or an http(s) URL; a URL's spec is cached
/// in `cache`, see [`super::cache`]).
pub async fn read(
    source: &str,
    cache: Option<&std::path::Path>,
) -> Result<(Value, String), SpecError> {
    let text = if source.starts_with("https://") || source.starts_with("http://") {
        let usable = |text: &str| {
            let document = parse(source, text).map_err(|e| e.to_string())?;
            check_version(source, &document).map_err(|e| e.to_string())
        };
        super::cache::fetch(source, cache, usable)
            .await
            .map_err(|reason| SpecError::Read {
                source_name: source.to_owned(),
                reason,
            })?
    } else {
        let read_error = |e: std::io::Error| SpecError::Read {
            source_name: source.to_owned(),
            reason: e.to_string(),
        };
        let size = std::fs::metadata(source).map_err(read_error)?.len();
        if size > super::MAX_SPEC_BYTES as u64 {
            return Err(too_large(
                source,
                format!("{size} bytes, over {}", super::MAX_SPEC_BYTES),
            ));
        }
        std::fs::read_to_string(source).map_err(read_error)?
    };
    let document = parse(source, &text)?;
    check_version(source, &document)?;
    Ok((document, text))
}

/// Levels of flow collections (`[`, `{`) a YAML spec may nest: the YAML scanner keeps state
/// per level and rechecks it at each token, so deep nesting costs time quadratic in the
/// text; real specs nest a few levels.
const MAX_YAML_FLOW_DEPTH: usize = 64;

fn too_large(source: &str, what: String) -> SpecError {
    SpecError::TooLarge {
        source_name: source.to_owned(),
        what,
    }
}

/// Parses JSON, or YAML when the text does not start like JSON; refuses text over
/// [`super::MAX_SPEC_BYTES`] and YAML nested deeper than [`MAX_YAML_FLOW_DEPTH`] flow levels.
pub fn parse(source: &str, text: &str) -> Result<Value, SpecError> {
    let parse_error = |reason: String| SpecError::Parse {
        source_name: source.to_owned(),
        reason,
    };
    if text.len() > super::MAX_SPEC_BYTES {
        let what = format!("{} bytes, over {}", text.len(), super::MAX_SPEC_BYTES);
        return Err(too_large(source, what));
    }
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| parse_error(format!("invalid JSON: {e}")));
    }
    if let Some((depth, line)) = deep_flow(text) {
        let what = format!(
            "YAML flow collections nested {depth} levels deep at line {line}, over \
             {MAX_YAML_FLOW_DEPTH}; write it as JSON or in block style"
        );
        return Err(too_large(source, what));
    }
    serde_yaml_ng::from_str(text).map_err(|e| parse_error(format!("invalid YAML: {e}")))
}

/// Where YAML's flow collections first nest deeper than [`MAX_YAML_FLOW_DEPTH`] (outside
/// quoted scalars and comments), if they do: a linear pass over the text.
fn deep_flow(text: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut line = 1;
    let mut previous = ' ';
    let mut comment = false;
    for c in text.chars() {
        if c == '\n' {
            line += 1;
            comment = false;
        }
        match (quote, c) {
            _ if comment => {}
            (Some('"'), '\\') if previous == '\\' => {
                previous = ' ';
                continue;
            }
            (Some(q), c) if c == q && !(q == '"' && previous == '\\') => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') if previous.is_whitespace() => comment = true,
            (None, '[' | '{') => {
                depth += 1;
                if depth > MAX_YAML_FLOW_DEPTH {
                    return Some((depth, line));
                }
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        previous = c;
    }
    None
}

pub fn check_version(source: &str, document: &Value) -> Result<(), SpecError> {
    if let Some(version) = document.get("swagger").and_then(Value::as_str) {
        return Err(SpecError::Swagger2 {
            source_name: source.to_owned(),
            version: version.to_owned(),
        });
    }
    match document.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.") => Ok(()),
        Some(v) => Err(SpecError::Version {
            source_name: source.to_owned(),
            version: v.to_owned(),
        }),
        None => Err(SpecError::NotOpenApi {
            source_name: source.to_owned(),
        }),
    }
}
