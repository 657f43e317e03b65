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
        std::fs::read_to_string(source).map_err(|e| SpecError::Read {
            source_name: source.to_owned(),
            reason: e.to_string(),
        })?
    };
    let document = parse(source, &text)?;
    check_version(source, &document)?;
    Ok((document, text))
}

/// Parses JSON, or YAML when the text does not start like JSON.
pub fn parse(source: &str, text: &str) -> Result<Value, SpecError> {
    let parse_error = |reason: String| SpecError::Parse {
        source_name: source.to_owned(),
        reason,
    };
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| parse_error(format!("invalid JSON: {e}")))
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| parse_error(format!("invalid YAML: {e}")))
    }
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
