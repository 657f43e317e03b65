//! Reading an HTTP response's body whole within a size bound: what sdkbox fetches for itself
//! (a spec, the issuer's metadata and keys, the compiler, the search model), refused as soon
//! as it would pass the bound; and saying why such a fetch failed.

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum CappedError {
    /// It is larger than the bound.
    #[error("larger than {0} bytes")]
    TooLarge(usize),
    /// The connection failed while it was read.
    #[error("{0}")]
    Failed(String),
}

/// The whole body of `response`, at most `limit` bytes.
pub async fn capped_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, CappedError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(CappedError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| CappedError::Failed(e.to_string()))?
    {
        if body.len() + chunk.len() > limit {
            return Err(CappedError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Why a request sdkbox made for itself failed, with every cause (reqwest's own message
/// is only "error sending request"); a certificate sdkbox does not trust adds what to do
/// behind a proxy that inspects TLS.
pub fn fetch_error(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    if text.contains("certificate") || text.contains("UnknownIssuer") {
        text.push_str(
            " (behind a proxy that inspects TLS, set SSL_CERT_FILE to a PEM bundle holding \
             its CA and the usual roots: sdkbox's own downloads and its requests to the \
             provider then trust it)",
        );
    }
    text
}
