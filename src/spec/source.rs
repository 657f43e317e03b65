//! Reading a spec from a file or an `https://` URL, as JSON or YAML, and checking that it is
//! an OpenAPI 3.x document.

use serde_json::Value;

use super::SpecError;

/// Reads and parses the spec at `source` (a path or an http(s) URL).
pub async fn read(source: &str) -> Result<(Value, String), SpecError> {
    let text = if source.starts_with("https://") || source.starts_with("http://") {
        fetch(source).await?
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

async fn fetch(url: &str) -> Result<String, SpecError> {
    let failed = |reason: String| SpecError::Read {
        source_name: url.to_owned(),
        reason,
    };
    let response = reqwest::get(url).await.map_err(|e| failed(e.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    response.text().await.map_err(|e| failed(e.to_string()))
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
